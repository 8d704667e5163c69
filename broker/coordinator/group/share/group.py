"""A share group (Kafka's ShareGroup) as a plain object with no I/O.

Its members are consumer/group.py's ConsumerGroupMember (a share member is a consumer-group
member without instance id, regex, assignor or revocation). The shard changes the group only by
replaying its records (records.py). A share group is Empty without members and Stable with
them: a partition moves between members at once, with no revocation, because records, not
partitions, are what members own.
"""
from __future__ import annotations

from ..consumer.group import ConsumerGroupMember
from ..group import DEAD, EMPTY, STABLE

#: the member epochs of ShareGroupHeartbeat with a meaning of their own
LEAVE_GROUP_MEMBER_EPOCH = -1

#: the one share-group assignor of Kafka 4.3
ASSIGNOR_NAME = "simple"


class ShareGroup:
    """Members, group epoch and target assignment of one share group."""

    __slots__ = ("group_id", "state", "state_timestamp", "group_epoch", "assignment_epoch",
                 "assignment_timestamp", "metadata_hash", "members", "target",
                 "subscribed_names", "offsets",
                 "pending_offset_commits", "persisted", "pending_members", "initialized",
                 "metadata_version")

    group_type = "share"
    protocol_type = "share"

    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = EMPTY
        self.state_timestamp: int | None = now_ms
        self.group_epoch = 1            # Kafka's ModernGroup: the first member makes it 2
        self.assignment_epoch = 0
        #: when the target assignment was last computed (share.assignment.interval.ms counts
        #: from it); 0: never
        self.assignment_timestamp = 0
        self.metadata_hash = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.target: dict[str, dict] = {}                   # member id -> target assignment
        self.subscribed_names: dict[str, int] = {}          # topic name -> members naming it
        #: the ShareGroupStatePartitionMetadata record as stored (kept for Kafka's tools)
        self.initialized = None
        #: the topics' version at which metadata_hash was last found current (not persisted)
        self.metadata_version: int | None = None
        # what the shard's offset and group paths read of every group type
        self.offsets: dict = {}
        self.pending_offset_commits: dict = {}
        self.persisted = False
        self.pending_members: dict = {}

    def update_member(self, member: ConsumerGroupMember) -> None:
        old = self.members.get(member.member_id)
        self.members[member.member_id] = member
        self._count(old, -1)
        self._count(member, +1)

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        old = self.members.pop(member_id, None)
        self._count(old, -1)
        return old

    def _count(self, member: ConsumerGroupMember | None, delta: int) -> None:
        if member is None:
            return
        for name in member.subscribed_topic_names:
            left = self.subscribed_names.get(name, 0) + delta
            if left > 0:
                self.subscribed_names[name] = left
            else:
                self.subscribed_names.pop(name, None)

    def subscribed_topic_names(self, without: str | None = None,
                               updated: ConsumerGroupMember | None = None) -> set[str]:
        """Every topic some member subscribes to; with ``without`` that member left out and
        with ``updated`` that member as it is about to be (Kafka's computeSubscribedTopicNames)."""
        names = dict(self.subscribed_names)
        for member, delta in ((self.members.get(without) if without else None, -1),
                              (updated, +1)):
            if member is None:
                continue
            for name in member.subscribed_topic_names:
                names[name] = names.get(name, 0) + delta
        return {name for name, n in names.items() if n > 0}

    def update_state(self, now_ms: int) -> None:
        if self.state is DEAD:
            return
        state = STABLE if self.members else EMPTY
        if state is not self.state:
            self.state = state
            self.state_timestamp = now_ms

    def has_offsets(self) -> bool:
        return False

    def has_pending_offset_commit(self, tp) -> bool:
        return False

    def __repr__(self) -> str:
        return (f"<ShareGroup {self.group_id} {self.state.value} epoch={self.group_epoch} "
                f"members={len(self.members)}>")


class ShareGroupListener:
    """What the share partitions at the leader hear from the group coordinator: a deleted group
    loses its share-partition state. A member leaving or fenced is not told: its share session
    (and what it acquired) ends with the session's last request or its connection, as Kafka's
    share-session cache ends it."""

    def on_group_deleted(self, group_id: str) -> None:
        pass
