"""Online migration: a running classic group is upgraded when a member joins with
ConsumerGroupHeartbeat, and its classic members keep working with JoinGroup, SyncGroup,
Heartbeat and LeaveGroup (consumer/migration.py)."""
from __future__ import annotations

import struct

import pytest

from protocol import messages as m
from protocol.errors import ErrorCode

from broker.coordinator.group.consumer.group import ConsumerGroup
from broker.coordinator.group.group import GroupMetadata

from tests.coordinator.consumer_harness import ConsumerHarness, FakeTopics
from tests.coordinator.harness import Ctx, Reply

#: every test here runs with joins answered at once and batched (conftest.py)
pytestmark = pytest.mark.usefixtures("joins_at_once_and_batched")

E = ErrorCode


def subscription(topics, owned=None, version=1) -> bytes:
    tp = m.ConsumerProtocolSubscription.TopicPartition
    body = m.ConsumerProtocolSubscription(
        topics=list(topics), user_data=None,
        owned_partitions=[tp(topic=t, partitions=sorted(p)) for t, p in (owned or {}).items()])
    return struct.pack(">h", version) + body.encode(version)


def assignment(**topics) -> bytes:
    tp = m.ConsumerProtocolAssignment.TopicPartition
    body = m.ConsumerProtocolAssignment(
        assigned_partitions=[tp(topic=t, partitions=sorted(p)) for t, p in topics.items()],
        user_data=None)
    return struct.pack(">h", 1) + body.encode(1)


def decode_assignment(data: bytes) -> set[int]:
    version = struct.unpack_from(">h", data)[0]
    value = m.ConsumerProtocolAssignment.decode(data, version, 2, exact=False)
    return {p for tp in value.assigned_partitions for p in tp.partitions}


class Classic:
    """A classic member speaking JoinGroup/SyncGroup/Heartbeat/LeaveGroup."""

    def __init__(self, h: ConsumerHarness, group="g", instance=None) -> None:
        self.h = h
        self.group = group
        self.instance = instance
        self.member_id = ""
        self.generation = -1
        self.owned: set[int] = set()

    def join(self, owned=None) -> Reply:
        cls = m.JoinGroupRequest.JoinGroupRequestProtocol
        meta = subscription(["t"], {"t": owned} if owned else None)
        reply = Reply()
        self.h.coordinator.join_group(m.JoinGroupRequest(
            group_id=self.group, session_timeout_ms=10000, rebalance_timeout_ms=30000,
            member_id=self.member_id, group_instance_id=self.instance, protocol_type="consumer",
            protocols=[cls(name="range", metadata=meta)]), 9, Ctx("classic"), reply)
        self.h.timer.advance(self.h.clock.now)
        if reply.done and reply.error in (E.NONE, E.MEMBER_ID_REQUIRED):
            self.member_id = reply.member_id
        if reply.done and reply.error == E.NONE:
            self.generation = reply.generation_id
        return reply

    def sync(self, assignments=None) -> Reply:
        cls = m.SyncGroupRequest.SyncGroupRequestAssignment
        reply = Reply()
        self.h.coordinator.sync_group(m.SyncGroupRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance, protocol_type="consumer", protocol_name="range",
            assignments=[cls(member_id=k, assignment=v) for k, v in (assignments or {}).items()]),
            5, Ctx("classic"), reply)
        if reply.done and reply.error == E.NONE:
            self.owned = decode_assignment(reply.assignment) if reply.assignment else set()
        return reply

    def heartbeat(self) -> E:
        reply = Reply()
        self.h.coordinator.heartbeat(m.HeartbeatRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance), 4, Ctx("classic"), reply)
        return reply.error

    def leave(self) -> Reply:
        reply = Reply()
        self.h.coordinator.leave_group(m.LeaveGroupRequest(group_id=self.group, members=[
            m.LeaveGroupRequest.MemberIdentity(member_id=self.member_id,
                                               group_instance_id=self.instance)]),
            5, Ctx("classic"), reply)
        return reply


def classic_pair(h: ConsumerHarness):
    """Two classic members in a Stable group at generation 2, 3 partitions each."""
    a, b = Classic(h), Classic(h)
    assert a.join().error == E.MEMBER_ID_REQUIRED
    ra = a.join()
    assert b.join().error == E.MEMBER_ID_REQUIRED
    rb = b.join()
    ra = a.join()  # a rejoins for the rebalance b started
    assert ra.error == rb.error == E.NONE and ra.generation_id == rb.generation_id == 2
    a.generation = b.generation = 2
    leader = a if ra.leader == a.member_id else b
    leader.sync({a.member_id: assignment(t={0, 1, 2}), b.member_id: assignment(t={3, 4, 5})})
    (b if leader is a else a).sync()
    assert a.owned == {0, 1, 2} and b.owned == {3, 4, 5}
    return a, b


def harness() -> ConsumerHarness:
    topics = FakeTopics()
    topics.create("t", 6)
    return ConsumerHarness({"group.initial.rebalance.delay.ms": 0}, topics)


