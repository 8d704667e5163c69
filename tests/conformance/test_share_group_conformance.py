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


# --------------------------------------------------------------------------- ShareFetch

def produce(client: RawClient, topic: str, n: int, start: int = 0) -> None:
    from protocol.messages import ProduceRequest as P
    from protocol.records import SimpleRecord, build_batch
    batch = build_batch([SimpleRecord(key=None, value=f"r{start + i}".encode(),
                                      timestamp=1_700_000_000_000 + i) for i in range(n)])
    deadline = time.monotonic() + 30
    while True:
        response = client.call(P(acks=-1, timeout_ms=30000, topic_data=[P.TopicProduceData(
            name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])]), 9)
        error = response.responses[0].partition_responses[0].error_code
        if error != E.NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert error == E.NONE, response


@pytest.fixture
def one_partition(target) -> tuple[str, uuid.UUID]:
    """A new 1-partition topic (each scenario its own: share-partition state is per topic)."""
    client = RawClient(target.port, client_id="conformance-admin")
    try:
        name = topics.create_topic(client, unique("sf-topic"), 1)
        meta = client.call(MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=name)],
            allow_auto_topic_creation=False), 12)
        return name, meta.topics[0].topic_id
    finally:
        client.close()


class ShareConsumer(ShareMember):
    """A member that also fetches and acknowledges, with its share session."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.session_epoch = 0

    def fetch(self, acks=None, epoch=None, max_wait_ms=200, max_records=500, version=1,
              partitions=(0,), **fields):
        from protocol.messages import ShareFetchRequest as F
        epoch = self.session_epoch if epoch is None else epoch
        acks = acks or {}
        request = F(group_id=self.group, member_id=self.member_id, share_session_epoch=epoch,
                    max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                    max_records=max_records, batch_size=max_records,
                    topics=[F.FetchTopic(topic_id=self.topic_id, partitions=[
                        F.FetchPartition(partition_index=p, acknowledgement_batches=[
                            F.AcknowledgementBatch(first_offset=a, last_offset=b,
                                                   acknowledge_types=list(t))
                            for a, b, t in acks.get(p, ())]) for p in partitions])],
                    forgotten_topics_data=[])
        for name, value in fields.items():
            setattr(request, name, value)
        response = self.client.call(request, version)
        if response.error_code == E.NONE:
            self.session_epoch = -1 if epoch == -1 else (epoch + 1)
        return response

    def acknowledge(self, acks, epoch=None, version=1):
        from protocol.messages import ShareAcknowledgeRequest as A
        epoch = self.session_epoch if epoch is None else epoch
        request = A(group_id=self.group, member_id=self.member_id, share_session_epoch=epoch,
                    topics=[A.AcknowledgeTopic(topic_id=self.topic_id, partitions=[
                        A.AcknowledgePartition(partition_index=p, acknowledgement_batches=[
                            A.AcknowledgementBatch(first_offset=a, last_offset=b,
                                                   acknowledge_types=list(t))
                            for a, b, t in batches]) for p, batches in acks.items()])])
        response = self.client.call(request, version)
        if response.error_code == E.NONE and epoch != -1:
            self.session_epoch = epoch + 1
        return response

    def fetch_until(self, count: int, timeout: float = 15.0, **kw) -> list:
        """ShareFetch until ``count`` records were acquired -> [(first, last, delivery count)]."""
        got = []
        deadline = time.monotonic() + timeout
        while sum(b - a + 1 for a, b, _c in got) < count:
            assert time.monotonic() < deadline, f"acquired only {got}"
            response = self.fetch(max_wait_ms=500, **kw)
            assert response.error_code == E.NONE, response
            got += acquired(response)
        return got


def acquired(response) -> list:
    return [(r.first_offset, r.last_offset, r.delivery_count)
            for t in response.responses for p in t.partitions for r in p.acquired_records]


def ack_errors(response) -> list:
    return [(p.partition_index, p.acknowledge_error_code) for t in response.responses
            for p in t.partitions if p.acknowledge_error_code or p.acknowledge_error_message]


def started(connect, group, topic) -> ShareConsumer:
    """A member assigned the topic's partition, its share session open, the share partition
    initialized at the end of the (empty) log."""
    consumer = ShareConsumer(connect(), group, topic)
    consumer.heartbeat()
    consumer.until_assigned(lambda: consumer.assigned == {0})
    first = consumer.fetch(max_wait_ms=100)
    assert first.error_code == E.NONE and acquired(first) == []
    return consumer


def test_share_fetch_acquires_and_each_acknowledgement_type(target, connect, group,
                                                            one_partition):
    consumer = started(connect, group, one_partition)
    produce(connect(), one_partition[0], 10)
    assert consumer.fetch_until(10) == [(0, 9, 1)]
    # accept 0-2, release 3-4, reject 5, per-offset 6-9: accept, release, reject, gap
    response = consumer.acknowledge({0: [(0, 2, [1]), (3, 4, [2]), (5, 5, [3]),
                                         (6, 9, [1, 2, 3, 0])]})
    assert response.error_code == E.NONE
    assert [(p.partition_index, p.error_code) for t in response.responses
            for p in t.partitions] == [(0, E.NONE)]
    # the released records come back, with delivery count 2, and nothing else does
    assert consumer.fetch_until(3) == [(3, 4, 2), (7, 7, 2)]
    # acknowledging them twice: the second time they are not acquired any more
    response = consumer.fetch(acks={0: [(3, 4, [1]), (7, 7, [1])]}, max_wait_ms=100)
    assert ack_errors(response) == [] and acquired(response) == []
    # every record is finished: the start offset is past them, and an acknowledgement below
    # it is ignored (no error), as Kafka skips offsets below its share-partition start offset
    response = consumer.acknowledge({0: [(3, 3, [1])]})
    assert [(p.error_code) for t in response.responses for p in t.partitions] == [E.NONE]
    # a record past the end was never acquired: with nothing in flight it is not found
    produce(connect(), one_partition[0], 1)
    response = consumer.acknowledge({0: [(10, 10, [1])]})
    assert [(p.error_code) for t in response.responses for p in t.partitions] == \
        [E.INVALID_RECORD_STATE]
    # with records in flight, past the last of them is an invalid request
    assert consumer.fetch_until(1) == [(10, 10, 1)]
    response = consumer.acknowledge({0: [(10, 11, [1])]})
    assert [(p.error_code) for t in response.responses for p in t.partitions] == \
        [E.INVALID_REQUEST]


def test_share_sessions(target, connect, group, one_partition):
    consumer = started(connect, group, one_partition)
    # a wrong epoch, an unknown session, acknowledgements in an opening fetch, ack at epoch 0
    assert consumer.fetch(epoch=7).error_code == E.INVALID_SHARE_SESSION_EPOCH
    assert consumer.acknowledge({0: [(0, 0, [1])]}, epoch=7).error_code == \
        E.INVALID_SHARE_SESSION_EPOCH
    assert consumer.acknowledge({0: [(0, 0, [1])]}, epoch=0).error_code == \
        E.INVALID_SHARE_SESSION_EPOCH
    stranger = ShareConsumer(connect(), group, one_partition)
    assert stranger.fetch(epoch=1).error_code == E.SHARE_SESSION_NOT_FOUND
    assert stranger.fetch(epoch=-1).error_code == E.SHARE_SESSION_NOT_FOUND
    assert stranger.acknowledge({0: [(0, 0, [1])]}, epoch=1).error_code == \
        E.SHARE_SESSION_NOT_FOUND
    assert stranger.fetch(epoch=0, acks={0: [(0, 0, [1])]}).error_code == E.INVALID_REQUEST
    # the session still expects the epoch it expected
    assert consumer.fetch(max_wait_ms=0).error_code == E.NONE


def test_a_closed_session_releases_to_another_member(target, connect, group, one_partition):
    a = started(connect, group, one_partition)
    b = ShareConsumer(connect(), group, one_partition)
    b.heartbeat()
    b.until_assigned(lambda: b.assigned == {0})
    produce(connect(), one_partition[0], 5)
    assert a.fetch_until(5) == [(0, 4, 1)]
    opened = b.fetch(max_wait_ms=300)           # b opens its session: everything is locked
    assert opened.error_code == E.NONE and acquired(opened) == []
    # b cannot acknowledge what a holds
    response = b.acknowledge({0: [(0, 1, [1])]})
    assert [p.error_code for t in response.responses for p in t.partitions] == \
        [E.INVALID_RECORD_STATE]
    # a accepts 0 and closes its session: 1-4 are released to b, as second deliveries
    closed = a.fetch(epoch=-1, acks={0: [(0, 0, [1])]})
    assert closed.error_code == E.NONE and acquired(closed) == []
    assert b.fetch_until(4) == [(1, 4, 2)]
    assert a.fetch(epoch=1).error_code == E.SHARE_SESSION_NOT_FOUND


def test_malformed_acknowledgements(target, connect, group, one_partition):
    consumer = started(connect, group, one_partition)
    produce(connect(), one_partition[0], 4)
    consumer.fetch_until(4)
    for batches in ([(2, 1, [1])], [(0, 3, [1, 1])], [(0, 1, [9])], [(0, 0, [])],
                    [(0, 3, [4])]):
        response = consumer.acknowledge({0: batches})
        assert response.error_code == E.NONE
        assert [p.error_code for t in response.responses for p in t.partitions] == \
            [E.INVALID_REQUEST], batches
    # still acquired: a valid acknowledgement works
    response = consumer.acknowledge({0: [(0, 3, [1])]})
    assert [p.error_code for t in response.responses for p in t.partitions] == [E.NONE]


# --------------------------------------------------------------------------- group configs

def describe_group_configs(client, group: str, keys=None) -> dict:
    from protocol.messages import DescribeConfigsRequest as D
    response = client.call(D(resources=[D.DescribeConfigsResource(
        resource_type=32, resource_name=group, configuration_keys=keys)],
        include_synonyms=True, include_documentation=False), 4)
    (result,) = response.results
    assert (result.error_code, result.error_message) == (E.NONE, "")
    return {e.name: (e.value, e.config_source, e.config_type, e.read_only,
                     [(s.name, s.value, s.source) for s in e.synonyms]) for e in result.configs}


def alter_group_configs(client, group: str, *changes, validate_only=False) -> tuple:
    """IncrementalAlterConfigs on a GROUP resource: changes are (name, value, operation)."""
    from protocol.messages import IncrementalAlterConfigsRequest as I
    response = client.call(I(resources=[I.AlterConfigsResource(
        resource_type=32, resource_name=group, configs=[
            I.AlterableConfig(name=n, config_operation=op, value=v) for n, v, op in changes])],
        validate_only=validate_only), 1)
    (r,) = response.responses
    if r.error_code == E.NONE and not validate_only:
        wait_until_applied(client, group, changes)
    return r.error_code, r.error_message


GROUP_CONFIG_SOURCE = 8


def wait_until_applied(client, group: str, changes) -> None:
    """Kafka applies a group config through its metadata log, so its group coordinator sees
    it a moment after IncrementalAlterConfigs is answered (kbroker at once): a scenario that
    starts its consumers right away may see the old value (a share group's partitions then
    start at the latest offset, and records produced before are never delivered). Waits until
    DescribeConfigs shows every SET value and no DELETEd one as the group's own."""
    values = {n: v for n, v, op in changes if op == 0}
    deleted = [n for n, _v, op in changes if op == 1]
    deadline = time.monotonic() + 15
    while True:
        described = describe_group_configs(client, group, list(values) + deleted)
        if all(described[n][0] == v for n, v in values.items()) and all(
                described[n][1] != GROUP_CONFIG_SOURCE for n in deleted):
            return
        assert time.monotonic() < deadline, (group, changes, described)
        time.sleep(0.05)


