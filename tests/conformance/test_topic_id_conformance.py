"""Differential conformance of the data path at Kafka 4.3's versions, where topics go by id
(KIP-516, KIP-848): Produce v13, OffsetCommit and OffsetFetch v10, and ListOffsets v11. Every
scenario runs against a real Apache Kafka 4.3 broker and against kbroker (the ``target``
fixture) with raw requests and asserts Kafka's answers: UNKNOWN_TOPIC_ID for an id the broker
does not know (never created, the zero id, or the id of a topic since deleted and re-created
under the same name), the ids echoed in the answers, the special timestamps of ListOffsets per
version, and Produce v0-2, advertised but refused by closing the connection.

Topic ids differ between the brokers, so answers are compared through the ids each broker gave.
"""
from __future__ import annotations

import struct
import time
import uuid
import zlib

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
)
from protocol.records import SimpleRecord, build_batch
from tests.support import RawClient, unique

from . import topics
from .test_consumer_group_conformance import Member
from .test_group_conformance import join_new, subscription, sync

ZERO = uuid.UUID(int=0)
NO_METADATA = ""
P = ProduceRequest
OC = OffsetCommitRequest
OF = OffsetFetchRequest
LO = ListOffsetsRequest


# ---------------------------------------------------------------------------------------------
# Helpers

def topic_id(client: RawClient, name: str) -> uuid.UUID:
    meta = client.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                       allow_auto_topic_creation=False), 12)
    assert meta.topics[0].error_code == E.NONE, meta
    return meta.topics[0].topic_id


def new_topic(client: RawClient, partitions: int = 2) -> tuple[str, uuid.UUID]:
    name = topics.create_topic(client, unique("ids"), partitions)
    wait_for_leaders(client, name, partitions)
    return name, topic_id(client, name)


def wait_for_leaders(client: RawClient, name: str, partitions: int) -> None:
    """Kafka's Metadata may show a leader a moment before the leader serves its partition
    (NOT_LEADER_OR_FOLLOWER meanwhile)."""
    deadline = time.monotonic() + 30
    while True:
        answers = list_offsets(client, 11, name, [(p, -1) for p in range(partitions)])
        if all(a[1] == E.NONE for a in answers):
            return
        assert time.monotonic() < deadline, answers
        time.sleep(0.1)


def re_create(client: RawClient, name: str, partitions: int = 1) -> uuid.UUID:
    """Delete ``name`` and create it again; its new id. Kafka finishes a deletion a moment after
    answering, so creation is retried while the name is still taken."""
    deleted = client.call(DeleteTopicsRequest(topic_names=[name], timeout_ms=30000), 5)
    assert [r.error_code for r in deleted.responses] == [E.NONE], deleted
    deadline = time.monotonic() + 30
    while True:
        created = client.call(CreateTopicsRequest(
            topics=[CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=1, assignments=[],
                configs=[])], timeout_ms=30000), 5)
        code = created.topics[0].error_code
        if code == E.NONE:
            break
        assert code == E.TOPIC_ALREADY_EXISTS and time.monotonic() < deadline, created
        time.sleep(0.2)
    while True:
        meta = client.call(MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=name)],
            allow_auto_topic_creation=False), 12).topics[0]
        if meta.error_code == E.NONE and meta.partitions and all(
                p.leader_id >= 0 for p in meta.partitions):
            wait_for_leaders(client, name, partitions)
            return meta.topic_id
        assert time.monotonic() < deadline, meta
        time.sleep(0.1)


def batch(*values: str) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([SimpleRecord(key=None, value=v.encode(), timestamp=now + i)
                        for i, v in enumerate(values)])


def produce(client: RawClient, version: int, partitions, values=("x",), acks: int = 1):
    """partitions: [(topic id or name, partition)] -> {(id or name, partition): answer}."""
    data: dict = {}
    for key, index in partitions:
        td = data.get(key)
        if td is None:
            td = data[key] = P.TopicProduceData(partition_data=[])
            if version >= 13:
                td.topic_id = key
            else:
                td.name = key
        td.partition_data.append(P.PartitionProduceData(index=index, records=batch(*values)))
    response = client.call(P(transactional_id=None, acks=acks, timeout_ms=10000,
                             topic_data=list(data.values())), version)
    answers = {}
    for t in response.responses:
        if version >= 13:
            assert t.name == ""     # not on the wire from v13
        key = t.topic_id if version >= 13 else t.name
        for p in t.partition_responses:
            answers[(key, p.index)] = p
    return answers


