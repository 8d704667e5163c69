"""Faults on the wire: each kind of fault against an embedded broker, with protocol-level requests
so that every field of the answer can be checked (where the error goes, what the rest of the
request got, what was written)."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from protocol import messages as m
from protocol.errors import ErrorCode as E
from protocol.records import SimpleRecord, build_batch

from broker.testing import EmbeddedBroker, FaultError
from tests.support import RawClient, unique

P = m.ProduceRequest
F = m.FetchRequest


@pytest.fixture(scope="module")
def kb():
    with EmbeddedBroker(**{"group.initial.rebalance.delay.ms": 0}) as broker:
        yield broker


@pytest.fixture
def client(kb):
    c = RawClient(kb.port, client_id="raw-faults")
    yield c
    c.close()
    kb.faults.clear()


def produce(topic: str, partitions, acks: int = -1):
    return P(acks=acks, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(
            index=p, records=build_batch([SimpleRecord(None, b"v%d" % p)])) for p in partitions])])


def fetch(topic: str, partitions, max_wait_ms: int = 0):
    return F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
             isolation_level=0, session_id=0, session_epoch=-1, topics=[F.FetchTopic(
                 topic=topic, partitions=[F.FetchPartition(
                     partition=p, fetch_offset=0, partition_max_bytes=1 << 20)
                     for p in partitions])])


def end_offsets(client, topic: str, partitions) -> dict[int, int]:
    L = m.ListOffsetsRequest
    answer = client.call(L(replica_id=-1, topics=[L.ListOffsetsTopic(name=topic, partitions=[
        L.ListOffsetsPartition(partition_index=p, timestamp=-1) for p in partitions])]), 7)
    return {p.partition_index: p.offset for t in answer.topics for p in t.partitions}


def partition_errors(answer) -> dict[int, int]:
    return {p.index: p.error_code for t in answer.responses for p in t.partition_responses}


def test_produce_error_on_one_partition_the_others_are_written(kb, client):
    topic = kb.create_topic(partitions=3)
    fault = kb.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER",
                          match={"topic": topic, "partition": 1})
    answer = client.call(produce(topic, [0, 1, 2]), 9)
    assert partition_errors(answer) == {0: 0, 1: E.NOT_LEADER_OR_FOLLOWER, 2: 0}
    failed = next(p for t in answer.responses for p in t.partition_responses if p.index == 1)
    assert failed.base_offset == -1 and failed.log_start_offset == -1
    assert end_offsets(client, topic, [0, 1, 2]) == {0: 1, 1: 0, 2: 1}  # nothing written to 1
    assert fault.fired == 1
    # count 1 by default: the retry goes through
    assert partition_errors(client.call(produce(topic, [1]), 9)) == {1: 0}
    assert end_offsets(client, topic, [1]) == {1: 1}


def test_produce_error_without_topic_fails_every_partition(kb, client):
    topic = kb.create_topic(partitions=2)
    kb.faults.add(api="Produce", error="NOT_ENOUGH_REPLICAS", count=2)
    for _ in range(2):
        answer = client.call(produce(topic, [0, 1]), 9)
        assert partition_errors(answer) == {0: E.NOT_ENOUGH_REPLICAS, 1: E.NOT_ENOUGH_REPLICAS}
    assert end_offsets(client, topic, [0, 1]) == {0: 0, 1: 0}
    assert partition_errors(client.call(produce(topic, [0, 1]), 9)) == {0: 0, 1: 0}


def test_produce_acks_0_with_an_error_closes_the_connection(kb, client):
    topic = kb.create_topic()
    kb.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER")
    client.send(produce(topic, [0], acks=0), 9)
    with pytest.raises(ConnectionError):
        client.receive(m.ApiVersionsResponse, 0, 18)


def test_fetch_error_on_one_partition_answers_at_once(kb, client):
    """The faulted partition's error comes back with the others' data, without the long poll
    the rest of the request would have waited (Kafka answers at once when a partition fails)."""
    topic = kb.create_topic(partitions=2)
    client.call(produce(topic, [1]), 9)
    kb.faults.add(api="Fetch", error="FENCED_LEADER_EPOCH", match={"topic": topic, "partition": 0})
    started = time.monotonic()
    answer = client.call(fetch(topic, [0, 1], max_wait_ms=5000), 12)
    assert time.monotonic() - started < 2.5
    parts = {p.partition_index: p for t in answer.responses for p in t.partitions}
    assert answer.error_code == 0
    assert parts[0].error_code == E.FENCED_LEADER_EPOCH and parts[0].high_watermark == -1
    assert parts[1].error_code == 0 and parts[1].high_watermark == 1 and parts[1].records


def test_partition_error_goes_per_partition_even_where_a_top_level_error_exists(kb, client):
    topic = kb.create_topic(partitions=2)
    kb.faults.add(api="Fetch", error="NOT_LEADER_OR_FOLLOWER")
    answer = client.call(fetch(topic, [0, 1]), 12)
    assert answer.error_code == 0
    assert [(p.partition_index, p.error_code) for t in answer.responses for p in t.partitions] \
        == [(0, E.NOT_LEADER_OR_FOLLOWER), (1, E.NOT_LEADER_OR_FOLLOWER)]


def test_other_errors_go_top_level_where_the_api_has_one(kb, client):
    kb.faults.add(api="Fetch", error="FETCH_SESSION_ID_NOT_FOUND")
    answer = client.call(fetch(kb.create_topic(), [0]), 12)
    assert answer.error_code == E.FETCH_SESSION_ID_NOT_FOUND and answer.responses == []

    group = unique("g")
    kb.faults.add(api="JoinGroup", error="COORDINATOR_LOAD_IN_PROGRESS", match={"group": group})
    J = m.JoinGroupRequest
    answer = client.call(J(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000,
                           member_id="", protocol_type="consumer", protocols=[
                               J.JoinGroupRequestProtocol(name="range", metadata=b"")]), 5)
    assert answer.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert answer.generation_id == -1 and answer.members == []


def test_find_coordinator_error_per_key_or_top_level_by_version(kb, client):
    group, other = unique("g"), unique("g")
    kb.faults.add(api="FindCoordinator", error="COORDINATOR_NOT_AVAILABLE", count=2,
                  match={"group": group})
    C = m.FindCoordinatorRequest
    answer = client.call(C(key_type=0, coordinator_keys=[group, other]), 4)
    by_key = {c.key: c for c in answer.coordinators}
    assert by_key[group].error_code == E.COORDINATOR_NOT_AVAILABLE
    assert (by_key[group].node_id, by_key[group].port) == (-1, -1)
    assert by_key[other].error_code == 0 and by_key[other].port == kb.port
    old = client.call(C(key=group, key_type=0), 3)
    assert old.error_code == E.COORDINATOR_NOT_AVAILABLE and old.node_id == -1
    assert client.call(C(key=other, key_type=0), 3).error_code == 0  # not the group matched
    # a transactional id of the same name is another key
    assert client.call(C(key=group, key_type=1), 3).error_code == 0


def test_offset_fetch_error_per_group_in_batched_versions(kb, client):
    group, other = unique("g"), unique("g")
    kb.faults.add(api="OffsetFetch", error="NOT_COORDINATOR", match={"group": group})
    O = m.OffsetFetchRequest
    answer = client.call(O(groups=[O.OffsetFetchRequestGroup(group_id=g, topics=None)
                                   for g in (group, other)]), 8)
    assert {g.group_id: g.error_code for g in answer.groups} == {group: E.NOT_COORDINATOR,
                                                                 other: 0}
    kb.faults.add(api="OffsetFetch", error="NOT_COORDINATOR", match={"group": group})
    old = client.call(O(group_id=group, topics=None), 7)
    assert old.error_code == E.NOT_COORDINATOR


def test_metadata_topic_error_keeps_the_cluster(kb, client):
    topic, other = kb.create_topic(), kb.create_topic()
    kb.faults.add(api="Metadata", error="LEADER_NOT_AVAILABLE", count=2, match={"topic": topic})
    T = m.MetadataRequest.MetadataRequestTopic
    for names in ([topic, other], [topic]):
        answer = client.call(m.MetadataRequest(topics=[T(name=n) for n in names],
                                               allow_auto_topic_creation=False), 12)
        assert [b.port for b in answer.brokers] == [kb.port]
        errors = {t.name: t.error_code for t in answer.topics}
        assert errors == {n: (E.LEADER_NOT_AVAILABLE if n == topic else 0) for n in names}
        assert next(t for t in answer.topics if t.name == topic).partitions == []


def test_count_after_and_client_id(kb, client):
    topic = kb.create_topic()
    fault = kb.faults.add(api="Produce", error="KAFKA_STORAGE_ERROR", after=1, count=2,
                          match={"client_id": "raw-faults"})
    other = RawClient(kb.port, client_id="someone-else")
    try:
        results = [partition_errors(client.call(produce(topic, [0]), 9))[0] for _ in range(4)]
        assert partition_errors(other.call(produce(topic, [0]), 9))[0] == 0
    finally:
        other.close()
    assert results == [0, E.KAFKA_STORAGE_ERROR, E.KAFKA_STORAGE_ERROR, 0]
    assert (fault.seen, fault.fired) == (3, 2)


def test_node_match(kb, client):
    topic = kb.create_topic()
    kb.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", match={"node": kb.node_id + 1})
    assert partition_errors(client.call(produce(topic, [0]), 9))[0] == 0
    kb.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", match={"node": kb.node_id})
    assert partition_errors(client.call(produce(topic, [0]), 9))[0] == E.NOT_LEADER_OR_FOLLOWER


def test_duration_ends_a_fault_on_the_brokers_clock(kb, client):
    """duration_ms is measured on the broker's clock, which the test moves."""
    topic = kb.create_topic()
    now = [kb.call(lambda: kb.broker.clock())]
    original = kb.call(lambda: kb.broker.clock)
    kb.call(lambda: setattr(kb.broker, "clock", lambda: now[0]))
    try:
        kb.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=None,
                      duration_ms=1000)
        assert partition_errors(client.call(produce(topic, [0]), 9))[0] != 0
        now[0] += 999
        assert partition_errors(client.call(produce(topic, [0]), 9))[0] != 0
        now[0] += 1
        assert partition_errors(client.call(produce(topic, [0]), 9))[0] == 0
        assert kb.faults.list()[0]["armed"] is False
    finally:
        kb.call(lambda: setattr(kb.broker, "clock", original))


