"""AddRaftVoter, RemoveRaftVoter and UnregisterBroker against Kafka 4.3.1 and kbroker, raw
protocol, for the single controller quorum both present. Messages name the target's own cluster
id, voter directory id and default listener, read from DescribeCluster and DescribeQuorum.

UnregisterBroker of the live broker is answered NONE by both; Kafka 4.3.1 then lists no broker
and every partition LEADER_NOT_AVAILABLE for minutes (measured), so it is only sent to kbroker
here, which keeps serving."""
from __future__ import annotations

import base64
import uuid

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (AddRaftVoterRequest as AV, ApiVersionsRequest,
                               DescribeClusterRequest, DescribeQuorumRequest as DQ,
                               MetadataRequest, RemoveRaftVoterRequest as RV,
                               UnregisterBrokerRequest as UB)
from tests.support import RawClient, free_port

ZERO = uuid.UUID(int=0)


def kafka_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def key(node: int, directory: uuid.UUID) -> str:
    return f"ReplicaKey(id={node}, directoryId={kafka_uuid(directory)})"


@pytest.fixture
def quorum(target):
    """(cluster id, voter id, voter directory id, default listener name) of the target."""
    described = RawClient.once(target.port, DQ(topics=[DQ.TopicData(
        topic_name="__cluster_metadata", partitions=[DQ.PartitionData(partition_index=0)])]), 2)
    [voter] = described.topics[0].partitions[0].current_voters
    listener = described.nodes[0].listeners[0].name
    cluster = RawClient.once(target.port, DescribeClusterRequest(
        include_cluster_authorized_operations=False), 0).cluster_id
    return cluster, voter.replica_id, voter.replica_directory_id, listener


def add(port: int, cluster, voter_id, directory, listeners, version: int = 1):
    request = AV(cluster_id=cluster, timeout_ms=5000, voter_id=voter_id,
                 voter_directory_id=directory,
                 listeners=[AV.Listener(name=n, host=h, port=p) for n, h, p in listeners])
    if version >= 1:
        request.ack_when_committed = True
    answer = RawClient.once(port, request, version)
    return answer.error_code, answer.error_message


def remove(port: int, cluster, voter_id, directory):
    answer = RawClient.once(port, RV(cluster_id=cluster, voter_id=voter_id,
                                     voter_directory_id=directory), 0)
    return answer.error_code, answer.error_message


def test_the_apis_are_advertised_as_kafka_does(target):
    answer = RawClient.once(target.port, ApiVersionsRequest(
        client_software_name="conformance", client_software_version="1"), 3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert (ranges.get(64), ranges.get(80), ranges.get(81)) == ((0, 0), (0, 1), (0, 0))


@pytest.mark.parametrize("version", [0, 1])
def test_add_raft_voter(target, quorum, version):
    cluster, voter, directory, listener = quorum
    port = target.port
    new = uuid.uuid4()
    voters = f"[{key(voter, directory)}]"
    assert add(port, "nope", 2, new, [], version) == (
        E.INCONSISTENT_CLUSTER_ID, f'The given id "nope" doesn\'t match the cluster id '
                                   f'"{cluster}"')
    invalid = (E.INVALID_REQUEST, "Add voter request didn't include a valid voter")
    assert add(port, cluster, -1, new, [(listener, "h", 1)], version) == invalid
    assert add(port, cluster, 2, ZERO, [(listener, "h", 1)], version) == invalid
    assert add(port, cluster, voter, ZERO, [], version) == invalid
    assert add(port, cluster, 2, new, [("A", "h1", 1), ("B", "10.0.0.1", 2)], version) == (
        E.INVALID_REQUEST, "Add voter request didn't include the endpoint (Endpoints(endpoints="
        "{ListenerName(A)=h1/<unresolved>:1, ListenerName(B)=10.0.0.1/<unresolved>:2})) for "
        f"the default listener ListenerName({listener})")
    assert add(port, cluster, voter, directory, [], version)[1].startswith(
        "Add voter request didn't include the endpoint (Endpoints(endpoints={}))")
    other = uuid.uuid4()
    for cluster_id, dir_id in ((None, directory), (cluster, directory), (cluster, other)):
        assert add(port, cluster_id, voter, dir_id, [(listener, "127.0.0.1", 1)], version) == (
            E.DUPLICATE_VOTER, f"The voter id for {key(voter, dir_id)} is already part of "
                               f"the set of voters {voters}.")
    # a voter nobody listens for, with an id no other attempt names: Kafka backs off
    # reconnecting to an id it failed to reach ("... is not ready to receive requests")
    unreachable = 20 + version
    assert add(port, cluster, unreachable, new, [(listener, "127.0.0.1", free_port())],
               version) == (
        E.REQUEST_TIMED_OUT, "Aborted add voter operation for since API_VERSIONS returned an "
                             "error BROKER_NOT_AVAILABLE")


def test_add_raft_voter_that_answers_but_lags(target, quorum, kbroker_server):
    """Kafka's leader asks the new voter's endpoint for its API versions; kbroker answers them
    (a Kafka-protocol server), and the new voter has fetched nothing: aborted at once."""
    cluster, _voter, _directory, listener = quorum
    new = uuid.uuid4()
    # a voter id no other test names: Kafka backs off reconnecting to an id it failed to reach
    voter_id = 9
    assert add(target.port, cluster, voter_id, new,
               [(listener, "127.0.0.1", kbroker_server.port)]) == (
        E.REQUEST_TIMED_OUT, f"Aborted add voter operation for {key(voter_id, new)} since it "
                             "is lagging behind")


def test_remove_raft_voter(target, quorum):
    cluster, voter, directory, _listener = quorum
    port = target.port
    voters = f"[{key(voter, directory)}]"
    assert remove(port, "nope", voter, directory) == (
        E.INCONSISTENT_CLUSTER_ID, f'The given id "nope" doesn\'t match the cluster id '
                                   f'"{cluster}"')
    assert remove(port, cluster, -1, ZERO) == (
        E.INVALID_REQUEST, "Remove voter request didn't include a valid voter")
    other = uuid.uuid4()
    # the last voter cannot go; neither can one not in the set
    for cluster_id, voter_id, dir_id in ((cluster, voter, directory), (None, voter, directory),
                                         (cluster, voter, other), (cluster, 7, other)):
        assert remove(port, cluster_id, voter_id, dir_id) == (
            E.VOTER_NOT_FOUND, f"Cannot remove voter {key(voter_id, dir_id)} from the set of "
                               f"voters {voters}")


def test_unregister_broker_that_is_not_registered(target):
    for broker_id in (5, -1):
        answer = RawClient.once(target.port, UB(broker_id=broker_id), 0)
        assert (answer.error_code, answer.error_message) == (
            E.BROKER_ID_NOT_REGISTERED, f"Broker ID {broker_id} is not currently registered")


def test_unregister_the_live_broker_on_kbroker(kbroker_server):
    answer = RawClient.once(kbroker_server.port, UB(broker_id=1), 0)
    assert (answer.error_code, answer.error_message) == (E.NONE, "")
    meta = RawClient.once(kbroker_server.port, MetadataRequest(
        topics=[], allow_auto_topic_creation=False), 12)
    assert [b.node_id for b in meta.brokers] == [1]  # still registered and serving here
