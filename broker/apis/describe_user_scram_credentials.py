"""DescribeUserScramCredentials: which SCRAM mechanisms (and iteration counts) users have, never
their keys; as Kafka's ScramImage.describe answers it (all users for a null or empty list, a user
named twice DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND). With an authorizer it needs
DESCRIBE on the cluster, as Kafka's KafkaApis checks."""
from __future__ import annotations

from broker.security.authorizer import AclOperation
from broker.security.scram import MECHANISMS
from protocol.errors import ErrorCode
from protocol.messages import DescribeUserScramCredentialsResponse

NAME = "DescribeUserScramCredentials"

Response = DescribeUserScramCredentialsResponse
Result = Response.DescribeUserScramCredentialsResult
Info = Response.CredentialInfo


#: the message of Kafka's Errors.CLUSTER_AUTHORIZATION_FAILED
CLUSTER_DENIED = "Cluster authorization failed."


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.DESCRIBE):
        # Kafka's getErrorResponse: the error at the top and once per user asked, unnamed
        respond(Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                         error_message=CLUSTER_DENIED, results=[
                             Result(user="", error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message=CLUSTER_DENIED, credential_infos=[])
                             for _ in request.users or ()]))
        return
    store = broker.scram_credentials
    duplicated: dict[str, bool] = {}
    if not request.users:
        duplicated = dict.fromkeys(store.users(), False)
    else:
        for user in request.users:
            duplicated[user.name] = user.name in duplicated
    results = []
    for user, twice in duplicated.items():
        if twice:
            results.append(Result(
                user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                error_message="Cannot describe SCRAM credentials for the same user twice in a "
                              f"single request: {user}", credential_infos=[]))
            continue
        infos = []
        for name, mech in MECHANISMS.items():
            credential = store.get(name, user)
            if credential is not None:
                infos.append(Info(mechanism=mech.type, iterations=credential.iterations))
        if infos:
            results.append(Result(user=user, error_code=ErrorCode.NONE,
                                  credential_infos=infos))
        else:
            results.append(Result(
                user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                error_message=f"Attempt to describe a user credential that does not exist: {user}",
                credential_infos=[]))
    respond(Response(throttle_time_ms=0, error_code=ErrorCode.NONE,
                     results=results))
