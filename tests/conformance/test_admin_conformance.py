"""Differential conformance of the admin APIs that topic tools and UIs call: DeleteRecords,
IncrementalAlterConfigs, AlterConfigs, DescribeLogDirs, the ACL APIs and DescribeProducers, and
those of placement and leadership (OffsetForLeaderEpoch, DescribeTopicPartitions, ElectLeaders,
the reassignment APIs, AlterReplicaLogDirs, DescribeQuorum, ListConfigResources). Each
scenario sends the same raw requests to a real Apache Kafka 4.x broker and to kbroker (the
``target`` fixture) and asserts Kafka's answers, observed on the real broker.

Where kbroker answers differently on purpose, the test says so at that spot: this broker's own
settings are fixed when it starts, so a change to a BROKER or BROKER_LOGGER resource is refused
(INVALID_REQUEST) where Kafka stores it; and kbroker in memory has no log directory path or disk
size to report.
"""
from __future__ import annotations

import time
import uuid

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (
    AlterConfigsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
    DeleteRecordsRequest,
    DescribeAclsRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    FetchRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from protocol.records import SimpleRecord, build_batch
from tests.support import RawClient, unique

from . import topics

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
SOURCE_DYNAMIC_TOPIC, SOURCE_DEFAULT = 1, 5


@pytest.fixture
def client(target):
    c = RawClient(target.port, client_id="conformance-admin")
    yield c
    c.close()


def create_topic(client: RawClient, partitions: int = 2) -> str:
    return topics.create_topic(client, unique("conformance-admin"), partitions)


def node_id(client: RawClient) -> int:
    meta = client.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), 9)
    return meta.brokers[0].node_id


def produce(client: RawClient, topic: str, n: int, producer_id: int = -1,
            producer_epoch: int = -1) -> None:
    batch = build_batch([SimpleRecord(key=None, value=f"r{i}".encode(),
                                      timestamp=1_700_000_000_000 + i)
                         for i in range(n)], producer_id=producer_id,
                        producer_epoch=producer_epoch, base_sequence=0 if producer_id >= 0 else -1)
    P = ProduceRequest
    deadline = time.monotonic() + 30
    while True:  # Kafka's new partition may not have its leader in place yet
        response = client.call(P(acks=-1, timeout_ms=30000, topic_data=[P.TopicProduceData(
            name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])]), 9)
        error = response.responses[0].partition_responses[0].error_code
        if error != E.NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert error == E.NONE, response


def delete_records(client, topic: str, partition: int, offset: int) -> tuple[int, int]:
    D = DeleteRecordsRequest
    response = client.call(D(topics=[D.DeleteRecordsTopic(name=topic, partitions=[
        D.DeleteRecordsPartition(partition_index=partition, offset=offset)])],
        timeout_ms=30000), 2)
    result = response.topics[0].partitions[0]
    return result.error_code, result.low_watermark


def incremental(client, resources, validate_only: bool = False) -> list[tuple[int, str | None]]:
    R = IncrementalAlterConfigsRequest
    response = client.call(R(resources=[
        R.AlterConfigsResource(resource_type=rtype, resource_name=name, configs=[
            R.AlterableConfig(name=key, config_operation=op, value=value)
            for key, op, value in configs])
        for rtype, name, configs in resources], validate_only=validate_only), 1)
    return [(r.error_code, r.error_message) for r in response.responses]


def alter(client, rtype: int, name: str, configs: dict) -> tuple[int, str | None]:
    R = AlterConfigsRequest
    response = client.call(R(resources=[R.AlterConfigsResource(
        resource_type=rtype, resource_name=name,
        configs=[R.AlterableConfig(name=k, value=v) for k, v in configs.items()])],
        validate_only=False), 2)
    return response.responses[0].error_code, response.responses[0].error_message


def topic_config(client, topic: str, name: str, expected):
    """A topic config as DescribeConfigs shows it: (value, source) when ``expected`` is such a
    pair, else the value. Read again until it shows ``expected`` or 10 s pass, since Kafka's
    broker applies a change from its controller's metadata a moment after acknowledging it."""
    R = DescribeConfigsRequest
    deadline = time.monotonic() + 10
    while True:
        response = client.call(R(resources=[R.DescribeConfigsResource(
            resource_type=TOPIC, resource_name=topic, configuration_keys=[name])],
            include_synonyms=False, include_documentation=False), 4)
        [entry] = response.results[0].configs
        got = (entry.value, entry.config_source) if isinstance(expected, tuple) else entry.value
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def expect_config(client, topic: str, name: str, expected) -> None:
    got = topic_config(client, topic, name, expected)
    assert got == expected, f"{name}: {got!r}, expected {expected!r}"


# ------------------------------------------------------------------------------ DeleteRecords

