"""A topic deleted and created again under the same name, read by the same consumer group with
real clients (kafka-python, aiokafka, confluent-kafka) against Kafka 4.3.1 and kbroker.

Deleting a topic deletes every group's committed offsets of it (Kafka's onPartitionsDeleted), so
the group starts the new topic by ``auto.offset.reset`` (earliest here) and reads all of it. Had
the old offsets stayed, the group would resume at the old topic's position and skip the new
topic's first records: the test suites that recreate a topic between tests would lose data."""
from __future__ import annotations

import asyncio
import time

import pytest

from tests.support import unique

FIRST, SECOND = 5, 8


def produce(port: int, topic: str, values: list[str]) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
    for v in values:
        producer.send(topic, v.encode())
    producer.flush(10)
    producer.close()


def create(port: int, topic: str) -> None:
    """Create ``topic`` (one partition); after a deletion Kafka may say the name is still
    taken for a moment, so retry that."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                admin.create_topics([NewTopic(topic, 1, 1)])
                return
            except TopicAlreadyExistsError:
                assert time.monotonic() < deadline, topic
                time.sleep(0.2)
    finally:
        admin.close()


def delete(port: int, topic: str) -> None:
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
    admin.delete_topics([topic])
    admin.close()


def read_kafka_python(port: int, topic: str, group: str, count: int) -> list[str]:
    from kafka import KafkaConsumer
    consumer = KafkaConsumer(topic, bootstrap_servers=f"127.0.0.1:{port}", group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             fetch_max_wait_ms=100)
    got: list[str] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value.decode() for r in records)
        consumer.commit()
    finally:
        consumer.close()
    return got


def read_aiokafka(port: int, topic: str, group: str, count: int) -> list[str]:
    async def run() -> list[str]:
        from aiokafka import AIOKafkaConsumer
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=f"127.0.0.1:{port}", group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    fetch_max_wait_ms=100)
        await consumer.start()
        got: list[str] = []
        try:
            deadline = time.monotonic() + 30
            while len(got) < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    got.extend(r.value.decode() for r in records)
            await consumer.commit()
        finally:
            await consumer.stop()
        return got
    return asyncio.run(run())


def read_confluent(port: int, topic: str, group: str, count: int) -> list[str]:
    import confluent_kafka as ck
    consumer = ck.Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": group,
                            "auto.offset.reset": "earliest", "enable.auto.commit": False,
                            "fetch.wait.max.ms": 100})
    consumer.subscribe([topic])
    got: list[str] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value().decode())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


READERS = {"kafka-python": read_kafka_python, "aiokafka": read_aiokafka,
           "confluent-kafka": read_confluent}


@pytest.mark.parametrize("client", sorted(READERS))
def test_a_group_reads_a_recreated_topic_from_its_start(target, client):
    read = READERS[client]
    topic, group = unique("recreated"), unique("recreated-g")
    create(target.port, topic)
    produce(target.port, topic, [f"old-{i}" for i in range(FIRST)])
    assert read(target.port, topic, group, FIRST) == [f"old-{i}" for i in range(FIRST)]
    delete(target.port, topic)
    create(target.port, topic)
    produce(target.port, topic, [f"new-{i}" for i in range(SECOND)])
    got = read(target.port, topic, group, SECOND)
    # all of the new topic, from its first record; nothing of the old one
    assert got == [f"new-{i}" for i in range(SECOND)], (target.name, client, got)
