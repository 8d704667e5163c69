"""What AddRaftVoter and RemoveRaftVoter share: the voters of the controller quorum this broker
presents (broker/apis/describe_quorum.py: every node is a voter, with its directory id), the
cluster id check and Kafka's names for replica keys (KafkaRaftClient's messages)."""
from __future__ import annotations

import base64
import uuid

from protocol.errors import ErrorCode

from .describe_quorum import directory_id
from .replicas import broker_ids

ZERO_UUID = uuid.UUID(int=0)


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def replica_key(node: int, directory: uuid.UUID) -> str:
    return f"ReplicaKey(id={node}, directoryId={kafka_uuid(directory)})"


def voters(broker) -> list[tuple[int, uuid.UUID]]:
    return [(node, directory_id(broker, node)) for node in broker_ids(broker)]


def voter_set(broker) -> str:
    return "[" + ", ".join(replica_key(n, d) for n, d in voters(broker)) + "]"


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
