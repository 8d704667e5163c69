"""One coordinator shard: the groups whose id hashes to partition N of __consumer_offsets.

The shard owns the group table, the switch that applies each record type, loading and the write
path. The protocols work on its groups: classic/manager.py (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, DescribeGroups) and offsets.py (OffsetCommit, OffsetFetch, OffsetDelete, retention).

Sans-I/O. The shard gets requests, the injected clock, the shared timer and purgatories, and the
runtime's ``persist`` functions (common/runtime.py); it answers through callbacks. Durable state —
committed offsets and each group's persisted metadata (generation, protocol, leader, members with
their subscriptions and assignments) — changes only by applying records of Kafka's
__consumer_offsets format (records.py), through :meth:`GroupCoordinatorShard.replay`: the same code
for a live write (applied when ``persist`` reports success) and for the replay of the partition at
startup. The rebalance in progress is in memory only, as in Kafka, and is rebuilt by clients
after a restart.
"""
from __future__ import annotations

import uuid
from functools import partial
from typing import Callable

import structlog

from protocol import messages as m
from protocol.errors import ErrorCode

from ...purgatory import DelayedOperationPurgatory, Timer
from ..common.result import CoordinatorResult, append_error
from ..common.runtime import NO_PRODUCER_ID, CoordinatorShard
from . import records as rec
from .context import GroupContext, Stats
from .group import DEAD, EMPTY, GroupMetadata
from .offsets import OffsetMetadataManager, revive

log = structlog.get_logger("broker.coordinator")

E = ErrorCode


# ============================================================================ the shard

