"""DelayedHeartbeat timelines of members with different session timeouts, step by step.

complete_and_schedule_next_heartbeat runs after a JoinGroup response is sent, when a SyncGroup
request is handled, after a SyncGroup response is sent, and on each Heartbeat; JoinGroup handling
does not reschedule. An expired DelayedHeartbeat removes the member only if it is not alive: its
awaiting-join or awaiting-sync callback is set, or latest_heartbeat + session_timeout > deadline.

T is the start of each timeline. Requests that arrive at the same millisecond as a deadline are
handled before the timer runs (``h.at(t)``).
"""
from __future__ import annotations

import pytest

from tests.coordinator.harness import E, Harness, assignment

T = 100_000
SEC = 1000
LONG_REBALANCE = 120_000  # rebalance timeouts long enough to stay out of these timelines


class Timeline(Harness):
    def at(self, t: int) -> None:
        """Move to t running the callbacks due before t, but not those due at t."""
        self.advance_to(t - 1)
        self.clock.now = t

    def deadline(self, member_id: str, group: str = "g") -> int | None:
        member = self.group(group).members[member_id]
        op = member.heartbeat_op
        return None if op is None or op.completed else op.deadline_ms

    def assert_one_heartbeat_each(self, group: str = "g") -> None:
        purgatory = self.coordinator.heartbeat_purgatory
        for member in self.group(group).members.values():
            assert len(purgatory.watched(member)) <= 1
        waiting = purgatory.waiting_by_kind().get("heartbeat", 0)
        with_op = sum(1 for mm in self.group(group).members.values()
                      if mm.heartbeat_op is not None and not mm.heartbeat_op.completed)
        assert waiting == with_op


def form_group(h: Timeline, sessions: list[int], at: int, rebalance: int = LONG_REBALANCE):
    """Members join at ``at`` and the join phase completes at ``at`` (one generation)."""
    h.advance_to(at)
    ids = []
    for i, session in enumerate(sessions):
        first = h.join(client_id=f"c{i + 1}", session=session, rebalance=rebalance, tick=False)
        assert first.error == E.MEMBER_ID_REQUIRED
        ids.append((first.member_id, session))
    replies = [h.join(member_id=mid, client_id=f"c{i + 1}", session=session,
                      rebalance=rebalance, tick=False) for i, (mid, session) in enumerate(ids)]
    assert not any(r.done for r in replies)
    h.tick()
    assert all(r.error == E.NONE for r in replies)
    assert {r.generation_id for r in replies} == {h.group().generation_id}
    return [r.member_id for r in replies], replies


def test_heartbeat_deadline_after_join_response_sync_request_and_sync_response():
    """One member, 5 s session: deadlines 5 s, then 6 s at its SyncGroup request, then 8 s after
    its SyncGroup response (the assignment took 2 s to store)."""
    h = Timeline({"group.min.session.timeout.ms": 1000})
    (c1,), (join,) = form_group(h, [5 * SEC], at=0)
    assert h.deadline(c1) == 5 * SEC                      # (1) after the JoinGroup response
    h.log.auto = False
    h.at(1 * SEC)
    sync = h.sync("g", c1, join.generation_id, {c1: assignment(t=[0])})
    assert h.deadline(c1) == 6 * SEC                      # (2) SyncGroup request handled
    h.assert_one_heartbeat_each()
    h.at(3 * SEC)
    h.log.complete()
    assert sync.error == E.NONE
    assert h.deadline(c1) == 8 * SEC                      # (3) after the SyncGroup response
    h.assert_one_heartbeat_each()
    # the old deadlines (5 s, 6 s) were completed, not left to expire
    h.advance_to(8 * SEC - 1)
    assert c1 in h.group().members and h.state() == "Stable"
    h.advance_to(8 * SEC)
    assert c1 not in h.group().members


