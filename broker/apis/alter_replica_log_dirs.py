"""AlterReplicaLogDirs: move partitions between the log directories of this node. A partition
already in the named directory needs nothing; a path that is not one of the node's directories
(Kafka wants the absolute path DescribeLogDirs shows) is LOG_DIR_NOT_FOUND. A partition named
twice goes where it is named last."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import AlterReplicaLogDirsResponse

from ..security.authorizer import AclOperation

from ..partitions.replicas import named_log_dir, partition_log_dir, placement

NAME = "AlterReplicaLogDirs"

TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
PartitionResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult

# Kafka names the copy of a moving partition "<topic>-<partition>.<32 hex digits>-future" and
# refuses a move whose name would pass a file name's 255 characters
FUTURE_SUFFIX_LENGTH = 1 + 32 + len("-future")


def move(broker, topic_name: str, index: int, path: str) -> int:
    name = f"{topic_name}-{index}"
    if len(name.encode("utf-16-le", "surrogatepass")) // 2 + FUTURE_SUFFIX_LENGTH > 255:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    log_dir = named_log_dir(broker, path)
    if log_dir is None:
        return ErrorCode.LOG_DIR_NOT_FOUND
    partition = broker.topics.partition(topic_name, index)
    if partition is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if broker.node_id not in placement(broker, partition).replicas:
        return ErrorCode.REPLICA_NOT_AVAILABLE  # Kafka's word for a partition held elsewhere
    if partition_log_dir(broker, partition) == log_dir:
        return ErrorCode.NONE
    # another directory of this node: there is none while a node has one directory
    raise NotImplementedError("one log directory per node")


def handle(broker, ctx, request, respond) -> None:
    destinations: dict[tuple[str, int], str] = {}
    for d in request.dirs:
        for t in d.topics:
            for index in t.partitions:
                destinations[(t.name, index)] = d.path
    by_topic: dict[str, list] = {}
    auth = broker.authorizer
    allowed = auth is None or auth.cluster(ctx, AclOperation.ALTER)
    for (topic_name, index), path in destinations.items():
        by_topic.setdefault(topic_name, []).append(PartitionResult(
            partition_index=index,
            error_code=move(broker, topic_name, index, path) if allowed
            else ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
    respond(AlterReplicaLogDirsResponse(results=[
        TopicResult(topic_name=name, partitions=partitions)
        for name, partitions in by_topic.items()]))
