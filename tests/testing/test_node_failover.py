"""Several nodes, wrong nodes and nodes going down (issue 12): NOT_COORDINATOR from a node that
does not coordinate a group or transactional id, replication factors above 1 with their ISR,
and a node taken down and brought back (``EmbeddedBroker.node_down``/``node_up``,
``POST /nodes/<id>/down``/``up``): its listeners and connections close, the partitions it led
move to another in-sync replica at the next leader epoch, a partition with no replica left has
no leader, and the coordinators move with the internal partitions. Real clients carry on as they
do against a Kafka cluster that loses a broker."""
from __future__ import annotations

import json
import socket
import time
import urllib.request

import pytest

import protocol.messages as m
from broker.coordinator.common.hashing import partition_for
from broker.testing import EmbeddedBroker
from protocol.errors import ErrorCode as E
from protocol.records import SimpleRecord, build_batch
from tests.support import RawClient, confluent_read, unique


@pytest.fixture
def kb():
    with EmbeddedBroker(nodes=3, **{"num.partitions": 6}) as broker:
        yield broker


def ports(kb) -> dict[int, int]:
    """node id -> port of the nodes that are up, from Metadata."""
    return {b.node_id: b.port for b in metadata(kb, []).brokers}


def metadata(kb, topics: list[str], port: int | None = None):
    port = port or next(n["port"] for n in _nodes(kb) if n["state"] == "up")
    client = RawClient(port)
    try:
        return client.call(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(
            name=t) for t in topics], allow_auto_topic_creation=False), 12)
    finally:
        client.close()


def _nodes(kb) -> list[dict]:
    bound = kb.call(lambda: dict(kb.broker.server.node_bound))
    listener = kb.call(lambda: next(iter(kb.broker.server.bound)))
    return [dict(n, port=bound[(listener, n["node"])][1]) for n in kb.nodes()]


def partitions(kb, topic: str, port: int | None = None) -> dict[int, object]:
    return {p.partition_index: p for p in metadata(kb, [topic], port).topics[0].partitions}


call = RawClient.once


def coordinator_of(kb, group: str) -> int:
    owners = {p.partition_index: p.leader_id
              for p in metadata(kb, ["__consumer_offsets"]).topics[0].partitions}
    return owners[partition_for(group)]


def produce(port: int, topic: str, partition: int, acks: int = -1, value: bytes = b"x"):
    P = m.ProduceRequest
    response = call(port, P(acks=acks, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=partition, records=build_batch(
            [SimpleRecord(key=None, value=value, timestamp=1)]))])]), 9)
    return response.responses[0].partition_responses[0]


