"""Kafka's connection limits on a real broker process (issue 14, defects 4 and 5): clients that
never read their answers, max.connections, max.connections.per.ip and its overrides,
connections.max.idle.ms."""
from __future__ import annotations

import json
import socket
import struct
import time
import urllib.request

from protocol import messages as m
from tests.support import BrokerProcess, RawClient, free_port, wait_until


def rss_kib(broker: BrokerProcess) -> int:
    with open(f"/proc/{broker.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def api_versions_frame(correlation_id: int) -> bytes:
    body = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"test"
    return struct.pack(">i", len(body)) + body


def answered(sock: socket.socket, timeout: float) -> bool:
    """Whether an ApiVersions sent on ``sock`` gets its answer within ``timeout``."""
    sock.sendall(api_versions_frame(9))
    sock.settimeout(timeout)
    try:
        head = sock.recv(4, socket.MSG_WAITALL)
    except socket.timeout:
        return False
    return len(head) == 4


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def rejected(metrics_port: int, reason: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(f'kafka_connections_rejected_total{{reason="{reason}"}}'):
            return float(line.split()[-1])
    return 0.0


def warnings(broker: BrokerProcess) -> list[dict]:
    events = [json.loads(line) for line in broker.logs().splitlines() if line.startswith("{")]
    return [e for e in events if e["level"] == "warning"]


def test_clients_that_never_read_their_fetch_answers_cost_little(tmp_path):
    """Issue 14, defect 4: with --data-dir, a client that pipelines Fetch requests and reads
    nothing cost about 175 MB, every request of a 16 KiB read answered from disk before reading
    paused (four such clients grew RSS by 425 MiB), and the memory stayed after they left. Now
    each holds about one answer, and the memory goes back to the system when they leave."""
    broker = BrokerProcess(data_dir=str(tmp_path))
    broker.start()
    try:
        client = RawClient(broker.port)
        topic = "never-read"
        client.call(m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
            name=topic, num_partitions=1, replication_factor=1)], timeout_ms=5000), 7)
        from protocol.records import SimpleRecord, build_batch
        P = m.ProduceRequest
        for _ in range(2):                                  # 2 MB on disk
            batch = build_batch([SimpleRecord(None, b"v" * 1024) for _ in range(1000)])
            client.call(P(acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
                name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])]), 9)
        F = m.FetchRequest
        from protocol.framing import encode_request
        fetch = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=52428800,
                  isolation_level=0, session_id=0, session_epoch=-1, topics=[F.FetchTopic(
                      topic=topic, partitions=[F.FetchPartition(
                          partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
        frames = b"".join(encode_request(1, 12, i, "never-reads", fetch) for i in range(500))
        before = rss_kib(broker)
        socks = []

        def add_clients(n: int) -> float:
            for _ in range(n):
                sock = socket.create_connection(("127.0.0.1", broker.port))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.sendall(frames)                        # 48 KB: the broker reads 16 KiB
                socks.append(sock)
            # the broker has served what it will by the time it answers another client
            assert client.call(m.ApiVersionsRequest(), 0).error_code == 0
            time.sleep(1)
            return (rss_kib(broker) - before) / 1024

        grown_mib = add_clients(4)
        assert grown_mib < 40, f"RSS grew {grown_mib:.0f} MiB for 4 clients that do not read"
        grown_mib = add_clients(56)
        assert 20 < grown_mib < 200, f"RSS grew {grown_mib:.0f} MiB for 60 clients"
        for sock in socks:
            sock.close()
        assert client.call(m.ApiVersionsRequest(), 0).error_code == 0
        # glibc keeps freed memory unless asked (it did here, about 120 MiB for 60 clients)
        wait_until(lambda: rss_kib(broker) - before < 15 * 1024, 10,
                   message="the memory of the clients that left to go back")
        client.close()
    finally:
        broker.stop()


def metric(metrics_port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
    raise AssertionError(f"no metric {name}")


def test_slow_readers_cannot_make_the_broker_hold_more_than_its_answer_budget(tmp_path):
    """The attack: many connections each pipeline Fetch requests for 50 MB and never read.
    Each connection held about one answer, but nothing bounded them all: 500 such connections
    on a 100 MB topic reached a 4 GB address-space cap, with MemoryError tracebacks in the
    Fetch handler. Now their answers together stay within queued.max.response.bytes; past it a
    Fetch waits and is answered without records; the others are served meanwhile, and served
    records again once the slow readers leave. (Without the budget, these 40 connections grew
    RSS by about 40 x 24 MB.)"""
    budget = 16 << 20
    metrics_port = free_port()
    broker = BrokerProcess(data_dir=str(tmp_path), overrides={
        "queued.max.response.bytes": budget, "metrics.port": metrics_port})
    broker.start()
    try:
        from protocol.framing import encode_request
        from protocol.records import SimpleRecord, build_batch
        client = RawClient(broker.port)
        topic = "slow-readers"
        client.call(m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
            name=topic, num_partitions=1, replication_factor=1)], timeout_ms=5000), 7)
        P = m.ProduceRequest

        def produce() -> int:
            batch = build_batch([SimpleRecord(None, b"v" * 1024) for _ in range(1000)])
            answer = client.call(P(acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
                name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])]), 9)
            return answer.responses[0].partition_responses[0].error_code

        for _ in range(24):                                 # 24 MB on disk
            assert produce() == 0
        F = m.FetchRequest

        def fetch(max_wait_ms: int):
            return F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=52428800,
                     isolation_level=0, session_id=0, session_epoch=-1, topics=[F.FetchTopic(
                         topic=topic, partitions=[F.FetchPartition(
                             partition=0, fetch_offset=0, partition_max_bytes=52428800)])])

        frames = b"".join(encode_request(1, 12, i, "slow-reader", fetch(500))
                          for i in range(20))
        before = rss_kib(broker)
        slow = []
        for _ in range(40):
            sock = socket.create_connection(("127.0.0.1", broker.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(frames)
            slow.append(sock)
        wait_until(lambda: metric(metrics_port, "kafka_server_fetches_held_back_total") > 0, 30,
                   message="a fetch to find the budget full")
        # the others are served meanwhile: requests of every kind are answered, a Fetch too
        # (without records while the budget is full)
        assert client.call(m.ApiVersionsRequest(), 0).error_code == 0
        assert produce() == 0
        answer = client.call(fetch(100), 12)
        assert answer.error_code == 0
        assert answer.responses[0].partitions[0].error_code == 0
        assert answer.responses[0].partitions[0].high_watermark == 25_000
        time.sleep(1)                                       # what the slow readers hold, held
        grown_mib = (rss_kib(broker) - before) / 1024
        assert grown_mib < 100, f"RSS grew {grown_mib:.0f} MiB with a 16 MiB answer budget"
        held = metric(metrics_port, "kafka_server_answer_bytes_held")
        assert 0 < held <= budget + (1 << 20) + (64 << 10), held

        for sock in slow:
            sock.close()
        # served records again once the slow readers left; the budget is theirs no more
        answer = client.call(fetch(100), 12)
        assert len(answer.responses[0].partitions[0].records) > 1 << 20
        wait_until(lambda: metric(metrics_port, "kafka_server_answer_bytes_held") < 64 << 10,
                   10, message="the answers of the closed connections to be given back")
        logs = broker.logs()
        assert "MemoryError" not in logs and "Traceback" not in logs
        full = [w for w in warnings(broker) if "queued.max.response.bytes" in w["event"]]
        assert full and full[0]["queued_max_response_bytes"] == budget
        client.close()
    finally:
        broker.stop()


def test_connections_over_max_connections_wait_until_one_closes():
    """Kafka's acceptor stops accepting at max.connections: the next connection is neither
    refused nor read until a slot frees, and it is not a rejection."""
    metrics_port = free_port()
    broker = BrokerProcess(overrides={"max.connections": 3, "metrics.port": metrics_port})
    broker.start()
    try:
        first = [RawClient(broker.port) for _ in range(3)]
        for client in first:
            assert client.call(m.ApiVersionsRequest(), 0).error_code == 0
        waiting = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
        assert not answered(waiting, 0.5)
        first[0].close()
        waiting.settimeout(5)
        size = struct.unpack(">i", waiting.recv(4, socket.MSG_WAITALL))[0]
        assert struct.unpack(">ih", waiting.recv(size, socket.MSG_WAITALL)[:6]) == (9, 0)
        assert rejected(metrics_port, "max.connections.per.ip") == 0
        held = [w for w in warnings(broker) if "max.connections reached" in w["event"]]
        assert len(held) == 1 and held[0]["limit"] == 3
        waiting.close()
        for client in first[1:]:
            client.close()
    finally:
        broker.stop()


def test_connections_over_max_connections_per_ip_are_closed_counted_and_logged_once():
    """An address over its limit (max.connections.per.ip, or its entry in the overrides) has
    the new connection closed right after it is accepted; each one is counted, and a flood of
    them is one log line per interval, not one per connection."""
    metrics_port = free_port()
    broker = BrokerProcess(overrides={"max.connections.per.ip": 1,
                                      "max.connections.per.ip.overrides": "127.0.0.1:2",
                                      "metrics.port": metrics_port})
    broker.start()
    try:
        kept = [socket.create_connection(("127.0.0.1", broker.port), timeout=5)
                for _ in range(2)]
        for sock in kept:
            assert answered(sock, 5)
        for _ in range(50):
            sock = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
            assert closed_by_peer(sock)
            sock.close()
        assert rejected(metrics_port, "max.connections.per.ip") == 50
        lines = [w for w in warnings(broker) if "max.connections.per.ip" in w["event"]]
        assert len(lines) == 1
        assert (lines[0]["host"], lines[0]["limit"], lines[0]["count"]) == ("127.0.0.1", 2, 1)
        kept[0].close()

        def served() -> bool:
            try:
                client = RawClient(broker.port)
                try:
                    return client.call(m.ApiVersionsRequest(), 0).error_code == 0
                finally:
                    client.close()
            except OSError:
                return False

        wait_until(served, 5, message="a slot for 127.0.0.1 again")
        kept[1].close()
    finally:
        broker.stop()


def test_idle_connections_are_closed_and_busy_ones_kept():
    broker = BrokerProcess(overrides={"connections.max.idle.ms": 300})
    broker.start()
    try:
        idle = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
        busy = RawClient(broker.port)
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert busy.call(m.ApiVersionsRequest(), 0).error_code == 0
            time.sleep(0.05)
        assert closed_by_peer(idle, 0.1)
        assert busy.call(m.ApiVersionsRequest(), 0).error_code == 0
        busy.close()
        idle.close()
    finally:
        broker.stop()
