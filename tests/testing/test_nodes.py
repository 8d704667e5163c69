"""Several nodes in one process (issue 12: ``nodes=N``, ``kbroker --nodes N``): each node has
its own listeners, Metadata and DescribeCluster list them all, partition leaders spread over
them, a request for a partition sent to a node that does not lead it gets
NOT_LEADER_OR_FOLLOWER as on Kafka, and FindCoordinator names the node that leads the key's
internal partition. Real clients (kafka-python, confluent-kafka, the Java client) find the
leaders and the coordinator and produce and consume in a group across the nodes."""
from __future__ import annotations

import json
import socket

import pytest

import protocol.messages as m
from broker.testing import EmbeddedBroker
from protocol.errors import ErrorCode as E
from protocol.records import SimpleRecord, build_batch
from tests.support import BrokerProcess, RawClient, confluent_read, unique



@pytest.fixture(scope="module")
def cluster():
    with EmbeddedBroker(nodes=3, **{"num.partitions": 6}) as kb:
        yield kb


def addresses(kb) -> dict[int, int]:
    """node id -> port, from Metadata."""
    port = int(kb.bootstrap_servers.split(",")[0].rsplit(":", 1)[1])
    meta = RawClient.once(port, m.MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    return {b.node_id: b.port for b in meta.brokers}


def leaders(port: int, topic: str) -> dict[int, int]:
    request = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
                                allow_auto_topic_creation=True)
    meta = RawClient.once(port, request, 12)
    return {p.partition_index: p.leader_id for p in meta.topics[0].partitions}


def test_metadata_lists_every_node_and_spreads_the_leaders(cluster):
    nodes = addresses(cluster)
    assert sorted(nodes) == [1, 2, 3] and len(set(nodes.values())) == 3
    topic = unique("nodes-spread")
    led = leaders(nodes[1], topic)
    assert sorted(led) == list(range(6)) and set(led.values()) == {1, 2, 3}
    # every node gives the same answer, and DescribeCluster lists the same nodes
    for port in nodes.values():
        assert leaders(port, topic) == led
        described = RawClient.once(port, m.DescribeClusterRequest(
            include_cluster_authorized_operations=False), 0)
        assert {b.broker_id: b.port for b in described.brokers} == nodes


def produce(port: int, topic: str, partition: int) -> int:
    P = m.ProduceRequest
    request = P(acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=partition, records=build_batch(
            [SimpleRecord(key=None, value=b"x", timestamp=1)]))])])
    response = RawClient.once(port, request, 9)
    return response.responses[0].partition_responses[0].error_code


def fetch_error(port: int, topic: str, partition: int) -> int:
    F = m.FetchRequest
    request = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                topics=[F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                    partition=partition, fetch_offset=0, log_start_offset=-1,
                    partition_max_bytes=1 << 20)])])
    return RawClient.once(port, request, 11).responses[0].partitions[0].error_code


def list_offsets_error(port: int, topic: str, partition: int) -> int:
    L = m.ListOffsetsRequest
    request = L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name=topic, partitions=[L.ListOffsetsPartition(partition_index=partition,
                                                       timestamp=-1)])])
    return RawClient.once(port, request, 7).topics[0].partitions[0].error_code


def test_a_partition_answers_only_on_its_leader(cluster):
    nodes = addresses(cluster)
    topic = unique("nodes-leader")
    led = leaders(nodes[1], topic)
    for partition, leader in led.items():
        for node, port in nodes.items():
            expected = E.NONE if node == leader else E.NOT_LEADER_OR_FOLLOWER
            assert produce(port, topic, partition) == expected
            assert fetch_error(port, topic, partition) == expected
            assert list_offsets_error(port, topic, partition) == expected


def test_find_coordinator_names_the_node_leading_the_internal_partition(cluster):
    from broker.coordinator.common.hashing import partition_for
    nodes = addresses(cluster)
    groups = [unique("nodes-group") for _ in range(12)]
    owners = leaders(nodes[1], "__consumer_offsets")
    seen = set()
    for port in nodes.values():
        client = RawClient(port)
        try:
            answer = client.call(m.FindCoordinatorRequest(key_type=0, coordinator_keys=groups), 4)
            for c in answer.coordinators:
                assert c.error_code == E.NONE
                assert c.node_id == owners[partition_for(c.key)]
                assert c.port == nodes[c.node_id]
                seen.add(c.node_id)
            single = client.call(m.FindCoordinatorRequest(key=groups[0], key_type=0), 3)
            assert single.node_id == owners[partition_for(groups[0])]
        finally:
            client.close()
    assert len(seen) > 1  # twelve groups land on more than one node


def _records(n: int) -> list[str]:
    return [f"v{i}" for i in range(n)]


def test_confluent_kafka_produces_and_consumes_across_the_nodes(cluster):
    from confluent_kafka import Producer
    topic, group = unique("nodes-ck"), unique("g")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i, value in enumerate(_records(60)):
        producer.produce(topic, value.encode(), partition=i % 6)
    assert producer.flush(20) == 0
    got = confluent_read(cluster.bootstrap_servers, topic, 60, group=group)
    assert sorted(got) == sorted(_records(60))


def test_kafka_python_produces_and_consumes_across_the_nodes(cluster):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    topic, group = unique("nodes-kp"), unique("g")
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
    for i, value in enumerate(_records(30)):
        producer.send(topic, value.encode(), partition=i % 6).get(20)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                             auto_offset_reset="earliest", consumer_timeout_ms=20000)
    got = []
    for record in consumer:
        got.append(record.value.decode())
        if len(got) == 30:
            break
    consumer.commit()
    committed = sum(consumer.committed(TopicPartition(topic, p)) or 0 for p in range(6))
    consumer.close()
    assert sorted(got) == sorted(_records(30)) and committed == 30


def test_java_client_produces_and_consumes_across_the_nodes(cluster):
    from tests.security.tls_clients import run_java
    outcome = run_java(cluster.bootstrap_servers, unique("nodes-java"), unique("g"),
                       {"security.protocol": "PLAINTEXT"}, 20)
    assert sorted(outcome["consumed"]) == sorted(f"v{i}" for i in range(20))


def _three_free_ports() -> int:
    """A port whose next two are free too (the nodes listen on port, port + 1, port + 2)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port > 65000:
            continue
        try:
            for i in (1, 2):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + i))
            return port
        except OSError:
            continue
    raise RuntimeError("no three consecutive free ports")


def test_the_command_line_serves_nodes_on_consecutive_ports():
    port = _three_free_ports()
    proc = BrokerProcess(port=port, overrides={"nodes": 3})
    proc.start()
    try:
        client = RawClient(port + 2)
        try:
            meta = client.call(m.MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
        finally:
            client.close()
        assert {b.node_id: b.port for b in meta.brokers} == {1: port, 2: port + 1, 3: port + 2}
    finally:
        assert proc.stop() == 0
    listening = [json.loads(line) for line in open(proc.log_path)
                 if '"event": "listening"' in line]
    assert sorted((e["node"], e["port"]) for e in listening) == [
        (1, port), (2, port + 1), (3, port + 2)]
