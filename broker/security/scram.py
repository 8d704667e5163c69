"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer speaks them.

Credentials are kept as Kafka keeps them (its UserScramCredentialRecord): salt, StoredKey,
ServerKey and iterations, never a password. They are managed with AlterUserScramCredentials and
DescribeUserScramCredentials, persisted under the data directory (``scram-credentials.json``,
written atomically), and bootstrapped at first start from ``sasl.scram.bootstrap.credentials``
in the form of ``kafka-storage format --add-scram``.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import dataclass

from ..errors import ConfigError
from ..log.files import write_json
from . import SCRAM_CREDENTIALS_FILE
from .sasl_errors import SaslAuthenticationError, SaslError


@dataclass(frozen=True)
class ScramMechanism:
    """Kafka's ScramMechanism: the wire type of AlterUserScramCredentials and the hash."""
    name: str
    type: int
    hash_name: str
    min_iterations: int = 4096
    max_iterations: int = 16384


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MECHANISMS_BY_TYPE = {m.type: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
#: Kafka's ScramControlManager.MAX_ITERATIONS for AlterUserScramCredentials
MAX_ITERATIONS = 16384
#: the extension by which a client logs in with a delegation token (broker/security/delegation_tokens.py)
TOKEN_AUTH = "tokenauth"
#: kafka-storage format --add-scram's iterations when none are given
DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # never the keys, as Kafka's ScramCredentialValue.toString
        return "ScramCredential(salt=[hidden], stored_key=[hidden], server_key=[hidden], " \
               "iterations=[hidden])"


def _hmac(mech: ScramMechanism, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, mech.hash_name).digest()


def salted_password(mech: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802 (Kafka applies no SASLprep either)."""
    return hashlib.pbkdf2_hmac(mech.hash_name, password.encode(), salt, iterations)


def credential_from_salted(mech: ScramMechanism, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    client_key = _hmac(mech, salted, b"Client Key")
    stored_key = hashlib.new(mech.hash_name, client_key).digest()
    server_key = _hmac(mech, salted, b"Server Key")
    return ScramCredential(salt, stored_key, server_key, iterations)


def make_credential(mech: ScramMechanism, password: str, iterations: int,
                    salt: bytes | None = None) -> ScramCredential:
    """A new credential with a random salt, as kafka-configs/kafka-storage make one."""
    if salt is None:
        salt = secure_random_string().encode()
    return credential_from_salted(mech, salted_password(mech, password, salt, iterations), salt,
                                  iterations)


def secure_random_string() -> str:
    """Kafka's ScramFormatter.secureRandomString: 130 random bits in base 36."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


def username_from_sasl_name(sasl_name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is a comma, ``=3D`` an equals sign, any other ``=`` is bad."""
    name = sasl_name.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise ValueError("invalid username")
    return name.replace("=3D", "=")


# Kafka's ScramMessages patterns (ASCII 0x01-0x7F, no "," in values, "=" escaped in names)
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64C = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64C}{{4}})*(?:{_B64C}{{3}}=|{_B64C}{{2}}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"


@functools.cache
def _client_messages() -> tuple[re.Pattern, re.Pattern]:
    """The client-first and client-final patterns, compiled at the first SCRAM exchange (a
    broker without SASL listeners never needs them)."""
    first = re.compile(
        rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
        rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
    final = re.compile(
        rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
        rf"p=(?P<proof>{_BASE64})")
    return first, final


def _extensions(text: str) -> dict[str, str]:
    out = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        out[key] = value
    return out


class ScramServer:
    """One SCRAM exchange on the server side (Kafka's ScramSaslServer): client-first ->
    server-first, client-final -> server-final. ``lookup(username)`` gives the credential or
    None. Failures raise SaslError (the client gets Kafka's generic message) or
    SaslAuthenticationError (its message goes to the client)."""

    def __init__(self, mech: ScramMechanism, lookup, nonce=secure_random_string,
                 token_login=None) -> None:
        self.mechanism = mech
        self.lookup = lookup
        #: ``token_id -> (credential, owner name, expiry ms) or None`` (DelegationTokens.login)
        self.token_login = token_login
        #: logged in with a delegation token: such a connection may not ask for tokens
        self.token_authenticated = False
        #: a token login's session ends with the token (Kafka's CREDENTIAL_LIFETIME_MS)
        self.lifetime_ms: int | None = None
        self.new_nonce = nonce
        self.state = "first"
        self.authorization_id: str | None = None
        self.credential: ScramCredential | None = None
        self.client_first_bare = ""
        self.server_first = ""
        self.nonce = ""

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    def evaluate(self, response: bytes) -> bytes:
        try:
            if self.state == "first":
                return self._client_first(response)
            if self.state == "final":
                return self._client_final(response)
            raise SaslError(f"Unexpected challenge in Sasl server state {self.state}")
        except (SaslError, SaslAuthenticationError):
            self.credential = None
            self.state = "failed"
            raise

    def _client_first(self, response: bytes) -> bytes:
        match = _client_messages()[0].fullmatch(response.decode("utf-8", "replace"))
        if match is None:
            raise SaslError("Invalid SCRAM client first message format")
        extensions = _extensions(match["extensions"])
        server_nonce = self.new_nonce()
        try:
            username = username_from_sasl_name(match["saslname"])
        except ValueError:
            raise SaslError("Authentication failed: Credentials could not be obtained") from None
        if extensions.get(TOKEN_AUTH, "").lower() == "true":
            found = self.token_login(username) if self.token_login is not None else None
            if found is None:
                raise SaslError(f"Token Authentication failed: Invalid tokenId : {username}")
            credential, owner, self.lifetime_ms = found
            self.token_authenticated = True
        else:
            credential = self.lookup(username)
            owner = username
        if credential is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        authzid = match["authzid"] or ""
        if authzid and authzid != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an "
                                          "authorization id that is different from username")
        if credential.iterations < self.mechanism.min_iterations:
            raise SaslError(f"Iterations {credential.iterations} is less than the minimum "
                            f"{self.mechanism.min_iterations} for {self.mechanism.name}")
        self.authorization_id = owner
        self.credential = credential
        self.client_first_bare = match["bare"]
        self.nonce = match["nonce"] + server_nonce
        self.server_first = (f"r={self.nonce},s={base64.b64encode(credential.salt).decode()},"
                             f"i={credential.iterations}")
        self.state = "final"
        return self.server_first.encode()

    def _client_final(self, response: bytes) -> bytes:
        match = _client_messages()[1].fullmatch(response.decode("utf-8", "replace"))
        if match is None:
            raise SaslError("Invalid SCRAM client final message format")
        if match["nonce"] != self.nonce:
            raise SaslError("Invalid client nonce in the final client message.")
        mech, credential = self.mechanism, self.credential
        # Kafka's auth message ignores extensions of the client-final message
        without_proof = f"c={match['channel']},r={match['nonce']}"
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        proof = base64.b64decode(match["proof"])
        client_signature = _hmac(mech, credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise SaslError("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(client_signature, proof))
        computed = hashlib.new(mech.hash_name, client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key):
            raise SaslError("Invalid client credentials")
        server_signature = _hmac(mech, credential.server_key, auth_message)
        self.credential = None
        self.state = "complete"
        return b"v=" + base64.b64encode(server_signature)


class ScramCredentialStore:
    """Every user's SCRAM credentials, by mechanism; persisted in ``<data dir>/
    scram-credentials.json`` when the broker has a data directory."""

    def __init__(self, data_dir: str | None) -> None:
        self.path = os.path.join(data_dir, SCRAM_CREDENTIALS_FILE) if data_dir else None
        #: mechanism name -> user name -> credential
        self.credentials: dict[str, dict[str, ScramCredential]] = {m: {} for m in MECHANISMS}
        self.loaded_from_disk = False
        if self.path and os.path.exists(self.path):
            self._load()
            self.loaded_from_disk = True

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.credentials.get(mechanism, {}).get(user)

    def put(self, mechanism: str, user: str, credential: ScramCredential) -> None:
        self.credentials[mechanism][user] = credential

    def remove(self, mechanism: str, user: str) -> bool:
        return self.credentials[mechanism].pop(user, None) is not None

    def users(self) -> list[str]:
        seen: dict[str, None] = {}
        for creds in self.credentials.values():
            seen.update(dict.fromkeys(creds))
        return list(seen)

    def bootstrap(self, text: str) -> int:
        """At first start only (no credentials file yet): add the credentials of
        ``sasl.scram.bootstrap.credentials``. Returns how many were added."""
        if self.loaded_from_disk or not text:
            return 0
        added = 0
        for mech_name, fields in parse_bootstrap(text):
            mech = MECHANISMS[mech_name]
            iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
            salt = base64.b64decode(fields["salt"]) if "salt" in fields else None
            if "password" in fields:
                credential = make_credential(mech, fields["password"], iterations, salt)
            else:
                credential = credential_from_salted(
                    mech, base64.b64decode(fields["saltedpassword"]), salt, iterations)
            self.put(mech_name, fields["name"], credential)
            added += 1
        self.save()
        return added

    def save(self) -> None:
        if not self.path:
            return
        data = {mech: {user: {"salt": base64.b64encode(c.salt).decode(),
                              "stored_key": base64.b64encode(c.stored_key).decode(),
                              "server_key": base64.b64encode(c.server_key).decode(),
                              "iterations": c.iterations}
                       for user, c in sorted(creds.items())}
                for mech, creds in self.credentials.items()}
        write_json(self.path, data, mode=0o600, indent=1, sort_keys=True)  # secrets: owner only

    def _load(self) -> None:
        try:
            with open(self.path) as f:
                data = json.load(f)
            for mech, creds in data.items():
                if mech not in MECHANISMS:
                    continue
                for user, c in creds.items():
                    self.credentials[mech][user] = ScramCredential(
                        base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                        base64.b64decode(c["server_key"]), int(c["iterations"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"cannot read the SCRAM credentials in {self.path}: "
                              f"{type(exc).__name__}") from None


_BOOTSTRAP_ENTRY = re.compile(r"\s*(?P<mech>[A-Za-z0-9-]+)=\[(?P<fields>[^\]]*)\]\s*[,;]?")


def parse_bootstrap(text: str) -> list[tuple[str, dict[str, str]]]:
    """``SCRAM-SHA-256=[name=alice,password=alice-secret] SCRAM-SHA-512=[...]`` (entries
    separated by spaces, commas or semicolons) -> [(mechanism, {name, password, ...})], as
    ``kafka-storage format --add-scram`` reads each of its arguments. Values may be quoted
    with double quotes. Errors never repeat a password."""
    out = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _BOOTSTRAP_ENTRY.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError("expected MECHANISM=[name=...,password=...] entries")
        pos = match.end()
        mech = match["mech"].upper()
        if mech not in MECHANISMS:
            raise ValueError(f"The add-scram mechanism {match['mech']} is not supported.")
        fields: dict[str, str] = {}
        for item in filter(None, (x.strip() for x in match["fields"].split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"field {key!r} of an {mech} entry has no value")
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1]
            fields[key.strip()] = value
        unknown = set(fields) - {"name", "password", "saltedpassword", "iterations", "salt"}
        if unknown:
            raise ValueError(f"Unknown SCRAM configurations: {', '.join(sorted(unknown))}")
        if not fields.get("name"):
            raise ValueError("You must supply 'name' to add-scram")
        if "password" not in fields:
            if "saltedpassword" not in fields:
                raise ValueError("You must supply one of 'password' or 'saltedpassword' to "
                                 "add-scram")
            if "salt" not in fields:
                raise ValueError("You must supply 'salt' with 'saltedpassword' to add-scram")
        for key in ("salt", "saltedpassword"):
            if key in fields:
                try:
                    base64.b64decode(fields[key], validate=True)
                except ValueError:
                    raise ValueError(f"Failed to decode given {key}") from None
        try:
            iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
        except ValueError:
            raise ValueError("Failed to parse iterations count") from None
        if not MECHANISMS[mech].min_iterations <= iterations <= MECHANISMS[mech].max_iterations:
            raise ValueError(f"The 'iterations' value of {mech} user {fields['name']} must be "
                             f"between {MECHANISMS[mech].min_iterations} and "
                             f"{MECHANISMS[mech].max_iterations}")
        out.append((mech, fields))
    return out
