"""An in-memory broker has a bound (issue 14, defect 9): a runaway producer with no consumer
leaves the broker's RSS near log.memory.max.bytes, the oldest records go as retention would
drop them, one warning says so and a metric counts the bytes."""
from __future__ import annotations

import json
import urllib.request

from confluent_kafka import Producer
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

from tests.support import BrokerProcess, free_port, unique

BUDGET = 32 * 1024 * 1024


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise KeyError(name)


def test_a_runaway_producer_leaves_rss_near_the_budget():
    metrics_port = free_port()
    broker = BrokerProcess(overrides={"log.memory.max.bytes": BUDGET,
                                      "metrics.port": metrics_port})
    broker.start()
    try:
        topic = unique("runaway")
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(topic, 2, 1)])
        admin.close()
        before = rss_mib(broker.proc.pid)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                             "acks": 1})
        value = b"v" * 1024
        produced = 0
        for i in range(160 * 1024):  # 160 MiB of values, five times the budget
            while True:
                try:
                    producer.produce(topic, value=value, key=b"%d" % i, partition=i % 2)
                    break
                except BufferError:
                    producer.poll(0.05)
            produced += 1
        assert producer.flush(60) == 0
        del producer  # (librdkafka would go on reconnecting after the broker stops)
        grown = rss_mib(broker.proc.pid) - before
        held = metric(metrics_port, "kafka_log_memory_bytes")
        dropped = metric(metrics_port, "kafka_log_memory_dropped_bytes_total")
        assert held <= BUDGET
        assert dropped > 120 * 1024 * 1024
        assert grown < 32 + 40, f"RSS grew {grown:.0f} MiB"  # the budget and request buffers
        warnings = [json.loads(line) for line in broker.logs().splitlines()
                    if "log.memory.max.bytes" in line]
        assert len(warnings) == 1 and warnings[0]["level"] == "warning"
        # what is left is the newest records, from the log start offset on
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap,
                                 auto_offset_reset="earliest", consumer_timeout_ms=2000)
        tp = TopicPartition(topic, 1)
        consumer.assign([tp])
        first = next(iter(consumer))
        assert first.offset > 0
        end = consumer.end_offsets([tp])[tp]
        assert end == produced // 2
        consumer.close()
    finally:
        broker.stop()
