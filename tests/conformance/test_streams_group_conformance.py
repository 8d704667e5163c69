"""Differential conformance of streams groups (KIP-1071) with raw requests: every scenario runs
against a real Apache Kafka 4.3.1 broker and against kbroker (the ``target`` fixture) and
asserts Kafka's answers: StreamsGroupHeartbeat with a topology, each status code, the internal
topics created with the partition counts Kafka derives, the assignment's shape,
StreamsGroupDescribe, the group APIs that know streams groups, and the ``streams.version``
feature.

Each group gets ``streams.initial.rebalance.delay.ms`` and ``streams.assignment.interval.ms`` 0
as its own configs (Kafka's broker defaults are 3000 and 1000, kbroker's 100 and 0), except the
scenario of the delay itself. Kafka's group coordinator sees a new topic a moment after it was
created (its metadata image), so a scenario that creates topics waits a second before it
heartbeats.
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
    OffsetCommitRequest,
    StreamsGroupDescribeRequest,
    StreamsGroupHeartbeatRequest,
)
from tests.support import RawClient, unique

from . import topics
from .test_share_group_conformance import alter_group_configs

R = StreamsGroupHeartbeatRequest
STALE_TOPOLOGY, MISSING_SOURCE_TOPICS, INCORRECTLY_PARTITIONED_TOPICS = 0, 1, 2
MISSING_INTERNAL_TOPICS, SHUTDOWN_APPLICATION, ASSIGNMENT_DELAYED = 3, 4, 5


def word_count(app: str, source: str, epoch: int = 1) -> object:
    """Kafka Streams' word count topology as its client sends it: subtopology 0 reads the
    source and writes the repartition topic, subtopology 1 reads it into a store."""
    rep, changelog = f"{app}-words-repartition", f"{app}-counts-changelog"
    return R.Topology(epoch=epoch, subtopologies=[
        R.Subtopology(subtopology_id="0", source_topics=[source], source_topic_regex=[],
                      state_changelog_topics=[], repartition_sink_topics=[rep],
                      repartition_source_topics=[], copartition_groups=[]),
        R.Subtopology(subtopology_id="1", source_topics=[], source_topic_regex=[],
                      state_changelog_topics=[R.TopicInfo(name=changelog, partitions=0,
                                                          replication_factor=0,
                                                          topic_configs=[])],
                      repartition_sink_topics=[],
                      repartition_source_topics=[R.TopicInfo(name=rep, partitions=0,
                                                             replication_factor=0,
                                                             topic_configs=[])],
                      copartition_groups=[]),
    ])


class StreamsMember:
    """One streams-group member on its own connection, heartbeating as Kafka Streams does:
    the topology and its process at epoch 0, then its owned tasks."""

    def __init__(self, client: RawClient, group: str, topology, member_id: str | None = None):
        self.client = client
        self.group = group
        self.topology = topology
        self.member_id = member_id or str(uuid.uuid4())
        self.process_id = str(uuid.uuid4())
        self.epoch = 0
        self.active: dict[str, list[int]] = {}
        self.standby: dict[str, list[int]] = {}

    def heartbeat(self, epoch: int | None = None, **fields):
        epoch = self.epoch if epoch is None else epoch
        joining = epoch == 0
        request = dict(group_id=self.group, member_id=self.member_id, member_epoch=epoch,
                       endpoint_information_epoch=0,
                       rebalance_timeout_ms=300000 if joining else -1,
                       topology=self.topology if joining else None,
                       process_id=self.process_id if joining else None,
                       client_tags=[] if joining else None,
                       active_tasks=self._ids(self.active), standby_tasks=self._ids(self.standby),
                       warmup_tasks=[])
        request.update(fields)
        response = self.client.call(R(**request), 0)
        if response.error_code == E.NONE:
            self.epoch = response.member_epoch
            if response.active_tasks is not None:
                self.active = {t.subtopology_id: sorted(t.partitions)
                               for t in response.active_tasks}
                self.standby = {t.subtopology_id: sorted(t.partitions)
                                for t in response.standby_tasks}
        return response

    @staticmethod
    def _ids(tasks: dict) -> list:
        return [R.TaskIds(subtopology_id=s, partitions=ps) for s, ps in sorted(tasks.items())]


def statuses(response) -> list:
    return sorted((s.status_code, s.status_detail) for s in response.status or ())


@pytest.fixture
def app(target) -> tuple[str, str]:
    """(application id = group, source topic with 3 partitions), the group's initial delay 0."""
    client = RawClient(target.port, client_id="conformance-admin")
    try:
        source = topics.create_topic(client, unique("sg-words"), 3)
        group = unique("sg-app")
        assert alter_group_configs(client, group, ("streams.initial.rebalance.delay.ms", "0", 0),
                                   ("streams.assignment.interval.ms", "0", 0)) == (E.NONE, None)
        time.sleep(1)   # the coordinator's metadata image knows the topic
    finally:
        client.close()
    return group, source


