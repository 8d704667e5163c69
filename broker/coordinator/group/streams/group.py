"""A streams group (KIP-1071) and its members (Kafka's StreamsGroup and StreamsGroupMember), as
plain objects with no I/O.

A streams member is a consumer-group member (consumer/group.py's ConsumerGroupMember: epochs,
reconciliation state, assignment, assignment epochs) with what Kafka Streams adds: the topology
epoch it runs, its process id, its endpoint for interactive queries and its client tags. Its
assignment keeps the three kinds of tasks in one mapping keyed ``(kind, subtopology_id)`` ->
frozenset(partitions), so that consumer/reconciliation.py moves tasks exactly as it moves
partitions: revoked first, then given to the new owner once released.

The shard changes a group only by replaying its records (records.py).
"""
from __future__ import annotations

import dataclasses

from protocol.errors import ErrorCode

from ..consumer.group import ConsumerGroupMember, MemberState
from ..group import DEAD, EMPTY, STABLE, GroupState

E = ErrorCode

ACTIVE = "active"
STANDBY = "standby"
WARMUP = "warmup"
KINDS = (ACTIVE, STANDBY, WARMUP)

#: StreamsGroupHeartbeat's member epochs with a meaning of their own
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

ASSIGNING = GroupState.ASSIGNING
RECONCILING = GroupState.RECONCILING
NOT_READY = GroupState.NOT_READY


@dataclasses.dataclass(eq=True, slots=True)
class StreamsGroupMember(ConsumerGroupMember):
    """One member of a streams group; ``assigned`` and ``pending_revocation`` are keyed
    ``(kind, subtopology_id)``."""

    topology_epoch: int = -1
    process_id: str = ""
    user_endpoint: tuple | None = None      # (host, port)
    client_tags: tuple = ()                 # ((key, value), ...) sorted

    def tasks(self, kind: str, pending: bool = False) -> dict[str, frozenset]:
        source = self.pending_revocation if pending else self.assigned
        return {sub: ps for (k, sub), ps in source.items() if k == kind and ps}

    def metadata_equals(self, other: "StreamsGroupMember") -> bool:
        """Everything StreamsGroupMemberMetadata holds."""
        return (self.instance_id == other.instance_id and self.rack_id == other.rack_id
                and self.client_id == other.client_id and self.client_host == other.client_host
                and self.rebalance_timeout_ms == other.rebalance_timeout_ms
                and self.topology_epoch == other.topology_epoch
                and self.process_id == other.process_id
                and self.user_endpoint == other.user_endpoint
                and self.client_tags == other.client_tags)


def tasks_of(active: dict, standby: dict, warmup: dict | None = None) -> dict:
    """One ``(kind, subtopology_id)`` mapping from the three task maps."""
    out = {}
    for kind, tasks in ((ACTIVE, active), (STANDBY, standby), (WARMUP, warmup or {})):
        for sub, partitions in tasks.items():
            if partitions:
                out[(kind, sub)] = frozenset(partitions)
    return out


