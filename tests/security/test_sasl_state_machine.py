"""The SASL state machine of a connection (broker/security/sasl.py through
broker/network/connection.py's handle_frame and the SaslHandshake/SaslAuthenticate handlers), on
the fake transports and the injected clock of tests/test_connections.py: handshake orders, the v0
flow of raw tokens, bad tokens, the frame bound before authentication, re-authentication and
session expiry. No sockets, no sleeping."""
from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest
from structlog.testing import capture_logs

from broker import apis
from broker.client_quotas import ClientQuotas
from broker.features import Features
from broker.cluster import Cluster
from broker.config import BrokerConfig
from broker.metrics import Metrics
from broker.purgatory import Timer
from broker.security import ANONYMOUS, KafkaPrincipal
from broker.security.sasl import SaslServers
from broker.security.scram import ScramCredentialStore
from broker.network.connection import FAILED_ANSWER_LINGER_MS, KafkaConnection
from broker.network.socket_server import Server
from broker.faults import Faults
from protocol.errors import ErrorCode
from protocol.framing import encode_request, read_response_header
from protocol.messages import (APIS, ApiVersionsRequest, DescribeClusterRequest,
                               SaslAuthenticateRequest, SaslHandshakeRequest)
from tests.test_connections import Clock, Transport, feed

from .sasl_support import (ADMIN_PASSWORD, ALICE_PASSWORD, SCRAM_BOOTSTRAP, ScramClient,
                           listener_settings, oauth_initial_response, plain_token, unsecured_jwt)

LISTENER = "SASL_PLAINTEXT"


def make_broker(**settings):
    clock = Clock()
    config = BrokerConfig({"metrics.port": 0, "listeners": f"{LISTENER}://127.0.0.1:0",
                           "sasl.scram.bootstrap.credentials": SCRAM_BOOTSTRAP,
                           **listener_settings(), **settings})
    broker = SimpleNamespace(config=config, clock=clock, timer=Timer(clock), debug=False,
                             node_id=1, cluster=Cluster(1, 1), cluster_id="c",
                             advertised=lambda _listener, _node=None: ("localhost", 9092))
    broker.metrics = Metrics(broker)
    broker.armed_faults = []
    broker.faults = Faults(broker)
    broker.client_quotas = ClientQuotas(None)
    broker.features = Features(broker.config, None, 1, apis.HANDLERS)
    broker.scram_credentials = ScramCredentialStore(None)
    broker.scram_credentials.bootstrap(config["sasl.scram.bootstrap.credentials"])
    broker.sasl = SaslServers(config, broker.scram_credentials, clock)
    broker.server = Server(broker)
    return broker


