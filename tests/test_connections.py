"""Connection limits of broker/network/ on fake transports, a fake clock and the sans-I/O timer:
what a connection handles before its answers are taken, requests in flight,
queued.max.request.bytes, connections.max.idle.ms, the per-address quotas and the log lines of
limits. No sockets, no sleeping."""
from __future__ import annotations

import asyncio
import mmap
import struct
from types import SimpleNamespace

import pytest
from structlog.testing import capture_logs

from broker import apis
from broker.client_quotas import ClientQuotas
from broker.features import Features
from broker.cluster import Cluster
from broker.config import BrokerConfig, ConfigError
from broker.metrics import Metrics
from broker.purgatory import Timer
from broker.network.connection import BIG_FRAME_FIRST_READ, QUEUED_ANSWER_BYTES, KafkaConnection
from broker.network.connection_quotas import ConnectionQuotas, LimitLog, resolve_ip_overrides
from broker.network.socket_server import Server
from broker.faults import Faults


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class Transport:
    """What asyncio's socket transport does for the protocol: a write buffer the socket takes
    from (or not: ``sink_open=False`` is a client that never reads), pause_writing past the
    high-water mark, resume_writing under the low one."""

    def __init__(self, protocol, host: str = "10.0.0.1", sink_open: bool = True) -> None:
        self.protocol = protocol
        self.host = host
        self.sink_open = sink_open
        self.sent = bytearray()
        self.buffer = bytearray()
        self.high = 64 * 1024
        self.writing_paused = False
        self.reading_paused = False
        self.closed = False
        self.aborted = False

    def get_extra_info(self, name):
        return (self.host, 40000) if name == "peername" else None

    def set_write_buffer_limits(self, high=None, low=None) -> None:
        self.high = high

    def writelines(self, chunks) -> None:
        data = b"".join(chunks)
        if self.sink_open and not self.buffer:
            self.sent += data
            return
        self.buffer += data
        if len(self.buffer) > self.high and not self.writing_paused:
            self.writing_paused = True
            self.protocol.pause_writing()

    def drain(self) -> None:
        """The client reads everything buffered."""
        self.sent += self.buffer
        self.buffer.clear()
        self.sink_open = True
        if self.writing_paused:
            self.writing_paused = False
            self.protocol.resume_writing()

    def get_write_buffer_size(self) -> int:
        return len(self.buffer)

    def pause_reading(self) -> None:
        self.reading_paused = True

    def resume_reading(self) -> None:
        self.reading_paused = False

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True


def make_broker(**settings):
    clock = Clock()
    broker = SimpleNamespace(config=BrokerConfig({"metrics.port": 0, **settings}), clock=clock,
                             node_id=1, timer=Timer(clock), debug=False, cluster=Cluster(1, 1))
    broker.metrics = Metrics(broker)
    broker.armed_faults = []
    broker.faults = Faults(broker)
    broker.client_quotas = ClientQuotas(None)
    broker.features = Features(broker.config, None, 1, apis.HANDLERS)
    broker.server = Server(broker)
    return broker


def connect(broker, sink_open: bool = True, host: str = "10.0.0.1"):
    conn = KafkaConnection(broker, "PLAINTEXT")
    transport = Transport(conn, host, sink_open)
    conn.connection_made(transport)
    return conn, transport


def feed(conn: KafkaConnection, transport: Transport, data: bytes) -> bytes:
    """Deliver bytes as the transport does, while reading is not paused; returns what is left."""
    while data and not transport.reading_paused and not transport.closed:
        buf = conn.get_buffer(-1)
        n = min(len(buf), len(data))
        buf[:n] = data[:n]
        conn.buffer_updated(n)
        data = data[n:]
    return data


def api_versions(correlation_id: int, client_id: str = "t") -> bytes:
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id.encode()
    return struct.pack(">i", len(body)) + body