class GroupCoordinatorShard(CoordinatorShard):
    def __init__(self, partition: int, config, clock: Callable[[], int], timer: Timer,
                 heartbeat_purgatory: DelayedOperationPurgatory,
                 rebalance_purgatory: DelayedOperationPurgatory,
                 persist: Callable, topic_exists: Callable[[str, int], bool],
                 stats: Stats, new_uuid: Callable[[], object] = uuid.uuid4,
                 topics=None, persist_marker: Callable | None = None,
                 defer: Callable | None = None) -> None:
        super().__init__(partition, clock, persist, persist_marker)
        self.config = config
        self.timer = timer
        self.heartbeat_purgatory = heartbeat_purgatory
        self.rebalance_purgatory = rebalance_purgatory
        self.topic_exists = topic_exists
        self.stats = stats
        self.new_uuid = new_uuid
        #: topic metadata for consumer groups: get(name), by_id(topic_id), names(), version()
        self.topics = topics
        #: classic groups (GroupMetadata) and those of the other types (consumer/group.py, ...)
        self.groups: dict[str, GroupMetadata] = {}
        #: what the managers see of this shard
        self.context = context = GroupContext(
            partition, config, clock, timer, heartbeat_purgatory, rebalance_purgatory, stats,
            new_uuid, topics, self.groups, self.append, self.maybe_drop_transient_group)
        self.offsets = OffsetMetadataManager(context)
        context.make_classic = self._make_classic
        #: ``defer(fn)``: the consumer manager's for its bursts of joins (GroupCoordinator)
        self._defer = defer
        #: the managers of consumer, share and streams groups, made when first used
        self._consumer = None
        self._share = None
        self._streams = None
        #: what set_group_hooks gives the share manager: who hears of members leaving
        self._share_listener = None

    # ------------------------------------------------------------ the group types' managers
    # Each (and its modules: classic/manager.py with its delayed operations, consumer/manager.py
    # with the assignors and the migration from and to classic groups, share/manager.py,
    # streams/manager.py with the topology) is made at the first request or record of such a
    # group, so a broker that never sees one never loads them. Offsets are every broker's.

    @property
    def classic(self):
        """The classic groups' manager (classic/manager.py), also the context's: offsets.py
        checks the members of the groups its commits created with it."""
        return self.context.classic

    def _make_classic(self):
        from .classic.manager import ClassicGroupManager
        return ClassicGroupManager(self.context)

    @property
    def consumer(self):
        """The consumer groups' manager (KIP-848, consumer/manager.py)."""
        if self._consumer is None:
            from .consumer.manager import ConsumerGroupManager
            self._consumer = self.context.consumer = ConsumerGroupManager(self.context)
            self._consumer.joins.defer = self._defer
        return self._consumer

    def flush_joins(self, group_id: str) -> None:
        """Answer the consumer-group joins of ``group_id`` still waiting for the end of their
        burst (consumer/join_bursts.py JoinBursts.queue)."""
        if self._consumer is not None and self._consumer.joins.waiting:
            self._consumer.joins.flush(group_id)

    @property
    def share(self):
        """The share groups' manager (KIP-932, share/manager.py)."""
        if self._share is None:
            from .share.manager import ShareGroupManager
            self._share = ShareGroupManager(self.context)
            if self._share_listener is not None:
                self._share.listener = self._share_listener
        return self._share

    @property
    def streams(self):
        """The streams groups' manager (KIP-1071, streams/manager.py)."""
        if self._streams is None:
            from .streams.manager import StreamsGroupManager
            self._streams = self.context.streams = StreamsGroupManager(self.context)
        return self._streams

    def set_group_hooks(self, share_listener, group_config) -> None:
        """Who hears of share-group members leaving and share groups deleted, and where a
        group's own configs are read (the coordinator's set_share_listener)."""
        self._share_listener = share_listener
        self.context.group_config = group_config
        if self._share is not None and share_listener is not None:
            self._share.listener = share_listener

    def unforce_streams_status(self, tag: str | None = None) -> None:
        """End the statuses a fault forced on streams groups (none before the manager is
        made)."""
        if self._streams is not None:
            self._streams.unforce_status(tag)

    # ------------------------------------------------------------------ the state machine
    def replay(self, key: bytes, value: bytes | None, replay: bool = False,
               producer_id: int = NO_PRODUCER_ID) -> None:
        """Apply one __consumer_offsets record: a live write that was stored, or a replayed one.
        A transactional offset commit (``producer_id`` set) stays pending until its marker."""
        record_type = rec.record_type(key)
        if record_type > rec.GROUP_METADATA_KEY_VERSION:
            self._replay_other_type(record_type, key, value, replay)
            return
        k = rec.decode_key(key)
        if k is None:
            return  # a key version this broker does not know: not ours
        if isinstance(k, rec.OffsetKey):
            offset = None if value is None else rec.decode_offset_commit_value(value)
            if producer_id != NO_PRODUCER_ID:
                self.offsets.replay_transactional(producer_id, k.group, (k.topic, k.partition),
                                                  offset, replay)
            else:
                self.offsets.replay(k.group, (k.topic, k.partition), offset, replay)
        else:
            metadata = None if value is None else rec.decode_group_metadata_value(value)
            self.classic.replay_group_metadata(k.group, metadata, replay)

    def _replay_other_type(self, record_type: int, key: bytes, value: bytes | None,
                           replay: bool) -> None:
        """A consumer, share or streams group's record (their record types follow the classic
        ones): those modules load with the first such record."""
        from .consumer import records as crec
        from .share import records as srec
        from .streams import records as strec
        if record_type in crec.RECORD_TYPES:
            self.consumer.replay(crec.decode_key(record_type, key), value, replay)
        elif record_type in srec.RECORD_TYPES:
            self.share.replay(srec.decode_key(record_type, key), value, replay)
        elif record_type in strec.RECORD_TYPES:
            self.streams.replay(strec.decode_key(record_type, key), value, replay)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        self.offsets.replay_end_transaction(producer_id, commit)

    def after_apply(self) -> None:
        if self._consumer is not None:
            self._consumer.settle_states()
        if self._share is not None:
            self._share.settle_states()
        if self._streams is not None:
            self._streams.settle_states()

    # ------------------------------------------------------------------ loading
    def begin_loading(self) -> None:
        super().begin_loading()
        self.context.loading = True

    def finish_loading(self) -> None:
        self.context.loading = False
        super().finish_loading()

    def on_loaded(self) -> None:
        members = 0
        offsets = 0
        for group in self.groups.values():
            offsets += len(group.offsets)
            members += len(group.members)
            self._protocol(group).on_loaded(group)
        if self.groups or self._loaded_records:
            log.info("offsets loaded", partition=self.partition, groups=len(self.groups),
                     members=members, offsets=offsets, records=self._loaded_records,
                     duration_ms=self.load_duration_ms)

    def on_unload(self, error: ErrorCode = E.NOT_COORDINATOR) -> None:
        """Drop every group, answering whoever still waits with ``error``."""
        if self._consumer is not None:
            self._consumer.joins.abandon(error)
        for group in list(self.groups.values()):
            kind = group.group_type
            if kind == "consumer":
                self.consumer.unload_group(group)
            elif kind == "share":
                self.share.unload_group(group)
            elif kind == "streams":
                self.streams.unload_group(group)
            else:
                self.classic.unload_group(group, error)
            group.state = DEAD
        self.groups.clear()
        self.offsets.unload()

    def _protocol(self, group):
        return getattr(self, group.group_type)   # classic, consumer, share or streams

    def maybe_drop_transient_group(self, group: GroupMetadata) -> None:
        """A group that exists only because a join started it and that holds nothing."""
        if (group.state is EMPTY and group.group_type == "classic"
                and not group.members and not group.pending_members
                and not group.has_offsets() and not group.persisted
                and self.groups.get(group.group_id) is group):
            del self.groups[group.group_id]

    # ================================================================== ListGroups
    def list_groups(self, states: set[str] | None, types: set[str] | None) -> list:
        cls = m.ListGroupsResponse.ListedGroup
        out = []
        for group in self.groups.values():
            if group.state is DEAD:
                continue
            group_type = group.group_type
            if types and group_type not in types:
                continue
            if states and group.state.value.lower() not in states:
                continue
            out.append(cls(group_id=group.group_id, protocol_type=group.protocol_type or "",
                           group_state=group.state.value, group_type=group_type))
        return out

    # ================================================================== DeleteGroups
    def delete_groups(self, group_ids: list[str], done: Callable[[dict], None]) -> None:
        """Delete Empty groups with their offsets; ``done({group_id: error})`` once stored."""
        results: dict[str, ErrorCode] = {}
        records = []
        deleting = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or group.state is DEAD:
                results[group_id] = E.GROUP_ID_NOT_FOUND
            elif group.state is not EMPTY:
                results[group_id] = E.NON_EMPTY_GROUP
            else:
                for (topic, partition) in sorted(group.offsets):
                    records.append(rec.offset_commit_tombstone(group_id, topic, partition))
                if group.group_type != "classic":   # consumer, share or streams
                    records.extend(self._protocol(group).group_tombstones(group))
                    group.state = DEAD
                else:
                    records.append(rec.group_metadata_tombstone(group_id))
                    group.transition_to(DEAD, self.clock())
                deleting.append(group)
        for group in deleting:
            results[group.group_id] = E.NONE
        self.append(CoordinatorResult(records, results,
                                      append_future=partial(self._groups_deleted, deleting)),
                    done, delete_groups_error)

    def _groups_deleted(self, deleting: list, exc) -> None:
        """After the write of DeleteGroups' tombstones: forget the groups' history, or, when
        the write failed, bring them back."""
        if exc is not None:
            revive(self.groups, deleting)
            return
        for group in deleting:
            self.stats.history.forget(group.group_id)
            log.info("group deleted", group=group.group_id, partition=self.partition)


def delete_groups_error(exc: BaseException, response: dict) -> dict:
    """DeleteGroups' answer to a failed write: every group being deleted gets the append error,
    the refused ones keep theirs."""
    error = append_error(exc)
    return {group_id: error if code == E.NONE else code for group_id, code in response.items()}