class Client:
    """One connection on a fake transport, with the requests it sent by correlation id."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.conn = KafkaConnection(broker, LISTENER)
        self.transport = Transport(self.conn)
        self.conn.connection_made(self.transport)
        self.correlation_id = 0
        self.read = 0
        #: the last request failed the authentication: the delay was checked (_held_answer)
        self.delayed = False
        #: the last request sent was answered (raw tokens of the v0 flow are not requests)
        self.answered = False

    def send(self, request, version: int) -> int:
        self.correlation_id += 1
        feed(self.conn, self.transport, encode_request(type(request).api_key, version,
                                                       self.correlation_id, "t", request))
        return self.correlation_id

    def call(self, request, version: int):
        """Send a request; its response, or None when nothing came back."""
        api = APIS[type(request).api_key]
        sent = self.send(request, version)
        frame = self.next_frame()
        self.delayed = False
        if frame is None and self.conn.close_delayed:
            frame = self._held_answer()
            self.delayed = True
        self.answered = frame is not None
        if frame is None:
            return None
        correlation_id, offset = read_response_header(frame, api.response_header_version(version))
        assert correlation_id == sent
        return api.response.decode(frame, version, offset)

    def next_frame(self) -> bytes | None:
        data = self.transport.sent
        if len(data) - self.read < 4:
            return None
        size = struct.unpack_from(">i", data, self.read)[0]
        frame = bytes(data[self.read + 4:self.read + 4 + size])
        self.read += 4 + size
        return frame

    def _held_answer(self) -> bytes | None:
        """A failed authentication's answer: held, with nothing read, for
        connection.failed.authentication.delay.ms (100) and the millisecond the floored clock
        may have lost, then written with the close."""
        broker = self.broker
        assert not self.transport.closed and self.transport.reading_paused
        broker.clock.now += 100
        broker.timer.advance(broker.clock.now)
        assert self.next_frame() is None and not self.transport.closed
        broker.clock.now += 1
        broker.timer.advance(broker.clock.now)
        frame = self.next_frame()
        self._lingered()
        return frame

    def _lingered(self) -> None:
        """After the delay the answer is out and the connection lingers open, reading nothing,
        FAILED_ANSWER_LINGER_MS, so that the answer does not arrive with the FIN; then it
        closes."""
        broker = self.broker
        assert not self.transport.closed and self.transport.reading_paused
        broker.clock.now += FAILED_ANSWER_LINGER_MS - 1
        broker.timer.advance(broker.clock.now)
        assert not self.transport.closed
        broker.clock.now += 1
        broker.timer.advance(broker.clock.now)
        assert self.transport.closed

    def raw(self, token: bytes) -> bytes | None:
        self.answered = self.delayed = False
        feed(self.conn, self.transport, struct.pack(">i", len(token)) + token)
        return self.next_frame()

    @property
    def closed(self) -> bool:
        return self.transport.closed

    @property
    def closed_after_delay(self) -> bool:
        """The failure's answer came connection.failed.authentication.delay.ms (100) after the
        request, with the close; or, with no answer (the v0 flow of raw tokens), the connection
        stayed open, reading nothing, for that long, and closed then."""
        if self.delayed:
            return self.transport.closed
        if self.answered:
            return False  # a failure answered at once, not after the delay
        broker = self.broker
        if self.transport.closed or not self.transport.reading_paused:
            return False
        broker.clock.now += 100
        broker.timer.advance(broker.clock.now)
        if self.transport.closed:
            return False
        broker.clock.now += 1
        broker.timer.advance(broker.clock.now)
        self._lingered()
        return self.transport.closed


def plain_login(client: Client, user: str = "alice", password: str = ALICE_PASSWORD,
                version: int = 2):
    assert client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    return client.call(SaslAuthenticateRequest(auth_bytes=plain_token(user, password)), version)


def metadata(client: Client):
    """An ordinary request (DescribeCluster: the fake broker has no topics)."""
    return client.call(DescribeClusterRequest(endpoint_type=1), 1)


@pytest.fixture
def broker():
    return make_broker()


async def test_api_versions_handshake_authenticate_then_requests(broker):
    client = Client(broker)
    versions = client.call(ApiVersionsRequest(client_software_name="t",
                                              client_software_version="1"), 3)
    assert versions.error_code == 0
    assert {17, 36} <= {k.api_key for k in versions.api_keys}
    handshake = client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert handshake.error_code == 0
    assert handshake.mechanisms == ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "OAUTHBEARER"]
    assert client.conn.principal == ANONYMOUS
    auth = client.call(SaslAuthenticateRequest(auth_bytes=plain_token("alice", ALICE_PASSWORD)),
                       2)
    assert (auth.error_code, auth.auth_bytes, auth.session_lifetime_ms) == (0, b"", 0)
    assert client.conn.principal == KafkaPrincipal("User", "alice")
    assert metadata(client).error_code == 0
    assert not client.closed
    # the exchange is over: both SASL APIs are answered as Kafka's KafkaApis answers them
    again = client.call(SaslAuthenticateRequest(auth_bytes=b"x"), 2)
    assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert again.error_message == "SaslAuthenticate request received after successful " \
                                  "authentication"
    assert client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == \
        ErrorCode.ILLEGAL_SASL_STATE
    assert not client.closed


@pytest.mark.parametrize("first", ["nothing", "api_versions"])
async def test_request_before_authentication_closes_without_answer(broker, first):
    client = Client(broker)
    if first == "api_versions":
        assert client.call(ApiVersionsRequest(), 0).error_code == 0
    with capture_logs() as logs:
        assert metadata(client) is None
    assert client.closed
    closing = [e for e in logs if e["event"] == "closing connection"]
    assert len(closing) == 1 and "DESCRIBE_CLUSTER" in closing[0]["reason"]


async def test_second_api_versions_before_handshake_closes(broker):
    client = Client(broker)
    assert client.call(ApiVersionsRequest(), 0).error_code == 0
    assert client.call(ApiVersionsRequest(), 0) is None
    assert client.closed


async def test_unsupported_api_versions_version_keeps_the_handshake_open(broker):
    client = Client(broker)
    client.correlation_id += 1
    body = struct.pack(">hhih", 18, 99, client.correlation_id, 1) + b"t"
    feed(client.conn, client.transport, struct.pack(">i", len(body)) + body)
    assert client.next_frame() is not None  # the v0 error answer listing our versions
    assert client.call(ApiVersionsRequest(), 0).error_code == 0
    assert plain_login(client).error_code == 0


async def test_unknown_mechanism(broker):
    client = Client(broker)
    with capture_logs() as logs:
        response = client.call(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
    assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert response.mechanisms == ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "OAUTHBEARER"]
    assert client.closed_after_delay
    assert [e["reason"] for e in logs if e["event"] == "closing connection"] == [
        "SASL authentication failed: Unsupported SASL mechanism GSSAPI"]


async def test_per_listener_mechanisms():
    broker = make_broker(**{"listener.name.sasl_plaintext.sasl.enabled.mechanisms":
                            "SCRAM-SHA-512"})
    client = Client(broker)
    response = client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert (response.error_code, response.mechanisms) == (
        ErrorCode.UNSUPPORTED_SASL_MECHANISM, ["SCRAM-SHA-512"])


@pytest.mark.parametrize("user,password,message", [
    ("alice", "wrong", "Authentication failed: Invalid username or password"),
    ("nobody", ALICE_PASSWORD, "Authentication failed: Invalid username or password"),
    ("alice", "", "Authentication failed: password not specified"),
])
async def test_plain_failure_answers_then_closes(broker, user, password, message):
    client = Client(broker)
    with capture_logs() as logs:
        response = plain_login(client, user, password)
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message == message
    assert client.closed_after_delay and client.conn.principal == ANONYMOUS
    lines = [e for e in logs if e["event"] == "closing connection"]
    assert len(lines) == 1
    assert ALICE_PASSWORD not in repr(logs) and "wrong" not in repr(lines)


async def test_plain_malformed_token(broker):
    client = Client(broker)
    client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    response = client.call(SaslAuthenticateRequest(auth_bytes=b"no-nul-here"), 1)
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message == "Invalid SASL/PLAIN response: expected 3 tokens, got 1"
    assert client.closed_after_delay


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_scram_exchange(broker, mechanism):
    client = Client(broker)
    assert client.call(SaslHandshakeRequest(mechanism=mechanism), 1).error_code == 0
    scram = ScramClient(mechanism, "alice", ALICE_PASSWORD)
    first = client.call(SaslAuthenticateRequest(auth_bytes=scram.first()), 2)
    assert first.error_code == 0 and first.auth_bytes.startswith(b"r=" + scram.nonce.encode())
    assert b",i=4096" in first.auth_bytes
    final = client.call(SaslAuthenticateRequest(auth_bytes=scram.final(first.auth_bytes)), 2)
    assert final.error_code == 0
    assert final.auth_bytes == b"v=" + __import__("base64").b64encode(scram.server_signature)
    assert client.conn.principal == KafkaPrincipal("User", "alice")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_scram_wrong_password_gets_the_generic_message(broker, mechanism):
    client = Client(broker)
    client.call(SaslHandshakeRequest(mechanism=mechanism), 1)
    scram = ScramClient(mechanism, "alice", "not-her-password")
    first = client.call(SaslAuthenticateRequest(auth_bytes=scram.first()), 2)
    final = client.call(SaslAuthenticateRequest(auth_bytes=scram.final(first.auth_bytes)), 2)
    assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert final.error_message == ("Authentication failed during authentication due to invalid "
                                   f"credentials with SASL mechanism {mechanism}")
    assert client.closed_after_delay


async def test_scram_unknown_user_fails_at_the_first_message(broker):
    client = Client(broker)
    client.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
    first = client.call(SaslAuthenticateRequest(
        auth_bytes=ScramClient("SCRAM-SHA-256", "nobody", "x").first()), 2)
    assert first.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert first.error_message.endswith("with SASL mechanism SCRAM-SHA-256")
    assert client.closed_after_delay


async def test_v0_flow_raw_tokens(broker):
    client = Client(broker)
    assert client.call(SaslHandshakeRequest(mechanism="PLAIN"), 0).error_code == 0
    assert client.raw(plain_token("alice", ALICE_PASSWORD)) == b""  # an empty size-prefixed token
    assert client.conn.principal == KafkaPrincipal("User", "alice")
    assert metadata(client).error_code == 0


async def test_v0_flow_scram(broker):
    client = Client(broker)
    assert client.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 0).error_code == 0
    scram = ScramClient("SCRAM-SHA-512", "alice", ALICE_PASSWORD)
    server_first = client.raw(scram.first())
    assert server_first.startswith(b"r=")
    assert client.raw(scram.final(server_first)).startswith(b"v=")
    assert client.conn.principal == KafkaPrincipal("User", "alice")


async def test_v0_flow_bad_token_closes_without_answer(broker):
    client = Client(broker)
    client.call(SaslHandshakeRequest(mechanism="PLAIN"), 0)
    assert client.raw(plain_token("alice", "wrong")) is None
    assert client.closed_after_delay


async def test_other_request_during_authenticate_gets_illegal_sasl_state(broker):
    client = Client(broker)
    client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    response = client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert client.closed_after_delay


async def test_other_request_during_authenticate_gets_its_error_response(broker):
    client = Client(broker)
    client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    with capture_logs() as logs:
        response = metadata(client)
    assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE and response.brokers == []
    assert client.closed_after_delay
    assert [e["reason"] for e in logs if e["event"] == "closing connection"] == [
        "SASL authentication failed: Unexpected Kafka request of type DESCRIBE_CLUSTER during "
        "SASL authentication."]


async def test_frame_over_max_receive_size_before_authentication():
    broker = make_broker(**{"sasl.server.max.receive.size": 1000})
    client = Client(broker)
    with capture_logs() as logs:
        feed(client.conn, client.transport, struct.pack(">i", 1001) + b"x" * 100)
    assert client.closed and client.conn.big is None  # never allocated
    reasons = [e["reason"] for e in logs if e["event"] == "closing connection"]
    assert reasons == ["frame size 1001 outside 0..sasl.server.max.receive.size (1000)"]


async def test_authenticated_connection_has_the_request_bound_again():
    broker = make_broker(**{"sasl.server.max.receive.size": 1000})
    client = Client(broker)
    assert plain_login(client).error_code == 0
    response = client.call(ApiVersionsRequest(client_software_name="t" * 2000,
                                              client_software_version="1"), 3)
    assert response is not None and response.error_code == 0 and not client.closed


async def test_reauthentication_and_session_expiry():
    broker = make_broker(**{"connections.max.reauth.ms": 10_000})
    clock = broker.clock
    client = Client(broker)
    assert plain_login(client).session_lifetime_ms == 10_000
    clock.now += 9_000
    assert metadata(client) is not None
    # re-authenticate before the end: same principal, a new session
    assert plain_login(client).session_lifetime_ms == 10_000
    clock.now += 9_000
    assert metadata(client) is not None
    clock.now += 2_000  # past the second session
    with capture_logs() as logs:
        assert metadata(client) is None
    assert client.closed
    reasons = [e["reason"] for e in logs if e["event"] == "closing connection"]
    assert len(reasons) == 1 and reasons[0].startswith("SASL session expired")


async def test_session_lifetime_only_from_v1():
    broker = make_broker(**{"connections.max.reauth.ms": 10_000})
    client = Client(broker)
    response = plain_login(client, version=0)
    assert response.error_code == 0
    broker.clock.now += 10_001
    assert metadata(client) is None  # a v0 client cannot re-authenticate: closed all the same
    assert client.closed


async def test_reauthentication_with_another_principal_fails():
    broker = make_broker(**{"connections.max.reauth.ms": 10_000})
    client = Client(broker)
    plain_login(client)
    broker.clock.now += 5_000
    response = plain_login(client, "admin", ADMIN_PASSWORD)
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message == ("Cannot change principals during re-authentication from "
                                      "User.alice: User.admin")
    assert client.closed_after_delay


async def test_reauthentication_with_another_mechanism_closes():
    broker = make_broker(**{"connections.max.reauth.ms": 10_000})
    client = Client(broker)
    plain_login(client)
    broker.clock.now += 5_000
    assert client.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1).error_code == 0
    scram = ScramClient("SCRAM-SHA-256", "alice", ALICE_PASSWORD)
    assert client.call(SaslAuthenticateRequest(auth_bytes=scram.first()), 2) is None
    assert client.closed_after_delay


async def test_reauthentication_at_most_once_a_second():
    broker = make_broker(**{"connections.max.reauth.ms": 10_000})
    client = Client(broker)
    plain_login(client)
    broker.clock.now += 5_000
    assert plain_login(client).error_code == 0
    broker.clock.now += 500
    # too soon: the handshake is an ordinary request of an authenticated connection
    assert client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == \
        ErrorCode.ILLEGAL_SASL_STATE
    assert not client.closed


async def test_without_reauth_a_handshake_is_illegal_state(broker):
    client = Client(broker)
    plain_login(client)
    broker.clock.now += 10 ** 9
    assert client.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == \
        ErrorCode.ILLEGAL_SASL_STATE
    assert metadata(client) is not None


async def test_oauthbearer_session_ends_with_the_token(broker):
    client = Client(broker)
    now_s = broker.clock.now / 1000
    token = unsecured_jwt({"sub": "alice", "iat": now_s, "exp": now_s + 60})
    assert client.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
    response = client.call(SaslAuthenticateRequest(auth_bytes=oauth_initial_response(token)), 2)
    assert (response.error_code, response.session_lifetime_ms) == (0, 60_000)
    assert client.conn.principal == KafkaPrincipal("User", "alice")
    broker.clock.now += 60_001
    assert metadata(client) is None and client.closed


async def test_oauthbearer_expired_token_error_json_then_failure(broker):
    client = Client(broker)
    now_s = broker.clock.now / 1000
    token = unsecured_jwt({"sub": "alice", "iat": now_s - 120, "exp": now_s - 60})
    client.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1)
    challenge = client.call(SaslAuthenticateRequest(auth_bytes=oauth_initial_response(token)), 2)
    assert (challenge.error_code, challenge.auth_bytes) == (0, b'{"status":"invalid_token"}')
    failed = client.call(SaslAuthenticateRequest(auth_bytes=b"\x01"), 2)
    assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert failed.error_message == '{"status":"invalid_token"}'
    assert client.closed_after_delay


async def test_no_secret_in_any_log_line(broker):
    with capture_logs() as logs:
        for password in ("wrong-one", ALICE_PASSWORD):
            client = Client(broker)
            plain_login(client, "alice", password)
        client = Client(broker)
        client.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)
        scram = ScramClient("SCRAM-SHA-256", "alice", "wrong-two")
        first = client.call(SaslAuthenticateRequest(auth_bytes=scram.first()), 2)
        client.call(SaslAuthenticateRequest(auth_bytes=scram.final(first.auth_bytes)), 2)
    metrics = generate_latest(broker.metrics.registry).decode()
    assert 'reason="SASL authentication failed"' in metrics  # the label has no detail
    for secret in ("wrong-one", "wrong-two", ALICE_PASSWORD, ADMIN_PASSWORD):
        assert secret not in repr(logs) and secret not in metrics
