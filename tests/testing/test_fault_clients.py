"""Real clients against injected faults: each recovers as it does from the same error on Kafka,
and nothing is lost or read twice."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
import urllib.request

import pytest

from broker.testing import EmbeddedBroker
from tests.support import ROOT, subscribe_with_metadata, unique, wait_until

FAULT_SCENARIO = os.path.join(ROOT, "tests", "js", "fault_scenario.js")


@pytest.fixture(scope="module")
def kb():
    with EmbeddedBroker(**{"group.initial.rebalance.delay.ms": 0}) as broker:
        yield broker


@pytest.fixture(autouse=True)
def no_faults_left(kb):
    yield
    kb.faults.clear()


def requests_of(kb, api: str) -> int:
    counts = kb.call(lambda: dict(kb.broker.metrics.traffic.requests))
    return sum(n for (name, _v), n in counts.items() if name == api)


def errors_answered(kb, error: str) -> int:
    """Answers that carried ``error`` (kafka_errors_total), whoever made them."""
    with urllib.request.urlopen(kb.metrics_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("kafka_errors_total{") and f'error="{error}"' in line))


def produce(kb, topic: str, values, partitions: int = 2) -> None:
    """Value i to partition i % partitions."""
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=kb.bootstrap_servers)
    for i, v in enumerate(values):
        producer.send(topic, v.encode(), partition=i % partitions)
    producer.flush(timeout=10)
    producer.close()


def committed(kb, group: str, topic: str, partitions: int) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=kb.bootstrap_servers, group_id=group,
                             enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        consumer.close()


def test_kafka_python_group_rediscovers_its_coordinator(kb):
    """NOT_COORDINATOR and COORDINATOR_LOAD_IN_PROGRESS on every group API: kafka-python marks
    the coordinator dead, asks FindCoordinator again and retries, and the group consumes and
    commits everything once."""
    from kafka import KafkaConsumer
    topic = kb.create_topic(partitions=2)
    group = unique("kp")
    produce(kb, topic, [f"m{i}" for i in range(20)])
    on_group = {"match": {"group": group}}
    faults = [kb.faults.add(api="FindCoordinator", error="COORDINATOR_NOT_AVAILABLE", **on_group),
              kb.faults.add(api="JoinGroup", error="COORDINATOR_LOAD_IN_PROGRESS", count=2,
                            **on_group),
              kb.faults.add(api="JoinGroup", error="NOT_COORDINATOR", **on_group),
              kb.faults.add(api="SyncGroup", error="NOT_COORDINATOR", **on_group),
              kb.faults.add(api="OffsetFetch", error="COORDINATOR_LOAD_IN_PROGRESS", **on_group),
              kb.faults.add(api="OffsetFetch", error="NOT_COORDINATOR", **on_group),
              kb.faults.add(api="Heartbeat", error="NOT_COORDINATOR", **on_group),
              kb.faults.add(api="OffsetCommit", error="NOT_COORDINATOR", **on_group),
              kb.faults.add(api="OffsetCommit", error="COORDINATOR_LOAD_IN_PROGRESS",
                            **on_group)]
    lookups = requests_of(kb, "FindCoordinator")
    consumer = KafkaConsumer(bootstrap_servers=kb.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             heartbeat_interval_ms=100, session_timeout_ms=6000,
                             retry_backoff_ms=20)
    try:
        subscribe_with_metadata(consumer, [topic])
        got = []
        deadline = time.monotonic() + 30
        while (len(got) < 20 or not faults[6].fired) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value.decode() for r in records)
        consumer.commit()
    finally:
        consumer.close(autocommit=False)
    assert sorted(got) == sorted(f"m{i}" for i in range(20))
    assert [f.fired for f in faults] == [1, 2, 1, 1, 1, 1, 1, 1, 1]
    # each NOT_COORDINATOR (4) and the unavailable coordinator sent it back to FindCoordinator
    assert requests_of(kb, "FindCoordinator") - lookups >= 6
    assert committed(kb, group, topic, 2) == {0: 10, 1: 10}


def test_kafka_python_member_expired_and_rebalance_started(kb):
    """The actions: an expired member finds out at its next heartbeat and joins again with a
    new member id; a rebalance started by a fault makes the member rejoin into a new
    generation. It keeps consuming through both."""
    from kafka import KafkaConsumer
    topic = kb.create_topic(partitions=2)
    group = unique("kp")
    consumer = KafkaConsumer(bootstrap_servers=kb.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", heartbeat_interval_ms=100,
                             session_timeout_ms=6000, enable_auto_commit=False)

    def group_state():
        def read():
            g = kb.broker.coordinator.group(group)
            return None if g is None else (g.state.value, g.generation_id, list(g.members))
        return kb.call(read)

    got = []

    def poll_until(condition):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=100).values():
                got.extend(r.value.decode() for r in records)
            if condition():
                return
        raise AssertionError(f"timed out: {group_state()}")

    try:
        subscribe_with_metadata(consumer, [topic])
        produce(kb, topic, ["a", "b"])
        poll_until(lambda: len(got) == 2 and group_state()[0] == "Stable")
        consumer.commit()
        _, generation, [member] = group_state()

        expired = kb.faults.expire_member(group)
        assert expired.result == {"group": group, "member_id": member}
        produce(kb, topic, ["c"])
        poll_until(lambda: len(got) == 3 and group_state()[0] == "Stable"
                   and group_state()[2] != [member])
        consumer.commit()
        _, generation2, members = group_state()
        assert generation2 > generation and len(members) == 1

        started = kb.faults.rebalance(group)
        assert started.fired == 1
        produce(kb, topic, ["d"])
        poll_until(lambda: len(got) == 4 and group_state()[0] == "Stable"
                   and group_state()[1] > generation2)
        assert group_state()[2] == members  # rejoined as the same member
    finally:
        consumer.close()
    assert sorted(got) == ["a", "b", "c", "d"]


def test_confluent_idempotent_producer_retries_not_leader_and_delivers_each_record_once(kb):
    """NOT_LEADER_OR_FOLLOWER on one partition, then an answer that comes after the client gave
    up on it (the records were written): the idempotent producer retries with the same sequence
    numbers and every record is in the log exactly once, in order."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic = kb.create_topic(partitions=2)
    producer = Producer({"bootstrap.servers": kb.bootstrap_servers, "enable.idempotence": True,
                         "linger.ms": 5, "retry.backoff.ms": 20, "socket.timeout.ms": 1000,
                         "message.timeout.ms": 60000})
    delivered, failed = [], []

    def on_delivery(err, msg):
        (failed if err else delivered).append(err or (msg.partition(), msg.value().decode()))

    def send(values):
        for i in values:
            producer.produce(topic, value=str(i), partition=i % 2, on_delivery=on_delivery)
        assert producer.flush(60) == 0

    send(range(0, 100))
    not_leader = kb.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3,
                               match={"topic": topic, "partition": 0})
    send(range(100, 300))
    assert not_leader.fired == 3
    late = kb.faults.add(api="Produce", delay_ms=2500, match={"topic": topic, "partition": 1})
    send(range(300, 600))
    assert late.fired == 1
    assert failed == []
    assert len(delivered) == 600

    consumer = Consumer({"bootstrap.servers": kb.bootstrap_servers, "group.id": unique("cf"),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    got: dict[int, list[str]] = {0: [], 1: []}
    deadline = time.monotonic() + 30
    while sum(map(len, got.values())) < 600 and time.monotonic() < deadline:
        for msg in consumer.consume(500, timeout=0.5):
            assert not msg.error(), msg.error()
            got[msg.partition()].append(msg.value().decode())
    ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in range(2)]
    consumer.close()
    assert got[0] == [str(i) for i in range(0, 600, 2)]
    assert got[1] == [str(i) for i in range(1, 600, 2)]
    assert ends == [(0, 300), (0, 300)]  # nothing written twice


def test_aiokafka_survives_a_coordinator_load_window(kb):
    """The group's coordinator unloads and loads for 1.5 s (its shard replays
    __consumer_offsets): aiokafka's commits and heartbeats get COORDINATOR_LOAD_IN_PROGRESS or
    NOT_COORDINATOR, it retries, and it carries on from the committed offsets without reading a
    record twice."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    topic = kb.create_topic(partitions=2)
    group = unique("aio")
    loads_before = errors_answered(kb, "COORDINATOR_LOAD_IN_PROGRESS")

    async def scenario():
        producer = AIOKafkaProducer(bootstrap_servers=kb.bootstrap_servers)
        await producer.start()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=kb.bootstrap_servers,
                                    group_id=group, auto_offset_reset="earliest",
                                    enable_auto_commit=False, heartbeat_interval_ms=100,
                                    session_timeout_ms=6000, retry_backoff_ms=50)
        await consumer.start()
        got = []
        try:
            for i in range(10):
                await producer.send_and_wait(topic, f"a{i}".encode(), partition=i % 2)
            while len(got) < 10:
                batch = await consumer.getmany(timeout_ms=1000)
                got.extend(r.value.decode() for rs in batch.values() for r in rs)
            await consumer.commit()
            window = kb.faults.coordinator_load(duration_ms=1500, group=group)
            started = time.monotonic()
            for i in range(10):
                await producer.send_and_wait(topic, f"b{i}".encode(), partition=i % 2)
            while len(got) < 20:
                batch = await consumer.getmany(timeout_ms=1000)
                got.extend(r.value.decode() for rs in batch.values() for r in rs)
            await consumer.commit()  # retried until the coordinator has loaded
            return got, window, time.monotonic() - started
        finally:
            await consumer.stop()
            await producer.stop()

    got, window, took = asyncio.run(scenario())
    assert sorted(got) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
    assert window.result["shards"] == [f"__consumer_offsets-"
                                       f"{kb.broker.coordinator.partition_for(group)}"]
    assert took >= 1.5  # the last commit waited for the load to end
    assert errors_answered(kb, "COORDINATOR_LOAD_IN_PROGRESS") > loads_before
    assert committed(kb, group, topic, 2) == {0: 10, 1: 10}


def test_kafkajs_disconnect_mid_fetch(kb):
    """kafkajs consumes, asks the broker over HTTP to close its connection at its next Fetch,
    and carries on after reconnecting: every record once."""
    node = shutil.which("node")
    assert node, "node is not installed"
    assert os.path.isdir(os.path.join(ROOT, "tests", "js", "node_modules", "kafkajs")), \
        "kafkajs is not installed: run tools/install-test-deps.sh"
    topic = kb.create_topic(partitions=2)
    result = subprocess.run([node, FAULT_SCENARIO, kb.bootstrap_servers, kb.metrics_url, topic,
                             unique("kjs")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(out["got"]) == sorted([f"a{i}" for i in range(10)] +
                                        [f"b{i}" for i in range(10)])
    assert out["fault"]["action"] == "disconnect"
    fault = next(f for f in kb.faults.list() if f["id"] == out["fault"]["id"])
    assert fault["fired"] == 1
    assert out["crashes"] == 0
