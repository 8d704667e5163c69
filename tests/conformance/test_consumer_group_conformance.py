"""Differential conformance of consumer groups (KIP-848, ConsumerGroupHeartbeat): every
scenario runs against a real Apache Kafka 4.x broker and against kbroker (the ``target``
fixture) with raw requests, and asserts Kafka's answers: errors and their messages, member and
group epochs, the revocation steps, states, and the other group APIs on a consumer group.

Both brokers run with the same consumer-group settings (conftest.py GROUP_SETTINGS). Topic ids
differ between the brokers, so assignments are compared by partition number.
"""
from __future__ import annotations

import uuid

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (
    ApiVersionsRequest,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from tests.support import RawClient, unique

from . import topics

PARTITIONS = 3
REBALANCE_MS = 30000
ALL = {0, 1, 2}

_TOPICS: dict[str, tuple[str, uuid.UUID]] = {}


@pytest.fixture
def topic(target) -> tuple[str, uuid.UUID]:
    """(name, topic id) of one 3-partition topic per broker."""
    if target.name not in _TOPICS:
        client = RawClient(target.port, client_id="conformance-admin")
        try:
            name = topics.create_topic(client, unique("cg-topic"), PARTITIONS)
            meta = client.call(MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                allow_auto_topic_creation=False), 12)
            _TOPICS[target.name] = (name, meta.topics[0].topic_id)
        finally:
            client.close()
    return _TOPICS[target.name]


@pytest.fixture
def group() -> str:
    return unique("cg")


class Member:
    """One member on its own connection, sending heartbeats as the Java client does."""

    def __init__(self, client: RawClient, group: str, topic, member_id: str | None = None,
                 instance_id: str | None = None) -> None:
        self.client = client
        self.group = group
        self.topic, self.topic_id = topic
        self.member_id = member_id or str(uuid.uuid4())
        self.instance_id = instance_id
        self.epoch = 0
        self.owned: set[int] = set()

    def heartbeat(self, epoch: int | None = None, owned: set | None = None, full=False,
                  version: int = 1, **fields):
        epoch = self.epoch if epoch is None else epoch
        tp = ConsumerGroupHeartbeatRequest.TopicPartitions
        request = dict(group_id=self.group, member_id=self.member_id, member_epoch=epoch,
                       instance_id=self.instance_id, rack_id=None, rebalance_timeout_ms=-1,
                       subscribed_topic_names=None, subscribed_topic_regex=None,
                       server_assignor=None, topic_partitions=None)
        if epoch == 0 or full:
            request.update(rebalance_timeout_ms=REBALANCE_MS,
                           subscribed_topic_names=[self.topic], topic_partitions=[])
        owned = self.owned if owned is None else owned
        if epoch > 0:
            request["topic_partitions"] = [tp(topic_id=self.topic_id,
                                              partitions=sorted(owned))] if owned else []
        request.update(fields)
        response = self.client.call(ConsumerGroupHeartbeatRequest(**request), version)
        if response.error_code == E.NONE:
            self.epoch = response.member_epoch
            if response.assignment is not None:
                got = set()
                for t in response.assignment.topic_partitions:
                    assert t.topic_id == self.topic_id
                    got |= set(t.partitions)
                self.owned = got
        return response

    def assigned(self, response) -> set | None:
        if response.assignment is None:
            return None
        return {p for t in response.assignment.topic_partitions for p in t.partitions}


def describe(client: RawClient, *groups: str):
    return client.call(ConsumerGroupDescribeRequest(group_ids=list(groups),
                                                    include_authorized_operations=False),
                       1).groups


# ---------------------------------------------------------------------------------------------

def test_api_versions_advertise_the_consumer_protocol(target, connect):
    response = connect().call(ApiVersionsRequest(client_software_name="conformance",
                                                 client_software_version="1"), 4)
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert versions[ConsumerGroupHeartbeatRequest.api_key] == (0, 1)
    assert versions[ConsumerGroupDescribeRequest.api_key] == (0, 1)
    finalized = {f.name: (f.min_version_level, f.max_version_level)
                 for f in response.finalized_features}
    assert finalized["group.version"] == (1, 1)
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    assert supported["group.version"] == (0, 1)