def test_delete_records(target, client):
    topic = create_topic(client)
    produce(client, topic, 10)
    assert delete_records(client, topic, 0, 4) == (E.NONE, 4)
    assert delete_records(client, topic, 0, 2) == (E.NONE, 4)     # below the start: no change
    assert delete_records(client, topic, 0, 11) == (E.OFFSET_OUT_OF_RANGE, -1)
    assert delete_records(client, topic, 0, -2) == (E.OFFSET_OUT_OF_RANGE, -1)
    assert delete_records(client, topic, 1, 1) == (E.OFFSET_OUT_OF_RANGE, -1)  # empty
    assert delete_records(client, topic, 7, 1) == (E.UNKNOWN_TOPIC_OR_PARTITION, -1)
    assert delete_records(client, unique("missing"), 0, 1) == (E.UNKNOWN_TOPIC_OR_PARTITION, -1)
    assert delete_records(client, "__consumer_offsets", 0, -1) == (E.INVALID_TOPIC_EXCEPTION, -1)
    L = ListOffsetsRequest
    offsets = client.call(L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-2)])]), 7)
    assert offsets.topics[0].partitions[0].offset == 4
    F = FetchRequest
    fetched = client.call(F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                            isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                                    partition=0, fetch_offset=2, log_start_offset=-1,
                                    partition_max_bytes=1 << 20)])],
                            forgotten_topics_data=[], rack_id=""), 12)
    partition = fetched.responses[0].partitions[0]
    assert (partition.error_code, partition.high_watermark, partition.log_start_offset) == (
        E.OFFSET_OUT_OF_RANGE, -1, -1)      # the error answer carries no offsets
    assert delete_records(client, topic, 0, -1) == (E.NONE, 10)  # -1: the high watermark


# ---------------------------------------------------------------- IncrementalAlterConfigs

def test_incremental_alter_configs_operations(target, client):
    topic = create_topic(client)
    assert incremental(client, [(TOPIC, topic, [("retention.ms", SET, "3600000")])]) == [
        (E.NONE, None)]
    expect_config(client, topic, "retention.ms", ("3600000", SOURCE_DYNAMIC_TOPIC))
    assert incremental(client, [(TOPIC, topic, [("retention.ms", DELETE, None)])]) == [
        (E.NONE, None)]
    expect_config(client, topic, "retention.ms", ("604800000", SOURCE_DEFAULT))
    assert incremental(client, [(TOPIC, topic, [("cleanup.policy", APPEND, "compact")])]) == [
        (E.NONE, None)]
    expect_config(client, topic, "cleanup.policy", "delete,compact")
    assert incremental(client, [(TOPIC, topic, [("cleanup.policy", SUBTRACT, "delete")])]) == [
        (E.NONE, None)]
    expect_config(client, topic, "cleanup.policy", "compact")
    assert incremental(client, [(TOPIC, topic, [("cleanup.policy", SUBTRACT, "compact")])]) == [
        (E.NONE, None)]                                      # an empty list is allowed
    expect_config(client, topic, "cleanup.policy", "")
    assert incremental(client, [(TOPIC, topic, [("retention.ms", SET, "1")])],
                       validate_only=True) == [(E.NONE, None)]
    expect_config(client, topic, "retention.ms", "604800000")
    assert incremental(client, [(TOPIC, topic, [("no.such.config", DELETE, None)])]) == [
        (E.NONE, None)]                                      # nothing to delete: no error


