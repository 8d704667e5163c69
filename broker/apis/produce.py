"""Produce: validate each partition's record batches, check idempotent sequences, append.

acks 1 and -1 are the same on a single replica; acks 0 sends no response at all.
"""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import ProduceResponse
from protocol.records import CorruptRecordError

from ..log import InvalidRecordError, validate_batches

NAME = "Produce"
VERSIONS = (3, 12)  # Kafka 4 removed v0-2 (magic 0/1 message sets)

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse


def _error(index: int, code: int, message: str | None = None) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1,
                             log_append_time_ms=-1, log_start_offset=-1, record_errors=[],
                             error_message=message)


def append_partition(broker, topic, index: int, records, now: int) -> PartitionResponse:
    partition = topic.partitions[index] if topic and 0 <= index < len(topic.partitions) else None
    if partition is None:
        return _error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if topic.internal:
        return _error(index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                      f"Cannot append to internal topic {topic.name}")
    if records is None or len(records) == 0:
        return _error(index, ErrorCode.INVALID_RECORD, "no record batches")
    try:
        batches = validate_batches(records)
    except InvalidRecordError as exc:
        return _error(index, ErrorCode.INVALID_RECORD, str(exc))
    except CorruptRecordError as exc:
        return _error(index, ErrorCode.CORRUPT_MESSAGE, str(exc))
    topics = broker.topics
    max_size = int(topics.config_value(topic, "max.message.bytes"))
    log = partition.log
    producers = partition.producers
    for batch in batches:
        if batch.base_offset != 0:
            return _error(index, ErrorCode.INVALID_RECORD,
                          f"The baseOffset of the record batch in the append to "
                          f"{topic.name}-{index} should be 0, but it is {batch.base_offset}")
        if batch.size > max_size:
            return _error(index, ErrorCode.MESSAGE_TOO_LARGE,
                          f"batch of {batch.size} bytes exceeds max.message.bytes {max_size}")
        if batch.is_transactional:
            return _error(index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                          "transactions are not supported by this broker")
    if batches[0].producer_id >= 0:
        code, duplicate = producers.check(batches[0])
        if code:
            return _error(index, code)
        if duplicate is not None:
            return PartitionResponse(index=index, error_code=ErrorCode.NONE,
                                     base_offset=duplicate.first_offset, log_append_time_ms=-1,
                                     log_start_offset=log.log_start_offset, record_errors=[],
                                     error_message=None)
    append_time = now if topics.config_value(
        topic, "message.timestamp.type") == "LogAppendTime" else None
    first_offset = log.append(records, log_append_time=append_time).first_offset
    offset = first_offset
    count = 0
    for batch in batches:
        if batch.producer_id >= 0:
            producers.update(batch, offset, batch.max_timestamp)
        offset += batch.last_offset_delta + 1
        count += batch.record_count
    broker.metrics.produced(topic.name, count)
    broker.fetches.partition_appended(topic.name, index)
    return PartitionResponse(index=index, error_code=ErrorCode.NONE, base_offset=first_offset,
                             log_append_time_ms=-1 if append_time is None else append_time,
                             log_start_offset=log.log_start_offset, record_errors=[],
                             error_message=None)


def handle(broker, ctx, request, respond) -> None:
    acks = request.acks
    now = broker.clock()
    responses = []
    for td in request.topic_data:
        topic = broker.topics.get(td.name)
        parts = []
        for pd in td.partition_data:
            if acks not in (0, 1, -1):
                parts.append(_error(pd.index, ErrorCode.INVALID_REQUIRED_ACKS))
            elif request.transactional_id is not None:
                parts.append(_error(pd.index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                    "transactions are not supported by this broker"))
            else:
                parts.append(append_partition(broker, topic, pd.index, pd.records, now))
        responses.append(TopicResponse(name=td.name, partition_responses=parts))
    if acks == 0:
        respond(None)
    else:
        respond(ProduceResponse(responses=responses))
