"""Differential conformance of Fetch at Kafka 4.3's versions: topic ids (v13+), fetch sessions
(KIP-227) and their errors, against a real Apache Kafka 4.3.1 broker and kbroker (the
``target`` fixture). Session ids are random, so the scenarios compare what the answers say
about them (new, the same, zero), never their values.
"""
from __future__ import annotations

import time
import uuid

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)
from protocol.records import SimpleRecord, build_batch
from tests.support import RawClient, unique

from . import topics

F = FetchRequest
V = 18          # what the Java 4.3 consumer sends
MAX = 1 << 20


@pytest.fixture
def client(target):
    c = RawClient(target.port, client_id="conformance-fetch")
    yield c
    c.close()


def topic_id(client: RawClient, name: str) -> uuid.UUID:
    meta = client.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                       allow_auto_topic_creation=False), 12)
    return meta.topics[0].topic_id


def produce(client: RawClient, topic: str, partition: int, n: int = 1) -> None:
    batch = build_batch([SimpleRecord(key=None, value=f"r{i}".encode(), timestamp=1_700_000_000_000)
                         for i in range(n)])
    P = ProduceRequest
    deadline = time.monotonic() + 30
    while True:
        answer = client.call(P(acks=-1, timeout_ms=30000, topic_data=[P.TopicProduceData(
            name=topic, partition_data=[P.PartitionProduceData(index=partition,
                                                               records=batch)])]), 9)
        error = answer.responses[0].partition_responses[0].error_code
        if error != E.NOT_LEADER_OR_FOLLOWER or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert error == E.NONE, answer


def fetch(client: RawClient, parts: dict, session_id: int = 0, epoch: int = -1,
          forgotten: dict | None = None, version: int = V, max_wait_ms: int = 0,
          min_bytes: int = 1):
    """``parts``: {topic id (or name below v13): {partition: fetch offset}}."""
    def topic(key, partitions):
        named = {"topic_id": key} if version >= 13 else {"topic": key}
        return F.FetchTopic(**named, partitions=[
            F.FetchPartition(partition=p, fetch_offset=o, log_start_offset=-1,
                             partition_max_bytes=MAX) for p, o in partitions.items()])

    def gone(key, partitions):
        named = {"topic_id": key} if version >= 13 else {"topic": key}
        return F.ForgottenTopic(**named, partitions=list(partitions))
    return client.call(F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                         max_bytes=MAX, isolation_level=0, session_id=session_id,
                         session_epoch=epoch,
                         topics=[topic(k, v) for k, v in parts.items()],
                         forgotten_topics_data=[gone(k, v) for k, v in (forgotten or {}).items()],
                         rack_id=""), version)


def readable(client: RawClient, tid: uuid.UUID, partitions: int) -> None:
    """Until a fetch by id reads every partition without error (Kafka's new partition takes a
    moment after Metadata shows its leader)."""
    deadline = time.monotonic() + 30
    while True:
        answer = fetch(client, {tid: {p: 0 for p in range(partitions)}})
        if all(v[0] == "NONE" for v in shape(answer).values()):
            return
        assert time.monotonic() < deadline, answer
        time.sleep(0.1)


def shape(answer, version: int = V) -> dict:
    """{(topic id or name, partition): (error name, high watermark, has records)}."""
    out = {}
    for t in answer.responses:
        for p in t.partitions:
            key = (t.topic_id if version >= 13 else t.topic, p.partition_index)
            assert key not in out, f"{key} answered twice"
            out[key] = (E(p.error_code).name, p.high_watermark, bool(p.records))
    return out


# ------------------------------------------------------------------------------ topic ids

def test_fetch_by_topic_id_and_unknown_topic_id(target, client):
    name = topics.create_topic(client, unique("fetch-ids"), 2)
    tid = topic_id(client, name)
    produce(client, name, 0, 3)
    answer = fetch(client, {tid: {0: 0, 1: 0}})
    assert (answer.error_code, answer.session_id) == (E.NONE, 0)
    assert shape(answer) == {(tid, 0): ("NONE", 3, True), (tid, 1): ("NONE", 0, False)}
    # the topic name is not on the wire from v13: the answer names the topic by id only
    assert [t.topic_id for t in answer.responses] == [tid]

    unknown = uuid.uuid4()
    answer = fetch(client, {unknown: {0: 0}, tid: {1: 0}})
    assert answer.error_code == E.NONE
    assert shape(answer) == {(unknown, 0): ("UNKNOWN_TOPIC_ID", -1, False),
                             (tid, 1): ("NONE", 0, False)}
    # the partition read comes first, the one refused before reading after
    assert [t.topic_id for t in answer.responses] == [tid, unknown]