def partition_count(client: RawClient, name: str) -> int | None:
    meta = client.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                       allow_auto_topic_creation=False), 12)
    found = meta.topics[0]
    return None if found.error_code else len(found.partitions)


def heartbeat_until(member: StreamsMember, done, seconds: float = 15.0):
    deadline = time.monotonic() + seconds
    response = member.heartbeat()
    while not done(response) and time.monotonic() < deadline:
        time.sleep(0.2)
        response = member.heartbeat()
    return response


def test_first_heartbeat_creates_internal_topics(target, connect, app):
    group, source = app
    member = StreamsMember(connect(), group, word_count(group, source))
    first = member.heartbeat()
    assert first.error_code == E.NONE, first
    assert statuses(first) == [(MISSING_INTERNAL_TOPICS, f"Internal topics are missing: "
                                f"{group}-counts-changelog, {group}-words-repartition")] or \
        statuses(first) == [(MISSING_INTERNAL_TOPICS, f"Internal topics are missing: "
                             f"{group}-words-repartition, {group}-counts-changelog")], first
    assert first.member_epoch == 2, first     # a new group is at epoch 1
    assert [(t.subtopology_id, t.partitions) for t in first.active_tasks] == []
    ready = heartbeat_until(member, lambda r: r.error_code or (r.active_tasks and not r.status))
    assert ready.error_code == E.NONE and ready.status == [], ready
    assert member.active == {"0": [0, 1, 2], "1": [0, 1, 2]}
    assert member.standby == {}
    admin = connect()
    assert partition_count(admin, f"{group}-words-repartition") == 3
    assert partition_count(admin, f"{group}-counts-changelog") == 3


def describe(client: RawClient, *groups: str) -> list:
    return client.call(StreamsGroupDescribeRequest(group_ids=list(groups),
                                                   include_authorized_operations=False),
                       0).groups


def test_api_versions_and_streams_version_feature(target, connect):
    response = connect().call(ApiVersionsRequest(client_software_name="conformance",
                                                 client_software_version="1"), 4)
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert versions[StreamsGroupHeartbeatRequest.api_key] == (0, 0)
    assert versions[StreamsGroupDescribeRequest.api_key] == (0, 0)
    finalized = {f.name: (f.min_version_level, f.max_version_level)
                 for f in response.finalized_features}
    supported = {f.name: (f.min_version, f.max_version) for f in response.supported_features}
    assert finalized["streams.version"] == (1, 1)
    assert supported["streams.version"] == (0, 1)


def test_missing_source_topic(target, connect, app):
    group, _source = app
    absent = unique("sg-absent")
    member = StreamsMember(connect(), group, word_count(group, absent))
    first = member.heartbeat()
    assert first.error_code == E.NONE, first
    assert statuses(first) == [(MISSING_SOURCE_TOPICS, f"Source topics {absent} are missing.")]
    assert first.member_epoch == 2 and first.active_tasks == []
    assert partition_count(connect(), f"{group}-words-repartition") is None
    (d,) = describe(connect(), group)
    assert (d.group_state, d.group_epoch, d.assignment_epoch) == ("NotReady", 2, 2)
    assert [s.subtopology_id for s in d.topology.subtopologies] == ["0", "1"]
    assert d.topology.subtopologies[1].state_changelog_topics[0].partitions == 0


