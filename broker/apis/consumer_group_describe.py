"""ConsumerGroupDescribe: consumer-protocol groups with their members and assignments. With an
authorizer each group needs DESCRIBE, and a group whose assignments name a topic the principal
may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType

NAME = "ConsumerGroupDescribe"

DESCRIBE = AclOperation.DESCRIBE
GROUP = ResourceType.GROUP
TOPIC = ResourceType.TOPIC
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def handle(broker, ctx, request, respond) -> None:
    if broker.authorizer is not None:
        respond = _authorized(broker.authorizer, ctx, request, respond)
        if respond is None:
            return
    broker.coordinator.consumer_group_describe(request, ctx.api_version, ctx, respond)


def _authorized(auth, ctx, request, respond):
    """The ACL checks Kafka makes before it asks its group coordinator: the ``respond`` the
    coordinator is to call (wrapped to add what was refused), or None once it answered."""
    Group_ = m.ConsumerGroupDescribeResponse.DescribedGroup
    may_describe = auth.predicate(ctx, DESCRIBE, GROUP)
    denied = [Group_(group_id=g, error_code=GROUP_DENIED) for g in request.group_ids
              if not may_describe(g)]
    request.group_ids = [g for g in request.group_ids if may_describe(g)]
    include_ops = request.include_authorized_operations
    may_topic = auth.predicate(ctx, DESCRIBE, TOPIC)

    def hides_topic(group) -> bool:
        return any(not may_topic(tp.topic_name) for member in group.members
                   for assignment in (member.assignment, member.target_assignment)
                   for tp in assignment.topic_partitions)

    def respond_described(response) -> None:
        out = list(denied)
        for group in response.groups:
            if include_ops and group.error_code == ErrorCode.NONE:
                group.authorized_operations = auth.operations(ctx, GROUP, group.group_id)
            if hides_topic(group):
                group = Group_(group_id=group.group_id, error_code=TOPIC_DENIED, members=[],
                               error_message="The group has described topic(s) that the "
                                             "client is not authorized to describe.")
            out.append(group)
        response.groups = out
        respond(response)
    return respond_described
