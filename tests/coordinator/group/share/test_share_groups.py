"""Share groups (KIP-932) on the group coordinator: ShareGroupHeartbeat membership, the simple
assignor, session timeouts, ShareGroupDescribe, list/describe/delete, and replay equal to the
live state. Fake clock, in-memory __consumer_offsets."""
from __future__ import annotations

import uuid

from protocol import messages as m
from protocol.errors import ErrorCode

from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group.share.assignor import assign
from broker.purgatory import Timer

from tests.coordinator.consumer_harness import FakeTopics
from tests.coordinator.harness import Ctx, FakeClock, FakeLog

E = ErrorCode


class ShareHarness:
    def __init__(self, config=None, log=None, topics=None, start=0) -> None:
        self.clock = FakeClock(start)
        self.timer = Timer(self.clock)
        self.log = log or FakeLog()
        self.topics = topics or FakeTopics()
        self.coordinator = GroupCoordinator(config or {}, self.clock, self.timer,
                                            self.log.persist, topics=self.topics)

    def advance(self, ms: int) -> None:
        target = self.clock.now + ms
        while True:
            deadline = self.timer.next_deadline()
            if deadline is None or deadline > target:
                break
            self.clock.now = max(self.clock.now, deadline)
            self.timer.advance(self.clock.now)
        self.clock.now = target
        self.timer.advance(target)

    def heartbeat(self, member_id="m1", epoch=0, topics=("t",), group="g", rack=None):
        req = m.ShareGroupHeartbeatRequest(group_id=group, member_id=member_id,
                                           member_epoch=epoch, rack_id=rack,
                                           subscribed_topic_names=None if topics is None
                                           else list(topics))
        out = []
        self.coordinator.share_group_heartbeat(req, 1, Ctx(), out.append)
        assert len(out) == 1
        return out[0]

    def describe(self, *groups):
        out = []
        self.coordinator.share_group_describe(
            m.ShareGroupDescribeRequest(group_ids=list(groups),
                                        include_authorized_operations=False), 1, Ctx(),
            out.append)
        return out[0].groups

    def assigned(self, response) -> dict:
        return {tp.topic_id: sorted(tp.partitions)
                for tp in response.assignment.topic_partitions}


def test_first_heartbeat_joins_with_every_partition():
    h = ShareHarness()
    tid = h.topics.create("t", 3)
    r = h.heartbeat("m1")
    assert r.error_code == 0 and r.member_id == "m1"
    assert r.member_epoch == 2                      # group epoch 1 + the first member
    assert r.heartbeat_interval_ms == 5000          # group.share.heartbeat.interval.ms
    assert h.assigned(r) == {tid: [0, 1, 2]}
    (g,) = h.describe("g")
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == \
        (0, "Stable", 2, 2, "simple")
    assert [(mm.member_id, mm.member_epoch, mm.subscribed_topic_names) for mm in g.members] == \
        [("m1", 2, ["t"])]


def test_second_member_takes_half_and_first_learns_at_its_heartbeat():
    h = ShareHarness()
    tid = h.topics.create("t", 4)
    h.heartbeat("m1")
    r2 = h.heartbeat("m2")
    assert r2.member_epoch == 3 and len(h.assigned(r2)[tid]) == 2
    r1 = h.heartbeat("m1", epoch=2, topics=None)
    assert r1.member_epoch == 3
    both = sorted(h.assigned(r1)[tid] + h.assigned(r2)[tid])
    assert both == [0, 1, 2, 3]                     # disjoint and covering
    # a steady heartbeat changes nothing and carries no assignment
    writes = h.log.writes
    r1b = h.heartbeat("m1", epoch=3, topics=None)
    assert r1b.member_epoch == 3 and r1b.assignment is None
    assert h.log.writes == writes