def test_incorrectly_partitioned_internal_topic(target, connect, app):
    group, source = app
    admin = connect()
    topics.create_topic(admin, f"{group}-words-repartition", 2)
    time.sleep(1)
    member = StreamsMember(connect(), group, word_count(group, source))
    first = member.heartbeat()
    assert statuses(first) == [(INCORRECTLY_PARTITIONED_TOPICS,
                                f"Existing topic {group}-words-repartition has different number "
                                "of partitions: expected 3, found 2")], first
    assert partition_count(admin, f"{group}-counts-changelog") is None


def test_copartitioned_sources_with_different_partition_counts(target, connect, app):
    group, source = app
    admin = connect()
    other = topics.create_topic(admin, unique("sg-other"), 2)
    time.sleep(1)
    topology = R.Topology(epoch=0, subtopologies=[R.Subtopology(
        subtopology_id="0", source_topics=sorted([source, other]), source_topic_regex=[],
        state_changelog_topics=[], repartition_sink_topics=[], repartition_source_topics=[],
        copartition_groups=[R.CopartitionGroup(source_topics=[0, 1], source_topic_regex=[],
                                               repartition_source_topics=[])])])
    first = StreamsMember(connect(), group, topology).heartbeat()
    counts = {source: 3, other: 2}
    shown = ", ".join(f"{t}={counts[t]}" for t in sorted(counts))
    assert statuses(first) == [(INCORRECTLY_PARTITIONED_TOPICS, "Following topics do not have "
                                f"the same number of partitions: [{{{shown}}}]")], first


def test_two_members_share_the_tasks_after_revocation(target, connect, app):
    group, source = app
    a = StreamsMember(connect(), group, word_count(group, source))
    heartbeat_until(a, lambda r: r.error_code or (r.active_tasks and not r.status))
    assert a.active == {"0": [0, 1, 2], "1": [0, 1, 2]}
    epoch_a = a.epoch
    b = StreamsMember(connect(), group, word_count(group, source))
    joined = b.heartbeat()
    assert joined.error_code == E.NONE and joined.status == [], joined
    assert joined.member_epoch == epoch_a + 1
    assert joined.active_tasks == []          # a still holds every task
    revoking = a.heartbeat()
    assert revoking.member_epoch == epoch_a   # a keeps its epoch until it revoked
    kept = sum(len(p) for p in a.active.values())
    assert kept == 3, revoking
    (d,) = describe(connect(), group)
    assert d.group_state == "Reconciling"
    done = a.heartbeat()
    assert done.member_epoch == epoch_a + 1 and done.active_tasks is None
    got = b.heartbeat()
    assert got.member_epoch == epoch_a + 1
    assert sum(len(p) for p in b.active.values()) == 3
    every = sorted((s, p) for m in (a, b) for s, ps in m.active.items() for p in ps)
    assert every == [(s, p) for s in "01" for p in range(3)]
    (d,) = describe(connect(), group)
    assert (d.group_state, d.group_epoch, d.assignment_epoch) == \
        ("Stable", epoch_a + 1, epoch_a + 1)
    members = {mm.member_id: mm for mm in d.members}
    assert set(members) == {a.member_id, b.member_id}
    for m in (a, b):
        mm = members[m.member_id]
        assert (mm.member_epoch, mm.process_id, mm.topology_epoch, mm.is_classic) == \
            (epoch_a + 1, m.process_id, 1, False)
        assert (mm.instance_id, mm.rack_id, mm.client_host, mm.user_endpoint, mm.client_tags,
                mm.task_offsets, mm.task_end_offsets) == \
            (None, None, "/127.0.0.1", None, [], [], [])
        assert mm.client_id == m.client.client_id
        assert mm.assignment.standby_tasks == [] and mm.assignment.warmup_tasks == []
        assert {t.subtopology_id: sorted(t.partitions) for t in mm.assignment.active_tasks} == \
            m.active
        assert {t.subtopology_id: sorted(t.partitions)
                for t in mm.target_assignment.active_tasks} == m.active
    assert d.topology.epoch == 1
    assert (d.error_code, d.error_message, d.authorized_operations) == (E.NONE, None,
                                                                        -2147483648)
    sub1 = d.topology.subtopologies[1]
    assert [(t.name, t.partitions) for t in sub1.repartition_source_topics] == \
        [(f"{group}-words-repartition", 3)]
    # b leaves: a gets b's tasks at its next heartbeat
    left = b.heartbeat(-1)
    assert (left.error_code, left.member_epoch, left.status) == (E.NONE, -1, [])
    back = a.heartbeat()
    assert back.member_epoch == epoch_a + 2
    assert a.active == {"0": [0, 1, 2], "1": [0, 1, 2]}


