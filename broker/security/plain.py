"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer with its default callback handler: users and
passwords from the ``user_<name>="<password>"`` options of the listener's PlainLoginModule."""
from __future__ import annotations

import hmac

from .sasl_errors import SaslAuthenticationError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


class PlainServer:
    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, response: bytes) -> bytes:
        """message = [authzid] NUL authcid NUL passwd"""
        tokens = response.decode("utf-8", "replace").split("\0", 3)
        if len(tokens) != 3:
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(tokens), 4)}")
        authzid, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self.users.get(username)
        # compared in constant time whether or not the user exists
        ok = hmac.compare_digest((expected if expected is not None else "\0" + password).encode(),
                                 password.encode())
        if expected is None or not ok:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        self.authorization_id = username
        self.complete = True
        return b""


def users_from_jaas(options: dict[str, str]) -> dict[str, str]:
    """{user: password} from a PlainLoginModule's ``user_<name>`` options."""
    return {key[len("user_"):]: value for key, value in options.items()
            if key.startswith("user_")}