def test_within_the_assignment_interval_a_new_member_waits_for_a_heartbeat_after_it():
    """group.share.assignment.interval.ms (Kafka's canComputeNextTargetAssignment): the first
    target is computed at once; a member joining within the interval keeps the last target (none
    for it) until a heartbeat after the interval computes the next one."""
    h = ShareHarness({"group.share.assignment.interval.ms": 1000}, start=10_000)
    tid = h.topics.create("t", 4)
    r1 = h.heartbeat("m1")
    assert (r1.member_epoch, h.assigned(r1)) == (2, {tid: [0, 1, 2, 3]})
    h.advance(400)
    r2 = h.heartbeat("m2")
    assert r2.error_code == 0 and r2.member_epoch == 2     # the last target's epoch, not 3
    assert h.assigned(r2) == {}
    (g,) = h.describe("g")
    assert (g.group_epoch, g.assignment_epoch) == (3, 2)
    assert h.heartbeat("m1", epoch=2, topics=None).assignment is None  # still all four
    h.advance(599)
    assert h.heartbeat("m2", epoch=2, topics=None).member_epoch == 2   # 999 ms: not yet
    h.advance(1)
    r2 = h.heartbeat("m2", epoch=2, topics=None)
    assert r2.member_epoch == 3 and len(h.assigned(r2)[tid]) == 2
    r1 = h.heartbeat("m1", epoch=2, topics=None)
    assert r1.member_epoch == 3
    assert sorted(h.assigned(r1)[tid] + h.assigned(r2)[tid]) == [0, 1, 2, 3]
    (g,) = h.describe("g")
    assert (g.group_epoch, g.assignment_epoch) == (3, 3)


def test_the_assignment_interval_survives_a_reload():
    """The target's timestamp is stored with its epoch: a coordinator that loads the group
    counts the interval from the same moment."""
    h = ShareHarness({"group.share.assignment.interval.ms": 1000}, start=10_000)
    h.topics.create("t", 2)
    h.heartbeat("m1")
    again = ShareHarness({"group.share.assignment.interval.ms": 1000}, log=h.log,
                         topics=h.topics, start=10_500)
    for p in range(again.coordinator.runtime.num_partitions):
        again.coordinator.runtime.begin_loading(p)
        again.coordinator.runtime.load(p, h.log.records(p))
        again.coordinator.runtime.finish_loading(p)
    assert again.heartbeat("m2").member_epoch == 2               # 500 ms after the target
    again.advance(500)
    assert again.heartbeat("m2", epoch=2, topics=None).member_epoch == 3


def test_more_members_than_partitions_share_a_partition():
    h = ShareHarness()
    tid = h.topics.create("t", 1)
    h.heartbeat("m1")
    r2 = h.heartbeat("m2")
    r1 = h.heartbeat("m1", epoch=2, topics=None)
    assert r1.member_epoch == 3 and r1.assignment is None      # its partition did not change
    assert h.assigned(r2) == {tid: [0]}
    (g,) = h.describe("g")
    assert [[tp.partitions for tp in mm.assignment.topic_partitions] for mm in g.members] == \
        [[[0]], [[0]]]


def test_simple_assignor_shares_evenly_and_keeps_what_members_hold():
    t = uuid.UUID(int=1)
    subs = {f"m{i}": frozenset({t}) for i in range(3)}
    out = assign(subs, {t: 6}, {})
    assert sorted(len(a[t]) for a in out.values()) == [2, 2, 2]
    assert set().union(*(a[t] for a in out.values())) == set(range(6))
    again = assign({**subs, "m3": frozenset({t})}, {t: 6}, out)
    for member in subs:   # each old member keeps a subset of what it held
        assert again[member].get(t, frozenset()) <= out[member][t]
    # 5 members on 2 partitions: each partition shared by ceil(5/2) = 3
    five = assign({f"m{i}": frozenset({t}) for i in range(5)}, {t: 2}, {})
    held = [p for a in five.values() for p in a.get(t, ())]
    assert sorted(held) == [0, 0, 0, 1, 1, 1] and all(five.values())
    # a member subscribed to a topic that does not exist gets nothing
    assert assign({"m": frozenset({uuid.UUID(int=9)})}, {t: 2}, {}) == {"m": {}}


