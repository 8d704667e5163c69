"""Differential conformance of the classic group protocol: every scenario runs against a real
Apache Kafka 4.x broker and against kbroker (the ``target`` fixture), with raw requests over
several connections (one per member, the way clients do it), and asserts what Kafka answers.

The expected values are Kafka's answers, observed on the real broker; a test that passes on
"kafka" and fails on "kbroker" is a difference to fix in kbroker, never a reason to change the
expectation. Where Kafka's answer is arbitrary (member id UUIDs, leader choice or vote ties decided
by hash-map order) the test checks the shape of Kafka's answer and kbroker's deterministic rule
(broker/coordinator/group/group.py), and says so at that spot.

A JoinGroup that waits for a rebalance is sent with ``RawClient.send`` and read later with
``receive``; Kafka answers one request per connection at a time, so every member has its own
connection and nothing else is sent on it while its JoinGroup or SyncGroup waits.
"""
from __future__ import annotations

import re
import struct
import time

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from tests.support import RawClient, unique

from . import topics

SESSION_MS = 10000
REBALANCE_MS = 10000
TOPIC_PARTITIONS = 3
UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


# ---------------------------------------------------------------------------------------------
# Consumer protocol payloads (Kafka parses the subscription of a "consumer" group: OffsetDelete
# answers GROUP_SUBSCRIBED_TO_TOPIC from it), so members send well-formed ones.

def _string(s: str) -> bytes:
    data = s.encode()
    return struct.pack(">h", len(data)) + data


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    return (struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics)
            + struct.pack(">i", -1))


def assignment(topic: str, *partitions: int) -> bytes:
    """ConsumerProtocolAssignment v0: version, [(topic, [partition])], null user data."""
    return (struct.pack(">hi", 0, 1) + _string(topic) + struct.pack(">i", len(partitions))
            + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1))


# ---------------------------------------------------------------------------------------------
# Fixtures

_TOPICS: dict[str, str] = {}


@pytest.fixture
def admin(connect) -> RawClient:
    return connect("conformance-admin")


@pytest.fixture
def topic(target) -> str:
    """One 3-partition topic per broker, created once per session."""
    if target.name not in _TOPICS:
        client = RawClient(target.port, client_id="conformance-admin")
        try:
            name = topics.create_topic(client, unique("conformance-topic"), TOPIC_PARTITIONS)
        finally:
            client.close()
        _TOPICS[target.name] = name
    return _TOPICS[target.name]


@pytest.fixture
def group() -> str:
    return unique("conformance-group")


# ---------------------------------------------------------------------------------------------
# Request helpers

def join_request(group: str, member_id: str = "", protocols=None, session: int = SESSION_MS,
                 rebalance: int = REBALANCE_MS, instance_id: str | None = None,
                 protocol_type: str = "consumer", topic: str = "t") -> JoinGroupRequest:
    if protocols is None:
        protocols = [("range", subscription(topic))]
    return JoinGroupRequest(
        group_id=group, session_timeout_ms=session, rebalance_timeout_ms=rebalance,
        member_id=member_id, group_instance_id=instance_id, protocol_type=protocol_type,
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m)
                   for n, m in protocols])


def join(client: RawClient, version: int, group: str, **kw):
    return client.call(join_request(group, **kw), version)


def send_join(client: RawClient, version: int, group: str, **kw) -> None:
    client.send(join_request(group, **kw), version)


def receive_join(client: RawClient, version: int):
    _, response = client.receive(JoinGroupResponse, version, JoinGroupRequest.api_key)
    return response


def new_member_id(client: RawClient, version: int, group: str, **kw) -> str:
    """The member id a new dynamic member joins with: from v4 the id Kafka hands out with
    MEMBER_ID_REQUIRED (checked here), before v4 the empty id."""
    if version < 4 or kw.get("instance_id") is not None:
        return ""
    first = join(client, version, group, **kw)
    assert first.error_code == E.MEMBER_ID_REQUIRED, first
    assert re.fullmatch(re.escape(client.client_id) + "-" + UUID_RE, first.member_id), first
    assert first.generation_id == -1 and first.leader == "" and list(first.members) == []
    return first.member_id


def join_new(client: RawClient, version: int, group: str, **kw):
    """A new member's complete join (through MEMBER_ID_REQUIRED on v4+) when it completes at once."""
    member_id = new_member_id(client, version, group, **kw)
    return join(client, version, group, member_id=member_id, **kw)


def send_join_new(client: RawClient, version: int, group: str, **kw) -> str:
    """Starts a new member's join that will wait for a rebalance; returns its member id on v4+."""
    member_id = new_member_id(client, version, group, **kw)
    send_join(client, version, group, member_id=member_id, **kw)
    return member_id


def sync_request(group: str, generation: int, member_id: str, assignments: dict | None = None,
                 instance_id: str | None = None, protocol_type: str | None = "consumer",
                 protocol_name: str | None = "range") -> SyncGroupRequest:
    return SyncGroupRequest(
        group_id=group, generation_id=generation, member_id=member_id,
        group_instance_id=instance_id, protocol_type=protocol_type, protocol_name=protocol_name,
        assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                     for m, a in (assignments or {}).items()])


def sync(client: RawClient, version: int, group: str, generation: int, member_id: str, **kw):
    return client.call(sync_request(group, generation, member_id, **kw), version)


def send_sync(client: RawClient, version: int, group: str, generation: int, member_id: str,
              **kw) -> None:
    client.send(sync_request(group, generation, member_id, **kw), version)


def receive_sync(client: RawClient, version: int):
    _, response = client.receive(SyncGroupResponse, version, SyncGroupRequest.api_key)
    return response


def heartbeat(client: RawClient, version: int, group: str, generation: int, member_id: str,
              instance_id: str | None = None) -> int:
    return client.call(HeartbeatRequest(group_id=group, generation_id=generation,
                                        member_id=member_id, group_instance_id=instance_id),
                       version).error_code


def commit(client: RawClient, version: int, group: str, offsets: dict, generation: int = -1,
           member_id: str = "", instance_id: str | None = None) -> dict:
    """offsets: {(topic, partition): offset or (offset, metadata)} -> {(topic, partition): error}"""
    by_topic: dict[str, list] = {}
    for (t, p), value in offsets.items():
        offset, metadata = value if isinstance(value, tuple) else (value, "")
        by_topic.setdefault(t, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=offset, committed_metadata=metadata))
    response = client.call(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance_id,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                for t, ps in by_topic.items()]), version)
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}


def fetch(client: RawClient, version: int, group: str, partitions: dict | None) -> tuple:
    """partitions: {topic: [partition]} or None for all -> (group error, {(t, p): (offset,
    metadata, error)}), through the batched form on v8+."""
    if version >= 8:
        topics = None if partitions is None else [
            OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
            for t, ps in partitions.items()]
        response = client.call(OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id=group, topics=topics)]), version)
        assert [g.group_id for g in response.groups] == [group]
        g = response.groups[0]
        return g.error_code, {(t.name, p.partition_index): (p.committed_offset, p.metadata,
                                                              p.error_code)
                              for t in g.topics for p in t.partitions}
    topics = None if partitions is None else [
        OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
        for t, ps in partitions.items()]
    response = client.call(OffsetFetchRequest(group_id=group, topics=topics), version)
    return (response.error_code if version >= 2 else E.NONE), {
        (t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
        for t in response.topics for p in t.partitions}


def describe(client: RawClient, group: str, version: int = 5):
    response = client.call(DescribeGroupsRequest(groups=[group]), version)
    assert len(response.groups) == 1
    return response.groups[0]


def state(client: RawClient, group: str) -> str:
    return describe(client, group).group_state


def leave(client: RawClient, version: int, group: str, member_id: str = "", members=None):
    """v0-2: one member_id; v3+: members = [(member_id, instance_id)]."""
    if version >= 3:
        return client.call(LeaveGroupRequest(group_id=group, members=[
            LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i)
            for m, i in members]), version)
    return client.call(LeaveGroupRequest(group_id=group, member_id=member_id), version)


