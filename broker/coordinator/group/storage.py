"""The group coordinator's storage: partition N of ``__consumer_offsets`` belongs to shard N.

The coordinator hands over records in Kafka's own key/value formats; common/storage.py appends them
through the same partition logs as user topics, so tools that read ``__consumer_offsets``
understand them, and replays them at start.
"""
from __future__ import annotations

import asyncio

import structlog

from ...topics import OFFSETS_TOPIC
from ..common import storage as coordinator_log
from ..common.storage import marker_writer, partition_writer
from .coordinator import GroupCoordinator, TopicsView

#: the configs Kafka creates __consumer_offsets with; segment.bytes comes from
#: offsets.topic.segment.bytes
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer"}

log = structlog.get_logger("broker.coordinator")


def build_coordinator(broker) -> GroupCoordinator:
    def topic_exists(topic: str, partition: int) -> bool:
        return broker.topics.partition(topic, partition) is not None

    def defer(fn) -> None:
        asyncio.get_running_loop().call_soon(fn)

    return GroupCoordinator(broker.config, broker.clock, broker.timer,
                            partition_writer(broker, OFFSETS_TOPIC), topic_exists,
                            topics=BrokerTopicsView(broker.topics),
                            persist_marker=marker_writer(broker, OFFSETS_TOPIC), defer=defer)


class BrokerTopicsView(TopicsView):
    """The broker's topics as consumer groups see them (coordinator.TopicsView)."""

    def __init__(self, topics) -> None:
        self.topics = topics

    def get(self, name: str):
        topic = self.topics.topics.get(name)
        if topic is None or topic.internal:
            return None
        return topic.topic_id, len(topic.partitions)

    def by_id(self, topic_id):
        topic = self.topics.by_id.get(topic_id)
        if topic is None:
            return None
        return topic.name, len(topic.partitions)

    def names(self):
        return [name for name, topic in self.topics.topics.items() if not topic.internal]

    def version(self) -> int:
        return self.topics.version


async def load_all(broker) -> None:
    """Replay every partition into its shard; each shard answers LOAD_IN_PROGRESS until done."""
    records, seconds = await coordinator_log.load_all(broker, broker.coordinator.runtime,
                                                      OFFSETS_TOPIC)
    if records:
        log.info("offsets loaded", records=records, groups=broker.coordinator.group_count(),
                 seconds=seconds)
