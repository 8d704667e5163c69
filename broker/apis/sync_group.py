"""SyncGroup: the leader's assignment goes to every member of a classic group. With an authorizer
the group needs READ (after v5's INCONSISTENT_GROUP_PROTOCOL check, as on Kafka)."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorization import group_denied

NAME = "SyncGroup"


def handle(broker, ctx, request, respond) -> None:
    # INCONSISTENT_GROUP_PROTOCOL (v5+, from the coordinator) comes before the ACL check
    protocol_named = ctx.api_version < 5 or (request.protocol_type is not None
                                             and request.protocol_name is not None)
    if protocol_named and group_denied(broker.authorizer, ctx, request.group_id):
        respond(m.SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                    assignment=b""))
        return
    broker.coordinator.sync_group(request, ctx.api_version, ctx, respond)