def test_disconnect_answers_what_came_before_and_not_the_request(kb, client):
    topic = kb.create_topic()
    kb.faults.add(api="Fetch", action="disconnect")
    first = client.send(m.ApiVersionsRequest(), 0)
    client.send(fetch(topic, [0]), 12)
    correlation_id, answer = client.receive(m.ApiVersionsResponse, 0, 18)
    assert (correlation_id, answer.error_code) == (first, 0)
    with pytest.raises(ConnectionError):
        client.receive(m.FetchResponse, 12, 1)


def test_delay_answers_late_and_keeps_the_order(kb, client):
    topic = kb.create_topic()
    kb.faults.add(api="Produce", delay_ms=300)
    started = time.monotonic()
    produced = client.send(produce(topic, [0]), 9)
    versions = client.send(m.ApiVersionsRequest(), 0)
    correlation_id, answer = client.receive(m.ProduceResponse, 9, 0)
    took = time.monotonic() - started
    assert correlation_id == produced and partition_errors(answer) == {0: 0}
    assert client.receive(m.ApiVersionsResponse, 0, 18)[0] == versions
    assert 0.3 <= took < 3


def test_delay_with_an_error(kb, client):
    topic = kb.create_topic()
    kb.faults.add(api="Produce", error="REQUEST_TIMED_OUT", delay_ms=200)
    started = time.monotonic()
    answer = client.call(produce(topic, [0]), 9)
    assert time.monotonic() - started >= 0.2
    assert partition_errors(answer) == {0: E.REQUEST_TIMED_OUT}
    assert end_offsets(client, topic, [0]) == {0: 0}


