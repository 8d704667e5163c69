"""ConsumerGroupHeartbeat: the consumer protocol (KIP-848), broker/coordinator/group/consumer. With
an authorizer the group needs READ and every subscribed topic DESCRIBE."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType

NAME = "ConsumerGroupHeartbeat"

READ = AclOperation.READ
DESCRIBE = AclOperation.DESCRIBE
GROUP = ResourceType.GROUP
TOPIC = ResourceType.TOPIC
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def handle(broker, ctx, request, respond) -> None:
    if broker.authorizer is not None:
        respond = _authorized(broker.authorizer, ctx, request, respond)
        if respond is None:
            return
    broker.coordinator.consumer_group_heartbeat(request, ctx.api_version, ctx, respond)


def _authorized(auth, ctx, request, respond):
    """The ACL checks Kafka makes before it asks its group coordinator: the ``respond`` the
    coordinator is to call (wrapped to add what was refused), or None once it answered."""
    if not auth.allowed(ctx, READ, GROUP, request.group_id):
        respond(m.ConsumerGroupHeartbeatResponse(error_code=GROUP_DENIED))
        return None
    subscribed = request.subscribed_topic_names
    if subscribed and len(auth.allowed_names(ctx, DESCRIBE, TOPIC, subscribed)) < \
            len(set(subscribed)):
        respond(m.ConsumerGroupHeartbeatResponse(error_code=TOPIC_DENIED))
        return None
    return respond
