"""The group coordinator's storage: partition N of ``__consumer_offsets`` belongs to shard N.

The coordinator hands over records in Kafka's own key/value formats; they are appended here as
ordinary record batches through the same partition logs as user topics, so tools that read
``__consumer_offsets`` understand them. At start every partition is replayed into its shard,
one partition per event-loop turn, while the shard answers COORDINATOR_LOAD_IN_PROGRESS.
"""
from __future__ import annotations

import asyncio
import time

import structlog

from protocol.records import SimpleRecord, build_batch

from .coordinator import GroupCoordinator
from .coordinator.coordinator import TopicsView
from .topics import OFFSETS_TOPIC

log = structlog.get_logger("broker.coordinator")


def build_coordinator(broker) -> GroupCoordinator:
    def persist(partition: int, records, on_done) -> None:
        target = broker.topics.partition(OFFSETS_TOPIC, partition)
        try:
            now = broker.clock()
            batch = build_batch([SimpleRecord(key, value, timestamp=now)
                                 for key, value in records])
            target.log.append(batch)
        except Exception as exc:  # noqa: BLE001 - answered as Kafka answers a failed append
            log.error("__consumer_offsets append failed", partition=partition, error=str(exc))
            on_done(exc)
            return
        broker.fetches.partition_appended(OFFSETS_TOPIC, partition)
        on_done(None)

    def topic_exists(topic: str, partition: int) -> bool:
        return broker.topics.partition(topic, partition) is not None

    return GroupCoordinator(broker.config, broker.clock, broker.timer, persist, topic_exists,
                            topics=BrokerTopicsView(broker.topics))


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


def read_records(partition_log):
    """(key, value) of every record in a partition log, in offset order."""
    start = partition_log.log_start_offset
    for batch in partition_log.batches():
        if not batch.is_control:
            for record in batch.records():
                if record.offset >= start and record.key is not None:
                    yield record.key, record.value


async def load_all(broker) -> None:
    """Replay every partition into its shard; each shard answers LOAD_IN_PROGRESS until done."""
    coordinator = broker.coordinator
    topic = broker.topics.get(OFFSETS_TOPIC)
    for partition in topic.partitions:
        coordinator.begin_loading(partition.index)
    started = time.monotonic()
    total = 0
    for partition in topic.partitions:
        total += coordinator.load(partition.index, read_records(partition.log))
        coordinator.finish_loading(partition.index)
        await asyncio.sleep(0)
    if total:
        log.info("offsets loaded", records=total, groups=coordinator.group_count(),
                 seconds=round(time.monotonic() - started, 3))