SHARE_CONFIG_DEFAULTS = {
    "share.auto.offset.reset": ("latest", 5, 2, False,
                                [("share.auto.offset.reset", "latest", 5)]),
    "share.isolation.level": ("read_uncommitted", 5, 2, False,
                              [("share.isolation.level", "read_uncommitted", 5)]),
    "share.renew.acknowledge.enable": ("true", 5, 1, False,
                                       [("share.renew.acknowledge.enable", "true", 5)]),
    "share.record.lock.duration.ms": ("30000", 5, 3, False,
                                      [("group.share.record.lock.duration.ms", "30000", 5)]),
    "share.delivery.count.limit": ("5", 5, 3, False,
                                   [("group.share.delivery.count.limit", "5", 5)]),
    "share.partition.max.record.locks": ("2000", 5, 3, False,
                                         [("group.share.partition.max.record.locks", "2000", 5)]),
    "share.session.timeout.ms": ("45000", 5, 3, False,
                                 [("group.share.session.timeout.ms", "45000", 5)]),
    "share.heartbeat.interval.ms": ("5000", 5, 3, False,
                                    [("group.share.heartbeat.interval.ms", "5000", 5)]),
    # both brokers run with 0 (conftest.GROUP_SETTINGS), Kafka's default is 1000
    "share.assignment.interval.ms": ("0", 4, 3, False,
                                     [("group.share.assignment.interval.ms", "0", 4),
                                      ("group.share.assignment.interval.ms", "1000", 5)]),
}
GROUP_CONFIG_NAMES = set(SHARE_CONFIG_DEFAULTS) | {
    "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
    "consumer.assignment.interval.ms", "streams.session.timeout.ms",
    "streams.heartbeat.interval.ms", "streams.num.standby.replicas",
    "streams.initial.rebalance.delay.ms", "streams.assignment.interval.ms"}


