"""CreateDelegationToken: refused, as by a Kafka broker without delegation.token.secret.key
(broker/security/delegation_tokens.py). The answer names the token's owner (the requester, or
the owner the request names from v3) and, from v3, the requester."""
from __future__ import annotations

from protocol.messages import CreateDelegationTokenResponse

from ..security import KafkaPrincipal
from ..security.delegation_tokens import create_refusal, timestamp

NAME = "CreateDelegationToken"


def handle(broker, ctx, request, respond) -> None:
    requester = ctx.conn.principal
    owner = requester
    if ctx.api_version >= 3 and request.owner_principal_name:
        owner = KafkaPrincipal(request.owner_principal_type or "", request.owner_principal_name)
    error = create_refusal(broker, ctx, owner)
    at = timestamp(error)
    respond(CreateDelegationTokenResponse(
        error_code=error,
        principal_type=owner.principal_type, principal_name=owner.name,
        token_requester_principal_type=requester.principal_type,
        token_requester_principal_name=requester.name,
        issue_timestamp_ms=at, expiry_timestamp_ms=at, max_timestamp_ms=at, token_id="",
        hmac=b""))
