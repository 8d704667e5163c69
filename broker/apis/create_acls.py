"""CreateAcls: adds ACLs to the authorizer (SECURITY_DISABLED without one; see acls.py)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import CreateAclsResponse

from ..security.authorizer import AclOperation, new_acl_error
from ..security.acl_apis import (CLUSTER_AUTHORIZATION_FAILED, MAX_ACLS_PER_REQUEST,
                                 NO_AUTHORIZER_CHANGE, SECURITY_DISABLED, binding,
                                 cluster_denied_message, creation_has_unknown,
                                 creation_not_a_binding)

NAME = "CreateAcls"
Result = CreateAclsResponse.AclCreationResult


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is None:
        respond(CreateAclsResponse(results=[
            Result(error_code=SECURITY_DISABLED, error_message=NO_AUTHORIZER_CHANGE)
            for _ in request.creations]))
        return
    if any(creation_has_unknown(c) for c in request.creations):
        ctx.conn.close_after_answers("CreateAcls with UNKNOWN elements")
        respond(None)
        return
    if not auth.cluster(ctx, AclOperation.ALTER):
        message = cluster_denied_message(NAME, AclOperation.ALTER)
        respond(CreateAclsResponse(results=[
            Result(error_code=CLUSTER_AUTHORIZATION_FAILED, error_message=message)
            for _ in request.creations]))
        return
    if any(creation_not_a_binding(c) for c in request.creations):
        respond(CreateAclsResponse(results=[
            Result(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=None)
            for _ in request.creations]))
        return
    results, valid = [], []
    for creation in request.creations:
        acl = binding(creation)
        error = new_acl_error(acl)
        if error is None:
            valid.append(acl)
            results.append(Result(error_code=ErrorCode.NONE, error_message=""))
        else:
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST, error_message=error))
    new = set(valid) - auth.authorizer.acls.keys()
    if len(new) > MAX_ACLS_PER_REQUEST:
        # Kafka's controller refuses the batch: every valid creation fails, nothing is added
        for result in results:
            if result.error_code == ErrorCode.NONE:
                result.error_code = ErrorCode.POLICY_VIOLATION
                result.error_message = "Unable to perform excessively large batch operation."
        respond(CreateAclsResponse(results=results))
        return
    auth.create(valid)
    respond(CreateAclsResponse(results=results))
