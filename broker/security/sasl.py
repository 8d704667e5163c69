"""SASL authentication of connections on SASL_PLAINTEXT (and SASL_SSL) listeners, as Kafka's
SaslServerAuthenticator does it.

A connection starts unauthenticated: it may send ApiVersions (once, first) and SaslHandshake;
anything else closes it. SaslHandshake v1 is followed by SaslAuthenticate requests carrying the
mechanism's tokens; v0 by raw size-prefixed tokens without Kafka headers (older clients). A
mechanism not in ``sasl.enabled.mechanisms`` gets UNSUPPORTED_SASL_MECHANISM, a failed exchange
SASL_AUTHENTICATION_FAILED with Kafka's message; both then close the connection. Until it has
authenticated a client's frames are bounded by ``sasl.server.max.receive.size``.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` (or an OAUTHBEARER token's
expiry) a session has a lifetime, sent in SaslAuthenticate v1+; a client re-authenticates by
sending SaslHandshake again on the authenticated connection, with the same mechanism and the same
principal; past its session any other request closes the connection.

The authenticator knows nothing of sockets: the connection (broker/network/connection.py)
gives it every frame first (``screen``) while it has something to say, and the SaslHandshake and
SaslAuthenticate handlers (broker/apis/sasl_handshake.py, sasl_authenticate.py) call it. Its clock
is injected.
"""
from __future__ import annotations

import struct

import structlog

from protocol.errors import ErrorCode
from protocol.framing import read_request_header
from protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse

from ..errors import ConfigError
from . import SASL_PROTOCOLS, KafkaPrincipal
from .jaas import JaasError, parse_jaas_file, parse_single_module
from .oauthbearer import OAUTHBEARER_LOGIN_MODULE, OAuthBearerServer, UnsecuredValidator
from .plain import PLAIN_LOGIN_MODULE, PlainServer, users_from_jaas
from .sasl_errors import SaslAuthenticationError, SaslError
from .scram import MECHANISMS as SCRAM_MECHANISMS, ScramServer

log = structlog.get_logger("broker.security.sasl")

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
#: Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
MIN_REAUTH_INTERVAL_MS = 1000
_API_HEADER = struct.Struct(">hh")

# Kafka's SaslServerAuthenticator.SaslState
INITIAL_REQUEST = "INITIAL_REQUEST"
HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
HANDSHAKE_REQUEST = "HANDSHAKE_REQUEST"
AUTHENTICATE = "AUTHENTICATE"
REAUTH_PROCESS_HANDSHAKE = "REAUTH_PROCESS_HANDSHAKE"
REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"
COMPLETE = "COMPLETE"
FAILED = "FAILED"


def _api_name(api_key: int) -> str:
    """Kafka's ApiKeys enum name of an API (METADATA, SASL_HANDSHAKE, ...)."""
    from protocol.messages import APIS  # noqa: PLC0415
    api = APIS.get(api_key)
    if api is None:
        return str(api_key)
    out = []
    for i, c in enumerate(api.name):
        if c.isupper() and i and not api.name[i - 1].isupper():
            out.append("_")
        out.append(c.upper())
    return "".join(out)


def _java_string_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h


def java_hash_set_order(names) -> list[str]:
    """The order of ``new ArrayList<>(new HashSet<>(names))`` on the JVM: Kafka's
    SaslServerAuthenticator lists the enabled mechanisms so in its SaslHandshake answers
    (clients show this list)."""
    names = list(dict.fromkeys(names))
    capacity = 16
    wanted = max(int(len(names) / 0.75) + 1, 16)
    while capacity < wanted:
        capacity *= 2

    def bucket(name: str) -> int:
        h = _java_string_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(names, key=bucket)  # stable: a bucket keeps insertion order


def _jaas_entries(config, listener: str, mechanism: str) -> tuple[list, str]:
    """The login modules a listener's mechanism is configured with, and where they come from:
    listener.name.<l>.<mech>.sasl.jaas.config, else the broker-wide sasl.jaas.config, else the
    <listener>.KafkaServer or KafkaServer section of the JAAS file
    (java.security.auth.login.config), as Kafka's JaasContext looks them up; ([], reason)
    when none applies."""
    prefixed = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.listener_values.get((listener, mechanism, "sasl.jaas.config"))
    if text:
        return [parse_single_module(text)], prefixed
    if config["sasl.jaas.config"]:
        return [parse_single_module(config["sasl.jaas.config"])], "sasl.jaas.config"
    path = config["java.security.auth.login.config"]
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                sections = parse_jaas_file(f.read())
        except OSError as exc:
            raise JaasError(f"cannot read the JAAS file {path}: {exc.strerror}") from None
        for name in (f"{listener.lower()}.KafkaServer", "KafkaServer"):
            if name in sections:
                return sections[name], f"section {name} of {path}"
        return [], (f"Could not find a 'KafkaServer' or '{listener.lower()}.KafkaServer' entry "
                    f"in the JAAS configuration {path}")
    return [], f"neither {prefixed} nor java.security.auth.login.config is set"


