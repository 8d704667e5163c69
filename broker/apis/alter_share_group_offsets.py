"""AlterShareGroupOffsets: an admin moves a share group's share partitions to new start offsets
(nothing stays in flight). Only when the group has no members (NON_EMPTY_GROUP otherwise), as
Kafka requires; a group that does not exist yet is created. The group records the share
partitions it has (ShareGroupStatePartitionMetadata) in __consumer_offsets."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..coordinator.common.result import CoordinatorResult, append_error
from ..coordinator.group.group import GroupError
from ..security.authorization import group_denied

NAME = "AlterShareGroupOffsets"

E = ErrorCode
R = m.AlterShareGroupOffsetsResponse
UNKNOWN_MESSAGE = "This server does not host this topic-partition."


def handle(broker, ctx, request, respond) -> None:
    group_id = request.group_id
    if group_denied(broker.authorizer, ctx, group_id):
        respond(R(error_code=E.GROUP_AUTHORIZATION_FAILED, responses=[]))
        return
    if not group_id:
        respond(R(error_code=E.INVALID_GROUP_ID, responses=[]))
        return
    shard = broker.coordinator.shard_for(group_id)
    if shard.loading:
        respond(R(error_code=E.COORDINATOR_LOAD_IN_PROGRESS, responses=[]))
        return
    try:
        group = shard.share.empty_group(group_id, create=True)
    except GroupError as exc:
        respond(R(error_code=exc.code, error_message=exc.message, responses=[]))
        return
    responses = []
    offsets = {}
    initialized = {}
    for t in request.topics:
        topic = broker.topics.get(t.topic_name)
        parts = []
        for p in t.partitions:
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                parts.append(R.AlterShareGroupOffsetsResponsePartition(
                    partition_index=p.partition_index, error_code=E.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=UNKNOWN_MESSAGE))
                continue
            parts.append(R.AlterShareGroupOffsetsResponsePartition(
                partition_index=p.partition_index, error_code=0))
            offsets[(topic.topic_id, p.partition_index)] = p.start_offset
            initialized.setdefault(topic.topic_id, (topic.name, set()))[1].add(p.partition_index)
        responses.append(R.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=topic.topic_id if topic is not None else None,
            partitions=parts) if topic is not None else
            R.AlterShareGroupOffsetsResponseTopic(topic_name=t.topic_name, partitions=parts))

    def answer(response) -> None:
        if response.error_code == 0:
            for key, offset in offsets.items():
                broker.shares.reset(group_id, key, offset)
        respond(response)

    records = [shard.share.initialized_record(group, initialized)] if initialized else []
    shard.context.append(CoordinatorResult(records, R(error_code=0, responses=responses)),
                         answer, write_error)


def write_error(exc: BaseException, response):
    """AlterShareGroupOffsets' answer to a failed write."""
    return R(error_code=append_error(exc), responses=[])
