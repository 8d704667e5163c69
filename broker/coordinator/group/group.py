"""Group and member metadata of the classic group protocol, and the group state machine.

Plain objects with no I/O and no clock of their own: the shard (shard.py) drives them. The names
follow Kafka's GroupMetadata/MemberMetadata (ClassicGroup/ClassicGroupMember in Kafka 4).

A member keeps its pending JoinGroup and SyncGroup responses as callbacks (``awaiting_join``,
``awaiting_sync``). Invoking one sends the response and clears it; the member stays in the group.
"""
from __future__ import annotations

import enum
from typing import Callable

from protocol import messages as m
from protocol.errors import ErrorCode


class GroupState(str, enum.Enum):
    """Kafka's group states; the value is the name DescribeGroups/ListGroups report. Classic
    groups use Empty, PreparingRebalance, CompletingRebalance, Stable and Dead; consumer groups
    (consumer/group.py) Empty, Assigning, Reconciling, Stable and Dead."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"  # older Kafka: AwaitingSync
    STABLE = "Stable"
    DEAD = "Dead"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    NOT_READY = "NotReady"       # streams groups (streams/group.py): topology not yet ready

    def __str__(self) -> str:
        return self.value


EMPTY = GroupState.EMPTY
PREPARING_REBALANCE = GroupState.PREPARING_REBALANCE
COMPLETING_REBALANCE = GroupState.COMPLETING_REBALANCE
STABLE = GroupState.STABLE
DEAD = GroupState.DEAD

#: Kafka's allowed transitions: target state -> the states it may be entered from.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    DEAD: frozenset({STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD}),
    COMPLETING_REBALANCE: frozenset({PREPARING_REBALANCE}),
    STABLE: frozenset({COMPLETING_REBALANCE}),
    PREPARING_REBALANCE: frozenset({STABLE, COMPLETING_REBALANCE, EMPTY}),
    EMPTY: frozenset({PREPARING_REBALANCE}),
}

CONSUMER_PROTOCOL_TYPE = "consumer"
UNKNOWN_MEMBER_ID = ""  # the member id of a member that has none yet


class IllegalGroupTransition(RuntimeError):
    """A transition Kafka's state machine does not allow: always a coordinator bug."""


class OffsetAndMetadata:
    """A committed offset as stored in OffsetCommitValue."""

    __slots__ = ("offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp",
                 "record_offset")

    def __init__(self, offset: int, leader_epoch: int = -1, metadata: str = "",
                 commit_timestamp: int = 0, expire_timestamp: int | None = None) -> None:
        #: the order in which the shard applied the commit: when a transaction commits, its
        #: offsets replace only older ones (not part of the value, never compared)
        self.record_offset = -1
        self.offset = offset
        self.leader_epoch = leader_epoch
        self.metadata = metadata
        self.commit_timestamp = commit_timestamp
        self.expire_timestamp = expire_timestamp

    def as_tuple(self) -> tuple:
        return (self.offset, self.leader_epoch, self.metadata, self.commit_timestamp,
                self.expire_timestamp)

    def __eq__(self, other) -> bool:
        return isinstance(other, OffsetAndMetadata) and self.as_tuple() == other.as_tuple()

    def __repr__(self) -> str:
        return f"OffsetAndMetadata{self.as_tuple()!r}"


