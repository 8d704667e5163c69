"""ExpireDelegationToken: refused, as by a Kafka broker without delegation.token.secret.key
(broker/security/delegation_tokens.py)."""
from __future__ import annotations

from protocol.messages import ExpireDelegationTokenResponse

from ..security.delegation_tokens import refusal, timestamp

NAME = "ExpireDelegationToken"


def handle(broker, ctx, request, respond) -> None:
    error = refusal(ctx)
    respond(ExpireDelegationTokenResponse(error_code=error,
                                          expiry_timestamp_ms=timestamp(error)))
