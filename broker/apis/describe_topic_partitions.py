"""DescribeTopicPartitions: the partitions of topics, by name or all of them, with their leaders,
replicas and ISR (what the Java admin client's describeTopics asks). Topics come in name order
and at most ResponsePartitionLimit partitions per answer; NextCursor says where the next request
starts, and the request's Cursor where this one does."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import DescribeTopicPartitionsResponse

from ..security.authorizer import AclOperation, ResourceType
from ..topics import INTERNAL_TOPICS, validate_topic_name
from ..partitions.replicas import placement

NAME = "DescribeTopicPartitions"

Topic_ = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition_ = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor

#: Kafka's max.request.partition.size.limit default: no answer holds more partitions
MAX_PARTITIONS = 2000
#: every operation on a topic (read, write, create, delete, alter, describe, describe and alter
#: configs), as Kafka reports them without an authorizer
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def _order(name: str) -> bytes:
    """Java's String order (by UTF-16 code unit), which Kafka sorts and compares names in."""
    return name.encode("utf-16-be", "surrogatepass")


def _refused(request, error: int) -> DescribeTopicPartitionsResponse:
    """Kafka's answer to a request it fails as a whole: each requested topic with the error."""
    return DescribeTopicPartitionsResponse(topics=[
        Topic_(error_code=error, name=t.name, is_internal=False, partitions=[])
        for t in request.topics])


def _partitions(broker, topic, start: int, limit: int) -> list:
    node_partitions = []
    for partition in topic.partitions[start:start + limit]:
        where = placement(broker, partition)
        node_partitions.append(Partition_(
            error_code=ErrorCode.NONE, partition_index=partition.index, leader_id=where.leader,
            leader_epoch=where.leader_epoch, replica_nodes=where.replicas, isr_nodes=where.isr,
            eligible_leader_replicas=where.elr, last_known_elr=where.last_known_elr,
            offline_replicas=where.offline))
    return node_partitions


def handle(broker, ctx, request, respond) -> None:
    topics = broker.topics
    cursor = request.cursor
    cursor_name = _order(cursor.topic_name) if cursor is not None else b""
    every_topic = not request.topics
    names = topics.topics if every_topic else (t.name for t in request.topics)
    wanted = sorted({n for n in names if _order(n) >= cursor_name}, key=_order)
    if cursor is not None and not every_topic and cursor.topic_name not in wanted:
        respond(_refused(request, ErrorCode.INVALID_REQUEST))  # the cursor names another topic
        return
    if cursor is not None and cursor.partition_index < 0:
        respond(_refused(request, ErrorCode.INVALID_REQUEST))
        return
    if cursor is None and "" in wanted:
        # Kafka looks for a cursor when a topic's name equals the cursor's, "" without one,
        # and fails the whole request on the missing cursor
        respond(_refused(request, ErrorCode.UNKNOWN_SERVER_ERROR))
        return
    denied = []
    auth = broker.authorizer
    if auth is not None:
        # topics the principal may not describe: left out of "all topics", else refused (after
        # the others, without their id)
        may_describe = auth.predicate(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC)
        allowed = [n for n in wanted if may_describe(n)]
        if not every_topic:
            denied = [Topic_(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=n,
                             is_internal=False, partitions=[])
                      for n in wanted if not may_describe(n)]
        wanted = allowed
    remaining = max(min(MAX_PARTITIONS, request.response_partition_limit), 1)
    answered = []
    next_cursor = None
    for name in wanted:
        if remaining == 0:  # the previous topic filled the answer: the next one starts here
            next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        topic = topics.get(name)
        if topic is None:
            if not every_topic:
                error = (ErrorCode.INVALID_TOPIC_EXCEPTION if validate_topic_name(name)
                         else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                answered.append(Topic_(error_code=error, name=name, partitions=[],
                                       is_internal=name in INTERNAL_TOPICS,
                                       topic_authorized_operations=TOPIC_OPERATIONS))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name \
            else 0
        partitions = _partitions(broker, topic, start, remaining)
        answered.append(Topic_(error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id,
                               is_internal=topic.internal, partitions=partitions,
                               topic_authorized_operations=TOPIC_OPERATIONS))
        end = start + len(partitions)
        if start + remaining < len(topic.partitions):
            next_cursor = Cursor(topic_name=name, partition_index=end)
            break
        remaining -= len(partitions)
    if auth is not None:
        for entry in answered:
            entry.topic_authorized_operations = auth.operations(ctx, ResourceType.TOPIC, entry.name)
    respond(DescribeTopicPartitionsResponse(topics=answered + denied, next_cursor=next_cursor))