def test_group_configs_describe_and_alter(target, connect, group):
    client = connect()
    described = describe_group_configs(client, group)   # any group id, existing or not
    assert set(described) == GROUP_CONFIG_NAMES
    assert {k: described[k] for k in SHARE_CONFIG_DEFAULTS} == SHARE_CONFIG_DEFAULTS
    assert alter_group_configs(client, group, ("share.auto.offset.reset", "earliest", 0),
                               ("share.record.lock.duration.ms", "15000", 0)) == (E.NONE, None)
    described = describe_group_configs(client, group, ["share.auto.offset.reset",
                                                       "share.record.lock.duration.ms"])
    assert described == {
        "share.auto.offset.reset": ("earliest", 8, 2, False, [
            ("share.auto.offset.reset", "earliest", 8),
            ("share.auto.offset.reset", "latest", 5)]),
        "share.record.lock.duration.ms": ("15000", 8, 3, False, [
            ("share.record.lock.duration.ms", "15000", 8),
            ("group.share.record.lock.duration.ms", "30000", 5)])}
    # DELETE goes back to the default; validate_only changes nothing
    assert alter_group_configs(client, group, ("share.auto.offset.reset", None, 1)) == \
        (E.NONE, None)
    assert alter_group_configs(client, group, ("share.isolation.level", "read_committed", 0),
                               validate_only=True) == (E.NONE, None)
    described = describe_group_configs(client, group, ["share.auto.offset.reset",
                                                       "share.isolation.level"])
    assert described["share.auto.offset.reset"][:2] == ("latest", 5)
    assert described["share.isolation.level"][:2] == ("read_uncommitted", 5)


