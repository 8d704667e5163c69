"""Scenarios modelled on Kafka's own GroupCoordinator / GroupMetadataManager test cases (written
from the behaviour, not copied): joins, syncs, heartbeats, leaves, static members, rebalances."""
from __future__ import annotations

from tests.coordinator.harness import (DEFAULT_PROTOCOLS, E, Harness, assignment, subscription)


def form(h: Harness, n: int, group="g", session=10000, rebalance=None, protocols=None,
         sync=True):
    """n dynamic members join together (v9 flow) and, if sync, sync; -> (ids, join replies)."""
    firsts = [h.join(group, client_id=f"c{i}", session=session, rebalance=rebalance,
                     protocols=(protocols[i] if protocols else DEFAULT_PROTOCOLS), tick=False)
              for i in range(n)]
    joins = [h.join(group, f.member_id, client_id=f"c{i}", session=session, rebalance=rebalance,
                    protocols=(protocols[i] if protocols else DEFAULT_PROTOCOLS), tick=False)
             for i, f in enumerate(firsts)]
    h.tick()
    ids = [j.member_id for j in joins]
    if sync:
        gen = joins[0].generation_id
        leader = joins[0].leader
        syncs = [h.sync(group, mid, gen,
                        {x: assignment(t=[k]) for k, x in enumerate(ids)} if mid == leader
                        else None)
                 for mid in ids]
        assert all(s.error == E.NONE for s in syncs)
    return ids, joins


# --------------------------------------------------------------------------- happy paths

def test_join_sync_heartbeat_one_member():
    h = Harness()
    first = h.join(client_id="consumer-1")
    assert first.error == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("consumer-1-") and first.generation_id == -1
    join = h.join(member_id=first.member_id, client_id="consumer-1")
    assert join.error == E.NONE
    assert (join.generation_id, join.leader, join.member_id) == (1, first.member_id,
                                                                 first.member_id)
    assert join.protocol_type == "consumer" and join.protocol_name == "range"
    assert [mm.member_id for mm in join.members] == [first.member_id]
    assert h.state() == "CompletingRebalance"
    sync = h.sync("g", join.member_id, 1, {join.member_id: assignment(t=[0, 1])})
    assert sync.error == E.NONE and sync.assignment == assignment(t=[0, 1])
    assert (sync.protocol_type, sync.protocol_name) == ("consumer", "range")
    assert h.state() == "Stable"
    assert h.heartbeat("g", join.member_id, 1).error == E.NONE
    assert h.coordinator.rebalances_total == 1


def test_join_sync_three_members_leader_gets_member_list():
    h = Harness()
    ids, joins = form(h, 3, sync=False)
    leader = ids[0]
    assert all(j.leader == leader and j.generation_id == 1 for j in joins)
    assert [mm.member_id for mm in joins[0].members] == ids
    assert joins[1].members == [] and joins[2].members == []
    # followers sync first and wait for the leader's assignment
    s1 = h.sync("g", ids[1], 1)
    s2 = h.sync("g", ids[2], 1)
    assert not s1.done and not s2.done
    s0 = h.sync("g", leader, 1, {ids[0]: b"A", ids[1]: b"B"})  # ids[2] missing: empty
    assert (s0.assignment, s1.assignment, s2.assignment) == (b"A", b"B", b"")
    assert h.state() == "Stable"
    # a follower's SyncGroup after the leader's still gets its stored assignment
    assert h.sync("g", ids[1], 1).assignment == b"B"


def test_v3_join_without_member_id_required():
    h = Harness()
    join = h.join(version=3, client_id="old")
    assert join.error == E.NONE and join.member_id.startswith("old-")