@pytest.mark.parametrize("fields,message", [
    (dict(member_id=""), "MemberId can't be empty."),
    (dict(instance_id=""), "InstanceId can't be empty."),
    (dict(rack_id=""), "RackId can't be empty."),
    (dict(rebalance_timeout_ms=-1), "RebalanceTimeoutMs must be provided in first request."),
    (dict(topic_partitions=None), "TopicPartitions must be empty when (re-)joining."),
    (dict(subscribed_topic_names=None),
     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    (dict(member_epoch=-3), "MemberEpoch is invalid."),
])
def test_malformed_heartbeats(target, connect, group, topic, fields, message):
    member = Member(connect(), group, topic)
    fields = dict(fields)   # the parameters are shared by both targets
    epoch = fields.pop("member_epoch", 0)
    response = member.heartbeat(epoch, full=True, **fields)
    assert (response.error_code, response.error_message) == (E.INVALID_REQUEST, message)


def test_unsupported_assignor(target, connect, group, topic):
    response = Member(connect(), group, topic).heartbeat(server_assignor="sticky")
    assert response.error_code == E.UNSUPPORTED_ASSIGNOR
    assert response.error_message == ("ServerAssignor sticky is not supported. Supported "
                                      "assignors: uniform, range.")


def test_join_revoke_and_reassign(target, connect, group, topic):
    """Two members: the second waits while the first revokes, with Kafka's epochs (a new
    group starts at epoch 1, so its first member moves it to 2)."""
    a = Member(connect("a"), group, topic)
    first = a.heartbeat()
    assert (first.error_code, first.member_epoch, a.assigned(first)) == (E.NONE, 2, ALL)
    assert first.heartbeat_interval_ms == 5000
    assert first.member_id == a.member_id

    b = Member(connect("b"), group, topic)
    joined = b.heartbeat()
    assert (joined.error_code, joined.member_epoch, b.assigned(joined)) == (E.NONE, 3, set())
    [described] = describe(a.client, group)
    assert (described.group_state, described.group_epoch, described.assignment_epoch) == \
        ("Reconciling", 3, 3)

    revoke = a.heartbeat()
    assert revoke.member_epoch == 2
    kept = a.assigned(revoke)
    assert kept < ALL and kept
    # still owning what it must give up: nothing changes, no assignment is sent
    again = a.heartbeat(owned=ALL)
    assert (again.member_epoch, again.assignment) == (2, None)
    waiting = b.heartbeat()
    assert (waiting.member_epoch, waiting.assignment) == (3, None)

    done = a.heartbeat()                 # owns only what it kept
    assert (done.member_epoch, done.assignment) == (3, None)
    got = b.heartbeat()
    assert got.member_epoch == 3 and b.assigned(got) == ALL - kept
    [described] = describe(a.client, group)
    assert described.group_state == "Stable"
    assert sorted(len(m.assignment.topic_partitions[0].partitions) for m in
                  described.members) == [1, 2]


def test_fencing_and_unknown_members(target, connect, group, topic):
    a = Member(connect("a"), group, topic)
    a.heartbeat()
    ahead = a.heartbeat(epoch=5)
    assert ahead.error_code == E.FENCED_MEMBER_EPOCH
    assert ahead.error_message.startswith("The consumer group member has a greater member epoch")
    unknown = Member(connect("x"), group, topic).heartbeat(epoch=2)
    assert unknown.error_code == E.UNKNOWN_MEMBER_ID
    no_group = Member(connect("y"), unique("cg-none"), topic).heartbeat(epoch=2)
    assert no_group.error_code == E.GROUP_ID_NOT_FOUND


def test_leave_and_rejoin(target, connect, group, topic):
    a = Member(connect("a"), group, topic)
    b = Member(connect("b"), group, topic)
    a.heartbeat()
    b.heartbeat()
    left = b.heartbeat(epoch=-1)
    assert (left.error_code, left.member_epoch, left.member_id) == (E.NONE, -1, b.member_id)
    # the group epoch moved on; a reaches it with every partition
    for _ in range(2):
        response = a.heartbeat()
    assert a.epoch == 4 and a.owned == ALL
    assert b.heartbeat(epoch=-1).error_code == E.UNKNOWN_MEMBER_ID
    [described] = describe(a.client, group)
    assert (described.group_state, described.group_epoch) == ("Stable", 4)
    assert response.error_code == E.NONE


def test_static_member_leaves_and_comes_back(target, connect, group, topic):
    a = Member(connect("a"), group, topic, instance_id="inst-a")
    a.heartbeat()
    taken = Member(connect("a2"), group, topic, instance_id="inst-a").heartbeat()
    assert taken.error_code == E.UNRELEASED_INSTANCE_ID
    left = a.heartbeat(epoch=-2)
    assert (left.error_code, left.member_epoch) == (E.NONE, -2)
    [described] = describe(a.client, group)
    assert [m.member_epoch for m in described.members] == [-2]
    back = Member(connect("a3"), group, topic, instance_id="inst-a")
    response = back.heartbeat()
    assert (response.error_code, response.member_epoch, back.assigned(response)) == \
        (E.NONE, 2, ALL)
    [described] = describe(a.client, group)
    assert [m.member_id for m in described.members] == [back.member_id]
    assert described.group_epoch == 2
    fenced = a.heartbeat(epoch=2)
    assert fenced.error_code == E.FENCED_INSTANCE_ID


def test_commits_check_the_member_epoch(target, connect, group, topic):
    a = Member(connect("a"), group, topic)
    a.heartbeat()
    name = topic[0]

    def commit(epoch, member_id, version=9):
        response = a.client.call(OffsetCommitRequest(
            group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=name, partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0,
                                                                 committed_offset=7)])]),
            version)
        return response.topics[0].partitions[0].error_code

    assert commit(2, a.member_id) == E.NONE
    assert commit(1, a.member_id) == E.STALE_MEMBER_EPOCH   # older than the partition's
    assert commit(3, a.member_id) == E.STALE_MEMBER_EPOCH   # newer than the member's
    assert commit(2, "someone") == E.UNKNOWN_MEMBER_ID
    assert commit(2, a.member_id, version=8) == E.UNSUPPORTED_VERSION

    def fetch(member_id, epoch):
        response = a.client.call(OffsetFetchRequest(groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=group, member_id=member_id, member_epoch=epoch, topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopics(name=name,
                                                                partition_indexes=[0])])],
            require_stable=True), 9)
        g = response.groups[0]
        offsets = [p.committed_offset for t in g.topics for p in t.partitions]
        return g.error_code, offsets

    assert fetch(a.member_id, 2) == (E.NONE, [7])
    assert fetch(a.member_id, 1) == (E.STALE_MEMBER_EPOCH, [])
    assert fetch("someone", 2) == (E.UNKNOWN_MEMBER_ID, [])
    assert fetch(None, -1) == (E.NONE, [7])


