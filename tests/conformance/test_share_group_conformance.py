"""Differential conformance of share groups (KIP-932) with raw requests: every scenario runs
against a real Apache Kafka 4.3.1 broker and against kbroker (the ``target`` fixture) and
asserts Kafka's answers: ShareGroupHeartbeat and ShareGroupDescribe, the group APIs that know
share groups, and the ``share.version`` feature.

One documented difference: Kafka assigns a share partition only once its share coordinator has
initialized it, which takes a heartbeat, so its members get their partitions at their second
heartbeat; kbroker initializes a share partition at its first ShareFetch and assigns at the
first heartbeat. Scenarios therefore heartbeat until the assignment covers the topic and then
compare what both brokers agree on (epochs differ by that extra step).
"""
from __future__ import annotations

import time
import uuid

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (
    ApiVersionsRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    MetadataRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)
from tests.support import RawClient, unique

from . import topics

PARTITIONS = 3
_TOPICS: dict[str, tuple[str, uuid.UUID]] = {}


@pytest.fixture
def topic(target) -> tuple[str, uuid.UUID]:
    """(name, topic id) of one 3-partition topic per broker."""
    if target.name not in _TOPICS:
        client = RawClient(target.port, client_id="conformance-admin")
        try:
            name = topics.create_topic(client, unique("sg-topic"), PARTITIONS)
            meta = client.call(MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                allow_auto_topic_creation=False), 12)
            _TOPICS[target.name] = (name, meta.topics[0].topic_id)
        finally:
            client.close()
    return _TOPICS[target.name]


@pytest.fixture
def group() -> str:
    return unique("sg")


class ShareMember:
    """One share-group member on its own connection, heartbeating as KafkaShareConsumer does."""

    def __init__(self, client: RawClient, group: str, topic, member_id: str | None = None):
        self.client = client
        self.group = group
        self.topic, self.topic_id = topic
        self.member_id = member_id if member_id is not None else str(uuid.uuid4())
        self.epoch = 0
        self.assigned: set[int] = set()

    def heartbeat(self, epoch: int | None = None, **fields):
        epoch = self.epoch if epoch is None else epoch
        request = dict(group_id=self.group, member_id=self.member_id, member_epoch=epoch,
                       rack_id=None, subscribed_topic_names=[self.topic] if epoch == 0 else None)
        request.update(fields)
        response = self.client.call(ShareGroupHeartbeatRequest(**request), 1)
        if response.error_code == E.NONE:
            self.epoch = response.member_epoch
            if response.assignment is not None:
                self.assigned = {p for t in response.assignment.topic_partitions
                                 for p in t.partitions if t.topic_id == self.topic_id}
        return response

    def until_assigned(self, check, timeout: float = 20.0) -> None:
        """Heartbeat (every 0.2 s, sooner than the interval: Kafka answers each one) until
        ``check()``."""
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, f"no assignment: {self.assigned}"
            time.sleep(0.2)
            response = self.heartbeat()
            assert response.error_code == E.NONE, response


def describe(client: RawClient, *groups: str):
    return client.call(ShareGroupDescribeRequest(group_ids=list(groups),
                                                 include_authorized_operations=False), 1).groups


# ---------------------------------------------------------------------------------------------

def test_api_versions_and_share_version_feature(target, connect):
    response = connect().call(ApiVersionsRequest(client_software_name="conformance",
                                                 client_software_version="1"), 4)
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert versions[ShareGroupHeartbeatRequest.api_key] == (1, 1)
    assert versions[ShareGroupDescribeRequest.api_key] == (1, 1)
    finalized = {f.name: (f.min_version_level, f.max_version_level)
                 for f in response.finalized_features}
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    assert finalized["share.version"] == (1, 1)
    assert supported["share.version"] == (0, 1)


@pytest.mark.parametrize("fields,message", [
    (dict(member_id=""), None),       # refused before the coordinator, with no message
    (dict(member_id="x" * 37), None),
    (dict(group_id=""), "GroupId can't be empty."),
    (dict(rack_id=""), "RackId can't be empty."),
    (dict(subscribed_topic_names=None), "SubscribedTopicNames must be set in first request."),
    (dict(subscribed_topic_names=[]), "SubscribedTopicNames must be set in first request."),
    (dict(member_epoch=-2), "MemberEpoch is invalid."),
])
def test_malformed_heartbeats(target, connect, group, topic, fields, message):
    member = ShareMember(connect(), group, topic)
    fields = dict(fields)
    epoch = fields.pop("member_epoch", 0)
    response = member.heartbeat(epoch, **fields)
    assert (response.error_code, response.error_message) == (E.INVALID_REQUEST, message)