def listed(client: RawClient, version: int = 4, states=(), types=()) -> dict:
    kw = {}
    if version >= 4:
        kw["states_filter"] = list(states)
    if version >= 5:
        kw["types_filter"] = list(types)
    response = client.call(ListGroupsRequest(**kw), version)
    assert response.error_code == E.NONE
    return {g.group_id: g for g in response.groups}


def stable_single(connect, group: str, version: int = 5, **kw):
    """One member joined and synced: (client, member id, generation)."""
    client = connect("solo")
    joined = join_new(client, version, group, **kw)
    assert joined.error_code == E.NONE, joined
    synced = sync(client, min(version, 5), group, joined.generation_id, joined.member_id,
                  assignments={joined.member_id: b"solo"})
    assert synced.error_code == E.NONE, synced
    return client, joined.member_id, joined.generation_id


# ---------------------------------------------------------------------------------------------
# JoinGroup validation

@pytest.mark.parametrize("version", [1, 5, 9])
def test_join_validation_order(target, connect, group, version):
    """Empty group id before session timeout; session timeout before member id and protocols;
    then, for a group that exists, protocols before the member id."""
    c = connect("validate")
    # empty group id wins over a session timeout out of range and an unknown member id
    r = join(c, version, "", session=10, member_id="nobody")
    assert (r.error_code, r.generation_id) == (E.INVALID_GROUP_ID, -1)
    # session timeout out of range (below min, above max) wins over unknown member / protocols
    for session in (5999, 1800001):
        r = join(c, version, group, session=session, member_id="nobody", protocols=[])
        assert (r.error_code, r.generation_id) == (E.INVALID_SESSION_TIMEOUT, -1)
    # the bounds themselves are accepted
    assert join(c, version, unique("bounds"), session=6000).error_code in (E.NONE, E.MEMBER_ID_REQUIRED)
    assert join(c, version, unique("bounds"), session=1800000).error_code in (E.NONE, E.MEMBER_ID_REQUIRED)
    # a new member without protocols, or with an empty protocol type
    assert join(c, version, group, protocols=[]).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert join(c, version, group, protocol_type="").error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # unknown member id for a group that does not exist
    r = join(c, version, group, member_id="nobody")
    assert (r.error_code, r.generation_id) == (E.UNKNOWN_MEMBER_ID, -1)
    # now the group exists with protocol type "consumer" and protocol "range"
    member = connect("member")
    assert join_new(member, version, group).error_code == E.NONE
    other = connect("other")
    # another protocol type, or no protocol in common, for a new member
    assert join(other, version, group, protocol_type="connect").error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert join(other, version, group, protocols=[("roundrobin", b"")]).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # unknown member id with consistent protocols
    r = join(other, version, group, member_id="nobody")
    assert (r.error_code, r.generation_id) == (E.UNKNOWN_MEMBER_ID, -1)
    # unknown member id AND inconsistent protocols: Kafka checks the protocols first
    r = join(other, version, group, member_id="nobody", protocols=[("roundrobin", b"")])
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL


@pytest.mark.parametrize("version", [4, 5, 7, 9])
def test_member_id_required_then_join(target, connect, group, topic, version):
    c = connect("mid-client")
    member_id = new_member_id(c, version, group, topic=topic)  # asserts client_id-uuid shape
    r = join(c, version, group, member_id=member_id, topic=topic)
    assert r.error_code == E.NONE
    assert r.member_id == member_id
    assert (r.generation_id, r.leader, r.protocol_name) == (1, member_id, "range")
    assert [(m.member_id, m.group_instance_id, m.metadata) for m in r.members] == \
        [(member_id, None, subscription(topic))]
    if version >= 7:
        assert r.protocol_type == "consumer"
    assert state(c, group) == "CompletingRebalance"


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_join_before_v4_gets_member_id_at_once(target, connect, group, version):
    c = connect("old-client")
    r = join(c, version, group)
    assert r.error_code == E.NONE
    assert re.fullmatch("old-client-" + UUID_RE, r.member_id), r.member_id
    assert (r.generation_id, r.leader, r.protocol_name) == (1, r.member_id, "range")
    assert len(r.members) == 1


# ---------------------------------------------------------------------------------------------
# Happy path of one member at several versions

HAPPY_VERSIONS = [  # (JoinGroup, SyncGroup, Heartbeat, OffsetCommit, OffsetFetch)
    (0, 0, 0, 2, 1),
    (1, 1, 1, 3, 2),
    (3, 2, 2, 4, 3),
    (4, 3, 3, 5, 4),
    (5, 3, 3, 6, 5),
    (6, 4, 4, 7, 6),
    (7, 5, 4, 8, 7),
    (8, 5, 4, 9, 8),
    (9, 5, 4, 9, 9),
]


@pytest.mark.parametrize("jv,sv,hv,cv,fv", HAPPY_VERSIONS)
def test_single_member_happy_path(target, connect, admin, group, topic, jv, sv, hv, cv, fv):
    c = connect("happy")
    joined = join_new(c, jv, group, topic=topic)
    assert joined.error_code == E.NONE
    member, generation = joined.member_id, joined.generation_id
    assert (generation, joined.leader, joined.protocol_name) == (1, member, "range")
    assert len(joined.members) == 1

    mine = assignment(topic, 0, 1, 2)
    synced = sync(c, sv, group, generation, member, assignments={member: mine})
    assert (synced.error_code, synced.assignment) == (E.NONE, mine)
    if sv >= 5:
        assert (synced.protocol_type, synced.protocol_name) == ("consumer", "range")
    assert heartbeat(c, hv, group, generation, member) == E.NONE

    d = describe(admin, group)
    assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == \
        (E.NONE, "Stable", "consumer", "range")
    assert [(m.member_id, m.client_id, m.member_metadata, m.member_assignment)
            for m in d.members] == [(member, "happy", subscription(topic), mine)]

    errors = commit(c, cv, group, {(topic, 0): (42, "meta-0"), (topic, 1): 7}, generation, member)
    assert errors == {(topic, 0): E.NONE, (topic, 1): E.NONE}
    error, offsets = fetch(c, fv, group, {topic: [0, 1, 2]})
    assert error == E.NONE
    assert offsets == {(topic, 0): (42, "meta-0", E.NONE), (topic, 1): (7, "", E.NONE),
                       (topic, 2): (-1, "", E.NONE)}
    if fv >= 2:  # all committed offsets of the group
        error, offsets = fetch(c, fv, group, None)
        assert (error, offsets) == (E.NONE, {(topic, 0): (42, "meta-0", E.NONE),
                                             (topic, 1): (7, "", E.NONE)})
    assert heartbeat(c, hv, group, generation, member) == E.NONE


# ---------------------------------------------------------------------------------------------
# Two members: rebalance, leader and followers, SyncGroup ordering

