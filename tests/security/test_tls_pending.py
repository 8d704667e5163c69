"""Connections of an SSL listener that never finish their TLS handshake (issue 5): raw sockets
that send nothing, half a ClientHello, or a whole one and then nothing. The broker runs on this
test's own loop, asyncio's and uvloop's.

Each is closed once ssl.handshake.timeout.ms has passed since it was accepted, with one line
saying so, and gives back its slot of the connection quotas. Until its first TLS record is whole
a connection holds no TLS state (no SSL object, no KafkaConnection) and little memory; a
ClientHello that arrives in pieces still makes a working connection."""
from __future__ import annotations

import asyncio
import gc
import ssl
import struct
import tracemalloc

import pytest
from structlog.testing import capture_logs

from broker.broker import Broker
from protocol.framing import encode_request
from protocol.messages import ApiVersionsRequest

from .test_tls_listener import LOOPS, broker_config, client_context, run

BOUND_MS = 300
#: the issue's target for one pending connection
TARGET_BYTES = 30 * 1024
#: how long a test waits for something the broker must do at once or after BOUND_MS, before
#: it fails (a guard against hanging, not a measurement)
GUARD_S = 10


def client_hello(certs) -> bytes:
    """A real client's ClientHello (one TLS record)."""
    return client_handshake(certs)[1]


def client_handshake(certs):
    """A TLS client over memory BIOs: (its SSL object and BIOs, its ClientHello)."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = client_context(certs, False).wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return (obj, incoming, outgoing), outgoing.read()


async def until(condition, what: str) -> None:
    """Wait (in small steps) for something the broker does as the bytes arrive."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GUARD_S
    while not condition():
        assert loop.time() < deadline, f"not within {GUARD_S} s: {what}"
        await asyncio.sleep(0.005)


async def read_until_closed(reader) -> bytes:
    """What the broker sends until it closes the connection."""
    received = b""
    while True:
        try:
            chunk = await reader.read(65536)
        except ConnectionResetError:
            return received
        if not chunk:
            return received
        received += chunk


async def stalled_handshakes(certs):
    broker = Broker(broker_config(certs, **{"ssl.handshake.timeout.ms": BOUND_MS}))
    await broker.start()
    loop = asyncio.get_running_loop()
    try:
        server = broker.server
        port = server.bound["SSL"][1]
        hello = client_hello(certs)
        with capture_logs() as logs:
            started = loop.time()
            clients = {}
            for name, first in (("silent", b""), ("half", hello[:len(hello) // 2]),
                                ("whole", hello)):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(first)
                clients[name] = (reader, writer)
            received = await asyncio.wait_for(asyncio.gather(
                *(read_until_closed(reader) for reader, _ in clients.values())), GUARD_S)
            waited = loop.time() - started
            peers = {name: "%s:%d" % writer.get_extra_info("sockname")[:2]
                     for name, (_, writer) in clients.items()}
            for _, writer in clients.values():
                writer.close()
            await until(lambda: server.quotas.total == 0, "every slot given back")
            # the listener still serves a real client
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=client_context(certs, False), server_hostname="localhost")
            writer.write(encode_request(18, 0, 1, "after", ApiVersionsRequest()))
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), GUARD_S))[0]
            answer = await reader.readexactly(size)
            writer.close()
        return dict(zip(clients, received)), waited, peers, logs, len(answer), \
            len(server.handshaking)
    finally:
        await broker.stop()


@pytest.mark.parametrize("loop_name", LOOPS)
def test_handshakes_that_never_finish_are_closed_after_the_bound(certs, loop_name):
    received, waited, peers, logs, answer_size, still_handshaking = run(
        loop_name, stalled_handshakes, certs)
    # none was closed before the bound (counted from the client's connect, before the accept)
    assert waited >= BOUND_MS / 1000 * 0.95
    # only the client that sent a whole ClientHello got an answer (the server's first flight);
    # no alert or anything else went to the others
    assert received["silent"] == b"" and received["half"] == b""
    assert received["whole"][:1] == b"\x16"
    closing = [e for e in logs if e["event"] == "closing connection"]
    assert sorted(e["peer"] for e in closing) == sorted(peers.values()), closing
    assert {e["reason"] for e in closing} == {"TLS handshake did not finish in time"}
    assert {e["listener"] for e in closing} == {"SSL"}
    assert not [e for e in logs if e.get("log_level") in ("error", "critical")], logs
    assert still_handshaking == 0
    assert answer_size > 0


