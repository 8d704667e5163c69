"""Logins on the HTTP port when the broker has an authorizer: HTTP Basic credentials checked
against the broker's own SASL users (as Redpanda's admin API does), so that the console and the
HTTP API answer a principal only what its ACLs let it see and do.

Users are those a Kafka client could authenticate as: the PLAIN users of every SASL listener's
JAAS configuration (``user_<name>="<password>"``) and the SCRAM users (either mechanism). A
login is ``User:<name>``; a failed one is answered 401 after
``connection.failed.authentication.delay.ms``, as Kafka delays a failed SASL authentication.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

from ..security import KafkaPrincipal
from ..security.scram import MECHANISMS as SCRAM_MECHANISMS, credential_from_salted, \
    salted_password


def basic_credentials(header: str) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic`` header, or None."""
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        text = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = text.partition(":")
    if not sep or not user:
        return None
    return user, password


class BasicLogin:
    """Checks Basic credentials against the PLAIN and SCRAM users. A SCRAM check derives the
    salted password (thousands of hash rounds): one that succeeded is remembered, by the
    credential it matched and a digest of the password, so a console polling every second
    pays it once."""

    def __init__(self, sasl_servers, scram_store) -> None:
        self.plain = [listener.plain_users for listener in sasl_servers.listeners.values()
                      if listener.plain_users]
        self.scram = scram_store
        self._verified: dict[tuple[str, str], tuple[object, bytes]] = {}

    def principal(self, header: str | None) -> KafkaPrincipal | None:
        """The principal the Authorization header logs in as, or None."""
        found = basic_credentials(header or "")
        if found is None:
            return None
        user, password = found
        if self._plain(user, password) or self._scram(user, password):
            return KafkaPrincipal("User", user)
        return None

    def _plain(self, user: str, password: str) -> bool:
        ok = False
        for users in self.plain:
            expected = users.get(user)
            if expected is not None and hmac.compare_digest(expected.encode(),
                                                            password.encode()):
                ok = True
        return ok

    def _scram(self, user: str, password: str) -> bool:
        digest = hashlib.sha256(password.encode()).digest()
        for name, mech in SCRAM_MECHANISMS.items():
            credential = self.scram.get(name, user)
            if credential is None:
                continue
            seen = self._verified.get((name, user))
            if seen is not None and seen[0] is credential and \
                    hmac.compare_digest(seen[1], digest):
                return True
            derived = credential_from_salted(
                mech, salted_password(mech, password, credential.salt, credential.iterations),
                credential.salt, credential.iterations)
            if hmac.compare_digest(derived.stored_key, credential.stored_key):
                self._verified[(name, user)] = (credential, digest)
                return True
        return False
