"""Heartbeat: a classic group member is alive. With an authorizer the group needs READ."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorization import group_denied

NAME = "Heartbeat"


def handle(broker, ctx, request, respond) -> None:
    if group_denied(broker.authorizer, ctx, request.group_id):
        respond(m.HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
        return
    broker.coordinator.heartbeat(request, ctx.api_version, ctx, respond)