def test_unknown_group_member_and_epochs(target, connect, group, topic):
    member = ShareMember(connect(), group, topic)
    response = member.heartbeat(5)
    assert (response.error_code, response.error_message) == (
        E.GROUP_ID_NOT_FOUND, f"Share group {group} not found.")
    response = member.heartbeat(-1)
    assert (response.error_code, response.error_message) == (
        E.GROUP_ID_NOT_FOUND, f"Group {group} not found.")
    assert member.heartbeat(0).error_code == E.NONE
    stranger = ShareMember(connect(), group, topic, member_id="stranger")
    response = stranger.heartbeat(1)
    assert (response.error_code, response.error_message) == (
        E.UNKNOWN_MEMBER_ID, f"Member stranger is not a member of group {group}.")
    response = member.heartbeat(member.epoch + 10)
    assert response.error_code == E.FENCED_MEMBER_EPOCH
    assert response.error_message.startswith("The share group member has a greater member epoch")


def test_two_members_split_the_topic_and_describe(target, connect, group, topic):
    a = ShareMember(connect(), group, topic)
    first = a.heartbeat()
    assert first.error_code == E.NONE and first.member_id == a.member_id
    assert first.heartbeat_interval_ms == 5000 and first.assignment is not None
    a.until_assigned(lambda: a.assigned == {0, 1, 2})
    b = ShareMember(connect(), group, topic)
    b.heartbeat()
    b.until_assigned(lambda: b.assigned)
    a.until_assigned(lambda: a.assigned and not a.assigned & b.assigned)
    assert a.assigned | b.assigned == {0, 1, 2}
    assert sorted([len(a.assigned), len(b.assigned)]) == [1, 2]
    (described,) = describe(connect(), group)
    assert (described.error_code, described.group_state, described.assignor_name) == \
        (E.NONE, "Stable", "simple")
    assert described.authorized_operations == -2147483648
    members = {mm.member_id: mm for mm in described.members}
    assert set(members) == {a.member_id, b.member_id}
    for member in (a, b):
        mm = members[member.member_id]
        assert mm.member_epoch == member.epoch
        assert mm.subscribed_topic_names == [member.topic]
        assert [(tp.topic_name, set(tp.partitions)) for tp in mm.assignment.topic_partitions] \
            == [(member.topic, member.assigned)]
        assert mm.client_id == "conformance" and mm.client_host.startswith("/")
    assert described.group_epoch == described.assignment_epoch == max(a.epoch, b.epoch)


def test_leave_then_delete(target, connect, group, topic):
    admin = connect()
    a = ShareMember(connect(), group, topic)
    a.heartbeat()
    listed = admin.call(ListGroupsRequest(states_filter=[], types_filter=["share"]), 5)
    assert [(g.group_type, g.protocol_type, g.group_state) for g in listed.groups
            if g.group_id == group] == [("share", "share", "Stable")]
    listed = admin.call(ListGroupsRequest(states_filter=[], types_filter=["consumer"]), 5)
    assert group not in {g.group_id for g in listed.groups}
    described = admin.call(DescribeGroupsRequest(groups=[group],
                                                 include_authorized_operations=False), 6)
    g = described.groups[0]
    assert (g.error_code, g.error_message) == (E.GROUP_ID_NOT_FOUND,
                                               f"Group {group} is not a classic group.")
    join = admin.call(JoinGroupRequest(group_id=group, session_timeout_ms=10000,
                                       rebalance_timeout_ms=10000, member_id="",
                                       protocol_type="consumer", protocols=[]), 9)
    assert join.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    deleted = admin.call(DeleteGroupsRequest(groups_names=[group]), 2)
    assert deleted.results[0].error_code == E.NON_EMPTY_GROUP
    left = a.heartbeat(-1)
    assert (left.error_code, left.member_id, left.member_epoch) == (E.NONE, a.member_id, -1)
    (d,) = describe(admin, group)
    assert (d.group_state, d.members) == ("Empty", [])
    deleted = admin.call(DeleteGroupsRequest(groups_names=[group]), 2)
    assert deleted.results[0].error_code == E.NONE
    (d,) = describe(admin, group)
    assert (d.error_code, d.error_message) == (E.GROUP_ID_NOT_FOUND,
                                               f"Group {group} not found.")
