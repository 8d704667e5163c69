"""Moves one member from its current assignment towards the group's target assignment (Kafka's
CurrentAssignmentBuilder).

A partition moves in two steps. Its previous owner first gets an assignment without it and
stays in its epoch (UNREVOKED_PARTITIONS) until a heartbeat no longer lists it as owned. Only
then is the partition free (no member epoch holds it), and the new owner gets it on its next
heartbeat. Until then the new owner waits in UNRELEASED_PARTITIONS. A member reaches the target
epoch as soon as it has nothing left to revoke. Each partition remembers the epoch at which the
member got it (``assignment_epochs``): a commit with an older member epoch is accepted for the
partitions it already held then (KIP-1251).
"""
from __future__ import annotations

from typing import Callable

from protocol.errors import ErrorCode

from .group import ConsumerGroupMember, MemberState

E = ErrorCode


class FencedMemberEpoch(Exception):
    """The member must give up all its partitions and rejoin (FENCED_MEMBER_EPOCH)."""

    code = E.FENCED_MEMBER_EPOCH


def _owns_any(owned: dict | None, partitions: dict) -> bool:
    """Whether the member still reports owning one of ``partitions``; not knowing (``owned``
    None: the heartbeat did not say) counts as owning."""
    if owned is None:
        return True
    for topic_id, held in owned.items():
        pending = partitions.get(topic_id)
        if pending and not pending.isdisjoint(held):
            return True
    return False


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: dict,
              owned: dict | None, partition_epoch: Callable[[object, int], int],
              subscribed: frozenset, subscription_changed: bool) -> ConsumerGroupMember:
    """The member's next state (Kafka 4.3's CurrentAssignmentBuilder.build). ``owned`` is
    what its heartbeat reports ({topic_id: set}) or None; ``partition_epoch(topic_id, p)`` is
    -1 when no member holds the partition; ``subscribed`` the ids of the topics the member
    subscribes to now."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, owned,
                         partition_epoch, subscribed)
        if subscription_changed:
            return _drop_unsubscribed(member, owned, subscribed)
        return member
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            if subscription_changed:
                return _drop_unsubscribed(member, owned, subscribed)
            return member
        return _next(member, member.member_epoch, target_epoch, target, owned, partition_epoch,
                     subscribed)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, owned, partition_epoch,
                     subscribed)
    # UNKNOWN: written by a newer coordinator; start again from nothing
    if owned is None or owned:
        raise FencedMemberEpoch("The consumer group member is in a unknown state. "
                                "The member must abandon all its partitions and rejoin.")
    return _next(member, target_epoch, target_epoch, target, owned, partition_epoch, subscribed)


def _drop_unsubscribed(member: ConsumerGroupMember, owned, subscribed) -> ConsumerGroupMember:
    """Kafka's updateCurrentAssignment: partitions of topics the member no longer subscribes to
    are revoked at once, without waiting for a new target assignment."""
    dropped = {t: p for t, p in member.assigned.items() if t not in subscribed}
    if not dropped:
        return member
    assigned = {t: p for t, p in member.assigned.items() if t in subscribed}
    revoking = dict(member.pending_revocation)
    for topic_id, partitions in dropped.items():
        revoking[topic_id] = revoking.get(topic_id, frozenset()) | partitions
    if _owns_any(owned, revoking):
        return member.replace(state=MemberState.UNREVOKED_PARTITIONS,
                              previous_member_epoch=member.member_epoch,
                              assigned=assigned, pending_revocation=revoking,
                              assignment_epochs=_keep_epochs(member, assigned, revoking))
    return member.replace(previous_member_epoch=member.member_epoch, assigned=assigned,
                          assignment_epochs=_keep_epochs(member, assigned,
                                                         member.pending_revocation))


def _keep_epochs(member: ConsumerGroupMember, *assignments) -> dict:
    epochs = member.assignment_epochs
    out = {}
    for assignment in assignments:
        for topic_id, partitions in assignment.items():
            for p in partitions:
                out[(topic_id, p)] = epochs.get((topic_id, p), member.member_epoch)
    return out


def _next(member: ConsumerGroupMember, epoch: int, target_epoch: int, target: dict,
          owned: dict | None, partition_epoch, subscribed) -> ConsumerGroupMember:
    current = member.assigned
    revoking_now = member.pending_revocation
    assigned: dict = {}
    revoking: dict = {}
    to_assign: dict = {}
    unreleased = False
    for topic_id in set(target) | set(current):
        # a topic the member no longer subscribes to has nothing for it
        wanted = target.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
        held = current.get(topic_id, frozenset())
        keep = held & wanted
        if keep:
            assigned[topic_id] = keep
        if held - keep:
            revoking[topic_id] = held - keep
        new = wanted - keep
        if new:
            mine = revoking_now.get(topic_id, frozenset())
            # held by another member (one this member is itself revoking is not)
            free = frozenset(p for p in new
                             if partition_epoch(topic_id, p) == -1 or p in mine)
            if len(free) != len(new):
                unreleased = True
            if free:
                to_assign[topic_id] = free
    if revoking and _owns_any(owned, revoking):
        # keep the epoch; the member is told its assignment without the revoked partitions
        return member.replace(state=MemberState.UNREVOKED_PARTITIONS,
                              previous_member_epoch=member.member_epoch, member_epoch=epoch,
                              assigned=assigned, pending_revocation=revoking,
                              assignment_epochs=_keep_epochs(member, assigned, revoking))
    epochs = _keep_epochs(member, assigned)
    for topic_id, partitions in to_assign.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
        for p in partitions:
            epochs[(topic_id, p)] = target_epoch
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.replace(state=state, previous_member_epoch=member.member_epoch,
                          member_epoch=target_epoch, assigned=assigned, pending_revocation={},
                          assignment_epochs=epochs)
