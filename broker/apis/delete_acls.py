"""DeleteAcls: SECURITY_DISABLED for every filter (no authorizer; see acls.py)."""
from __future__ import annotations

from protocol.messages import DeleteAclsResponse

from .acls import NO_AUTHORIZER_CHANGE, SECURITY_DISABLED

NAME = "DeleteAcls"
VERSIONS = (1, 3)


def handle(broker, ctx, request, respond) -> None:
    respond(DeleteAclsResponse(filter_results=[
        DeleteAclsResponse.DeleteAclsFilterResult(error_code=SECURITY_DISABLED,
                                                  error_message=NO_AUTHORIZER_CHANGE, matching_acls=[])
        for _ in request.filters]))