def test_protocol_vote_most_votes_then_leaders_preference():
    h = Harness()
    rr, rg, st = ("roundrobin", b"r"), ("range", b"g"), ("sticky", b"s")
    ids, joins = form(h, 3, protocols=[(rg, rr), (rr, rg), (rr, rg)], sync=False)
    assert joins[0].protocol_name == "roundrobin"      # two votes to one
    h2 = Harness()
    ids, joins = form(h2, 2, protocols=[(st, rr), (rr, st)], sync=False)
    assert joins[0].protocol_name == "sticky"          # a tie: the leader's preference
    h3 = Harness()
    ids, joins = form(h3, 2, protocols=[(rr, st), (st, rr)], sync=False)
    assert joins[0].protocol_name == "roundrobin"
    # a member whose protocols share nothing with the group is refused
    assert h3.join(protocols=(("cooperative", b""),)).error == E.INCONSISTENT_GROUP_PROTOCOL


def test_rebalance_timeout_is_the_largest_of_the_members():
    h = Harness()
    form(h, 1, rebalance=30000)
    h.join(client_id="x", rebalance=90000)
    group = h.group()
    assert group.rebalance_timeout_ms() == 30000
    pending = [mid for mid in group.pending_members]
    h.join(member_id=pending[0], client_id="x", rebalance=90000)
    assert group.rebalance_timeout_ms() == 90000
    op = h.coordinator.rebalance_purgatory.watched(("join", "g"))[0]
    assert op.deadline_ms == h.clock.now + 90000   # the joining member counts already


# --------------------------------------------------------------------------- rebalances

def test_new_member_triggers_rebalance_and_members_rejoin():
    h = Harness()
    ids, _ = form(h, 2)
    first = h.join(client_id="c9")
    new = h.join(member_id=first.member_id, client_id="c9")
    assert h.state() == "PreparingRebalance" and not new.done
    assert h.heartbeat("g", ids[1], 1).error == E.REBALANCE_IN_PROGRESS
    # a commit from the current generation is accepted while preparing
    assert h.commit("g", {("t", 0): 5}, generation=1, member_id=ids[1]).value.topics[0] \
        .partitions[0].error_code == 0
    r0 = h.join(member_id=ids[0], client_id="c0")
    assert not r0.done
    r1 = h.join(member_id=ids[1], client_id="c1")
    assert all(r.error == E.NONE and r.generation_id == 2 for r in (r0, r1, new))
    assert r0.leader == ids[0] and len(r0.members) == 3


def test_leader_leaves_mid_rebalance_first_rejoined_member_leads():
    h = Harness()
    ids, _ = form(h, 3)
    h.join(member_id=ids[2], client_id="c2", protocols=(("range", subscription("t", "u")),))
    assert h.state() == "PreparingRebalance"
    r1 = h.join(member_id=ids[1], client_id="c1")
    assert h.leave("g", ids[0]).error == E.NONE
    # ids[1] comes before ids[2] in insertion order and both rejoined: ids[1] leads
    assert r1.error == E.NONE and r1.leader == ids[1] and len(r1.members) == 2
    assert h.group().leader_id == ids[1]


def test_leader_that_does_not_rejoin_is_replaced_by_first_rejoined():
    h = Harness()
    ids, _ = form(h, 3, rebalance=20000)
    r2 = h.join(member_id=ids[2], client_id="c2", protocols=(("range", subscription("u")),))
    # heartbeats keep ids[0] and ids[1] alive, but they never rejoin
    for t in range(5000, 20000, 5000):
        h.advance_to(t)
        h.heartbeat("g", ids[0], 1)
        h.heartbeat("g", ids[1], 1)
    h.advance_to(20000)     # DelayedJoin expires at the rebalance timeout
    assert r2.error == E.NONE and r2.leader == ids[2] and r2.generation_id == 2
    assert list(h.group().members) == [ids[2]]
    assert h.heartbeat("g", ids[0], 1).error == E.UNKNOWN_MEMBER_ID


def test_member_that_misses_the_rebalance_is_removed():
    h = Harness()
    ids, _ = form(h, 2, session=10000, rebalance=10000)
    r0 = h.join(member_id=ids[0], client_id="c0")       # the leader forces a rebalance
    h.advance_to(9999)
    assert not r0.done
    h.advance_to(10000)
    assert r0.error == E.NONE and r0.generation_id == 2 and len(r0.members) == 1
    assert ids[1] not in h.group().members


