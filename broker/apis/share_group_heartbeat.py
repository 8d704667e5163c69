"""ShareGroupHeartbeat: join, heartbeat and leave a share group (KIP-932,
broker/coordinator/group/share). With an authorizer the group needs READ and every subscribed topic
DESCRIBE, as Kafka's KafkaApis checks before its group coordinator."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType

NAME = "ShareGroupHeartbeat"

#: Kafka's isMemberIdValid: a share member id is the client's own, at most a UUID's length
MAX_MEMBER_ID_LENGTH = 36


def valid_member_id(member_id: str | None) -> bool:
    return bool(member_id) and len(member_id) <= MAX_MEMBER_ID_LENGTH


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is not None and not auth.allowed(ctx, AclOperation.READ, ResourceType.GROUP,
                                             request.group_id):
        respond(m.ShareGroupHeartbeatResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
        return
    if not valid_member_id(request.member_id):
        # Kafka's getErrorResponse: the code only, no message
        respond(m.ShareGroupHeartbeatResponse(error_code=ErrorCode.INVALID_REQUEST))
        return
    subscribed = request.subscribed_topic_names
    if auth is not None and subscribed and len(auth.allowed_names(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, subscribed)) < len(set(subscribed)):
        respond(m.ShareGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        return
    broker.coordinator.share_group_heartbeat(request, ctx.api_version, ctx, respond)
