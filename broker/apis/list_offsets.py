"""ListOffsets: earliest (-2), latest (-1, the high watermark), max timestamp (-3), earliest
local (-4) and the first offset whose timestamp is at or after a given time.

A consumer's request (replica id -1) sees only what it may fetch: with read_committed, latest is
the last stable offset, and a timestamp lookup whose answer is at or above it finds nothing
(-1, -1), as Kafka answers."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import ListOffsetsResponse

from ..security.authorizer import AclOperation, ResourceType
from .replicas import epoch_at, leader_error

NAME = "ListOffsets"
VERSIONS = (1, 10)

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5

TopicResult = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResult = ListOffsetsResponse.ListOffsetsPartitionResponse


def lookup(log, timestamp: int, committed: bool = False) -> tuple[int, int]:
    """(timestamp, offset) answering a ListOffsets query on one partition log; ``committed``
    for a read_committed consumer."""
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, log.log_start_offset
    fetchable = log.last_stable_offset if committed else log.log_end_offset
    if timestamp == LATEST:
        return -1, fetchable
    if timestamp == LATEST_TIERED:
        return -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_offset()
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1
    offset, ts = found
    if offset >= fetchable:
        return -1, -1
    return ts, offset


def handle(broker, ctx, request, respond) -> None:
    committed = request.isolation_level == 1 and request.replica_id == -1
    results = []
    denied = []   # each topic needs DESCRIBE; Kafka lists the refused ones last
    auth = broker.authorizer
    may_describe = auth.predicate(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC) \
        if auth is not None else None
    for t in request.topics:
        if may_describe is not None and not may_describe(t.name):
            denied.append(TopicResult(name=t.name, partitions=[
                PartitionResult(partition_index=p.partition_index,
                                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, timestamp=-1,
                                offset=-1, leader_epoch=-1) for p in t.partitions]))
            continue
        topic = broker.topics.get(t.name)
        parts = []
        for p in t.partitions:
            index = p.partition_index
            if topic is None or not 0 <= index < len(topic.partitions):
                parts.append(PartitionResult(
                    partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            partition = topic.partitions[index]
            error = leader_error(broker, ctx.conn, partition, p.current_leader_epoch)
            if error != ErrorCode.NONE:
                parts.append(PartitionResult(partition_index=index, error_code=error,
                                             timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            ts, offset = lookup(partition.log, p.timestamp, committed)
            parts.append(PartitionResult(
                partition_index=index, error_code=ErrorCode.NONE, timestamp=ts, offset=offset,
                leader_epoch=epoch_at(partition, offset) if offset >= 0 else -1))
        results.append(TopicResult(name=t.name, partitions=parts))
    respond(ListOffsetsResponse(topics=results + denied))
