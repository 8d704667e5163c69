"""With --data-dir, acknowledged records and topics survive a clean stop and a kill -9."""
from __future__ import annotations

import signal

import pytest

from tests.support import BrokerProcess, unique


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> list[tuple[int, bytes]]:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1, topic_configs={"retention.ms": "-1"})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2)
    sent = []
    futures = []
    for i in range(count):
        value = f"record-{i}".encode()
        futures.append(producer.send(topic, value=value, partition=i % partitions))
        sent.append((i % partitions, value))
    for f in futures:
        f.get(timeout=10)  # acknowledged
    producer.close()
    return sent


def consume_all(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, bytes]]:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=1500,
                             enable_auto_commit=False)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    got = [(m.partition, m.value) for m in consumer]
    consumer.close()
    return got


def per_partition(records):
    out = {}
    for p, v in records:
        out.setdefault(p, []).append(v)
    return out


@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_acknowledged_records_survive_restart(tmp_path, how):
    data_dir = str(tmp_path / "data")
    topic = unique("durable")
    first = BrokerProcess(data_dir=data_dir)
    first.start()
    try:
        sent = produce(first.bootstrap, topic, 300, 3)
    finally:
        if how == "sigterm":
            assert first.stop(signal.SIGTERM) == 0
        else:
            first.kill()
    second = BrokerProcess(data_dir=data_dir, port=first.port)
    second.start()
    try:
        assert per_partition(consume_all(second.bootstrap, topic, 3)) == per_partition(sent)
        # the log continues at the right offsets after the restart
        more = produce_more(second.bootstrap, topic)
        got = per_partition(consume_all(second.bootstrap, topic, 3))
        assert got[0][-1] == more
    finally:
        assert second.stop() == 0


def produce_more(bootstrap: str, topic: str) -> bytes:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    value = b"after-restart"
    metadata = producer.send(topic, value=value, partition=0).get(timeout=10)
    assert metadata.offset == 100
    producer.close()
    return value
