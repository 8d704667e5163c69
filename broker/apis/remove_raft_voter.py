"""RemoveRaftVoter (kafka-metadata-quorum.sh remove-controller, Admin.removeRaftVoter): Kafka's
answers for the quorum this broker presents. A voter that is not in the set, or the last one,
cannot be removed (VOTER_NOT_FOUND, with Kafka's message); the quorum of several nodes in one
process cannot shrink either, so removing one of them times out (REQUEST_TIMED_OUT) as a change
that never commits. With an authorizer it needs ALTER on the cluster."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import RemoveRaftVoterResponse

from ..security.authorizer import AclOperation

from .describe_quorum import (ZERO_UUID, cluster_id_error, quorum_voters, replica_key,
                              voter_set)

NAME = "RemoveRaftVoter"


def handle(broker, ctx, request, respond) -> None:
    respond(RemoveRaftVoterResponse(throttle_time_ms=0, **_answer(broker, ctx, request)))


def _answer(broker, ctx, request) -> dict:
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.ALTER):
        return dict(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message="Cluster authorization failed.")
    error = cluster_id_error(broker, request.cluster_id)
    if error is not None:
        return dict(error_code=error[0], error_message=error[1])
    if request.voter_id < 0 or request.voter_directory_id == ZERO_UUID:
        return dict(error_code=ErrorCode.INVALID_REQUEST,
                    error_message="Remove voter request didn't include a valid voter")
    current = quorum_voters(broker)
    key = (request.voter_id, request.voter_directory_id)
    if key not in current or len(current) == 1:
        return dict(error_code=ErrorCode.VOTER_NOT_FOUND, error_message=(
            f"Cannot remove voter {replica_key(*key)} from the set of voters "
            f"{voter_set(broker)}"))
    return dict(error_code=ErrorCode.REQUEST_TIMED_OUT,
                error_message=f"Timed out waiting to remove voter {replica_key(*key)}")
