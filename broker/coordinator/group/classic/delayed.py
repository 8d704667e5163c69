"""The classic protocol's delayed operations, held in the coordinator's purgatories: a member's
heartbeat deadline, the join phase (with the initial delay of a new group) and the sync phase."""
from __future__ import annotations

from typing import Protocol

from ....purgatory import DelayedOperation, DelayedOperationPurgatory
from ..group import COMPLETING_REBALANCE, PREPARING_REBALANCE, STABLE, GroupMetadata, MemberMetadata


class Rebalancing(Protocol):
    """What the operations call back when they complete or expire (the classic manager)."""

    rebalance_purgatory: DelayedOperationPurgatory

    def on_expire_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                            op: "DelayedHeartbeat") -> None: ...

    def on_complete_join(self, group: GroupMetadata) -> None: ...

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None: ...


class DelayedHeartbeat(DelayedOperation):
    """A member's liveness deadline. Completes (silently) when a later heartbeat arrives; on
    expiry the member is removed unless it is alive (MemberMetadata.is_alive's three conditions)."""

    __slots__ = ("manager", "group", "member")
    kind = "heartbeat"

    def __init__(self, manager: Rebalancing, group: GroupMetadata,
                 member: MemberMetadata, deadline_ms: int) -> None:
        # DelayedOperation.__init__(0, deadline_ms), inlined: one of these per heartbeat
        self.delay_ms = 0
        self.deadline_ms = deadline_ms
        self.completed = False
        self._slot = None
        self._keys = None
        self._purgatory = None
        self.manager = manager
        self.group = group
        self.member = member

    def try_complete(self) -> bool:
        member = self.member
        return member.latest_heartbeat + member.session_timeout_ms > self.deadline_ms

    def on_expiration(self) -> None:
        self.manager.on_expire_heartbeat(self.group, self.member, self)


class DelayedJoin(DelayedOperation):
    """Waits for every member to rejoin (and no member id to be pending), at most the group's
    rebalance timeout; then the join phase completes."""

    __slots__ = ("manager", "group", "cancelled")
    kind = "join"

    def __init__(self, manager: Rebalancing, group: GroupMetadata, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.manager = manager
        self.group = group
        self.cancelled = False

    def try_complete(self) -> bool:
        return self.group.state is PREPARING_REBALANCE and self.group.has_all_members_joined()

    def on_complete(self) -> None:
        if not self.cancelled:
            self.manager.on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    """The first join of an Empty group waits ``group.initial.rebalance.delay.ms``, extended by
    the same delay while new members keep arriving, up to the rebalance timeout."""

    __slots__ = ("configured_delay_ms", "remaining_ms")
    kind = "join"

    def __init__(self, manager, group, configured_delay_ms: int, delay_ms: int,
                 remaining_ms: int) -> None:
        super().__init__(manager, group, delay_ms)
        self.configured_delay_ms = configured_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        if self.cancelled:
            return
        group = self.group
        if group.new_member_added and self.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.configured_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - self.delay_ms, 0)
            self.manager.rebalance_purgatory.try_complete_else_watch(
                InitialDelayedJoin(self.manager, group, self.configured_delay_ms, delay, remaining),
                (join_key(group.group_id),))
        else:
            self.manager.on_complete_join(group)


class DelayedSync(DelayedOperation):
    """After the join phase, members that do not send SyncGroup within the rebalance timeout are
    removed and the group rebalances again (Kafka's pending-sync expiry)."""

    __slots__ = ("manager", "group", "generation_id")
    kind = "sync"

    def __init__(self, manager, group: GroupMetadata, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.manager = manager
        self.group = group
        self.generation_id = group.generation_id

    def try_complete(self) -> bool:
        group = self.group
        return (not group.pending_sync_members or group.generation_id != self.generation_id
                or group.state not in (COMPLETING_REBALANCE, STABLE))

    def on_expiration(self) -> None:
        self.manager.on_expire_pending_sync(self.group, self.generation_id)


def join_key(group_id: str) -> tuple:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple:
    return ("sync", group_id)