@pytest.mark.parametrize("jv,sv,hv", [(1, 1, 1), (5, 3, 3), (9, 5, 4)])
def test_second_member_triggers_rebalance(target, connect, admin, group, topic, jv, sv, hv):
    a = connect("member-a")
    first = join_new(a, jv, group, topic=topic)
    a_id = first.member_id
    assert (first.error_code, first.generation_id, first.leader) == (E.NONE, 1, a_id)
    assert sync(a, sv, group, 1, a_id, assignments={a_id: assignment(topic, 0, 1, 2)}).error_code == E.NONE
    assert state(admin, group) == "Stable"

    b = connect("member-b")
    b_id = send_join_new(b, jv, group, topic=topic)  # waits for A to rejoin
    assert wait_for_state(admin, group, "PreparingRebalance")
    assert heartbeat(a, hv, group, 1, a_id) == E.REBALANCE_IN_PROGRESS
    d = describe(admin, group)
    assert (d.group_state, d.protocol_type, d.protocol_data, len(d.members)) == \
        ("PreparingRebalance", "consumer", "", 2)
    assert [m.member_metadata for m in d.members] == [b"", b""]  # no metadata outside Stable

    send_join(a, jv, group, member_id=a_id, topic=topic)
    ra, rb = receive_join(a, jv), receive_join(b, jv)
    assert (ra.error_code, rb.error_code) == (E.NONE, E.NONE)
    if jv >= 4:
        assert rb.member_id == b_id
    b_id = rb.member_id
    assert ra.member_id == a_id
    assert (ra.generation_id, rb.generation_id) == (2, 2)
    assert (ra.leader, rb.leader) == (a_id, a_id)  # the leader rejoined, so it stays leader
    assert (ra.protocol_name, rb.protocol_name) == ("range", "range")
    assert sorted(m.member_id for m in ra.members) == sorted([a_id, b_id])
    assert all(m.metadata == subscription(topic) for m in ra.members)
    assert list(rb.members) == []  # followers get no member list
    d = describe(admin, group)
    # outside Stable, Kafka describes no protocol and members without metadata
    assert (d.group_state, d.protocol_type, d.protocol_data) == ("CompletingRebalance", "consumer", "")
    assert sorted((m.member_id, m.member_metadata) for m in d.members) == \
        sorted([(a_id, b""), (b_id, b"")])

    # the follower's SyncGroup waits for the leader's, then both get their own assignment
    send_sync(b, sv, group, 2, b_id)
    time.sleep(0.2)
    sa = sync(a, sv, group, 2, a_id, assignments={a_id: assignment(topic, 0, 1),
                                                  b_id: assignment(topic, 2)})
    sb = receive_sync(b, sv)
    assert (sa.error_code, sa.assignment) == (E.NONE, assignment(topic, 0, 1))
    assert (sb.error_code, sb.assignment) == (E.NONE, assignment(topic, 2))
    d = describe(admin, group)
    assert d.group_state == "Stable"
    assert {m.member_id: m.member_assignment for m in d.members} == \
        {a_id: assignment(topic, 0, 1), b_id: assignment(topic, 2)}
    assert heartbeat(a, hv, group, 2, a_id) == E.NONE
    assert heartbeat(b, hv, group, 2, b_id) == E.NONE
    assert heartbeat(b, hv, group, 1, b_id) == E.ILLEGAL_GENERATION


@pytest.mark.parametrize("dv", [0, 5])
def test_describe_during_rebalance_keeps_last_assignment(target, connect, admin, group, topic, dv):
    """Outside Stable Kafka describes members without metadata, but each with the assignment of
    the last generation it synced (A: all partitions, B: nothing yet), in PreparingRebalance and
    in CompletingRebalance alike."""
    a = connect("member-a")
    a_id = join_new(a, 5, group, topic=topic).member_id
    assert sync(a, 5, group, 1, a_id, assignments={a_id: assignment(topic, 0, 1, 2)}).error_code == E.NONE
    b = connect("member-b")
    b_id = send_join_new(b, 5, group, topic=topic)
    wait_for_state(admin, group, "PreparingRebalance")
    expected = sorted([(a_id, b"", assignment(topic, 0, 1, 2)), (b_id, b"", b"")])
    d = describe(admin, group, dv)
    assert (d.group_state, d.protocol_data) == ("PreparingRebalance", "")
    assert sorted((m.member_id, m.member_metadata, m.member_assignment) for m in d.members) == expected
    send_join(a, 5, group, member_id=a_id, topic=topic)
    assert (receive_join(a, 5).generation_id, receive_join(b, 5).generation_id) == (2, 2)
    d = describe(admin, group, dv)
    assert (d.group_state, d.protocol_data) == ("CompletingRebalance", "")
    assert sorted((m.member_id, m.member_metadata, m.member_assignment) for m in d.members) == expected