@pytest.mark.parametrize("change,error,message", [
    (("share.auto.offset.reset", "bogus", 0), E.INVALID_CONFIG,
     "Invalid value bogus for configuration share.auto.offset.reset: Invalid value `bogus` for "
     "configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or "
     "of the format 'by_duration:<PnDTnHnMn.nS>'."),
    (("share.record.lock.duration.ms", "1000", 0), E.INVALID_CONFIG,
     "share.record.lock.duration.ms must be greater than or equal to "
     "group.share.min.record.lock.duration.ms"),
    (("share.record.lock.duration.ms", "abc", 0), E.INVALID_CONFIG,
     "Invalid value abc for configuration share.record.lock.duration.ms: Not a number of type "
     "INT"),
    (("share.delivery.count.limit", "11", 0), E.INVALID_CONFIG,
     "share.delivery.count.limit must be less than or equal to "
     "group.share.max.delivery.count.limit"),
    (("share.partition.max.record.locks", "99", 0), E.INVALID_CONFIG,
     "Invalid value 99 for configuration share.partition.max.record.locks: Value must be at "
     "least 100"),
    (("share.heartbeat.interval.ms", "4000", 0), E.INVALID_CONFIG,
     "share.heartbeat.interval.ms must be greater than or equal to "
     "group.share.min.heartbeat.interval.ms"),
    (("share.isolation.level", "serializable", 0), E.INVALID_CONFIG,
     "Invalid value serializable for configuration share.isolation.level: String must be one "
     "of: read_committed, read_uncommitted"),
    (("nope", "1", 0), E.INVALID_CONFIG, "Unknown group config name: nope"),
    (("share.auto.offset.reset", "earliest", 2), E.INVALID_CONFIG,
     "Can't APPEND to key share.auto.offset.reset because its type is not LIST."),
])
def test_group_config_errors(target, connect, group, change, error, message):
    assert alter_group_configs(connect(), group, change) == (error, message)


def test_group_config_for_no_group(target, connect):
    assert alter_group_configs(connect(), "", ("share.isolation.level", "read_committed", 0)) \
        == (E.INVALID_REQUEST, "Default group resources are not allowed.")


def test_earliest_reset_delivers_records_produced_before(target, connect, group,
                                                         one_partition):
    produce(connect(), one_partition[0], 3)
    assert alter_group_configs(connect(), group, ("share.auto.offset.reset", "earliest", 0)) \
        == (E.NONE, None)
    consumer = ShareConsumer(connect(), group, one_partition)
    consumer.heartbeat()
    consumer.until_assigned(lambda: consumer.assigned == {0})
    assert consumer.fetch_until(3) == [(0, 2, 1)]


def test_alter_configs_replaces_a_groups_whole_set(target, connect, group):
    from protocol.messages import AlterConfigsRequest as A
    client = connect()
    assert alter_group_configs(client, group, ("share.auto.offset.reset", "earliest", 0)) == \
        (E.NONE, None)
    response = client.call(A(resources=[A.AlterConfigsResource(
        resource_type=32, resource_name=group, configs=[A.AlterableConfig(
            name="share.record.lock.duration.ms", value="20000")])], validate_only=False), 2)
    assert [(r.error_code, r.error_message) for r in response.responses] == [(E.NONE, None)]
    described = describe_group_configs(client, group, ["share.auto.offset.reset",
                                                       "share.record.lock.duration.ms"])
    assert described["share.auto.offset.reset"][:2] == ("latest", 5)
    assert described["share.record.lock.duration.ms"][:2] == ("20000", 8)


# --------------------------------------------------------------------------- offsets admin

def describe_offsets(client, group: str, topic: str | None, partitions=(0,), version=1):
    from protocol.messages import DescribeShareGroupOffsetsRequest as D
    topics = None if topic is None else [D.DescribeShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=list(partitions))]
    response = client.call(D(groups=[D.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=topics)]), version)
    (g,) = response.groups
    return g


def offsets_of(g) -> dict:
    return {(t.topic_name, p.partition_index): (p.start_offset, p.lag, p.error_code)
            for t in g.topics for p in t.partitions}


