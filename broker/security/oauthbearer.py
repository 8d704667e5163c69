"""SASL/OAUTHBEARER (RFC 7628) with Kafka's default server callback handler, the unsecured
validator (OAuthBearerUnsecuredValidatorCallbackHandler): unsigned JWS tokens (``alg`` none),
for local development of OAuth clients.

Options come from the listener's OAuthBearerLoginModule JAAS entry, as on Kafka:
``unsecuredValidatorPrincipalClaimName`` (default ``sub``), ``unsecuredValidatorScopeClaimName``
(``scope``), ``unsecuredValidatorRequiredScope`` (space separated) and
``unsecuredValidatorAllowableClockSkewMs`` (0). A token that fails validation gets Kafka's JSON
error as a challenge; the client answers it with %x01 and then gets SASL_AUTHENTICATION_FAILED
with that JSON as the message.
"""
from __future__ import annotations

import base64
import binascii
import json
import re

from .sasl_errors import SaslAuthenticationError, SaslError

OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_CLIENT_INITIAL = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>(?:{_KEY}={_VALUE}\x01)*)\x01")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


class IllegalToken(Exception):
    """Kafka's OAuthBearerIllegalTokenException: the token is refused, with a reason (for the
    log) and, for a missing scope, the required scope (for the client's error JSON)."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope


class UnsecuredToken:
    """A parsed unsecured JWS (Kafka's OAuthBearerUnsecuredJws)."""

    def __init__(self, value: str, principal_claim: str, scope_claim: str) -> None:
        if ".." in value:
            raise IllegalToken("Malformed compact serialization contains '..'")
        splits = value.split(".")
        if len(splits) != 3:
            raise IllegalToken("Unsecured JWS compact serializations must have 3 dot-separated "
                               "Base64URL-encoded values")
        self.header = _decode_part(splits[0])
        self.claims = _decode_part(splits[1])
        if self.header.get("alg") is None:
            raise IllegalToken("JWS header must have an Algorithm value")
        if str(self.header["alg"]) != "none":
            raise IllegalToken("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise IllegalToken("Unsecured JWS must not contain a digital signature")
        self.scope = self._scope(scope_claim)
        exp = self.number("exp")
        if exp is None:
            raise IllegalToken("No expiration time in JWT")
        self.lifetime_ms = round(exp * 1000)
        principal = self.claim(principal_claim, str)
        if principal is None or not principal.strip():
            raise IllegalToken(f"No principal name in JWT claim: {principal_claim}")
        self.principal_name = principal

    def claim(self, name: str, kind):
        value = self.claims.get(name)
        if value is None:
            return None
        ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
        if not ok:
            raise IllegalToken(f"The '{name}' claim was not of type {_JAVA_TYPES[kind]}: "
                               f"{_java_type(value)}")
        return value

    def number(self, name: str):
        return self.claim(name, (int, float))

    def _scope(self, name: str) -> set[str]:
        value = self.claims.get(name)
        if isinstance(value, str):
            return {value.strip()} if value.strip() else set()
        value = self.claim(name, list)
        if not value:
            return set()
        return {str(s).strip() for s in value if str(s).strip()}


_JAVA_TYPES = {str: "String", (int, float): "Number", list: "List"}


def _java_type(value) -> str:
    if isinstance(value, bool):
        return "String"  # Kafka converts non-number, non-array JSON to text
    if isinstance(value, (int, float)):
        return "Integer" if isinstance(value, int) else "Double"
    if isinstance(value, list):
        return "ArrayList"
    return "String"


def _decode_part(split: str) -> dict:
    try:
        raw = base64.urlsafe_b64decode(split + "=" * (-len(split) % 4))
    except (binascii.Error, ValueError):
        raise IllegalToken("malformed Base64 URL encoded value") from None
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: a deeply nested token
        raise IllegalToken("malformed JSON") from None
    if not isinstance(data, dict):
        raise IllegalToken("malformed JSON")
    out = {}
    for key, value in data.items():
        if isinstance(value, list):
            value = [v if isinstance(v, str) else json.dumps(v) for v in value]
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            value = value if isinstance(value, str) else json.dumps(value)
        out[key] = value
    return out


def _java_double(value: float) -> str:
    return f"{float(value):f}"


class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler, configured from the JAAS options."""

    def __init__(self, options: dict[str, str], clock) -> None:
        self.clock = clock
        self.principal_claim = (options.get("unsecuredValidatorPrincipalClaimName") or "").strip() \
            or "sub"
        self.scope_claim = (options.get("unsecuredValidatorScopeClaimName") or "").strip() \
            or "scope"
        required = (options.get("unsecuredValidatorRequiredScope") or "").strip()
        self.required_scope = [s for s in required.split(" ") if s] if required else []
        skew = (options.get("unsecuredValidatorAllowableClockSkewMs") or "").strip()
        self.allowable_clock_skew_ms = int(skew) if skew else 0
        if self.allowable_clock_skew_ms < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")

    def validate(self, value: str) -> UnsecuredToken:
        token = UnsecuredToken(value, self.principal_claim, self.scope_claim)
        now = self.clock()
        skew = self.allowable_clock_skew_ms
        token.claim(self.principal_claim, str)
        iat = token.number("iat")
        if iat is not None and 1000 * iat > now + skew:
            raise IllegalToken(f"The Issued At value ({_java_double(iat)} seconds) was after the "
                               f"indicated time ({now} ms) plus allowable clock skew ({skew} ms)")
        exp = token.number("exp")
        if now - skew >= 1000 * exp:
            raise IllegalToken(f"The indicated time ({now} ms) minus allowable clock skew "
                               f"({skew} ms) was on or after the Expiration Time value "
                               f"({_java_double(exp)} seconds)")
        if iat is not None and exp <= iat:
            raise IllegalToken(f"The Expiration Time time ({_java_double(exp)} seconds) was not "
                               f"after the Issued At time ({_java_double(iat)} seconds)")
        for element in self.required_scope:
            if element not in token.scope:
                raise IllegalToken(
                    f"The provided scope ({_java_list(sorted(token.scope))}) was missing a "
                    f"required scope ({element}).  All required scope elements: "
                    f"{_java_list(self.required_scope)}", scope=_java_list(self.required_scope))
        return token


def _java_list(items) -> str:
    return "[" + ", ".join(items) + "]"


def error_json(status: str, scope: str | None) -> str:
    """Kafka's OAuthBearerSaslServer.jsonErrorResponse, byte for byte."""
    out = f'{{"status":"{status}"'
    if scope is not None:
        out += f', "scope":"{scope}"'
    return out + "}"


class OAuthBearerServer:
    """One OAUTHBEARER exchange (Kafka's OAuthBearerSaslServer)."""

    def __init__(self, validator: UnsecuredValidator) -> None:
        self.validator = validator
        self.complete = False
        self.authorization_id: str | None = None
        self.lifetime_ms: int | None = None
        self.error_message: str | None = None
        #: the reason of the last refused token, for the log line (never the token itself)
        self.failure_reason: str | None = None

    def evaluate(self, response: bytes) -> bytes:
        if response == b"\x01" and self.error_message is not None:
            raise SaslAuthenticationError(self.error_message)
        self.error_message = None
        match = _CLIENT_INITIAL.fullmatch(response.decode("utf-8", "replace"))
        if match is None:
            raise SaslError("Invalid OAUTHBEARER client first message")
        pairs = {}
        for pair in match["kvpairs"].split("\x01"):
            if pair:
                key, _, value = pair.partition("=")
                pairs[key] = value
        auth = pairs.pop("auth", None)
        if auth is None:
            raise SaslError("Invalid OAUTHBEARER client first message: 'auth' not specified")
        auth_match = _AUTH.fullmatch(auth)
        if auth_match is None:
            raise SaslError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
        if auth_match["scheme"].lower() != "bearer":
            raise SaslError("Invalid scheme in OAUTHBEARER client first message")
        try:
            token = self.validator.validate(auth_match["token"])
        except IllegalToken as exc:
            self.failure_reason = str(exc)
            self.error_message = error_json(
                "insufficient_scope" if exc.scope is not None else "invalid_token", exc.scope)
            return self.error_message.encode()
        authzid = match["authzid"] or ""
        if authzid and authzid != token.principal_name:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that "
                f"is different from the token's principal name ({token.principal_name})")
        # the unsecured validator accepts every extension
        self.authorization_id = token.principal_name
        self.lifetime_ms = token.lifetime_ms
        self.complete = True
        return b""