def correlation_ids(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(data):
        size = struct.unpack_from(">i", data, pos)[0]
        out.append(struct.unpack_from(">i", data, pos + 4)[0])
        pos += 4 + size
    return out


async def turn() -> None:
    """Let callbacks the connection scheduled with call_soon run."""
    for _ in range(3):
        await asyncio.sleep(0)


@pytest.fixture
def held_answers(monkeypatch):
    """ApiVersions handled by a stand-in that keeps each respond() for the test to call."""
    held = []
    handler = apis.HANDLERS[apis.API_VERSIONS_KEY]
    monkeypatch.setattr(handler, "handle", lambda broker, ctx, req, respond: held.append(
        (ctx.header.correlation_id, ctx, respond)))
    return held


def answer(held, i: int = 0) -> None:
    from protocol.messages import ApiVersionsResponse
    _, ctx, respond = held.pop(i)
    respond(ApiVersionsResponse(error_code=0, api_keys=[]))


# ------------------------------------------------------------------ frames larger than the read buffer

def padded_api_versions(correlation_id: int, size: int) -> bytes:
    """An ApiVersions v0 request padded to a frame of ``size`` bytes (trailing bytes after a
    valid body are ignored, as Kafka does)."""
    body = struct.pack(">hhih", 18, 0, correlation_id, 1) + b"t"
    body += b"\0" * (size - len(body))
    return struct.pack(">i", len(body)) + body


@pytest.mark.parametrize("size", [40 * 1024, 300 * 1024, 3 * 1024 * 1024])
async def test_large_frames_arriving_in_pieces_are_handled_once_whole(size):
    """A frame past the read buffer is read straight into its own buffer (a growing bytearray,
    or from MAPPED_FRAME_MIN a mapping of its size) and handled when its last byte arrives;
    the small request behind it is still answered, in order."""
    broker = make_broker()
    conn, transport = connect(broker)
    data = api_versions(1) + padded_api_versions(2, size) + api_versions(3)
    for piece in range(0, len(data), 7919):  # reads of odd sizes, as a socket gives them
        assert feed(conn, transport, data[piece:piece + 7919]) == b""
    assert correlation_ids(bytes(transport.sent)) == [1, 2, 3]
    assert conn.big is None and not conn.closing


async def test_a_large_frame_holds_what_arrived_not_what_it_declared():
    """Issue 14, defect 3: the declared size is not allocated ahead of its bytes. Under
    MAPPED_FRAME_MIN the buffer is at most twice what arrived (or BIG_FRAME_FIRST_READ); from
    it, a mapping that the system backs with pages only as bytes are written."""
    broker = make_broker()
    conn, transport = connect(broker)
    feed(conn, transport, struct.pack(">i", 200 * 1024) + b"\0" * 1024)
    assert isinstance(conn.big, bytearray) and len(conn.big) == BIG_FRAME_FIRST_READ
    feed(conn, transport, b"\0" * BIG_FRAME_FIRST_READ)
    assert len(conn.big) == 2 * BIG_FRAME_FIRST_READ  # grown as bytes came, never past the frame
    conn, transport = connect(broker)
    feed(conn, transport, struct.pack(">i", 100_000_000) + b"\0" * 1024)
    assert isinstance(conn.big, mmap.mmap) and conn.big_filled == 1024


# ------------------------------------------------------------------ answers a client never takes

async def test_a_client_that_does_not_read_stops_being_served_once_its_answers_pile_up():
    """Issue 14, defect 4: every request of a read used to be handled, its answer made, before
    reading paused. Now a request waits while the connection's answers are over
    QUEUED_ANSWER_BYTES, so what the broker holds for it is that plus one answer."""
    broker = make_broker()
    conn, transport = connect(broker, sink_open=False)
    requests = b"".join(api_versions(i) for i in range(700))   # about 14 KiB: one read
    assert feed(conn, transport, requests) == b""
    answered = correlation_ids(bytes(transport.buffer))
    one_answer = len(transport.buffer) // len(answered)
    assert 0 < len(answered) < 700
    assert len(transport.buffer) <= QUEUED_ANSWER_BYTES + one_answer
    assert transport.reading_paused
    # the client reads: the requests left in the read buffer are handled, in order
    transport.drain()
    await turn()
    while transport.writing_paused or transport.buffer:
        transport.drain()
        await turn()
    assert correlation_ids(bytes(transport.sent)) == list(range(700))
    assert not transport.reading_paused


async def test_requests_in_flight_are_bounded_before_they_are_handled(held_answers):
    """queued.max.requests per connection: the request past it stays unread in the buffer, not
    handled and then paused."""
    broker = make_broker(**{"queued.max.requests": 3})
    conn, transport = connect(broker)
    feed(conn, transport, b"".join(api_versions(i) for i in range(10)))
    assert [c for c, _, _ in held_answers] == [0, 1, 2]
    assert transport.reading_paused
    answer(held_answers)
    await turn()
    assert [c for c, _, _ in held_answers] == [1, 2, 3]
    while held_answers:
        answer(held_answers)
        await turn()
    assert correlation_ids(bytes(transport.sent)) == list(range(10))
    assert not transport.reading_paused


async def test_nothing_after_a_parked_request_is_handled_until_it_is_answered(monkeypatch):
    """A long-poll Fetch parks its request: the requests behind it wait unread, as on Kafka
    (one request at a time per connection), so answers that pile up on a connection whose
    parked fetches all complete at once stay bounded."""
    held = []

    def park_first(broker, ctx, req, respond):
        if ctx.header.correlation_id == 0:
            ctx.park()
        held.append((ctx.header.correlation_id, respond))

    monkeypatch.setattr(apis.HANDLERS[apis.API_VERSIONS_KEY], "handle", park_first)
    broker = make_broker()
    conn, transport = connect(broker)
    feed(conn, transport, b"".join(api_versions(i) for i in range(3)))
    assert [c for c, _ in held] == [0] and transport.reading_paused
    from protocol.messages import ApiVersionsResponse
    held.pop()[1](ApiVersionsResponse(error_code=0, api_keys=[]))
    await turn()
    assert [c for c, _ in held] == [1, 2] and not transport.reading_paused


async def test_a_throttled_answer_goes_at_once_then_the_connection_reads_nothing(monkeypatch):
    """A client quota's throttle (KIP-219, Kafka's ThrottledChannel): the answer is sent at
    once, then the requests behind it wait unread until the throttle time is over on the
    broker's clock."""
    seen = []

    def throttle_first(broker, ctx, req, respond):
        seen.append(ctx.header.correlation_id)
        if ctx.header.correlation_id == 0:
            ctx.throttle_ms = 500
        from protocol.messages import ApiVersionsResponse
        respond(ApiVersionsResponse(error_code=0, api_keys=[]))

    monkeypatch.setattr(apis.HANDLERS[apis.API_VERSIONS_KEY], "handle", throttle_first)
    broker = make_broker()
    conn, transport = connect(broker)
    feed(conn, transport, b"".join(api_versions(i) for i in range(3)))
    assert seen == [0] and correlation_ids(bytes(transport.sent)) == [0]
    assert transport.reading_paused
    broker.clock.now += 499
    broker.timer.advance(broker.clock.now)
    await turn()
    assert seen == [0] and transport.reading_paused
    broker.clock.now += 1
    broker.timer.advance(broker.clock.now)
    await turn()
    assert seen == [0, 1, 2] and correlation_ids(bytes(transport.sent)) == [0, 1, 2]
    assert not transport.reading_paused and conn.throttled_until == 0


async def test_queued_max_request_bytes_holds_every_connection_at_the_limit(held_answers):
    """Like Kafka's memory pool (not strict): a request is admitted while any of
    queued.max.request.bytes is left, so one may go past it; then no connection starts a request
    until answers give bytes back."""
    broker = make_broker(**{"queued.max.request.bytes": 1000, "socket.request.max.bytes": 1000})
    a, ta = connect(broker)
    b, tb = connect(broker, host="10.0.0.2")
    big = "x" * 430                                     # 440-byte requests
    feed(a, ta, b"".join(api_versions(i, big) for i in range(4)))
    assert [c for c, _, _ in held_answers] == [0, 1, 2]  # 0, 440, 880 < 1000: admitted
    assert broker.server.memory_pool.used == 3 * 440
    feed(b, tb, api_versions(100, big))
    assert [c for c, _, _ in held_answers] == [0, 1, 2]
    assert ta.reading_paused and tb.reading_paused
    answer(held_answers)                                 # 880 < 1000 again: both may try
    await turn()
    assert [c for c, _, _ in held_answers] == [1, 2, 3]  # a's waited longer
    answer(held_answers)
    answer(held_answers)
    await turn()
    assert 100 in [c for c, _, _ in held_answers]
    while held_answers:
        answer(held_answers)
        await turn()
    assert broker.server.memory_pool.used == 0
    assert correlation_ids(bytes(ta.sent)) == [0, 1, 2, 3]
    assert correlation_ids(bytes(tb.sent)) == [100]


async def test_a_closed_connection_gives_its_request_bytes_back(held_answers):
    broker = make_broker(**{"queued.max.request.bytes": 1000, "socket.request.max.bytes": 1000})
    a, ta = connect(broker)
    feed(a, ta, b"".join(api_versions(i, "x" * 430) for i in range(2)) + b"\0\0\0\x10\0")
    assert broker.server.memory_pool.used == 2 * 440 + 16     # two requests, one partial frame
    a.connection_lost(None)
    assert broker.server.memory_pool.used == 0
    answer(held_answers)                                   # answered after the close
    assert broker.server.memory_pool.used == 0


# ------------------------------------------------------------------ disconnect listeners

async def test_disconnect_listeners_are_told_once_of_each_closed_connection(held_answers):
    """Kafka's ConnectionDisconnectListener: every listener hears of each connection that
    closed, whoever closed it, exactly once and only then; one that fails does not keep the
    others from hearing."""
    broker = make_broker()
    told, also = [], []

    def failing(conn):
        raise RuntimeError("a listener's bug")
    broker.server.add_disconnect_listener(told.append)
    broker.server.add_disconnect_listener(failing)
    broker.server.add_disconnect_listener(also.append)
    a, ta = connect(broker)
    b, tb = connect(broker, host="10.0.0.2")
    feed(a, ta, api_versions(1))
    assert told == [] and also == []                    # open, a request in flight: nothing
    a.connection_lost(None)                              # the client went away
    assert told == [a] and also == [a]
    feed(b, tb, struct.pack(">i", -1))                   # a bad frame: the broker closes it
    assert tb.closed and told == [a]                     # closing is not closed yet
    b.connection_lost(None)                              # the transport says it is gone
    assert told == [a, b] and also == [a, b]
    answer(held_answers)                                 # a's answer after its close
    assert told == [a, b]


# ------------------------------------------------------------------ connections.max.idle.ms

async def test_idle_connections_are_closed_on_the_injected_clock():
    broker = make_broker(**{"connections.max.idle.ms": 1000})
    server, clock, timer = broker.server, broker.clock, broker.timer
    server.schedule_idle_check()
    quiet, qt = connect(broker)
    busy, bt = connect(broker)
    stuck, st = connect(broker, sink_open=False)        # answers the client never reads
    draining, dt = connect(broker, sink_open=False)     # answers the client reads slowly
    for conn, transport in ((stuck, st), (draining, dt)):
        feed(conn, transport, b"".join(api_versions(i) for i in range(400)))
    clock.now += 600
    timer.advance(clock.now)
    feed(busy, bt, api_versions(1))
    del dt.buffer[:1000]                                # the socket took some
    clock.now += 401
    timer.advance(clock.now)
    assert (qt.closed, st.closed, bt.closed, dt.closed) == (True, True, False, False)
    assert st.aborted and not qt.aborted                # unsent answers are dropped
    clock.now += 600                                    # busy read last at +600
    timer.advance(clock.now)
    assert (bt.closed, dt.closed) == (True, False)
    clock.now += 401                                    # draining was seen sending at +1001
    timer.advance(clock.now)
    assert dt.closed
    value = broker.metrics.registry.get_sample_value(
        "kafka_connections_rejected_total", {"reason": "connections.max.idle.ms"})
    assert value == 4


async def test_idle_connections_stay_when_the_idle_timeout_is_off():
    broker = make_broker(**{"connections.max.idle.ms": -1})
    broker.server.schedule_idle_check()
    conn, transport = connect(broker)
    broker.clock.now += 10**9
    broker.timer.advance(broker.clock.now)
    assert not transport.closed
    assert len(broker.timer) == 0


# ------------------------------------------------------------------ quotas and their log lines

def test_connection_quotas_count_per_address_with_overrides():
    quotas = ConnectionQuotas(3, 1, resolve_ip_overrides(
        BrokerConfig({"max.connections.per.ip.overrides": "localhost:2"})[
            "max.connections.per.ip.overrides"]))
    assert quotas.limit("127.0.0.1") == 2
    assert quotas.inc("127.0.0.1") and quotas.inc("127.0.0.1")
    assert not quotas.inc("127.0.0.1")
    assert quotas.inc("10.0.0.9")
    assert not quotas.inc("10.0.0.9")
    assert not quotas.slot_available()
    quotas.dec("127.0.0.1")
    assert quotas.slot_available() and quotas.counts == {"127.0.0.1": 1, "10.0.0.9": 1}


def test_connection_settings_are_checked_as_kafka_checks_them():
    config = BrokerConfig({"max.connections.per.ip": 0,
                           "max.connections.per.ip.overrides": "::1:5, 10.0.0.1:7"})
    assert config["max.connections.per.ip.overrides"] == (("::1", 5), ("10.0.0.1", 7))
    assert config["max.connections"] == 2147483647
    assert config["connections.max.idle.ms"] == 600000
    assert config["queued.max.request.bytes"] == -1
    for bad in ({"max.connections.per.ip": 0},
                {"queued.max.request.bytes": 1000},
                {"max.connections.per.ip.overrides": "host 1:5"},
                {"max.connections.per.ip.overrides": "10.0.0.1"},
                {"max.connections": -1}):
        with pytest.raises(ConfigError):
            BrokerConfig(bad)


def test_a_flood_of_refusals_is_one_line_per_interval_with_the_count():
    clock = Clock()
    timer = Timer(clock)
    limits = LimitLog(timer, interval_ms=10_000)
    with capture_logs() as logs:
        for _ in range(4000):
            limits.note("warning", "connections refused", host="10.0.0.1", limit=2)
            clock.now += 1
        timer.advance(clock.now + 10_000)
        timer.advance(clock.now + 30_000)
    assert [(e["event"], e["count"]) for e in logs] == [
        ("connections refused", 1), ("connections refused", 3999)]
    assert len(timer) == 0


def test_close_reasons_become_few_metric_labels():
    """What a client chose (a declared frame size, an api key, a version) does not reach the
    kafka_connections_rejected_total labels: a client must not grow the metric without bound."""
    from broker.network.connection import reason_label
    labels = {reason_label(f"frame size {n} outside 0..socket.request.max.bytes (104857600)")
              for n in (104857601, 2_000_000_000)}
    labels |= {reason_label(f"unknown api key {k}") for k in (999, 31000)}
    labels |= {reason_label(f"malformed Fetch v{v} request: truncated at byte {v * 7}")
               for v in (4, 11)}
    assert labels == {"frame size N outside N..socket.request.max.bytes", "unknown api key N",
                      "malformed Fetch vN request"}
