"""The share coordinator's request path (Kafka's ShareCoordinatorService): what the five
share-group state APIs have in common before and after the store (store.py) answers one share
partition.

As Kafka: the principal needs CLUSTER_ACTION on the cluster (else every partition is answered
CLUSTER_AUTHORIZATION_FAILED); an empty group id, no topics, or a topic without partitions is
answered with no results at all; each share partition goes to the node leading its partition
of ``__share_group_state`` (the Java hash of ``group:topic id:partition``), and one this node
does not lead, or whose state topic does not exist yet, is NOT_COORDINATOR. A partition named
twice is answered once, by its last operation. The results come in the order of Kafka's hash
maps (topics by their id's hash, partitions by number), so that both brokers list the same.
"""
from __future__ import annotations

import uuid
from typing import Callable

import structlog

from protocol.errors import ErrorCode as E

from ..common.hashing import partition_for
from .store import MESSAGES, Outcome, coordinator_key

log = structlog.get_logger("broker.share")

TOPIC = "__share_group_state"


def state_partition(group_id: str, topic_id: uuid.UUID, partition: int, n: int) -> int:
    return partition_for(coordinator_key(group_id, topic_id, partition), n)


def _java_int(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - 0x100000000 if n & 0x80000000 else n


def uuid_hash(topic_id: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode()."""
    value = topic_id.int
    xor = (value >> 64) ^ (value & 0xFFFFFFFFFFFFFFFF)
    return _java_int((xor >> 32) ^ xor)


def hashmap_order(keys: list, hash_of: Callable[[object], int]) -> list:
    """``keys`` (distinct, in request order) in the order Kafka's answer lists them, from a
    java.util.HashMap: by bucket of the spread hash in a table of the size it grew to; within a
    bucket the last named first (as observed on Kafka 4.3.1)."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key) -> int:
        h = hash_of(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)
    return [k for _, _, k in sorted((bucket(k), -i, k) for i, k in enumerate(keys))]


def denied(broker, ctx) -> bool:
    auth = broker.authorizer
    if auth is None:
        return False
    from ...security.authorizer import AclOperation  # with an authorizer only
    return not auth.cluster(ctx, AclOperation.CLUSTER_ACTION)


class ShareCoordinatorService:
    """Routes, runs and stores the operations of the share-group state APIs."""

    def __init__(self, broker, store, create_topic: Callable) -> None:
        self.broker = broker
        self.store = store
        #: ``create_topic()`` makes __share_group_state (share_state/storage.py's create)
        self.create_topic = create_topic
        self._write = None
        #: ``changed(group, topic id, partition)`` after an API changed stored state: the
        #: share-partition leader reads it again (persister.py)
        self.on_changed: Callable | None = None

    def writer(self):
        if self._write is None:
            from ..common import storage as coordinator_log
            self._write = coordinator_log.partition_writer(self.broker, TOPIC)
        return self._write

    def state_topic(self, create: bool = False):
        topics = self.broker.topics
        topic = topics.get(TOPIC)
        if topic is None and create:
            topic = self.create_topic()
        return topic

    def coordinator_of(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int | None:
        """The node leading the state partition of a share partition; None: no state topic."""
        topic = self.state_topic()
        if topic is None:
            return None
        index = state_partition(group_id, topic_id, partition, len(topic.partitions))
        return topic.partitions[index].leader

    def _not_here(self, conn, group_id: str, topic_id: uuid.UUID, partition: int) -> bool:
        topic = self.state_topic()
        if topic is None:
            return True
        if self.broker.cluster.single or conn is None or conn.node_id is None:
            return False
        return self.coordinator_of(group_id, topic_id, partition) != conn.node_id

    def store_records(self, group_id: str, topic_id: uuid.UUID, partition: int, records,
                      done: Callable[[Exception | None], None]) -> None:
        """Append ``records`` to the share partition's state partition; ``done(exc)``."""
        if not records:
            done(None)
            return
        topic = self.state_topic(create=True)
        index = state_partition(group_id, topic_id, partition, len(topic.partitions))
        self.writer()(index, records, done)

    def topic_deleted(self, topic_id: uuid.UUID) -> None:
        """Every share partition stored for a deleted topic goes, as on Kafka."""
        for group_id, _tid, index in self.store.keys_of_topic(topic_id):
            self.store_records(group_id, topic_id, index,
                               self.store.forget(group_id, topic_id, index), self._logged)

    @staticmethod
    def _logged(exc) -> None:
        if exc is not None:
            log.error("share-group state not stored", error=str(exc))

    def serve(self, ctx, group_id: str, items: list, operate: Callable, what: str,
              answer: Callable, check_partitions: bool = True) -> None:
        """``items`` [(topic id, [partition data])] of one request; ``operate(topic id, data)``
        -> (records, outcome) from the store; ``answer([(topic id, [(data, outcome)])])``
        once every change is stored. ``what`` names the operation in NOT_COORDINATOR's
        message ("write share group state")."""
        if denied(self.broker, ctx):   # before anything else, in the request's order
            failed = Outcome(E.CLUSTER_AUTHORIZATION_FAILED,
                             MESSAGES[E.CLUSTER_AUTHORIZATION_FAILED])
            answer([(tid, [(p, failed) for p in parts]) for tid, parts in items])
            return
        if not group_id or not items or (
                check_partitions and any(not parts for _, parts in items)):
            answer([])
            return
        conn = getattr(ctx, "conn", None)
        results: dict = {}          # topic id -> {partition: (data, outcome)}
        pending = [1]

        def finish() -> None:
            pending[0] -= 1
            if pending[0]:
                return
            ordered = []
            for tid in hashmap_order(list(results), uuid_hash):
                by_partition = results[tid]
                ordered.append((tid, [by_partition[p] for p in
                                      hashmap_order(list(by_partition), lambda p: p)]))
            answer(ordered)

        for topic_id, parts in items:
            for data in parts:
                by_partition = results.setdefault(topic_id, {})
                index = data.partition
                if self._not_here(conn, group_id, topic_id, index):
                    by_partition[index] = (data, Outcome(
                        E.NOT_COORDINATOR,
                        f"Unable to {what}: {MESSAGES[E.NOT_COORDINATOR]}"))
                    continue
                records, outcome = operate(topic_id, data)
                by_partition[index] = (data, outcome)
                if records:
                    pending[0] += 1
                    self.store_records(group_id, topic_id, index, records,
                                       self._stored(by_partition, index, data, what, finish))
                    if self.on_changed is not None:
                        self.on_changed(group_id, topic_id, index)
        finish()

    @staticmethod
    def _stored(by_partition, index, data, what, finish):
        def done(exc) -> None:
            if exc is not None:
                log.error("share-group state not stored", error=str(exc))
                by_partition[index] = (data, Outcome(E.UNKNOWN_SERVER_ERROR,
                                                     f"Unable to {what}: {exc}"))
            finish()
        return done
