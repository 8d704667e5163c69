"""Security: who a connection is (its principal) and how its listener protects it.

Kafka names a connection's identity a KafkaPrincipal (``User:alice``); before authentication, and
on a PLAINTEXT listener, it is ``User:ANONYMOUS``. The listener's security protocol comes from
``listener.security.protocol.map``.
"""
from __future__ import annotations

from typing import NamedTuple

#: Kafka's four security protocols (org.apache.kafka.common.security.auth.SecurityProtocol)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
#: the protocols whose listeners speak TLS (broker/security/tls.py)
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
#: the SCRAM credentials' file in the data directory (scram.py ScramCredentialStore)
SCRAM_CREDENTIALS_FILE = "scram-credentials.json"
#: Kafka's class name for the authorizer (authorizer.class.name, broker/security/authorizer.py)
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class KafkaPrincipal(NamedTuple):
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> "KafkaPrincipal":
        """'User:alice' -> KafkaPrincipal('User', 'alice'), as Kafka's SecurityUtils.parseKafkaPrincipal."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"expected a string in format principalType:principalName but got {text}")
        return cls(kind, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
