"""ListOffsets: earliest (-2), latest (-1, the high watermark), max timestamp (-3), earliest
local (-4) and the first offset whose timestamp is at or after a given time.

A consumer's request (replica id -1) sees only what it may fetch: with read_committed, latest is
the last stable offset, and a timestamp lookup whose answer is at or above it finds nothing
(-1, -1), as Kafka answers.

Each special timestamp exists from the version that introduced it (Kafka's ReplicaManager
timestampMinSupportedVersion); asked at an older version, or a negative timestamp Kafka does not
know, it is UNSUPPORTED_VERSION. v11 adds earliest pending upload (-6, KIP-1023), which
without tiered storage is (-1, -1) with leader epoch -1, as Kafka answers for a topic without
remote storage. A partition named twice is answered once, INVALID_REQUEST. TimeoutMs (v10+)
bounds remote lookups only, so it changes nothing here."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import ListOffsetsResponse

from ..security.authorizer import AclOperation, ResourceType
from ..partitions.replicas import epoch_at, leader_error

NAME = "ListOffsets"

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5
EARLIEST_PENDING_UPLOAD = -6

#: special timestamp -> first request version that may ask for it
FIRST_VERSION = {EARLIEST: 1, LATEST: 1, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                 EARLIEST_PENDING_UPLOAD: 11}

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
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):  # nothing is tiered here
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


def _failed(index: int, code: int):
    return PartitionResult(partition_index=index, error_code=code, timestamp=-1, offset=-1,
                           leader_epoch=-1)


def handle(broker, ctx, request, respond) -> None:
    version = ctx.api_version
    committed = request.isolation_level == 1 and request.replica_id == -1
    results = []
    denied = []   # each topic needs DESCRIBE; Kafka lists the refused ones last
    auth = broker.authorizer
    may_describe = auth.predicate(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC) \
        if auth is not None else None
    seen = set()
    duplicates = set()
    for t in request.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            if key in seen:
                duplicates.add(key)
            seen.add(key)
    by_name: dict[str, list] = {}
    answered: set = set()
    for t in request.topics:
        if may_describe is not None and not may_describe(t.name):
            denied.append(TopicResult(name=t.name, partitions=[
                PartitionResult(partition_index=p.partition_index,
                                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, timestamp=-1,
                                offset=-1, leader_epoch=-1) for p in t.partitions]))
            continue
        topic = broker.topics.get(t.name)
        parts = by_name.get(t.name)
        if parts is None:  # a topic named twice is answered as one, as Kafka groups them
            parts = by_name[t.name] = []
            results.append(TopicResult(name=t.name, partitions=parts))
        for p in t.partitions:
            index = p.partition_index
            if (t.name, index) in duplicates:
                if (t.name, index) not in answered:
                    answered.add((t.name, index))
                    parts.append(_failed(index, ErrorCode.INVALID_REQUEST))
                continue
            if p.timestamp < 0 and FIRST_VERSION.get(p.timestamp, 1 << 15) > version:
                parts.append(_failed(index, ErrorCode.UNSUPPORTED_VERSION))
                continue
            if topic is None or not 0 <= index < len(topic.partitions):
                parts.append(_failed(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            partition = topic.partitions[index]
            error = leader_error(broker, ctx.conn, partition, p.current_leader_epoch)
            if error != ErrorCode.NONE:
                parts.append(_failed(index, error))
                continue
            ts, offset = lookup(partition.log, p.timestamp, committed)
            parts.append(PartitionResult(
                partition_index=index, error_code=ErrorCode.NONE, timestamp=ts, offset=offset,
                leader_epoch=epoch_at(partition, offset) if offset >= 0 else -1))
    respond(ListOffsetsResponse(topics=results + denied))
