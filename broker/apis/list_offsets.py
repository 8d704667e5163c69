"""ListOffsets: earliest (-2), latest (-1, the high watermark), max timestamp (-3), earliest
local (-4) and the first offset whose timestamp is at or after a given time."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import ListOffsetsResponse

NAME = "ListOffsets"
VERSIONS = (1, 10)

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5

TopicResult = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResult = ListOffsetsResponse.ListOffsetsPartitionResponse


def lookup(log, timestamp: int) -> tuple[int, int]:
    """(timestamp, offset) answering a ListOffsets query on one partition log."""
    if timestamp == LATEST:
        return -1, log.log_end_offset
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, log.log_start_offset
    if timestamp == LATEST_TIERED:
        return -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_offset()
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1
    offset, ts = found
    return ts, offset


def handle(broker, ctx, request, respond) -> None:
    results = []
    for t in request.topics:
        topic = broker.topics.get(t.name)
        parts = []
        for p in t.partitions:
            index = p.partition_index
            if topic is None or not 0 <= index < len(topic.partitions):
                parts.append(PartitionResult(
                    partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            ts, offset = lookup(topic.partitions[index].log, p.timestamp)
            parts.append(PartitionResult(partition_index=index, error_code=ErrorCode.NONE,
                                         timestamp=ts, offset=offset, leader_epoch=0))
        results.append(TopicResult(name=t.name, partitions=parts))
    respond(ListOffsetsResponse(topics=results))
