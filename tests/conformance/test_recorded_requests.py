"""Every request a real client sends to Apache Kafka 4.3.1, replayed here.

A recording proxy stands in front of a Kafka 4.3.1 whose advertised listener is the proxy, so
every connection of a client goes through it. Each client library runs an ordinary workload
against it (produce, consume in a group with the classic and the consumer protocol where the
library has it, admin calls); the proxy keeps every request frame as the client sent it. Then
the recorded frames are sent, byte for byte, to kbroker, one connection for each recorded one,
and each answer is read at the request's version.

What this shows, per client: kbroker advertises every (API, version) the client used against
Kafka, decodes every request, and answers each (except acks=0 produce) on the same connection
with a frame that decodes at that version with the matching correlation id. The answers' contents
differ (Kafka's member ids, producer ids and topic ids mean nothing to kbroker), and that is not
what is checked here; the differential tests of each API compare contents.
"""
from __future__ import annotations

import json
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections import defaultdict

import pytest

from protocol.framing import read_request_header, read_response_header
from protocol.messages import API_BY_NAME, APIS, ApiVersionsRequest
from tests.support import ROOT, BrokerProcess, RawClient, free_port, unique

from .kafka_server import KafkaServer

JAR = os.path.join(ROOT, "tests", "java", "target", "client-scenarios.jar")
KAFKAJS_SCENARIO = os.path.join(ROOT, "tests", "js", "scenario.js")
#: connections Kafka opens to its own advertised listener (not a client's)
KAFKA_INTERNAL = re.compile(r"^broker-\d+-|txn-marker|^raft-")
RECORDS = 20


class RecordingProxy:
    """Accepts clients on ``port`` and pipes each connection to ``upstream``, keeping every
    request frame the client sent, by connection, in order."""

    def __init__(self, upstream_port: int) -> None:
        self.port = free_port()
        self.upstream = upstream_port
        self.lock = threading.Lock()
        #: connection number -> [(api_key, api_version, client_id, frame)]
        self.connections: dict[int, list] = {}
        self.sock = socket.create_server(("127.0.0.1", self.port))
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def mark(self) -> int:
        with self.lock:
            return len(self.connections)

    def since(self, mark: int) -> dict[int, list]:
        with self.lock:
            return {n: list(frames) for n, frames in self.connections.items()
                    if n >= mark and frames
                    and not KAFKA_INTERNAL.search(frames[0][2] or "")}

    def close(self) -> None:
        self.closed = True
        self.sock.close()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream), timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self.lock:
                number = len(self.connections)
                self.connections[number] = []
            threading.Thread(target=self._requests, args=(number, client, upstream),
                             daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _requests(self, number: int, client, upstream) -> None:
        buf = b""
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                upstream.sendall(data)
                buf += data
                while len(buf) >= 4:
                    size = struct.unpack_from(">i", buf)[0]
                    if len(buf) < 4 + size:
                        break
                    frame, buf = buf[4:4 + size], buf[4 + size:]
                    header = read_request_header(frame)
                    with self.lock:
                        self.connections[number].append(
                            (header.api_key, header.api_version, header.client_id, frame))
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    @staticmethod
    def _pipe(src, dst) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@pytest.fixture(scope="module")
def recorded_kafka():
    """Kafka 4.3.1 advertising the proxy, and the proxy in front of it."""
    server = KafkaServer()
    proxy = RecordingProxy(server.port)
    listeners = (f"PLAINTEXT://127.0.0.1:{proxy.port},"
                 f"CONTROLLER://127.0.0.1:{server.controller_port}")
    server.overrides["advertised.listeners"] = listeners
    server.start()
    try:
        yield proxy
    finally:
        server.stop()
        proxy.close()


@pytest.fixture(scope="module")
def replay_kbroker():
    server = BrokerProcess()
    server.start()
    yield server
    server.stop()


# -- the clients' workloads, each against the proxy


def _run(cmd: list[str], timeout: float = 180, **kwargs) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                            **kwargs)
    assert result.returncode == 0, (cmd, result.stdout[-3000:], result.stderr[-3000:])
    return result.stdout


