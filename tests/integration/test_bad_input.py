"""Bad input closes only its own connection, with one log line saying why; others carry on."""
from __future__ import annotations

import json
import socket
import struct
import time

import pytest

from protocol import messages as m
from protocol.errors import ErrorCode
from tests.support import RawClient


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def assert_still_serving(port: int) -> None:
    client = RawClient(port)
    response = client.call(m.MetadataRequest(topics=None), 12)
    assert response.brokers[0].port == port
    client.close()


def log_reasons(broker) -> list[str]:
    out = []
    for line in broker.logs().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "closing connection":
            out.append(event["reason"])
    return out


def wait_for_reason(broker, fragment: str) -> str:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for reason in log_reasons(broker):
            if fragment in reason:
                return reason
        time.sleep(0.05)
    raise AssertionError(f"no log line about {fragment!r}: {log_reasons(broker)}")


BAD_FRAMES = {
    "garbage": (b"\x00\x00\x00\x07garbage", "malformed request header"),
    "oversized size prefix": (struct.pack(">i", 2**31 - 1) + b"x" * 10, "frame size"),
    "negative size prefix": (struct.pack(">i", -5), "frame size"),
    "unknown api key": (frame(struct.pack(">hhih", 999, 0, 1, -1)), "unknown api key 999"),
    "unsupported version": (frame(struct.pack(">hhih", 3, 99, 1, -1)),
                            "unsupported version 99 of Metadata"),
    "truncated body": (frame(struct.pack(">hhih", 3, 1, 1, -1) + b"\x00\x00\x00\x05\x00"),
                       "malformed Metadata v1 request"),
}


@pytest.mark.parametrize("case", sorted(BAD_FRAMES))
def test_bad_frame_closes_only_its_connection(broker, case):
    data, reason = BAD_FRAMES[case]
    bystander = RawClient(broker.port)
    bystander.call(m.ApiVersionsRequest(), 0)
    sock = socket.create_connection(("127.0.0.1", broker.port))
    sock.sendall(data)
    assert closed_by_peer(sock)
    sock.close()
    wait_for_reason(broker, reason)
    # the other connection and new connections keep working
    assert bystander.call(m.ApiVersionsRequest(), 0).error_code == ErrorCode.NONE
    bystander.close()
    assert_still_serving(broker.port)


@pytest.mark.parametrize("case", sorted(BAD_FRAMES))
def test_requests_before_a_bad_frame_are_answered_before_the_close(broker, case):
    """Pipelined in one write: two good requests, then a bad frame. Both answers come back, in
    order, then the connection closes (Kafka answers them before it reads the bad frame)."""
    bad, reason = BAD_FRAMES[case]
    requests = b""
    for correlation_id in (7, 8):
        body = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"test"
        requests += frame(body)
    sock = socket.create_connection(("127.0.0.1", broker.port))
    sock.sendall(requests + bad)
    sock.settimeout(5)
    answers = []
    for _ in range(2):
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        body = sock.recv(size, socket.MSG_WAITALL)
        answers.append(struct.unpack_from(">ih", body))
    assert answers == [(7, 0), (8, 0)]
    assert closed_by_peer(sock)
    sock.close()
    wait_for_reason(broker, reason)
    assert_still_serving(broker.port)


