"""DeleteShareGroupOffsets: an admin drops a share group's share partitions of some topics (they
start again by share.auto.offset.reset at the next ShareFetch). Only for an existing share
group without members, as Kafka requires."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..coordinator.common.result import CoordinatorResult, append_error
from ..coordinator.group.group import GroupError
from ..security.authorization import group_denied
from ..security.authorizer import AclOperation

NAME = "DeleteShareGroupOffsets"

E = ErrorCode
R = m.DeleteShareGroupOffsetsResponse
UNKNOWN_MESSAGE = "This server does not host this topic-partition."


def handle(broker, ctx, request, respond) -> None:
    group_id = request.group_id
    if group_denied(broker.authorizer, ctx, group_id, AclOperation.DELETE):
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
        group = shard.share.empty_group(group_id, create=False)
    except GroupError as exc:
        respond(R(error_code=exc.code, error_message=exc.message, responses=[]))
        return
    held = {topic_id for topic_id, _p in broker.shares.partitions_of(group_id)}
    responses = []
    deleting = set()
    for t in request.topics:
        topic = broker.topics.get(t.topic_name)
        if topic is None:
            responses.append(R.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, error_code=E.UNKNOWN_TOPIC_OR_PARTITION,
                error_message=UNKNOWN_MESSAGE))
        elif topic.topic_id not in held:
            responses.append(R.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=topic.topic_id,
                error_code=E.UNKNOWN_TOPIC_OR_PARTITION,
                error_message="There is no offset information to delete."))
        else:
            deleting.add(topic.topic_id)
            responses.append(R.DeleteShareGroupOffsetsResponseTopic(
                topic_name=t.topic_name, topic_id=topic.topic_id, error_code=0))

    def answer(response) -> None:
        if response.error_code == 0:
            for topic_id in deleting:
                broker.shares.drop_topic(group_id, topic_id)
        respond(response)

    records = [shard.share.initialized_record(group, {}, deleting)] if deleting else []
    shard.context.append(CoordinatorResult(records, R(error_code=0, responses=responses)),
                         answer, write_error)


def write_error(exc: BaseException, response):
    """DeleteShareGroupOffsets' answer to a failed write."""
    return R(error_code=append_error(exc), responses=[])
