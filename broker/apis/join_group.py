"""JoinGroup: a member joins a classic group (broker/coordinator/classic). With an authorizer the
group needs READ first, as Kafka's KafkaApis checks before it asks its group coordinator."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType

NAME = "JoinGroup"

READ = AclOperation.READ
GROUP = ResourceType.GROUP
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED


def handle(broker, ctx, request, respond) -> None:
    if broker.authorizer is not None:
        respond = _authorized(broker.authorizer, ctx, request, respond)
        if respond is None:
            return
    broker.coordinator.join_group(request, ctx.api_version, ctx, respond)


def _authorized(auth, ctx, request, respond):
    """The ACL checks Kafka makes before it asks its group coordinator: the ``respond`` the
    coordinator is to call (wrapped to add what was refused), or None once it answered."""
    if auth.allowed(ctx, READ, GROUP, request.group_id):
        return respond
    respond(m.JoinGroupResponse(error_code=GROUP_DENIED, generation_id=-1,
                                protocol_name=None if ctx.api_version >= 7 else "",
                                leader="", member_id="", members=[]))
    return None
