"""Differential conformance of topic configs: DescribeConfigs of a new topic, of a topic with its
own values and of __consumer_offsets, and CreateTopics with bad values, against Kafka 4.3.1 and
kbroker. Every config's value, source, type, read-only and sensitive flags and synonyms are
asserted: the expectations are Kafka's answers, written down once in broker/topic_configs.py's
table and Kafka's broker config catalogue (so this test also checks them against the real
broker)."""
from __future__ import annotations

import pytest

from broker.broker_configs import catalogue
from broker.topic_configs import (DEFAULT_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
                                  DYNAMIC_TOPIC_CONFIG, TOPIC_CONFIGS)
from protocol.errors import ErrorCode as E
from protocol.messages import CreateTopicsRequest, DescribeConfigsRequest
from tests.support import unique

from .topics import create_topic

TOPIC = 2


@pytest.fixture
def client(connect):
    return connect("topic-configs")


def describe(client, name: str, keys=None) -> dict:
    response = client.call(DescribeConfigsRequest(
        resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=TOPIC, resource_name=name, configuration_keys=keys)],
        include_synonyms=True, include_documentation=False), 4)
    [result] = response.results
    assert (result.error_code, result.error_message) == (E.NONE, "")
    return {c.name: (c.value, c.config_source, c.config_type, c.read_only, c.is_sensitive,
                     [(s.name, s.value, s.source) for s in c.synonyms])
            for c in result.configs}


def default_entry(name: str) -> tuple:
    """A config a topic does not set, on a broker at Kafka's defaults."""
    spec = TOPIC_CONFIGS[name]
    synonyms = []
    if name == "min.insync.replicas":
        synonyms.append((name, "1", DYNAMIC_DEFAULT_BROKER_CONFIG))
    # Kafka names the broker setting at its default only where that default is not null
    # (log.retention.ms has none: the retention comes from log.retention.hours)
    if spec.setting is not None and catalogue()[spec.setting].default is not None:
        synonyms.append((spec.setting, spec.default, DEFAULT_CONFIG))
    source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
    return spec.default, source, spec.type, False, False, synonyms


def own_entry(name: str, value: str) -> tuple:
    _, _, ctype, read_only, sensitive, synonyms = default_entry(name)
    return (value, DYNAMIC_TOPIC_CONFIG, ctype, read_only, sensitive,
            [(name, value, DYNAMIC_TOPIC_CONFIG), *synonyms])


def create(client, name: str, configs: dict[str, str]):
    response = client.call(CreateTopicsRequest(
        topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1, assignments=[],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                     for k, v in configs.items()])],
        timeout_ms=30000, validate_only=False), 7)
    [topic] = response.topics
    return topic


def test_a_new_topic_describes_every_config_as_kafka(target, client):
    name = create_topic(client, unique("cfg-default"), 1)
    got = describe(client, name)
    assert sorted(got) == sorted(TOPIC_CONFIGS)
    assert len(got) == 33
    for config in TOPIC_CONFIGS:
        assert got[config] == default_entry(config), config
    # the few where Kafka surprises: the cluster-wide min.insync.replicas record (KIP-966),
    # and no synonym for settings whose default comes from another setting
    assert got["min.insync.replicas"][1] == DYNAMIC_DEFAULT_BROKER_CONFIG
    assert got["retention.ms"][5] == [] and got["segment.ms"][5] == []
    assert got["follower.replication.throttled.replicas"][:2] == ("", DEFAULT_CONFIG)


def test_a_topics_own_values_come_first_with_the_brokers_below(target, client):
    own = {"retention.ms": "1000", "cleanup.policy": "compact,delete",
           "compression.gzip.level": "5", "min.insync.replicas": "1", "preallocate": "true",
           "min.cleanable.dirty.ratio": "0.2", "local.retention.ms": "-2"}
    name = unique("cfg-own")
    topic = create(client, name, own)
    assert topic.error_code == E.NONE, topic
    got = describe(client, name, keys=sorted(own) + ["segment.bytes"])
    assert sorted(got) == sorted([*own, "segment.bytes"])
    for config, value in own.items():
        assert got[config] == own_entry(config, value), config
    assert got["segment.bytes"] == default_entry("segment.bytes")


@pytest.mark.parametrize("config,value,message", [
    ("segment.bytes", "abc",
     "Invalid value abc for configuration segment.bytes: Not a number of type INT"),
    ("retention.ms", "soon",
     "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    ("compression.zstd.level", "x",
     "Invalid value x for configuration compression.zstd.level: Not a number of type INT"),
    ("preallocate", "maybe",
     "Invalid value maybe for configuration preallocate: Expected value to be either true or "
     "false"),
    ("min.cleanable.dirty.ratio", "half",
     "Invalid value half for configuration min.cleanable.dirty.ratio: Not a number of type "
     "DOUBLE"),
    ("no.such.config", "1", "Unknown topic config name: no.such.config"),
])
def test_a_bad_value_is_refused_with_kafkas_message(target, client, config, value, message):
    topic = create(client, unique("cfg-bad"), {config: value})
    assert (topic.error_code, topic.error_message) == (E.INVALID_CONFIG, message)


def test_consumer_offsets_has_kafkas_configs(target, client):
    got = describe(client, "__consumer_offsets",
                   keys=["cleanup.policy", "compression.type", "min.insync.replicas"])
    assert got["cleanup.policy"] == own_entry("cleanup.policy", "compact")
    assert got["compression.type"] == own_entry("compression.type", "producer")
    assert got["min.insync.replicas"] == default_entry("min.insync.replicas")


@pytest.mark.parametrize("count,error,message", [
    (2, E.INVALID_PARTITIONS, "The topic {} currently has 5 partition(s); 2 would not be an "
                              "increase."),
    (5, E.INVALID_PARTITIONS, "Topic already has 5 partition(s)."),
])
def test_create_partitions_that_would_not_grow_the_topic(target, client, count, error,
                                                         message):
    from protocol.messages import CreatePartitionsRequest as P
    name = create_topic(client, unique("cfg-grow"), 5)
    response = client.call(P(topics=[P.CreatePartitionsTopic(name=name, count=count,
                                                              assignments=None)],
                             timeout_ms=30000, validate_only=False), 3)
    [result] = response.results
    assert (result.error_code, result.error_message) == (error, message.format(name))
