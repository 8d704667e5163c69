"""DescribeDelegationToken: the tokens of the owners asked for (all for null, none for an empty
list) that the requester may see (broker/security/delegation_tokens.py's describable)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import DescribeDelegationTokenResponse

from ..security import KafkaPrincipal
from ..security.delegation_tokens import describable, refusal

NAME = "DescribeDelegationToken"

Token = DescribeDelegationTokenResponse.DescribedDelegationToken
Renewer = DescribeDelegationTokenResponse.DescribedDelegationTokenRenewer


def handle(broker, ctx, request, respond) -> None:
    error = refusal(ctx)
    tokens = broker.delegation_tokens
    if error == ErrorCode.NONE and not tokens.enabled:
        error = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    if error != ErrorCode.NONE or request.owners == []:
        respond(DescribeDelegationTokenResponse(error_code=error, tokens=[]))
        return
    owners = None if request.owners is None else [
        KafkaPrincipal(o.principal_type, o.principal_name) for o in request.owners]
    found = tokens.describe(describable(broker, ctx, owners))
    respond(DescribeDelegationTokenResponse(error_code=ErrorCode.NONE, tokens=[
        Token(principal_type=t.owner.principal_type, principal_name=t.owner.name,
              token_requester_principal_type=t.requester.principal_type,
              token_requester_principal_name=t.requester.name,
              issue_timestamp=t.issue_timestamp, expiry_timestamp=t.expiry_timestamp,
              max_timestamp=t.max_timestamp, token_id=t.token_id, hmac=t.hmac,
              renewers=[Renewer(principal_type=r.principal_type, principal_name=r.name)
                        for r in t.renewers])
        for t in found]))
