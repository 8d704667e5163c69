"""The same TLS scenarios against Apache Kafka 4.3.1 and kbroker, both with an SSL listener
beside a PLAINTEXT one, the same certificates (`kbroker certs`: Kafka reads the PKCS12 keystore
and truststore) and ssl.client.auth=required: every real client with its certificate produces
and consumes in a group with the same outcome on both, clients without one fail on both, and a
raw TLS client negotiates the same protocol versions and is refused the same ones."""
from __future__ import annotations

import socket
import ssl

import pytest

pytestmark = pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated")

from tests.conformance.kafka_server import KafkaServer
from tests.support import free_port, unique

from . import tls_clients
from .conftest import SslBroker

MTLS = {"ssl.client.auth": "required", "ssl.truststore.type": "PKCS12",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=Development,O=kbroker$/$1/L,DEFAULT"}


@pytest.fixture(scope="module")
def kafka_ssl(certs):
    server = KafkaServer()
    ssl_port = free_port()
    while ssl_port in (server.port, server.controller_port):
        ssl_port = free_port()
    server.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{server.port},SSL://127.0.0.1:{ssl_port},"
                     f"CONTROLLER://127.0.0.1:{server.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{server.port},"
                                f"SSL://127.0.0.1:{ssl_port},"
                                f"CONTROLLER://127.0.0.1:{server.controller_port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": certs["paths"]["broker.p12"],
        "ssl.keystore.password": certs["password"],
        "ssl.truststore.location": certs["paths"]["truststore.p12"],
        "ssl.truststore.password": certs["password"], **MTLS,
        "group.initial.rebalance.delay.ms": 0})
    server.ssl_bootstrap = f"127.0.0.1:{ssl_port}"
    server.ssl_port = ssl_port
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kbroker_ssl(certs):
    broker = SslBroker(certs, **MTLS, **{
        "ssl.truststore.location": certs["paths"]["truststore.p12"],
        "ssl.truststore.password": certs["password"]})
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(params=["kafka", "kbroker"])
def target(request):
    return request.getfixturevalue(f"{request.param}_ssl")


@pytest.mark.parametrize("client", tls_clients.CLIENTS)
def test_client_with_certificate(target, certs, client):
    topic = unique(f"dtls-{client}")
    if client in ("kafka-python", "aiokafka", "confluent-kafka", "kcat"):
        tls_clients.create_topic(target.bootstrap, topic)
    outcome = tls_clients.SCENARIOS[client](target.ssl_bootstrap, topic, unique("dtls-g"),
                                            certs, client_cert=True)
    assert outcome == tls_clients.expected()


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "java"])
def test_client_without_certificate_fails(target, certs, client):
    from .test_tls_clients import run_briefly
    topic = unique(f"dtls-none-{client}")
    tls_clients.create_topic(target.bootstrap, topic)
    with pytest.raises(Exception) as refused:  # noqa: B017 - each client raises its own kind
        run_briefly(client, target.ssl_bootstrap, topic, certs)
    if client == "java":
        # the broker's TLS alert makes it an authentication failure, which the Java client does
        # not retry: it gives up at once rather than at its API timeout
        assert "SslAuthenticationException" in str(refused.value), refused.value


def handshake(certs, port: int, version: ssl.TLSVersion | None, with_certificate=True):
    """The negotiated protocol version, or "refused" when the handshake (or the first read: a
    TLS 1.3 server refuses a client certificate after the client's Finished) fails."""
    ctx = ssl.create_default_context(cafile=certs["paths"]["ca.crt"])
    if with_certificate:
        ctx.load_cert_chain(certs["paths"]["client.crt"], certs["paths"]["client.key"])
    if version is not None:
        ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        ctx.maximum_version = version
        if version < ssl.TLSVersion.TLSv1_2:
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let OpenSSL offer TLS 1.1 at all
    try:
        with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                             server_hostname="localhost") as sock:
            request = bytes.fromhex("0012000000000001") + b"\x00\x04test"
            sock.sendall(len(request).to_bytes(4, "big") + request)
            if len(sock.recv(4)) != 4:
                return "closed"
            return sock.version()
    except ssl.SSLError as exc:
        return "refused" if "ALERT" in (exc.reason or "") else f"no alert: {exc.reason}"
    except ConnectionError as exc:
        return f"no alert: {type(exc).__name__}"


@pytest.mark.parametrize("version", [None, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_1])
def test_protocol_versions(kafka_ssl, kbroker_ssl, certs, version):
    on_kafka = handshake(certs, kafka_ssl.ssl_port, version)
    on_kbroker = handshake(certs, kbroker_ssl.ssl_port, version)
    assert on_kbroker == on_kafka
    assert on_kafka == {None: "TLSv1.3", ssl.TLSVersion.TLSv1_2: "TLSv1.2",
                        ssl.TLSVersion.TLSv1_1: "refused"}[version]


def test_raw_client_without_certificate(kafka_ssl, kbroker_ssl, certs):
    on_kafka = handshake(certs, kafka_ssl.ssl_port, None, with_certificate=False)
    on_kbroker = handshake(certs, kbroker_ssl.ssl_port, None, with_certificate=False)
    # both send a TLS alert (Kafka's JSSE bad_certificate, OpenSSL's certificate_required)
    assert on_kafka == on_kbroker == "refused"


def test_garbage_instead_of_a_client_hello(kafka_ssl, kbroker_ssl):
    outcomes = []
    for port in (kafka_ssl.ssl_port, kbroker_ssl.ssl_port):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(bytes.fromhex("0000000e00120000000000010004") + b"test")
            try:
                outcomes.append(sock.recv(1024)[:1])
            except ConnectionResetError:
                outcomes.append(b"reset")
    # both answer a plaintext request on the SSL port with a TLS alert record (0x15) or close
    assert outcomes[1] in (outcomes[0], b"", b"reset"), outcomes