def wait_for_state(client: RawClient, group: str, wanted: str, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if state(client, group) == wanted:
            return True
        time.sleep(0.02)
    raise AssertionError(f"group {group} never reached {wanted}: {describe(client, group)}")


def two_members_completing(connect, admin, group, topic, version=5):
    """A (leader) and B joined in generation 2, CompletingRebalance, nobody synced yet."""
    a = connect("member-a")
    first = join_new(a, version, group, topic=topic)
    a_id = first.member_id
    assert sync(a, 5, group, 1, a_id, assignments={a_id: b"a1"}).error_code == E.NONE
    b = connect("member-b")
    send_join_new(b, version, group, topic=topic)
    wait_for_state(admin, group, "PreparingRebalance")
    send_join(a, version, group, member_id=a_id, topic=topic)
    ra, rb = receive_join(a, version), receive_join(b, version)
    assert (ra.error_code, rb.error_code, ra.generation_id, ra.leader) == (E.NONE, E.NONE, 2, a_id)
    return a, a_id, b, rb.member_id


@pytest.mark.parametrize("sv", [0, 3, 5])
def test_follower_sync_after_leader_gets_its_assignment(target, connect, admin, group, topic, sv):
    a, a_id, b, b_id = two_members_completing(connect, admin, group, topic)
    sa = sync(a, sv, group, 2, a_id, assignments={a_id: b"for-a", b_id: b"for-b"})
    assert (sa.error_code, sa.assignment) == (E.NONE, b"for-a")
    assert state(admin, group) == "Stable"
    sb = sync(b, sv, group, 2, b_id)
    assert (sb.error_code, sb.assignment) == (E.NONE, b"for-b")
    # the leader syncing again in Stable gets its assignment again
    again = sync(a, sv, group, 2, a_id, assignments={a_id: b"other"})
    assert (again.error_code, again.assignment) == (E.NONE, b"for-a")


def test_leader_assigns_nothing_to_a_member(target, connect, admin, group, topic):
    """A member the leader leaves out of the assignments gets empty bytes."""
    a, a_id, b, b_id = two_members_completing(connect, admin, group, topic)
    send_sync(b, 5, group, 2, b_id)
    time.sleep(0.2)
    assert sync(a, 5, group, 2, a_id, assignments={a_id: b"all"}).assignment == b"all"
    sb = receive_sync(b, 5)
    assert (sb.error_code, sb.assignment) == (E.NONE, b"")


@pytest.mark.parametrize("sv,hv", [(0, 0), (2, 2), (5, 4)])
def test_sync_and_heartbeat_errors(target, connect, admin, group, topic, sv, hv):
    c, member, generation = stable_single(connect, group, topic=topic)
    other = connect("other")
    # unknown member (also with a wrong generation: the member is checked first)
    assert sync(other, sv, group, generation, "nobody").error_code == E.UNKNOWN_MEMBER_ID
    assert sync(other, sv, group, generation + 5, "nobody").error_code == E.UNKNOWN_MEMBER_ID
    assert heartbeat(other, hv, group, generation, "nobody") == E.UNKNOWN_MEMBER_ID
    assert heartbeat(other, hv, group, generation + 5, "nobody") == E.UNKNOWN_MEMBER_ID
    # wrong generation of a known member
    for wrong in (generation + 1, generation - 1, -1):
        assert sync(c, sv, group, wrong, member).error_code == E.ILLEGAL_GENERATION
        assert heartbeat(c, hv, group, wrong, member) == E.ILLEGAL_GENERATION
    # a group that does not exist
    missing = unique("missing")
    assert sync(other, sv, missing, 1, "nobody").error_code == E.UNKNOWN_MEMBER_ID
    assert heartbeat(other, hv, missing, 1, "nobody") == E.UNKNOWN_MEMBER_ID
    assert sync(other, sv, "", 1, "nobody").error_code == E.INVALID_GROUP_ID
    assert heartbeat(other, hv, "", 1, "nobody") == E.INVALID_GROUP_ID
    assert state(admin, group) == "Stable"
    assert heartbeat(c, hv, group, generation, member) == E.NONE


def test_sync_v5_protocol_checks(target, connect, group, topic):
    c = connect("v5")
    joined = join_new(c, 9, group, topic=topic)
    m, g = joined.member_id, joined.generation_id
    r = sync(c, 5, group, g, m, protocol_type="connect")
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    r = sync(c, 5, group, g, m, protocol_name="roundrobin")
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # from v5 both fields are mandatory: Kafka answers a null one with INCONSISTENT_GROUP_PROTOCOL
    for ptype, pname in ((None, None), (None, "range"), ("consumer", None)):
        r = sync(c, 5, group, g, m, protocol_type=ptype, protocol_name=pname, assignments={m: b"x"})
        assert (r.error_code, r.assignment) == (E.INCONSISTENT_GROUP_PROTOCOL, b"")
    assert state(c, group) == "CompletingRebalance"
    r = sync(c, 5, group, g, m, assignments={m: b"x"})
    assert (r.error_code, r.protocol_type, r.protocol_name, r.assignment) == \
        (E.NONE, "consumer", "range", b"x")
    # before v5 the fields do not exist
    assert sync(c, 4, group, g, m, protocol_type=None, protocol_name=None).assignment == b"x"


def test_sync_while_preparing_rebalance(target, connect, admin, group, topic):
    a = connect("member-a")
    first = join_new(a, 5, group, topic=topic)
    a_id = first.member_id
    assert sync(a, 5, group, 1, a_id, assignments={a_id: b"a"}).error_code == E.NONE
    b = connect("member-b")
    send_join_new(b, 5, group, topic=topic)
    wait_for_state(admin, group, "PreparingRebalance")
    assert sync(a, 5, group, 1, a_id).error_code == E.REBALANCE_IN_PROGRESS
    # OffsetCommit from the current generation is accepted while PreparingRebalance
    assert commit(a, 8, group, {(topic, 0): 3}, 1, a_id) == {(topic, 0): E.NONE}
    send_join(a, 5, group, member_id=a_id, topic=topic)
    assert receive_join(a, 5).generation_id == 2
    assert receive_join(b, 5).generation_id == 2


# ---------------------------------------------------------------------------------------------
# Protocol election

def test_protocol_vote_majority(target, connect, admin, group, topic):
    """Candidates are the protocols all members support; each votes for its first candidate."""
    sub = subscription(topic)
    prefs = {
        "a": [("sticky", sub), ("range", sub), ("roundrobin", sub)],  # sticky is no candidate
        "b": [("roundrobin", sub), ("range", sub)],
        "c": [("roundrobin", sub), ("range", sub), ("sticky", sub)],
    }
    chosen = _form_group_of_three(connect, admin, group, prefs)
    assert chosen == "roundrobin"  # a: range, b: roundrobin, c: roundrobin


def test_protocol_vote_candidates_only(target, connect, admin, group, topic):
    sub = subscription(topic)
    prefs = {
        "a": [("sticky", sub), ("range", sub), ("roundrobin", sub)],
        "b": [("sticky", sub), ("roundrobin", sub), ("range", sub)],
        "c": [("range", sub), ("roundrobin", sub)],
    }
    # sticky is the favourite of two but not supported by c: a votes range, b roundrobin, c range
    assert _form_group_of_three(connect, admin, group, prefs) == "range"


def test_protocol_vote_tie(target, connect, admin, group, topic):
    """A tie: Kafka picks among the tied protocols by hash-map order (arbitrary), so for Kafka
    only membership of the tie is checked; kbroker must follow its rule (GroupMetadata.select_protocol), the first tied
    candidate in the leader's preference order."""
    sub = subscription(topic)
    a = connect("a")
    first = join_new(a, 5, group, protocols=[("roundrobin", sub), ("range", sub)])
    a_id = first.member_id
    assert first.protocol_name == "roundrobin"
    assert sync(a, 5, group, 1, a_id, protocol_name="roundrobin").error_code == E.NONE
    b = connect("b")
    send_join_new(b, 5, group, protocols=[("range", sub), ("roundrobin", sub)])
    wait_for_state(admin, group, "PreparingRebalance")
    send_join(a, 5, group, member_id=a_id, protocols=[("roundrobin", sub), ("range", sub)])
    ra, rb = receive_join(a, 5), receive_join(b, 5)
    assert ra.leader == a_id and ra.protocol_name == rb.protocol_name
    if target.is_kafka:
        assert ra.protocol_name in ("range", "roundrobin")
    else:
        assert ra.protocol_name == "roundrobin"  # the leader's first choice


def _form_group_of_three(connect, admin, group, prefs: dict) -> str:
    a = connect("a")
    first = join_new(a, 5, group, protocols=prefs["a"])
    a_id = first.member_id
    assert first.protocol_name == prefs["a"][0][0]  # alone, a's favourite
    assert sync(a, 5, group, 1, a_id, protocol_name=first.protocol_name).error_code == E.NONE
    b, c = connect("b"), connect("c")
    send_join_new(b, 5, group, protocols=prefs["b"])
    send_join_new(c, 5, group, protocols=prefs["c"])
    wait_for_state(admin, group, "PreparingRebalance")
    send_join(a, 5, group, member_id=a_id, protocols=prefs["a"])
    responses = [receive_join(x, 5) for x in (a, b, c)]
    assert [r.error_code for r in responses] == [E.NONE] * 3
    assert {r.generation_id for r in responses} == {2}
    assert {r.leader for r in responses} == {a_id}
    assert len(responses[0].members) == 3
    names = {r.protocol_name for r in responses}
    assert len(names) == 1
    chosen = names.pop()
    assert sync(a, 5, group, 2, a_id, protocol_name=chosen).error_code == E.NONE
    assert describe(admin, group).protocol_data == chosen
    return chosen


# ---------------------------------------------------------------------------------------------
# Expiry with short rebalance timeouts (about a second of waiting each)

def test_leader_not_rejoining_is_removed_and_new_leader_elected(target, connect, admin, group, topic):
    """A (leader) does not rejoin within the rebalance timeout: it is removed and B, the only
    member that rejoined, becomes leader of generation 2. (With several rejoined members Kafka's
    choice would follow hash-map order; here it is determined.)"""
    a = connect("member-a")
    first = join_new(a, 5, group, topic=topic, rebalance=1000)
    a_id = first.member_id
    assert sync(a, 5, group, 1, a_id, assignments={a_id: b"a"}).error_code == E.NONE
    b = connect("member-b")
    start = time.monotonic()
    b_id = send_join_new(b, 5, group, topic=topic, rebalance=1000)
    rb = receive_join(b, 5)
    waited = time.monotonic() - start
    assert rb.error_code == E.NONE
    assert (rb.generation_id, rb.leader, rb.member_id) == (2, b_id, b_id)
    assert [m.member_id for m in rb.members] == [b_id]
    assert 0.5 < waited < 8, waited
    assert heartbeat(a, 3, group, 1, a_id) == E.UNKNOWN_MEMBER_ID
    d = describe(admin, group)
    assert (d.group_state, [m.member_id for m in d.members]) == ("CompletingRebalance", [b_id])


def test_member_not_syncing_is_removed(target, connect, admin, group, topic):
    """B never sends SyncGroup: after the rebalance timeout it is removed and the group
    rebalances; A's heartbeat says REBALANCE_IN_PROGRESS and A alone forms generation 3."""
    a = connect("member-a")
    first = join_new(a, 5, group, topic=topic, rebalance=1000)
    a_id = first.member_id
    assert sync(a, 5, group, 1, a_id, assignments={a_id: b"a"}).error_code == E.NONE
    b = connect("member-b")
    send_join_new(b, 5, group, topic=topic, rebalance=1000)
    wait_for_state(admin, group, "PreparingRebalance")
    send_join(a, 5, group, member_id=a_id, topic=topic, rebalance=1000)
    ra, rb = receive_join(a, 5), receive_join(b, 5)
    b_id = rb.member_id
    assert (ra.generation_id, ra.leader) == (2, a_id)
    sa = sync(a, 5, group, 2, a_id, assignments={a_id: b"a2", b_id: b"b2"})
    assert (sa.error_code, sa.assignment) == (E.NONE, b"a2")
    assert state(admin, group) == "Stable"
    deadline = time.monotonic() + 8
    while heartbeat(a, 4, group, 2, a_id) == E.NONE:
        assert time.monotonic() < deadline, "B was never removed"
        time.sleep(0.2)
    assert heartbeat(a, 4, group, 2, a_id) == E.REBALANCE_IN_PROGRESS
    d = describe(admin, group)
    assert (d.group_state, [m.member_id for m in d.members]) == ("PreparingRebalance", [a_id])
    r = join(a, 5, group, member_id=a_id, topic=topic, rebalance=1000)
    assert (r.error_code, r.generation_id, r.leader, len(r.members)) == (E.NONE, 3, a_id, 1)


# ---------------------------------------------------------------------------------------------
# Rejoining members

def _stable_pair(connect, admin, group, topic):
    a, a_id, b, b_id = two_members_completing(connect, admin, group, topic)
    assert sync(a, 5, group, 2, a_id, assignments={a_id: b"for-a", b_id: b"for-b"}).error_code == E.NONE
    assert sync(b, 5, group, 2, b_id).assignment == b"for-b"
    return a, a_id, b, b_id


def test_follower_rejoin_with_same_metadata_in_stable(target, connect, admin, group, topic):
    """A follower rejoining unchanged while Stable gets the current generation back at once."""
    a, a_id, b, b_id = _stable_pair(connect, admin, group, topic)
    r = join(b, 5, group, member_id=b_id, topic=topic)
    assert (r.error_code, r.generation_id, r.leader, r.member_id, r.protocol_name) == \
        (E.NONE, 2, a_id, b_id, "range")
    assert list(r.members) == []
    assert state(admin, group) == "Stable"
    assert heartbeat(a, 4, group, 2, a_id) == E.NONE


def test_leader_rejoin_in_stable_triggers_rebalance(target, connect, admin, group, topic):
    a, a_id, b, b_id = _stable_pair(connect, admin, group, topic)
    send_join(a, 5, group, member_id=a_id, topic=topic)
    wait_for_state(admin, group, "PreparingRebalance")
    assert heartbeat(b, 4, group, 2, b_id) == E.REBALANCE_IN_PROGRESS
    rb = join(b, 5, group, member_id=b_id, topic=topic)
    ra = receive_join(a, 5)
    assert (ra.generation_id, rb.generation_id, ra.leader, rb.leader) == (3, 3, a_id, a_id)
    assert (len(ra.members), len(rb.members)) == (2, 0)


def test_follower_rejoin_with_new_metadata_triggers_rebalance(target, connect, admin, group, topic):
    a, a_id, b, b_id = _stable_pair(connect, admin, group, topic)
    send_join(b, 5, group, member_id=b_id, topic=topic + "-other")
    wait_for_state(admin, group, "PreparingRebalance")
    assert heartbeat(a, 4, group, 2, a_id) == E.REBALANCE_IN_PROGRESS
    ra = join(a, 5, group, member_id=a_id, topic=topic)
    rb = receive_join(b, 5)
    assert (ra.generation_id, rb.generation_id, ra.leader) == (3, 3, a_id)
    assert {m.member_id: m.metadata for m in ra.members} == \
        {a_id: subscription(topic), b_id: subscription(topic + "-other")}


def test_heartbeat_and_rejoin_while_completing_rebalance(target, connect, admin, group, topic):
    """Between JoinGroup and SyncGroup: heartbeats are answered, and a member rejoining unchanged
    gets the same generation back (the leader with the member list)."""
    a, a_id, b, b_id = two_members_completing(connect, admin, group, topic)
    assert heartbeat(a, 4, group, 2, a_id) == E.NONE
    assert heartbeat(b, 4, group, 2, b_id) == E.NONE
    assert heartbeat(b, 4, group, 1, b_id) == E.ILLEGAL_GENERATION
    rb = join(b, 5, group, member_id=b_id, topic=topic)
    assert (rb.error_code, rb.generation_id, rb.leader, len(rb.members)) == (E.NONE, 2, a_id, 0)
    ra = join(a, 5, group, member_id=a_id, topic=topic)
    assert (ra.error_code, ra.generation_id, ra.leader, len(ra.members)) == (E.NONE, 2, a_id, 2)
    assert state(admin, group) == "CompletingRebalance"


# ---------------------------------------------------------------------------------------------
# LeaveGroup

@pytest.mark.parametrize("version", [0, 1, 2])
def test_leave_single_member(target, connect, admin, group, topic, version):
    c, member, generation = stable_single(connect, group, topic=topic)
    assert leave(c, version, group, "nobody").error_code == E.UNKNOWN_MEMBER_ID
    assert state(admin, group) == "Stable"
    assert leave(c, version, unique("missing"), "nobody").error_code == E.UNKNOWN_MEMBER_ID
    assert leave(c, version, "", member).error_code == E.INVALID_GROUP_ID
    assert leave(c, version, group, member).error_code == E.NONE
    d = describe(admin, group)
    assert (d.group_state, d.protocol_type, d.protocol_data, list(d.members)) == \
        ("Empty", "consumer", "", [])
    assert heartbeat(c, 2, group, generation, member) == E.UNKNOWN_MEMBER_ID
    assert leave(c, version, group, member).error_code == E.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize("version", [3, 4, 5])
def test_leave_batch(target, connect, admin, group, topic, version):
    a, a_id, b, b_id = _stable_pair(connect, admin, group, topic)
    r = leave(admin, version, group, members=[(b_id, None), ("nobody", None)])
    assert r.error_code == E.NONE
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == \
        [(b_id, None, E.NONE), ("nobody", None, E.UNKNOWN_MEMBER_ID)]
    d = describe(admin, group)
    assert (d.group_state, [m.member_id for m in d.members]) == ("PreparingRebalance", [a_id])
    assert heartbeat(a, 4, group, 2, a_id) == E.REBALANCE_IN_PROGRESS
    assert heartbeat(b, 4, group, 2, b_id) == E.UNKNOWN_MEMBER_ID
    r = join(a, 5, group, member_id=a_id, topic=topic)
    assert (r.error_code, r.generation_id, r.leader, len(r.members)) == (E.NONE, 3, a_id, 1)


@pytest.mark.parametrize("version", [3, 5])
def test_leave_batch_unknown_group(target, connect, version):
    """Kafka answers a batch for a group it does not know at the top level with NONE and each
    member with UNKNOWN_MEMBER_ID (v0-2 answer the top level UNKNOWN_MEMBER_ID)."""
    c = connect("leaver")
    r = leave(c, version, unique("missing"), members=[("x", None), ("y", "inst-y")])
    assert r.error_code == E.NONE
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == \
        [("x", None, E.UNKNOWN_MEMBER_ID), ("y", "inst-y", E.UNKNOWN_MEMBER_ID)]
    assert leave(c, version, "", members=[("x", None)]).error_code == E.INVALID_GROUP_ID


# ---------------------------------------------------------------------------------------------
# Static membership (JoinGroup v5+)

@pytest.mark.parametrize("version", [5, 7, 9])
def test_static_member_restart(target, connect, admin, group, topic, version):
    first_conn = connect("static-a")
    r = join(first_conn, version, group, instance_id="inst-a", topic=topic)
    assert r.error_code == E.NONE  # a static member never gets MEMBER_ID_REQUIRED
    old = r.member_id
    assert re.fullmatch("inst-a-" + UUID_RE, old), old
    assert (r.generation_id, r.leader) == (1, old)
    assert [(m.member_id, m.group_instance_id) for m in r.members] == [(old, "inst-a")]
    assert sync(first_conn, 5, group, 1, old, instance_id="inst-a",
                assignments={old: b"A"}).assignment == b"A"
    d = describe(admin, group, 4)
    assert [(m.member_id, m.group_instance_id) for m in d.members] == [(old, "inst-a")]

    # the same instance restarts with an empty member id: replaced without a rebalance
    restarted = connect("static-a")
    r = join(restarted, version, group, instance_id="inst-a", topic=topic)
    new = r.member_id
    assert r.error_code == E.NONE and new != old
    assert re.fullmatch("inst-a-" + UUID_RE, new), new
    assert (r.generation_id, r.protocol_name) == (1, "range")
    if version >= 9:
        # the rejoining leader is told it leads, gets the members and may skip the assignment
        assert (r.leader, r.skip_assignment) == (new, True)
        assert [(m.member_id, m.group_instance_id) for m in r.members] == [(new, "inst-a")]
    else:
        # before v9 it is answered as a follower: the old leader id and no members
        assert (r.leader, r.skip_assignment, list(r.members)) == (old, False, [])
    d = describe(admin, group, 4)
    assert d.group_state == "Stable"
    assert [(m.member_id, m.group_instance_id, m.member_assignment) for m in d.members] == \
        [(new, "inst-a", b"A")]

    # the new id works; the old one is fenced wherever it shows up with the instance id
    assert heartbeat(restarted, 3, group, 1, new, instance_id="inst-a") == E.NONE
    assert heartbeat(restarted, 3, group, 1, new) == E.NONE
    assert sync(restarted, 5, group, 1, new, instance_id="inst-a").assignment == b"A"
    assert heartbeat(first_conn, 3, group, 1, old, instance_id="inst-a") == E.FENCED_INSTANCE_ID
    assert heartbeat(first_conn, 3, group, 1, old) == E.UNKNOWN_MEMBER_ID
    assert sync(first_conn, 5, group, 1, old, instance_id="inst-a").error_code == E.FENCED_INSTANCE_ID
    r = join(first_conn, version, group, member_id=old, instance_id="inst-a", topic=topic)
    assert (r.error_code, r.generation_id, r.member_id) == (E.FENCED_INSTANCE_ID, -1, old)
    assert commit(first_conn, 8, group, {(topic, 0): 1}, 1, old, instance_id="inst-a") == \
        {(topic, 0): E.FENCED_INSTANCE_ID}
    assert commit(restarted, 8, group, {(topic, 0): 1}, 1, new, instance_id="inst-a") == \
        {(topic, 0): E.NONE}
    assert state(admin, group) == "Stable"


def test_static_follower_restart(target, connect, admin, group, topic):
    a = connect("static-a")
    ra = join(a, 5, group, instance_id="inst-a", topic=topic)
    a_id = ra.member_id
    assert sync(a, 5, group, 1, a_id, instance_id="inst-a", assignments={a_id: b"A"}).error_code == E.NONE
    b = connect("static-b")
    send_join(b, 5, group, instance_id="inst-b", topic=topic)
    wait_for_state(admin, group, "PreparingRebalance")
    send_join(a, 5, group, member_id=a_id, instance_id="inst-a", topic=topic)
    ra, rb = receive_join(a, 5), receive_join(b, 5)
    b_id = rb.member_id
    assert (ra.generation_id, rb.generation_id, rb.leader) == (2, 2, a_id)
    assert sorted((m.member_id, m.group_instance_id) for m in ra.members) == \
        sorted([(a_id, "inst-a"), (b_id, "inst-b")])
    assert sync(a, 5, group, 2, a_id, instance_id="inst-a",
                assignments={a_id: b"A2", b_id: b"B2"}).assignment == b"A2"
    b2 = connect("static-b")
    r = join(b2, 5, group, instance_id="inst-b", topic=topic)
    assert r.error_code == E.NONE and r.member_id != b_id
    assert (r.generation_id, r.leader, list(r.members)) == (2, a_id, [])
    assert sync(b2, 5, group, 2, r.member_id, instance_id="inst-b").assignment == b"B2"
    assert state(admin, group) == "Stable"
    assert heartbeat(b, 4, group, 2, b_id, instance_id="inst-b") == E.FENCED_INSTANCE_ID


@pytest.mark.parametrize("version", [4, 5])
def test_leave_static_members(target, connect, admin, group, topic, version):
    c = connect("static-a")
    r = join(c, 5, group, instance_id="inst-a", topic=topic)
    a_id = r.member_id
    assert sync(c, 5, group, 1, a_id, instance_id="inst-a", assignments={a_id: b"A"}).error_code == E.NONE
    r = leave(admin, version, group, members=[("wrong-id", "inst-a"), ("", "inst-zz"),
                                              (a_id, "inst-zz")])
    assert r.error_code == E.NONE
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == [
        ("wrong-id", "inst-a", E.FENCED_INSTANCE_ID), ("", "inst-zz", E.UNKNOWN_MEMBER_ID),
        (a_id, "inst-zz", E.UNKNOWN_MEMBER_ID)]
    assert state(admin, group) == "Stable"
    r = leave(admin, version, group, members=[("", "inst-a")])  # by instance id alone
    assert [(m.member_id, m.group_instance_id, m.error_code) for m in r.members] == \
        [("", "inst-a", E.NONE)]
    assert (r.error_code, state(admin, group)) == (E.NONE, "Empty")


# ---------------------------------------------------------------------------------------------
# OffsetCommit

@pytest.mark.parametrize("cv,fv", [(2, 1), (5, 5), (8, 8), (9, 9)])
def test_simple_commit_creates_empty_group(target, connect, admin, group, topic, cv, fv):
    """Generation -1 to a group that does not exist: a simple (standalone) commit, accepted; the
    group then exists, Empty, with no protocol type."""
    assert commit(admin, cv, group, {(topic, 0): 5, (topic, 1): (6, "m")}) == \
        {(topic, 0): E.NONE, (topic, 1): E.NONE}
    d = describe(admin, group)
    assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data, list(d.members)) == \
        (E.NONE, "Empty", "", "", [])
    g = listed(admin, 5)[group]
    assert (g.protocol_type, g.group_state, g.group_type) == ("", "Empty", "classic")
    assert fetch(admin, fv, group, {topic: [0, 1, 2]}) == (E.NONE, {
        (topic, 0): (5, "", E.NONE), (topic, 1): (6, "m", E.NONE), (topic, 2): (-1, "", E.NONE)})
    # still Empty: generation -1 is accepted with any member id; a generation is not
    assert commit(admin, cv, group, {(topic, 0): 7}, -1, "someone") == {(topic, 0): E.NONE}
    assert commit(admin, cv, group, {(topic, 0): 8}, 1, "") == {(topic, 0): E.UNKNOWN_MEMBER_ID}
    assert commit(admin, cv, group, {(topic, 0): 8}, 1, "m") == {(topic, 0): E.UNKNOWN_MEMBER_ID}
    assert fetch(admin, fv, group, {topic: [0]})[1] == {(topic, 0): (7, "", E.NONE)}


