"""Who an HTTP request is (Caller) and the challenge a request without a login gets, when the
broker has an authorizer; login.py checks the credentials (loaded only with an authorizer)."""
from __future__ import annotations

from types import SimpleNamespace

from ..security import KafkaPrincipal

#: the realm of the WWW-Authenticate challenge
REALM = "kbroker"
CHALLENGE = f'Basic realm="{REALM}", charset="UTF-8"'


class Caller:
    """Who an HTTP request is, as the authorizer takes a request: the principal and the
    client's address (``conn`` makes it a handler's ``ctx`` for broker/security/
    authorization.py)."""

    def __init__(self, principal: KafkaPrincipal, host: str, authorization) -> None:
        self.principal = principal
        self.host = host
        self.conn = SimpleNamespace(principal=principal, client_host=host)
        self.authorization = authorization

    def may(self, op, rtype, name: str) -> bool:
        auth = self.authorization
        return auth is None or auth.allowed(self, op, rtype, name)

    def may_on_cluster(self, alter: bool) -> bool:
        """ALTER (else DESCRIBE) on the cluster: what /faults and /nodes ask."""
        auth = self.authorization
        if auth is None:
            return True
        from ..security.authorizer import AclOperation  # with an authorizer only
        return auth.cluster(self, AclOperation.ALTER if alter else AclOperation.DESCRIBE)

    def predicate(self, op, rtype):
        """``name -> allowed``, each name decided once."""
        auth = self.authorization
        if auth is None:
            return lambda _name: True
        return auth.predicate(self, op, rtype)
