"""Differential conformance of the share coordinator's own APIs (KIP-932):
InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and
ReadShareGroupStateSummary, and FindCoordinator's SHARE key type, with raw requests against a
real Apache Kafka 4.3.1 and against kbroker (the ``target`` fixture). Every answer asserted here
is Kafka's, observed on the real broker. Authorization (CLUSTER_ACTION) is in
test_acl_conformance.py.

Each scenario uses its own group id, so the share coordinator has no state for it until the
scenario writes some.
"""
from __future__ import annotations

import time
import uuid

import pytest

from broker.coordinator.share_state.service import hashmap_order, uuid_hash
from broker.coordinator.share_state.store import coordinator_key
from protocol.errors import ErrorCode as E
from protocol.messages import (
    ApiVersionsRequest,
    DeleteShareGroupStateRequest,
    FindCoordinatorRequest,
    InitializeShareGroupStateRequest,
    MetadataRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from tests.support import RawClient, unique

from . import topics

PARTITIONS = 3
AVAILABLE, ACKED, ARCHIVED = 0, 2, 4
#: Kafka 4.3.1's versions of the share coordinator's APIs, as its ApiVersions lists them
STATE_APIS = {83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1)}

UNKNOWN = "This server does not host this topic-partition."
FENCED_STATE = ("The share coordinator rejected the request because the share-group state "
                "epoch did not match.")
FENCED_LEADER = "The leader epoch in the request is older than the epoch on the broker."

_TOPICS: dict[str, tuple[str, uuid.UUID]] = {}

I = InitializeShareGroupStateRequest
R = ReadShareGroupStateRequest
W = WriteShareGroupStateRequest
D = DeleteShareGroupStateRequest
S = ReadShareGroupStateSummaryRequest


@pytest.fixture
def client(target):
    c = RawClient(target.port, client_id="share-state-conformance")
    yield c
    c.close()


@pytest.fixture
def topic(target, client) -> tuple[str, uuid.UUID]:
    """(name, topic id) of one 3-partition topic per broker; the share coordinator is ready."""
    if target.name not in _TOPICS:
        name = topics.create_topic(client, unique("ss-topic"), PARTITIONS)
        meta = client.call(MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=name)],
            allow_auto_topic_creation=False), 12)
        _TOPICS[target.name] = (name, meta.topics[0].topic_id)
        coordinator_ready(client, coordinator_key("warmup", meta.topics[0].topic_id, 0))
    return _TOPICS[target.name]


@pytest.fixture
def group() -> str:
    return unique("ss")


def find_share_coordinator(client: RawClient, *keys: str, version: int = 6):
    return client.call(FindCoordinatorRequest(key_type=2, coordinator_keys=list(keys)),
                       version).coordinators


def coordinator_ready(client: RawClient, key: str, timeout: float = 60.0) -> None:
    """Both brokers create __share_group_state at the first FindCoordinator for a SHARE key
    (COORDINATOR_NOT_AVAILABLE meanwhile); Kafka then loads its partitions."""
    deadline = time.monotonic() + timeout
    while True:
        answer = find_share_coordinator(client, key)[0]
        if answer.error_code == E.NONE:
            break
        assert answer.error_code == E.COORDINATOR_NOT_AVAILABLE, answer
        assert time.monotonic() < deadline, answer
        time.sleep(0.2)
    # Kafka answers NOT_COORDINATOR until it has loaded the state partition
    while True:
        summary = client.call(S(group_id="warmup", topics=[S.ReadStateSummaryData(
            topic_id=uuid.UUID(int=1), partitions=[S.PartitionData(partition=0,
                                                                   leader_epoch=0)])]), 1)
        code = summary.results[0].partitions[0].error_code
        if code != E.NOT_COORDINATOR:
            return
        assert time.monotonic() < deadline, summary
        time.sleep(0.2)


def initialize(client, group, topic_id, *parts):
    """parts: (partition, state epoch, start offset) -> [(partition, error, message)]."""
    answer = client.call(I(group_id=group, topics=[I.InitializeStateData(
        topic_id=topic_id, partitions=[I.PartitionData(partition=p, state_epoch=se,
                                                       start_offset=so)
                                       for p, se, so in parts])]), 0)
    return [(p.partition, p.error_code, p.error_message)
            for r in answer.results for p in r.partitions]


def write(client, group, topic_id, partition, state_epoch, leader_epoch, start_offset,
          batches=(), delivery_complete_count=-1, version=1):
    answer = client.call(W(group_id=group, topics=[W.WriteStateData(
        topic_id=topic_id, partitions=[W.PartitionData(
            partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
            start_offset=start_offset, delivery_complete_count=delivery_complete_count,
            state_batches=[W.StateBatch(first_offset=f, last_offset=last, delivery_state=s,
                                        delivery_count=c) for f, last, s, c in batches])])]),
        version)
    [p] = [p for r in answer.results for p in r.partitions]
    return p.error_code, p.error_message


