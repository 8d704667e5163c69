"""DescribeAcls: SECURITY_DISABLED (no authorizer; see acls.py)."""
from __future__ import annotations

from protocol.messages import DescribeAclsResponse

from .acls import NO_AUTHORIZER, SECURITY_DISABLED

NAME = "DescribeAcls"
VERSIONS = (1, 3)


def handle(broker, ctx, request, respond) -> None:
    respond(DescribeAclsResponse(error_code=SECURITY_DISABLED, error_message=NO_AUTHORIZER,
                                 resources=[]))
