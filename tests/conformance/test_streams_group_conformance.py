"""Differential conformance of streams groups (KIP-1071) with raw requests: every scenario runs
against a real Apache Kafka 4.3.1 broker and against kbroker (the ``target`` fixture) and
asserts Kafka's answers: StreamsGroupHeartbeat with a topology, each status code, the internal
topics created with the partition counts Kafka derives, the assignment's shape,
StreamsGroupDescribe, the group APIs that know streams groups, and the ``streams.version``
feature.

Each group gets ``streams.initial.rebalance.delay.ms`` 0 as its own config (Kafka's broker
default is 3000, kbroker's 100), except the scenario of the delay itself.
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
        assert alter_group_configs(client, group, ("streams.initial.rebalance.delay.ms", "0",
                                                   0)) == (E.NONE, None)
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
    print(target.name, "first", first)
    assert first.member_epoch == 1, first
    assert [(t.subtopology_id, t.partitions) for t in first.active_tasks] == []
    ready = heartbeat_until(member, lambda r: r.error_code or (r.active_tasks and not r.status))
    print(target.name, "ready", ready)
    assert ready.error_code == E.NONE and ready.status == [], ready
    assert member.active == {"0": [0, 1, 2], "1": [0, 1, 2]}
    assert member.standby == {}
    admin = connect()
    assert partition_count(admin, f"{group}-words-repartition") == 3
    assert partition_count(admin, f"{group}-counts-changelog") == 3
