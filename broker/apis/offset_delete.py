"""OffsetDelete: a group's committed offsets of topics it no longer consumes are deleted. With an
authorizer the group needs DELETE, and each topic READ (TOPIC_AUTHORIZATION_FAILED beside the
coordinator's answer for the others)."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorization import take_unreadable_topics
from ..security.authorizer import AclOperation, ResourceType

NAME = "OffsetDelete"

DELETE = AclOperation.DELETE
GROUP = ResourceType.GROUP
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def handle(broker, ctx, request, respond) -> None:
    if broker.authorizer is not None:
        respond = _authorized(broker.authorizer, ctx, request, respond)
        if respond is None:
            return
    broker.coordinator.offset_delete(request, ctx.api_version, ctx, respond)


def _authorized(auth, ctx, request, respond):
    """The ACL checks Kafka makes before it asks its group coordinator: the ``respond`` the
    coordinator is to call (wrapped to add what was refused), or None once it answered."""
    Topic_ = m.OffsetDeleteResponse.OffsetDeleteResponseTopic
    Partition_ = m.OffsetDeleteResponse.OffsetDeleteResponsePartition
    if not auth.allowed(ctx, DELETE, GROUP, request.group_id):
        respond(m.OffsetDeleteResponse(error_code=GROUP_DENIED, topics=[]))
        return None
    denied = take_unreadable_topics(auth, ctx, request)
    if not denied:
        return respond

    def respond_with_denied(response) -> None:
        if response.error_code == ErrorCode.NONE:
            response.topics.extend(Topic_(name=t.name, partitions=[
                Partition_(partition_index=p.partition_index, error_code=TOPIC_DENIED)
                for p in t.partitions]) for t in denied)
        respond(response)
    return respond_with_denied
