"""Dynamic broker configs through real clients, on a broker process with --data-dir:
confluent-kafka's and kafka-python's admin clients change this broker's configs (neither can
name the cluster-wide entity: Kafka's own kafka-configs does it in tests/conformance/
test_broker_configs_conformance.py); log.retention.ms set on the broker applies at once to a
topic's existing log (the retention job deletes its old segments); the values survive a
restart; a read-only config is refused with Kafka's message and changes nothing."""
from __future__ import annotations

import time

import pytest

from tests.support import BrokerProcess, unique


@pytest.fixture
def data_dir(tmp_path):
    return str(tmp_path / "data")


def start(data_dir: str, port: int | None = None) -> BrokerProcess:
    broker = BrokerProcess(data_dir=data_dir, port=port,
                           overrides={"log.retention.check.interval.ms": 200})
    broker.start()
    return broker


def describe_broker(bootstrap: str) -> dict:
    """name -> (value, config_source) of every config of broker 1, by kafka-python."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")],
                                           config_filter="all")
    finally:
        admin.close()
    return {name: (c["value"], c["config_source"])
            for name, c in described["broker"]["1"].items()}


def earliest(bootstrap: str, topic: str) -> int:
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        return consumer.beginning_offsets([tp])[tp]
    finally:
        consumer.close()


def test_broker_retention_applies_live_and_survives_a_restart(data_dir):
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, NewTopic)
    from kafka import KafkaProducer
    broker = start(data_dir)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topic = unique("dyn-retention")
        # small segments, so that retention has whole old segments to delete
        admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": "1024"})])[
            topic].result(10)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
        for i in range(50):
            producer.send(topic, b"x" * 100, key=str(i).encode()).get(10)
        producer.close()
        time.sleep(1)  # well past log.retention.check.interval.ms: nothing is old enough yet
        assert earliest(broker.bootstrap, topic) == 0

        resource = ConfigResource(ConfigResource.Type.BROKER, "1", incremental_configs=[
            ConfigEntry("log.retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(10)
        deadline = time.monotonic() + 10
        while earliest(broker.bootstrap, topic) == 0:
            assert time.monotonic() < deadline, "retention never deleted the old segments"
            time.sleep(0.2)
        assert describe_broker(broker.bootstrap)["log.retention.ms"] == (
            "1", "DYNAMIC_BROKER_CONFIG")
    finally:
        broker.stop()

    broker = start(data_dir)
    try:
        assert describe_broker(broker.bootstrap)["log.retention.ms"] == (
            "1", "DYNAMIC_BROKER_CONFIG")
    finally:
        broker.stop()


def test_kafka_python_sets_a_per_broker_value_and_a_read_only_one_is_refused(data_dir):
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
    broker = start(data_dir)
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            assert admin.alter_configs([ConfigResource(
                ConfigResourceType.BROKER, "1", configs={"log.cleaner.threads": "2"})]) == {
                "broker": {"1": "OK"}}
            refused = admin.alter_configs([ConfigResource(
                ConfigResourceType.BROKER, "1", configs={"log.dirs": "/elsewhere"})],
                raise_on_unknown=False)
            assert refused == {"broker": {"1": "[Error 42] InvalidRequestError: Cannot update "
                                          "these configs dynamically: [log.dirs]"}}
        finally:
            admin.close()
        configs = describe_broker(broker.bootstrap)
        assert configs["log.cleaner.threads"] == ("2", "DYNAMIC_BROKER_CONFIG")
        assert configs["log.dirs"] == (data_dir, "STATIC_BROKER_CONFIG")
        assert "console.enable" not in configs
    finally:
        broker.stop()
