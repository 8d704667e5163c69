"""DescribeAcls: the authorizer's ACLs a filter matches, grouped by resource pattern
(SECURITY_DISABLED without an authorizer; see acls.py)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import DescribeAclsResponse

from ..security.authorizer import AclOperation
from ..security.acl_apis import (CLUSTER_AUTHORIZATION_FAILED, NO_AUTHORIZER, SECURITY_DISABLED,
                                 binding_filter, cluster_denied_message, filter_has_unknown)

NAME = "DescribeAcls"
Resource_ = DescribeAclsResponse.DescribeAclsResource
Acl_ = DescribeAclsResponse.AclDescription


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is None:
        respond(DescribeAclsResponse(error_code=SECURITY_DISABLED, error_message=NO_AUTHORIZER,
                                     resources=[]))
        return
    if filter_has_unknown(request):
        ctx.conn.close_after_answers("DescribeAcls with UNKNOWN elements")
        respond(None)
        return
    if not auth.cluster(ctx, AclOperation.DESCRIBE):
        respond(DescribeAclsResponse(error_code=CLUSTER_AUTHORIZATION_FAILED,
                                     error_message=cluster_denied_message(
                                         NAME, AclOperation.DESCRIBE), resources=[]))
        return
    acl_filter = binding_filter(request)
    resources: dict[tuple, list] = {}
    for acl in auth.authorizer.matching(acl_filter):
        resources.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
            Acl_(principal=acl.principal, host=acl.host, operation=acl.operation,
                 permission_type=acl.permission_type))
    respond(DescribeAclsResponse(error_code=ErrorCode.NONE, error_message=None, resources=[
        Resource_(resource_type=rt, resource_name=name, pattern_type=pt, acls=acls)
        for (rt, name, pt), acls in resources.items()]))