def test_stale_topology_and_shutdown_application(target, connect, app):
    group, source = app
    a = StreamsMember(connect(), group, word_count(group, source, epoch=2))
    heartbeat_until(a, lambda r: r.error_code or (r.active_tasks and not r.status))
    b = StreamsMember(connect(), group, word_count(group, source, epoch=1))
    stale = b.heartbeat()
    assert stale.error_code == E.NONE
    assert statuses(stale) == [(STALE_TOPOLOGY, "The member's topology epoch 1 is behind the "
                                "group's topology epoch 2.")]
    newer = StreamsMember(connect(), group, word_count(group, source, epoch=3))
    refused = newer.heartbeat()
    assert (refused.error_code, refused.error_message) == \
        (E.INVALID_REQUEST, "Topology updates are not supported yet.")
    asked = a.heartbeat(shutdown_application=True)
    detail = (f"Streams group member {a.member_id} encountered a fatal error and requested a "
              "shutdown for the entire application.")
    assert (SHUTDOWN_APPLICATION, detail) in statuses(asked)
    told = b.heartbeat()
    assert (SHUTDOWN_APPLICATION, detail) in statuses(told)


def test_initial_rebalance_delay(target, connect):
    admin = connect()
    source = topics.create_topic(admin, unique("sg-words"), 1)
    group = unique("sg-app")
    assert alter_group_configs(admin, group, ("streams.initial.rebalance.delay.ms", "1500",
                                              0)) == (E.NONE, None)
    for name in (f"{group}-words-repartition", f"{group}-counts-changelog"):
        topics.create_topic(admin, name, 1)
    time.sleep(1)
    a = StreamsMember(connect(), group, word_count(group, source))
    first = a.heartbeat()
    assert statuses(first) == [(ASSIGNMENT_DELAYED, "Assignment delayed due to the configured "
                                "initial rebalance delay.")], first
    assert (first.member_epoch, first.active_tasks) == (1, [])
    got = heartbeat_until(a, lambda r: r.error_code or a.active, seconds=10)
    assert got.status == [] and a.active == {"0": [0], "1": [0]}, got


@pytest.mark.parametrize("fields,code,message", [
    (dict(member_id=""), E.INVALID_REQUEST, "MemberId can't be empty."),
    (dict(group_id=""), E.INVALID_REQUEST, "GroupId can't be empty."),
    (dict(rack_id=""), E.INVALID_REQUEST, "RackId can't be empty."),
    (dict(instance_id="i"), E.INVALID_REQUEST, "Static membership is not yet supported."),
    (dict(rebalance_timeout_ms=-1), E.INVALID_REQUEST,
     "RebalanceTimeoutMs must be provided in first request."),
    (dict(topology=None), E.INVALID_REQUEST, "Topology must be non-null when (re-)joining."),
    (dict(active_tasks=[R.TaskIds(subtopology_id="0", partitions=[0])]), E.INVALID_REQUEST,
     "ActiveTasks must be empty when (re-)joining."),
    (dict(active_tasks=None), E.INVALID_REQUEST,
     "ActiveTasks must be empty when (re-)joining."),
    (dict(warmup_tasks=[R.TaskIds(subtopology_id="0", partitions=[0])]), E.INVALID_REQUEST,
     "WarmupTasks are not supported yet."),
    (dict(member_epoch=-3), E.INVALID_REQUEST,
     "MemberEpoch is -3, but must be greater than or equal to -2."),
    (dict(member_epoch=1), E.GROUP_ID_NOT_FOUND, None),
    (dict(member_epoch=-1), E.GROUP_ID_NOT_FOUND, None),
    (dict(member_epoch=1, topology=word_count("app", "words")), E.INVALID_REQUEST,
     "Topology can only be provided when (re-)joining."),
])
def test_malformed_heartbeats(target, connect, app, fields, code, message):
    group, source = app
    member = StreamsMember(connect(), group, word_count(group, source))
    if fields.get("member_epoch") == 1 and message is None:
        fields = dict(fields, topology=None)
        message = f"Streams group {group} not found."
    elif fields.get("member_epoch") == -1:
        fields = dict(fields, topology=None)
        message = f"Group {group} not found."
    response = member.heartbeat(**fields)
    assert (response.error_code, response.error_message) == (code, message)