def test_an_unknown_topic_id_does_not_end_a_long_poll(target, client):
    """Only errors from reading end a long poll early; a refused partition waits with it."""
    name = topics.create_topic(client, unique("fetch-wait"), 1)
    tid = topic_id(client, name)
    readable(client, tid, 1)
    started = time.monotonic()
    answer = fetch(client, {uuid.uuid4(): {0: 0}, tid: {0: 0}}, max_wait_ms=700)
    waited = time.monotonic() - started
    assert waited >= 0.6, waited
    assert sorted(v[0] for v in shape(answer).values()) == ["NONE", "UNKNOWN_TOPIC_ID"]
    # nothing to read at all: answered at once
    started = time.monotonic()
    answer = fetch(client, {uuid.uuid4(): {0: 0}}, max_wait_ms=5000)
    assert time.monotonic() - started < 2
    assert [v[0] for v in shape(answer).values()] == ["UNKNOWN_TOPIC_ID"]


# ------------------------------------------------------------------------------ sessions

def test_session_from_creation_through_incremental_fetches(target, client):
    name = topics.create_topic(client, unique("fetch-session"), 3)
    tid = topic_id(client, name)
    readable(client, tid, 3)
    produce(client, name, 0, 2)
    full = fetch(client, {tid: {0: 0, 1: 0, 2: 0}}, epoch=0)
    sid = full.session_id
    assert full.error_code == E.NONE and sid > 0
    assert shape(full) == {(tid, 0): ("NONE", 2, True), (tid, 1): ("NONE", 0, False),
                           (tid, 2): ("NONE", 0, False)}

    # nothing sent: partition 0 still has records at the offset the session holds
    same = fetch(client, {}, sid, 1)
    assert (same.error_code, same.session_id, shape(same)) == (
        E.NONE, sid, {(tid, 0): ("NONE", 2, True)})

    # partition 0 moves on past its records: nothing changed, an empty answer
    moved = fetch(client, {tid: {0: 2}}, sid, 2)
    assert (moved.error_code, moved.session_id, shape(moved)) == (E.NONE, sid, {})

    # new data on partition 1 only: only partition 1 comes back
    produce(client, name, 1, 1)
    changed = fetch(client, {}, sid, 3)
    assert (changed.session_id, shape(changed)) == (sid, {(tid, 1): ("NONE", 1, True)})

    # the high watermark was told: not again, though the fetch offset stayed at 0
    again = fetch(client, {}, sid, 4)
    assert shape(again) == {(tid, 1): ("NONE", 1, True)}  # data still there to read at 0
    fetch(client, {tid: {1: 1}}, sid, 5)
    quiet = fetch(client, {}, sid, 6)
    assert shape(quiet) == {}

    # a long poll of a session waits for data like any fetch
    started = time.monotonic()
    waited = fetch(client, {}, sid, 7, max_wait_ms=500)
    assert time.monotonic() - started >= 0.4 and shape(waited) == {}


def test_forgotten_and_added_partitions(target, client):
    name = topics.create_topic(client, unique("fetch-forget"), 3)
    tid = topic_id(client, name)
    readable(client, tid, 3)
    full = fetch(client, {tid: {0: 0, 1: 0}}, epoch=0)
    sid = full.session_id
    assert sid > 0 and len(shape(full)) == 2

    forgot = fetch(client, {}, sid, 1, forgotten={tid: [1]})
    assert (forgot.error_code, shape(forgot)) == (E.NONE, {})
    produce(client, name, 1, 1)
    assert shape(fetch(client, {}, sid, 2)) == {}        # partition 1 is no longer fetched

    # added partitions are answered the first time whatever they hold
    added = fetch(client, {tid: {1: 0, 2: 0}}, sid, 3)
    assert shape(added) == {(tid, 1): ("NONE", 1, True), (tid, 2): ("NONE", 0, False)}

    # an unknown topic id in a session: answered each time, as an error always is
    unknown = uuid.uuid4()
    first = fetch(client, {unknown: {0: 0}}, sid, 4)
    assert shape(first) == {(unknown, 0): ("UNKNOWN_TOPIC_ID", -1, False),
                            (tid, 1): ("NONE", 1, True)}
    fetch(client, {tid: {1: 1}}, sid, 5)
    assert shape(fetch(client, {}, sid, 6)) == {(unknown, 0): ("UNKNOWN_TOPIC_ID", -1, False)}

    # forgetting every partition closes the session
    closed = fetch(client, {}, sid, 7, forgotten={tid: [0, 1, 2], unknown: [0]})
    assert (closed.error_code, closed.session_id, shape(closed)) == (E.NONE, 0, {})
    after = fetch(client, {}, sid, 8)
    assert (after.error_code, after.session_id) == (E.FETCH_SESSION_ID_NOT_FOUND, 0)