def alter_offsets(client, group: str, topic: str, offsets: dict):
    from protocol.messages import AlterShareGroupOffsetsRequest as A
    return client.call(A(group_id=group, topics=[A.AlterShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=[A.AlterShareGroupOffsetsRequestPartition(
            partition_index=p, start_offset=o) for p, o in offsets.items()])]), 0)


def delete_offsets(client, group: str, *names: str):
    from protocol.messages import DeleteShareGroupOffsetsRequest as D
    return client.call(D(group_id=group, topics=[
        D.DeleteShareGroupOffsetsRequestTopic(topic_name=n) for n in names]), 0)


def test_share_group_offsets_admin(target, connect, group, one_partition):
    admin = connect()
    name = one_partition[0]
    other = topics.create_topic(admin, unique("sf-other"), 1)   # a topic the group never read
    g = describe_offsets(admin, group, None)
    assert (g.error_code, g.error_message, g.topics) == (E.NONE, None, [])
    g = describe_offsets(admin, group, name)
    assert g.error_code == E.NONE and offsets_of(g) == {(name, 0): (-1, -1, 0)}
    consumer = started(connect, group, one_partition)
    produce(admin, name, 5)
    assert consumer.fetch_until(5) == [(0, 4, 1)]
    consumer.acknowledge({0: [(0, 2, [1]), (4, 4, [1])]})
    # Kafka stores an acknowledgement's state before it moves the start offset: the start
    # offset described is 0 (stored before 0-2 were accepted), and the lag counts the 4 records
    # delivered past it: end 5 - 0 - 4 = 1 (3 is still acquired)
    assert offsets_of(describe_offsets(admin, group, name)) == {(name, 0): (0, 1, 0)}
    assert offsets_of(describe_offsets(admin, group, None)) == {(name, 0): (0, 1, 0)}
    consumer.acknowledge({0: [(3, 3, [2])]})      # released: the start offset 3 is stored
    assert offsets_of(describe_offsets(admin, group, name)) == {(name, 0): (3, 1, 0)}
    assert consumer.fetch_until(1) == [(3, 3, 2)]
    consumer.acknowledge({0: [(3, 3, [1])]})
    assert offsets_of(describe_offsets(admin, group, name)) == {(name, 0): (3, 0, 0)}
    assert offsets_of(describe_offsets(admin, group, name, version=0))[(name, 0)][0] == 3
    # a group with members: no altering, no deleting
    response = alter_offsets(admin, group, name, {0: 1})
    assert (response.error_code, response.error_message) == (E.NON_EMPTY_GROUP,
                                                             "The group is not empty.")
    response = delete_offsets(admin, group, name)
    assert (response.error_code, response.error_message) == (E.NON_EMPTY_GROUP,
                                                             "The group is not empty.")
    consumer.fetch(epoch=-1)
    assert consumer.heartbeat(-1).error_code == E.NONE
    response = alter_offsets(admin, group, name, {0: 1, 7: 0})
    assert response.error_code == E.NONE
    assert [(t.topic_name, [(p.partition_index, p.error_code, p.error_message)
                            for p in t.partitions]) for t in response.responses] == [
        (name, [(0, 0, None), (7, E.UNKNOWN_TOPIC_OR_PARTITION,
                               "This server does not host this topic-partition.")])]
    assert offsets_of(describe_offsets(admin, group, name)) == {(name, 0): (1, 4, 0)}
    if not target.is_kafka:
        # a new member starts at the altered offset: 1-4 again, as first deliveries. (Kafka
        # 4.3.1 keeps the share partition its leader has loaded: in this scenario it delivered
        # nothing from the altered offset within 60 s, until the leader reloads the state)
        consumer = ShareConsumer(connect(), group, one_partition)
        consumer.heartbeat()
        consumer.until_assigned(lambda: consumer.assigned == {0})
        assert consumer.fetch_until(4) == [(1, 4, 1)]
        consumer.fetch(epoch=-1)
        assert consumer.heartbeat(-1).error_code == E.NONE
    missing = unique("nope")
    response = delete_offsets(admin, group, name, missing, other)
    assert response.error_code == E.NONE
    assert {t.topic_name: (t.error_code, t.error_message) for t in response.responses} == {
        name: (E.NONE, None),
        missing: (E.UNKNOWN_TOPIC_OR_PARTITION,
                  "This server does not host this topic-partition."),
        other: (E.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete.")}
    assert offsets_of(describe_offsets(admin, group, name)) == {(name, 0): (-1, -1, 0)}
    response = delete_offsets(admin, unique("ghost"), name)
    assert response.error_code == E.GROUP_ID_NOT_FOUND


# --------------------------------------------------------------------------- limits and renew

def test_delivery_count_limit_archives(target, connect, group, one_partition):
    admin = connect()
    assert alter_group_configs(admin, group, ("share.delivery.count.limit", "2", 0)) == \
        (E.NONE, None)
    consumer = started(connect, group, one_partition)
    produce(admin, one_partition[0], 2)
    assert consumer.fetch_until(2) == [(0, 1, 1)]
    consumer.acknowledge({0: [(0, 1, [2])]})
    assert consumer.fetch_until(2) == [(0, 1, 2)]
    consumer.acknowledge({0: [(0, 0, [2]), (1, 1, [1])]})
    # released at the limit: archived, never delivered again; the start offset moved past it
    response = consumer.fetch(max_wait_ms=300)
    assert response.error_code == E.NONE and acquired(response) == []
    produce(admin, one_partition[0], 1)
    assert consumer.fetch_until(1) == [(2, 2, 1)]


def test_renew_acknowledgements(target, connect, group, one_partition):
    consumer = started(connect, group, one_partition)
    produce(connect(), one_partition[0], 3)
    assert consumer.fetch_until(3, version=2) == [(0, 2, 1)]
    # RENEW (4) needs IsRenewAck, and a version that knows it
    response = consumer.acknowledge({0: [(0, 0, [4])]}, version=2)
    assert [p.error_code for t in response.responses for p in t.partitions] == \
        [E.INVALID_REQUEST]
    response = consumer.acknowledge({0: [(0, 0, [4])]}, version=1)
    assert [p.error_code for t in response.responses for p in t.partitions] == \
        [E.INVALID_REQUEST]
    from protocol.messages import ShareAcknowledgeRequest as A
    request = A(group_id=group, member_id=consumer.member_id,
                share_session_epoch=consumer.session_epoch, is_renew_ack=True,
                topics=[A.AcknowledgeTopic(topic_id=one_partition[1], partitions=[
                    A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                        A.AcknowledgementBatch(first_offset=0, last_offset=2,
                                               acknowledge_types=[4, 1, 4])])])])
    response = consumer.client.call(request, 2)
    consumer.session_epoch += 1
    assert response.error_code == E.NONE and response.acquisition_lock_timeout_ms == 30000
    assert [p.error_code for t in response.responses for p in t.partitions] == [E.NONE]
    # renewed records stay acquired: acknowledging them works, the accepted one does not
    response = consumer.acknowledge({0: [(0, 0, [1]), (2, 2, [1])]}, version=2)
    assert [p.error_code for t in response.responses for p in t.partitions] == [E.NONE]
    # a ShareFetch carrying renewals must ask for nothing else
    response = consumer.fetch(version=2, is_renew_ack=True)
    assert (response.error_code, response.error_message) == (E.INVALID_REQUEST, None)


