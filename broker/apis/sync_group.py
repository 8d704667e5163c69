"""SyncGroup: the leader's assignment goes to every member of a classic group. With an authorizer
the group needs READ (after v5's INCONSISTENT_GROUP_PROTOCOL check, as on Kafka)."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType

NAME = "SyncGroup"

READ = AclOperation.READ
GROUP = ResourceType.GROUP
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED


def handle(broker, ctx, request, respond) -> None:
    if broker.authorizer is not None:
        respond = _authorized(broker.authorizer, ctx, request, respond)
        if respond is None:
            return
    broker.coordinator.sync_group(request, ctx.api_version, ctx, respond)


def _authorized(auth, ctx, request, respond):
    """The ACL checks Kafka makes before it asks its group coordinator: the ``respond`` the
    coordinator is to call (wrapped to add what was refused), or None once it answered."""
    if ctx.api_version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return respond  # INCONSISTENT_GROUP_PROTOCOL comes first
    if auth.allowed(ctx, READ, GROUP, request.group_id):
        return respond
    respond(m.SyncGroupResponse(error_code=GROUP_DENIED, assignment=b""))
    return None