def test_classic_apis_see_a_consumer_group(target, connect, group, topic):
    a = Member(connect("a"), group, topic)
    a.heartbeat()
    # DescribeGroups describes classic groups only
    described = a.client.call(DescribeGroupsRequest(groups=[group]), 5).groups[0]
    assert (described.error_code, described.group_state, list(described.members)) == \
        (E.NONE, "Dead", [])
    described = a.client.call(DescribeGroupsRequest(groups=[group]), 6).groups[0]
    assert (described.error_code, described.error_message) == \
        (E.GROUP_ID_NOT_FOUND, f"Group {group} is not a classic group.")
    deleted = a.client.call(DeleteGroupsRequest(groups_names=[group]), 2).results[0]
    assert deleted.error_code == E.NON_EMPTY_GROUP
    a.heartbeat(epoch=-1)
    deleted = a.client.call(DeleteGroupsRequest(groups_names=[group]), 2).results[0]
    assert deleted.error_code == E.NONE
    [gone] = describe(a.client, group)
    assert gone.error_code == E.GROUP_ID_NOT_FOUND


def test_describe_unknown_group(target, connect):
    [gone] = describe(connect(), "no-such-cg-group")
    assert (gone.error_code, gone.error_message) == (E.GROUP_ID_NOT_FOUND,
                                                     "Group no-such-cg-group not found.")