def test_simple_commit_to_group_emptied_by_leave(target, connect, admin, group, topic):
    c, member, generation = stable_single(connect, group, topic=topic)
    assert commit(admin, 8, group, {(topic, 0): 1}) == {(topic, 0): E.UNKNOWN_MEMBER_ID}
    assert leave(c, 3, group, members=[(member, None)]).members[0].error_code == E.NONE
    assert commit(admin, 8, group, {(topic, 0): 1}) == {(topic, 0): E.NONE}
    assert commit(c, 8, group, {(topic, 0): 2}, generation, member) == {(topic, 0): E.UNKNOWN_MEMBER_ID}
    d = describe(admin, group)
    assert (d.group_state, d.protocol_type) == ("Empty", "consumer")


@pytest.mark.parametrize("cv", [2, 6, 9])
def test_commit_to_stable_group_errors(target, connect, admin, group, topic, cv):
    c, member, generation = stable_single(connect, group, topic=topic)
    tp = (topic, 0)
    assert commit(c, cv, group, {tp: 1}, generation, member) == {tp: E.NONE}
    assert commit(admin, cv, group, {tp: 2}) == {tp: E.UNKNOWN_MEMBER_ID}  # simple commit
    for stale in (generation + 1, generation - 1, -1):
        assert commit(c, cv, group, {tp: 2}, stale, member) == {tp: E.ILLEGAL_GENERATION}
    assert commit(c, cv, group, {tp: 2}, generation, "nobody") == {tp: E.UNKNOWN_MEMBER_ID}
    assert commit(c, cv, group, {tp: 2}, generation + 1, "nobody") == {tp: E.UNKNOWN_MEMBER_ID}
    assert commit(c, cv, group, {tp: 2}, generation, "") == {tp: E.UNKNOWN_MEMBER_ID}
    assert fetch(c, 6, group, {topic: [0]})[1] == {tp: (1, "", E.NONE)}
    assert state(admin, group) == "Stable"


