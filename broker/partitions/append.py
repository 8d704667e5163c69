"""Appending to a partition (Kafka's ReplicaManager.appendRecords and Partition's checks): one
partition's records checked as Kafka checks them before any producer state is looked at, then
appended through the partition's producer state; each result is the partition's Produce answer.
An append wakes the long-poll fetches of its partition (fetch_purgatory.py)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import ProduceResponse
from protocol.records import CorruptRecordError

from ..log import InvalidRecordError, validate_batches
from .replicas import led_elsewhere

PartitionResponse = ProduceResponse.PartitionProduceResponse


def partition_error(index: int, code: int, message: str | None = None,
                    log_start_offset: int = -1) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1,
                             log_append_time_ms=-1, log_start_offset=log_start_offset,
                             record_errors=[], error_message=message)


def check_partition(broker, topic, index: int, records, conn=None, acks: int = 1):
    """Kafka's checks on one partition's records before any producer state is looked at: a
    PartitionResponse with the error, or (partition, batch)."""
    partition = topic.partitions[index] if topic and 0 <= index < len(topic.partitions) else None
    if partition is None:
        return partition_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if topic.internal:
        return partition_error(index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                      f"Cannot append to internal topic {topic.name}")
    if conn is not None and led_elsewhere(broker, conn, partition):
        return partition_error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    if acks == -1 and len(partition.isr) < len(partition.replicas):
        # acks=all needs min.insync.replicas in sync (the ISR shrinks only while nodes are down)
        min_isr = int(broker.topics.config_value(topic, "min.insync.replicas"))
        if len(partition.isr) < min_isr:
            return partition_error(index, ErrorCode.NOT_ENOUGH_REPLICAS,
                          f"The size of the current ISR {set(partition.isr)} is insufficient to "
                          f"satisfy the min.isr requirement of {min_isr} for partition "
                          f"{topic.name}-{index}")
    if records is None or len(records) == 0:
        return partition_error(index, ErrorCode.INVALID_RECORD, "no record batches")
    try:
        batches = validate_batches(records)
    except InvalidRecordError as exc:
        return partition_error(index, ErrorCode.INVALID_RECORD, str(exc))
    except CorruptRecordError as exc:
        return partition_error(index, ErrorCode.CORRUPT_MESSAGE, str(exc))
    if len(batches) != 1:
        # "Produce requests with version N are only allowed to contain exactly one record
        # batch per partition": Kafka answers the error without its message
        return partition_error(index, ErrorCode.INVALID_RECORD)
    batch = batches[0]
    if batch.base_offset != 0:
        return partition_error(index, ErrorCode.INVALID_RECORD,
                      f"The baseOffset of the record batch in the append to "
                      f"{topic.name}-{index} should be 0, but it is {batch.base_offset}")
    max_size = int(broker.topics.config_value(topic, "max.message.bytes"))
    if batch.size > max_size:
        return partition_error(index, ErrorCode.MESSAGE_TOO_LARGE,
                      f"batch of {batch.size} bytes exceeds max.message.bytes {max_size}")
    # Kafka's LogValidator rejects these without a message ("Clients are not allowed to write
    # control records", "Invalid sequence number -1 in record batch with producerId ...")
    if batch.is_control or (batch.producer_id >= 0 and batch.base_sequence < 0):
        return partition_error(index, ErrorCode.INVALID_RECORD,
                      log_start_offset=partition.log.log_start_offset)
    return partition, batch


def append_checked(broker, topic, partition, records, batch, now: int,
                   verification=None) -> PartitionResponse:
    """Append one checked batch through the partition's producer state."""
    index = partition.index
    append_time = now if broker.topics.config_value(
        topic, "message.timestamp.type") == "LogAppendTime" else None
    log = partition.log
    if batch.producer_id < 0:  # no producer state to check: straight to the log
        first_offset = log.append(records, log_append_time=append_time,
                                  partition_leader_epoch=partition.leader_epoch).first_offset
        duplicate = None
    else:
        code, first_offset, duplicate = partition.append_batch(
            records, batch, verification=verification, log_append_time=append_time)
        if code:
            return partition_error(index, code, log_start_offset=log.log_start_offset)
    if duplicate is not None:
        # Kafka answers a duplicate with its original offset and the timestamp it recorded
        return PartitionResponse(index=index, error_code=ErrorCode.NONE,
                                 base_offset=first_offset, log_append_time_ms=duplicate.timestamp,
                                 log_start_offset=log.log_start_offset, record_errors=[],
                                 error_message=None)
    broker.metrics.produced(topic.name, batch.record_count)
    broker.fetches.partition_appended(topic.name, index)
    return PartitionResponse(index=index, error_code=ErrorCode.NONE, base_offset=first_offset,
                             log_append_time_ms=-1 if append_time is None else append_time,
                             log_start_offset=log.log_start_offset, record_errors=[],
                             error_message=None)


def append_partition(broker, topic, index: int, records, now: int,
                     conn=None, acks: int = 1) -> PartitionResponse:
    checked = check_partition(broker, topic, index, records, conn, acks)
    if type(checked) is PartitionResponse:
        return checked
    partition, batch = checked
    return append_checked(broker, topic, partition, records, batch, now)