def test_invalid_topic_names_and_regexes_in_a_topology(target, connect, app):
    group, _source = app
    bad = StreamsMember(connect(), group, word_count(group, "no spaces")).heartbeat()
    assert (bad.error_code, bad.error_message) == (
        E.STREAMS_INVALID_TOPOLOGY, "Topic names no spaces are not valid topic names.")
    topology = word_count(group, "words")
    topology.subtopologies[0].source_topic_regex = ["wor.*"]
    regex = StreamsMember(connect(), group, topology).heartbeat()
    assert (regex.error_code, regex.error_message) == (
        E.INVALID_REQUEST, "Regular expressions for source topics are not supported yet.")


def test_changelog_partitions_set_is_an_invalid_topology(target, connect, app):
    group, source = app
    topology = word_count(group, source)
    topology.subtopologies[1].state_changelog_topics[0].partitions = 4
    response = StreamsMember(connect(), group, topology).heartbeat()
    assert (response.error_code, response.error_message) == (
        E.STREAMS_INVALID_TOPOLOGY, f"Changelog topic {group}-counts-changelog must have an "
                                    "undefined partition count, but it is set to 4.")


def test_group_apis_know_streams_groups(target, connect, app):
    group, source = app
    admin = connect()
    a = StreamsMember(connect(), group, word_count(group, source))
    heartbeat_until(a, lambda r: r.error_code or (r.active_tasks and not r.status))
    listed = admin.call(ListGroupsRequest(states_filter=[], types_filter=["streams"]), 5)
    assert [(g.group_type, g.protocol_type, g.group_state) for g in listed.groups
            if g.group_id == group] == [("streams", "streams", "Stable")]
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

    def commit(member_id: str, epoch: int) -> int:
        C = OffsetCommitRequest
        response = admin.call(C(group_id=group, generation_id_or_member_epoch=epoch,
                                member_id=member_id, group_instance_id=None,
                                retention_time_ms=-1, topics=[C.OffsetCommitRequestTopic(
                                    name=source, partitions=[C.OffsetCommitRequestPartition(
                                        partition_index=0, committed_offset=7,
                                        committed_leader_epoch=-1,
                                        committed_metadata="")])]), 9)
        return response.topics[0].partitions[0].error_code

    assert commit(a.member_id, a.epoch) == E.NONE
    assert commit(a.member_id, a.epoch + 1) == E.STALE_MEMBER_EPOCH
    assert commit("someone", a.epoch) == E.UNKNOWN_MEMBER_ID
    assert commit("", -1) == E.UNKNOWN_MEMBER_ID

    def fetch(member_id, epoch) -> tuple:
        from protocol.messages import OffsetFetchRequest as O
        response = admin.call(O(groups=[O.OffsetFetchRequestGroup(
            group_id=group, member_id=member_id, member_epoch=epoch,
            topics=[O.OffsetFetchRequestTopics(name=source, partition_indexes=[0])])],
            require_stable=True), 9)
        (g,) = response.groups
        return g.error_code, [(p.partition_index, p.committed_offset)
                              for t in g.topics for p in t.partitions]

    assert fetch(a.member_id, a.epoch) == (E.NONE, [(0, 7)])
    assert fetch(None, -1) == (E.NONE, [(0, 7)])                  # an admin client
    assert fetch(a.member_id, a.epoch - 1)[0] == E.STALE_MEMBER_EPOCH
    assert fetch("someone", a.epoch)[0] == E.UNKNOWN_MEMBER_ID
    deleted = admin.call(DeleteGroupsRequest(groups_names=[group]), 2)
    assert deleted.results[0].error_code == E.NON_EMPTY_GROUP

    def delete_offset(topic: str) -> tuple:
        from protocol.messages import OffsetDeleteRequest as D
        response = admin.call(D(group_id=group, topics=[D.OffsetDeleteRequestTopic(
            name=topic, partitions=[D.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
        return response.error_code, [p.error_code for t in response.topics
                                     for p in t.partitions]

    # the source topic is the running group's: its offsets stay
    assert delete_offset(source) == (E.NONE, [E.GROUP_SUBSCRIBED_TO_TOPIC])
    assert a.heartbeat(-1).error_code == E.NONE
    (d,) = describe(admin, group)
    assert (d.group_state, d.members) == ("Empty", [])
    assert delete_offset(source) == (E.NONE, [E.NONE])
    assert fetch(None, -1) == (E.NONE, [(0, -1)])
    deleted = admin.call(DeleteGroupsRequest(groups_names=[group]), 2)
    assert deleted.results[0].error_code == E.NONE
    (d,) = describe(admin, group)
    assert (d.error_code, d.error_message) == (E.GROUP_ID_NOT_FOUND,
                                               f"Group {group} not found.")


def test_standby_replicas_never_on_the_active_process(target, connect, app):
    group, source = app
    admin = connect()
    assert alter_group_configs(admin, group, ("streams.num.standby.replicas", "1", 0)) == \
        (E.NONE, None)
    a = StreamsMember(connect(), group, word_count(group, source))
    heartbeat_until(a, lambda r: r.error_code or (r.active_tasks and not r.status))
    b = StreamsMember(connect(), group, word_count(group, source))
    b.heartbeat()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        ra, rb = a.heartbeat(), b.heartbeat()
        assert ra.error_code == E.NONE and rb.error_code == E.NONE, (ra, rb)
        (d,) = describe(admin, group)
        if d.group_state == "Stable":
            break
        time.sleep(0.1)
    assert d.group_state == "Stable", d
    actives = {(s, p): m.member_id for m in (a, b) for s, ps in m.active.items() for p in ps}
    standbys = [((s, p), m.member_id) for m in (a, b) for s, ps in m.standby.items()
                for p in ps]
    assert sorted(actives) == [(s, p) for s in "01" for p in range(3)]
    # only the stateful subtopology (1, with the store) has standbys, one per task
    assert sorted(task for task, _m in standbys) == [("1", 0), ("1", 1), ("1", 2)]
    assert all(actives[task] != member for task, member in standbys)
    described = {mm.member_id: mm for mm in d.members}
    assert {t.subtopology_id: sorted(t.partitions)
            for t in described[b.member_id].assignment.standby_tasks} == b.standby


def test_endpoints_for_interactive_queries_and_internal_topic_configs(target, connect, app):
    from .test_admin_conformance import topic_config
    group, source = app
    topology = word_count(group, source)
    topology.subtopologies[1].state_changelog_topics[0].topic_configs = [
        R.KeyValue(key="cleanup.policy", value="compact")]
    a = StreamsMember(connect(), group, topology)
    endpoint = R.Endpoint(host="app-a.local", port=8080)
    first = a.heartbeat(user_endpoint=endpoint)
    assert first.error_code == E.NONE, first
    ready = heartbeat_until(a, lambda r: r.error_code or (r.active_tasks and not r.status))
    assert ready.status == [], ready
    admin = connect()
    assert topic_config(admin, f"{group}-counts-changelog", "cleanup.policy", "compact") == \
        "compact"
    # a member whose endpoint epoch is behind gets every member's endpoint and partitions
    behind = a.heartbeat(endpoint_information_epoch=0)
    assert behind.endpoint_information_epoch > 0, behind
    [entry] = behind.partitions_by_user_endpoint
    assert (entry.user_endpoint.host, entry.user_endpoint.port) == ("app-a.local", 8080)
    assert sorted((tp.topic, sorted(tp.partitions)) for tp in entry.active_partitions) == \
        sorted([(source, [0, 1, 2]), (f"{group}-words-repartition", [0, 1, 2])])
    assert entry.standby_partitions == []
    current = a.heartbeat(endpoint_information_epoch=behind.endpoint_information_epoch)
    assert current.partitions_by_user_endpoint is None
    (d,) = describe(admin, group)
    (mm,) = d.members
    assert (mm.user_endpoint.host, mm.user_endpoint.port) == ("app-a.local", 8080)


def test_assignment_interval_delays_a_new_target(target, connect):
    admin = connect()
    source = topics.create_topic(admin, unique("sg-words"), 2)
    group = unique("sg-app")
    assert alter_group_configs(admin, group, ("streams.initial.rebalance.delay.ms", "0", 0),
                               ("streams.assignment.interval.ms", "2000", 0)) == (E.NONE, None)
    time.sleep(1)
    a = StreamsMember(connect(), group, word_count(group, source))
    heartbeat_until(a, lambda r: r.error_code or (r.active_tasks and not r.status))
    assert a.active == {"0": [0, 1], "1": [0, 1]}
    b = StreamsMember(connect(), group, word_count(group, source))
    joined = b.heartbeat()
    assert statuses(joined) == [(ASSIGNMENT_DELAYED, "Assignment delayed due to the configured "
                                 "assignment interval.")], joined
    assert joined.active_tasks == []
    # once the interval has passed, the new target splits the tasks
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not b.active:
        time.sleep(0.3)
        a.heartbeat()
        b.heartbeat()
    assert sum(len(p) for p in b.active.values()) == 2


def test_group_configs_set_the_heartbeat_interval(target, connect, app):
    group, source = app
    admin = connect()
    assert alter_group_configs(admin, group, ("streams.heartbeat.interval.ms", "6000", 0)) == \
        (E.NONE, None)
    first = StreamsMember(connect(), group, word_count(group, source)).heartbeat()
    assert (first.error_code, first.heartbeat_interval_ms) == (E.NONE, 6000)
    # below the broker's minimum (Kafka's 5000; kbroker's stand-in 250, so 100 for both)
    code, message = alter_group_configs(admin, group, ("streams.heartbeat.interval.ms", "100",
                                                       0))
    assert code == E.INVALID_CONFIG, message


def test_transactional_offset_commits_of_a_streams_group(target, connect, app):
    """Kafka Streams with exactly_once_v2 commits offsets in its transactions: TxnOffsetCommit
    with the member's id and epoch is accepted, one without any member information too (Kafka's
    NO_OP for a transactional commit), one from an unknown member is not."""
    from .test_transaction_conformance import (TV1_CLIENTS, Producer,
                                               _wait_for_transaction_coordinator)
    group, source = app
    assert _wait_for_transaction_coordinator(target.port) is None
    a = StreamsMember(connect(), group, word_count(group, source))
    heartbeat_until(a, lambda r: r.error_code or (r.active_tasks and not r.status))
    producer = Producer(connect(), TV1_CLIENTS["kafka-python"])
    assert producer.init().error_code == E.NONE
    assert producer.add_offsets(group) == E.NONE
    assert producer.txn_offset_commit(group, {(source, 0): 5}, generation=a.epoch,
                                      member=a.member_id) == [(source, 0, E.NONE)]
    assert producer.txn_offset_commit(group, {(source, 1): 6}) == [(source, 1, E.NONE)]
    assert producer.txn_offset_commit(group, {(source, 2): 7}, generation=a.epoch,
                                      member="someone") == [(source, 2, E.UNKNOWN_MEMBER_ID)]
    assert producer.end(True).error_code == E.NONE