def test_commit_during_completing_rebalance(target, connect, admin, group, topic):
    c = connect("completing")
    j = join_new(c, 5, group, topic=topic)
    assert state(admin, group) == "CompletingRebalance"
    tp = (topic, 0)
    assert commit(c, 8, group, {tp: 1}, j.generation_id, j.member_id) == {tp: E.REBALANCE_IN_PROGRESS}
    assert commit(c, 8, group, {tp: 1}) == {tp: E.UNKNOWN_MEMBER_ID}
    assert commit(c, 8, group, {tp: 1}, j.generation_id + 1, j.member_id) == {tp: E.ILLEGAL_GENERATION}
    assert commit(c, 8, group, {tp: 1}, j.generation_id, "nobody") == {tp: E.UNKNOWN_MEMBER_ID}
    assert fetch(c, 8, group, None) == (E.NONE, {})
    assert sync(c, 5, group, j.generation_id, j.member_id, assignments={j.member_id: b"x"}).error_code == E.NONE
    assert commit(c, 8, group, {tp: 1}, j.generation_id, j.member_id) == {tp: E.NONE}


@pytest.mark.parametrize("cv", [2, 8])
def test_commit_metadata_too_large(target, connect, admin, group, topic, cv):
    """offset.metadata.max.bytes is 4096 on both brokers: 4096 characters pass, 4097 do not, and
    only the offending partition fails."""
    errors = commit(admin, cv, group, {(topic, 0): (9, "x" * 4097), (topic, 1): (10, "y" * 4096)})
    assert errors == {(topic, 0): E.OFFSET_METADATA_TOO_LARGE, (topic, 1): E.NONE}
    assert fetch(admin, 8, group, {topic: [0, 1]})[1] == {
        (topic, 0): (-1, "", E.NONE), (topic, 1): (10, "y" * 4096, E.NONE)}