def test_list_groups_and_offset_delete_on_a_consumer_group(target, connect, group, topic):
    from protocol.messages import ListGroupsRequest, OffsetDeleteRequest
    a = Member(connect("a"), group, topic)
    b = Member(connect("b"), group, topic)
    a.heartbeat()
    b.heartbeat()       # the group is Reconciling until a revokes

    def listed(states=(), types=()):
        response = a.client.call(ListGroupsRequest(states_filter=list(states),
                                                   types_filter=list(types)), 5)
        return [(g.group_state, g.group_type, g.protocol_type) for g in response.groups
                if g.group_id == group]

    assert listed() == [("Reconciling", "consumer", "consumer")]
    assert listed(types=["classic"]) == []
    assert listed(types=["consumer"], states=["reconciling"]) == \
        [("Reconciling", "consumer", "consumer")]
    assert listed(states=["stable"]) == []
    name = topic[0]
    commit = a.client.call(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=a.epoch, member_id=a.member_id,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=name, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0,
                                                             committed_offset=3)])]), 9)
    assert commit.topics[0].partitions[0].error_code == E.NONE
    deleted = a.client.call(OffsetDeleteRequest(group_id=group, topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name=name, partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
    assert deleted.error_code == E.NONE
    assert deleted.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC


def test_online_upgrade_of_a_classic_group(target, connect, group, topic):
    """A running classic group (one member, generation 1) gets a ConsumerGroupHeartbeat
    member: the group becomes a consumer group at the classic generation, the new member moves
    it on, and the classic member is told to rejoin, rejoins as a follower at the new epoch and
    gets its share through SyncGroup."""
    import struct

    from protocol.messages import (HeartbeatRequest, JoinGroupRequest, ListGroupsRequest,
                                   SyncGroupRequest)
    from .test_group_conformance import assignment as classic_assignment
    from .test_group_conformance import subscription as classic_subscription

    name = topic[0]
    classic = connect("classic")
    protocols = [JoinGroupRequest.JoinGroupRequestProtocol(
        name="range", metadata=classic_subscription(name))]

    def join(member_id: str):
        return classic.call(JoinGroupRequest(
            group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000,
            member_id=member_id, group_instance_id=None, protocol_type="consumer",
            protocols=protocols), 9)

    required = join("")
    assert required.error_code == E.MEMBER_ID_REQUIRED
    member_id = required.member_id
    joined = join(member_id)
    assert (joined.error_code, joined.generation_id) == (E.NONE, 1)
    synced = classic.call(SyncGroupRequest(
        group_id=group, generation_id=1, member_id=member_id, protocol_type="consumer",
        protocol_name="range", assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=member_id, assignment=classic_assignment(name, 0, 1, 2))]), 5)
    assert synced.error_code == E.NONE

    c = Member(connect("c"), group, topic)
    first = c.heartbeat()
    assert (first.error_code, first.member_epoch, c.assigned(first)) == (E.NONE, 2, set())
    [described] = describe(c.client, group)
    assert (described.group_epoch, described.assignment_epoch) == (2, 2)
    assert sorted(m.member_type for m in described.members) == [0, 1]  # classic, consumer
    listed = classic.call(ListGroupsRequest(states_filter=[], types_filter=[]), 5)
    assert [(g.group_type, g.protocol_type) for g in listed.groups if g.group_id == group] == \
        [("consumer", "consumer")]

    def heartbeat(generation):
        return classic.call(HeartbeatRequest(group_id=group, generation_id=generation,
                                             member_id=member_id), 4).error_code

    assert heartbeat(1) == E.REBALANCE_IN_PROGRESS
    assert heartbeat(0) == E.ILLEGAL_GENERATION
    rejoined = join(member_id)
    assert (rejoined.error_code, rejoined.generation_id, rejoined.leader,
            rejoined.protocol_name, list(rejoined.members)) == (E.NONE, 2, "", "range", [])
    synced = classic.call(SyncGroupRequest(
        group_id=group, generation_id=2, member_id=member_id, protocol_type="consumer",
        protocol_name="range", assignments=[]), 5)
    assert synced.error_code == E.NONE
    data = synced.assignment
    version = struct.unpack_from(">h", data)[0]
    from protocol.messages import ConsumerProtocolAssignment
    mine = {p for tp in ConsumerProtocolAssignment.decode(data, version, 2,
                                                          exact=False).assigned_partitions
            for p in tp.partitions}
    got = c.heartbeat()
    assert got.member_epoch == 2
    assert mine | c.owned == ALL and not mine & c.owned
    assert heartbeat(2) == E.NONE


