"""Differential conformance of the admin APIs that topic tools and UIs call: DeleteRecords,
IncrementalAlterConfigs, AlterConfigs, DescribeLogDirs, the ACL APIs and DescribeProducers. Each
scenario sends the same raw requests to a real Apache Kafka 4.x broker and to kbroker (the
``target`` fixture) and asserts Kafka's answers, observed on the real broker.

Where kbroker answers differently on purpose, the test says so at that spot: this broker's own
settings are fixed when it starts, so a change to a BROKER or BROKER_LOGGER resource is refused
(INVALID_REQUEST) where Kafka stores it; and kbroker in memory has no log directory path or disk
size to report.
"""
from __future__ import annotations

import time

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
    """Kafka stores broker configs changed at runtime; kbroker's settings are fixed at start, so
    it refuses the change instead of accepting and ignoring it (a deliberate difference)."""
    node = str(node_id(client))
    answers = (incremental(client, [(BROKER, node, [("log.cleaner.threads", SET, "2")])])
               + [alter(client, BROKER, node, {"log.cleaner.threads": "2"})])
    if target.is_kafka:
        assert answers == [(E.NONE, None)] * 2
    else:
        assert [code for code, _ in answers] == [E.INVALID_REQUEST] * 2


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
    response = client.call(D(topics=[D.DescribableLogDirTopic(topic=topic, partitions=[0, 1, 5]),
                                     D.DescribableLogDirTopic(topic=unique("missing"),
                                                              partitions=[0])]), 4)
    assert response.error_code == E.NONE
    [result] = response.results
    assert result.error_code == E.NONE and result.log_dir
    [t] = result.topics                    # what the broker does not host is left out
    sizes = {p.partition_index: p.partition_size for p in t.partitions}
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
    response = client.call(R(topics=[R.TopicRequest(name=topic, partition_indexes=[0, 1, 7]),
                                     R.TopicRequest(name=missing, partition_indexes=[0])]), 0)
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