def test_awaiting_sync_keeps_members_alive():
    """C1=10 s, C2=20 s (leader), C3=40 s. The join completes at T; C1 syncs at T+3; the leader
    at T+20; the assignment is stored and the sync responses sent at T+25; C3 syncs at T+40."""
    h = Timeline()
    h.advance_to(T - 1)
    # C2 must be the leader: it joins first
    h.advance_to(T)
    first = h.join(client_id="c2", session=20 * SEC, rebalance=LONG_REBALANCE, tick=False)
    second = h.join(client_id="c1", session=10 * SEC, rebalance=LONG_REBALANCE, tick=False)
    third = h.join(client_id="c3", session=40 * SEC, rebalance=LONG_REBALANCE, tick=False)
    c2_join = h.join(member_id=first.member_id, client_id="c2", session=20 * SEC,
                     rebalance=LONG_REBALANCE, tick=False)
    c1_join = h.join(member_id=second.member_id, client_id="c1", session=10 * SEC,
                     rebalance=LONG_REBALANCE, tick=False)
    c3_join = h.join(member_id=third.member_id, client_id="c3", session=40 * SEC,
                     rebalance=LONG_REBALANCE, tick=False)
    h.tick()
    c1, c2, c3 = c1_join.member_id, c2_join.member_id, c3_join.member_id
    gen = c2_join.generation_id
    assert c2_join.leader == c2 and len(c2_join.members) == 3 and c1_join.members == []
    # after the JoinGroup responses at T
    assert (h.deadline(c1), h.deadline(c2), h.deadline(c3)) == (T + 10 * SEC, T + 20 * SEC,
                                                                T + 40 * SEC)
    h.log.auto = False

    # (1) T+3: C1's SyncGroup is handled; its deadline becomes T+13
    h.at(T + 3 * SEC)
    c1_sync = h.sync("g", c1, gen)
    assert h.deadline(c1) == T + 13 * SEC
    h.assert_one_heartbeat_each()

    # T+13: C1's DelayedHeartbeat expires, but C1 is awaiting its SyncGroup response: kept
    h.advance_to(T + 13 * SEC)
    assert h.deadline(c1) is None                         # expired ...
    assert c1 in h.group().members                        # ... and alive
    assert h.group().members[c1].is_awaiting_sync
    assert h.state() == "CompletingRebalance"

    # (2) T+20: the leader C2's SyncGroup is handled; its deadline becomes T+40
    h.at(T + 20 * SEC)
    c2_sync = h.sync("g", c2, gen, {c1: assignment(t=[0]), c2: assignment(t=[1]),
                                     c3: assignment(t=[2])})
    assert h.deadline(c2) == T + 40 * SEC
    assert h.deadline(c1) is None and h.deadline(c3) == T + 40 * SEC
    h.assert_one_heartbeat_each()

    # (3)(4) T+25: the assignment is stored, the SyncGroup responses go to C1 and C2
    h.at(T + 25 * SEC)
    assert h.log.complete() == 1
    assert c1_sync.error == E.NONE and c2_sync.error == E.NONE
    assert c1_sync.assignment == assignment(t=[0])
    assert h.deadline(c1) == T + 35 * SEC
    assert h.deadline(c2) == T + 45 * SEC
    assert h.deadline(c3) == T + 40 * SEC                 # C3 has not synced: unchanged
    assert h.state() == "Stable"
    h.assert_one_heartbeat_each()

    # C1 now heartbeats as a Stable member does (else it would expire at T+35)
    h.at(T + 32 * SEC)
    assert h.heartbeat("g", c1, gen).error == E.NONE
    assert h.deadline(c1) == T + 42 * SEC

    # (5) T+40: C3's SyncGroup (group already Stable) is handled: deadline T+80
    h.at(T + 40 * SEC)
    c3_sync = h.sync("g", c3, gen)
    assert c3_sync.error == E.NONE and c3_sync.assignment == assignment(t=[2])
    assert h.deadline(c3) == T + 80 * SEC
    h.assert_one_heartbeat_each()
    assert set(h.group().members) == {c1, c2, c3}


def _stable_pair(h: Timeline):
    """C1 (10 s, leader) and C2 (20 s) whose SyncGroup responses are sent at T."""
    (c1, c2), joins = form_group(h, [10 * SEC, 20 * SEC], at=T - 500)
    gen = joins[0].generation_id
    h.log.auto = False
    s1 = h.sync("g", c1, gen, {c1: assignment(t=[0]), c2: assignment(t=[1])})
    s2 = h.sync("g", c2, gen)
    h.advance_to(T)
    h.log.complete()
    h.log.auto = True
    assert s1.error == E.NONE and s2.error == E.NONE
    assert (h.deadline(c1), h.deadline(c2)) == (T + 10 * SEC, T + 20 * SEC)
    return c1, c2, gen