def test_read_committed_share_group(target, connect, group, one_partition):
    """share.isolation.level=read_committed: records of aborted transactions and transaction
    markers are never delivered, and nothing past the last stable offset is."""
    import confluent_kafka as ck
    name = one_partition[0]
    admin = connect()
    assert alter_group_configs(admin, group, ("share.auto.offset.reset", "earliest", 0),
                               ("share.isolation.level", "read_committed", 0)) == (E.NONE, None)
    producer = ck.Producer({"bootstrap.servers": f"127.0.0.1:{target.port}",
                            "transactional.id": unique("share-txn"), "linger.ms": 0})
    producer.init_transactions(30)
    for values, commit in ((["a1", "a2"], True), (["b1", "b2"], False), (["c1"], True)):
        producer.begin_transaction()
        for v in values:
            producer.produce(name, v.encode(), partition=0)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    producer.begin_transaction()                # left open: above the last stable offset
    producer.produce(name, b"d1", partition=0)
    producer.flush(30)
    consumer = ShareConsumer(connect(), group, one_partition)
    consumer.heartbeat()
    consumer.until_assigned(lambda: consumer.assigned == {0})
    # a1 a2 (0-1), COMMIT (2), b1 b2 (3-4), ABORT (5), c1 (6), COMMIT (7), d1 (8, open):
    # the markers are acquired (the consumer acknowledges them as gaps), the aborted records
    # never are, nor d1 while its transaction is open
    assert consumer.fetch_until(6) == [(0, 2, 1), (5, 7, 1)]
    response = consumer.fetch(max_wait_ms=300)
    assert acquired(response) == []
    producer.commit_transaction(30)
    assert consumer.fetch_until(2) == [(8, 9, 1)]


def test_share_fetch_waits_for_records(target, connect, group, one_partition):
    """A ShareFetch with nothing to acquire waits (up to MaxWaitMs) and is answered as soon as
    a record arrives; one that never gets any is answered after MaxWaitMs, empty."""
    import threading
    consumer = started(connect, group, one_partition)
    began = time.monotonic()
    empty = consumer.fetch(max_wait_ms=1000)
    waited = time.monotonic() - began
    assert empty.error_code == E.NONE and acquired(empty) == [] and 0.9 <= waited < 5
    threading.Timer(0.5, lambda: produce(RawClient(target.port), one_partition[0], 1)).start()
    began = time.monotonic()
    response = consumer.fetch(max_wait_ms=10000)
    assert acquired(response) == [(0, 0, 1)] and time.monotonic() - began < 5