@pytest.mark.parametrize("cv", [2, 7, 9])
def test_commit_unknown_topic_or_partition(target, connect, admin, group, topic, cv):
    """Partitions of topics that do not exist, and partitions out of range, are answered
    UNKNOWN_TOPIC_OR_PARTITION, before and regardless of the member checks; the rest of the
    request is handled normally."""
    missing = unique("no-such-topic")
    errors = commit(admin, cv, group, {(missing, 0): 5, (topic, 99): 5, (topic, -1): 5, (topic, 1): 4})
    assert errors == {(missing, 0): E.UNKNOWN_TOPIC_OR_PARTITION,
                      (topic, 99): E.UNKNOWN_TOPIC_OR_PARTITION,
                      (topic, -1): E.UNKNOWN_TOPIC_OR_PARTITION, (topic, 1): E.NONE}
    stable = unique("stable")
    c, member, generation = stable_single(connect, stable, topic=topic)
    errors = commit(c, cv, stable, {(missing, 0): 5, (topic, 0): 4}, generation, "nobody")
    assert errors == {(missing, 0): E.UNKNOWN_TOPIC_OR_PARTITION, (topic, 0): E.UNKNOWN_MEMBER_ID}
    assert fetch(admin, 8, group, None) == (E.NONE, {(topic, 1): (4, "", E.NONE)})


# ---------------------------------------------------------------------------------------------
# OffsetFetch

@pytest.mark.parametrize("fv", [1, 2, 3, 5, 7, 8, 9])
def test_offset_fetch_unknowns(target, connect, admin, group, topic, fv):
    missing = unique("no-such-topic")
    assert commit(admin, 8, group, {(topic, 0): 11}) == {(topic, 0): E.NONE}
    error, offsets = fetch(admin, fv, group, {topic: [0, 1, 99], missing: [0]})
    assert error == E.NONE
    assert offsets == {(topic, 0): (11, "", E.NONE), (topic, 1): (-1, "", E.NONE),
                       (topic, 99): (-1, "", E.NONE), (missing, 0): (-1, "", E.NONE)}
    error, offsets = fetch(admin, fv, unique("missing-group"), {topic: [0]})
    assert (error, offsets) == (E.NONE, {(topic, 0): (-1, "", E.NONE)})
    if fv >= 2:
        assert fetch(admin, fv, unique("missing-group"), None) == (E.NONE, {})


@pytest.mark.parametrize("fv", [8, 9])
def test_offset_fetch_batched_groups(target, connect, admin, topic, fv):
    g1, g2, g3 = unique("batch-a"), unique("batch-b"), unique("batch-missing")
    assert commit(admin, 8, g1, {(topic, 0): 1}) == {(topic, 0): E.NONE}
    assert commit(admin, 8, g2, {(topic, 1): (2, "two")}) == {(topic, 1): E.NONE}
    T = OffsetFetchRequest.OffsetFetchRequestTopics
    response = admin.call(OffsetFetchRequest(groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g1, topics=[T(name=topic, partition_indexes=[0, 1])]),
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g2, topics=None),
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g3, topics=None),
    ], require_stable=True), fv)
    got = {g.group_id: (g.error_code, {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
                                       for t in g.topics for p in t.partitions})
           for g in response.groups}
    assert got == {
        g1: (E.NONE, {(topic, 0): (1, "", E.NONE), (topic, 1): (-1, "", E.NONE)}),
        g2: (E.NONE, {(topic, 1): (2, "two", E.NONE)}),
        g3: (E.NONE, {}),
    }


# ---------------------------------------------------------------------------------------------
# DescribeGroups, ListGroups

def test_describe_unknown_group(target, connect, admin):
    missing = unique("missing")
    d = describe(admin, missing, 5)
    assert (d.error_code, d.group_id, d.group_state, d.protocol_type, d.protocol_data, list(d.members)) == \
        (E.NONE, missing, "Dead", "", "", [])
    d = describe(admin, missing, 6)  # v6: GROUP_ID_NOT_FOUND with a message
    assert (d.error_code, d.error_message, d.group_state) == \
        (E.GROUP_ID_NOT_FOUND, f"Group {missing} not found.", "Dead")


def test_describe_several_groups(target, connect, admin, group, topic):
    c, member, generation = stable_single(connect, group, topic=topic)
    simple, missing = unique("simple"), unique("missing")
    assert commit(admin, 8, simple, {(topic, 0): 1}) == {(topic, 0): E.NONE}
    response = admin.call(DescribeGroupsRequest(groups=[group, simple, missing]), 5)
    got = {g.group_id: (g.error_code, g.group_state, g.protocol_type, g.protocol_data, len(g.members))
           for g in response.groups}
    assert got == {group: (E.NONE, "Stable", "consumer", "range", 1),
                   simple: (E.NONE, "Empty", "", "", 0),
                   missing: (E.NONE, "Dead", "", "", 0)}
    m = [g for g in response.groups if g.group_id == group][0].members[0]
    assert (m.member_id, m.client_id, m.client_host, m.group_instance_id) == \
        (member, "solo", "/127.0.0.1", None)


def test_list_groups_states_and_types(target, connect, admin, group, topic):
    stable, empty, simple = group, unique("emptied"), unique("simple")
    stable_single(connect, stable, topic=topic)
    c, member, _ = stable_single(connect, empty, topic=topic)
    assert leave(c, 1, empty, member).error_code == E.NONE
    assert commit(admin, 8, simple, {(topic, 0): 1}) == {(topic, 0): E.NONE}
    preparing = unique("preparing")
    a, a_id, _ = stable_single(connect, preparing, topic=topic)
    send_join_new(connect("joiner"), 5, preparing, topic=topic)
    wait_for_state(admin, preparing, "PreparingRebalance")
    mine = {stable, empty, simple, preparing}

    def view(version, **kw):
        return {k: (g.protocol_type, g.group_state, g.group_type)
                for k, g in listed(admin, version, **kw).items() if k in mine}

    assert view(0) == {stable: ("consumer", "", ""), empty: ("consumer", "", ""),
                       simple: ("", "", ""), preparing: ("consumer", "", "")}
    assert view(4) == {stable: ("consumer", "Stable", ""), empty: ("consumer", "Empty", ""),
                       simple: ("", "Empty", ""), preparing: ("consumer", "PreparingRebalance", "")}
    assert view(5) == {stable: ("consumer", "Stable", "classic"),
                       empty: ("consumer", "Empty", "classic"), simple: ("", "Empty", "classic"),
                       preparing: ("consumer", "PreparingRebalance", "classic")}
    assert set(view(4, states=["Stable"])) == {stable}
    assert set(view(4, states=["stable", "empty"])) == {stable, empty, simple}  # case-insensitive
    assert set(view(4, states=["PreparingRebalance"])) == {preparing}
    assert set(view(4, states=["Dead"])) == set()
    assert set(view(5, types=["classic"])) == mine
    assert set(view(5, types=["Classic"])) == mine
    assert set(view(5, types=["consumer"])) == set()
    assert set(view(5, states=["Empty"], types=["classic"])) == {empty, simple}