def test_regex_subscription(target, connect, group, topic):
    """A member subscribed with a regex gets the partitions of the topics it matches (Kafka
    resolves the regex in the background, so the assignment may take a few heartbeats there;
    kbroker resolves it at once). An invalid RE2 regex is refused."""
    import time as _time
    name = topic[0]
    bad = Member(connect("bad"), unique("cg-bad"), topic).heartbeat(
        subscribed_topic_names=None, subscribed_topic_regex="(?=x)y")
    assert bad.error_code == E.INVALID_REGULAR_EXPRESSION
    a = Member(connect("a"), group, topic)
    response = a.heartbeat(subscribed_topic_names=None,
                           subscribed_topic_regex=name.replace("-", ".") + "|no-such-.*")
    assert response.error_code == E.NONE
    deadline = _time.monotonic() + 30
    while a.owned != ALL and _time.monotonic() < deadline:
        _time.sleep(0.2)
        response = a.heartbeat()
        assert response.error_code == E.NONE
    assert a.owned == ALL
    [described] = describe(a.client, group)
    [member] = described.members
    assert member.subscribed_topic_regex == name.replace("-", ".") + "|no-such-.*"
    assert [t.topic_name for t in member.assignment.topic_partitions] == [name]


def test_a_groups_own_heartbeat_interval(target, connect, group, topic):
    """consumer.heartbeat.interval.ms set on the group (IncrementalAlterConfigs, GROUP
    resource) is the interval its members are told, from their next heartbeat; a group
    without it keeps the broker's group.consumer.heartbeat.interval.ms (5000 here)."""
    from .test_share_group_conformance import alter_group_configs
    admin = connect("group-configs")
    assert alter_group_configs(admin, group, ("consumer.heartbeat.interval.ms", "7000", 0)) \
        == (E.NONE, None)
    member = Member(connect("configured"), group, topic)
    joined = member.heartbeat()
    assert (joined.error_code, joined.heartbeat_interval_ms) == (E.NONE, 7000)
    assert alter_group_configs(admin, group, ("consumer.heartbeat.interval.ms", "6000", 0)) \
        == (E.NONE, None)
    assert member.heartbeat().heartbeat_interval_ms == 6000
    other = Member(connect("plain"), group + "-other", topic)
    assert other.heartbeat().heartbeat_interval_ms == 5000
    # above group.consumer.max.heartbeat.interval.ms (15000 on both): refused
    code, message = alter_group_configs(admin, group, ("consumer.heartbeat.interval.ms",
                                                       "20000", 0))
    assert code == E.INVALID_CONFIG, message