def test_describe_offsets_of_unknown_topic(target, connect, group):
    g = describe_offsets(connect(), group, "no-such-topic", partitions=(0, 1))
    assert g.error_code == E.NONE
    assert [(t.topic_name, str(t.topic_id), [(p.partition_index, p.start_offset, p.leader_epoch,
                                              p.lag, p.error_code) for p in t.partitions])
            for t in g.topics] == [("no-such-topic", "00000000-0000-0000-0000-000000000000",
                                    [(0, -1, 0, -1, 0), (1, -1, 0, -1, 0)])]


def test_share_fetch_for_a_group_that_does_not_exist(target, connect, one_partition):
    """A ShareFetch naming a group nobody joined acquires nothing: no share partition is
    initialized for it (and the broker keeps no state for it)."""
    produce(connect(), one_partition[0], 3)
    stranger = ShareConsumer(connect(), unique("no-such-share-group"), one_partition)
    response = stranger.fetch(max_wait_ms=500)
    assert response.error_code == E.NONE and acquired(response) == []
    produce(connect(), one_partition[0], 2, start=3)
    got = []
    for _ in range(4):
        response = stranger.fetch(max_wait_ms=500)
        got += acquired(response)
    # nothing is ever acquired; the partition answers UNKNOWN_SERVER_ERROR (Kafka: once its
    # attempt to initialize the share partition failed)
    assert got == []
    assert [(p.partition_index, p.error_code) for t in response.responses
            for p in t.partitions] == [(0, E.UNKNOWN_SERVER_ERROR)]


def test_a_closed_connection_releases_its_sessions_records(target, connect, group,
                                                            one_partition):
    """A share consumer whose connection closes without ending its session: the session ends
    with it and what it acquired is released (Kafka's disconnect listener)."""
    a = started(connect, group, one_partition)
    b = ShareConsumer(connect(), group, one_partition)
    b.heartbeat()
    b.until_assigned(lambda: b.assigned == {0})
    produce(connect(), one_partition[0], 3)
    assert a.fetch_until(3) == [(0, 2, 1)]
    assert acquired(b.fetch(max_wait_ms=100)) == []
    a.client.close()                       # the consumer's process dies: no -1 epoch sent
    began = time.monotonic()
    # its session ends with its connection and its records go to b at once, as second
    # deliveries (not after the 30 s lock)
    assert b.fetch_until(3, timeout=10) == [(0, 2, 2)]
    assert time.monotonic() - began < 5


def test_a_member_that_left_still_closes_its_session_with_acknowledgements(
        target, connect, group, one_partition):
    """A share consumer closing sends its leave heartbeat and then its last acknowledgements
    at epoch -1 (librdkafka does, in that order). Leaving the group does not end the share
    session (the group coordinator does not tell the share partitions' leader of it): the
    acknowledgements apply, and the session closes, releasing only what was not
    acknowledged."""
    a = started(connect, group, one_partition)
    b = ShareConsumer(connect(), group, one_partition)
    b.heartbeat()
    b.until_assigned(lambda: b.assigned == {0})
    produce(connect(), one_partition[0], 4)
    assert a.fetch_until(4) == [(0, 3, 1)]
    left = a.heartbeat(-1)
    assert (left.error_code, left.member_epoch) == (E.NONE, -1)
    # still a's, after its leave: b acquires nothing
    assert acquired(b.fetch(max_wait_ms=300)) == []
    closed = a.acknowledge({0: [(0, 1, [1])]}, epoch=-1)
    assert closed.error_code == E.NONE, closed
    assert [(p.partition_index, p.error_code) for t in closed.responses
            for p in t.partitions] == [(0, E.NONE)]
    # accepted records are done; the two not acknowledged go to b as second deliveries
    assert b.fetch_until(2) == [(2, 3, 2)]
    assert acquired(b.fetch(max_wait_ms=300)) == []
    assert a.acknowledge({0: [(2, 2, [1])]}, epoch=1).error_code == E.SHARE_SESSION_NOT_FOUND


def test_rejoin_with_epoch_zero_keeps_the_member(target, connect, group, topic):
    a = ShareMember(connect(), group, topic)
    a.heartbeat()
    a.until_assigned(lambda: a.assigned == {0, 1, 2})
    epoch = a.epoch
    again = a.heartbeat(0)
    assert (again.error_code, again.member_epoch) == (E.NONE, epoch)
    assert {p for t in again.assignment.topic_partitions for p in t.partitions} == {0, 1, 2}
    (d,) = describe(connect(), group)
    assert [(m.member_id, m.member_epoch) for m in d.members] == [(a.member_id, epoch)]


