"""ElectLeaders: move leadership back to the preferred replica (election type 0), or to any live
replica when a partition has lost its leader and ISR (1, unclean). A partition that already has
the leader asked for answers ELECTION_NOT_NEEDED, as every partition does while one node leads
them all. A null topic list means every partition, and then those needing nothing are left
out of the answer."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import ElectLeadersResponse

from ..security.authorizer import AclOperation
from ..security.acl_apis import cluster_denied_message

from ..partitions.replicas import elect_leader, placement

NAME = "ElectLeaders"

PREFERRED, UNCLEAN = 0, 1

Result = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = ElectLeadersResponse.PartitionResult

NOT_NEEDED = "Leader election not needed for topic partition."
MESSAGES = {
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE:
        "Eligible topic partition leaders are not available.",
}


def elect(broker, topic_name: str, index: int, election_type: int) -> tuple[int, str | None]:
    """(error, message) of one partition's election, in Kafka's controller's words."""
    topic = broker.topics.get(topic_name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic_name}"
    if not 0 <= index < len(topic.partitions):
        return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"No such partition as {topic_name}-{index}")
    where = placement(broker, topic.partitions[index])
    if election_type == PREFERRED and where.leader == where.preferred_leader:
        return ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED
    if election_type == UNCLEAN and where.leader >= 0:
        return ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED
    if elect_leader(broker, topic.partitions[index], unclean=election_type == UNCLEAN):
        return ErrorCode.NONE, None
    error = (ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if election_type == PREFERRED
             else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE)
    return error, MESSAGES[error]


def handle(broker, ctx, request, respond) -> None:
    version = ctx.api_version
    election_type = request.election_type if version >= 1 else PREFERRED
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.ALTER):
        message = cluster_denied_message(NAME, AclOperation.ALTER)
        respond(ElectLeadersResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, replica_election_results=[
                Result(topic=t.topic, partition_result=[
                    PartitionResult(partition_id=p,
                                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message=message) for p in t.partitions])
                for t in request.topic_partitions or ()]))
        return
    if request.topic_partitions == []:  # nothing to elect: not even the type is looked at
        respond(ElectLeadersResponse(error_code=ErrorCode.NONE, replica_election_results=[]))
        return
    if election_type not in (PREFERRED, UNCLEAN):
        message = f"Unknown election type {election_type}"
        respond(ElectLeadersResponse(
            error_code=ErrorCode.INVALID_REQUEST, replica_election_results=[
                Result(topic=t.topic, partition_result=[
                    PartitionResult(partition_id=p, error_code=ErrorCode.INVALID_REQUEST,
                                    error_message=message) for p in t.partitions])
                for t in request.topic_partitions or ()]))
        return
    results = []
    if request.topic_partitions is None:
        for topic in broker.topics.topics.values():
            partitions = []
            for partition in topic.partitions:
                error, message = elect(broker, topic.name, partition.index, election_type)
                if error != ErrorCode.ELECTION_NOT_NEEDED:
                    partitions.append(PartitionResult(partition_id=partition.index,
                                                      error_code=error, error_message=message))
            results.append(Result(topic=topic.name, partition_result=partitions))
    else:
        for t in request.topic_partitions:
            partitions = []
            for index in t.partitions:
                error, message = elect(broker, t.topic, index, election_type)
                partitions.append(PartitionResult(partition_id=index, error_code=error,
                                                  error_message=message))
            results.append(Result(topic=t.topic, partition_result=partitions))
    respond(ElectLeadersResponse(error_code=ErrorCode.NONE, replica_election_results=results))
