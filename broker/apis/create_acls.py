"""CreateAcls: SECURITY_DISABLED for every creation (no authorizer; see acls.py)."""
from __future__ import annotations

from protocol.messages import CreateAclsResponse

from .acls import NO_AUTHORIZER_CHANGE, SECURITY_DISABLED

NAME = "CreateAcls"
VERSIONS = (1, 3)


def handle(broker, ctx, request, respond) -> None:
    respond(CreateAclsResponse(results=[
        CreateAclsResponse.AclCreationResult(error_code=SECURITY_DISABLED,
                                             error_message=NO_AUTHORIZER_CHANGE)
        for _ in request.creations]))