def test_errors():
    h = ShareHarness()
    h.topics.create("t", 1)
    assert h.heartbeat("m1", epoch=0, topics=()).error_code == E.INVALID_REQUEST
    r = h.heartbeat("m1", epoch=3, topics=None)
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Share group g not found.")
    assert h.heartbeat("m1", epoch=-2).error_code == E.INVALID_REQUEST
    h.heartbeat("m1")
    r = h.heartbeat("m9", epoch=2, topics=None)
    assert (r.error_code, r.error_message) == (E.UNKNOWN_MEMBER_ID,
                                               "Member m9 is not a member of group g.")
    assert h.heartbeat("m1", epoch=7, topics=None).error_code == E.FENCED_MEMBER_EPOCH
    assert h.heartbeat("", epoch=0).error_code == E.INVALID_REQUEST
    assert h.heartbeat("m1", rack=" ").error_code == E.INVALID_REQUEST


def test_group_max_size():
    h = ShareHarness({"group.share.max.size": 2})
    h.topics.create("t", 1)
    assert h.heartbeat("m1").error_code == 0
    assert h.heartbeat("m2").error_code == 0
    r = h.heartbeat("m3")
    assert r.error_code == E.GROUP_MAX_SIZE_REACHED
    assert r.error_message == "The share group has reached its maximum capacity of 2 members."
    assert h.heartbeat("m1", epoch=0).error_code == 0     # a member rejoining is no newcomer


def test_leave_and_session_timeout_fence_members():
    h = ShareHarness()
    tid = h.topics.create("t", 2)
    h.heartbeat("m1")
    h.heartbeat("m2")
    r = h.heartbeat("m2", epoch=-1, topics=None)
    assert (r.error_code, r.member_id, r.member_epoch) == (0, "m2", -1)
    (g,) = h.describe("g")
    assert [mm.member_id for mm in g.members] == ["m1"] and g.group_epoch == 4
    # m1 stops heartbeating: after group.share.session.timeout.ms (45 s) it is fenced
    h.advance(44_999)
    assert [mm.member_id for mm in h.describe("g")[0].members] == ["m1"]
    h.advance(1)
    (g,) = h.describe("g")
    assert g.members == [] and g.group_state == "Empty"
    assert h.heartbeat("m1", epoch=4, topics=None).error_code == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("m1").member_epoch == 6 and tid


def test_heartbeats_keep_a_member():
    h = ShareHarness({"group.share.session.timeout.ms": 10_000})
    h.topics.create("t", 1)
    epoch = h.heartbeat("m1").member_epoch
    for _ in range(5):
        h.advance(9_000)
        assert h.heartbeat("m1", epoch=epoch, topics=None).error_code == 0
    assert [mm.member_id for mm in h.describe("g")[0].members] == ["m1"]