def _module(entries: list, login_module: str):
    """The entry of a login module class among a JAAS context's entries (Kafka's callback
    handlers look their options up so), or None."""
    return next((e for e in entries if e.login_module == login_module), None)


def validate_sasl_config(config) -> None:
    """Refuse at start what Kafka would refuse, with a message that names the setting (never a
    secret): unknown or unsupported mechanisms, a PLAIN listener without users, bad JAAS."""
    from .scram import parse_bootstrap  # noqa: PLC0415
    for listener, protocol in config.security_protocols.items():
        if protocol not in SASL_PROTOCOLS:
            continue
        mechanisms = config.listener_get(listener, "sasl.enabled.mechanisms")
        if not mechanisms:
            raise ConfigError(f"sasl.enabled.mechanisms of listener {listener} is empty")
        for mech in mechanisms:
            if mech == "GSSAPI":
                raise ConfigError(f"SASL mechanism GSSAPI (Kerberos, Kafka's default "
                                  f"sasl.enabled.mechanisms) is not supported: set "
                                  f"sasl.enabled.mechanisms (or listener.name."
                                  f"{listener.lower()}.sasl.enabled.mechanisms) to some of "
                                  f"{', '.join(SUPPORTED_MECHANISMS)}")
            if mech not in SUPPORTED_MECHANISMS:
                raise ConfigError(f"unsupported SASL mechanism {mech!r} in "
                                  f"sasl.enabled.mechanisms of listener {listener} (one of "
                                  f"{', '.join(SUPPORTED_MECHANISMS)})")
            try:
                entries, where = _jaas_entries(config, listener, mech)
            except JaasError as exc:
                raise ConfigError(f"JAAS configuration of {mech} on listener {listener}: "
                                  f"{exc}") from None
            if mech == "PLAIN" and _module(entries, PLAIN_LOGIN_MODULE) is None:
                raise ConfigError(
                    f"SASL/PLAIN on listener {listener} needs {PLAIN_LOGIN_MODULE} with its "
                    f"user_<name>=\"<password>\" options in listener.name.{listener.lower()}."
                    f"plain.sasl.jaas.config or a JAAS file ({where})")
            oauth = _module(entries, OAUTHBEARER_LOGIN_MODULE)
            if mech == "OAUTHBEARER" and oauth is not None:
                try:
                    UnsecuredValidator(oauth.options, lambda: 0)
                except ValueError as exc:
                    raise ConfigError(f"{where}: {exc}") from None
        if config.listener_get(listener, "sasl.server.max.receive.size") < 1:
            raise ConfigError("sasl.server.max.receive.size must be at least 1")
    bootstrap = config["sasl.scram.bootstrap.credentials"]
    if bootstrap:
        try:
            parse_bootstrap(bootstrap)
        except ValueError as exc:
            raise ConfigError(f"sasl.scram.bootstrap.credentials: {exc}") from None