def java_workload(bootstrap: str) -> None:
    java = ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", JAR,
            "kbroker.ClientScenarios"]
    topic = unique("rec-java")
    _run(java + ["produce-consume", bootstrap, topic, "zstd", str(RECORDS)])
    _run(java + ["admin", bootstrap, unique("rec-java-admin")])
    for assignor in ("consumer", "cooperative-sticky"):
        _run(java + ["group-consume", bootstrap, topic, unique("rec-java-g"), assignor, "3"])


PYTHON_WORKLOADS = {
    "kafka-python": '''
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
admin = KafkaAdminClient(bootstrap_servers=BOOT)
admin.create_topics([NewTopic(TOPIC, 3, 1)])
producer = KafkaProducer(bootstrap_servers=BOOT, acks="all", compression_type="gzip")
for i in range(N):
    producer.send(TOPIC, key=b"k%d" % i, value=b"v%d" % i)
producer.flush(); producer.close()
consumer = KafkaConsumer(TOPIC, bootstrap_servers=BOOT, group_id=GROUP,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         consumer_timeout_ms=8000)
got = 0
for message in consumer:
    got += 1
    if got == N:
        break
consumer.commit(); consumer.close()
admin.describe_groups([GROUP]); admin.list_groups()
admin.describe_configs([__import__("kafka.admin", fromlist=["ConfigResource"]).ConfigResource(
    "TOPIC", TOPIC)])
admin.delete_topics([TOPIC]); admin.close()
assert got == N, got
''',
    "aiokafka": '''
import asyncio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

async def main():
    admin = AIOKafkaAdminClient(bootstrap_servers=BOOT)
    await admin.start()
    await admin.create_topics([NewTopic(TOPIC, 3, 1)])
    producer = AIOKafkaProducer(bootstrap_servers=BOOT, enable_idempotence=True)
    await producer.start()
    for i in range(N):
        await producer.send_and_wait(TOPIC, b"v%d" % i)
    await producer.stop()
    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=BOOT, group_id=GROUP,
                                auto_offset_reset="earliest", enable_auto_commit=False)
    await consumer.start()
    got = 0
    while got < N:
        batches = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
        got += sum(len(v) for v in batches.values())
    await consumer.commit(); await consumer.stop()
    await admin.describe_consumer_groups([GROUP]); await admin.list_consumer_groups()
    await admin.close()

asyncio.run(main())
''',
    "confluent-kafka": '''
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
admin = AdminClient({"bootstrap.servers": BOOT})
admin.create_topics([NewTopic(TOPIC, 3, 1)])["%s" % TOPIC].result(30)
producer = Producer({"bootstrap.servers": BOOT, "enable.idempotence": True,
                     "compression.type": "lz4"})
for i in range(N):
    producer.produce(TOPIC, value=b"v%d" % i)
assert producer.flush(30) == 0
for protocol in ("classic", "consumer"):
    conf = {"bootstrap.servers": BOOT, "group.id": GROUP + protocol,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "group.protocol": protocol}
    consumer = Consumer(conf)
    consumer.subscribe([TOPIC])
    got = 0
    while got < N:
        message = consumer.poll(20)
        assert message is not None and not message.error(), message
        got += 1
    consumer.commit(asynchronous=False); consumer.close()
admin.list_consumer_groups().result(30)
for future in admin.describe_consumer_groups([GROUP + "classic", GROUP + "consumer"]).values():
    future.result(30)
admin.describe_configs([ConfigResource("topic", TOPIC)])[ConfigResource("topic", TOPIC)].result(30)
admin.delete_topics([TOPIC])[TOPIC].result(30)
''',
}


def python_workload(client: str, bootstrap: str) -> None:
    prelude = (f"BOOT = {bootstrap!r}\nTOPIC = {unique('rec-' + client)!r}\n"
               f"GROUP = {unique('rec-g')!r}\nN = {RECORDS}\n")
    _run([sys.executable, "-c", prelude + PYTHON_WORKLOADS[client]])


def kafkajs_workload(bootstrap: str) -> None:
    _run(["node", KAFKAJS_SCENARIO, bootstrap, unique("rec-kafkajs"), unique("rec-g")])