class MemberMetadata:
    """One member of a classic group: its ids, timeouts, protocols, assignment and callbacks."""

    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host",
                 "rebalance_timeout_ms", "session_timeout_ms", "protocol_type", "protocols",
                 "assignment", "awaiting_join", "awaiting_sync", "latest_heartbeat",
                 "heartbeat_op", "new_member_timer")

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str,
                 client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                 protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols          # ((name, metadata), ...) in preference order
        self.assignment = b""
        self.awaiting_join: Callable | None = None
        self.awaiting_sync: Callable | None = None
        self.latest_heartbeat = 0
        self.heartbeat_op = None            # the member's one DelayedHeartbeat
        # set while the member has joined but not yet been answered (new-member join timeout)
        self.new_member_timer = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def matches(self, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Same protocols with the same metadata in the same order (Kafka's ``matches``)."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The first protocol in this member's preference order that every member supports."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise IllegalGroupTransition(f"member {self.member_id} does not support any of {candidates}")

    def is_alive(self, heartbeat_deadline: int) -> bool:
        """Kafka's three liveness conditions, any one of which keeps the member: awaiting a
        JoinGroup answer, awaiting a SyncGroup answer, or a heartbeat within the session
        timeout."""
        return (self.awaiting_join is not None
                or self.awaiting_sync is not None
                or self.latest_heartbeat + self.session_timeout_ms > heartbeat_deadline)

    def __repr__(self) -> str:
        return f"<Member {self.member_id}{' static ' + self.group_instance_id if self.group_instance_id else ''}>"


class GroupError(Exception):
    """An error the heartbeat answers with: Kafka's ApiException with its message."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class GroupMetadata:
    """A classic group: members in insertion order, leader, generation, protocol, state, offsets."""

    #: Kafka's Group.type(), as the other group types have it (consumer/group.py, ...): code
    #: outside their packages asks it rather than isinstance, so their modules load with the
    #: first such group
    group_type = "classic"

    __slots__ = ("group_id", "state", "state_timestamp", "generation_id", "protocol_type",
                 "protocol_name", "leader_id", "members", "static_members", "pending_members",
                 "pending_sync_members", "supported_protocols", "num_members_awaiting_join",
                 "new_member_added", "subscribed_topics", "offsets", "pending_offset_commits",
                 "rebalance_started_ms", "rebalance_reason", "persisted")

    def __init__(self, group_id: str, now_ms: int, state: GroupState = EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.state_timestamp: int | None = now_ms   # persisted as currentStateTimestamp
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}            # instance id -> member id
        self.pending_members: dict[str, object] = {}        # member id -> expiry timer handle
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: dict[str, int] = {}       # protocol name -> members supporting it
        self.num_members_awaiting_join = 0
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.pending_offset_commits: dict[tuple[str, int], int] = {}
        self.rebalance_started_ms: int | None = None
        self.rebalance_reason: str | None = None
        self.persisted = False      # a GroupMetadata record of this group is in the log

    # ------------------------------------------------------------------ state machine
    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[PREPARING_REBALANCE]

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        sources = VALID_PREVIOUS_STATES.get(target, frozenset())  # none: a consumer state
        if self.state not in sources:
            raise IllegalGroupTransition(
                f"group {self.group_id} should be in one of "
                f"{sorted(s.value for s in sources)} before moving to "
                f"{target.value}, but is {self.state.value}")
        self.state = target
        self.state_timestamp = now_ms

    # ------------------------------------------------------------------ members
    def __len__(self) -> int:
        return len(self.members)

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def has_static_member(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, instance_id: str | None, member_id: str) -> bool:
        current = self.static_member_id(instance_id)
        return current is not None and current != member_id

    def add(self, member: MemberMetadata, callback: Callable | None = None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._inc_protocols(member)
        member.awaiting_join = callback
        if callback is not None:
            self.num_members_awaiting_join += 1
        self._forget_pending(member.member_id)

    def _forget_pending(self, member_id: str) -> None:
        pending = self.pending_members
        if pending and pending.pop(member_id, None) is not None and not pending:
            pending.clear()  # frees the table pop leaves behind

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._dec_protocols(member)
            if member.awaiting_join is not None:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                if self.static_members.get(member.group_instance_id) == member_id:
                    del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self._forget_pending(member_id)
        self.discard_pending_sync(member_id)
        return member

    def discard_pending_sync(self, member_id: str) -> bool:
        """Drop a member from the members yet to SyncGroup; True if it was the last one."""
        pending_sync = self.pending_sync_members
        if member_id not in pending_sync:
            return False
        pending_sync.discard(member_id)
        if pending_sync:
            return False
        pending_sync.clear()  # frees the table discard leaves behind
        return True

    def update_member(self, member: MemberMetadata, protocols: tuple[tuple[str, bytes], ...],
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      callback: Callable | None) -> None:
        self._dec_protocols(member)
        member.protocols = protocols
        self._inc_protocols(member)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and member.awaiting_join is None:
            self.num_members_awaiting_join += 1
        elif callback is None and member.awaiting_join is not None:
            self.num_members_awaiting_join -= 1
        member.awaiting_join = callback

    def replace_static_member(self, instance_id: str, old_member_id: str,
                              new_member_id: str) -> MemberMetadata:
        """Give a static member a new member id; the old id's waiting callbacks get fenced."""
        member = self.members.pop(old_member_id)
        join_cb, sync_cb = member.awaiting_join, member.awaiting_sync
        if join_cb is not None:
            member.awaiting_join = None
            self.num_members_awaiting_join -= 1
        member.awaiting_sync = None
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        if join_cb is not None:
            join_cb(error=_fenced(), member_id=old_member_id)
        if sync_cb is not None:
            sync_cb(error=_fenced())
        return member

    def maybe_invoke_join_callback(self, member: MemberMetadata, **result) -> bool:
        callback = member.awaiting_join
        if callback is None:
            return False
        member.awaiting_join = None
        self.num_members_awaiting_join -= 1
        callback(**result)
        return True

    def maybe_invoke_sync_callback(self, member: MemberMetadata, **result) -> bool:
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        callback(**result)
        return True

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        """Members whose awaiting-join callback is empty."""
        return [m for m in self.members.values() if m.awaiting_join is None]

    def has_all_members_joined(self) -> bool:
        return (len(self.members) == self.num_members_awaiting_join
                and not self.pending_members)

    def rebalance_timeout_ms(self) -> int:
        """The largest of the members' rebalance timeouts (0 for no members, as in Kafka)."""
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined; else the first rejoined member in insertion order."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join is not None:
            return True
        for member_id, member in self.members.items():
            if member.awaiting_join is not None:
                self.leader_id = member_id
                return True
        return False

    # ------------------------------------------------------------------ protocols
    def _inc_protocols(self, member: MemberMetadata) -> None:
        supported = self.supported_protocols
        for name, _ in member.protocols:
            supported[name] = supported.get(name, 0) + 1

    def _dec_protocols(self, member: MemberMetadata) -> None:
        supported = self.supported_protocols
        for name, _ in member.protocols:
            count = supported.get(name, 0) - 1
            if count > 0:
                supported[name] = count
            else:
                supported.pop(name, None)

    def supports_protocols(self, protocol_type: str, protocol_names: set[str]) -> bool:
        """Kafka's rule: an Empty group takes any non-empty type and protocol list; otherwise the
        type must match and one of the protocols must be supported by every member."""
        if self.state is EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        n = len(self.members)
        return (self.protocol_type == protocol_type
                and any(self.supported_protocols.get(name, 0) == n for name in protocol_names))

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def select_protocol(self) -> str:
        """The members' vote: each votes for its first candidate; most votes wins; a tie goes to
        the candidate that comes first in the leader's preference order."""
        if not self.members:
            raise IllegalGroupTransition(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        tied = {name for name, count in votes.items() if count == best}
        if len(tied) == 1:
            return next(iter(tied))
        leader = self.members.get(self.leader_id) if self.leader_id else None
        order = leader.protocol_names() if leader is not None else []
        for name in order:
            if name in tied:
                return name
        for member in self.members.values():  # no leader preference decides: insertion order
            for name in member.protocol_names():
                if name in tied:
                    return name
        return sorted(tied)[0]

    # ------------------------------------------------------------------ generations
    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(EMPTY, now_ms)
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the members of a consumer group subscribe to (None: not known)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        seen = set()    # members of one application mostly send the same bytes: decode once
        for member in self.members.values():
            data = member.metadata(self.protocol_name)
            if data in seen:
                continue
            seen.add(data)
            decoded = decode_subscription_topics(data)
            if decoded is None:
                return None
            topics.update(decoded)
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def current_member_metadata(self) -> list:
        """The member list the leader's JoinGroup response carries."""
        cls = m.JoinGroupResponse.JoinGroupResponseMember
        protocol = self.protocol_name
        return [cls(member_id=mm.member_id, group_instance_id=mm.group_instance_id,
                    metadata=mm.metadata(protocol))
                for mm in self.members.values()]

    # ------------------------------------------------------------------ offsets
    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits)

    def has_pending_offset_commit(self, tp: tuple[str, int]) -> bool:
        return tp in self.pending_offset_commits

    def __repr__(self) -> str:
        return (f"<Group {self.group_id} {self.state.value} gen={self.generation_id} "
                f"members={len(self.members)}>")


def _fenced():
    from protocol.errors import ErrorCode
    return ErrorCode.FENCED_INSTANCE_ID


def decode_subscription_topics(data: bytes) -> list[str] | None:
    """Topics of a ConsumerProtocolSubscription (int16 version + body), None if undecodable.

    Every version starts with the topics array, so the body is read at version 0 and the rest
    ignored: subscriptions of versions newer than ours decode too, as in Kafka.
    """
    if len(data) < 2 or int.from_bytes(data[:2], "big", signed=True) < 0:
        return None
    try:
        return list(m.ConsumerProtocolSubscription.decode(data, 0, 2, exact=False).topics)
    except Exception:
        return None