def test_a_consumer_member_upgrades_a_running_classic_group():
    h = harness()
    a, b = classic_pair(h)
    assert isinstance(h.group(), GroupMetadata)
    c = h.heartbeat(member_id="c")
    assert c.error == E.NONE
    group = h.group()
    assert isinstance(group, ConsumerGroup)
    # the classic generation became the group epoch; the new member moved it on
    assert c.member_epoch == 3 and group.group_epoch == 3
    assert group.members[a.member_id].member_epoch == 2
    assert group.members[a.member_id].classic_metadata[0] == 10000
    assert h.assigned(c) == {}          # its partitions are still the classic members'
    # the classic members learn of the rebalance from their heartbeats, rejoin, and give up
    # what they must (an eager assignor revokes everything before rejoining)
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    for member in (a, b):
        joined = member.join(owned=set())
        assert joined.error == E.NONE and joined.generation_id == 3
        assert joined.leader == "" and joined.protocol_name == "range"
        assert member.sync().error == E.NONE
    assert len(a.owned) == len(b.owned) == 2
    got = h.heartbeat(member_id="c", epoch=3, owned={})
    assert got.member_epoch == 3 and len(h.assigned(got)["t"]) == 2
    assert a.owned | b.owned | h.assigned(got)["t"] == set(range(6))
    assert a.heartbeat() == E.NONE and b.heartbeat() == E.NONE
    assert group.state.value == "Stable"
    # what was written rebuilds the same group, classic members included
    fresh = ConsumerHarness(topics=h.topics)
    partition = h.coordinator.partition_for("g")
    fresh.coordinator.runtime.begin_loading(partition)
    fresh.coordinator.runtime.load(partition, h.log.records(partition))
    fresh.coordinator.runtime.finish_loading(partition)
    assert fresh.group().members == group.members
    assert fresh.group().group_epoch == group.group_epoch


def test_offsets_of_the_classic_group_survive_the_upgrade():
    h = harness()
    a, _b = classic_pair(h)
    cls = m.OffsetCommitRequest.OffsetCommitRequestTopic
    part = m.OffsetCommitRequest.OffsetCommitRequestPartition
    reply = Reply()
    h.coordinator.offset_commit(m.OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=2, member_id=a.member_id,
        topics=[cls(name="t", partitions=[part(partition_index=0, committed_offset=42)])]),
        8, Ctx(), reply)
    assert reply.value.topics[0].partitions[0].error_code == 0
    h.heartbeat(member_id="c")
    assert h.group().offsets[("t", 0)].offset == 42
    # and a classic member of the consumer group still commits with its generation
    reply = Reply()
    h.coordinator.offset_commit(m.OffsetCommitRequest(
        group_id="g", generation_id_or_member_epoch=2, member_id=a.member_id,
        topics=[cls(name="t", partitions=[part(partition_index=0, committed_offset=43)])]),
        8, Ctx(), reply)
    assert reply.value.topics[0].partitions[0].error_code == 0


def test_classic_leave_and_sync_errors_on_a_consumer_group():
    h = harness()
    a, b = classic_pair(h)
    h.heartbeat(member_id="c")
    assert b.sync().error == E.REBALANCE_IN_PROGRESS      # a newer target: rejoin first
    stale = Classic(h)
    stale.member_id, stale.generation = a.member_id, 1
    assert stale.heartbeat() == E.ILLEGAL_GENERATION
    left = b.leave()
    assert left.value.members[0].error_code == 0
    assert b.member_id not in h.group().members
    assert h.group().group_epoch == 4


def test_upgrade_refused_for_other_protocol_types():
    h = harness()
    cls = m.JoinGroupRequest.JoinGroupRequestProtocol
    first = Reply()
    h.coordinator.join_group(m.JoinGroupRequest(
        group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
        protocol_type="connect", protocols=[cls(name="default", metadata=b"x")]), 9, Ctx(),
        first)
    second = Reply()
    h.coordinator.join_group(m.JoinGroupRequest(
        group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000,
        member_id=first.member_id, protocol_type="connect",
        protocols=[cls(name="default", metadata=b"x")]), 9, Ctx(), second)
    h.timer.advance(h.clock.now)
    assert second.error == E.NONE
    reply = h.heartbeat(member_id="c")
    assert reply.error == E.GROUP_ID_NOT_FOUND
    assert "does not use the consumer embedded protocol" in reply.error_message


def test_upgrade_disabled_by_the_migration_policy():
    topics = FakeTopics()
    topics.create("t", 6)
    h = ConsumerHarness({"group.initial.rebalance.delay.ms": 0,
                         "group.consumer.migration.policy": "disabled"}, topics)
    classic_pair(h)
    reply = h.heartbeat(member_id="c")
    assert reply.error == E.GROUP_ID_NOT_FOUND
    assert "online upgrade is disabled" in reply.error_message


def test_the_group_becomes_classic_again_when_its_last_consumer_member_leaves():
    h = harness()
    a, b = classic_pair(h)
    h.heartbeat(member_id="c")
    for member in (a, b):
        member.join(owned=set())
        member.sync()
    h.heartbeat(member_id="c", epoch=3, owned={})
    assert isinstance(h.group(), ConsumerGroup)
    left = h.heartbeat(member_id="c", epoch=-1)
    assert left.error == E.NONE
    group = h.group()
    assert isinstance(group, GroupMetadata)
    assert group.state.value == "PreparingRebalance" and group.generation_id == 3
    assert set(group.members) == {a.member_id, b.member_id}
    # the classic members rejoin and form a classic generation as before the roll
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    first = a.join(owned=set())
    second = b.join(owned=set())
    h.timer.advance(h.clock.now)
    assert first.error == second.error == E.NONE
    assert first.generation_id == second.generation_id == 4
    a.generation = b.generation = 4
    leader = a if first.leader == a.member_id else b
    leader.sync({a.member_id: assignment(t={0, 1, 2}), b.member_id: assignment(t={3, 4, 5})})
    (b if leader is a else a).sync()
    assert h.group().state.value == "Stable"
    # what was written rebuilds the classic group
    fresh = ConsumerHarness(topics=h.topics)
    partition = h.coordinator.partition_for("g")
    fresh.coordinator.runtime.begin_loading(partition)
    fresh.coordinator.runtime.load(partition, h.log.records(partition))
    fresh.coordinator.runtime.finish_loading(partition)
    assert isinstance(fresh.group(), GroupMetadata)
    assert fresh.group().generation_id == 4 and set(fresh.group().members) == set(group.members)