def summary(answer) -> tuple:
    return answer.error_code, answer.base_offset, answer.error_message


def commit(client: RawClient, group: str, offsets: dict, version: int = 10,
           generation: int = -1, member_id: str = "") -> dict:
    """offsets: {(topic id or name, partition): offset} -> {(id or name, partition): error}."""
    by_topic: dict = {}
    for (key, index), offset in offsets.items():
        by_topic.setdefault(key, []).append(OC.OffsetCommitRequestPartition(
            partition_index=index, committed_offset=offset, committed_metadata="m"))
    request_topics = []
    for key, parts in by_topic.items():
        t = OC.OffsetCommitRequestTopic(partitions=parts)
        if version >= 10:
            t.topic_id = key
        else:
            t.name = key
        request_topics.append(t)
    response = client.call(OC(group_id=group, generation_id_or_member_epoch=generation,
                              member_id=member_id, group_instance_id=None,
                              topics=request_topics), version)
    out = {}
    for t in response.topics:
        key = t.topic_id if version >= 10 else t.name
        for p in t.partitions:
            assert (key, p.partition_index) not in out
            out[(key, p.partition_index)] = p.error_code
    return out


def fetch(client: RawClient, group: str, partitions: dict | None, version: int = 10,
          member_id: str | None = None, member_epoch: int = -1) -> tuple:
    """partitions: {topic id or name: [partition]} or None for all -> (group error,
    {(id or name, partition): (offset, metadata, error)})."""
    request_topics = None
    if partitions is not None:
        request_topics = []
        for key, indexes in partitions.items():
            t = OF.OffsetFetchRequestTopics(partition_indexes=indexes)
            if version >= 10:
                t.topic_id = key
            else:
                t.name = key
            request_topics.append(t)
    response = client.call(OF(groups=[OF.OffsetFetchRequestGroup(
        group_id=group, member_id=member_id, member_epoch=member_epoch,
        topics=request_topics)], require_stable=False), version)
    [g] = response.groups
    assert g.group_id == group
    out = {}
    for t in g.topics:
        if version >= 10:
            assert t.name == ""     # not on the wire from v10
        key = t.topic_id if version >= 10 else t.name
        for p in t.partitions:
            out[(key, p.partition_index)] = (p.committed_offset, p.metadata, p.error_code)
    return g.error_code, out


def list_offsets(client: RawClient, version: int, name: str, queries) -> list[tuple]:
    """queries: [(partition, timestamp)] in one request -> sorted (partition, error, timestamp,
    offset, leader epoch)."""
    response = client.call(LO(replica_id=-1, isolation_level=0, timeout_ms=1000, topics=[
        LO.ListOffsetsTopic(name=name, partitions=[
            LO.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=ts)
            for p, ts in queries])]), version)
    assert [t.name for t in response.topics] == [name]
    return sorted((p.partition_index, p.error_code, p.timestamp, p.offset, p.leader_epoch)
                  for p in response.topics[0].partitions)


def wait_for_high_watermark(client: RawClient, name: str, partition: int, offset: int) -> None:
    """Kafka answers acks=1 before its high watermark moves; ListOffsets sees only below it."""
    deadline = time.monotonic() + 10
    while list_offsets(client, 11, name, [(partition, -1)])[0][3] < offset:
        assert time.monotonic() < deadline, f"{name}-{partition} never reached {offset}"
        time.sleep(0.05)


@pytest.fixture
def client(connect) -> RawClient:
    return connect("conformance-ids")


# ---------------------------------------------------------------------------------------------
# ApiVersions

def test_api_versions_of_the_data_path(target, client):
    response = client.call(ApiVersionsRequest(client_software_name="conformance",
                                              client_software_version="1"), 3)
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {r.__name__: versions.get(r.api_key) for r in (
        ProduceRequest, ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest)} == {
        "ProduceRequest": (0, 13),          # from v0 for librdkafka (KAFKA-18659)
        "ListOffsetsRequest": (1, 11),
        "OffsetCommitRequest": (2, 10),
        "OffsetFetchRequest": (1, 10),
    }


# ---------------------------------------------------------------------------------------------
# Produce

