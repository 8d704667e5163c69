"""Admin APIs that topic tools and UIs use, through kafka-python's and confluent-kafka's admin
clients against a real broker process: DeleteRecords, AlterConfigs and IncrementalAlterConfigs,
DescribeLogDirs, the ACL APIs without an authorizer, DescribeProducers. (The Java AdminClient's
run is in test_java_client.py; the raw answers are compared with Kafka's in
tests/conformance/test_admin_conformance.py.)"""
from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry
from confluent_kafka.admin import ConfigResource as CConfigResource
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                         ConfigResource, ConfigResourceType, NewTopic, ResourcePatternFilter,
                         ResourceType)
from kafka.errors import SecurityDisabledError

from tests.support import unique


@pytest.fixture
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


@pytest.fixture
def confluent_admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def new_topic(admin, partitions: int = 2) -> str:
    name = unique("admin")
    admin.create_topics([NewTopic(name, partitions, 1)])
    return name


def produce(broker, topic: str, n: int, partition: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True,
                             acks="all")
    for i in range(n):
        producer.send(topic, f"r{i}".encode(), partition=partition)
    producer.flush()
    producer.close()


def topic_config(admin, topic: str, name: str) -> tuple[str, str]:
    """(value, source) of one topic config, as kafka-python's describe_configs reports it."""
    result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                                    configs=[name])], config_filter="all")
    entry = result["topic"][topic][name]
    return entry["value"], entry["config_source"]


def earliest(broker, topic: str, partition: int) -> int:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = TopicPartition(topic, partition)
        return consumer.beginning_offsets([tp])[tp]
    finally:
        consumer.close()


def test_delete_records_moves_the_log_start_for_consumers(broker, admin):
    topic = new_topic(admin)
    produce(broker, topic, 10)
    tp = TopicPartition(topic, 0)
    result = admin.delete_records({tp: 4})
    assert result[tp]["low_watermark"] == 4 and result[tp]["error_code"] == 0
    assert earliest(broker, topic, 0) == 4
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=3000)
    consumer.assign([tp])
    assert [m.offset for m in consumer] == list(range(4, 10))
    consumer.close()
    # -1: up to the high watermark
    assert admin.delete_records({tp: -1})[tp]["low_watermark"] == 10


def test_confluent_delete_records_past_the_high_watermark_is_refused(broker, admin,
                                                                     confluent_admin):
    topic = new_topic(admin)
    produce(broker, topic, 5)
    [future] = confluent_admin.delete_records([CTopicPartition(topic, 0, 3)]).values()
    assert future.result().low_watermark == 3
    [future] = confluent_admin.delete_records([CTopicPartition(topic, 0, 99)]).values()
    with pytest.raises(Exception) as info:
        future.result()
    assert "OFFSET_OUT_OF_RANGE" in str(info.value) or "out of range" in str(info.value).lower()
    assert earliest(broker, topic, 0) == 3


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_replaces_the_explicit_set(broker, admin, confluent_admin):
    """confluent-kafka's alter_configs sends the legacy AlterConfigs as it is (kafka-python
    merges the current configs in first, so it could not show this)."""
    topic = new_topic(admin)

    def alter(configs: dict) -> None:
        [future] = confluent_admin.alter_configs(
            [CConfigResource("topic", topic, set_config=configs)]).values()
        future.result()

    alter({"retention.ms": "3600000", "max.message.bytes": "2000000"})
    assert topic_config(admin, topic, "retention.ms") == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    alter({"max.message.bytes": "3000000"})
    # AlterConfigs sets the whole explicit set: retention.ms is back to the default
    assert topic_config(admin, topic, "retention.ms") == ("604800000", "DEFAULT_CONFIG")
    assert topic_config(admin, topic, "max.message.bytes")[0] == "3000000"


def test_incremental_alter_configs_with_confluent(broker, admin, confluent_admin):
    topic = new_topic(admin)

    def alter(*entries, validate_only=False):
        [future] = confluent_admin.incremental_alter_configs(
            [CConfigResource("topic", topic, incremental_configs=list(entries))],
            validate_only=validate_only).values()
        return future.result()

    def describe():
        [future] = confluent_admin.describe_configs([CConfigResource("topic", topic)]).values()
        return future.result()

    alter(ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
          ConfigEntry("cleanup.policy", "compact",
                      incremental_operation=AlterConfigOpType.APPEND))
    configs = describe()
    assert configs["retention.ms"].value == "7200000"
    assert configs["cleanup.policy"].value == "delete,compact"
    alter(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT),
          ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE))
    configs = describe()
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].value == "604800000" and configs["retention.ms"].is_default
    alter(ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET),
          validate_only=True)
    assert describe()["retention.ms"].value == "604800000"
    with pytest.raises(Exception) as info:
        alter(ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET))
    assert "INVALID_CONFIG" in str(info.value) or "Unknown topic config" in str(info.value)


def test_kafka_python_reset_configs(broker, admin):
    topic = new_topic(admin)
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                        configs={"retention.ms": "5000"})])
    admin.reset_configs([ConfigResource(ConfigResourceType.TOPIC, topic,
                                        configs=["retention.ms"])])
    assert topic_config(admin, topic, "retention.ms") == ("604800000", "DEFAULT_CONFIG")


def test_describe_log_dirs_reports_partition_sizes(broker, admin):
    topic = new_topic(admin)
    produce(broker, topic, 20, partition=1)
    [entry] = admin.describe_log_dirs()
    [log_dir] = entry["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"]
    sizes = {(t["name"], p["partition_index"]): p["partition_size"]
             for t in log_dir["topics"] for p in t["partitions"]}
    assert sizes[(topic, 0)] == 0 and sizes[(topic, 1)] > 20 * 2
    assert all(p["offset_lag"] == 0 for t in log_dir["topics"] for p in t["partitions"])


def test_acl_apis_answer_security_disabled(broker, admin):
    everything = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                           permission_type=ACLPermissionType.ANY,
                           resource_pattern=ResourcePatternFilter(
                               ResourceType.ANY, None, ACLResourcePatternType.ANY))
    with pytest.raises(SecurityDisabledError):
        acls, error = admin.describe_acls(everything)
        raise error if error is not None and error.errno else AssertionError(acls)


def test_describe_producers_lists_the_idempotent_producer(broker, admin):
    topic = new_topic(admin)
    produce(broker, topic, 7)
    states = admin.describe_producers([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    [producer] = states[TopicPartition(topic, 0)].active_producers
    assert producer.producer_id >= 0 and producer.producer_epoch == 0
    assert producer.last_sequence == 6
    assert states[TopicPartition(topic, 1)].active_producers == []