class SaslListener:
    """What one SASL listener serves: its mechanisms, each with what its server needs, its
    frame bound before authentication and its session lifetime per mechanism."""

    def __init__(self, config, listener: str, scram_store, clock, tokens=None) -> None:
        self.listener = listener
        self.tokens = tokens
        self.clock = clock
        self.mechanisms = java_hash_set_order(
            config.listener_get(listener, "sasl.enabled.mechanisms"))
        self.max_receive_size = config.listener_get(listener, "sasl.server.max.receive.size")
        self.failed_delay_ms = config["connection.failed.authentication.delay.ms"]
        self.reauth_ms = {m: config.listener_get(listener, "connections.max.reauth.ms", m)
                          for m in self.mechanisms}
        self.scram_store = scram_store
        self.plain_users: dict[str, str] = {}
        self.oauth_options: dict[str, str] = {}
        if "PLAIN" in self.mechanisms:
            entries, _ = _jaas_entries(config, listener, "PLAIN")
            self.plain_users = users_from_jaas(_module(entries, PLAIN_LOGIN_MODULE).options)
        if "OAUTHBEARER" in self.mechanisms:
            entry = _module(_jaas_entries(config, listener, "OAUTHBEARER")[0],
                            OAUTHBEARER_LOGIN_MODULE)
            if entry is not None:
                self.oauth_options = dict(entry.options)

    def server(self, mechanism: str):
        """A new SASL server for one exchange (Kafka's Sasl.createSaslServer)."""
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        if mechanism in SCRAM_MECHANISMS:
            store, tokens = self.scram_store, self.tokens
            token_login = None
            if tokens is not None and tokens.enabled:
                def token_login(token_id):
                    return tokens.login(mechanism, token_id)
            return ScramServer(SCRAM_MECHANISMS[mechanism],
                               lambda user: store.get(mechanism, user), token_login=token_login)
        return OAuthBearerServer(UnsecuredValidator(self.oauth_options, self.clock))


