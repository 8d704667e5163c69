"""The session and rebalance timeouts of streams group members, as keyed timers
(common/timer.py), as consumer/timeouts.py keeps a consumer group's: a member that does not
heartbeat within streams.session.timeout.ms, or that does not revoke its tasks within its
rebalance timeout, is fenced through the manager's write path (``fence``).

Keys: ("streams-session" | "streams-revocation", group id, member id).
"""
from __future__ import annotations

from typing import Callable

import structlog

from ...common.timer import CoordinatorTimer
from ..consumer.group import MemberState
from ..context import GroupContext
from . import settings
from .group import StreamsGroup, StreamsGroupMember

log = structlog.get_logger("broker.coordinator")


class MemberTimeouts:
    """The timeouts of the members of one shard's streams groups."""

    def __init__(self, context: GroupContext, timer: CoordinatorTimer,
                 fence: Callable[[StreamsGroup, StreamsGroupMember], None]) -> None:
        self.context = context
        self.groups = context.groups
        self.stats = context.stats
        self.timer = timer
        #: fence(group, member): the member's removal, written (StreamsGroupManager.write_fence)
        self.fence = fence

    def after_heartbeat(self, group_id: str, member_id: str) -> None:
        """Once the heartbeat's records are stored: the session starts again, and a member
        that must revoke tasks gets its rebalance timeout."""
        group = self.groups.get(group_id)
        if not isinstance(group, StreamsGroup):
            return
        member = group.members.get(member_id)
        if member is None:
            return
        self.timer.extend(("streams-session", group_id, member_id),
                          settings.session_timeout_ms(self.context, group_id),
                          lambda: self.expire_member(group_id, member_id, "session"))
        key = ("streams-revocation", group_id, member_id)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if not self.timer.is_scheduled(key):
                epoch = member.member_epoch
                self.timer.schedule(key, max(member.rebalance_timeout_ms, 0),
                                    lambda: self.expire_member(group_id, member_id, "revocation",
                                                               epoch))
        else:
            self.timer.cancel(key)

    def cancel(self, group_id: str, member_id: str) -> None:
        for kind in ("streams-session", "streams-revocation"):
            self.timer.cancel((kind, group_id, member_id))

    def expire_member(self, group_id: str, member_id: str, why: str = "session",
                      epoch: int | None = None) -> None:
        """Fence a member whose session expired, or that did not revoke its tasks within its
        rebalance timeout (the timers' path, also for injected faults)."""
        group = self.groups.get(group_id)
        if not isinstance(group, StreamsGroup) or self.context.loading:
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if why == "revocation" and (member.state is not MemberState.UNREVOKED_PARTITIONS
                                    or member.member_epoch != epoch):
            return
        log.info("streams group member fenced", group=group_id, member=member_id, reason=why)
        self.stats.expired_members_total += 1
        self.stats.history.member_left(group_id, member_id, "expired" if why == "session"
                                       else "did not revoke in time")
        self.fence(group, member)