async def pending_memory(certs, count: int):
    broker = Broker(broker_config(certs, **{"ssl.handshake.timeout.ms": 600_000}))
    await broker.start()
    try:
        server = broker.server
        port = server.bound["SSL"][1]
        hello = client_hello(certs)
        half = hello[:len(hello) // 2]
        clients = []

        async def connect(n: int) -> None:
            for i in range(n):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(half if i % 2 else b"")
                clients.append(writer)
            expected = len(clients)
            await until(lambda: len(server.handshaking) == expected and sum(
                len(p.head) for p in server.handshaking) == expected // 2 * len(half),
                "every connection accepted and its bytes read")

        await connect(20)  # the first ones make the loop's lasting structures
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            await connect(count)
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        pending = list(server.handshaking)
        state = {"handshaking": len(pending),
                 "with_tls_state": sum(p.conn is not None for p in pending),
                 "kafka_connections": len([c for c in server.connections
                                           if c.listener == "SSL"])}
        with capture_logs() as logs:
            for writer in clients:
                writer.close()
            await until(lambda: not server.handshaking and server.quotas.total == 0,
                        "the closed connections forgotten")
        return grown / count, state, logs
    finally:
        await broker.stop()


@pytest.mark.parametrize("loop_name", LOOPS)
def test_pending_connections_hold_no_tls_state_and_little_memory(certs, loop_name):
    count = 200
    per_connection, state, logs = run(loop_name, pending_memory, certs, count)
    # before: asyncio's SSLProtocol, its SSL object and a zeroed 256 KiB read buffer each
    assert per_connection < TARGET_BYTES, f"{per_connection / 1024:.1f} KiB per connection"
    assert state == {"handshaking": count + 20, "with_tls_state": 0, "kafka_connections": 0}
    closing = [e for e in logs if e["event"] == "closing connection"]
    assert len(closing) == count + 20
    assert {e["reason"] for e in closing} == {
        "TLS handshake failed: the client closed the connection"}


async def hello_in_pieces(certs):
    broker = Broker(broker_config(certs))
    await broker.start()
    try:
        server = broker.server
        port = server.bound["SSL"][1]
        (obj, incoming, outgoing), hello = client_handshake(certs)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        # three bytes (not even a record header), then up to the last byte, then the rest
        for start, sent in ((0, 3), (3, len(hello) - 1)):
            writer.write(hello[start:sent])
            await until(lambda: server.handshaking and
                        len(next(iter(server.handshaking)).head) == sent, "the piece read")
            assert next(iter(server.handshaking)).conn is None
        writer.write(hello[-1:])
        while True:
            data = await asyncio.wait_for(reader.read(65536), GUARD_S)
            assert data, "closed during the handshake"
            incoming.write(data)
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
        writer.write(outgoing.read())  # the client's Finished
        obj.write(encode_request(18, 0, 7, "pieces", ApiVersionsRequest()))
        writer.write(outgoing.read())
        answer = b""
        while len(answer) < 4 or len(answer) < 4 + struct.unpack(">i", answer[:4])[0]:
            data = await asyncio.wait_for(reader.read(65536), GUARD_S)
            assert data, "closed before the answer"
            incoming.write(data)
            while True:
                try:
                    answer += obj.read(65536)
                except ssl.SSLWantReadError:
                    break
        writer.close()
        return struct.unpack(">i", answer[4:8])[0]
    finally:
        await broker.stop()


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_client_hello_in_pieces_makes_a_working_connection(certs, loop_name):
    assert run(loop_name, hello_in_pieces, certs) == 7  # the answer's correlation id


async def pending_when_its_node_goes_down(certs):
    broker = Broker(broker_config(certs, nodes=2))
    await broker.start()
    try:
        server = broker.server
        node = broker.cluster.node_ids[1]
        ports = {n: server.node_bound[("SSL", n)][1] for n in broker.cluster.node_ids}
        with capture_logs() as logs:
            clients = [await asyncio.open_connection("127.0.0.1", port)
                       for port in ports.values()]
            await until(lambda: len(server.handshaking) == 2, "both accepted")
            closed = server.node_down(node)
            down = await asyncio.wait_for(read_until_closed(clients[1][0]), GUARD_S)
            left = [(p.node, p.conn) for p in server.handshaking]
            total = server.quotas.total
            for _, writer in clients:
                writer.close()
        return closed, down, left, total, broker.cluster.node_ids, logs
    finally:
        await broker.stop()


def test_a_node_going_down_closes_its_pending_handshakes(certs):
    closed, down, left, total, (up, node), logs = run("uvloop", pending_when_its_node_goes_down,
                                                      certs)
    assert closed == 1 and down == b""
    # the other node's pending connection stays, and holds the only slot
    assert left == [(up, None)] and total == 1
    closing = [e for e in logs if e["event"] == "closing connection"]
    assert [e["reason"] for e in closing] == [f"node {node} is down"]
