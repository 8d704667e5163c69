"""Helpers of the SASL tests: a small SCRAM client, unsecured OAUTHBEARER tokens, raw
SaslHandshake/SaslAuthenticate exchanges over tests/support.py's RawClient, and the listener
settings both kbroker and the real Kafka of tests/conformance run with."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import struct

from protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest

ADMIN_PASSWORD = "admin-secret"
ALICE_PASSWORD = "alice-secret"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              f'username="admin" password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}" '
              f'user_alice="{ALICE_PASSWORD}";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
OAUTH_JAAS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
              'unsecuredLoginStringClaim_sub="admin";')
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"
SCRAM_BOOTSTRAP = (f"SCRAM-SHA-256=[name=alice,password={ALICE_PASSWORD}] "
                   f"SCRAM-SHA-512=[name=alice,password={ALICE_PASSWORD}]")


def listener_settings(listener: str = "sasl_plaintext", mechanisms: str = MECHANISMS,
                      oauth_jaas: str = OAUTH_JAAS) -> dict:
    """The SASL settings of one listener, by Kafka's names (the same on both brokers)."""
    prefix = f"listener.name.{listener}"
    return {
        f"{prefix}.sasl.enabled.mechanisms": mechanisms,
        f"{prefix}.plain.sasl.jaas.config": PLAIN_JAAS,
        f"{prefix}.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        f"{prefix}.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        f"{prefix}.oauthbearer.sasl.jaas.config": oauth_jaas,
    }


def kbroker_overrides(port: int, **extra) -> dict:
    """kbroker with one SASL_PLAINTEXT listener on ``port`` and alice's SCRAM credentials."""
    return {"listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
            "sasl.scram.bootstrap.credentials": SCRAM_BOOTSTRAP,
            **listener_settings(), **extra}


class ScramClient:
    """The client side of SCRAM (RFC 5802), enough to drive an exchange byte by byte."""

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None):
        self.hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
        self.user = user
        self.password = password
        self.nonce = nonce or base64.b64encode(secrets.token_bytes(18)).decode()
        self.bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self.nonce}"
        self.server_signature = b""

    def first(self, extensions: str = "") -> bytes:
        return f"n,,{self.bare}{extensions}".encode()

    def final(self, server_first: bytes, password: str | None = None) -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        salt = base64.b64decode(fields["s"])
        salted = hashlib.pbkdf2_hmac(self.hash, (password or self.password).encode(), salt,
                                     int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored_key = hashlib.new(self.hash, client_key).digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth = f"{self.bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, auth, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self.server_signature = hmac.new(server_key, auth, self.hash).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def salted_password(self, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash, self.password.encode(), salt, iterations)


def unsecured_jwt(claims: dict, header: dict | None = None) -> str:
    def part(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return f"{part(header or {'alg': 'none'})}.{part(claims)}."


def oauth_initial_response(token: str, authzid: str = "", **extensions) -> bytes:
    kv = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{kv}\x01".encode()


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


def handshake(client, mechanism: str, version: int = 1):
    return client.call(SaslHandshakeRequest(mechanism=mechanism), version)


def authenticate(client, token: bytes, version: int = 2):
    return client.call(SaslAuthenticateRequest(auth_bytes=token), version)


def send_raw_token(client, token: bytes) -> None:
    client.sock.sendall(struct.pack(">i", len(token)) + token)


def read_raw_token(client) -> bytes:
    size = struct.unpack(">i", client._read(4))[0]
    return client._read(size)


def closed_by_peer(client, timeout: float = 10.0) -> bool:
    """Whether the broker closed the connection (EOF or reset) within ``timeout``, with nothing
    more sent before."""
    client.sock.settimeout(timeout)
    try:
        return client.sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