def create_topic(port: int, name: str, partitions: int = 6, rf: int = 3, configs=None,
                 assignments=None):
    C = m.CreateTopicsRequest
    topic = C.CreatableTopic(
        name=name, num_partitions=-1 if assignments else partitions,
        replication_factor=-1 if assignments else rf,
        assignments=[C.CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                     for i, b in enumerate(assignments or [])],
        configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
    return call(port, C(topics=[topic], timeout_ms=5000, validate_only=False), 7).topics[0]


# -- NOT_COORDINATOR on the wrong node


def test_group_requests_on_a_node_that_does_not_coordinate_get_not_coordinator(kb):
    nodes = ports(kb)
    group = unique("route")
    owner = coordinator_of(kb, group)
    other = next(n for n in nodes if n != owner)
    H = m.HeartbeatRequest
    beat = H(group_id=group, generation_id=1, member_id="m")
    assert call(nodes[other], beat, 4).error_code == E.NOT_COORDINATOR
    assert call(nodes[owner], beat, 4).error_code == E.UNKNOWN_MEMBER_ID
    J = m.JoinGroupRequest
    join = J(group_id=group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
             protocol_type="consumer", protocols=[J.JoinGroupRequestProtocol(
                 name="range", metadata=b"")])
    assert call(nodes[other], join, 9).error_code == E.NOT_COORDINATOR
    assert call(nodes[owner], join, 9).error_code == E.MEMBER_ID_REQUIRED
    # OffsetCommit carries the error on each partition
    O = m.OffsetCommitRequest
    commit = call(nodes[other], O(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                  topics=[O.OffsetCommitRequestTopic(name="t", partitions=[
                                      O.OffsetCommitRequestPartition(partition_index=0,
                                                                     committed_offset=1)])]), 8)
    assert commit.topics[0].partitions[0].error_code == E.NOT_COORDINATOR


def test_a_batched_request_gets_not_coordinator_only_for_the_groups_coordinated_elsewhere(kb):
    nodes = ports(kb)
    groups = [unique("batch") for _ in range(12)]
    node = 1
    here = [g for g in groups if coordinator_of(kb, g) == node]
    assert here and len(here) < len(groups)
    described = call(nodes[node], m.DescribeGroupsRequest(groups=groups), 5)
    errors = {g.group_id: g.error_code for g in described.groups}
    assert sorted(errors) == sorted(groups)
    assert {g for g, e in errors.items() if e == E.NONE} == set(here)
    assert {g for g, e in errors.items() if e == E.NOT_COORDINATOR} == set(groups) - set(here)
    F = m.OffsetFetchRequest
    fetched = call(nodes[node], F(groups=[F.OffsetFetchRequestGroup(group_id=g, topics=None)
                                          for g in groups], require_stable=False), 8)
    assert {g.group_id for g in fetched.groups if g.error_code == E.NOT_COORDINATOR} == \
        set(groups) - set(here)


def test_list_groups_lists_the_groups_each_node_coordinates(kb):
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
    topic = kb.create_topic(partitions=1)
    groups = [unique("listed") for _ in range(6)]
    for g in groups:
        consumer = KafkaConsumer(bootstrap_servers=kb.bootstrap_servers, group_id=g,
                                 enable_auto_commit=False)
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(1, "", -1)})
        consumer.close()
    nodes = ports(kb)
    listed = {}
    for node, port in nodes.items():
        answer = call(port, m.ListGroupsRequest(states_filter=[], types_filter=[]), 5)
        listed[node] = {g.group_id for g in answer.groups} & set(groups)
    for g in groups:
        assert [n for n in nodes if g in listed[n]] == [coordinator_of(kb, g)]


def test_transaction_requests_on_the_wrong_node_get_not_coordinator(kb):
    nodes = ports(kb)
    tid = unique("txn")
    owners = {p.partition_index: p.leader_id
              for p in metadata(kb, ["__transaction_state"]).topics[0].partitions}
    owner = owners[partition_for(tid)]
    other = next(n for n in nodes if n != owner)
    I = m.InitProducerIdRequest
    init = I(transactional_id=tid, transaction_timeout_ms=60000, producer_id=-1,
             producer_epoch=-1)
    assert call(nodes[other], init, 4).error_code == E.NOT_COORDINATOR
    assert call(nodes[owner], init, 4).error_code == E.NONE
    # a producer without a transactional id is answered by any node
    idempotent = I(transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                   producer_epoch=-1)
    assert call(nodes[other], idempotent, 4).error_code == E.NONE


# -- replication factor


def test_replication_factor_up_to_the_nodes_with_every_replica_in_sync(kb):
    nodes = ports(kb)
    topic = unique("rf3")
    assert create_topic(nodes[1], topic, 6, 3).error_code == E.NONE
    for p in partitions(kb, topic).values():
        assert len(p.replica_nodes) == 3 and sorted(p.isr_nodes) == [1, 2, 3]
        assert p.leader_id == p.replica_nodes[0] and p.leader_epoch == 0
    assert {p.leader_id for p in partitions(kb, topic).values()} == {1, 2, 3}
    refused = create_topic(nodes[1], unique("rf4"), 1, 4)
    assert refused.error_code == E.INVALID_REPLICATION_FACTOR
    assert "only 3 broker(s) are registered" in refused.error_message
    bad = create_topic(nodes[1], unique("assign"), assignments=[[1, 9]])
    assert bad.error_code == E.INVALID_REPLICA_ASSIGNMENT
    placed = unique("assigned")
    assert create_topic(nodes[1], placed, assignments=[[3, 1], [2, 3]]).error_code == E.NONE
    got = partitions(kb, placed)
    assert [got[0].replica_nodes, got[1].replica_nodes] == [[3, 1], [2, 3]]
    assert [got[0].leader_id, got[1].leader_id] == [3, 2]


def test_internal_topics_have_a_replica_on_each_of_three_nodes(kb):
    for topic in ("__consumer_offsets", "__transaction_state"):
        for p in partitions(kb, topic).values():
            assert sorted(p.replica_nodes) == [1, 2, 3]


# -- a node going down and coming back