# ---------------------------------------------------------------------------------------------
# DeleteGroups, OffsetDelete

@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_groups(target, connect, admin, group, topic, version):
    busy, empty, missing = group, unique("empty"), unique("missing")
    stable_single(connect, busy, topic=topic)
    assert commit(admin, 8, empty, {(topic, 0): 3}) == {(topic, 0): E.NONE}
    response = admin.call(DeleteGroupsRequest(groups_names=[busy, empty, missing]), version)
    # Kafka answers in the order of its coordinator shards, not the request's: compare by group
    assert {r.group_id: r.error_code for r in response.results} == {
        busy: E.NON_EMPTY_GROUP, empty: E.NONE, missing: E.GROUP_ID_NOT_FOUND}
    assert len(response.results) == 3
    assert describe(admin, empty).group_state == "Dead"
    assert describe(admin, busy).group_state == "Stable"
    assert fetch(admin, 8, empty, {topic: [0]})[1] == {(topic, 0): (-1, "", E.NONE)}
    again = admin.call(DeleteGroupsRequest(groups_names=[empty]), version)
    assert [(r.group_id, r.error_code) for r in again.results] == [(empty, E.GROUP_ID_NOT_FOUND)]
    assert commit(admin, 8, empty, {(topic, 0): 4}) == {(topic, 0): E.NONE}  # a new simple group
    assert describe(admin, empty).group_state == "Empty"


def offset_delete(client: RawClient, group: str, partitions: dict):
    response = client.call(OffsetDeleteRequest(group_id=group, topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name=t, partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p) for p in ps])
        for t, ps in partitions.items()]), 0)
    # Kafka lists topics it does not know first; compare by partition
    return response.error_code, {(t.name, p.partition_index): p.error_code
                                 for t in response.topics for p in t.partitions}


def test_offset_delete_empty_group(target, connect, admin, group, topic):
    missing = unique("no-such-topic")
    assert commit(admin, 8, group, {(topic, 0): 1, (topic, 1): 2}) == \
        {(topic, 0): E.NONE, (topic, 1): E.NONE}
    # partition 2 has no committed offset: still answered NONE
    assert offset_delete(admin, group, {topic: [0, 2], missing: [0]}) == (E.NONE, {
        (topic, 0): E.NONE, (topic, 2): E.NONE, (missing, 0): E.UNKNOWN_TOPIC_OR_PARTITION})
    assert fetch(admin, 8, group, None) == (E.NONE, {(topic, 1): (2, "", E.NONE)})
    assert describe(admin, group).group_state == "Empty"


def test_offset_delete_group_without_offsets(target, connect, admin, group, topic):
    c, member, _ = stable_single(connect, group, topic=topic)
    assert leave(c, 1, group, member).error_code == E.NONE
    assert offset_delete(admin, group, {topic: [0, 1]}) == \
        (E.NONE, {(topic, 0): E.NONE, (topic, 1): E.NONE})


def test_offset_delete_subscribed_and_unknown(target, connect, admin, group, topic):
    c, member, generation = stable_single(connect, group, topic=topic)
    assert commit(c, 8, group, {(topic, 0): 1}, generation, member) == {(topic, 0): E.NONE}
    # the member's subscription (ConsumerProtocolSubscription) names the topic
    assert offset_delete(admin, group, {topic: [0, 1]}) == \
        (E.NONE, {(topic, 0): E.GROUP_SUBSCRIBED_TO_TOPIC, (topic, 1): E.GROUP_SUBSCRIBED_TO_TOPIC})
    other = unique("other-sub")
    c2, m2, g2 = stable_single(connect, other, topic=topic + "-elsewhere")
    assert commit(c2, 8, other, {(topic, 0): 1}, g2, m2) == {(topic, 0): E.NONE}
    assert offset_delete(admin, other, {topic: [0]}) == (E.NONE, {(topic, 0): E.NONE})
    assert fetch(admin, 8, other, None) == (E.NONE, {})
    assert offset_delete(admin, unique("missing"), {topic: [0]}) == (E.GROUP_ID_NOT_FOUND, {})
    assert offset_delete(admin, "", {topic: [0]}) == (E.INVALID_GROUP_ID, {})


# ---------------------------------------------------------------------------------------------
# group.max.size (3 on both brokers, see conftest.GROUP_SETTINGS)

@pytest.mark.parametrize("version", [3, 5, 9])
def test_group_max_size(target, connect, admin, group, topic, version):
    sub = subscription(topic)
    prefs = {name: [("range", sub)] for name in "abc"}
    _form_group_of_three(connect, admin, group, prefs)
    d = connect("d")
    r = join(d, version, group, topic=topic)  # before MEMBER_ID_REQUIRED, too
    assert (r.error_code, r.generation_id) == (E.GROUP_MAX_SIZE_REACHED, -1)
    r = join(d, 5, group, instance_id="inst-d", topic=topic)
    assert (r.error_code, r.generation_id) == (E.GROUP_MAX_SIZE_REACHED, -1)
    dg = describe(admin, group)
    assert (dg.group_state, len(dg.members)) == ("Stable", 3)


# ---------------------------------------------------------------------------------------------
# Pending members (JoinGroup v4+: answered MEMBER_ID_REQUIRED, not yet joined again)

def test_pending_member_does_not_rebalance_until_it_joins(target, connect, admin, group, topic):
    a, a_id, generation = stable_single(connect, group, topic=topic)
    b = connect("pending")
    b_id = new_member_id(b, 5, group, topic=topic)
    assert state(admin, group) == "Stable"
    assert len(describe(admin, group).members) == 1
    assert heartbeat(a, 4, group, generation, a_id) == E.NONE
    # the pending id is not a member yet
    assert heartbeat(b, 4, group, generation, b_id) == E.UNKNOWN_MEMBER_ID
    assert sync(b, 5, group, generation, b_id).error_code == E.UNKNOWN_MEMBER_ID
    assert commit(b, 8, group, {(topic, 0): 1}, generation, b_id) == {(topic, 0): E.UNKNOWN_MEMBER_ID}
    # joining with the id makes it a member and starts the rebalance
    send_join(b, 5, group, member_id=b_id, topic=topic)
    wait_for_state(admin, group, "PreparingRebalance")
    ra = join(a, 5, group, member_id=a_id, topic=topic)
    rb = receive_join(b, 5)
    assert (ra.generation_id, rb.generation_id, rb.member_id, ra.leader) == (2, 2, b_id, a_id)


def test_leave_of_pending_member(target, connect, admin, group, topic):
    """LeaveGroup removes a pending member (NONE) and, on both brokers, starts a rebalance; its
    id is then unknown to JoinGroup."""
    a, a_id, generation = stable_single(connect, group, topic=topic)
    b = connect("pending")
    b_id = new_member_id(b, 5, group, topic=topic)
    r = leave(admin, 3, group, members=[(b_id, None)])
    assert (r.error_code, [(m.member_id, m.error_code) for m in r.members]) == \
        (E.NONE, [(b_id, E.NONE)])
    assert state(admin, group) == "PreparingRebalance"
    assert heartbeat(a, 4, group, generation, a_id) == E.REBALANCE_IN_PROGRESS
    r = join(b, 5, group, member_id=b_id, topic=topic)
    assert (r.error_code, r.generation_id) == (E.UNKNOWN_MEMBER_ID, -1)
    ra = join(a, 5, group, member_id=a_id, topic=topic)
    assert (ra.error_code, ra.generation_id, ra.leader, len(ra.members)) == (E.NONE, 2, a_id, 1)