WORKLOADS = {
    "java": java_workload,
    "kafka-python": lambda b: python_workload("kafka-python", b),
    "aiokafka": lambda b: python_workload("aiokafka", b),
    "confluent-kafka": lambda b: python_workload("confluent-kafka", b),
    "kafkajs": kafkajs_workload,
}


# -- the replay


def _read_frame(sock) -> bytes | None:
    def exactly(n: int) -> bytes | None:
        out = b""
        while len(out) < n:
            chunk = sock.recv(n - len(out))
            if not chunk:
                return None
            out += chunk
        return out
    head = exactly(4)
    if head is None:
        return None
    return exactly(struct.unpack(">i", head)[0])


def _expects_answer(api_key: int, version: int, frame: bytes) -> bool:
    if api_key != 0:  # Produce with acks=0 is not answered
        return True
    header = read_request_header(frame)
    request = APIS[0].request.decode(frame, version, header.body_offset)
    return request.acks != 0


def replay(port: int, frames: list) -> list[str]:
    """Sends one recorded connection's frames in order; returns what went wrong."""
    problems = []
    sock = socket.create_connection(("127.0.0.1", port), timeout=40)
    try:
        for api_key, version, _, frame in frames:
            api = APIS[api_key]
            header = read_request_header(frame)
            try:
                api.request.decode(frame, version, header.body_offset)
            except Exception as exc:  # noqa: BLE001 - reported
                problems.append(f"{api.name} v{version}: the request does not decode: {exc!r}")
            sock.sendall(struct.pack(">i", len(frame)) + frame)
            if not _expects_answer(api_key, version, frame):
                continue
            answer = _read_frame(sock)
            if answer is None:
                problems.append(f"{api.name} v{version}: connection closed instead of an answer")
                return problems
            try:
                correlation, offset = read_response_header(
                    answer, api.response_header_version(version))
                api.response.decode(answer, version, offset)
            except Exception as exc:  # noqa: BLE001 - reported
                problems.append(f"{api.name} v{version}: the answer does not decode: {exc!r}")
                continue
            if correlation != header.correlation_id:
                problems.append(f"{api.name} v{version}: correlation id {correlation}, "
                                f"sent {header.correlation_id}")
    except OSError as exc:
        problems.append(f"connection failed: {exc!r}")
    finally:
        sock.close()
    return problems


def advertised(port: int) -> dict[int, tuple[int, int]]:
    answer = RawClient.once(port, ApiVersionsRequest(client_software_name="replay",
                                                     client_software_version="1"), 3)
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


@pytest.mark.parametrize("client", list(WORKLOADS))
def test_every_request_a_client_sends_kafka_is_served_here(client, recorded_kafka,
                                                           replay_kbroker):
    mark = recorded_kafka.mark()
    WORKLOADS[client](f"127.0.0.1:{recorded_kafka.port}")
    time.sleep(0.5)  # the last frames of closing connections
    connections = recorded_kafka.since(mark)
    used: dict[str, set[int]] = defaultdict(set)
    for frames in connections.values():
        for api_key, version, _, _ in frames:
            used[APIS[api_key].name].add(version)
    print(f"\n{client}: {sum(map(len, connections.values()))} requests on "
          f"{len(connections)} connections: "
          + json.dumps({name: sorted(v) for name, v in sorted(used.items())}))
    assert {"ApiVersions", "Metadata", "Produce", "Fetch"} <= set(used), used

    ours = advertised(replay_kbroker.port)
    outside = {f"{name} v{v}" for name, versions in used.items() for v in versions
               if API_BY_NAME[name].key not in ours
               or not ours[API_BY_NAME[name].key][0] <= v <= ours[API_BY_NAME[name].key][1]}
    assert not outside, f"{client} used versions kbroker does not advertise: {sorted(outside)}"

    results: dict[int, list[str]] = {}
    threads = [threading.Thread(target=lambda n=n, f=f: results.__setitem__(
        n, replay(replay_kbroker.port, f))) for n, f in connections.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    assert len(results) == len(connections), "a replayed connection did not finish"
    problems = [p for n in sorted(results) for p in results[n]]
    assert problems == [], "\n".join(problems)

