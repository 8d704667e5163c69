"""AlterUserScramCredentials: add, replace or delete users' SCRAM credentials, with Kafka's
checks and codes (its ScramControlManager): a user named twice in one request gets
DUPLICATE_RESOURCE, an unknown mechanism UNSUPPORTED_SASL_MECHANISM, an empty name or an
iteration count outside 4096..16384 UNACCEPTABLE_CREDENTIAL, deleting a credential that does not
exist RESOURCE_NOT_FOUND. The client sends the salted password; the broker keeps only the
derived StoredKey and ServerKey (broker/security/scram.py) and persists them at once.

With an authorizer it needs ALTER on the cluster (Kafka's controller checks it: every user of
the request is answered CLUSTER_AUTHORIZATION_FAILED otherwise); without one every client may do
this, as on Kafka without one."""
from __future__ import annotations

import structlog

from broker.security.authorizer import AclOperation
from broker.security.scram import MAX_ITERATIONS, MECHANISMS_BY_TYPE, credential_from_salted
from protocol.errors import ErrorCode
from protocol.messages import AlterUserScramCredentialsResponse

NAME = "AlterUserScramCredentials"

log = structlog.get_logger("broker.apis.alter_user_scram_credentials")
Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


def _check(name: str, mechanism: int):
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISMS_BY_TYPE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.ALTER):
        from ..security.acl_apis import cluster_denied_message
        message = cluster_denied_message(NAME, AclOperation.ALTER)
        users = {d.name for d in request.deletions} | {u.name for u in request.upsertions}
        respond(AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            Result(user=user, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                   error_message=message) for user in sorted(users)]))
        return
    store = broker.scram_credentials
    errors: dict[str, tuple[int, str]] = {}
    deletions: dict[str, object] = {}
    upsertions: dict[str, object] = {}
    duplicate = (ErrorCode.DUPLICATE_RESOURCE,
                 "A user credential cannot be altered twice in the same request")
    for deletion in request.deletions:
        name = deletion.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None:
            errors[name] = duplicate
            continue
        error = _check(name, deletion.mechanism)
        if error is None and store.get(MECHANISMS_BY_TYPE[deletion.mechanism].name,
                                       name) is None:
            error = (ErrorCode.RESOURCE_NOT_FOUND,
                     "Attempt to delete a user credential that does not exist")
        if error is not None:
            errors[name] = error
        else:
            deletions[name] = deletion
    for upsertion in request.upsertions:
        name = upsertion.name
        if name in errors:
            continue
        if deletions.pop(name, None) is not None or upsertions.pop(name, None) is not None:
            errors[name] = duplicate
            continue
        error = _check(name, upsertion.mechanism)
        if error is None:
            mech = MECHANISMS_BY_TYPE[upsertion.mechanism]
            if upsertion.iterations < mech.min_iterations:
                error = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif upsertion.iterations > MAX_ITERATIONS:
                error = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        if error is not None:
            errors[name] = error
        else:
            upsertions[name] = upsertion
    results = []
    for name, deletion in deletions.items():
        store.remove(MECHANISMS_BY_TYPE[deletion.mechanism].name, name)
        results.append(Result(user=name, error_code=ErrorCode.NONE, error_message=None))
    for name, upsertion in upsertions.items():
        mech = MECHANISMS_BY_TYPE[upsertion.mechanism]
        store.put(mech.name, name, credential_from_salted(
            mech, bytes(upsertion.salted_password), bytes(upsertion.salt), upsertion.iterations))
        results.append(Result(user=name, error_code=ErrorCode.NONE, error_message=None))
    for name, (code, message) in errors.items():
        results.append(Result(user=name, error_code=code, error_message=message))
    if deletions or upsertions:
        store.save()
        log.info("SCRAM credentials altered", principal=str(ctx.conn.principal),
                 upserted=sorted(upsertions), deleted=sorted(deletions))
    respond(AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results))