def test_session_errors(target, client):
    name = topics.create_topic(client, unique("fetch-errors"), 1)
    tid = topic_id(client, name)

    missing = fetch(client, {}, 12345, 1)
    assert (missing.error_code, missing.session_id, missing.responses) == (
        E.FETCH_SESSION_ID_NOT_FOUND, 0, [])

    sid = fetch(client, {tid: {0: 0}}, epoch=0).session_id
    assert sid > 0
    wrong = fetch(client, {}, sid, 5)
    assert (wrong.error_code, wrong.session_id, wrong.responses) == (
        E.INVALID_FETCH_SESSION_EPOCH, 0, [])
    # the wrong epoch did not move the session: the right one still works
    assert (fetch(client, {}, sid, 1).error_code, fetch(client, {}, sid, 1).error_code) == (
        E.NONE, E.INVALID_FETCH_SESSION_EPOCH)

    # a session made with topic ids cannot go on by names, nor the other way round
    mixed = fetch(client, {}, sid, 2, version=12)
    assert (mixed.error_code, mixed.session_id, mixed.responses) == (
        E.FETCH_SESSION_TOPIC_ID_ERROR, 0, [])
    by_name = fetch(client, {name: {0: 0}}, epoch=0, version=12).session_id
    assert by_name > 0
    assert fetch(client, {}, by_name, 1, version=V).error_code == E.FETCH_SESSION_TOPIC_ID_ERROR
    assert fetch(client, {}, by_name, 1, version=12).error_code == E.NONE

    # epoch 0 with a session id: the old session closes and a new one starts
    renewed = fetch(client, {tid: {0: 0}}, sid, 0)
    assert renewed.error_code == E.NONE and renewed.session_id not in (0, sid)
    assert fetch(client, {}, sid, 2).error_code == E.FETCH_SESSION_ID_NOT_FOUND
    # epoch -1 with a session id: closed, and no session made
    final = fetch(client, {tid: {0: 0}}, renewed.session_id, -1)
    assert (final.error_code, final.session_id, len(shape(final))) == (E.NONE, 0, 1)
    assert fetch(client, {}, renewed.session_id, 1).error_code == E.FETCH_SESSION_ID_NOT_FOUND


# ------------------------------------------------------------------------------ re-created topic

def delete_topic(client: RawClient, name: str) -> None:
    D = DeleteTopicsRequest
    answer = client.call(D(topic_names=[name], timeout_ms=30000), 5)
    assert answer.responses[0].error_code == E.NONE, answer


def recreate(client: RawClient, name: str, partitions: int) -> None:
    """Kafka deletes a topic a moment after answering: create again until the name is free."""
    C = CreateTopicsRequest
    deadline = time.monotonic() + 30
    while True:
        created = client.call(C(topics=[C.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, assignments=[],
            configs=[])], timeout_ms=30000), 5)
        error = created.topics[0].error_code
        if error != E.TOPIC_ALREADY_EXISTS or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert error == E.NONE, created
    deadline = time.monotonic() + 30
    while True:  # as topics.create_topic: until every partition has a leader
        meta = client.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name=name)], allow_auto_topic_creation=False), 12)
        t = meta.topics[0]
        if t.error_code == E.NONE and t.partitions and all(p.leader_id >= 0
                                                           for p in t.partitions):
            return
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_deleted_and_recreated_topic(target, client):
    name = topics.create_topic(client, unique("fetch-recreate"), 1)
    old = topic_id(client, name)
    produce(client, name, 0, 2)
    sid = fetch(client, {old: {0: 0}}, epoch=0).session_id
    assert sid > 0

    delete_topic(client, name)
    recreate(client, name, 1)
    new = topic_id(client, name)
    assert new != old

    # a client holding the old id is told it is unknown, with or without a session
    assert shape(fetch(client, {old: {0: 0}})) == {(old, 0): ("UNKNOWN_TOPIC_ID", -1, False)}
    stale = fetch(client, {}, sid, 1)
    assert stale.error_code == E.NONE and stale.session_id == sid
    # a session holds the partition by its old id and name: the log's id differs
    assert shape(stale) == {(old, 0): ("INCONSISTENT_TOPIC_ID", -1, False)}
    # the new id reads the new, empty topic
    assert shape(fetch(client, {new: {0: 0}})) == {(new, 0): ("NONE", 0, False)}
