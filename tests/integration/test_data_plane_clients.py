"""Real clients against a real broker process: create a topic, produce with every codec, consume
by assignment from earliest and from a timestamp, and see exactly what was produced, in order."""
from __future__ import annotations

import asyncio
import time

import pytest

from tests.support import unique

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 2
PER_PARTITION = 40


def expected_records(tag: str):
    """(partition, key, value) in produce order; the second half carries later timestamps."""
    return [(p, f"{tag}-k{p}-{i}".encode(), f"{tag}-v{p}-{i}".encode() * 3)
            for i in range(PER_PARTITION) for p in range(PARTITIONS)]


def by_partition(records):
    out = {p: [] for p in range(PARTITIONS)}
    for p, k, v in records:
        out[p].append((k, v))
    return out


# ---------------------------------------------------------------- kafka-python

@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_produce_consume(broker, codec):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    topic = unique(f"kp-{codec}")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    admin.close()
    records = expected_records("kp")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap,
                             compression_type=None if codec == "none" else codec, linger_ms=5)
    half = len(records) // 2
    for p, k, v in records[:half]:
        producer.send(topic, key=k, value=v, partition=p, timestamp_ms=1_000_000)
    for p, k, v in records[half:]:
        producer.send(topic, key=k, value=v, partition=p, timestamp_ms=2_000_000)
    producer.flush()
    producer.close()

    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, consumer_timeout_ms=1500,
                             enable_auto_commit=False)
    consumer.assign(tps)
    consumer.seek_to_beginning()
    got = [(m.partition, m.key, m.value) for m in consumer]
    assert by_partition(got) == by_partition(records)

    offsets = consumer.offsets_for_times({tp: 1_500_000 for tp in tps})
    for tp in tps:
        assert offsets[tp].offset == PER_PARTITION // 2
        assert offsets[tp].timestamp == 2_000_000
        consumer.seek(tp, offsets[tp].offset)
    later = [(m.partition, m.key, m.value) for m in consumer]
    assert by_partition(later) == by_partition(records[half:])
    consumer.close()


# ---------------------------------------------------------------- aiokafka

@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_produce_consume(broker, codec):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = unique(f"aio-{codec}")
    records = expected_records("aio")
    half = len(records) // 2

    async def scenario():
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                    compression_type=None if codec == "none" else codec,
                                    linger_ms=5)
        await producer.start()
        futures = []
        for i, (p, k, v) in enumerate(records):
            ts = 1_000_000 if i < half else 2_000_000
            futures.append(await producer.send(topic, key=k, value=v, partition=p,
                                               timestamp_ms=ts))
        await asyncio.gather(*futures)
        await producer.stop()

        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap,
                                    enable_auto_commit=False)
        await consumer.start()
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got = []
        deadline = time.monotonic() + 15
        while len(got) < len(records) and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for msgs in batch.values():
                got.extend((m.partition, m.key, m.value) for m in msgs)
        offsets = await consumer.offsets_for_times({tp: 1_500_000 for tp in tps})
        await consumer.stop()
        return got, offsets, tps

    got, offsets, tps = asyncio.run(scenario())
    assert by_partition(got) == by_partition(records)
    for tp in tps:
        assert offsets[tp].offset == PER_PARTITION // 2
        assert offsets[tp].timestamp == 2_000_000


# ---------------------------------------------------------------- confluent-kafka

@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_produce_consume(broker, codec):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = unique(f"ck-{codec}")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    futures[topic].result(10)
    records = expected_records("ck")
    half = len(records) // 2
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                         "linger.ms": 5})
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    for i, (p, k, v) in enumerate(records):
        producer.produce(topic, key=k, value=v, partition=p, on_delivery=on_delivery,
                         timestamp=1_000_000 if i < half else 2_000_000)
    assert producer.flush(15) == 0
    assert errors == []

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("ck-g"),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = []
    deadline = time.monotonic() + 15
    while len(got) < len(records) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        got.append((msg.partition(), msg.key(), msg.value()))
    assert by_partition(got) == by_partition(records)
    found = consumer.offsets_for_times(
        [TopicPartition(topic, p, 1_500_000) for p in range(PARTITIONS)], 10)
    assert [tp.offset for tp in found] == [PER_PARTITION // 2] * PARTITIONS
    consumer.close()