def test_member_that_does_not_sync_is_removed_and_group_rebalances():
    h = Harness()
    ids, joins = form(h, 2, rebalance=15000, sync=False)
    h.sync("g", ids[0], 1, {ids[0]: b"a", ids[1]: b"b"})
    assert h.state() == "Stable"
    # ids[1] never sends SyncGroup; it keeps heartbeating, which does not count as a sync
    for t in (5000, 10000):
        h.advance_to(t)
        h.heartbeat("g", ids[1], 1)
        h.heartbeat("g", ids[0], 1)
    h.advance_to(15000)
    assert ids[1] not in h.group().members
    assert h.state() in ("PreparingRebalance", "CompletingRebalance")
    assert h.heartbeat("g", ids[0], 1).error == E.REBALANCE_IN_PROGRESS


def test_pending_sync_is_cancelled_by_a_new_rebalance():
    h = Harness()
    ids, _ = form(h, 2, rebalance=15000, sync=False)
    s1 = h.sync("g", ids[1], 1)
    h.join(client_id="late", version=3)                 # CompletingRebalance -> Preparing
    assert s1.error == E.REBALANCE_IN_PROGRESS
    assert h.coordinator.rebalance_purgatory.watched(("sync", "g")) == []


def test_join_group_twice_answers_the_first_join():
    h = Harness()
    ids, _ = form(h, 2)
    first = h.join(member_id=ids[1], client_id="c1", protocols=(("range", b"new"),))
    assert h.state() == "PreparingRebalance" and not first.done
    # the client gave up and sent JoinGroup again: the first is answered, once
    second = h.join(member_id=ids[1], client_id="c1", protocols=(("range", b"new"),))
    assert first.error == E.REBALANCE_IN_PROGRESS and not second.done
    r0 = h.join(member_id=ids[0], client_id="c0")
    assert r0.error == E.NONE and second.error == E.NONE and second.generation_id == 2
    assert h.group().num_members_awaiting_join == 0


def test_initial_rebalance_delay_extended_while_members_arrive():
    h = Harness({"group.initial.rebalance.delay.ms": 3000})
    a = h.join(version=3, client_id="a", rebalance=10000)
    h.advance_to(2000)
    b = h.join(version=3, client_id="b", rebalance=10000)
    h.advance_to(2999)
    assert not a.done
    h.advance_to(3000)   # the delay ran out, but b arrived: extended by another 3000
    assert not a.done
    h.advance_to(5999)
    assert not a.done
    h.advance_to(6000)
    assert a.error == E.NONE and b.error == E.NONE and len(a.members) == 2


def test_initial_join_at_delay_0_takes_members_that_join_between_timer_runs():
    """Kafka's initial delayed join goes through its timer even at delay 0: each timer run that
    finds a new member schedules another, so a burst of joins forms one generation."""
    h = Harness()
    firsts = [h.join(client_id=f"c{i}", tick=False) for i in range(4)]
    joins = [h.join(member_id=firsts[0].member_id, client_id="c0", tick=False),
             h.join(member_id=firsts[1].member_id, client_id="c1", tick=False)]
    assert h.timer.advance(h.clock.now) == 1       # first run: c1 was added, run again
    joins.append(h.join(member_id=firsts[2].member_id, client_id="c2", tick=False))
    assert h.timer.advance(h.clock.now) == 1       # second run: c2 was added, run again
    assert not any(j.done for j in joins)
    assert h.timer.advance(h.clock.now) == 1       # nobody new: the join phase completes
    assert [j.generation_id for j in joins] == [1, 1, 1] and len(joins[0].members) == 3
    late = h.join(member_id=firsts[3].member_id, client_id="c3")
    assert not late.done and h.state() == "PreparingRebalance"   # the next generation


def test_initial_rebalance_delay_capped_by_rebalance_timeout():
    h = Harness({"group.initial.rebalance.delay.ms": 3000})
    replies = [h.join(version=3, client_id="first", rebalance=7000)]
    for t in range(1000, 20000, 1000):
        h.advance_to(t)
        if replies[0].done:
            break
        replies.append(h.join(version=3, client_id=f"m{t}", rebalance=7000))
    assert replies[0].done and h.clock.now <= 10000