def test_produce_by_topic_id(target, client):
    name, tid = new_topic(client, 2)
    unknown = uuid.uuid4()
    answers = produce(client, 13, [(tid, 0), (tid, 5), (unknown, 0), (ZERO, 1)], ("a", "b"))
    assert {k: summary(a) for k, a in answers.items()} == {
        (tid, 0): (E.NONE, 0, None),
        (tid, 5): (E.UNKNOWN_TOPIC_OR_PARTITION, -1, None),
        (unknown, 0): (E.UNKNOWN_TOPIC_ID, -1, None),
        (ZERO, 1): (E.UNKNOWN_TOPIC_ID, -1, None),
    }
    assert (answers[(tid, 0)].log_start_offset, answers[(unknown, 0)].log_start_offset) == (0, -1)
    # the same partition by name (v12) and by id again: the records follow each other
    assert summary(produce(client, 12, [(name, 0)])[(name, 0)]) == (E.NONE, 2, None)
    assert summary(produce(client, 13, [(tid, 0)])[(tid, 0)]) == (E.NONE, 3, None)
    wait_for_high_watermark(client, name, 0, 4)
    assert list_offsets(client, 11, name, [(0, -1), (1, -1)]) == [
        (0, E.NONE, -1, 4, 0), (1, E.NONE, -1, 0, 0)]


def test_produce_with_only_unknown_ids(target, client):
    a, b = uuid.uuid4(), uuid.uuid4()
    answers = produce(client, 13, [(a, 0), (a, 1), (b, 0)])
    assert {k: summary(v) for k, v in answers.items()} == {
        (a, 0): (E.UNKNOWN_TOPIC_ID, -1, None), (a, 1): (E.UNKNOWN_TOPIC_ID, -1, None),
        (b, 0): (E.UNKNOWN_TOPIC_ID, -1, None)}


def test_produce_with_the_id_of_a_re_created_topic(target, client):
    name, old = new_topic(client, 1)
    assert summary(produce(client, 13, [(old, 0)])[(old, 0)]) == (E.NONE, 0, None)
    new = re_create(client, name)
    assert new not in (old, ZERO)
    answers = produce(client, 13, [(old, 0), (new, 0)])
    assert {k: summary(v) for k, v in answers.items()} == {
        (old, 0): (E.UNKNOWN_TOPIC_ID, -1, None),
        (new, 0): (E.NONE, 0, None)}            # a new log: the old records are gone
    assert summary(produce(client, 12, [(name, 0)])[(name, 0)]) == (E.NONE, 1, None)


def _message_set(magic: int) -> bytes:
    """One magic 0 or 1 message (the formats Kafka 4 no longer takes)."""
    body = struct.pack(">bb", magic, 0)
    if magic == 1:
        body += struct.pack(">q", int(time.time() * 1000))
    body += struct.pack(">i", -1) + struct.pack(">i", 1) + b"v"
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_is_advertised_but_closes_the_connection(target, client, version):
    name, _ = new_topic(client, 1)
    for records in (_message_set(0), _message_set(1), batch("x")):
        old = RawClient(target.port, client_id="old-producer")
        try:
            old.send(P(acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
                name=name, partition_data=[P.PartitionProduceData(index=0, records=records)])]),
                version)
            with pytest.raises(ConnectionError):      # closed without an answer
                old._read(4)
        finally:
            old.close()
    # nothing was written, and the broker goes on serving
    assert list_offsets(client, 11, name, [(0, -1)]) == [(0, E.NONE, -1, 0, 0)]
    assert summary(produce(client, 3, [(name, 0)])[(name, 0)]) == (E.NONE, 0, None)


# ---------------------------------------------------------------------------------------------
# ListOffsets

def test_list_offsets_v11(target, client):
    name, tid = new_topic(client, 2)
    assert summary(produce(client, 13, [(tid, 0)], ("a", "b", "c"))[(tid, 0)]) == (
        E.NONE, 0, None)
    wait_for_high_watermark(client, name, 0, 3)
    before = int(time.time() * 1000) - 60000
    got = {ts: list_offsets(client, 11, name, [(0, ts)])[0]
           for ts in (-1, -2, -3, -4, -5, -6, before)}
    max_ts = got[-3][2]
    assert max_ts > before, got
    assert got == {
        -1: (0, E.NONE, -1, 3, 0),            # latest
        -2: (0, E.NONE, -1, 0, 0),            # earliest
        -3: (0, E.NONE, max_ts, 2, 0),        # max timestamp: the last record
        -4: (0, E.NONE, -1, 0, 0),            # earliest local
        -5: (0, E.NONE, -1, -1, -1),          # latest tiered: nothing is tiered
        -6: (0, E.NONE, -1, -1, -1),          # earliest pending upload (v11, KIP-1023)
        before: (0, E.NONE, max_ts - 2, 0, 0),
    }
    # on an empty partition
    assert list_offsets(client, 11, name, [(1, -6)]) == [(1, E.NONE, -1, -1, -1)]