def test_bad_faults_are_refused(kb):
    for spec, says in [({"api": "Nope", "error": "NONE"}, "unknown API"),
                       ({"api": "Produce", "error": "NOT_AN_ERROR"}, "unknown error"),
                       ({"api": "Produce"}, "needs an error"),
                       ({"api": "Produce", "error": "NONE", "match": {"host": "x"}}, "match key"),
                       ({"api": "Produce", "error": "NONE", "count": -1}, "count"),
                       ({"api": "Produce", "error": "NONE", "colour": 1}, "unknown field"),
                       ({"action": "coordinator_load"}, "duration_ms"),
                       ({"action": "expire_member", "match": {"group": unique("g")}},
                        "no members"),
                       ({"action": "explode"}, "unknown action")]:
        with pytest.raises(FaultError, match=says):
            kb.faults.add(spec)
    assert [f for f in kb.faults.list() if f["fired"] == 0 and f.get("armed")] == []


def http(kb, method: str, path: str, body=None):
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(kb.metrics_url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_http_faults(kb, client):
    topic = kb.create_topic()
    assert http(kb, "DELETE", "/faults")[0] == 200
    status, added = http(kb, "POST", "/faults", {"api": "Produce", "error":
                                                 "NOT_LEADER_OR_FOLLOWER", "count": 2,
                                                 "match": {"topic": topic}})
    assert status == 201 and added["fired"] == 0 and added["count"] == 2
    status, both = http(kb, "POST", "/faults", [{"api": "Metadata", "delay_ms": 1},
                                                {"api": "ListOffsets", "error": "NONE"}])
    assert status == 201 and [f["id"] for f in both] == [added["id"] + 1, added["id"] + 2]
    assert http(kb, "DELETE", f"/faults/{both[1]['id']}") == (200, {"removed": both[1]["id"]})
    assert http(kb, "DELETE", f"/faults/{both[1]['id']}")[0] == 404
    for _ in range(3):
        client.call(produce(topic, [0]), 9)
    status, listed = http(kb, "GET", "/faults")
    assert status == 200
    assert [(f["api"], f["fired"], f["armed"]) for f in listed] == [
        ("Produce", 2, False), ("Metadata", 0, True)]
    status, error = http(kb, "POST", "/faults", {"api": "Produce", "error": "WHATEVER"})
    assert status == 400 and "unknown error" in error["error"]
    assert http(kb, "POST", "/faults", b"not json{")[0] == 400
    assert http(kb, "POST", "/faults", "a string")[0] == 400
    assert http(kb, "PUT", "/faults", {})[0] == 405
    with urllib.request.urlopen(kb.metrics_url + "/metrics", timeout=10) as response:
        scraped = response.read().decode()
    assert 'kafka_faults_fired_total{action="error",api="Produce",' \
           'error="NOT_LEADER_OR_FOLLOWER"}' in scraped
    assert http(kb, "DELETE", "/faults") == (200, {"cleared": 2})
    assert http(kb, "GET", "/faults") == (200, [])


def test_no_fault_armed_means_no_fault_code_on_the_request_path(kb, client):
    """With nothing armed the request path never calls into the fault injector: the look at
    the empty armed list is all a request pays."""
    calls = []
    faults = kb.call(lambda: kb.broker.faults)
    real = faults.intercept
    faults.intercept = lambda *args: calls.append(args) or real(*args)
    try:
        topic = kb.create_topic()
        client.call(produce(topic, [0]), 9)
        assert calls == []
        kb.faults.add(api="Metadata", error="NONE", count=1)
        client.call(produce(topic, [0]), 9)
        assert len(calls) == 1
        kb.faults.clear()
        client.call(produce(topic, [0]), 9)
        assert len(calls) == 1
    finally:
        del faults.intercept


def test_a_request_whose_answer_has_no_place_for_the_error_goes_through(kb, client):
    """Metadata v12 for every topic has no error code to carry a fault's error: the fault waits
    for a request that has one."""
    topic = kb.create_topic()
    fault = kb.faults.add(api=["Metadata", "Produce"], error="UNKNOWN_SERVER_ERROR")
    everything = client.call(m.MetadataRequest(topics=None), 12)
    assert [b.port for b in everything.brokers] == [kb.port] and everything.topics
    assert (fault.seen, fault.fired) == (0, 0)
    assert partition_errors(client.call(produce(topic, [0]), 9)) == {0: E.UNKNOWN_SERVER_ERROR}
    assert fault.fired == 1


def test_coordinator_load_of_a_transaction_coordinator(kb, client):
    """The transactional id's shard of __transaction_state unloads and answers
    COORDINATOR_LOAD_IN_PROGRESS until the load ends (here ended early by finish_loads), then
    knows the producer again from its log."""
    txn = unique("txn")
    I = m.InitProducerIdRequest
    first = client.call(I(transactional_id=txn, transaction_timeout_ms=60000), 4)
    assert first.error_code == 0
    load = kb.faults.coordinator_load(duration_ms=600000, transactional_id=txn)
    partition = kb.call(lambda: kb.broker.transactions.partition_for(txn))
    assert load.result == {"shards": [f"__transaction_state-{partition}"]}
    loading = client.call(I(transactional_id=txn, transaction_timeout_ms=60000), 4)
    assert loading.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert kb.faults.finish_loads() == 1
    again = client.call(I(transactional_id=txn, transaction_timeout_ms=60000), 4)
    assert again.error_code == 0
    assert (again.producer_id, again.producer_epoch) == (first.producer_id,
                                                         first.producer_epoch + 1)


def test_expire_a_consumer_protocol_member(kb, client):
    topic = kb.create_topic(partitions=2)
    group = unique("cg")
    H = m.ConsumerGroupHeartbeatRequest
    joined = client.call(H(group_id=group, member_id="", member_epoch=0,
                           rebalance_timeout_ms=30000, subscribed_topic_names=[topic],
                           topic_partitions=[]), 0)
    assert joined.error_code == 0 and joined.member_epoch > 0
    with pytest.raises(FaultError, match="consumer protocol"):
        kb.faults.rebalance(group)
    expired = kb.faults.expire_member(group)
    assert expired.result == {"group": group, "member_id": joined.member_id}
    after = client.call(H(group_id=group, member_id=joined.member_id,
                          member_epoch=joined.member_epoch), 0)
    assert after.error_code == E.UNKNOWN_MEMBER_ID


def _topic_id(client, topic: str):
    meta = client.call(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(
        name=topic)], allow_auto_topic_creation=False), 12)
    return meta.topics[0].topic_id


