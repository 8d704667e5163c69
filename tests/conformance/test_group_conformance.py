"""Differential conformance of the classic group protocol: every scenario runs against a real
Apache Kafka 4.x broker and against kbroker (the ``target`` fixture), with raw requests over
several connections (one per member, the way clients do it), and asserts what Kafka answers.

The expected values are Kafka's answers, observed on the real broker; a test that passes on
"kafka" and fails on "kbroker" is a difference to fix in kbroker, never a reason to change the
expectation. Where Kafka's answer is arbitrary (member id UUIDs, leader choice or vote ties decided
by hash-map order) the test checks the shape of Kafka's answer and kbroker's deterministic rule from
design.md, and says so at that spot.

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
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    ListGroupsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    SyncGroupResponse,
)
from tests.support import RawClient, unique

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
def connect(target):
    """connect(client_id) -> a new RawClient to the target; all closed at the end of the test."""
    made: list[RawClient] = []

    def _connect(client_id: str = "conformance") -> RawClient:
        client = RawClient(target.port, client_id=client_id)
        made.append(client)
        return client

    yield _connect
    for client in made:
        client.close()


@pytest.fixture
def admin(connect) -> RawClient:
    return connect("conformance-admin")


@pytest.fixture
def topic(target) -> str:
    """One 3-partition topic per broker, created once per session."""
    if target.name not in _TOPICS:
        name = unique("conformance-topic")
        client = RawClient(target.port, client_id="conformance-admin")
        try:
            created = client.call(CreateTopicsRequest(
                topics=[CreateTopicsRequest.CreatableTopic(
                    name=name, num_partitions=TOPIC_PARTITIONS, replication_factor=1,
                    assignments=[], configs=[])],
                timeout_ms=30000), 5)
            assert [t.error_code for t in created.topics] == [E.NONE], created
            deadline = time.monotonic() + 30
            while True:  # Kafka's broker learns of the topic from the controller a moment later
                meta = client.call(MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                    allow_auto_topic_creation=False), 9)
                t = meta.topics[0]
                if (t.error_code == E.NONE and len(t.partitions) == TOPIC_PARTITIONS
                        and all(p.leader_id >= 0 for p in t.partitions)):
                    break
                assert time.monotonic() < deadline, f"topic {name} never appeared: {meta}"
                time.sleep(0.1)
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
    synced = sync(client, min(version, 5) if version < 5 else 5, group, joined.generation_id,
                  joined.member_id, assignments={joined.member_id: b"solo"})
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
