"""JoinGroup: a member joins a classic group (broker/coordinator/group/classic). With an authorizer
the group needs READ first, as Kafka's KafkaApis checks before it asks its group coordinator."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorization import group_denied

NAME = "JoinGroup"


def handle(broker, ctx, request, respond) -> None:
    if group_denied(broker.authorizer, ctx, request.group_id):
        respond(m.JoinGroupResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, generation_id=-1,
            protocol_name=None if ctx.api_version >= 7 else "", leader="", member_id="",
            members=[]))
        return
    broker.coordinator.join_group(request, ctx.api_version, ctx, respond)
