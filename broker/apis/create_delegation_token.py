"""CreateDelegationToken: the broker's checks (a connection that may ask, CREATE_TOKENS for another
owner, renewers that are users), then the token made by broker/security/delegation_tokens.py
(DELEGATION_TOKEN_AUTH_DISABLED without delegation.token.secret.key). The answer names the
token's owner (the requester, or the owner the request names from v3) and, from v3, the
requester."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import CreateDelegationTokenResponse

from ..security import KafkaPrincipal
from ..security.delegation_tokens import create_refusal, timestamp

NAME = "CreateDelegationToken"


def handle(broker, ctx, request, respond) -> None:
    requester = ctx.conn.principal
    owner = requester
    if ctx.api_version >= 3 and request.owner_principal_name:
        owner = KafkaPrincipal(request.owner_principal_type or "", request.owner_principal_name)
    renewers = [KafkaPrincipal(r.principal_type, r.principal_name) for r in request.renewers]
    error = create_refusal(broker, ctx, owner, renewers)
    token = None
    if error == ErrorCode.NONE:
        error, token = broker.delegation_tokens.create(owner, requester, renewers,
                                                       request.max_lifetime_ms)
    if token is None:
        at = timestamp(error)
        issue = expiry = max_ts = at
        token_id, hmac = "", b""
    else:
        issue, expiry, max_ts = token.issue_timestamp, token.expiry_timestamp, token.max_timestamp
        token_id, hmac = token.token_id, token.hmac
    respond(CreateDelegationTokenResponse(
        error_code=error,
        principal_type=owner.principal_type, principal_name=owner.name,
        token_requester_principal_type=requester.principal_type,
        token_requester_principal_name=requester.name,
        issue_timestamp_ms=issue, expiry_timestamp_ms=expiry, max_timestamp_ms=max_ts,
        token_id=token_id, hmac=hmac))