def test_a_node_down_moves_its_leaders_at_the_next_epoch_and_comes_back(kb):
    nodes = ports(kb)
    replicated, single = unique("down-rf3"), unique("down-rf1")
    assert create_topic(nodes[1], replicated, 6, 3).error_code == E.NONE
    assert create_topic(nodes[1], single, 6, 1).error_code == E.NONE
    before = partitions(kb, replicated)
    led_by_2 = [i for i, p in before.items() if p.leader_id == 2]
    single_on_2 = [i for i, p in partitions(kb, single).items() if p.replica_nodes == [2]]
    assert led_by_2 and single_on_2
    for i in led_by_2:
        assert produce(nodes[2], replicated, i).error_code == E.NONE
    held = RawClient(nodes[2])
    held.call(m.ApiVersionsRequest(), 0)  # accepted and answered: a connection of node 2

    result = kb.node_down(2)
    assert result["leaders_moved"] >= len(led_by_2) and result["connections_closed"] >= 1
    held.sock.settimeout(5)
    try:
        assert held.sock.recv(1) == b""  # the node closed its connections
    except ConnectionResetError:
        pass  # or reset them
    held.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", nodes[2]), timeout=2).close()
    assert sorted(ports(kb)) == [1, 3]
    after = partitions(kb, replicated)
    for i in led_by_2:
        p = after[i]
        assert p.leader_id in (1, 3) and p.leader_epoch == 1
        assert sorted(p.isr_nodes) == [1, 3] and p.offline_replicas == [2]
        assert produce(nodes[p.leader_id], replicated, i).error_code == E.NONE
    for i, p in after.items():
        if i not in led_by_2:
            assert p.leader_epoch == 0 and 2 not in p.isr_nodes
    for i in single_on_2:
        p = partitions(kb, single)[i]
        assert p.leader_id == -1 and p.error_code == E.LEADER_NOT_AVAILABLE
        assert produce(nodes[1], single, i).error_code == E.NOT_LEADER_OR_FOLLOWER

    # a fetch naming the old epoch is fenced; the epoch cache ends epoch 0 where epoch 1 began
    moved = led_by_2[0]
    leader = after[moved].leader_id
    F = m.FetchRequest
    fenced = call(nodes[leader], F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                                   isolation_level=0, topics=[F.FetchTopic(topic=replicated,
                                   partitions=[F.FetchPartition(
                                       partition=moved, current_leader_epoch=0, fetch_offset=0,
                                       log_start_offset=-1, partition_max_bytes=1 << 20)])]), 12)
    assert fenced.responses[0].partitions[0].error_code == E.FENCED_LEADER_EPOCH
    O = m.OffsetForLeaderEpochRequest
    ends = call(nodes[leader], O(replica_id=-1, topics=[O.OffsetForLeaderTopic(
        topic=replicated, partitions=[O.OffsetForLeaderPartition(
            partition=moved, current_leader_epoch=1, leader_epoch=0)])]), 4)
    end = ends.topics[0].partitions[0]
    assert (end.error_code, end.leader_epoch, end.end_offset) == (E.NONE, 0, 1)

    with pytest.raises(ValueError, match="already down"):
        kb.node_down(2)
    back = kb.node_up(2)
    assert back["leaders_moved"] == len(single_on_2)
    assert sorted(ports(kb)) == [1, 2, 3]
    for i in single_on_2:
        p = partitions(kb, single)[i]
        assert p.leader_id == 2 and p.leader_epoch == 2
        assert produce(nodes[2], single, i).error_code == E.NONE
    for p in partitions(kb, replicated).values():
        assert sorted(p.isr_nodes) == [1, 2, 3] and p.offline_replicas == []


def test_acks_all_needs_min_insync_replicas(kb):
    nodes = ports(kb)
    topic = unique("min-isr")
    assert create_topic(nodes[1], topic, 1, 3, {"min.insync.replicas": "3"}).error_code == E.NONE
    assert produce(nodes[partitions(kb, topic)[0].leader_id], topic, 0).error_code == E.NONE
    follower = next(n for n in partitions(kb, topic)[0].replica_nodes
                    if n != partitions(kb, topic)[0].leader_id)
    kb.node_down(follower)
    leader = partitions(kb, topic)[0].leader_id
    refused = produce(nodes[leader], topic, 0)
    assert refused.error_code == E.NOT_ENOUGH_REPLICAS
    assert produce(nodes[leader], topic, 0, acks=1).error_code == E.NONE


