"""ListGroups: the groups this node coordinates, with their type and state. With an authorizer,
all of them with DESCRIBE on the cluster, else those the principal may DESCRIBE."""
from __future__ import annotations

from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType
from ..network.coordinator_routing import hosted_groups

NAME = "ListGroups"

DESCRIBE = AclOperation.DESCRIBE
GROUP = ResourceType.GROUP


def handle(broker, ctx, request, respond) -> None:
    if broker.authorizer is not None:
        respond = _authorized(broker.authorizer, ctx, request, respond)
        if respond is None:
            return
    respond = hosted_groups(broker, ctx, respond)
    broker.coordinator.list_groups(request, ctx.api_version, ctx, respond)


def _authorized(auth, ctx, request, respond):
    """All groups with DESCRIBE on the cluster, else those the principal may DESCRIBE."""
    if auth.cluster(ctx, DESCRIBE):
        return respond
    may_describe = auth.predicate(ctx, DESCRIBE, GROUP)

    def respond_listed(response) -> None:
        response.groups = [g for g in response.groups if may_describe(g.group_id)]
        respond(response)
    return respond_listed