def test_record_limit_splits_a_batch_between_members(target, connect, group, one_partition):
    a = started(connect, group, one_partition)
    b = ShareConsumer(connect(), group, one_partition)
    b.heartbeat()
    b.until_assigned(lambda: b.assigned == {0})
    produce(connect(), one_partition[0], 6)       # one batch of 6
    # ShareAcquireMode 1 (record_limit): at most MaxRecords, even inside a batch
    assert a.fetch_until(2, version=2, max_records=2, share_acquire_mode=1) == [(0, 1, 1)]
    assert b.fetch_until(3, version=2, max_records=3, share_acquire_mode=1) == [(2, 4, 1)]
    # batch-optimized (0): the rest of the batch, past MaxRecords
    assert a.fetch_until(1, version=2, max_records=1, share_acquire_mode=0) == [(5, 5, 1)]


def test_renew_refused_when_the_group_turns_it_off(target, connect, group, one_partition):
    assert alter_group_configs(connect(), group, ("share.renew.acknowledge.enable", "false",
                                                  0)) == (E.NONE, None)
    consumer = started(connect, group, one_partition)
    produce(connect(), one_partition[0], 1)
    assert consumer.fetch_until(1, version=2) == [(0, 0, 1)]
    from protocol.messages import ShareAcknowledgeRequest as A
    response = consumer.client.call(A(
        group_id=group, member_id=consumer.member_id, share_session_epoch=consumer.session_epoch,
        is_renew_ack=True, topics=[A.AcknowledgeTopic(topic_id=one_partition[1], partitions=[
            A.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                A.AcknowledgementBatch(first_offset=0, last_offset=0,
                                       acknowledge_types=[4])])])]), 2)
    consumer.session_epoch += 1
    assert [(p.error_code, p.error_message) for t in response.responses
            for p in t.partitions] == [(E.INVALID_RECORD_STATE, "Renewing acquisition locks "
                                        "is not enabled for the group.")]
    # the record is still acquired: accepting it works
    response = consumer.acknowledge({0: [(0, 0, [1])]}, version=2)
    assert [p.error_code for t in response.responses for p in t.partitions] == [E.NONE]


def test_heartbeat_interval_follows_the_group_config(target, connect, group, topic):
    assert alter_group_configs(connect(), group, ("share.heartbeat.interval.ms", "6000", 0)) \
        == (E.NONE, None)
    member = ShareMember(connect(), group, topic)
    response = member.heartbeat()
    assert (response.error_code, response.heartbeat_interval_ms) == (E.NONE, 6000)


def test_kafka_configs_tool_sets_a_share_groups_configs(target, group):
    """Kafka's own kafka-configs (ConfigCommand) on the groups entity, as docs/share-groups.md
    tells a user to set share.auto.offset.reset."""
    from .test_broker_configs_conformance import kafka_configs
    out = kafka_configs(target, "--alter", "--entity-type", "groups", "--entity-name", group,
                        "--add-config", "share.auto.offset.reset=earliest")
    assert out.strip() == f"Completed updating config for group {group}."
    out = kafka_configs(target, "--describe", "--entity-type", "groups", "--entity-name", group)
    assert out.splitlines()[0] == f"Dynamic configs for group {group} are:"
    assert "share.auto.offset.reset=earliest sensitive=false synonyms=" \
        "{DYNAMIC_GROUP_CONFIG:share.auto.offset.reset=earliest, " \
        "DEFAULT_CONFIG:share.auto.offset.reset=latest}" in out


def test_assignment_interval_keeps_the_last_target_until_a_heartbeat_after_it(
        target, connect, group, topic):
    """share.assignment.interval.ms (KIP-1263): a member that joins within the interval of the
    last target keeps that target (nothing for it, the target's epoch) and gets its partitions
    at a heartbeat once the interval is over."""
    admin = connect()
    assert alter_group_configs(admin, group, ("share.assignment.interval.ms", "3000", 0)) == \
        (E.NONE, None)
    a = ShareMember(connect(), group, topic)
    a.heartbeat()
    a.until_assigned(lambda: a.assigned == {0, 1, 2})
    (before,) = describe(admin, group)
    b = ShareMember(connect(), group, topic)
    joined = b.heartbeat()
    assert joined.error_code == E.NONE
    assert joined.member_epoch == before.assignment_epoch      # the last target's epoch
    assert b.assigned == set()
    (after,) = describe(admin, group)
    assert (after.group_epoch, after.assignment_epoch) == \
        (before.group_epoch + 1, before.assignment_epoch)
    b.until_assigned(lambda: b.assigned)
    a.until_assigned(lambda: a.assigned and not a.assigned & b.assigned)
    assert a.assigned | b.assigned == {0, 1, 2}
    (settled,) = describe(admin, group)
    assert settled.assignment_epoch == settled.group_epoch == after.group_epoch
