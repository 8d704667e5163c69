"""DescribeDelegationToken: refused, with no tokens, as by a Kafka broker without
delegation.token.secret.key (broker/security/delegation_tokens.py)."""
from __future__ import annotations

from protocol.messages import DescribeDelegationTokenResponse

from ..security.delegation_tokens import refusal

NAME = "DescribeDelegationToken"


def handle(broker, ctx, request, respond) -> None:
    respond(DescribeDelegationTokenResponse(error_code=refusal(ctx), tokens=[]))
