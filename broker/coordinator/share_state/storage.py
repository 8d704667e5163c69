"""The share partitions' storage: ``__share_group_state`` (compacted), created at its first
write (or a FindCoordinator for a SHARE key) as Kafka creates it when a share group first needs
it. The share coordinator (broker/coordinator/share_state/) writes it: for the share-group
state APIs, and for broker/coordinator/group/share/leader.py at each change of a share partition. It
is read back at start, before the listeners accept."""
from __future__ import annotations

import structlog

from ..common import storage as coordinator_log
from ..common.runtime import EndMarker
from ..group.share import state
from .persister import SharePersister
from .service import ShareCoordinatorService
from .store import ShareStateStore

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


def build(broker):
    """The share coordinator (broker/coordinator/share_state/): its store, the service the
    share-group state APIs use, and the persister through which ShareLeader stores and reads
    its share partitions. -> the service (``broker.share_coordinator``)."""
    def partition_count(topic_id):
        name = broker.topics.name_of(topic_id)
        topic = broker.topics.get(name) if name is not None else None
        return None if topic is None else len(topic.partitions)

    def leader_epoch(topic_id, index: int) -> int:
        name = broker.topics.name_of(topic_id)
        partition = broker.topics.partition(name, index) if name is not None else None
        return -1 if partition is None else partition.leader_epoch

    service = ShareCoordinatorService(broker, ShareStateStore(broker.clock, partition_count),
                                      lambda: create(broker))
    persister = SharePersister(service, broker.shares)
    persister.leader_epoch = leader_epoch
    service.on_changed = persister.changed
    service.persister = persister
    return service


def load(broker) -> int:
    """Replay the stored share-partition state into the share coordinator, then every stored
    share partition into the leader; from then on the leader stores through the coordinator.
    -> how many share partitions were restored."""
    service = broker.share_coordinator
    topic = broker.topics.get(TOPIC)
    for partition in topic.partitions if topic is not None else ():
        for entry in coordinator_log.read_entries(partition.log):
            if isinstance(entry, EndMarker):
                continue
            try:
                service.store.replay(entry[0], entry[1])
            except ValueError as exc:
                log.warning("skipped an unreadable share state record", error=str(exc))
    restored = service.persister.restore_all()
    broker.shares.persist = service.persister.persist
    broker.shares.load_state = service.persister.stored
    if restored:
        log.info("share-partition state loaded", share_partitions=restored)
    return restored