def test_a_declared_frame_size_is_not_allocated_ahead_of_its_bytes(broker):
    """Clients that declare 100 MB frames and send 1 KiB cost the broker what they sent, not
    what they declared (issue 14, defect 3: it used to zero-fill the whole frame at once)."""
    def rss_kib() -> int:
        with open(f"/proc/{broker.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    before = rss_kib()
    socks = []
    for _ in range(5):
        sock = socket.create_connection(("127.0.0.1", broker.port))
        sock.sendall(struct.pack(">i", 100_000_000) + b"\0" * 1024)
        socks.append(sock)
    assert_still_serving(broker.port)       # the broker has read what they sent by now
    grown_mib = (rss_kib() - before) / 1024
    for sock in socks:
        sock.close()
    assert grown_mib < 50, f"RSS grew {grown_mib:.0f} MiB for 5 KiB received"
    assert_still_serving(broker.port)


def test_truncated_frame_then_disconnect_leaves_broker_serving(broker):
    sock = socket.create_connection(("127.0.0.1", broker.port))
    sock.sendall(struct.pack(">i", 100) + b"\x00\x03\x00\x01")  # 6 of 100 bytes, then gone
    sock.close()
    assert_still_serving(broker.port)


def test_unsupported_api_versions_version_gets_v0_answer_with_ranges(broker):
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    sock.sendall(frame(struct.pack(">hhih", 18, 99, 7, -1) + b"\x00\x00"))
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    body = sock.recv(size, socket.MSG_WAITALL)
    correlation_id = struct.unpack_from(">i", body)[0]
    response = m.ApiVersionsResponse.decode(body, 0, 4)
    assert correlation_id == 7
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[18] == (0, 4)
    assert ranges[3] == (0, 13)
    # the connection stays usable: ask again at a version we support
    sock.sendall(frame(struct.pack(">hhih", 18, 0, 8, -1)))
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    assert struct.unpack_from(">ih", sock.recv(size, socket.MSG_WAITALL)) == (8, 0)
    sock.close()


def test_pipelined_requests_are_answered_in_order(broker):
    client = RawClient(broker.port)
    topic = "pipelined-order"
    client.call(m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1)], timeout_ms=1000), 7)
    F = m.FetchRequest
    # a long-poll fetch first, then a quick request: the quick answer must wait its turn
    fetch = F(replica_id=-1, max_wait_ms=300, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
              session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[
                  F.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    first = client.send(fetch, 12)
    second = client.send(m.ApiVersionsRequest(), 3)
    got_first, _ = client.receive(m.FetchResponse, 12, 1)
    got_second, _ = client.receive(m.ApiVersionsResponse, 3, 18)
    assert (got_first, got_second) == (first, second)
    client.close()


def test_large_frame_sent_in_pieces_is_reassembled(broker):
    """A produce frame bigger than the connection's read buffer, sent in odd-sized pieces."""
    from protocol.framing import encode_request
    from protocol.records import SimpleRecord, build_batch
    client = RawClient(broker.port)
    topic = "large-frames"
    client.call(m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1)], timeout_ms=1000), 7)
    values = [bytes([i % 251]) * 100_000 for i in range(11)]
    batch = build_batch([SimpleRecord(None, v) for v in values])
    P = m.ProduceRequest
    request = P(acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])])
    data = encode_request(0, 9, 42, "pieces", request)
    for start in range(0, len(data), 77_777):
        client.sock.sendall(data[start:start + 77_777])
        time.sleep(0.01)
    correlation_id, response = client.receive(m.ProduceResponse, 9, 0)
    assert correlation_id == 42
    part = response.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (ErrorCode.MESSAGE_TOO_LARGE, -1)
    # under the limit it is appended
    small = build_batch([SimpleRecord(None, v) for v in values[:5]])
    request.topic_data[0].partition_data[0].records = small
    part = client.call(request, 9).responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (ErrorCode.NONE, 0)
    client.close()


def test_trailing_bytes_after_a_valid_body_are_ignored_as_kafka_does(broker):
    """librdkafka's all-topics Metadata v13 carries 3 unused bytes; Kafka ignores them."""
    frame_body = bytes.fromhex("0003000d00000003000772646b61666b610000000000010000")
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    sock.sendall(frame(frame_body))
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    body = b""
    while len(body) < size:   # an answer of every topic may come in several reads
        chunk = sock.recv(size - len(body))
        assert chunk, "connection closed mid-answer"
        body += chunk
    response = m.MetadataResponse.decode(body, 13, 5)
    assert response.brokers[0].port == broker.port
    sock.close()


def test_confluent_admin_lists_all_topics(broker):
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topics = admin.list_topics(timeout=10).topics
    assert "__consumer_offsets" in topics


@pytest.mark.parametrize("damage,error", [
    ("flip a byte", ErrorCode.CORRUPT_MESSAGE),
    ("truncate", ErrorCode.CORRUPT_MESSAGE),
    ("nonzero base offset", ErrorCode.INVALID_RECORD),
    ("count mismatch", ErrorCode.INVALID_RECORD),
])
def test_bad_record_batches_get_kafkas_partition_error(broker, damage, error):
    from protocol.records import SimpleRecord, build_batch
    client = RawClient(broker.port)
    topic = "bad-batches"
    client.call(m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1)], timeout_ms=1000), 7)
    batch = bytearray(build_batch([SimpleRecord(b"k", b"v" * 50) for _ in range(3)]))
    if damage == "flip a byte":
        batch[-5] ^= 0xFF
    elif damage == "truncate":
        batch = batch[:-10]
    elif damage == "nonzero base offset":
        batch[0:8] = struct.pack(">q", 7)  # not covered by the CRC
    else:
        batch[57:61] = struct.pack(">i", 2)  # record count; recompute the CRC
        from crc32c import crc32c
        batch[17:21] = struct.pack(">I", crc32c(bytes(batch[21:])))
    P = m.ProduceRequest
    request = P(acks=-1, timeout_ms=1000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=0, records=bytes(batch))])])
    part = client.call(request, 9).responses[0].partition_responses[0]
    assert part.error_code == error
    # nothing was appended
    L = m.ListOffsetsRequest
    offsets = client.call(L(replica_id=-1, topics=[L.ListOffsetsTopic(name=topic, partitions=[
        L.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7)
    assert offsets.topics[0].partitions[0].offset == 0
    client.close()
