"""A consumer group of the KIP-848 protocol and its members (Kafka's ConsumerGroup and
ConsumerGroupMember), as plain objects with no I/O and no clock.

The shard changes them only by replaying records (records.py): a member's subscription
(ConsumerGroupMemberMetadata), the group epoch (ConsumerGroupMetadata), the target assignment
(ConsumerGroupTargetAssignmentMetadata/Member) and a member's current assignment
(ConsumerGroupCurrentMemberAssignment). The heartbeat handler (heartbeat.py) reads them, builds
the records of what changes, and the shard stores and replays those records.

Assignments are ``{topic_id: frozenset(partitions)}`` with ``uuid.UUID`` topic ids, as Kafka
keeps them: a topic deleted and re-created under the same name is a different topic.
"""
from __future__ import annotations

import base64
import dataclasses
import enum
import hashlib
import uuid
from typing import Mapping

from protocol.errors import ErrorCode

from ..group import DEAD, EMPTY, GroupState, OffsetAndMetadata

E = ErrorCode

Assignment = Mapping[uuid.UUID, frozenset]

ASSIGNING = GroupState.ASSIGNING
RECONCILING = GroupState.RECONCILING
STABLE = GroupState.STABLE

#: the member epochs of ConsumerGroupHeartbeat with a meaning of their own
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Where a member is in its reconciliation (Kafka's MemberState; the values are stored)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1    # waits for the member to give up partitions
    UNRELEASED_PARTITIONS = 2   # waits for other members to give up partitions it is to get
    UNKNOWN = 127


@dataclasses.dataclass(eq=True, slots=True)
class ConsumerGroupMember:
    """One member: its subscription (persisted as ConsumerGroupMemberMetadata) and its current
    assignment with the epochs (persisted as ConsumerGroupCurrentMemberAssignment)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset = frozenset()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Mapping = dataclasses.field(default_factory=dict)
    pending_revocation: Mapping = dataclasses.field(default_factory=dict)
    #: a member that joined with JoinGroup (online migration): its session timeout and protocols
    classic_metadata: tuple | None = None
    #: (topic id, partition) -> the epoch at which the member got it, for assigned partitions
    #: and those pending revocation (KIP-1251)
    assignment_epochs: Mapping = dataclasses.field(default_factory=dict)

    def replace(self, **changes) -> "ConsumerGroupMember":
        return dataclasses.replace(self, **changes)

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def subscription_equals(self, other: "ConsumerGroupMember") -> bool:
        """Everything ConsumerGroupMemberMetadata holds."""
        return (self.instance_id == other.instance_id and self.rack_id == other.rack_id
                and self.client_id == other.client_id and self.client_host == other.client_host
                and self.subscribed_topic_names == other.subscribed_topic_names
                and self.subscribed_topic_regex == other.subscribed_topic_regex
                and self.rebalance_timeout_ms == other.rebalance_timeout_ms
                and self.server_assignor == other.server_assignor
                and self.classic_metadata == other.classic_metadata)

    def assignment_equals(self, other: "ConsumerGroupMember") -> bool:
        """Everything ConsumerGroupCurrentMemberAssignment holds."""
        return (self.member_epoch == other.member_epoch
                and self.previous_member_epoch == other.previous_member_epoch
                and self.state == other.state and self.assigned == other.assigned
                and self.pending_revocation == other.pending_revocation
                and self.assignment_epochs == other.assignment_epochs)


class ConsumerGroup:
    """A consumer group: members, group epoch, target assignment, and its committed offsets."""

    __slots__ = ("group_id", "state", "state_timestamp", "group_epoch", "assignment_epoch",
                 "metadata_hash", "members", "static_members", "target", "partition_epochs",
                 "subscribed_names", "regex_members", "resolved_regexes", "offsets",
                 "pending_offset_commits", "persisted", "pending_members", "regex_version",
                 "assignment_timestamp", "metadata_version", "assignment_specs",
                 "stable_members")

    group_type = "consumer"
    protocol_type = "consumer"

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = EMPTY
        self.state_timestamp: int | None = now_ms
        self.group_epoch = 1            # Kafka 4.3's ModernGroup: the first member makes it 2
        self.assignment_epoch = 0
        self.assignment_timestamp = 0   # when the target assignment was last computed
        self.metadata_hash = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}           # instance id -> member id
        self.target: dict[str, dict] = {}                   # member id -> target assignment
        #: (topic id, partition) -> epoch of the member that holds or revokes it
        self.partition_epochs: dict[tuple, int] = {}
        self.subscribed_names: dict[str, int] = {}          # topic name -> members naming it
        self.regex_members: dict[str, int] = {}             # regex -> members using it
        self.resolved_regexes: dict[str, frozenset] = {}    # regex -> topic names it matched
        self.regex_version = -1         # the topics' version the regexes were resolved against
        #: the topics' version at which metadata_hash was last found current (not persisted)
        self.metadata_version: int | None = None
        #: member id -> (member, target, regex topics, topics version, MemberSubscription) of
        #: the last target assignment: the manager reuses a spec while its inputs are the same
        #: objects (not persisted)
        self.assignment_specs: dict[str, tuple] = {}
        #: member epoch -> members in state STABLE at it (update_state reads this)
        self.stable_members: dict[int, int] = {}
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.pending_offset_commits: dict[tuple[str, int], int] = {}
        self.persisted = False
        self.pending_members: dict = {}  # classic groups' MEMBER_ID_REQUIRED ids; none here

    # ------------------------------------------------------------------ members
    def update_member(self, member: ConsumerGroupMember) -> None:
        """Put ``member`` in place of the member with its id (Kafka's updateMember)."""
        old = self.members.get(member.member_id)
        self.members[member.member_id] = member
        self._count_subscription(old, -1)
        self._count_subscription(member, +1)
        if old is not None:
            self._set_partition_epochs(old, None)
            self._count_stable(old, -1)
        self._set_partition_epochs(None, member)
        self._count_stable(member, +1)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        old = self.members.pop(member_id, None)
        if old is None:
            return None
        self._count_subscription(old, -1)
        self._set_partition_epochs(old, None)
        self._count_stable(old, -1)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        return old

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def _count_subscription(self, member: ConsumerGroupMember | None, delta: int) -> None:
        if member is None:
            return
        for name in member.subscribed_topic_names:
            left = self.subscribed_names.get(name, 0) + delta
            if left > 0:
                self.subscribed_names[name] = left
            else:
                self.subscribed_names.pop(name, None)
        regex = member.subscribed_topic_regex
        if regex:
            left = self.regex_members.get(regex, 0) + delta
            if left > 0:
                self.regex_members[regex] = left
            else:
                self.regex_members.pop(regex, None)

    def _count_stable(self, member: ConsumerGroupMember, delta: int) -> None:
        if member.state is MemberState.STABLE:
            epoch = member.member_epoch
            left = self.stable_members.get(epoch, 0) + delta
            if left > 0:
                self.stable_members[epoch] = left
            else:
                self.stable_members.pop(epoch, None)

    def _set_partition_epochs(self, old: ConsumerGroupMember | None,
                              new: ConsumerGroupMember | None) -> None:
        epochs = self.partition_epochs
        if old is not None:
            for assignment in (old.assigned, old.pending_revocation):
                for topic_id, partitions in assignment.items():
                    for p in partitions:
                        if epochs.get((topic_id, p)) == old.member_epoch:
                            del epochs[(topic_id, p)]
        if new is not None:
            for assignment in (new.assigned, new.pending_revocation):
                for topic_id, partitions in assignment.items():
                    for p in partitions:
                        epochs[(topic_id, p)] = new.member_epoch

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member holding the partition, -1 when nobody does."""
        return self.partition_epochs.get((topic_id, partition), -1)

    # ------------------------------------------------------------------ subscriptions
    def subscribed_topic_names(self) -> set[str]:
        """Every topic some member subscribes to, by name or through a resolved regex."""
        names = set(self.subscribed_names)
        for regex in self.regex_members:
            names.update(self.resolved_regexes.get(regex, ()))
        return names

    def subscribed_topics_of(self, member: ConsumerGroupMember) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names.update(self.resolved_regexes.get(member.subscribed_topic_regex, ()))
        return names

    def preferred_assignor(self, default: str) -> str:
        """The server assignor most members ask for; ``default`` when none asks (Kafka's
        computePreferredServerAssignor)."""
        counts: dict[str, int] = {}
        for member in self.members.values():
            if member.server_assignor:
                counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
        if not counts:
            return default
        return max(counts, key=lambda name: counts[name])

    # ------------------------------------------------------------------ state
    def update_state(self, now_ms: int) -> None:
        """Kafka's maybeUpdateGroupState: Empty without members, Assigning while the target
        assignment lags the group epoch, Reconciling until every member reached it."""
        if self.state is DEAD:
            return
        if not self.members:
            state = EMPTY
        elif self.group_epoch > self.assignment_epoch:
            state = ASSIGNING
        elif self.stable_members.get(self.assignment_epoch, 0) != len(self.members):
            state = RECONCILING   # some member is not yet STABLE at the assignment epoch
        else:
            state = STABLE
        if state is not self.state:
            self.state = state
            self.state_timestamp = now_ms

    # ------------------------------------------------------------------ offsets
    def validate_offset_commit(self, member_id: str, instance_id: str | None, member_epoch: int,
                               version: int, transactional: bool = False):
        """Kafka's ConsumerGroup.validateOffsetCommit: None when the commit may go ahead, an
        error for all of it, or a per-partition check (``check(topic_id, partition) -> error
        or None``) when the member commits with an older epoch."""
        if member_epoch < 0 and not self.members:
            return None  # the admin client or a consumer without group management
        if transactional and member_epoch == -1 and member_id == "" and instance_id is None:
            return None  # TxnOffsetCommit checks the member only when the request names one
        member = self.members.get(member_id)
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if not transactional and member.classic_metadata is None and version < 9:
            return E.UNSUPPORTED_VERSION
        if member_epoch == member.member_epoch:
            return None
        stale = E.ILLEGAL_GENERATION if member.classic_metadata is not None \
            else E.STALE_MEMBER_EPOCH
        if member_epoch > member.member_epoch:
            return stale
        # an older epoch: each partition must have been the member's since at most that epoch
        return _AssignmentEpochCheck(member, member_epoch, stale)

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> ErrorCode | None:
        if member_id is None and member_epoch < 0:
            return None
        member = self.members.get(member_id) if member_id is not None else None
        if member is None:
            return E.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return E.ILLEGAL_GENERATION if member.classic_metadata is not None \
                else E.STALE_MEMBER_EPOCH
        return None

    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits)

    def has_pending_offset_commit(self, tp: tuple[str, int]) -> bool:
        return tp in self.pending_offset_commits

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def __repr__(self) -> str:
        return (f"<ConsumerGroup {self.group_id} {self.state.value} epoch={self.group_epoch} "
                f"assignment_epoch={self.assignment_epoch} members={len(self.members)}>")


class _AssignmentEpochCheck:
    """KIP-1251: a commit with an older member epoch is accepted for a partition the member has
    held (or is revoking) since that epoch or before."""

    __slots__ = ("member", "epoch", "error")

    def __init__(self, member: ConsumerGroupMember, epoch: int, error: ErrorCode) -> None:
        self.member = member
        self.epoch = epoch
        self.error = error

    def __call__(self, topic_id, partition: int) -> ErrorCode | None:
        got = self.member.assignment_epochs.get((topic_id, partition))
        if got is None or self.epoch < got:
            return self.error
        return None


def new_member_id(value) -> str:
    """A new member id as Kafka's Uuid.toString() writes one: URL-safe base64, no padding."""
    if isinstance(value, uuid.UUID):
        return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()
    return str(value)


def can_compute_next_target(group, group_epoch: int, interval_ms: int, now: int) -> bool:
    """Kafka's canComputeNextTargetAssignment (KIP-1263), for consumer and share groups: the
    group epoch is ahead of the target assignment, and there was none yet, there is no
    interval, or the interval has passed since the last one."""
    return group_epoch > group.assignment_epoch and (
        not group.assignment_timestamp or not interval_ms
        or now >= group.assignment_timestamp + interval_ms)


def metadata_hash(metadata: dict) -> int:
    """A 64-bit hash of the subscribed topics' ids, names and partition counts (what Kafka 4.1+
    keeps as the group's MetadataHash): a change means a new target assignment."""
    if not metadata:
        return 0
    digest = hashlib.blake2b(digest_size=8)
    for topic_id, (name, partitions) in sorted(metadata.items(), key=lambda kv: kv[1][0]):
        digest.update(topic_id.bytes)
        digest.update(name.encode())
        digest.update(partitions.to_bytes(4, "big", signed=True))
    return int.from_bytes(digest.digest(), "big", signed=True)