def read(client, group, topic_id, partition, leader_epoch=-1):
    answer = client.call(R(group_id=group, topics=[R.ReadStateData(
        topic_id=topic_id, partitions=[R.PartitionData(partition=partition,
                                                       leader_epoch=leader_epoch)])]), 0)
    [p] = [p for r in answer.results for p in r.partitions]
    return (p.error_code, p.error_message, p.state_epoch, p.start_offset,
            [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
             for b in p.state_batches])


def summary(client, group, topic_id, partition, version=1):
    answer = client.call(S(group_id=group, topics=[S.ReadStateSummaryData(
        topic_id=topic_id, partitions=[S.PartitionData(partition=partition,
                                                       leader_epoch=0)])]), version)
    [p] = [p for r in answer.results for p in r.partitions]
    fields = (p.error_code, p.error_message, p.state_epoch, p.leader_epoch, p.start_offset)
    return fields + ((p.delivery_complete_count,) if version >= 1 else ())


def delete(client, group, topic_id, *partitions):
    answer = client.call(D(group_id=group, topics=[D.DeleteStateData(
        topic_id=topic_id, partitions=[D.PartitionData(partition=p) for p in partitions])]), 0)
    return [(p.partition, p.error_code, p.error_message)
            for r in answer.results for p in r.partitions]


# ---------------------------------------------------------------------------------------------

