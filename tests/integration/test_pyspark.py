"""PySpark with Spark's Kafka connector (kafka-clients inside) against the broker: batch reads and
writes, a read from a timestamp, and a structured-streaming query that resumes from its
checkpoint, as a pipeline developed locally before it runs on a cluster.

tools/install-test-deps.sh installs pyspark and resolves the connector jars of the same version
into tests/spark/target/jars.
"""
from __future__ import annotations

import pathlib

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic

from tests.support import unique

JARS = pathlib.Path(__file__).resolve().parent.parent / "spark" / "target" / "jars"


@pytest.fixture(scope="module")
def spark():
    import pyspark
    from pyspark.sql import SparkSession

    connector = JARS / f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar"
    assert connector.exists(), (
        f"{connector} is missing: run tools/install-test-deps.sh (it resolves the connector of "
        f"pyspark's version, {pyspark.__version__})")
    session = (SparkSession.builder.master("local[2]").appName("kbroker-tests")
               .config("spark.jars", ",".join(str(p) for p in sorted(JARS.glob("*.jar"))))
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def create_topic(broker, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def produce(broker, topic: str, records: list[tuple[bytes, bytes, int]]) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for key, value, timestamp_ms in records:
        producer.send(topic, key=key, value=value, timestamp_ms=timestamp_ms,
                      headers=[("source", b"test")])
    producer.flush()
    producer.close()


def consume_all(broker, topic: str) -> list:
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        return list(consumer)
    finally:
        consumer.close()


def read_kafka(spark, broker, topic: str, **options):
    reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_batch_read_returns_every_record_with_its_kafka_columns(broker, spark):
    topic = unique("spark-read")
    create_topic(broker, topic, 3)
    base = 1_700_000_000_000
    produce(broker, topic, [(f"k{i}".encode(), f"v{i}".encode(), base + i) for i in range(300)])
    rows = read_kafka(spark, broker, topic, startingOffsets="earliest",
                      includeHeaders="true").collect()
    assert sorted((r.key, r.value) for r in rows) == sorted(
        (f"k{i}".encode(), f"v{i}".encode()) for i in range(300))
    assert {r.topic for r in rows} == {topic}
    by_partition: dict[int, list[int]] = {}
    for r in rows:
        by_partition.setdefault(r.partition, []).append(r.offset)
    assert set(by_partition) == {0, 1, 2}
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))  # contiguous from 0
    timestamps = {bytes(r.value): int(r.timestamp.timestamp() * 1000) for r in rows}
    assert timestamps[b"v7"] == base + 7
    assert all(r.timestampType == 0 for r in rows)  # CreateTime
    assert all([(h.key, bytes(h.value)) for h in r.headers] == [("source", b"test")] for r in rows)


def test_batch_read_from_a_timestamp(broker, spark):
    topic = unique("spark-ts")
    create_topic(broker, topic, 1)
    base = 1_700_000_000_000
    produce(broker, topic, [(None, f"v{i}".encode(), base + 1000 * i) for i in range(50)])
    df = read_kafka(spark, broker, topic, startingTimestamp=str(base + 1000 * 20))
    values = [bytes(r.value) for r in df.orderBy("offset").collect()]
    assert values == [f"v{i}".encode() for i in range(20, 50)]


def test_batch_write_with_compression(broker, spark):
    source, sink = unique("spark-src"), unique("spark-sink")
    create_topic(broker, source, 2)
    create_topic(broker, sink, 2)
    produce(broker, source, [(f"k{i}".encode(), f"v{i}".encode(), None) for i in range(200)])
    (read_kafka(spark, broker, source, startingOffsets="earliest")
     .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
     .write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("kafka.compression.type", "zstd").option("topic", sink).save())
    written = consume_all(broker, sink)
    assert sorted((m.key, m.value) for m in written) == sorted(
        (f"k{i}".encode(), f"V{i}".encode()) for i in range(200))


def test_streaming_query_resumes_from_its_checkpoint(broker, spark, tmp_path):
    source, sink = unique("spark-stream-in"), unique("spark-stream-out")
    create_topic(broker, source, 3)
    create_topic(broker, sink, 1)
    checkpoint = str(tmp_path / "checkpoint")

    def run_once() -> int:
        query = (spark.readStream.format("kafka")
                 .option("kafka.bootstrap.servers", broker.bootstrap)
                 .option("subscribe", source).option("startingOffsets", "earliest").load()
                 .selectExpr("key", "concat('seen-', CAST(value AS STRING)) AS value")
                 .writeStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
                 .option("topic", sink).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        assert query.exception() is None
        return sum(p["numInputRows"] for p in query.recentProgress)

    produce(broker, source, [(f"k{i}".encode(), f"v{i}".encode(), None) for i in range(500)])
    assert run_once() == 500
    produce(broker, source, [(f"k{i}".encode(), f"v{i}".encode(), None) for i in range(500, 700)])
    assert run_once() == 200  # only what arrived since the checkpoint
    values = [m.value for m in consume_all(broker, sink)]
    assert sorted(values) == sorted(f"seen-v{i}".encode() for i in range(700))
