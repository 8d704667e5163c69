"""DeleteRecords: move a partition's log start offset up (kafka-delete-records, Kafka Streams
purging its repartition topics). One replica, so the new low watermark is known at once."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import DeleteRecordsResponse

from ..security.authorizer import AclOperation, ResourceType

from ..log.base import OffsetOutOfRange

NAME = "DeleteRecords"

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult


def handle(broker, ctx, request, respond) -> None:
    results = []
    auth = broker.authorizer
    may_delete = auth.predicate(ctx, AclOperation.DELETE, ResourceType.TOPIC) \
        if auth is not None else None
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            if may_delete is not None and not may_delete(t.name):
                low, error = -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                low, error = _delete(broker, t.name, p.partition_index, p.offset)
            partitions.append(PartitionResult(partition_index=p.partition_index,
                                              low_watermark=low, error_code=error))
        results.append(TopicResult(name=t.name, partitions=partitions))
    respond(DeleteRecordsResponse(topics=results))


def _delete(broker, topic: str, index: int, offset: int) -> tuple[int, ErrorCode]:
    partition = broker.topics.partition(topic, index)
    if partition is None:
        return -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if partition.topic.internal:
        return -1, ErrorCode.INVALID_TOPIC_EXCEPTION  # __consumer_offsets is the coordinator's
    try:
        return partition.log.delete_records_before(offset), ErrorCode.NONE
    except OffsetOutOfRange:
        return -1, ErrorCode.OFFSET_OUT_OF_RANGE
