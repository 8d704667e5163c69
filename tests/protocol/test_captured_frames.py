"""Frames captured from real clients talking to the broker, replayed through the codec:
decode and re-encode must give back the same bytes, request and response alike."""
from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from protocol.framing import read_request_header, read_response_header
from protocol.messages import APIS
from tests.support import BrokerProcess, subscribe_with_metadata, unique


class RecordingProxy:
    """A TCP proxy that records every request and response frame it forwards."""

    def __init__(self) -> None:
        self.target_port = None  # set before the first client connects
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.requests: list[bytes] = []
        self.responses: list[tuple[int, int, bytes]] = []  # (api_key, version, frame)
        self.lock = threading.Lock()
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while self.running:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            in_flight: dict[int, tuple[int, int]] = {}
            threading.Thread(target=self._pump, args=(client, upstream, in_flight, True),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, in_flight, False),
                             daemon=True).start()

    def _pump(self, src, dst, in_flight, is_request: bool) -> None:
        try:
            while True:
                head = self._read(src, 4)
                frame = self._read(src, struct.unpack(">i", head)[0])
                with self.lock:
                    if is_request:
                        key, version, correlation_id = struct.unpack_from(">hhi", frame)
                        in_flight[correlation_id] = (key, version)
                        self.requests.append(frame)
                    else:
                        (correlation_id,) = struct.unpack_from(">i", frame)
                        key, version = in_flight.pop(correlation_id)
                        self.responses.append((key, version, frame))
                dst.sendall(head + frame)
        except (OSError, ConnectionError, struct.error):
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass

    @staticmethod
    def _read(sock, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def close(self) -> None:
        self.running = False
        self.listener.close()


def drive_clients(bootstrap: str) -> None:
    """Produce, consume by assignment and form a small group with each Python client."""
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaConsumer, KafkaProducer
    topic = unique("captured")
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip")
    for i in range(20):
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"x")])
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=unique("cap-kp"),
                             auto_offset_reset="earliest", consumer_timeout_ms=1500)
    subscribe_with_metadata(consumer, [topic])
    assert len(list(consumer)) == 20
    consumer.commit()
    consumer.close()
    rd_producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4"})
    for i in range(20):
        rd_producer.produce(topic, key=b"r%d" % i, value=b"w%d" % i)
    assert rd_producer.flush(10) == 0
    rd_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("cap-rd"),
                            "auto.offset.reset": "earliest"})
    rd_consumer.subscribe([topic])
    got, deadline = 0, time.monotonic() + 20
    while got < 40 and time.monotonic() < deadline:
        msg = rd_consumer.poll(0.2)
        if msg is not None and not msg.error():
            got += 1
    rd_consumer.commit(asynchronous=False)
    rd_consumer.close()
    assert got == 40


def reencode_request(frame: bytes) -> bytes:
    header = read_request_header(frame)
    api = APIS[header.api_key]
    body = api.request.decode(frame, header.api_version, header.body_offset)
    client_id = header.client_id.encode() if header.client_id is not None else None
    out = struct.pack(">hhi", header.api_key, header.api_version, header.correlation_id)
    out += b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id)) + client_id
    if header.header_version >= 2:
        out += b"\x00"
    return out + body.encode(header.api_version)


def reencode_response(api_key: int, version: int, frame: bytes) -> bytes:
    api = APIS[api_key]
    header_version = api.response_header_version(version)
    correlation_id, offset = read_response_header(frame, header_version)
    body = api.response.decode(frame, version, offset)
    return frame[:offset] + body.encode(version)


@pytest.fixture(scope="module")
def captured():
    proxy = RecordingProxy()
    # the broker advertises the proxy, so every connection the clients open is recorded
    broker = BrokerProcess(
        overrides={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    broker.start()
    proxy.target_port = broker.port
    try:
        drive_clients(f"127.0.0.1:{proxy.port}")
        time.sleep(0.2)  # let the pumps record the last responses
        with proxy.lock:
            yield list(proxy.requests), list(proxy.responses)
    finally:
        proxy.close()
        broker.stop()


def test_captured_requests_reencode_byte_identical(captured):
    requests, _ = captured
    apis = {struct.unpack_from(">h", f)[0] for f in requests}
    # the clients exercised the data plane and the group protocol
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 14, 18} <= apis
    for frame in requests:
        assert reencode_request(frame) == frame, read_request_header(frame)


def test_captured_responses_reencode_byte_identical(captured):
    _, responses = captured
    assert len(responses) > 20
    for api_key, version, frame in responses:
        assert reencode_response(api_key, version, frame) == frame, (api_key, version)
