"""DeleteAcls: removes the ACLs each filter matches and lists them (SECURITY_DISABLED without an
authorizer; see acls.py)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import DeleteAclsResponse

from ..security.authorizer import AclOperation
from ..security.acl_apis import (CLUSTER_AUTHORIZATION_FAILED, MAX_ACLS_PER_REQUEST,
                                 NO_AUTHORIZER_CHANGE, SECURITY_DISABLED, binding_filter,
                                 cluster_denied_message, filter_error, filter_has_unknown)

NAME = "DeleteAcls"
Result = DeleteAclsResponse.DeleteAclsFilterResult
Matching = DeleteAclsResponse.DeleteAclsMatchingAcl


def _failed(request, code: int, message: str) -> DeleteAclsResponse:
    return DeleteAclsResponse(filter_results=[
        Result(error_code=code, error_message=message, matching_acls=[])
        for _ in request.filters])


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is None:
        respond(_failed(request, SECURITY_DISABLED, NO_AUTHORIZER_CHANGE))
        return
    if any(filter_has_unknown(f) for f in request.filters):
        ctx.conn.close_after_answers("DeleteAcls with UNKNOWN elements")
        respond(None)
        return
    if not auth.cluster(ctx, AclOperation.ALTER):
        respond(_failed(request, CLUSTER_AUTHORIZATION_FAILED,
                        cluster_denied_message(NAME, AclOperation.ALTER)))
        return
    filters = [binding_filter(f) for f in request.filters]
    errors = [filter_error(f) for f in filters]
    deleted = auth.delete([f for f, error in zip(filters, errors) if error is None],
                          MAX_ACLS_PER_REQUEST)
    if deleted is None:
        respond(_failed(request, ErrorCode.INVALID_REQUEST,
                        f"Cannot remove more than {MAX_ACLS_PER_REQUEST} acls in a single "
                        "delete operation."))
        return
    results = []
    for error in errors:
        if error is not None:
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST, error_message=error,
                                  matching_acls=[]))
            continue
        results.append(Result(error_code=ErrorCode.NONE, error_message=None, matching_acls=[
            Matching(error_code=ErrorCode.NONE, error_message=None,
                     resource_type=acl.resource_type, resource_name=acl.resource_name,
                     pattern_type=acl.pattern_type, principal=acl.principal, host=acl.host,
                     operation=acl.operation, permission_type=acl.permission_type)
            for acl in deleted.pop(0)]))
    respond(DeleteAclsResponse(filter_results=results))
