"""StreamsGroupDescribe: streams groups with their topology, members and assignments. With an
authorizer each group needs DESCRIBE, as for ConsumerGroupDescribe."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType

NAME = "StreamsGroupDescribe"


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is None:
        broker.coordinator.streams_group_describe(request, ctx.api_version, ctx, respond)
        return
    described_cls = m.StreamsGroupDescribeResponse.DescribedGroup
    may_describe = auth.predicate(ctx, AclOperation.DESCRIBE, ResourceType.GROUP)
    denied = [described_cls(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
              for g in request.group_ids if not may_describe(g)]
    request.group_ids = [g for g in request.group_ids if may_describe(g)]
    include_ops = request.include_authorized_operations

    def answer(response) -> None:
        for group in response.groups:
            if include_ops and group.error_code == ErrorCode.NONE:
                group.authorized_operations = auth.operations(ctx, ResourceType.GROUP,
                                                              group.group_id)
        response.groups = denied + list(response.groups)
        respond(response)

    broker.coordinator.streams_group_describe(request, ctx.api_version, ctx, answer)