class SaslAuthenticator:
    """One connection's SASL state (Kafka's SaslServerAuthenticator and the re-authentication
    part of KafkaChannel). ``conn`` is the KafkaConnection, or a stand-in in unit tests: it has
    ``principal``, ``max_frame``, ``close_after_answers(reason)``, ``close(reason)`` and
    ``send_raw(bytes)``."""

    def __init__(self, listener: SaslListener, conn, clock) -> None:
        self.listener = listener
        self.conn = conn
        self.clock = clock
        self.state = INITIAL_REQUEST
        #: the frames of this connection go through screen() first
        self.screening = True
        #: SaslHandshake v0: the tokens come raw, without Kafka headers
        self.raw_tokens = False
        self.mechanism: str | None = None
        self.server = None
        #: broker clock (ms) at which the session ends; None: it never does
        self.session_expiry: int | None = None
        self.last_reauth_start = 0
        self.previous_mechanism: str | None = None
        self.previous_principal: KafkaPrincipal | None = None
        self.bad_mechanism_message = ""
        #: the frame bound after authentication, restored when it completes
        self.authenticated_max_frame = conn.max_frame
        conn.max_frame = listener.max_receive_size
        conn.max_frame_setting = "sasl.server.max.receive.size"

    @property
    def reauthenticating(self) -> bool:
        return self.previous_mechanism is not None

    def _what(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    # -- the connection's first look at every frame

    def screen(self, frame) -> bool:
        """Look at a frame before the connection decodes it: True when it was dealt with here
        (a raw token, or a request not allowed now, which closes the connection), False when it
        goes on to its handler."""
        state = self.state
        if state == AUTHENTICATE and self.raw_tokens:
            self._raw_token(bytes(frame))
            return True
        if state == REAUTH_BAD_MECHANISM:
            self._fail(self.bad_mechanism_message)
            return True
        if len(frame) < 4:
            return False  # the connection closes it as a malformed header
        api_key, api_version = _API_HEADER.unpack_from(frame, 0)
        if state == COMPLETE:
            now = self.clock()
            if api_key == SASL_HANDSHAKE and self._may_begin_reauthentication(now):
                return False
            if self.session_expiry is not None and now > self.session_expiry:
                self.conn.close(f"SASL session expired: {_api_name(api_key)} request "
                                f"{now - self.session_expiry} ms after the session of "
                                f"{self.conn.principal} ended, without re-authentication")
                return True
            return False
        if state in (INITIAL_REQUEST, HANDSHAKE_OR_VERSIONS_REQUEST, HANDSHAKE_REQUEST,
                     REAUTH_PROCESS_HANDSHAKE):
            if api_key == SASL_HANDSHAKE:
                return False
            if api_key == API_VERSIONS and state in (INITIAL_REQUEST,
                                                     HANDSHAKE_OR_VERSIONS_REQUEST):
                from broker import apis  # noqa: PLC0415
                handler = apis.HANDLERS[API_VERSIONS]
                if handler.min_version <= api_version <= handler.max_version:
                    self.state = HANDSHAKE_REQUEST
                else:
                    self.state = HANDSHAKE_OR_VERSIONS_REQUEST  # answered with its versions
                return False
            if api_key == API_VERSIONS:
                reason = ("Unexpected ApiVersions request received during SASL authentication "
                          f"state {state}")
            elif state == INITIAL_REQUEST:
                reason = ("Invalid request, potential reasons: kafka client configured with "
                          "the wrong security protocol, it does not support KIP-43 or it is "
                          f"not a kafka client (unexpected {_api_name(api_key)} request "
                          "during SASL handshake)")
            else:
                reason = f"Unexpected Kafka request of type {_api_name(api_key)} during " \
                         "SASL handshake."
            self._fail(reason, delayed=False)
            return True
        if state == AUTHENTICATE:
            if api_key == SASL_AUTHENTICATE:
                return False
            self._illegal_state(frame, api_key)
            return True
        # FAILED: the connection is closing
        return True

    def _may_begin_reauthentication(self, now: int) -> bool:
        """Kafka's KafkaChannel.maybeBeginServerReauthentication: only a session that expires
        re-authenticates, and at most once a second."""
        if self.session_expiry is None:
            return False
        if self.last_reauth_start and now - self.last_reauth_start < MIN_REAUTH_INTERVAL_MS:
            return False
        self.last_reauth_start = now
        self.previous_mechanism = self.mechanism
        self.previous_principal = self.conn.principal
        self.state = REAUTH_PROCESS_HANDSHAKE
        self.screening = True
        self.conn.max_frame = self.listener.max_receive_size
        self.conn.max_frame_setting = "sasl.server.max.receive.size"
        return True

    def _illegal_state(self, frame, api_key: int) -> None:
        """Another request during the SaslAuthenticate exchange: Kafka answers it with its
        error response for ILLEGAL_SASL_STATE, then closes."""
        reason = f"Unexpected Kafka request of type {_api_name(api_key)} during SASL " \
                 "authentication."
        self.state = FAILED
        self.screening = True
        # the close first: the answer made after it is held for the delay with the close
        self.conn.close_after_delay(f"SASL authentication failed: {reason}",
                                    self.listener.failed_delay_ms)
        answered = False
        try:
            answered = self.conn.answer_error(frame, ErrorCode.ILLEGAL_SASL_STATE)
        except Exception:  # noqa: BLE001 - a frame we cannot even decode: closed all the same
            answered = False
        if not answered:
            log.debug("no ILLEGAL_SASL_STATE answer for this request", api_key=api_key)

    # -- SaslHandshake

    def in_handshake(self) -> bool:
        return self.state in (INITIAL_REQUEST, HANDSHAKE_OR_VERSIONS_REQUEST, HANDSHAKE_REQUEST,
                              REAUTH_PROCESS_HANDSHAKE)

    def handshake(self, mechanism: str, version: int) -> SaslHandshakeResponse:
        """Answer a SaslHandshake; an unsupported mechanism closes the connection after it."""
        enabled = self.listener.mechanisms
        if mechanism not in enabled:
            self._fail(f"Unsupported SASL mechanism {mechanism}")
            return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                         mechanisms=list(enabled))
        self.raw_tokens = version == 0
        if self.reauthenticating and mechanism != self.previous_mechanism:
            self.bad_mechanism_message = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self.previous_mechanism}'")
            self.state = REAUTH_BAD_MECHANISM
        else:
            self.mechanism = mechanism
            self.server = self.listener.server(mechanism)
            self.state = AUTHENTICATE
        return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=list(enabled))

    # -- SaslAuthenticate

    def authenticating(self) -> bool:
        return self.state == AUTHENTICATE and not self.raw_tokens

    def authenticate(self, token: bytes, version: int) -> SaslAuthenticateResponse:
        """Answer one SaslAuthenticate; a failure closes the connection after the answer."""
        try:
            challenge = self._evaluate(token)
        except SaslAuthenticationError as exc:
            detail = getattr(self.server, "failure_reason", None)
            self._fail(f"{exc} ({detail})" if detail else str(exc))
            return SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                            error_message=str(exc), auth_bytes=b"")
        except SaslError as exc:
            message = (f"Authentication failed during {self._what()} due to invalid "
                       f"credentials with SASL mechanism {self.mechanism}")
            self._fail(f"{message} ({exc})")
            return SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                            error_message=message, auth_bytes=b"")
        lifetime = self._complete() if self.server.complete else 0
        # error_message stays Kafka's default, "" (not null)
        return SaslAuthenticateResponse(error_code=ErrorCode.NONE, auth_bytes=challenge,
                                        session_lifetime_ms=lifetime)

    def _raw_token(self, token: bytes) -> None:
        """A token of the v0 flow: answered raw, size-prefixed; a failure just closes."""
        try:
            challenge = self._evaluate(token)
        except (SaslAuthenticationError, SaslError) as exc:
            self._fail(str(exc))
            return
        if self.server.complete:
            self._complete()
        self.conn.send_raw(struct.pack(">i", len(challenge)) + challenge)

    def _evaluate(self, token: bytes) -> bytes:
        challenge = self.server.evaluate(token)
        if self.server.complete and self.reauthenticating:
            principal = KafkaPrincipal("User", self.server.authorization_id)
            old = self.previous_principal
            if principal != old:
                raise SaslAuthenticationError(
                    f"Cannot change principals during re-authentication from "
                    f"{old.principal_type}.{old.name}: {principal.principal_type}."
                    f"{principal.name}")
        return challenge

    def _complete(self) -> int:
        """The exchange succeeded: the connection is the server's principal from now on.
        Returns the session lifetime in ms (0: none), as Kafka's ReauthInfo computes it."""
        now = self.clock()
        reauth_ms = self.listener.reauth_ms.get(self.mechanism) or 0
        credential_expiry = getattr(self.server, "lifetime_ms", None)
        lifetime = 0
        self.session_expiry = None
        if credential_expiry is not None or reauth_ms > 0:
            if credential_expiry is None:
                lifetime = max(0, reauth_ms)
            elif reauth_ms <= 0:
                lifetime = max(0, credential_expiry - now)
            else:
                lifetime = max(0, min(credential_expiry - now, reauth_ms))
            self.session_expiry = now + lifetime
        principal = KafkaPrincipal("User", self.server.authorization_id)
        log.debug("re-authenticated" if self.reauthenticating else "authenticated",
                  principal=str(principal), mechanism=self.mechanism,
                  listener=self.listener.listener, session_lifetime_ms=lifetime)
        self.conn.principal = principal
        self.conn.token_authenticated = getattr(self.server, "token_authenticated", False)
        self.conn.max_frame = self.authenticated_max_frame
        self.conn.max_frame_setting = "socket.request.max.bytes"
        self.state = COMPLETE
        self.screening = self.session_expiry is not None
        self.server = None
        self.previous_mechanism = None
        self.previous_principal = None
        return lifetime

    def _fail(self, reason: str, delayed: bool = True) -> None:
        """Close the connection once the answers before it (the failure's own) are sent, and,
        for a failed authentication, connection.failed.authentication.delay.ms later, as Kafka
        does; the one log line says why (never a secret: the reasons hold none)."""
        self.state = FAILED
        self.screening = True
        self.server = None
        reason = f"SASL authentication failed: {reason}"
        if delayed:
            self.conn.close_after_delay(reason, self.listener.failed_delay_ms)
        else:
            self.conn.close_after_answers(reason)


