"""Compacted topics with the in-memory log cleaner, through real clients: after cleaning, a
consumer from the beginning sees the last value of each key once, at its original offset; and
__consumer_offsets stops growing with every commit while the committed offsets stay right."""
from __future__ import annotations

import pytest
from confluent_kafka import Consumer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from tests.support import BrokerProcess, unique, wait_until


@pytest.fixture(scope="module")
def cleaning_broker():
    broker = BrokerProcess(overrides={"log.cleaner.backoff.ms": 200})
    broker.start()
    yield broker
    broker.stop()


def partition_sizes(admin, topic: str) -> dict[int, int]:
    [entry] = admin.describe_log_dirs()
    return {p["partition_index"]: p["partition_size"]
            for t in entry["log_dirs"][0]["topics"] if t["name"] == topic
            for p in t["partitions"]}


def test_consumers_see_the_last_value_of_each_key(cleaning_broker):
    broker = cleaning_broker
    topic = unique("compacted")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    for round_ in range(3):
        for k in range(10):
            producer.send(topic, key=b"k%d" % k, value=b"v%d-%d" % (k, round_)).get(10)
    producer.send(topic, key=b"k3", value=None).get(10)        # a tombstone for k3
    producer.send(topic, key=b"tail", value=b"t").get(10)       # the active tail
    producer.close()
    expected = [(30 + 0, b"k3", None)] + [(20 + k, b"k%d" % k, b"v%d-2" % k)
                                         for k in range(10) if k != 3]
    expected = sorted(expected) + [(31, b"tail", b"t")]

    def read_all() -> list:
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap,
                                 auto_offset_reset="earliest", consumer_timeout_ms=1000)
        consumer.assign([TopicPartition(topic, 0)])
        try:
            return [(m.offset, m.key, m.value) for m in consumer]
        finally:
            consumer.close()

    # the cleaner runs every 200 ms; wait for the pass that covers everything but the tail
    wait_until(lambda: read_all() == expected, 30, 0.2, "the log cleaner to compact the topic")
    # 32 single-record batches take at least 32 x 61 header bytes; 11 are left
    assert partition_sizes(admin, topic)[0] < 32 * 61 / 2

    confluent = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("cg"),
                          "auto.offset.reset": "earliest", "enable.auto.commit": False})
    confluent.subscribe([topic])
    seen = []
    wait_until(lambda: (seen.extend(m for m in confluent.consume(50, 0.5) if not m.error())
                        or len(seen) >= len(expected)), 30, 0, "confluent to read the topic")
    assert [(m.offset(), m.key(), m.value()) for m in seen] == expected
    confluent.close()
    admin.close()


def test_consumer_offsets_stay_small_and_right(cleaning_broker):
    broker = cleaning_broker
    topic, group = unique("committed"), unique("committer")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                             enable_auto_commit=False)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    for offset in range(1, 301):
        consumer.commit({tp: OffsetAndMetadata(offset, "", -1)})
    wait_until(lambda: sum(partition_sizes(admin, "__consumer_offsets").values()) < 300 * 40,
               20, 0.2, "the cleaner to compact __consumer_offsets")
    assert consumer.committed(tp) == 300
    consumer.close()
    resumed = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                            enable_auto_commit=False)
    resumed.assign([tp])
    assert resumed.position(tp) == 300          # a new member resumes at the last commit
    resumed.close()
    admin.close()
