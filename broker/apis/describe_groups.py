"""DescribeGroups: classic groups (and consumer groups as classic clients see them). With an
authorizer each group needs DESCRIBE; authorized_operations comes from the ACLs."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType

NAME = "DescribeGroups"

DESCRIBE = AclOperation.DESCRIBE
GROUP = ResourceType.GROUP
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
#: authorized_operations not asked for
OMITTED = -2147483648


def handle(broker, ctx, request, respond) -> None:
    if broker.authorizer is not None:
        respond = _authorized(broker.authorizer, ctx, request, respond)
        if respond is None:
            return
    broker.coordinator.describe_groups(request, ctx.api_version, ctx, respond)


def _authorized(auth, ctx, request, respond):
    """The ACL checks Kafka makes before it asks its group coordinator: the ``respond`` the
    coordinator is to call (wrapped to add what was refused), or None once it answered."""
    may_describe = auth.predicate(ctx, DESCRIBE, GROUP)
    denied = [m.DescribeGroupsResponse.DescribedGroup(
        group_id=g, error_code=GROUP_DENIED, group_state="", protocol_type="", protocol_data="",
        members=[], authorized_operations=OMITTED) for g in request.groups if not may_describe(g)]
    request.groups = [g for g in request.groups if may_describe(g)]
    include_ops = ctx.api_version >= 3 and request.include_authorized_operations

    def respond_described(response) -> None:
        if include_ops:
            for group in response.groups:
                if group.error_code == ErrorCode.NONE:
                    group.authorized_operations = auth.operations(ctx, GROUP, group.group_id)
        response.groups[:0] = denied
        respond(response)
    return respond_described