def test_topic_match_at_versions_that_name_topics_by_id(kb, client):
    """Produce v13 and OffsetCommit v10 carry topic ids, not names: a fault matched by topic
    name still lands on that topic only, and the answer carries the ids."""
    topic, other = kb.create_topic(partitions=2), kb.create_topic()
    tid, other_id = _topic_id(client, topic), _topic_id(client, other)
    kb.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER",
                  match={"topic": topic, "partition": 1})
    request = produce(topic, [0, 1])
    request.topic_data[0].topic_id = tid
    request.topic_data.append(produce(other, [0]).topic_data[0])
    request.topic_data[1].topic_id = other_id
    answer = client.call(request, 13)
    assert sorted((t.topic_id, p.index, p.error_code) for t in answer.responses
                  for p in t.partition_responses) == sorted([
        (tid, 0, E.NONE), (tid, 1, E.NOT_LEADER_OR_FOLLOWER), (other_id, 0, E.NONE)])
    assert end_offsets(client, topic, [0, 1]) == {0: 1, 1: 0}

    kb.faults.add(api="OffsetCommit", error="UNKNOWN_TOPIC_OR_PARTITION",
                  match={"topic": other})
    O = m.OffsetCommitRequest
    answer = client.call(O(group_id=unique("g"), generation_id_or_member_epoch=-1, member_id="",
                           topics=[O.OffsetCommitRequestTopic(topic_id=i, partitions=[
                               O.OffsetCommitRequestPartition(partition_index=0,
                                                              committed_offset=1)])
                               for i in (tid, other_id)]), 10)
    assert sorted((t.topic_id, p.partition_index, p.error_code) for t in answer.topics
                  for p in t.partitions) == sorted([
        (tid, 0, E.NONE), (other_id, 0, E.UNKNOWN_TOPIC_OR_PARTITION)])