def test_group_max_size():
    h = Harness({"group.max.size": 2})
    ids, _ = form(h, 2)
    full = h.join(client_id="third")                 # refused before any member id is given
    assert full.error == E.GROUP_MAX_SIZE_REACHED and full.member_id == ""
    assert h.join(client_id="v3", version=3).error == E.GROUP_MAX_SIZE_REACHED
    assert len(h.group().members) == 2 and h.state() == "Stable"
    assert not h.group().pending_members
    # existing members are still accepted
    assert h.join(member_id=ids[1], client_id="c1").error == E.NONE


def test_new_member_join_timeout():
    h = Harness()
    ids, _ = form(h, 1, rebalance=600_000, session=30000)
    late = h.join(client_id="late", version=3, session=30000, rebalance=600_000)
    # the old member keeps heartbeating but never rejoins; the new one waits in the join
    for t in range(10000, 300_001, 10000):
        h.advance_to(t)
        h.heartbeat("g", ids[0], 1)
    assert late.error == E.UNKNOWN_MEMBER_ID        # dropped after the 5 minute join timeout
    assert len(h.group().members) == 1


# --------------------------------------------------------------------------- pending members

def test_pending_member_expires_after_session_timeout():
    h = Harness()
    ids, _ = form(h, 1)
    pending = h.join(client_id="slow", session=8000)
    assert pending.member_id in h.group().pending_members
    h.advance_to(7999)
    h.heartbeat("g", ids[0], 1)
    assert pending.member_id in h.group().pending_members
    h.advance_to(8000)
    assert pending.member_id not in h.group().pending_members
    assert h.join(member_id=pending.member_id, client_id="slow").error == E.UNKNOWN_MEMBER_ID
    assert h.state() == "Stable"


def test_pending_member_blocks_join_completion_until_it_rejoins():
    h = Harness()
    ids, _ = form(h, 1)
    r0 = h.join(member_id=ids[0], client_id="c0")      # leader starts a rebalance
    assert r0.error == E.NONE                          # alone: completes at once
    h.sync("g", ids[0], 2, {ids[0]: b""})
    pending = h.join(client_id="new")
    r0 = h.join(member_id=ids[0], client_id="c0")
    assert not r0.done                                 # a member id is pending
    new = h.join(member_id=pending.member_id, client_id="new")
    assert r0.error == E.NONE and new.error == E.NONE and new.generation_id == 3


def test_pending_member_leaves():
    h = Harness()
    form(h, 1)
    pending = h.join(client_id="p")
    reply = h.leave("g", pending.member_id)
    assert reply.error == E.NONE and reply.members[0].error_code == 0
    assert pending.member_id not in h.group().pending_members


# --------------------------------------------------------------------------- leaving

def test_leave_group_batched_and_by_instance_id():
    h = Harness()
    a = h.join(client_id="a", instance="inst-a", version=5, tick=False)
    b = h.join(client_id="b", instance="inst-b", version=5, tick=False)
    c = h.join(client_id="c", version=3, tick=False)
    h.tick()
    assert h.group().static_members == {"inst-a": a.member_id, "inst-b": b.member_id}
    reply = h.leave("g", ("", "inst-a"), (b.member_id, "inst-b"), "nobody", ("", "ghost"),
                    (c.member_id, "inst-a"))
    errors = [mr.error_code for mr in reply.members]
    assert errors == [0, 0, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]
    assert list(h.group().members) == [c.member_id]
    # v0-2: one member and its error at the top level
    assert h.leave("g", "nobody", version=1).error == E.UNKNOWN_MEMBER_ID
    assert h.leave("g", c.member_id, version=0).error == E.NONE
    assert h.state() == "Empty"


