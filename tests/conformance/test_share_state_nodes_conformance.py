"""The share coordinator's NOT_COORDINATOR, on three nodes: a fresh Apache Kafka 4.3.1 cluster
(tests/conformance/kafka_server.py KafkaCluster) and kbroker ``EmbeddedBroker(nodes=3)``, in
the same run. Before ``__share_group_state`` exists no node coordinates any share partition;
once FindCoordinator (key type SHARE) has created it, only the node leading a share partition's
state partition answers for it, the others NOT_COORDINATOR, with Kafka's message.
"""
from __future__ import annotations

import time
import uuid

import pytest

import protocol.messages as m
from broker.coordinator.share_state.store import coordinator_key
from broker.testing import EmbeddedBroker
from protocol.errors import ErrorCode as E
from tests.support import RawClient, unique

from . import topics
from .kafka_server import KafkaCluster
from .test_node_failover_conformance import KafkaNodes, KbrokerNodes
from .test_share_state_conformance import (
    delete,
    find_share_coordinator,
    initialize,
    read,
    summary,
    write,
)

SETTINGS = {"group.initial.rebalance.delay.ms": "0"}
NOT_HERE = "This is not the correct coordinator."


@pytest.fixture(scope="module")
def clusters():
    kafka = KafkaCluster(3, SETTINGS)
    kafka.start()
    try:
        with EmbeddedBroker(nodes=3, **SETTINGS) as kb:
            yield [KafkaNodes(kafka), KbrokerNodes(kb)]
    finally:
        kafka.stop()


def topic_on_every_node(target) -> uuid.UUID:
    client = RawClient(target.ports[1], client_id="ss-nodes")
    try:
        name = topics.create_topic(client, unique("ss-nodes"), 3)
    finally:
        client.close()
    deadline = time.monotonic() + 30
    for node, port in target.ports.items():   # Kafka's brokers learn of it a moment later
        while True:
            answer = RawClient.once(port, m.MetadataRequest(topics=[
                m.MetadataRequest.MetadataRequestTopic(name=name)],
                allow_auto_topic_creation=False), 12)
            if answer.topics[0].error_code == E.NONE:
                topic_id = answer.topics[0].topic_id
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.2)
    return topic_id


def test_not_coordinator_before_and_after_the_state_topic(clusters):
    for target in clusters:
        tid = topic_on_every_node(target)
        group = unique("ss-nodes-g")
        # no __share_group_state yet: no node coordinates anything
        for node, port in target.ports.items():
            client = RawClient(port, client_id="ss-nodes")
            try:
                assert initialize(client, group, tid, (0, 0, 0)) == [(0, E.NOT_COORDINATOR, (
                    f"Unable to initialize share group state: {NOT_HERE}"))], target.name
                assert write(client, group, tid, 0, 0, 0, 0) == (E.NOT_COORDINATOR, (
                    f"Unable to write share group state: {NOT_HERE}"))
                assert read(client, group, tid, 0) == (E.NOT_COORDINATOR, (
                    f"Unable to read share group state: {NOT_HERE}"), 0, 0, [])
                assert summary(client, group, tid, 0) == (E.NOT_COORDINATOR, (
                    f"Unable to read share group state summary: {NOT_HERE}"), 0, 0, 0, -1)
                assert delete(client, group, tid, 0) == [(0, E.NOT_COORDINATOR, (
                    f"Unable to delete share group state: {NOT_HERE}"))]
            finally:
                client.close()
        # FindCoordinator creates it; then one node answers for the share partition
        key = coordinator_key(group, tid, 0)
        deadline = time.monotonic() + 60
        client = RawClient(target.ports[1], client_id="ss-nodes")
        try:
            while True:
                [found] = find_share_coordinator(client, key)
                if found.error_code == E.NONE:
                    break
                assert found.error_code == E.COORDINATOR_NOT_AVAILABLE, found
                assert time.monotonic() < deadline, found
                time.sleep(0.2)
        finally:
            client.close()
        coordinator = found.node_id
        assert coordinator in target.ports and found.port == target.ports[coordinator]
        for node, port in target.ports.items():
            client = RawClient(port, client_id="ss-nodes")
            try:
                if node == coordinator:
                    while True:   # Kafka loads the state partition a moment after
                        answer = initialize(client, group, tid, (0, 0, 5))
                        if answer[0][1] not in (E.NOT_COORDINATOR,
                                                E.COORDINATOR_LOAD_IN_PROGRESS):
                            break
                        assert time.monotonic() < deadline, answer
                        time.sleep(0.2)
                    assert answer == [(0, E.NONE, None)], target.name
                    assert summary(client, group, tid, 0) == (E.NONE, None, 0, 0, 5, 0)
                else:
                    assert summary(client, group, tid, 0) == (E.NOT_COORDINATOR, (
                        f"Unable to read share group state summary: {NOT_HERE}"),
                        0, 0, 0, -1), (target.name, node)
                    assert write(client, group, tid, 0, 0, 0, 5) == (E.NOT_COORDINATOR, (
                        f"Unable to write share group state: {NOT_HERE}"))
            finally:
                client.close()