@pytest.mark.parametrize("version,timestamp", [
    (10, -6), (8, -5), (7, -4), (6, -3), (11, -7), (11, -100)])
def test_list_offsets_timestamps_before_their_version(target, client, version, timestamp):
    name, _ = new_topic(client, 1)
    assert list_offsets(client, version, name, [(0, timestamp)]) == [
        (0, E.UNSUPPORTED_VERSION, -1, -1, -1)]


def test_list_offsets_partition_named_twice(target, client):
    name, _ = new_topic(client, 2)
    assert list_offsets(client, 11, name, [(0, -1), (1, -2), (0, -2), (5, -1)]) == [
        (0, E.INVALID_REQUEST, -1, -1, -1),      # answered once
        (1, E.NONE, -1, 0, 0),
        (5, E.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1)]


# ---------------------------------------------------------------------------------------------
# OffsetCommit and OffsetFetch v10

def test_offsets_by_topic_id_without_members(target, client):
    name, tid = new_topic(client, 2)
    other, other_id = new_topic(client, 1)
    unknown = uuid.uuid4()
    group = unique("ids-group")
    assert commit(client, group, {(tid, 0): 5, (tid, 1): 6, (tid, 7): 1, (unknown, 0): 1,
                                  (ZERO, 0): 1, (other_id, 0): 3}) == {
        (tid, 0): E.NONE, (tid, 1): E.NONE, (tid, 7): E.UNKNOWN_TOPIC_OR_PARTITION,
        (unknown, 0): E.UNKNOWN_TOPIC_ID, (ZERO, 0): E.UNKNOWN_TOPIC_ID,
        (other_id, 0): E.NONE}
    # only unknown ids: the group is not consulted (no UNKNOWN_MEMBER_ID)
    assert commit(client, unique("ids-group"), {(unknown, 0): 1}, generation=5,
                  member_id="nobody") == {(unknown, 0): E.UNKNOWN_TOPIC_ID}
    assert fetch(client, group, {tid: [0, 1, 3], unknown: [0], other_id: [0]}) == (E.NONE, {
        (tid, 0): (5, "m", E.NONE), (tid, 1): (6, "m", E.NONE),
        (tid, 3): (-1, NO_METADATA, E.NONE),
        (unknown, 0): (-1, NO_METADATA, E.UNKNOWN_TOPIC_ID),
        (other_id, 0): (3, "m", E.NONE)})
    everything = {(tid, 0): (5, "m", E.NONE), (tid, 1): (6, "m", E.NONE),
                  (other_id, 0): (3, "m", E.NONE)}
    assert fetch(client, group, None) == (E.NONE, everything)
    # v9 answers the same by name
    assert fetch(client, group, None, version=9) == (E.NONE, {
        ({tid: name, other_id: other}[k], p): v for (k, p), v in everything.items()})
    # a group nobody committed for
    assert fetch(client, unique("nobody"), {tid: [0], unknown: [1]}) == (E.NONE, {
        (tid, 0): (-1, NO_METADATA, E.NONE),
        (unknown, 1): (-1, NO_METADATA, E.UNKNOWN_TOPIC_ID)})


def test_offsets_by_the_id_of_a_re_created_topic(target, client):
    name, old = new_topic(client, 1)
    group = unique("ids-group")
    assert commit(client, group, {(old, 0): 4}) == {(old, 0): E.NONE}
    new = re_create(client, name)
    assert commit(client, group, {(old, 0): 9}) == {(old, 0): E.UNKNOWN_TOPIC_ID}
    assert fetch(client, group, {old: [0]}) == (E.NONE, {
        (old, 0): (-1, NO_METADATA, E.UNKNOWN_TOPIC_ID)})
    assert commit(client, group, {(new, 0): 2}) == {(new, 0): E.NONE}
    assert fetch(client, group, {new: [0], old: [0]}) == (E.NONE, {
        (new, 0): (2, "m", E.NONE), (old, 0): (-1, NO_METADATA, E.UNKNOWN_TOPIC_ID)})