class SaslServers:
    """The broker's SASL listeners; makes each new connection's authenticator."""

    def __init__(self, config, scram_store, clock, tokens=None) -> None:
        self.clock = clock
        self.listeners = {name: SaslListener(config, name, scram_store, clock, tokens)
                          for name, protocol in config.security_protocols.items()
                          if protocol in SASL_PROTOCOLS}
        if config["sasl.jaas.config"] and self.listeners:
            log.warning("sasl.jaas.config without the listener.name.<listener>.<mechanism>. "
                        "prefix is used for every SASL listener here; Kafka brokers ignore it")

    def authenticator(self, conn) -> SaslAuthenticator | None:
        listener = self.listeners.get(conn.listener)
        return None if listener is None else SaslAuthenticator(listener, conn, self.clock)


def error_response_for(frame, error_code: int):
    """(header, handler, response) answering a request with an error during an exchange, as
    Kafka's getErrorResponse does: the response's top-level error code where its version has
    one, the rest empty (Kafka also sets the code on each item the request named: a client
    that sends such requests then is not one that reads the answer); None for a request we
    cannot decode the header of or serve the version of."""
    from broker import apis  # noqa: PLC0415
    header = read_request_header(frame)
    handler = apis.HANDLERS.get(header.api_key)
    if handler is None or not handler.min_version <= header.api_version <= handler.max_version:
        return None
    response = handler.response()
    if hasattr(response, "error_code"):  # encoded only by the versions that have the field
        response.error_code = error_code
    return header, handler, response
