"""DeleteGroups: empty groups go, with their offsets. With an authorizer each group needs DELETE."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType

NAME = "DeleteGroups"

DELETE = AclOperation.DELETE
GROUP = ResourceType.GROUP
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED


def handle(broker, ctx, request, respond) -> None:
    if broker.authorizer is not None:
        respond = _authorized(broker.authorizer, ctx, request, respond)
        if respond is None:
            return
    broker.coordinator.delete_groups(request, ctx.api_version, ctx, respond)


def _authorized(auth, ctx, request, respond):
    """The ACL checks Kafka makes before it asks its group coordinator: the ``respond`` the
    coordinator is to call (wrapped to add what was refused), or None once it answered."""
    may_delete = auth.predicate(ctx, DELETE, GROUP)
    names = list(dict.fromkeys(request.groups_names))
    denied = [n for n in names if not may_delete(n)]
    if not denied:
        return respond
    Result = m.DeleteGroupsResponse.DeletableGroupResult
    request.groups_names = [n for n in names if may_delete(n)]

    def respond_with_denied(response) -> None:
        response.results.extend(Result(group_id=n, error_code=GROUP_DENIED) for n in denied)
        respond(response)
    return respond_with_denied
