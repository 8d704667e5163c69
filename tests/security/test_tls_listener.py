"""An SSL listener of a broker running on this test's own event loop, under asyncio's default
loop and under uvloop (the CLI's): KafkaConnection, a BufferedProtocol, over TLS transports; the
principal each connection gets; and what happens to a client that sends no TLS, which closes
only its own connection with one log line and gives back its slot of the connection quotas."""
from __future__ import annotations

import asyncio
import ssl
import struct

import pytest
import uvloop
from structlog.testing import capture_logs

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.security import ANONYMOUS, KafkaPrincipal
from protocol.framing import encode_request, read_response_header
from protocol.messages import APIS, ApiVersionsRequest, MetadataRequest

VERSIONS = ApiVersionsRequest(client_software_name="tls-test", client_software_version="1")
LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


def run(loop_name: str, coroutine_function, *args):
    loop = LOOPS[loop_name]()
    try:
        return loop.run_until_complete(coroutine_function(*args))
    finally:
        loop.close()


def broker_config(certs, **more) -> BrokerConfig:
    return BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": certs["paths"]["broker.p12"],
        "ssl.keystore.password": certs["password"], "ssl.client.auth": "requested",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": certs["paths"]["ca.crt"],
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*?),O=kbroker$/$2:$1/",
        "metrics.port": 0, **more})


def client_context(certs, with_certificate: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=certs["paths"]["ca.crt"])
    if with_certificate:
        ctx.load_cert_chain(certs["paths"]["client.crt"], certs["paths"]["client.key"])
    return ctx


async def call(reader, writer, request, version: int, correlation_id: int):
    api = APIS[type(request).api_key]
    writer.write(encode_request(api.key, version, correlation_id, "tls-test", request))
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    frame = await reader.readexactly(size)
    got, offset = read_response_header(frame, api.response_header_version(version))
    assert got == correlation_id
    return api.response.decode(frame, version, offset)


async def principals_and_requests(certs):
    broker = Broker(broker_config(certs))
    await broker.start()
    try:
        port = broker.server.bound["SSL"][1]
        seen = {}
        for with_certificate in (True, False):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client_context(certs, with_certificate),
                server_hostname="localhost")
            versions = await call(reader, writer, VERSIONS, 3, 1)
            metadata = await call(reader, writer, MetadataRequest(topics=None), 12, 2)
            # a request larger than the read buffer, in many TLS records
            big = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=f"t{i:05d}")
                                          for i in range(6000)],
                                  allow_auto_topic_creation=False)
            many = await call(reader, writer, big, 12, 3)
            conns = [c for c in broker.server.connections if c.listener == "SSL"]
            assert len(conns) == 1
            seen[with_certificate] = (conns[0].principal, versions.error_code,
                                      [b.port for b in metadata.brokers], len(many.topics))
            writer.close()
            await writer.wait_closed()
            for _ in range(100):
                if not any(c.listener == "SSL" for c in broker.server.connections):
                    break
                await asyncio.sleep(0.01)
        return seen, broker.server.bound["SSL"][1]
    finally:
        await broker.stop()


@pytest.mark.parametrize("loop_name", LOOPS)
def test_principal_from_the_client_certificate(certs, loop_name):
    seen, ssl_port = run(loop_name, principals_and_requests, certs)
    assert seen[True] == (KafkaPrincipal("User", "Development:kbroker-client"), 0, [ssl_port],
                          6000)
    assert seen[False] == (ANONYMOUS, 0, [ssl_port], 6000)


async def garbage_and_then_a_good_client(certs):
    broker = Broker(broker_config(certs))
    await broker.start()
    try:
        port = broker.server.bound["SSL"][1]
        with capture_logs() as logs:
            # a Kafka request where a ClientHello should be
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(encode_request(18, 0, 1, "plaintext-client", ApiVersionsRequest()))
            closed_with = await asyncio.wait_for(reader.read(), 10)
            writer.close()
            # the listener still serves others
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client_context(certs, True), server_hostname="localhost")
            versions = await call(reader, writer, VERSIONS, 3, 1)
            writer.close()
            await writer.wait_closed()
            for _ in range(100):
                if broker.server.quotas.total == 0:
                    break
                await asyncio.sleep(0.01)
        return closed_with, versions.error_code, broker.server.quotas.total, logs
    finally:
        await broker.stop()


@pytest.mark.parametrize("loop_name", LOOPS)
def test_no_tls_closes_only_that_connection_with_one_line(certs, loop_name):
    closed_with, error, quota_total, logs = run(loop_name, garbage_and_then_a_good_client, certs)
    assert closed_with == b""
    assert error == 0
    assert quota_total == 0
    closing = [e for e in logs if e["event"] == "closing connection"]
    assert len(closing) == 1, logs
    assert closing[0]["listener"] == "SSL"
    assert closing[0]["reason"].startswith("TLS handshake failed:"), closing
    assert not [e for e in logs if e.get("log_level") in ("error", "critical")], logs


async def unmapped_certificate(certs):
    broker = Broker(broker_config(certs, **{
        "ssl.principal.mapping.rules": "RULE:^CN=nobody,.*$/nobody/"}))
    await broker.start()
    try:
        port = broker.server.bound["SSL"][1]
        with capture_logs() as logs:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client_context(certs, True), server_hostname="localhost")
            writer.write(encode_request(18, 0, 1, "unmapped", ApiVersionsRequest()))
            try:
                answer = await asyncio.wait_for(reader.read(), 10)
            except (ConnectionError, ssl.SSLError):
                answer = b""
            writer.close()
        return answer, logs
    finally:
        await broker.stop()


def test_certificate_no_rule_maps_is_closed(certs):
    answer, logs = run("uvloop", unmapped_certificate, certs)
    assert answer == b""
    closing = [e for e in logs if e["event"] == "closing connection"]
    assert len(closing) == 1
    assert "No rules apply to CN=kbroker-client,OU=Development,O=kbroker" in closing[0]["reason"]


def test_healthcheck_of_a_broker_with_only_an_ssl_listener(certs, capsys):
    """`kbroker healthcheck` speaks TLS to an SSL listener when there is no PLAINTEXT one."""
    from broker.cli import healthcheck
    from broker.testing.embedded import EmbeddedBroker
    from tests.support import free_port
    port = free_port()
    settings = {"listeners": f"SSL://127.0.0.1:{port}",
                "listener.security.protocol.map": "SSL:SSL",
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": certs["paths"]["broker.p12"],
                "ssl.keystore.password": certs["password"]}
    with EmbeddedBroker(settings) as kafka:
        assert healthcheck(kafka.config) == 0
    assert "healthy" in capsys.readouterr().out.splitlines()
    assert healthcheck(kafka.config) == 1  # stopped
