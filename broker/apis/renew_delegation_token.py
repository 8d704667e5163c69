"""RenewDelegationToken: a token's owner or renewer moves its expiry on, up to its max lifetime
(broker/security/delegation_tokens.py)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import RenewDelegationTokenResponse

from ..security.delegation_tokens import refusal, timestamp

NAME = "RenewDelegationToken"


def handle(broker, ctx, request, respond) -> None:
    error = refusal(ctx)
    if error != ErrorCode.NONE:
        expiry = timestamp(error)
    else:
        error, expiry = broker.delegation_tokens.renew(ctx.conn.principal, request.hmac,
                                                       request.renew_period_ms)
    respond(RenewDelegationTokenResponse(error_code=error, expiry_timestamp_ms=expiry))