def test_api_versions_list_the_state_apis_at_kafkas_versions(target, client):
    answer = client.call(ApiVersionsRequest(client_software_name="conformance",
                                            client_software_version="1"), 3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert {key: ranges.get(key) for key in STATE_APIS} == STATE_APIS


def test_find_coordinator_share_keys(target, client, topic):
    _, topic_id = topic
    good = coordinator_key("g", topic_id, 1)
    bad = ["", "a:b", "g:notanid:1", f" :{good.split(':')[1]}:1", f"g:{good.split(':')[1]}:x"]
    answers = find_share_coordinator(client, good, *bad)
    assert [(c.key, c.error_code) for c in answers] == \
        [(good, E.NONE)] + [(k, E.INVALID_REQUEST) for k in bad]
    assert answers[0].node_id == 1 and answers[0].port == target.port
    # before v6 a SHARE key is refused
    old = client.call(FindCoordinatorRequest(key_type=2, coordinator_keys=[good]), 5)
    assert [(c.error_code, c.node_id) for c in old.coordinators] == [(E.INVALID_REQUEST, -1)]


def test_initialize_write_read_summary_delete(target, client, topic, group):
    _, tid = topic
    assert initialize(client, group, tid, (0, 0, 10)) == [(0, E.NONE, None)]
    assert read(client, group, tid, 0) == (E.NONE, None, 0, 10, [])
    assert summary(client, group, tid, 0) == (E.NONE, None, 0, 0, 10, 0)
    # the leader writes its batches; a read with its leader epoch stores the epoch
    assert read(client, group, tid, 0, leader_epoch=2) == (E.NONE, None, 0, 10, [])
    assert write(client, group, tid, 0, 0, 2, 10, [(10, 19, AVAILABLE, 1)], 0) == (E.NONE, None)
    assert write(client, group, tid, 0, 0, 2, -1,
                 [(12, 13, ACKED, 1), (15, 15, ARCHIVED, 1), (18, 22, AVAILABLE, 2)], 3) == \
        (E.NONE, None)
    assert read(client, group, tid, 0, leader_epoch=2) == (E.NONE, None, 0, 10, [
        (10, 11, AVAILABLE, 1), (12, 13, ACKED, 1), (14, 14, AVAILABLE, 1),
        (15, 15, ARCHIVED, 1), (16, 17, AVAILABLE, 1), (18, 22, AVAILABLE, 2)])
    assert summary(client, group, tid, 0) == (E.NONE, None, 0, 2, 10, 3)
    assert summary(client, group, tid, 0, version=0) == (E.NONE, None, 0, 2, 10)
    # a new start offset prunes what lies below it; v0 carries no delivery-complete count
    assert write(client, group, tid, 0, 0, 2, 14, [], version=0) == (E.NONE, None)
    assert read(client, group, tid, 0)[3:] == (14, [
        (14, 14, AVAILABLE, 1), (15, 15, ARCHIVED, 1), (16, 17, AVAILABLE, 1),
        (18, 22, AVAILABLE, 2)])
    assert summary(client, group, tid, 0) == (E.NONE, None, 0, 2, 14, -1)
    # initializing again starts afresh: nothing in flight, leader epoch 0
    assert initialize(client, group, tid, (0, 1, 30)) == [(0, E.NONE, None)]
    assert read(client, group, tid, 0) == (E.NONE, None, 1, 30, [])
    assert summary(client, group, tid, 0) == (E.NONE, None, 1, 0, 30, 0)
    # delete: gone; deleting again (or what was never there) is no error
    assert delete(client, group, tid, 0, 1) == [(0, E.NONE, None), (1, E.NONE, None)]
    assert summary(client, group, tid, 0) == (E.NONE, None, 0, 0, -1, -1)
    assert read(client, group, tid, 0)[:2] == (
        E.INVALID_REQUEST, "Read operation on uninitialized share partition not allowed.")


def test_uninitialized_unknown_and_negative(target, client, topic, group):
    _, tid = topic
    assert read(client, group, tid, 1)[:2] == (
        E.INVALID_REQUEST, "Read operation on uninitialized share partition not allowed.")
    assert write(client, group, tid, 1, 0, 0, 0) == (
        E.INVALID_REQUEST, "Write operation on uninitialized share partition not allowed.")
    assert summary(client, group, tid, 1) == (E.NONE, None, 0, 0, -1, -1)
    negative = "The partition id cannot be a negative number."
    for partition, topic_id in ((PARTITIONS, tid), (0, uuid.uuid4()), (0, uuid.UUID(int=0))):
        assert initialize(client, group, topic_id, (partition, 0, 0)) == \
            [(partition, E.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN)]
        assert summary(client, group, topic_id, partition)[:2] == \
            (E.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN)
        assert delete(client, group, topic_id, partition) == \
            [(partition, E.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN)]
        # uninitialized is checked first
        assert read(client, group, topic_id, partition)[0] == E.INVALID_REQUEST
    assert initialize(client, group, tid, (-1, 0, 0)) == [(-1, E.INVALID_REQUEST, negative)]
    assert read(client, group, tid, -1)[:2] == (E.INVALID_REQUEST, negative)
    assert write(client, group, tid, -1, 0, 0, 0) == (E.INVALID_REQUEST, negative)
    assert summary(client, group, tid, -1)[:2] == (E.INVALID_REQUEST, negative)
    assert delete(client, group, tid, -1) == [(-1, E.INVALID_REQUEST, negative)]


def test_state_epoch_fencing(target, client, topic, group):
    _, tid = topic
    assert initialize(client, group, tid, (2, 5, 0)) == [(2, E.NONE, None)]
    assert initialize(client, group, tid, (2, 4, 0)) == [(2, E.FENCED_STATE_EPOCH, FENCED_STATE)]
    assert write(client, group, tid, 2, 4, -1, 0) == (E.FENCED_STATE_EPOCH, FENCED_STATE)
    assert write(client, group, tid, 2, -1, -1, 0, [(0, 0, ACKED, 1)]) == (E.NONE, None)
    assert write(client, group, tid, 2, 6, -1, 0) == (E.NONE, None)   # higher: accepted
    assert summary(client, group, tid, 2)[2] == 5                      # ... and not stored
    assert initialize(client, group, tid, (2, -1, 3)) == [(2, E.NONE, None)]
    assert summary(client, group, tid, 2)[2:5] == (-1, 0, 3)
    assert initialize(client, group, tid, (2, 4, 0)) == [(2, E.FENCED_STATE_EPOCH, FENCED_STATE)]


def test_leader_epoch_fencing(target, client, topic, group):
    _, tid = topic
    assert initialize(client, group, tid, (1, 0, 0)) == [(1, E.NONE, None)]
    assert read(client, group, tid, 1, leader_epoch=7)[0] == E.NONE
    assert read(client, group, tid, 1, leader_epoch=6)[:2] == (E.FENCED_LEADER_EPOCH,
                                                               FENCED_LEADER)
    assert write(client, group, tid, 1, 0, 6, 0) == (E.FENCED_LEADER_EPOCH, FENCED_LEADER)
    assert write(client, group, tid, 1, 0, 9, 0) == (E.NONE, None)
    assert summary(client, group, tid, 1)[3] == 7                     # a write does not move it
    assert read(client, group, tid, 1, leader_epoch=-1)[0] == E.NONE  # -1 is not checked
    assert read(client, group, tid, 1, leader_epoch=9)[0] == E.NONE
    assert summary(client, group, tid, 1)[3] == 9


def test_empty_requests_get_empty_answers(target, client, topic, group):
    _, tid = topic
    for request, version in [
            (W(group_id="", topics=[W.WriteStateData(topic_id=tid, partitions=[
                W.PartitionData(partition=0, state_epoch=0, leader_epoch=0, start_offset=0,
                                state_batches=[])])]), 1),
            (W(group_id=group, topics=[]), 1),
            (W(group_id=group, topics=[W.WriteStateData(topic_id=tid, partitions=[])]), 1),
            (R(group_id="", topics=[R.ReadStateData(topic_id=tid, partitions=[
                R.PartitionData(partition=0, leader_epoch=0)])]), 0),
            (R(group_id=group, topics=[R.ReadStateData(topic_id=tid, partitions=[])]), 0),
            (S(group_id="", topics=[S.ReadStateSummaryData(topic_id=tid, partitions=[
                S.PartitionData(partition=0, leader_epoch=0)])]), 1),
            (S(group_id=group, topics=[]), 1),
            (D(group_id=group, topics=[D.DeleteStateData(topic_id=tid, partitions=[])]), 0),
            (I(group_id="", topics=[I.InitializeStateData(topic_id=tid, partitions=[
                I.PartitionData(partition=0, state_epoch=0, start_offset=0)])]), 0),
            (I(group_id=group, topics=[]), 0)]:
        assert client.call(request, version).results == [], request
    # Initialize answers a topic without partitions with nothing for it
    answer = client.call(I(group_id=group, topics=[
        I.InitializeStateData(topic_id=tid, partitions=[]),
        I.InitializeStateData(topic_id=uuid.uuid4(), partitions=[
            I.PartitionData(partition=0, state_epoch=0, start_offset=0)])]), 0)
    assert [(len(r.partitions), r.partitions[0].error_code) for r in answer.results] == \
        [(1, E.UNKNOWN_TOPIC_OR_PARTITION)]


def test_many_topics_and_partitions_in_kafkas_order(target, client, topic, group):
    """One answer per topic and partition (a partition named twice once), in the order of
    Kafka's hash maps: topics by their id's hash, partitions by number."""
    _, tid = topic
    ids = [uuid.uuid4() for _ in range(20)]
    answer = client.call(S(group_id=group, topics=[
        S.ReadStateSummaryData(topic_id=t, partitions=[
            S.PartitionData(partition=p, leader_epoch=0) for p in (2, 0, 1, 0)])
        for t in ids + [tid]]), 1)
    assert [r.topic_id for r in answer.results] == hashmap_order(ids + [tid], uuid_hash)
    for r in answer.results:
        assert [p.partition for p in r.partitions] == [0, 1, 2]
        expected = E.NONE if r.topic_id == tid else E.UNKNOWN_TOPIC_OR_PARTITION
        assert {p.error_code for p in r.partitions} == {expected}


# --------------------------------------------------------------------------- the leader's state

def test_the_leaders_acknowledgements_are_read_through_the_state_apis(target, client, group):
    """A share consumer's acknowledgements, stored by the share-partition leader, read back by
    ReadShareGroupState and ReadShareGroupStateSummary: the start offset from before each
    change, the finished records with it, acquired records not stored. (The state epoch
    differs: Kafka's group coordinator initializes the share partition with its group epoch.)"""
    from .test_share_group_conformance import ShareConsumer, produce
    name = topics.create_topic(client, unique("ss-leader"), 1)
    tid = client.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                      allow_auto_topic_creation=False), 12).topics[0].topic_id
    consumer = ShareConsumer(RawClient(target.port, client_id="ss-consumer"), group,
                             (name, tid))
    try:
        consumer.heartbeat()
        consumer.until_assigned(lambda: consumer.assigned == {0})
        assert consumer.fetch(max_wait_ms=100).error_code == E.NONE
        produce(client, name, 10)
        assert consumer.fetch_until(10) == [(0, 9, 1)]
        # accept 0-2, release 3-4, reject 5; 6-9 stay acquired
        assert consumer.acknowledge({0: [(0, 2, [1]), (3, 4, [2]), (5, 5, [3])]}) \
            .error_code == E.NONE
        assert read(client, group, tid, 0)[3:] == (
            0, [(0, 2, ACKED, 1), (3, 4, AVAILABLE, 1), (5, 5, ARCHIVED, 1)])
        assert summary(client, group, tid, 0)[3:] == (0, 0, 4)
        assert consumer.acknowledge({0: [(6, 7, [1])]}).error_code == E.NONE
        assert read(client, group, tid, 0)[3:] == (
            3, [(3, 4, AVAILABLE, 1), (5, 5, ARCHIVED, 1), (6, 7, ACKED, 1)])
        assert summary(client, group, tid, 0)[3:] == (0, 3, 3)
    finally:
        consumer.client.close()
