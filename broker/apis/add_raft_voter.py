"""AddRaftVoter (kafka-metadata-quorum.sh add-controller, Admin.addRaftVoter): Kafka's answers
for the quorum this broker presents, checked in KafkaRaftClient's order: the cluster id
(INCONSISTENT_CLUSTER_ID), a valid voter (id >= 0, a directory id), an endpoint on the default
listener (INVALID_REQUEST), a voter id already in the set (DUPLICATE_VOTER). A new voter is then
contacted as Kafka's leader contacts it: one it cannot reach aborts the change
(REQUEST_TIMED_OUT, "API_VERSIONS returned an error BROKER_NOT_AVAILABLE"), one it reaches has
fetched nothing of the metadata log, so the change aborts as lagging behind, at once, as on
Kafka. No voter is ever added. With an authorizer it needs ALTER on the cluster."""
from __future__ import annotations

import asyncio

from protocol.errors import ErrorCode
from protocol.messages import AddRaftVoterResponse

from ..security.authorizer import AclOperation

from .describe_quorum import (ZERO_UUID, cluster_id_error, default_listener,
                              quorum_voters, replica_key, voter_set)

NAME = "AddRaftVoter"

#: the longest a new voter's endpoint is tried (Kafka's request timeout is 30 s)
MAX_CONNECT_S = 30.0

UNREACHABLE = ("Aborted add voter operation for since API_VERSIONS returned an error "
               "BROKER_NOT_AVAILABLE")


def _endpoints(listeners) -> str:
    inner = ", ".join(f"ListenerName({l.name})={l.host}/<unresolved>:{l.port}"
                      for l in listeners)
    return f"Endpoints(endpoints={{{inner}}})"


def handle(broker, ctx, request, respond) -> None:
    def answer(code: int, message: str | None) -> None:
        respond(AddRaftVoterResponse(throttle_time_ms=0, error_code=code,
                                     error_message=message))

    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.ALTER):
        answer(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
        return
    error = cluster_id_error(broker, request.cluster_id)
    if error is not None:
        answer(*error)
        return
    if request.voter_id < 0 or request.voter_directory_id == ZERO_UUID:
        answer(ErrorCode.INVALID_REQUEST, "Add voter request didn't include a valid voter")
        return
    listener = default_listener(broker)
    endpoint = next((l for l in request.listeners if l.name == listener), None)
    if endpoint is None:
        answer(ErrorCode.INVALID_REQUEST,
               f"Add voter request didn't include the endpoint "
               f"({_endpoints(request.listeners)}) for the default listener "
               f"ListenerName({listener})")
        return
    key = replica_key(request.voter_id, request.voter_directory_id)
    if any(node == request.voter_id for node, _d in quorum_voters(broker)):
        answer(ErrorCode.DUPLICATE_VOTER, f"The voter id for {key} is already part of the "
                                          f"set of voters {voter_set(broker)}.")
        return
    timeout = min(max(request.timeout_ms, 0) / 1000.0, MAX_CONNECT_S)

    async def contact() -> None:
        try:
            _reader, writer = await asyncio.wait_for(
                asyncio.open_connection(endpoint.host, endpoint.port), timeout)
        except (OSError, asyncio.TimeoutError, UnicodeError, ValueError):
            answer(ErrorCode.REQUEST_TIMED_OUT, UNREACHABLE)
            return
        writer.close()
        answer(ErrorCode.REQUEST_TIMED_OUT,
               f"Aborted add voter operation for {key} since it is lagging behind")

    asyncio.get_running_loop().create_task(contact())
