"""The rebalance history the coordinator keeps for the console
(broker/coordinator/group/history.py): what each rebalance of a classic or a consumer group
records, with the injected clock."""
from __future__ import annotations

from broker.coordinator.group.history import (EXPIRED, JOINED, LEFT, METADATA, RebalanceHistory,
                                              classic_cause)

from tests.coordinator.consumer_harness import ConsumerHarness
from tests.coordinator.harness import E, Harness, assignment
from tests.coordinator.group.consumer.test_consumer_groups import ALL, harness as consumer_harness


def history(h, group="g"):
    return h.coordinator.stats.history.of(group, h.clock.now)


def join_and_sync(h: Harness, client_id: str, advance_ms: int = 0):
    first = h.join(client_id=client_id)
    join = h.join(member_id=first.member_id, client_id=client_id)
    assert join.error == E.NONE
    h.advance(advance_ms)
    sync = h.sync("g", join.member_id, join.generation_id,
                  {join.member_id: assignment(t=[0])})
    assert sync.error == E.NONE
    return join.member_id


def test_classic_rebalance_records_reason_members_and_phase_durations():
    h = Harness(start=1_000)
    member = join_and_sync(h, "consumer-1", advance_ms=40)
    [entry] = history(h)
    assert entry["cause"] == JOINED and entry["reason"] == f"pending member {member} joined"
    assert entry["joined"] == [{"member_id": member, "client_id": "consumer-1",
                                "instance_id": None}]
    assert entry["outcome"] == "stable" and entry["generation"] == 1
    assert entry["from_generation"] == 0 and entry["members"] == 1
    # joined at once (no initial delay here); the leader synced 40 ms after the join answer
    assert entry["phases_ms"] == {"join": 0, "sync": 40}
    assert entry["started_ms"] == 1_000 and entry["ended_ms"] == 1_040


def test_classic_leave_and_expiry_are_new_rebalances_newest_first():
    h = Harness()
    a = join_and_sync(h, "a")
    # b's join moves the group to PreparingRebalance; a must rejoin within its timeout
    first = h.join(client_id="b")
    h.join(member_id=first.member_id, client_id="b", tick=False)
    h.join(member_id=a, client_id="a")
    [joined, _first] = history(h)[:2]
    assert joined["cause"] == JOINED and joined["phase"] == "sync"
    assert joined["outcome"] == "in progress"
    # b leaves before anyone synced: that rebalance is interrupted by the next one
    assert h.leave("g", first.member_id).error == E.NONE
    newest = history(h)
    assert newest[0]["cause"] == LEFT
    assert newest[0]["left"] == [{"member_id": first.member_id, "why": "left"}]
    assert newest[1]["outcome"] == "interrupted"
    # a rejoins, syncs, then stops heartbeating: its session timeout starts another one
    join = h.join(member_id=a, client_id="a")
    h.sync("g", a, join.generation_id, {a: assignment(t=[0])})
    assert history(h)[0]["outcome"] == "stable"
    h.advance(10_001)
    expired = history(h)[0]
    assert expired["cause"] == EXPIRED
    assert expired["left"] == [{"member_id": a, "why": "expired"}]
    # nobody is left to rejoin: the group is Empty and the rebalance says so
    assert expired["outcome"] == "empty" and expired["members"] == 0


def test_consumer_group_epoch_bumps_with_assign_and_reconcile_phases():
    h = consumer_harness()
    h.heartbeat(member_id="m1")
    [first] = history(h)
    assert first["cause"] == JOINED and first["outcome"] == "stable"
    assert first["generation"] == 2 and first["joined"][0]["member_id"] == "m1"
    h.heartbeat(member_id="m2")
    newest = history(h)[0]
    assert newest["cause"] == JOINED and newest["from_generation"] == 2
    assert newest["outcome"] == "in progress" and newest["phase"] == "reconcile"
    # m1 revokes half 25 ms later; m2 then gets it and the group is Stable at epoch 3
    h.advance(25)
    kept = h.assigned(h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL}))["t"]
    h.heartbeat(member_id="m1", epoch=2, owned={"t": kept})
    h.heartbeat(member_id="m2", epoch=3, owned={})
    done = history(h)[0]
    assert done["outcome"] == "stable" and done["generation"] == 3 and done["members"] == 2
    assert done["phases_ms"] == {"assign": 0, "reconcile": 25}
    # m2 leaves: a new epoch, caused by a member leaving
    h.heartbeat(member_id="m2", epoch=-1)
    left = history(h)[0]
    assert left["cause"] == LEFT and left["left"] == [{"member_id": "m2", "why": "left"}]


def test_consumer_group_session_expiry_is_recorded_as_expired():
    h = consumer_harness()
    h.heartbeat(member_id="m1")
    h.heartbeat(member_id="m2")
    h.advance(46_000)   # group.consumer.session.timeout.ms: neither heartbeats
    causes = [entry["cause"] for entry in history(h)]
    assert causes[0] == EXPIRED and history(h)[0]["outcome"] == "empty"


def test_history_is_a_bounded_ring_per_group_and_bounded_in_groups():
    history = RebalanceHistory(per_group=3, max_groups=2)
    for i in range(5):
        history.started("g", i * 10, f"r{i}", METADATA, i, "join")
        history.ended("g", i * 10 + 5, "stable", 1, i + 1)
    entries = history.of("g", 100)
    assert [e["reason"] for e in entries] == ["r4", "r3", "r2"]
    assert all(e["duration_ms"] == 5 for e in entries)
    history.member_joined("h", "m")
    history.member_joined("i", "m")
    assert set(history.groups) == {"h", "i"}   # "g" changed least recently: forgotten


def test_classic_causes_come_from_kafkas_reason_texts():
    assert classic_cause("adding new member c-1; client reason: timeout") == JOINED
    assert classic_cause("removing member m on heartbeat expiration") == EXPIRED
    assert classic_cause("explicit LeaveGroup request for (m) members") == LEFT
    assert classic_cause("leader m re-joining group during Stable") == METADATA
    assert classic_cause("updating metadata for member m during Stable") == METADATA


def test_deleting_a_group_forgets_its_history():
    h = ConsumerHarness()
    h.topics.create("t", 2)
    h.heartbeat(member_id="m1")
    h.heartbeat(member_id="m1", epoch=-1)
    assert history(h)
    from protocol import messages as m
    from tests.coordinator.harness import Ctx, Reply
    reply = Reply()
    h.coordinator.delete_groups(m.DeleteGroupsRequest(groups_names=["g"]), 2, Ctx(), reply)
    assert reply.value.results[0].error_code == 0
    assert history(h) == []