def test_the_last_node_up_stays_up(kb):
    kb.node_down(1)
    kb.node_down(2)
    with pytest.raises(ValueError, match="last node up"):
        kb.node_down(3)


def test_nodes_over_http(kb):
    base = kb.metrics_url

    def post(path: str):
        request = urllib.request.Request(base + path, method="POST", data=b"",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=5) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    with urllib.request.urlopen(base + "/nodes", timeout=5) as r:
        listed = json.loads(r.read())
    assert [(n["node"], n["state"]) for n in listed] == [(1, "up"), (2, "up"), (3, "up")]
    assert post("/nodes/3/down") == (200, {"node": 3, "state": "down",
                                          "leaders_moved": post_moved(listed, 3),
                                          "connections_closed": 0})
    status, body = post("/nodes/3/down")
    assert status == 409 and "already down" in body["error"]
    assert post("/nodes/7/up")[0] == 409
    status, body = post("/nodes/3/up")
    assert status == 200 and body["state"] == "up"


def post_moved(listed: list[dict], node: int) -> int:
    """Partitions node ``node`` led before going down: each moves (or loses its leader)."""
    return next(n["leaders"] for n in listed if n["node"] == node)


# -- real clients


def test_idempotent_confluent_producer_delivers_every_record_once_across_a_node_down(kb):
    from confluent_kafka import Producer
    nodes = ports(kb)
    topic = unique("ck-failover")
    assert create_topic(nodes[1], topic, 6, 3).error_code == E.NONE
    producer = Producer({"bootstrap.servers": kb.bootstrap_servers, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "retry.backoff.ms": 50,
                         "topic.metadata.refresh.interval.ms": 500})
    delivered, errors = [], []

    def on_delivery(err, msg):
        (errors if err else delivered).append(err or msg.value())

    for i in range(300):
        producer.produce(topic, f"r{i}".encode(), partition=i % 6, on_delivery=on_delivery)
        producer.poll(0)
        if i == 100:
            assert producer.flush(20) == 0
            kb.node_down(2)
        if i == 200:
            assert producer.flush(20) == 0
            kb.node_up(2)
        time.sleep(0.002)
    assert producer.flush(30) == 0
    assert errors == [] and len(delivered) == 300
    got = confluent_read(kb.bootstrap_servers, topic, 300)
    assert sorted(got) == sorted(f"r{i}" for i in range(300))  # each once, none lost


def test_kafka_python_group_carries_on_when_its_coordinator_node_goes_down(kb):
    from kafka import KafkaConsumer, KafkaProducer
    nodes = ports(kb)
    topic, group = unique("kp-failover"), unique("kp-g")
    assert create_topic(nodes[1], topic, 6, 3).error_code == E.NONE
    producer = KafkaProducer(bootstrap_servers=kb.bootstrap_servers, acks="all")
    for i in range(30):
        producer.send(topic, f"a{i}".encode(), partition=i % 6)
    producer.flush(20)
    consumer = KafkaConsumer(topic, bootstrap_servers=kb.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             metadata_max_age_ms=1000)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 30 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(r.value.decode() for r in records)
    consumer.commit()
    coordinator = coordinator_of(kb, group)
    kb.node_down(coordinator)
    for i in range(30):
        producer.send(topic, f"b{i}".encode(), partition=i % 6)
    producer.flush(20)
    deadline = time.monotonic() + 40
    while len(got) < 60 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(r.value.decode() for r in records)
    consumer.commit()  # to the coordinator's new node
    consumer.close()
    producer.close()
    assert sorted(got) == sorted([f"a{i}" for i in range(30)] + [f"b{i}" for i in range(30)])
    assert coordinator_of(kb, group) != coordinator


def test_java_consumer_group_carries_on_when_its_coordinator_node_goes_down(kb):
    from tests.clients.settle import JavaHost, Tracker
    nodes = ports(kb)
    topic, group = unique("java-failover"), unique("java-g")
    assert create_topic(nodes[1], topic, 6, 3).error_code == E.NONE
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=kb.bootstrap_servers, acks="all")

    def send(prefix: str) -> None:
        for i in range(30):
            producer.send(topic, f"{prefix}{i}".encode(), partition=i % 6)
        producer.flush(20)

    send("a")
    tracker = Tracker(6, 30)
    args = type("Args", (), {"bootstrap": kb.bootstrap_servers, "topic": topic,
                             "assignor": "range", "session_timeout_ms": 10000})()
    host = JavaHost(tracker, args)
    try:
        for member in (0, 1):
            host.start(member, group, None)
        assert tracker.wait_settled(time.monotonic(), 40, 0.5) is not None
        coordinator = coordinator_of(kb, group)
        kb.node_down(coordinator)
        send("b")
        tracker.records = 60
        tracker.need_records = True
        deadline = time.monotonic() + 40
        while len(tracker.seen) < 60 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(tracker.seen) == 60, f"polled {len(tracker.seen)} of 60 records"
        assert not host.errors
    finally:
        host.close_all()
        producer.close()


