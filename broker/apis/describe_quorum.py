"""DescribeQuorum: KRaft's view of the metadata quorum (kafka-metadata-quorum.sh, the Java admin
client's describeMetadataQuorum). This broker is its own controller, as a Kafka node with
process.roles=broker,controller: the single voter and the leader of __cluster_metadata, with no
observers and nothing to catch up on.

There is no metadata log here: the high watermark (and the voter's log end offset) counts the
topic changes this process has applied, which grows as Kafka's does with each one, and the
leader epoch is the one a single voter's first election gives it."""
from __future__ import annotations

import base64
import uuid

from protocol.errors import ErrorCode
from protocol.messages import DescribeQuorumResponse

from ..security.authorizer import AclOperation

from ..partitions.replicas import broker_ids, log_dirs

NAME = "DescribeQuorum"

METADATA_TOPIC = "__cluster_metadata"
QUORUM_EPOCH = 1
NOT_HOSTED = "This server does not host this topic-partition."

TopicData = DescribeQuorumResponse.TopicData
PartitionData = DescribeQuorumResponse.PartitionData
ReplicaState = DescribeQuorumResponse.ReplicaState
Node = DescribeQuorumResponse.Node
Listener = DescribeQuorumResponse.Listener


def directory_id(broker, node: int) -> uuid.UUID:
    """The id of the node's metadata log directory (Kafka writes a random one into
    meta.properties); here derived from the cluster, node and directory, so it stays the same
    across restarts and differs between nodes."""
    return uuid.uuid5(uuid.NAMESPACE_URL,
                      f"kbroker:{broker.cluster_id}:{node}:{log_dirs(broker)[0]}")


def _refused(request) -> DescribeQuorumResponse:
    """Only partition 0 of __cluster_metadata, alone in the request, is described: anything
    else gets UNKNOWN_TOPIC_OR_PARTITION for each partition asked."""
    return DescribeQuorumResponse(error_code=ErrorCode.NONE, error_message="", topics=[
        TopicData(topic_name=t.topic_name, partitions=[
            PartitionData(partition_index=p.partition_index,
                          error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                          error_message=NOT_HOSTED, current_voters=[], observers=[])
            for p in t.partitions])
        for t in request.topics], nodes=[])


def handle(broker, ctx, request, respond) -> None:
    topics = request.topics
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.DESCRIBE):
        respond(DescribeQuorumResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                       error_message="Cluster authorization failed.",
                                       topics=[], nodes=[]))
        return
    if not (len(topics) == 1 and topics[0].topic_name == METADATA_TOPIC
            and len(topics[0].partitions) == 1 and topics[0].partitions[0].partition_index == 0):
        respond(_refused(request))
        return
    now = broker.clock()
    end = broker.topics.version
    leader = broker.node_id
    voters = broker_ids(broker)
    # the leader reports itself fetched and caught up now
    states = [ReplicaState(replica_id=node, replica_directory_id=directory_id(broker, node),
                           log_end_offset=end, last_fetch_timestamp=now,
                           last_caught_up_timestamp=now) for node in voters]
    listeners = [Listener(name=name, host=host, port=port)
                 for name, (host, port) in ((n, broker.advertised(n))
                                            for n in broker.config.advertised)]
    respond(DescribeQuorumResponse(
        error_code=ErrorCode.NONE, error_message="",
        topics=[TopicData(topic_name=METADATA_TOPIC, partitions=[PartitionData(
            partition_index=0, error_code=ErrorCode.NONE, error_message="", leader_id=leader,
            leader_epoch=QUORUM_EPOCH, high_watermark=end, current_voters=states,
            observers=[])])],
        nodes=[Node(node_id=node, listeners=listeners) for node in voters]))


# -- the voters as AddRaftVoter and RemoveRaftVoter name them (KafkaRaftClient's messages)

ZERO_UUID = uuid.UUID(int=0)


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def replica_key(node: int, directory: uuid.UUID) -> str:
    return f"ReplicaKey(id={node}, directoryId={kafka_uuid(directory)})"


def quorum_voters(broker) -> list[tuple[int, uuid.UUID]]:
    return [(node, directory_id(broker, node)) for node in broker_ids(broker)]


def voter_set(broker) -> str:
    return "[" + ", ".join(replica_key(n, d) for n, d in quorum_voters(broker)) + "]"


def cluster_id_error(broker, cluster_id: str | None):
    """INCONSISTENT_CLUSTER_ID for a cluster id that is given and not this cluster's."""
    if cluster_id is not None and cluster_id != broker.cluster_id:
        return (ErrorCode.INCONSISTENT_CLUSTER_ID,
                f'The given id "{cluster_id}" doesn\'t match the cluster id '
                f'"{broker.cluster_id}"')
    return None


def default_listener(broker) -> str:
    """The listener DescribeQuorum lists first for the voters: a new voter must name it."""
    return next(iter(broker.config.advertised))
