"""The session and rebalance timeouts of consumer group members, as keyed timers
(common/timer.py): a member that does not heartbeat within group.consumer.session.timeout.ms
(a classic member: its own session timeout), or that does not revoke its partitions within its
rebalance timeout, is fenced through the manager's write path (``fence``).

Keys: ("session" | "revocation", group id, member id); migration.py keeps a classic member's
"join" and "sync" timeouts on the same timer.
"""
from __future__ import annotations

from typing import Callable

import structlog

from ...common.timer import CoordinatorTimer
from ..context import GroupContext
from . import settings
from .group import ConsumerGroup, ConsumerGroupMember, MemberState

log = structlog.get_logger("broker.coordinator")


class MemberTimeouts:
    """The timeouts of the members of one shard's consumer groups."""

    def __init__(self, context: GroupContext, timer: CoordinatorTimer,
                 fence: Callable[[ConsumerGroup, ConsumerGroupMember], None]) -> None:
        self.context = context
        self.groups = context.groups
        self.config = context.config
        self.stats = context.stats
        self.timer = timer
        #: fence(group, member): the member's removal, written (ConsumerGroupManager.write_fence)
        self.fence = fence

    def schedule(self, group_id: str, member: ConsumerGroupMember,
                 previous: ConsumerGroupMember) -> None:
        """After a heartbeat moved ``previous`` to ``member``: its session starts again, and a
        member that started revoking (or revokes at a new epoch) gets its rebalance timeout."""
        member_id = member.member_id
        self.schedule_session(group_id, member)
        if member.classic_metadata:
            return  # a classic member has join and sync timeouts instead (migration.py)
        key = ("revocation", group_id, member_id)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if previous.state is not MemberState.UNREVOKED_PARTITIONS or \
                    previous.member_epoch != member.member_epoch or \
                    not self.timer.is_scheduled(key):
                epoch = member.member_epoch
                self.timer.schedule(key, max(member.rebalance_timeout_ms, 0),
                                    lambda: self._on_revocation_timeout(group_id, member_id,
                                                                        epoch))
        else:
            self.timer.cancel(key)

    def schedule_session(self, group_id: str, member: ConsumerGroupMember) -> None:
        """The member's session timeout starts again (a classic member's own timeout)."""
        member_id = member.member_id
        classic = member.classic_metadata
        self.timer.extend(("session", group_id, member_id),
                          classic[0] if classic else
                          settings.session_timeout_ms(self.context, group_id),
                          lambda: self.expire_member(group_id, member_id))

    def extend_session(self, group_id: str, member: ConsumerGroupMember) -> None:
        """The session of a consumer-protocol member starts again, at no timer operation when
        one is pending (the common heartbeat)."""
        if not self.timer.extend_to(("session", group_id, member.member_id),
                                    settings.session_timeout_ms(self.context, group_id)):
            self.schedule_session(group_id, member)

    def cancel_revocation(self, group_id: str, member_id: str) -> None:
        self.timer.cancel(("revocation", group_id, member_id))

    def cancel(self, group_id: str, member_id: str) -> None:
        """Every timeout of the member, its classic ones too."""
        for kind in ("session", "revocation", "join", "sync"):
            self.timer.cancel((kind, group_id, member_id))

    def expire_member(self, group_id: str, member_id: str) -> None:
        """Fence a member as its session timeout does (the timer's path, also for injected
        faults)."""
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or self.context.loading:
            return
        member = group.members.get(member_id)
        if member is None:
            return
        log.info("member fenced: its session expired", group=group_id, member=member_id,
                 session_timeout_ms=(member.classic_metadata[0] if member.classic_metadata
                                     else settings.session_timeout_ms(self.context, group_id)))
        self.stats.expired_members_total += 1
        self.stats.history.member_left(group_id, member_id, "expired")
        self.fence(group, member)

    def _on_revocation_timeout(self, group_id: str, member_id: str, epoch: int) -> None:
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or self.context.loading:
            return
        member = group.members.get(member_id)
        if member is None or member.state is not MemberState.UNREVOKED_PARTITIONS \
                or member.member_epoch != epoch:
            return
        log.info("member fenced: it did not revoke its partitions within its rebalance timeout",
                 group=group_id, member=member_id, rebalance_timeout_ms=member.rebalance_timeout_ms)
        self.stats.expired_members_total += 1
        self.stats.history.member_left(group_id, member_id, "did not revoke in time")
        self.fence(group, member)