class StreamsGroup:
    """Members, epochs, topology and target assignment of one streams group, and its
    committed offsets."""

    __slots__ = ("group_id", "state", "state_timestamp", "group_epoch", "assignment_epoch",
                 "assignment_timestamp", "metadata_hash", "validated_topology_epoch",
                 "last_assignment_configs", "topology", "configured", "members", "target",
                 "offsets", "pending_offset_commits", "persisted", "pending_members",
                 "shutdown_request_member_id", "endpoint_information_epoch",
                 "metadata_version", "topics")

    group_type = "streams"
    protocol_type = "streams"

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = EMPTY
        self.state_timestamp: int | None = now_ms
        # Kafka's StreamsGroup starts at group epoch 1 with a target assignment (empty) at
        # epoch 1, so a member that joins while the assignment is delayed has epoch 1
        self.group_epoch = 1
        self.assignment_epoch = 1
        self.assignment_timestamp = 0
        self.metadata_hash = 0
        self.validated_topology_epoch = 0
        self.last_assignment_configs: dict[str, str] = {}
        self.topology = None            # topology.StreamsTopology, once a member sent it
        #: topology.ConfiguredTopology against the topics at metadata_hash (not persisted)
        self.configured = None
        self.members: dict[str, StreamsGroupMember] = {}
        self.target: dict[str, dict] = {}          # member id -> tasks by (kind, subtopology)
        self.offsets: dict = {}
        self.pending_offset_commits: dict = {}
        self.persisted = False
        self.pending_members: dict = {}
        self.shutdown_request_member_id: str | None = None
        self.endpoint_information_epoch = 0
        #: the topics' version at which metadata_hash was last found current (not persisted)
        self.metadata_version: int | None = None
        #: the shard's topic view (by_id), for the offset commit check (not persisted)
        self.topics = None

    # ------------------------------------------------------------------ members
    def update_member(self, member: StreamsGroupMember) -> None:
        self.members[member.member_id] = member

    def remove_member(self, member_id: str) -> StreamsGroupMember | None:
        return self.members.pop(member_id, None)

    def task_owners(self) -> tuple[dict, dict, dict]:
        """Kafka's currentActiveTaskProcessId / currentStandbyTaskProcessIds /
        currentWarmupTaskProcessIds: task -> process of every member holding it, assigned or
        pending revocation."""
        active: dict = {}
        standby: dict = {}
        warmup: dict = {}
        maps = {ACTIVE: active, STANDBY: standby, WARMUP: warmup}
        for member in self.members.values():
            for source in (member.assigned, member.pending_revocation):
                for (kind, sub), partitions in source.items():
                    for p in partitions:
                        if kind == ACTIVE:
                            active[(sub, p)] = member.process_id
                        else:
                            maps[kind].setdefault((sub, p), set()).add(member.process_id)
        return active, standby, warmup

    # ------------------------------------------------------------------ state
    def update_state(self, now_ms: int) -> None:
        """Kafka's StreamsGroup.maybeUpdateGroupState."""
        if self.state is DEAD:
            return
        if not self.members:
            state = EMPTY
            self.shutdown_request_member_id = None
        elif self.topology is None or self.topology.epoch != self.validated_topology_epoch:
            state = NOT_READY
        elif self.group_epoch > self.assignment_epoch:
            state = ASSIGNING
        elif any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            state = RECONCILING
        else:
            state = STABLE
        if state is not self.state:
            self.state = state
            self.state_timestamp = now_ms

    # ------------------------------------------------------------------ offsets
    def validate_offset_commit(self, member_id: str, instance_id: str | None, member_epoch: int,
                               version: int, transactional: bool = False):
        """Kafka's StreamsGroup.validateOffsetCommit: None, an error, or a per-partition check
        when the member commits with an older epoch (the task must have been its own since)."""
        if member_epoch < 0 and not self.members:
            return None
        if transactional and member_epoch == -1 and not member_id and instance_id is None:
            return None
        member = self.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if not transactional and version < 9:
            return E.UNSUPPORTED_VERSION
        if member_epoch == member.member_epoch:
            return None
        if member_epoch > member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return _TaskEpochCheck(self, member, member_epoch)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id) if member_id is not None else None
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return E.STALE_MEMBER_EPOCH
        return None

    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits)

    def has_pending_offset_commit(self, tp) -> bool:
        return tp in self.pending_offset_commits

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Kafka's StreamsGroup.isSubscribedToTopic: a source or repartition source topic of
        the topology, while the group has members."""
        if self.state in (EMPTY, DEAD) or self.topology is None:
            return False
        return any(topic in s.source_topics or
                   any(t.name == topic for t in s.repartition_source_topics)
                   for s in self.topology.subtopologies)

    def __repr__(self) -> str:
        return (f"<StreamsGroup {self.group_id} {self.state.value} epoch={self.group_epoch} "
                f"members={len(self.members)}>")


def new_group(group_id: str, now_ms: int, topics, replaced=None) -> StreamsGroup:
    """A streams group for ``group_id``, reading ``topics`` (the shard's topic view); in place
    of ``replaced``, a group that only held offsets (:func:`is_simple`), whose offsets stay."""
    group = StreamsGroup(group_id, now_ms)
    group.topics = topics
    if replaced is not None:
        group.offsets = replaced.offsets
        group.pending_offset_commits = replaced.pending_offset_commits
    return group


def is_simple(group) -> bool:
    """A classic group that only holds committed offsets (no protocol, no members)."""
    return getattr(group, "group_type", "classic") == "classic" and \
        getattr(group, "protocol_type", None) is None and not group.members and \
        group.state in (EMPTY, DEAD)


class _TaskEpochCheck:
    """A commit with an older member epoch is accepted for a partition of a source topic whose
    active task the member has held (or is revoking) since that epoch or before."""

    __slots__ = ("group", "member", "epoch")

    def __init__(self, group: StreamsGroup, member: StreamsGroupMember, epoch: int) -> None:
        self.group = group
        self.member = member
        self.epoch = epoch

    def __call__(self, topic_id, partition: int) -> ErrorCode | None:
        topology = self.group.topology
        found = self.group.topics.by_id(topic_id) if self.group.topics and topic_id else None
        if topology is None or found is None:
            return E.STALE_MEMBER_EPOCH
        for s in topology.subtopologies:
            if found[0] in s.source_topics or \
                    any(t.name == found[0] for t in s.repartition_source_topics):
                got = self.member.assignment_epochs.get(((ACTIVE, s.subtopology_id), partition))
                if got is not None and self.epoch >= got:
                    return None
                return E.STALE_MEMBER_EPOCH
        return E.STALE_MEMBER_EPOCH


STREAMS_MEMBER_STATES = {MemberState.STABLE: 1, MemberState.UNREVOKED_PARTITIONS: 2,
                         MemberState.UNRELEASED_PARTITIONS: 3, MemberState.UNKNOWN: 127}
"""Kafka's streams MemberState values as stored (1 stable, 2 unrevoked, 3 unreleased)."""
MEMBER_STATES_BY_VALUE = {v: k for k, v in STREAMS_MEMBER_STATES.items()}
