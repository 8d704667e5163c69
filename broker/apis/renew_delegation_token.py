"""RenewDelegationToken: refused, as by a Kafka broker without delegation.token.secret.key
(broker/security/delegation_tokens.py)."""
from __future__ import annotations

from protocol.messages import RenewDelegationTokenResponse

from ..security.delegation_tokens import refusal, timestamp

NAME = "RenewDelegationToken"


def handle(broker, ctx, request, respond) -> None:
    error = refusal(ctx)
    respond(RenewDelegationTokenResponse(error_code=error,
                                         expiry_timestamp_ms=timestamp(error)))