# -- leaders moved on purpose


def test_a_reassignment_completes_at_once_and_moves_the_leader_off_a_removed_replica(kb):
    nodes = ports(kb)
    topic = unique("reassign")
    assert create_topic(nodes[1], topic, assignments=[[1, 2]]).error_code == E.NONE
    A = m.AlterPartitionReassignmentsRequest
    answer = call(nodes[1], A(timeout_ms=5000, topics=[A.ReassignableTopic(
        name=topic, partitions=[A.ReassignablePartition(partition_index=0,
                                                        replicas=[3, 2])])]), 0)
    assert answer.responses[0].partitions[0].error_code == E.NONE
    p = partitions(kb, topic)[0]
    assert (p.replica_nodes, sorted(p.isr_nodes), p.leader_id, p.leader_epoch) == \
        ([3, 2], [2, 3], 3, 1)
    listed = call(nodes[1], m.ListPartitionReassignmentsRequest(timeout_ms=5000, topics=None), 0)
    assert listed.topics == []


def test_move_leader_fault_moves_a_partition_and_a_coordinator(kb):
    nodes = ports(kb)
    topic = unique("moved")
    assert create_topic(nodes[1], topic, 1, 3).error_code == E.NONE
    before = partitions(kb, topic)[0]
    fault = kb.faults.add(action="move_leader", match={"topic": topic, "partition": 0})
    after = partitions(kb, topic)[0]
    assert after.leader_id != before.leader_id and after.leader_epoch == before.leader_epoch + 1
    assert fault.result == {"topic": topic, "partition": 0, "from": before.leader_id,
                            "to": after.leader_id, "leader_epoch": after.leader_epoch}
    assert produce(nodes[before.leader_id], topic, 0).error_code == E.NOT_LEADER_OR_FOLLOWER
    assert produce(nodes[after.leader_id], topic, 0).error_code == E.NONE

    group = unique("moved-g")
    old = coordinator_of(kb, group)
    kb.faults.add(action="move_leader", match={"group": group})
    new = coordinator_of(kb, group)
    assert new != old
    beat = m.HeartbeatRequest(group_id=group, generation_id=1, member_id="m")
    assert call(nodes[old], beat, 4).error_code == E.NOT_COORDINATOR
    found = call(nodes[old], m.FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
    assert found.coordinators[0].node_id == new


def test_kafka_python_group_follows_its_coordinator_when_it_moves(kb):
    from kafka import KafkaConsumer, KafkaProducer
    topic, group = unique("kp-moved"), unique("kp-moved-g")
    assert create_topic(ports(kb)[1], topic, 3, 3).error_code == E.NONE
    producer = KafkaProducer(bootstrap_servers=kb.bootstrap_servers)
    consumer = KafkaConsumer(topic, bootstrap_servers=kb.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got = []

    def poll_until(n: int) -> None:
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend(r.value.decode() for r in records)

    try:
        for i in range(10):
            producer.send(topic, f"a{i}".encode(), partition=i % 3)
        producer.flush(20)
        poll_until(10)
        consumer.commit()
        old = coordinator_of(kb, group)
        kb.faults.add(action="move_leader", match={"group": group})
        for i in range(10):
            producer.send(topic, f"b{i}".encode(), partition=i % 3)
        producer.flush(20)
        poll_until(20)
        consumer.commit()  # found the new coordinator
        committed = call(ports(kb)[coordinator_of(kb, group)], m.OffsetFetchRequest(
            groups=[m.OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)],
            require_stable=False), 8).groups[0]
    finally:
        consumer.close()
        producer.close()
    assert coordinator_of(kb, group) != old
    assert sorted(got) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
    assert committed.error_code == E.NONE
    assert sum(p.committed_offset for t in committed.topics for p in t.partitions) == 20
