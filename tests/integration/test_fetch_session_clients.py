"""Python clients over fetch sessions: kafka-python 3.0 fetches (v12) in a session, full then
incremental; librdkafka (confluent-kafka) sends sessionless fetches (v16). Both read every
record, and no fetch is answered with a session error. The broker's /metrics count fetches by
what their session made of them."""
from __future__ import annotations

import re
import time
import urllib.request

import pytest

from tests.support import BrokerProcess, free_port, unique

PARTITIONS, PER_PARTITION = 3, 20


@pytest.fixture(scope="module")
def server():
    proc = BrokerProcess(overrides={"metrics.port": free_port()})
    proc.start()
    yield proc
    proc.stop()


def by_kind(server) -> dict[str, float]:
    port = server.overrides["metrics.port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {m[1]: float(m[2]) for m in re.finditer(
        r'^kafka_fetch_requests_by_session_total\{kind="(\w+)"\} (\S+)$', text, re.M)}


def produce(server, topic: str) -> set[str]:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic
    admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
    values = set()
    for p in range(PARTITIONS):
        for i in range(PER_PARTITION):
            value = f"{p}-{i}"
            producer.send(topic, value=value.encode(), partition=p)
            values.add(value)
    producer.flush(30)
    producer.close()
    return values


def test_kafka_python_reads_everything_in_a_session(server):
    from kafka import KafkaConsumer
    topic = unique("kp-session")
    expected = produce(server, topic)
    before = by_kind(server)
    consumer = KafkaConsumer(topic, bootstrap_servers=server.bootstrap,
                             group_id=unique("kp-session-g"), auto_offset_reset="earliest",
                             fetch_max_wait_ms=100)
    got = set()
    deadline = time.monotonic() + 30
    while len(got) < len(expected) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got.update(r.value.decode() for r in records)
    # a few idle polls: incremental fetches with nothing new
    for _ in range(5):
        assert consumer.poll(timeout_ms=200) == {}
    consumer.close()
    assert got == expected
    after = by_kind(server)
    grew = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    assert grew["full"] >= 1 and grew["incremental"] >= 3, grew
    assert grew["error"] == 0, grew


def test_confluent_kafka_reads_everything_without_a_session(server):
    from confluent_kafka import Consumer
    topic = unique("rd-session")
    expected = produce(server, topic)
    before = by_kind(server)
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": unique("rd-g"),
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    consumer.subscribe([topic])
    got = set()
    deadline = time.monotonic() + 30
    while len(got) < len(expected) and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is not None and not msg.error():
            got.add(msg.value().decode())
    consumer.close()
    assert got == expected
    after = by_kind(server)
    grew = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    assert grew["sessionless"] >= 1 and grew["error"] == 0, grew
    assert grew["full"] == 0 and grew["incremental"] == 0, grew