def test_awaiting_join_keeps_members_alive():
    h = Timeline()
    c1, c2, gen = _stable_pair(h)

    # (1) T+2: a new member C3 (40 s) joins; the group prepares to rebalance
    h.at(T + 2 * SEC)
    pending = h.join(client_id="c3", session=40 * SEC, rebalance=LONG_REBALANCE)
    c3_join = h.join(member_id=pending.member_id, client_id="c3", session=40 * SEC,
                     rebalance=LONG_REBALANCE)
    c3 = pending.member_id
    assert h.state() == "PreparingRebalance" and not c3_join.done
    assert h.group().members[c3].heartbeat_op is None     # a new member has no DelayedHeartbeat

    # (2) T+3: C1 rejoins; the join cannot complete (C2 has not rejoined)
    h.at(T + 3 * SEC)
    c1_join = h.join(member_id=c1, client_id="c1", session=10 * SEC, rebalance=LONG_REBALANCE)
    assert not c1_join.done
    assert h.deadline(c1) == T + 10 * SEC                 # JoinGroup does not reschedule

    # (3) T+10 (not T+13): C1's DelayedHeartbeat expires, C1 is awaiting join: kept
    h.advance_to(T + 10 * SEC)
    assert h.deadline(c1) is None
    assert c1 in h.group().members and h.group().members[c1].is_awaiting_join
    assert h.group().members[c3].heartbeat_op is None

    # (4) T+15: C2 rejoins; the join completes; every member is answered and rescheduled
    h.at(T + 15 * SEC)
    c2_join = h.join(member_id=c2, client_id="c2", session=20 * SEC, rebalance=LONG_REBALANCE)
    for reply in (c1_join, c2_join, c3_join):
        assert reply.error == E.NONE and reply.generation_id == gen + 1
    assert c1_join.leader == c1 and len(c1_join.members) == 3
    assert (h.deadline(c1), h.deadline(c2), h.deadline(c3)) == (
        T + 25 * SEC, T + 35 * SEC, T + 55 * SEC)
    h.assert_one_heartbeat_each()
    assert h.state() == "CompletingRebalance"


def test_member_that_does_not_rejoin_is_removed():
    h = Timeline()
    c1, c2, gen = _stable_pair(h)
    h.at(T + 2 * SEC)
    pending = h.join(client_id="c3", session=40 * SEC, rebalance=LONG_REBALANCE)
    c3_join = h.join(member_id=pending.member_id, client_id="c3", session=40 * SEC,
                     rebalance=LONG_REBALANCE)
    c3 = pending.member_id
    h.at(T + 3 * SEC)
    c1_join = h.join(member_id=c1, client_id="c1", session=10 * SEC, rebalance=LONG_REBALANCE)

    # C2 never rejoins: at its deadline T+20 it is not alive and is removed
    h.advance_to(T + 20 * SEC - 1)
    assert c2 in h.group().members and not c1_join.done
    h.advance_to(T + 20 * SEC)
    assert c2 not in h.group().members
    assert h.coordinator.expired_members_total == 1
    # with C2 gone everyone left has rejoined: the join completes without C2
    assert c1_join.error == E.NONE and c3_join.error == E.NONE
    assert c1_join.generation_id == gen + 1
    assert [mm.member_id for mm in c1_join.members] == [c1, c3]
    assert (h.deadline(c1), h.deadline(c3)) == (T + 30 * SEC, T + 60 * SEC)
    # C2, which is gone, is told so when it comes back
    assert h.heartbeat("g", c2, gen).error == E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", [0, 3, 4])
def test_heartbeat_reschedules_and_silence_expires(version):
    h = Timeline()
    (c1,), (join,) = form_group(h, [10 * SEC], at=0)
    h.sync("g", c1, join.generation_id, {c1: b""})
    for t in range(5, 60, 5):
        h.advance_to(t * SEC)
        assert h.heartbeat("g", c1, join.generation_id, version=version).error == E.NONE
        assert h.deadline(c1) == (t + 10) * SEC
        h.assert_one_heartbeat_each()
    h.advance_to(65 * SEC - 1)
    assert c1 in h.group().members
    h.advance_to(65 * SEC)
    assert h.state() == "Empty" and not h.group().members
    assert h.coordinator.expired_members_total == 1


def test_same_millisecond_reschedule_keeps_one_heartbeat():
    h = Timeline()
    (c1,), (join,) = form_group(h, [10 * SEC], at=0)
    # join response, sync request and sync response all at t=0
    h.sync("g", c1, join.generation_id, {c1: b""})
    for _ in range(3):
        h.heartbeat("g", c1, join.generation_id)
    h.assert_one_heartbeat_each()
    assert h.coordinator.heartbeat_purgatory.waiting == 1
    h.advance_to(10 * SEC)
    assert not h.group().members
