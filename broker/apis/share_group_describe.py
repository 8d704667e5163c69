"""ShareGroupDescribe: share groups with their members and assignments. With an authorizer each
group needs DESCRIBE, and a group whose assignments name a topic the principal may not DESCRIBE
is answered TOPIC_AUTHORIZATION_FAILED (as ConsumerGroupDescribe)."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType

NAME = "ShareGroupDescribe"


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is None:
        broker.coordinator.share_group_describe(request, ctx.api_version, ctx, respond)
        return
    described_cls = m.ShareGroupDescribeResponse.DescribedGroup
    may_describe = auth.predicate(ctx, AclOperation.DESCRIBE, ResourceType.GROUP)
    denied = [described_cls(group_id=g, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
              for g in request.group_ids if not may_describe(g)]
    request.group_ids = [g for g in request.group_ids if may_describe(g)]
    may_topic = auth.predicate(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC)
    include_ops = request.include_authorized_operations

    def answer(response) -> None:
        out = list(denied)
        for group in response.groups:
            if include_ops and group.error_code == ErrorCode.NONE:
                group.authorized_operations = auth.operations(ctx, ResourceType.GROUP,
                                                              group.group_id)
            if any(not may_topic(tp.topic_name) for member in group.members
                   for tp in member.assignment.topic_partitions):
                group = described_cls(
                    group_id=group.group_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    error_message="The group has described topic(s) that the client is not "
                                  "authorized to describe.")
            out.append(group)
        response.groups = out
        respond(response)

    broker.coordinator.share_group_describe(request, ctx.api_version, ctx, answer)