def test_a_deleted_topics_offsets_are_gone_when_it_is_created_again(target, client):
    """Deleting a topic deletes every group's committed offsets of it (Kafka's
    onPartitionsDeleted), so a group reading the topic created again under the same name starts
    by its auto.offset.reset, not at the old topic's position. Kafka does it a moment after the
    deletion, once its metadata reaches the group coordinator."""
    name, _old = new_topic(client, 2)
    other, _ = new_topic(client, 1)
    group = unique("ids-deleted")
    assert commit(client, group, {(name, 0): 4, (name, 1): 6, (other, 0): 3}, version=9) == {
        (name, 0): E.NONE, (name, 1): E.NONE, (other, 0): E.NONE}
    re_create(client, name, 2)
    deadline = time.monotonic() + 30
    while True:
        answer = fetch(client, group, {name: [0, 1]}, version=9)
        if answer == (E.NONE, {(name, 0): (-1, NO_METADATA, E.NONE),
                               (name, 1): (-1, NO_METADATA, E.NONE)}):
            break
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)
    assert fetch(client, group, None, version=9) == (E.NONE, {(other, 0): (3, "m", E.NONE)})


def test_offsets_by_topic_id_for_a_classic_group(target, connect, client):
    name, tid = new_topic(client, 2)
    unknown = uuid.uuid4()
    group = unique("ids-classic")
    member = connect("ids-member")
    joined = join_new(member, 5, group, topic=name, protocols=[("range", subscription(name))])
    assert joined.error_code == E.NONE, joined
    generation, member_id = joined.generation_id, joined.member_id
    assert sync(member, 5, group, generation, member_id,
                assignments={member_id: b""}).error_code == E.NONE
    assert commit(member, group, {(tid, 0): 11, (unknown, 0): 1}, generation=generation,
                  member_id=member_id) == {(tid, 0): E.NONE, (unknown, 0): E.UNKNOWN_TOPIC_ID}
    assert commit(member, group, {(tid, 1): 1, (unknown, 0): 1}, generation=generation + 1,
                  member_id=member_id) == {
        (tid, 1): E.ILLEGAL_GENERATION, (unknown, 0): E.UNKNOWN_TOPIC_ID}
    assert commit(member, group, {(tid, 1): 1}, generation=generation,
                  member_id="someone") == {(tid, 1): E.UNKNOWN_MEMBER_ID}
    assert fetch(member, group, {tid: [0, 1], unknown: [0]}) == (E.NONE, {
        (tid, 0): (11, "m", E.NONE), (tid, 1): (-1, NO_METADATA, E.NONE),
        (unknown, 0): (-1, NO_METADATA, E.UNKNOWN_TOPIC_ID)})
    assert fetch(member, group, None) == (E.NONE, {(tid, 0): (11, "m", E.NONE)})


def test_offsets_by_topic_id_for_a_consumer_group(target, connect, client):
    name, tid = new_topic(client, 3)
    unknown = uuid.uuid4()
    group = unique("ids-consumer")
    member = Member(connect("ids-member"), group, (name, tid))
    joined = member.heartbeat()
    assert joined.error_code == E.NONE, joined
    epoch = member.epoch
    assert epoch >= 1
    c = member.client
    assert commit(c, group, {(tid, 0): 7, (unknown, 0): 1}, generation=epoch,
                  member_id=member.member_id) == {
        (tid, 0): E.NONE, (unknown, 0): E.UNKNOWN_TOPIC_ID}
    assert commit(c, group, {(tid, 0): 8}, generation=epoch + 1,
                  member_id=member.member_id) == {(tid, 0): E.STALE_MEMBER_EPOCH}
    assert commit(c, group, {(tid, 0): 8, (unknown, 1): 1}, generation=epoch,
                  member_id="someone") == {
        (tid, 0): E.UNKNOWN_MEMBER_ID, (unknown, 1): E.UNKNOWN_TOPIC_ID}
    assert fetch(c, group, {tid: [0, 1], unknown: [0]}, member_id=member.member_id,
                 member_epoch=epoch) == (E.NONE, {
        (tid, 0): (7, "m", E.NONE), (tid, 1): (-1, NO_METADATA, E.NONE),
        (unknown, 0): (-1, NO_METADATA, E.UNKNOWN_TOPIC_ID)})
    # a group-level error answers no topics, not even the unknown id
    assert fetch(c, group, {tid: [0], unknown: [0]}, member_id=member.member_id,
                 member_epoch=epoch + 1) == (E.STALE_MEMBER_EPOCH, {})
    assert fetch(c, group, None, member_id=member.member_id, member_epoch=epoch) == (
        E.NONE, {(tid, 0): (7, "m", E.NONE)})
    assert fetch(c, group, None) == (E.NONE, {(tid, 0): (7, "m", E.NONE)})