def test_incremental_alter_configs_errors(target, client):
    topic = create_topic(client)
    assert incremental(client, [(TOPIC, topic, [("retention.ms", APPEND, "5")])]) == [
        (E.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.")]
    assert incremental(client, [(TOPIC, topic, [("no.such", SET, "5")])]) == [
        (E.INVALID_CONFIG, "Unknown topic config name: no.such")]
    assert incremental(client, [(TOPIC, topic, [("retention.ms", SET, "abc")])]) == [
        (E.INVALID_CONFIG,
         "Invalid value abc for configuration retention.ms: Not a number of type LONG")]
    missing = unique("missing")
    assert incremental(client, [(TOPIC, missing, [("retention.ms", SET, "5")])]) == [
        (E.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{missing}' does not exist.")]
    assert incremental(client, [(TOPIC, topic, [("retention.ms", SET, "5")]),
                                (TOPIC, topic, [("retention.ms", SET, "6")])]) == [
        (E.INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    assert incremental(client, [(TOPIC, topic, [("retention.ms", SET, "5"),
                                                ("retention.ms", SET, "6")])]) == [
        (E.INVALID_REQUEST, "Error due to duplicate config keys")]
    assert incremental(client, [(TOPIC, topic, [("retention.ms", 9, "5")])])[0][0] == \
        E.UNKNOWN_SERVER_ERROR                               # an unknown operation code
    expect_config(client, topic, "retention.ms", "604800000")  # nothing applied
    assert incremental(client, [(BROKER, "77", [("log.cleaner.threads", SET, "2")])]) == [
        (E.INVALID_REQUEST, f"Unexpected broker id, expected {node_id(client)}, but received 77")]


def test_broker_config_changes(target, client):
    """Broker configs change at runtime on both (tests/conformance/
    test_broker_configs_conformance.py has the details); the change is undone for the scenarios
    after this one."""
    node = str(node_id(client))
    try:
        answers = (incremental(client, [(BROKER, node, [("log.cleaner.threads", SET, "2")])])
                   + [alter(client, BROKER, node, {"log.cleaner.threads": "2"})])
        assert answers == [(E.NONE, None)] * 2
    finally:
        incremental(client, [(BROKER, node, [("log.cleaner.threads", DELETE, None)])])


# ---------------------------------------------------------------------------- AlterConfigs

def test_alter_configs_replaces_the_explicit_set(target, client):
    topic = create_topic(client)
    assert alter(client, TOPIC, topic, {"retention.ms": "3600000",
                                        "max.message.bytes": "2000000"}) == (E.NONE, None)
    assert alter(client, TOPIC, topic, {"max.message.bytes": "3000000"}) == (E.NONE, None)
    expect_config(client, topic, "retention.ms", ("604800000", SOURCE_DEFAULT))
    expect_config(client, topic, "max.message.bytes", ("3000000", SOURCE_DYNAMIC_TOPIC))
    missing = unique("missing")
    assert alter(client, TOPIC, missing, {"retention.ms": "5"}) == (
        E.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{missing}' does not exist.")
    assert alter(client, TOPIC, topic, {"retention.ms": "x"}) == (
        E.INVALID_CONFIG, "Invalid value x for configuration retention.ms: Not a number of type "
                          "LONG")
    assert alter(client, TOPIC, topic, {"zzz": "x"}) == (
        E.INVALID_CONFIG, "Unknown topic config name: zzz")
    expect_config(client, topic, "max.message.bytes", "3000000")  # unchanged


# ------------------------------------------------------------------------- DescribeLogDirs

def test_describe_log_dirs(target, client):
    topic = create_topic(client)
    produce(client, topic, 5)
    D = DescribeLogDirsRequest
    deadline = time.monotonic() + 15
    while True:  # a busy Kafka may list a new partition's log a moment after its leader
        response = client.call(D(topics=[
            D.DescribableLogDirTopic(topic=topic, partitions=[0, 1, 5]),
            D.DescribableLogDirTopic(topic=unique("missing"), partitions=[0])]), 4)
        assert response.error_code == E.NONE
        [result] = response.results
        assert result.error_code == E.NONE and result.log_dir
        [t] = result.topics                    # what the broker does not host is left out
        sizes = {p.partition_index: p.partition_size for p in t.partitions}
        if set(sizes) == {0, 1} or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert t.name == topic and set(sizes) == {0, 1}
    assert sizes[0] > 0 and sizes[1] == 0
    assert not any(p.is_future_key for p in t.partitions)
    # Kafka's lag (log end offset - high watermark) can be non-zero for a moment after a
    # produce; with one replica kbroker's high watermark is the log end offset: always 0
    assert all(p.offset_lag >= 0 if target.is_kafka else p.offset_lag == 0
               for p in t.partitions)
    if target.is_kafka or target.server.data_dir:
        assert result.total_bytes > 0 and result.usable_bytes > 0
    else:  # in memory: no directory, sizes unknown
        assert (result.log_dir, result.total_bytes, result.usable_bytes) == ("in-memory", -1, -1)
    everything = client.call(D(topics=None), 4)
    assert topic in {t.name for t in everything.results[0].topics}


# ------------------------------------------------------------------------------------ ACLs

def test_acl_apis_without_an_authorizer(target, client):
    described = client.call(DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1), 3)
    assert (described.error_code, described.error_message, described.resources) == (
        E.SECURITY_DISABLED, "No Authorizer is configured on the broker", [])
    C = CreateAclsRequest
    created = client.call(C(creations=[C.AclCreation(
        resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:x",
        host="*", operation=3, permission_type=3)] * 2), 3)
    assert [(r.error_code, r.error_message) for r in created.results] == [
        (E.SECURITY_DISABLED, "No Authorizer is configured.")] * 2
    D = DeleteAclsRequest
    deleted = client.call(D(filters=[D.DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1)]), 3)
    assert [(r.error_code, r.error_message, r.matching_acls) for r in deleted.filter_results] == [
        (E.SECURITY_DISABLED, "No Authorizer is configured.", [])]


# ------------------------------------------------------------------------ DescribeProducers

def test_describe_producers(target, client):
    topic = create_topic(client)
    deadline = time.monotonic() + 30
    while True:  # Kafka answers COORDINATOR_LOAD_IN_PROGRESS while its id block is on its way
        pid = client.call(InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
            producer_epoch=-1), 4)
        if pid.error_code != E.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert pid.error_code == E.NONE
    produce(client, topic, 3, pid.producer_id, pid.producer_epoch)
    missing = unique("missing")
    R = DescribeProducersRequest
    deadline = time.monotonic() + 30
    while True:  # Kafka's partition 1 (not produced to) may not serve as leader yet
        response = client.call(R(topics=[R.TopicRequest(name=topic, partition_indexes=[0, 1, 7]),
                                         R.TopicRequest(name=missing, partition_indexes=[0])]), 0)
        if (response.topics[0].partitions[1].error_code != E.NOT_LEADER_OR_FOLLOWER
                or time.monotonic() > deadline):
            break
        time.sleep(0.1)
    known, unknown = response.topics
    p0, p1, p7 = known.partitions
    assert (p0.error_code, p0.error_message) == (E.NONE, None)
    [state] = p0.active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (
        pid.producer_id, pid.producer_epoch, 2)
    assert state.last_timestamp == 1_700_000_000_002
    assert (state.coordinator_epoch, state.current_txn_start_offset) == (-1, -1)
    assert (p1.error_code, p1.active_producers) == (E.NONE, [])
    assert (p7.error_code, p7.error_message) == (E.UNKNOWN_TOPIC_OR_PARTITION, None)
    [u0] = unknown.partitions
    assert (u0.error_code, u0.error_message) == (
        E.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")


# ------------------------------------------------------------------------------ CreateTopics

def test_create_topics_refuses_more_than_10000_partitions_per_request(target, client):
    """Kafka's controller fails a CreateTopics asking for more than 10,000 partitions in all
    (before allocating anything), or that would write more than 10,000 records (a topic, its
    partitions, its configs): every topic of the request gets POLICY_VIOLATION."""
    from protocol.messages import CreateTopicsRequest as C
    names = [unique("huge"), unique("small")]

    def create(counts, validate_only=False):
        response = client.call(C(topics=[
            C.CreatableTopic(name=n, num_partitions=k, replication_factor=1, assignments=[],
                             configs=[]) for n, k in zip(names, counts)],
            timeout_ms=30000, validate_only=validate_only), 7)
        return [(t.name, t.error_code, t.error_message) for t in response.topics]

    message = "Excessively large number of partitions per request."
    assert create([2_000_000_000, 1]) == [(names[0], E.POLICY_VIOLATION, message),
                                          (names[1], E.POLICY_VIOLATION, message)]
    assert create([9_999, 2], validate_only=True) == [
        (names[0], E.POLICY_VIOLATION, message), (names[1], E.POLICY_VIOLATION, message)]
    # 10,000 partitions pass the first rule, but with their topics they are more than the
    # 10,000 records one request may write
    batch = "Unable to perform excessively large batch operation."
    assert create([9_999, 1], validate_only=True) == [
        (names[0], E.POLICY_VIOLATION, batch), (names[1], E.POLICY_VIOLATION, batch)]
    assert [e for _, e, _ in create([9_998, 1], validate_only=True)] == [
        E.POLICY_VIOLATION, E.POLICY_VIOLATION]
    assert [e for _, e, _ in create([9_997, 1], validate_only=True)] == [E.NONE, E.NONE]


def test_create_partitions_is_bounded_per_request(target, client):
    """CreatePartitions adds at most 10,000 partitions per request in all (Kafka's record bound):
    the topic that goes past it gets UNKNOWN_SERVER_ERROR, the ones before it are served."""
    from protocol.messages import CreatePartitionsRequest as P
    a, b = create_topic(client, 1), create_topic(client, 1)

    def grow(counts):
        response = client.call(P(topics=[
            P.CreatePartitionsTopic(name=n, count=k, assignments=None)
            for n, k in zip([a, b], counts)], timeout_ms=30000, validate_only=True), 3)
        return [t.error_code for t in response.results]

    assert grow([2_000_000_000]) == [E.UNKNOWN_SERVER_ERROR]
    assert grow([10_001]) == [E.NONE]                 # 10,000 new partitions
    assert grow([10_002]) == [E.UNKNOWN_SERVER_ERROR]
    assert grow([5_001, 5_001]) == [E.NONE, E.NONE]
    assert grow([5_001, 5_002]) == [E.NONE, E.UNKNOWN_SERVER_ERROR]


# ------------------------------------------------------------------------------ Metadata

def test_metadata_refuses_topic_ids_before_v12(target, client):
    """Metadata v10 and v11 have a topic id and a nullable name in the request, but only v12
    serves them (and only v12 may answer a null name): a v10/v11 request that names a topic by id,
    or gives an id at all, is refused as a whole with INVALID_REQUEST for each requested topic,
    "" for a null name, and no brokers."""
    import uuid
    M = MetadataRequest
    topic = create_topic(client, 1)

    def metadata(version, topics):
        return client.call(M(topics=[M.MetadataRequestTopic(name=n, topic_id=i) for n, i in topics],
                             allow_auto_topic_creation=False), version)

    topic_id = metadata(12, [(topic, uuid.UUID(int=0))]).topics[0].topic_id
    assert topic_id != uuid.UUID(int=0)
    zero = uuid.UUID(int=0)
    for version in (10, 11):
        response = metadata(version, [(None, topic_id)])
        assert (response.brokers, response.cluster_id, response.controller_id) == ([], None, -1)
        assert [(t.error_code, t.name, t.topic_id, t.is_internal, t.partitions)
                for t in response.topics] == [(E.INVALID_REQUEST, "", topic_id, False, [])]
        # a name with its id, beside a topic named without one: the whole request is refused
        response = metadata(version, [(topic, zero), (topic, topic_id)])
        assert [(t.error_code, t.name, t.topic_id) for t in response.topics] == [
            (E.INVALID_REQUEST, topic, zero), (E.INVALID_REQUEST, topic, topic_id)]
        assert response.brokers == []
        # by name alone, v10 and v11 answer as any version does
        response = metadata(version, [(topic, zero)])
        assert [(t.error_code, t.name, t.topic_id, len(t.partitions))
                for t in response.topics] == [(E.NONE, topic, topic_id, 1)]
        assert len(response.brokers) == 1
    # from v12 a topic id names the topic; an unknown one gets UNKNOWN_TOPIC_ID and a null name
    response = metadata(12, [(None, topic_id)])
    assert [(t.error_code, t.name, t.topic_id) for t in response.topics] == [
        (E.NONE, topic, topic_id)]
    unknown = uuid.uuid4()
    response = metadata(12, [(None, unknown)])
    assert [(t.error_code, t.name, t.topic_id) for t in response.topics] == [
        (E.UNKNOWN_TOPIC_ID, None, unknown)]


# ------------------------------------------- the APIs of placement and leadership (issue 12)
#
# OffsetForLeaderEpoch, DescribeTopicPartitions, ElectLeaders, the reassignment APIs,
# AlterReplicaLogDirs, DescribeQuorum and ListConfigResources, on one node. Node ids, log
# directories, listeners and timestamps are compared by shape, the rest as Kafka answers.

CLUSTER_APIS = {23: (2, 4), 34: (1, 2), 43: (0, 2), 45: (0, 1), 46: (0, 0), 55: (0, 2),
                74: (0, 1), 75: (0, 0)}
NOT_NEEDED = "Leader election not needed for topic partition."


def test_cluster_apis_are_advertised_as_kafka_does(target, client):
    from protocol.messages import ApiVersionsRequest
    response = client.call(ApiVersionsRequest(client_software_name="conformance",
                                              client_software_version="1"), 3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {key: ranges.get(key) for key in CLUSTER_APIS} == CLUSTER_APIS


def all_topics(client) -> dict:
    """name -> (topic id, partition count) of every topic, from Metadata."""
    meta = client.call(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    return {t.name: (t.topic_id, len(t.partitions)) for t in meta.topics}


# ---------------------------------------------------------------------- OffsetForLeaderEpoch

def test_offset_for_leader_epoch(target, client):
    from protocol.messages import OffsetForLeaderEpochRequest as O
    topic = create_topic(client)
    produce(client, topic, 5)

    def ask(parts, version=4, name=topic, replica_id=-1):
        response = client.call(O(replica_id=replica_id, topics=[O.OffsetForLeaderTopic(
            topic=name, partitions=[O.OffsetForLeaderPartition(
                partition=p, current_leader_epoch=current, leader_epoch=epoch)
                for p, current, epoch in parts])]), version)
        [t] = response.topics
        assert t.topic == name
        return [(r.partition, r.error_code, r.leader_epoch, r.end_offset) for r in t.partitions]

    # the current epoch (0, a new partition's) ends at the log end; an epoch above every
    # known one, and the undefined -1, have no end; an epoch below the first known one ends
    # where the first one starts
    assert ask([(0, -1, 0), (0, 0, 0), (0, -1, 1), (0, -1, -1), (0, -1, -2), (1, -1, 0)]) == [
        (0, E.NONE, 0, 5), (0, E.NONE, 0, 5), (0, E.NONE, -1, -1), (0, E.NONE, -1, -1),
        (0, E.NONE, -2, 0), (1, E.NONE, 0, 0)]
    # the caller's current leader epoch fences it: newer than the leader's is unknown here,
    # older is fenced (no partition has an older epoch than 0 on one node: -1 means none)
    assert ask([(0, 1, 0), (0, 7, 3)]) == [(0, E.UNKNOWN_LEADER_EPOCH, -1, -1),
                                           (0, E.UNKNOWN_LEADER_EPOCH, -1, -1)]
    assert ask([(7, -1, 0)]) == [(7, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    missing = unique("missing")
    assert ask([(0, -1, 0)], name=missing) == [(0, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    assert ask([(0, -1, 0)], name="bad name!") == [(0, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)]
    # older versions and a follower's replica id get the same answer
    for version in (2, 3):
        assert ask([(0, -1, 0)], version) == [(0, E.NONE, 0, 5)]
    assert ask([(0, -1, 0)], replica_id=node_id(client)) == [(0, E.NONE, 0, 5)]
    # the first epoch starts at the log start once records are deleted
    assert delete_records(client, topic, 0, 3) == (E.NONE, 3)
    assert ask([(0, -1, -2), (0, -1, 0)]) == [(0, E.NONE, -2, 3), (0, E.NONE, 0, 5)]


def test_the_leader_stamps_its_epoch_into_appended_batches(target, client):
    """A producer sends partitionLeaderEpoch -1; the leader writes its epoch (0, a new
    partition's) into each batch it appends, which is what consumers read back and validate
    their positions with."""
    from protocol.records import iter_batches
    topic = create_topic(client)
    produce(client, topic, 3)
    F = FetchRequest
    response = client.call(F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                             isolation_level=0, topics=[F.FetchTopic(topic=topic, partitions=[
                                 F.FetchPartition(partition=0, fetch_offset=0,
                                                  log_start_offset=-1,
                                                  partition_max_bytes=1 << 20)])]), 11)
    records = response.responses[0].partitions[0].records
    assert [b.partition_leader_epoch for b in iter_batches(bytes(records))] == [0]


# ------------------------------------------------------------------ DescribeTopicPartitions

def describe_partitions(client, names, limit=2000, cursor=None):
    from protocol.messages import DescribeTopicPartitionsRequest as D
    return client.call(D(topics=[D.TopicRequest(name=n) for n in names],
                         response_partition_limit=limit,
                         cursor=None if cursor is None else D.Cursor(
                             topic_name=cursor[0], partition_index=cursor[1])), 0)


def page(response):
    """([(name, error, [partition indexes])], next cursor or None)."""
    cursor = response.next_cursor
    return ([(t.name, t.error_code, [p.partition_index for p in t.partitions])
             for t in response.topics],
            None if cursor is None else (cursor.topic_name, cursor.partition_index))


ALL_TOPIC_OPERATIONS = 3576   # READ..DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: no authorizer


def test_describe_topic_partitions(target, client):
    prefix = unique("dtp")
    a = topics.create_topic(client, f"{prefix}-a", 3)
    b = topics.create_topic(client, f"{prefix}-b", 2)
    missing = f"{prefix}-zz-missing"
    node = node_id(client)
    ids = all_topics(client)

    # sorted by name, each name once, unknown and illegal names with their errors
    response = describe_partitions(client, [b, a, missing, "bad name!", a])
    assert page(response) == ([("bad name!", E.INVALID_TOPIC_EXCEPTION, []),
                               (a, E.NONE, [0, 1, 2]), (b, E.NONE, [0, 1]),
                               (missing, E.UNKNOWN_TOPIC_OR_PARTITION, [])], None)
    for t in response.topics:
        assert t.topic_authorized_operations == ALL_TOPIC_OPERATIONS and not t.is_internal
        assert t.topic_id == (ids[t.name][0] if t.error_code == E.NONE else uuid.UUID(int=0))
    for p in response.topics[1].partitions:
        assert (p.error_code, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes,
                p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) == (
            E.NONE, node, 0, [node], [node], [], [], [])
    [offsets] = describe_partitions(client, ["__consumer_offsets"], limit=1).topics
    assert (offsets.is_internal, [p.partition_index for p in offsets.partitions]) == (True, [0])

    # at most ResponsePartitionLimit partitions (at least 1); the cursor says where to go on
    def walk(limit, cursor=None, names=(a, b)):
        return page(describe_partitions(client, list(names), limit, cursor))
    assert walk(2) == ([(a, E.NONE, [0, 1])], (a, 2))
    assert walk(3) == ([(a, E.NONE, [0, 1, 2])], (b, 0))        # a full topic: next one's 0
    assert walk(4) == ([(a, E.NONE, [0, 1, 2]), (b, E.NONE, [0])], (b, 1))
    assert walk(5, names=(a, b, missing)) == (
        [(a, E.NONE, [0, 1, 2]), (b, E.NONE, [0, 1])], (missing, 0))
    assert walk(0) == walk(-5) == ([(a, E.NONE, [0])], (a, 1))
    assert walk(2, (a, 2)) == ([(a, E.NONE, [2]), (b, E.NONE, [0])], (b, 1))
    assert walk(2, (b, 1)) == ([(b, E.NONE, [1])], None)
    assert walk(2, (a, 9)) == ([(a, E.NONE, []), (b, E.NONE, [0, 1])], None)

    # a cursor outside the requested topics, or before the first partition, fails the request
    for cursor in ((missing + "x", 0), (a, -1), ("", 0)):
        response = describe_partitions(client, [a, b], 2, cursor)
        assert [(t.name, t.error_code, t.topic_id, t.partitions, t.topic_authorized_operations)
                for t in response.topics] == [
            (n, E.INVALID_REQUEST, uuid.UUID(int=0), [], -2147483648) for n in (a, b)]
        assert response.next_cursor is None
    # Kafka fails a request naming "" without a cursor as a whole (it takes "" for the
    # cursor's topic and looks for the missing cursor)
    response = describe_partitions(client, ["", a])
    assert [(t.name, t.error_code, t.partitions) for t in response.topics] == [
        ("", E.UNKNOWN_SERVER_ERROR, []), (a, E.UNKNOWN_SERVER_ERROR, [])]

    # no names: every topic, in name order, from the cursor's topic on; walking the pages one
    # partition at a time visits each partition of each topic once
    visited, cursor = [], None
    while True:
        names, cursor = walk(1, cursor, names=())
        visited += [(name, index) for name, error, indexes in names for index in indexes]
        assert all(error == E.NONE for _, error, _ in names)
        if cursor is None:
            break
    every = all_topics(client)
    assert visited == [(name, i) for name in sorted(every) for i in range(every[name][1])]
    names, cursor = walk(100, (f"{prefix}-", 5), names=())
    assert names[:2] == [(a, E.NONE, [0, 1, 2]), (b, E.NONE, [0, 1])]
    assert all(name > prefix for name, _, _ in names)
    # other scenarios on the same broker may have made topics after these (txn-..., 100
    # partitions or more of them): the page then ends with a cursor past b
    assert cursor is None or cursor[0] > b


# ----------------------------------------------------------------------------- ElectLeaders

def elect(client, partitions, election_type=0, version=2):
    from protocol.messages import ElectLeadersRequest as R
    return client.call(R(election_type=election_type, timeout_ms=30000, topic_partitions=None
                         if partitions is None else [R.TopicPartitions(topic=t, partitions=ps)
                                                     for t, ps in partitions]), version)


def election_results(response):
    return [(r.topic, [(p.partition_id, p.error_code, p.error_message)
                       for p in r.partition_result]) for r in response.replica_election_results]


def test_elect_leaders(target, client):
    topic = create_topic(client)
    missing = unique("missing")
    # preferred (0) and unclean (1): one replica already leads each partition
    for election_type in (0, 1):
        response = elect(client, [(topic, [0, 1, 5]), (missing, [0]), (topic, [1, 1])],
                         election_type)
        assert response.error_code == E.NONE
        assert election_results(response) == [
            (topic, [(0, E.ELECTION_NOT_NEEDED, NOT_NEEDED), (1, E.ELECTION_NOT_NEEDED, NOT_NEEDED),
                     (5, E.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-5")]),
            (missing, [(0, E.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {missing}")]),
            (topic, [(1, E.ELECTION_NOT_NEEDED, NOT_NEEDED)] * 2)]
    for version in (0, 1):  # v0 has no election type (preferred) and no top-level error
        assert election_results(elect(client, [(topic, [0])], 0, version)) == [
            (topic, [(0, E.ELECTION_NOT_NEEDED, NOT_NEEDED)])]
    # an unknown election type fails every partition, unless there is none to elect
    response = elect(client, [(topic, [0, 1])], 2)
    assert response.error_code == E.INVALID_REQUEST
    assert election_results(response) == [
        (topic, [(0, E.INVALID_REQUEST, "Unknown election type 2"),
                 (1, E.INVALID_REQUEST, "Unknown election type 2")])]
    response = elect(client, None, 7)
    assert (response.error_code, response.replica_election_results) == (E.INVALID_REQUEST, [])
    response = elect(client, [], 7)
    assert (response.error_code, response.replica_election_results) == (E.NONE, [])
    # null: every topic, each listing only the partitions that needed an election (none)
    for election_type in (0, 1):
        response = elect(client, None, election_type)
        assert response.error_code == E.NONE
        results = dict(election_results(response))
        assert set(results) == set(all_topics(client)) and set(map(len, results.values())) == {0}


# ---------------------------------------- AlterPartitionReassignments, ListPartitionReassignments

def reassign(client, partitions, version=1, allow=True):
    from protocol.messages import AlterPartitionReassignmentsRequest as R
    return client.call(R(timeout_ms=30000, allow_replication_factor_change=allow, topics=[
        R.ReassignableTopic(name=t, partitions=[R.ReassignablePartition(
            partition_index=p, replicas=replicas) for p, replicas in ps])
        for t, ps in partitions]), version)


def reassignment_results(response):
    return [(t.name, [(p.partition_index, p.error_code, p.error_message) for p in t.partitions])
            for t in response.responses]


def list_reassignments(client, partitions):
    from protocol.messages import ListPartitionReassignmentsRequest as L
    response = client.call(L(timeout_ms=30000, topics=None if partitions is None else [
        L.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps)
        for t, ps in partitions]), 0)
    return response.error_code, response.error_message, response.topics


def test_partition_reassignments(target, client):
    topic = create_topic(client)
    node = node_id(client)
    other = node + 1
    missing = unique("missing")
    unregistered = ("The manual partition assignment includes broker {}, but no such broker is "
                    "registered.")
    response = reassign(client, [(topic, [
        (0, [node]),            # where it is: nothing to move
        (1, None),              # cancel: nothing is being moved
        (5, [node]),
        (0, [other]), (0, [node, other]), (0, [-1]), (0, [node, node]), (0, [])]),
        (missing, [(0, [node])])])
    assert (response.error_code, response.error_message,
            response.allow_replication_factor_change) == (E.NONE, None, True)
    assert reassignment_results(response) == [
        (topic, [(0, E.NONE, None), (1, E.NO_REASSIGNMENT_IN_PROGRESS, None),
                 (5, E.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:5."),
                 (0, E.INVALID_REPLICA_ASSIGNMENT, unregistered.format(other)),
                 (0, E.INVALID_REPLICA_ASSIGNMENT, unregistered.format(other)),
                 (0, E.INVALID_REPLICA_ASSIGNMENT, unregistered.format(-1)),
                 (0, E.INVALID_REPLICA_ASSIGNMENT,
                  f"The manual partition assignment includes the broker {node} more than once."),
                 (0, E.INVALID_REPLICA_ASSIGNMENT,
                  "The manual partition assignment includes an empty replica list.")]),
        (missing, [(0, E.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {missing}.")])]
    response = reassign(client, [(topic, [(0, [node])])], allow=False)
    assert response.allow_replication_factor_change is False
    assert reassignment_results(response) == [(topic, [(0, E.NONE, None)])]
    assert reassignment_results(reassign(client, [(topic, [(1, [node])])], version=0)) == [
        (topic, [(1, E.NONE, None)])]
    assert reassignment_results(reassign(client, [(topic, [])])) == [(topic, [])]
    # no topics: Kafka's empty answer, whatever the request's option
    response = reassign(client, [], allow=False)
    assert (response.error_code, response.error_message, response.allow_replication_factor_change,
            response.responses) == (E.NONE, "", True, [])

    # nothing is being moved: listed for no topic, asked by name or not
    assert list_reassignments(client, None) == (E.NONE, None, [])
    assert list_reassignments(client, []) == (E.NONE, None, [])
    assert list_reassignments(client, [(topic, [0, 1, 9]), (missing, [0])]) == (E.NONE, None, [])


# ----------------------------------------------------------------------- AlterReplicaLogDirs

def test_alter_replica_log_dirs(target, client):
    from protocol.messages import AlterReplicaLogDirsRequest as R
    topic = create_topic(client)
    log_dir = client.call(DescribeLogDirsRequest(topics=None), 4).results[0].log_dir
    missing = unique("missing")
    long_ok, too_long = "t" * 211, "t" * 214  # "<topic>-<partition>.<32 hex>-future" <= 255

    def move(dirs, version=2):
        response = client.call(R(dirs=[R.AlterReplicaLogDir(path=path, topics=[
            R.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in named])
            for path, named in dirs]), version)
        answers = {}
        for t in response.results:        # Kafka groups them by topic in no set order
            for p in t.partitions:
                assert (t.topic_name, p.partition_index) not in answers
                answers[(t.topic_name, p.partition_index)] = p.error_code
        return answers

    for version in (1, 2):
        assert move([(log_dir, [(topic, [0, 1, 7]), (missing, [0]), ("__consumer_offsets", [0]),
                                (long_ok, [0]), (too_long, [0])])], version) == {
            (topic, 0): E.NONE, (topic, 1): E.NONE, (topic, 7): E.UNKNOWN_TOPIC_OR_PARTITION,
            (missing, 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("__consumer_offsets", 0): E.NONE,
            (long_ok, 0): E.UNKNOWN_TOPIC_OR_PARTITION, (too_long, 0): E.INVALID_TOPIC_EXCEPTION}
    # only a log directory of the broker, by its exact name
    assert move([("/no/such/dir", [(topic, [0])]), ("relative", [(topic, [1])]),
                 (log_dir + "/", [(missing, [0])])]) == {
        (topic, 0): E.LOG_DIR_NOT_FOUND, (topic, 1): E.LOG_DIR_NOT_FOUND,
        (missing, 0): E.LOG_DIR_NOT_FOUND}
    # a partition named twice goes where it is named last
    assert move([(log_dir, [(topic, [0, 1])]), ("/no/such/dir", [(topic, [0])])]) == {
        (topic, 0): E.LOG_DIR_NOT_FOUND, (topic, 1): E.NONE}
    assert move([]) == {}


# ---------------------------------------------------------------------------- DescribeQuorum

def describe_quorum(client, partitions, version=2):
    from protocol.messages import DescribeQuorumRequest as Q
    return client.call(Q(topics=[Q.TopicData(topic_name=t, partitions=[
        Q.PartitionData(partition_index=p) for p in ps]) for t, ps in partitions]), version)


def test_describe_quorum(target, client):
    node = node_id(client)
    before = int(time.time() * 1000)
    for version in (0, 1, 2):
        response = describe_quorum(client, [("__cluster_metadata", [0])], version)
        assert (response.error_code, response.error_message) == (E.NONE, "")
        [t] = response.topics
        [p] = t.partitions
        assert (t.topic_name, p.partition_index, p.error_code, p.error_message) == (
            "__cluster_metadata", 0, E.NONE, "")
        # one voter, which leads; no observers (the node is broker and controller at once)
        assert p.leader_id == node and p.leader_epoch >= 1 and p.high_watermark >= 0
        [voter] = p.current_voters
        assert p.observers == []
        assert voter.replica_id == node and voter.log_end_offset >= p.high_watermark
        if version == 0:
            assert (voter.last_fetch_timestamp, voter.last_caught_up_timestamp) == (-1, -1)
        else:  # the leader reports itself fetched and caught up now
            assert voter.last_fetch_timestamp == voter.last_caught_up_timestamp
            assert before <= voter.last_fetch_timestamp <= int(time.time() * 1000)
        if version < 2:
            assert (voter.replica_directory_id, response.nodes) == (uuid.UUID(int=0), [])
        else:
            assert voter.replica_directory_id != uuid.UUID(int=0)
            [entry] = response.nodes
            [listener] = entry.listeners
            assert entry.node_id == node and listener.host == "127.0.0.1"
            # Kafka's voter listens on its controller listener, kbroker's on its own
            assert (listener.name, listener.port) == (
                ("CONTROLLER", target.server.controller_port) if target.is_kafka
                else ("PLAINTEXT", target.port))
    # anything but partition 0 of __cluster_metadata, alone, is not hosted
    message = "This server does not host this topic-partition."
    for partitions in ([("__cluster_metadata", [1])], [("__cluster_metadata", [0, 0])],
                       [("other", [0]), ("x", [1, 2])]):
        for version in (0, 2):
            response = describe_quorum(client, partitions, version)
            assert response.nodes == []
            assert [(t.topic_name, [(p.partition_index, p.error_code, p.error_message,
                                     p.current_voters) for p in t.partitions])
                    for t in response.topics] == [
                (name, [(i, E.UNKNOWN_TOPIC_OR_PARTITION, message if version >= 2 else "", [])
                        for i in indexes]) for name, indexes in partitions]
    assert describe_quorum(client, []).topics == []


# ----------------------------------------------------------------------- ListConfigResources

def test_list_config_resources(target, client):
    from protocol.messages import ListConfigResourcesRequest as L
    topic = create_topic(client)
    node = str(node_id(client))

    def listed(types, version=1):
        response = client.call(L(resource_types=types), version)
        return response.error_code, [(r.resource_type, r.resource_name)
                                     for r in response.config_resources]

    assert listed([], 0) == (E.NONE, [])        # v0: client metrics subscriptions, none here
    # no client metrics subscription; groups only where a scenario gave one its own configs
    # (the share-group scenarios do: the brokers are shared by the session)
    error, groups = listed([16, 32])
    assert error == E.NONE and all(rtype == 32 for rtype, _ in groups)
    assert listed([4, 8]) == (E.NONE, [(8, node), (4, node)])
    error, resources = listed([2])
    assert error == E.NONE and len(resources) == len(set(resources))
    assert {name for _, name in resources} == set(all_topics(client)) and topic in dict(
        (n, t) for t, n in resources)
    error, every = listed([])                   # every type version 1 knows
    assert error == E.NONE
    # Kafka's order: the groups with configs, this broker's logger and configs, the topics
    assert every[:len(groups)] == groups
    assert every[len(groups):len(groups) + 2] == [(8, node), (4, node)]
    assert sorted(every[len(groups) + 2:]) == sorted(resources)
    for unknown in ([1], [2, 99], [0]):
        assert listed(unknown) == (E.UNSUPPORTED_VERSION, [])