def test_other_group_types_and_share_groups_do_not_mix():
    h = ShareHarness()
    h.topics.create("t", 1)
    h.heartbeat("m1")
    out = []
    h.coordinator.consumer_group_heartbeat(m.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="c1", member_epoch=0, rebalance_timeout_ms=1000,
        subscribed_topic_names=["t"], topic_partitions=[]), 1, Ctx(), out.append)
    assert out[0].error_code == E.GROUP_ID_NOT_FOUND
    (d,) = h.describe("nope")
    assert (d.error_code, d.error_message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")


def test_list_describe_groups_and_delete():
    h = ShareHarness()
    h.topics.create("t", 1)
    h.heartbeat("m1")
    out = []
    h.coordinator.list_groups(m.ListGroupsRequest(states_filter=[], types_filter=["share"]),
                              5, Ctx(), out.append)
    assert [(g.group_id, g.group_type, g.protocol_type, g.group_state)
            for g in out[0].groups] == [("g", "share", "share", "Stable")]
    out = []
    h.coordinator.list_groups(m.ListGroupsRequest(states_filter=[], types_filter=["classic"]),
                              5, Ctx(), out.append)
    assert out[0].groups == []
    out = []
    h.coordinator.describe_groups(m.DescribeGroupsRequest(groups=["g"]), 6, Ctx(), out.append)
    assert out[0].groups[0].error_code == E.GROUP_ID_NOT_FOUND
    deleted = []
    h.coordinator.delete_groups(m.DeleteGroupsRequest(groups_names=["g"]), 2, Ctx(),
                                deleted.append)
    assert deleted[0].results[0].error_code == E.NON_EMPTY_GROUP
    h.heartbeat("m1", epoch=-1, topics=None)
    deleted = []
    h.coordinator.delete_groups(m.DeleteGroupsRequest(groups_names=["g"]), 2, Ctx(),
                                deleted.append)
    assert deleted[0].results[0].error_code == 0
    assert h.describe("g")[0].error_code == E.GROUP_ID_NOT_FOUND


def test_replay_rebuilds_the_live_groups():
    h = ShareHarness()
    tid = h.topics.create("t", 3)
    h.heartbeat("m1")
    h.heartbeat("m2")
    h.heartbeat("m3", group="other")
    h.heartbeat("m3", group="other", epoch=-1, topics=None)
    live = h.describe("g", "other")
    again = ShareHarness(log=h.log, topics=h.topics)
    for p in range(again.coordinator.runtime.num_partitions):
        again.coordinator.runtime.begin_loading(p)
        again.coordinator.runtime.load(p, h.log.records(p))
        again.coordinator.runtime.finish_loading(p)
    assert again.describe("g", "other") == live
    # the loaded member is fenced after a whole session without heartbeats
    again.advance(45_000)
    assert again.describe("g")[0].members == [] and tid


def test_classic_apis_and_commits_on_a_share_group():
    h = ShareHarness()
    h.topics.create("t", 1)
    h.heartbeat("m1")
    out = []
    h.coordinator.join_group(m.JoinGroupRequest(
        group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
        protocol_type="consumer", protocols=[]), 9, Ctx(), out.append)
    assert out[0].error_code == E.INCONSISTENT_GROUP_PROTOCOL
    out = []
    h.coordinator.heartbeat(m.HeartbeatRequest(group_id="g", generation_id=1, member_id="x"),
                            4, Ctx(), out.append)
    assert out[0].error_code == E.UNKNOWN_MEMBER_ID
    out = []
    h.coordinator.offset_commit(m.OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=-1, member_id="", topics=[
            m.OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
                m.OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=5)])]), 9, Ctx(), out.append)
    assert out[0].topics[0].partitions[0].error_code == E.GROUP_ID_NOT_FOUND
    (g,) = h.describe("g")
    assert g.group_state == "Stable"


def test_a_topic_created_after_the_join_is_assigned_at_the_next_heartbeat():
    h = ShareHarness()
    r = h.heartbeat("m1", topics=("later",))
    assert r.error_code == 0 and h.assigned(r) == {}
    epoch = r.member_epoch
    tid = h.topics.create("later", 2)
    r = h.heartbeat("m1", epoch=epoch, topics=None)
    assert r.member_epoch == epoch + 1 and h.assigned(r) == {tid: [0, 1]}
    h.topics.grow("later", 3)
    r = h.heartbeat("m1", epoch=epoch + 1, topics=None)
    assert h.assigned(r) == {tid: [0, 1, 2]}
    h.topics.delete("later")
    r = h.heartbeat("m1", epoch=epoch + 2, topics=None)
    assert r.member_epoch == epoch + 3 and h.assigned(r) == {}