def test_leave_batch_for_a_group_that_does_not_exist():
    """Kafka: the group is not found -> top-level NONE and every member UNKNOWN_MEMBER_ID with
    its ids echoed (v3+); v0-2 carry UNKNOWN_MEMBER_ID at the top level. No group is created."""
    h = Harness()
    for version in (3, 4, 5):
        reply = h.leave("missing", ("x", None), ("y", "inst-y"), ("", "inst-z"), version=version)
        assert reply.error == E.NONE
        assert [(mr.member_id, mr.group_instance_id, mr.error_code) for mr in reply.members] == [
            ("x", None, E.UNKNOWN_MEMBER_ID), ("y", "inst-y", E.UNKNOWN_MEMBER_ID),
            ("", "inst-z", E.UNKNOWN_MEMBER_ID)]
    for version in (0, 1, 2):
        reply = h.leave("missing", "x", version=version)
        assert reply.error == E.UNKNOWN_MEMBER_ID
    assert h.group("missing") is None
    assert h.leave("", ("x", None), version=5).error == E.INVALID_GROUP_ID


def test_everyone_leaves_group_becomes_empty_and_is_persisted():
    h = Harness()
    ids, _ = form(h, 2)
    h.leave("g", *ids)
    assert h.state() == "Empty" and h.group().generation_id == 2
    from broker.coordinator.group.records import decode_record
    key, value = decode_record(*h.log.records(h.coordinator.partition_for("g"))[-1])
    assert value.generation == 2 and value.members == [] and value.protocol is None


def test_leave_answers_a_waiting_join_with_unknown_member():
    h = Harness()
    ids, _ = form(h, 2)
    h.join(member_id=ids[1], client_id="c1", protocols=(("range", b"z"),))
    r0 = h.join(member_id=ids[0], client_id="c0", tick=False)
    assert r0.done  # both rejoined -> completes
    h.join(member_id=ids[0], client_id="c0", protocols=(("range", b"q"),))  # waits for ids[1]
    waiting = h.group().members[ids[0]]
    assert waiting.is_awaiting_join
    # an admin removes it by id while it waits
    h.leave("g", ids[0])
    assert ids[0] not in h.group().members


# --------------------------------------------------------------------------- static members

def static_group(h: Harness, version=9):
    a = h.join(client_id="a", instance="ia", version=version, tick=False, rebalance=30000)
    b = h.join(client_id="b", instance="ib", version=version, tick=False, rebalance=30000)
    h.tick()
    assert a.error == E.NONE and b.error == E.NONE and a.leader == a.member_id
    assert a.member_id.startswith("ia-") and b.member_id.startswith("ib-")
    h.sync("g", a.member_id, 1, {a.member_id: b"A", b.member_id: b"B"}, instance="ia")
    h.sync("g", b.member_id, 1, instance="ib")
    assert h.state() == "Stable"
    return a.member_id, b.member_id


def test_static_member_restart_without_rebalance():
    h = Harness()
    a, b = static_group(h)
    writes = h.log.writes
    again = h.join(client_id="b", instance="ib", rebalance=30000)
    assert again.error == E.NONE and again.member_id != b and again.member_id.startswith("ib-")
    assert again.generation_id == 1 and again.leader == a and again.members == []
    assert h.state() == "Stable" and h.coordinator.rebalances_total == 1
    assert h.log.writes == writes + 1                 # the new member id is persisted first
    # the old member id is fenced; the new one carries on with the stored assignment
    assert h.heartbeat("g", b, 1, instance="ib").error == E.FENCED_INSTANCE_ID
    assert h.heartbeat("g", again.member_id, 1, instance="ib").error == E.NONE
    assert h.sync("g", again.member_id, 1, instance="ib").assignment == b"B"
    assert h.commit("g", {("t", 0): 1}, generation=1, member_id=b, instance="ib") \
        .value.topics[0].partitions[0].error_code == E.FENCED_INSTANCE_ID


def test_static_leader_restart_v9_skip_assignment():
    h = Harness()
    a, b = static_group(h)
    again = h.join(client_id="a", instance="ia", rebalance=30000, version=9)
    assert again.error == E.NONE and again.skip_assignment is True
    assert again.leader == again.member_id and len(again.members) == 2
    assert h.state() == "Stable"


