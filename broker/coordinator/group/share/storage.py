"""The share partitions' storage: ``__share_group_state`` (compacted), created at its first
write as Kafka creates it when a share group first needs it, written by
broker/coordinator/group/share/leader.py at each change of a share partition and read back at start,
before the listeners accept (share/state.py holds the record formats)."""
from __future__ import annotations

import structlog

from ...common import storage as coordinator_log
from ...common.runtime import EndMarker
from . import state

log = structlog.get_logger("broker.share")

TOPIC = state.TOPIC
#: segment.bytes comes from offsets.topic.segment.bytes (small segments are cleaned soon: each
#: change of a share partition writes a whole snapshot)
CONFIGS = {"cleanup.policy": "compact"}


def create(broker):
    """The topic, as Kafka's share coordinator creates it when a share group first needs it:
    internal, compacted, share.coordinator.state.topic.num.partitions partitions."""
    topic = broker.topics.get(TOPIC)
    if topic is None:
        config = broker.config
        replicas = max(1, min(config["share.coordinator.state.topic.replication.factor"],
                              len(broker.cluster.node_ids)))
        topic = broker.topics.create(
            TOPIC, config["share.coordinator.state.topic.num.partitions"],
            dict(CONFIGS, **{"segment.bytes": str(config["offsets.topic.segment.bytes"])}),
            internal=True, replication_factor=replicas)
    return topic


def state_writer(broker):
    """``persist(group_id, key, share partition or None)`` for ShareLeader."""
    write = coordinator_log.partition_writer(broker, TOPIC)

    def stored(exc) -> None:
        if exc is not None:
            log.error("share-partition state not stored", error=str(exc))

    def persist(group_id: str, key: tuple, sp) -> None:
        topic_id, index = key
        partitions = create(broker).partitions
        target = state.state_partition(group_id, topic_id, index, len(partitions))
        leader_epoch = -1
        name = broker.topics.name_of(topic_id)
        topic = broker.topics.get(name) if name is not None else None
        if topic is not None and 0 <= index < len(topic.partitions):
            leader_epoch = topic.partitions[index].leader_epoch
        value = None if sp is None else state.snapshot_value(sp, leader_epoch, broker.clock())
        write(target, [(state.snapshot_key(group_id, topic_id, index), value)], stored)

    return persist


def load(broker) -> int:
    """Restore every stored share partition; -> how many."""
    restored = 0
    topic = broker.topics.get(TOPIC)
    for partition in topic.partitions if topic is not None else ():
        for entry in coordinator_log.read_entries(partition.log):
            if isinstance(entry, EndMarker):
                continue
            try:
                decoded = state.decode(entry[0], entry[1])
            except ValueError as exc:
                log.warning("skipped an unreadable share state record", error=str(exc))
                continue
            if decoded is None:
                continue
            group_id, topic_id, index, value = decoded
            if value is None:
                broker.shares.forget(group_id, (topic_id, index))
                continue
            broker.shares.restore(group_id, (topic_id, index), value.start_offset, [
                (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in value.state_batches])
            restored += 1
    if restored:
        log.info("share-partition state loaded", share_partitions=restored)
    return restored
