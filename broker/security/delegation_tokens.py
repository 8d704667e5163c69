"""Delegation tokens (KIP-48), as a Kafka broker without ``delegation.token.secret.key`` serves
them: token authentication is off, so no token can be created, renewed, expired or described.

Kafka answers every token API in two steps, kept here in its order: a connection that could not
carry a token (PLAINTEXT, SSL without a client certificate, or a login made with a token) gets
DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; a token for another owner needs CREATE_TOKENS on that
user (DELEGATION_TOKEN_AUTHORIZATION_FAILED); anything else DELEGATION_TOKEN_AUTH_DISABLED.
"""
from __future__ import annotations

from protocol.errors import ErrorCode

from . import ANONYMOUS, KafkaPrincipal
from .authorizer import AclOperation, ResourceType

#: the timestamps of an answer refused by the broker itself (Kafka's
#: DelegationTokenManager.ErrorTimestamp); Kafka's controller, which answers
#: DELEGATION_TOKEN_AUTH_DISABLED, leaves them 0
ERROR_TIMESTAMP = -1


def timestamp(error: ErrorCode) -> int:
    """The timestamps that go with a refusal, as the part of Kafka that refuses sets them."""
    return 0 if error == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED else ERROR_TIMESTAMP


def requests_allowed(ctx) -> bool:
    """Kafka's allowTokenRequests: only a connection authenticated other than by a token may
    ask for one."""
    conn = ctx.conn
    protocol = conn.security_protocol
    if protocol == "PLAINTEXT":
        return False
    if protocol == "SSL" and conn.principal == ANONYMOUS:
        return False
    return True


def refusal(ctx) -> ErrorCode:
    """Why a renew, expire or describe is refused."""
    if not requests_allowed(ctx):
        return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


def create_refusal(broker, ctx, owner: KafkaPrincipal) -> ErrorCode:
    """Why a CreateDelegationToken for ``owner`` is refused."""
    if not requests_allowed(ctx):
        return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    auth = broker.authorizer
    if owner != ctx.conn.principal and auth is not None and not auth.predicate(
            ctx, AclOperation.CREATE_TOKENS, ResourceType.USER)(str(owner)):
        return ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
