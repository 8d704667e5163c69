"""Compaction of segment files with --data-dir (issue 14, defect 6), through real brokers and
clients: __consumer_offsets stops growing with every commit and a restarted broker replays
the live state; a compacted topic read by kafka-python and confluent-kafka keeps the last value
of each key across a restart."""
from __future__ import annotations

import json
import os
import signal

from confluent_kafka import Consumer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.support import BrokerProcess, RawClient, unique, wait_until

SHARDS = 3


def offsets_topic_bytes(data_dir: str) -> int:
    total = 0
    for name in os.listdir(data_dir):
        if name.startswith("__consumer_offsets-"):
            path = os.path.join(data_dir, name)
            total += sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)
                         if f.endswith(".log"))
    return total


def commit_rounds(port: int, topic: str, groups: list[str], partitions: int,
                  rounds: int) -> None:
    """Pipelined OffsetCommit v8 of every group, ``rounds`` times: offset round * 1000 + p."""
    from protocol.messages import OffsetCommitRequest, OffsetCommitResponse
    C = OffsetCommitRequest
    client = RawClient(port, client_id="compaction-committer")
    try:
        for r in range(rounds):
            sent = [client.send(C(group_id=g, generation_id_or_member_epoch=-1, member_id="",
                                  topics=[C.OffsetCommitRequestTopic(name=topic, partitions=[
                                      C.OffsetCommitRequestPartition(
                                          partition_index=p, committed_offset=r * 1000 + p,
                                          committed_metadata="")
                                      for p in range(partitions)])]), 8) for g in groups]
            for correlation_id in sent:
                got, response = client.receive(OffsetCommitResponse, 8, C.api_key)
                assert got == correlation_id
                assert {p.error_code for t in response.topics for p in t.partitions} == {0}
    finally:
        client.close()


def offsets_loaded(broker: BrokerProcess) -> dict:
    for line in broker.logs().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "offsets loaded" and "partition" not in event:
            return event
    return {}


def test_consumer_offsets_on_disk_stay_small_and_a_restart_replays_the_live_state(tmp_path):
    data_dir = str(tmp_path / "data")
    overrides = {"log.cleaner.backoff.ms": 200, "offsets.topic.num.partitions": SHARDS}
    topic = unique("disk-committed")
    groups = [unique(f"disk-group-{i}") for i in range(20)]
    partitions, rounds = 10, 300  # 60,000 commits of 200 keys, about 4.5 MB uncompacted
    first = BrokerProcess(data_dir=data_dir, overrides=overrides)
    first.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=first.bootstrap)
        admin.create_topics([NewTopic(topic, partitions, 1)])
        admin.close()
        commit_rounds(first.port, topic, groups, partitions, rounds)
        # each shard keeps at most its 256 KiB active segment and its cleaned part
        bound = SHARDS * 256 * 1024 + 200 * 100
        wait_until(lambda: offsets_topic_bytes(data_dir) < bound, 60, 0.2,
                   "the cleaner to compact __consumer_offsets on disk")
    finally:
        first.kill()  # kill -9: the cleaned segments must be whole without a clean stop
    second = BrokerProcess(data_dir=data_dir, overrides=overrides)
    second.start()
    try:
        wait_until(lambda: offsets_loaded(second), 30, 0.1, "the offsets to load")
        assert offsets_loaded(second)["records"] == 200  # one per key, not one per commit
        last = (rounds - 1) * 1000
        for group in groups[:3]:
            consumer = KafkaConsumer(bootstrap_servers=second.bootstrap, group_id=group,
                                     enable_auto_commit=False)
            try:
                assert [consumer.committed(TopicPartition(topic, p))
                        for p in range(partitions)] == [last + p for p in range(partitions)]
            finally:
                consumer.close()
    finally:
        assert second.stop() == 0


def test_a_compacted_topic_keeps_the_last_value_of_each_key_across_a_restart(tmp_path):
    data_dir = str(tmp_path / "data")
    topic = unique("disk-compacted")
    broker = BrokerProcess(data_dir=data_dir, overrides={"log.cleaner.backoff.ms": 200})
    broker.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={
            "cleanup.policy": "compact", "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": "0.01"})])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
        for round_ in range(20):
            for k in range(10):
                producer.send(topic, key=b"k%d" % k, value=b"v%d-%d" % (k, round_)).get(10)
        producer.send(topic, key=b"k3", value=None).get(10)  # a tombstone
        producer.send(topic, key=b"tail", value=b"t").get(10)
        producer.close()
        directory = os.path.join(data_dir, f"{topic}-0")

        def on_disk() -> int:
            return sum(os.path.getsize(os.path.join(directory, f))
                       for f in os.listdir(directory) if f.endswith(".log"))

        wait_until(lambda: on_disk() < 4096 + 2000, 30, 0.2, "the cleaner to compact the topic")
    finally:
        assert broker.stop(signal.SIGTERM) == 0
    broker = BrokerProcess(data_dir=data_dir)
    broker.start()
    try:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap,
                                 auto_offset_reset="earliest", consumer_timeout_ms=1500)
        consumer.assign([TopicPartition(topic, 0)])
        latest = {}
        for message in consumer:
            latest[message.key] = message.value
        consumer.close()
        expected = {b"k%d" % k: b"v%d-19" % k for k in range(10) if k != 3}
        expected.update({b"k3": None, b"tail": b"t"})
        assert latest == expected
        confluent = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("cg"),
                              "auto.offset.reset": "earliest", "enable.auto.commit": False})
        confluent.subscribe([topic])
        seen = []
        wait_until(lambda: (seen.extend(m for m in confluent.consume(50, 0.5) if not m.error())
                            or (seen and seen[-1].key() == b"tail")), 30, 0,
                   "confluent to read the topic")
        confluent.close()
        assert {m.key(): m.value() for m in seen} == expected
        assert len(seen) < 80  # of 202 produced: the active segment (4 KiB) and the last values
    finally:
        broker.stop()
