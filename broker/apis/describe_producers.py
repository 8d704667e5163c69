"""DescribeProducers: the idempotent and transactional producers a partition knows
(kafka-transactions.sh describe-producers, and admin clients looking for hung transactions: an
open one shows its first offset as current_txn_start_offset)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import DescribeProducersResponse

from ..security.authorizer import AclOperation, ResourceType

NAME = "DescribeProducers"

TopicResponse = DescribeProducersResponse.TopicResponse
PartitionResponse = DescribeProducersResponse.PartitionResponse
ProducerState = DescribeProducersResponse.ProducerState


def handle(broker, ctx, request, respond) -> None:
    topics = []
    auth = broker.authorizer
    may_read = auth.predicate(ctx, AclOperation.READ, ResourceType.TOPIC) \
        if auth is not None else None
    for t in request.topics:
        partitions = []
        if may_read is not None and not may_read(t.name):
            topics.append(TopicResponse(name=t.name, partitions=[PartitionResponse(
                partition_index=index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message="Topic authorization failed.", active_producers=[])
                for index in t.partition_indexes]))
            continue
        for index in t.partition_indexes:
            partition = broker.topics.partition(t.name, index)
            if partition is None:
                # Kafka words only the unknown-topic case
                message = (None if broker.topics.get(t.name) is not None
                           else "This server does not host this topic-partition.")
                partitions.append(PartitionResponse(
                    partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=message, active_producers=[]))
                continue
            active = []
            for producer_id, entry in partition.producers.producers.items():
                active.append(ProducerState(
                    producer_id=producer_id, producer_epoch=entry.epoch,
                    last_sequence=entry.last_seq, last_timestamp=entry.last_timestamp,
                    coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=entry.txn_first_offset))
            partitions.append(PartitionResponse(partition_index=index,
                                                error_code=ErrorCode.NONE, error_message=None,
                                                active_producers=active))
        topics.append(TopicResponse(name=t.name, partitions=partitions))
    respond(DescribeProducersResponse(topics=topics))
