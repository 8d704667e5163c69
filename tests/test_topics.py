"""Topic manager: deleting a topic frees its partition logs at once."""
from __future__ import annotations

import gc
import weakref

from broker.config import BrokerConfig
from broker.topics import TopicManager, validate_topic_name
from protocol.records import SimpleRecord, build_batch


def test_deleted_topic_releases_its_logs_without_waiting_for_the_cyclic_gc():
    topics = TopicManager(BrokerConfig(), None)
    topic = topics.create("t", 3)
    topic.partitions[0].log.append(build_batch([SimpleRecord(None, b"x" * 1000)]))
    logs = [weakref.ref(p.log) for p in topic.partitions]
    del topic
    gc.disable()
    try:
        topics.delete("t")
        assert [ref() for ref in logs] == [None, None, None]
    finally:
        gc.enable()
    assert topics.get("t") is None


def test_topic_name_rules_match_kafka():
    assert validate_topic_name("orders.v1_x-y") is None
    assert validate_topic_name("") is not None
    assert validate_topic_name("..") is not None
    assert validate_topic_name("a" * 250) is not None
    assert validate_topic_name("has space") is not None
