"""LeaveGroup: members leave a classic group. With an authorizer the group needs READ."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorization import group_denied

NAME = "LeaveGroup"


def handle(broker, ctx, request, respond) -> None:
    if group_denied(broker.authorizer, ctx, request.group_id):
        respond(m.LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, members=[]))
        return
    broker.coordinator.leave_group(request, ctx.api_version, ctx, respond)
