"""ExpireDelegationToken: a token's owner or renewer ends it now (a negative period) or brings its
expiry closer (broker/security/delegation_tokens.py)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import ExpireDelegationTokenResponse

from ..security.delegation_tokens import refusal, timestamp

NAME = "ExpireDelegationToken"


def handle(broker, ctx, request, respond) -> None:
    error = refusal(ctx)
    if error != ErrorCode.NONE:
        expiry = timestamp(error)
    else:
        error, expiry = broker.delegation_tokens.expire(ctx.conn.principal, request.hmac,
                                                        request.expiry_time_period_ms)
    respond(ExpireDelegationTokenResponse(error_code=error, expiry_timestamp_ms=expiry))