def test_static_leader_restart_before_v9_is_told_the_old_leader():
    h = Harness()
    a, b = static_group(h, version=5)
    again = h.join(client_id="a", instance="ia", rebalance=30000, version=8)
    assert again.error == E.NONE and again.skip_assignment is False
    assert again.leader == a and again.members == []    # it acts as a follower
    assert h.group().leader_id == again.member_id


def test_static_member_restart_with_new_protocol_rebalances():
    h = Harness()
    a, b = static_group(h)
    again = h.join(client_id="b", instance="ib", rebalance=30000,
                   protocols=(("roundrobin", b""), ("range", b"")))
    # "range" is still the only common protocol, so the selection does not change
    assert again.done and h.state() == "Stable"
    h2 = Harness()
    a, b = static_group(h2)
    h2.join(client_id="a", instance="ia", protocols=(("rr", b""), ("range", b"")))
    again = h2.join(client_id="b", instance="ib", protocols=(("rr", b""), ("range", b"")))
    # now both prefer "rr": the selected protocol would change, so the group rebalances
    assert h2.state() in ("PreparingRebalance", "CompletingRebalance")


def test_fenced_instance_id():
    h = Harness()
    a, b = static_group(h)
    assert h.join(member_id="ib-stale", instance="ib").error == E.FENCED_INSTANCE_ID
    assert h.join(member_id=b, instance="ib-unknown").error == E.UNKNOWN_MEMBER_ID
    assert h.sync("g", "ib-stale", 1, instance="ib").error == E.FENCED_INSTANCE_ID
    assert h.leave("g", ("ib-stale", "ib")).members[0].error_code == E.FENCED_INSTANCE_ID


def test_static_member_replaced_while_waiting_is_fenced():
    h = Harness()
    a, b = static_group(h)
    waiting = h.join(member_id=a, instance="ia", client_id="a")   # leader forces a rebalance
    assert not waiting.done and h.state() == "PreparingRebalance"
    dup = h.join(client_id="a2", instance="ia")                   # same instance, new process
    assert waiting.error == E.FENCED_INSTANCE_ID and waiting.member_id == a
    assert not dup.done                                           # joins the rebalance
    rb = h.join(member_id=b, instance="ib", client_id="b")
    assert dup.error == E.NONE and rb.error == E.NONE and dup.generation_id == 2
    assert dup.leader == dup.member_id                            # the leader's new id


def test_static_member_that_does_not_rejoin_stays_through_the_rebalance():
    h = Harness()
    a, b = static_group(h)
    ra = h.join(member_id=a, instance="ia", client_id="a")
    for t in (9000, 18000, 27000):
        h.advance_to(t)
        assert h.heartbeat("g", b, 1, instance="ib").error == E.REBALANCE_IN_PROGRESS
    h.advance_to(30000)   # the rebalance timeout: dynamic members would be removed here
    assert ra.error == E.NONE and ra.generation_id == 2
    assert [mm.member_id for mm in ra.members] == [a, b]
    assert b in h.group().members and h.state() == "CompletingRebalance"
    # b learns of the new generation when it rejoins
    assert h.heartbeat("g", b, 1, instance="ib").error == E.ILLEGAL_GENERATION
    rb = h.join(member_id=b, instance="ib", client_id="b")
    assert rb.error == E.NONE and rb.generation_id == 2 and h.state() == "CompletingRebalance"


def test_coordinator_stats():
    h = Harness()
    form(h, 2)
    form(h, 1, group="other")
    h.commit("simple", {("t", 0): 1})
    assert h.coordinator.groups_by_state() == {"Empty": 1, "PreparingRebalance": 0,
                                               "CompletingRebalance": 0, "Stable": 2,
                                               "Assigning": 0, "Reconciling": 0,
                                               "NotReady": 0}
    assert h.coordinator.member_count() == 3
    assert h.coordinator.waiting_operations()["heartbeat"] == 3
