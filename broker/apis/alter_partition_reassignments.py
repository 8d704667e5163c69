"""AlterPartitionReassignments: move a partition's replicas to other brokers, or cancel a move
(null replicas). The target must name registered brokers, each once; a target equal to the
current replicas needs no move and succeeds at once, which is the only move one node allows."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import AlterPartitionReassignmentsResponse

from ..security.authorizer import AclOperation
from ..security.acl_apis import cluster_denied_message

from ..partitions.replicas import broker_ids, placement, reassign

NAME = "AlterPartitionReassignments"

TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
PartitionResponse = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse


class Refused(Exception):
    def __init__(self, error: int, message: str | None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def check_assignment(broker, replicas: list[int]) -> None:
    """Kafka's checks of a manual assignment: not empty, registered brokers, none twice (the
    first offender in id order is named)."""
    if not replicas:
        raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                      "The manual partition assignment includes an empty replica list.")
    registered = set(broker_ids(broker))
    previous = None
    for node in sorted(replicas):
        if node not in registered:
            raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          f"The manual partition assignment includes broker {node}, but no such "
                          "broker is registered.")
        if node == previous:
            raise Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          f"The manual partition assignment includes the broker {node} more "
                          "than once.")
        previous = node


def alter(broker, topic_name: str, index: int, target: list[int] | None,
          allow_rf_change: bool) -> None:
    topic = broker.topics.get(topic_name)
    if topic is None:
        raise Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      f"Unable to find a topic named {topic_name}.")
    if not 0 <= index < len(topic.partitions):
        raise Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      f"Unable to find partition {topic_name}:{index}.")
    partition = topic.partitions[index]
    where = placement(broker, partition)
    if target is None:
        if not where.reassigning:
            # Kafka leaves out a message that only repeats the error's own
            raise Refused(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
        reassign(broker, partition, None)
        return
    check_assignment(broker, target)
    if not allow_rf_change:
        # during a move, the replication factor is that of the move's target
        current = len((set(where.replicas) | set(where.adding)) - set(where.removing)) \
            if where.reassigning else len(where.replicas)
        if current != len(target):
            raise Refused(ErrorCode.INVALID_REPLICATION_FACTOR,
                          f"The replication factor is changed from {current} to {len(target)}")
    removing = sorted(set(where.replicas) - set(target))
    if target + removing == where.replicas and not where.reassigning:
        return  # already there
    reassign(broker, partition, target)


def handle(broker, ctx, request, respond) -> None:
    allow = request.allow_replication_factor_change if ctx.api_version >= 1 else True
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.ALTER):
        message = cluster_denied_message(NAME, AclOperation.ALTER)
        error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        respond(AlterPartitionReassignmentsResponse(
            allow_replication_factor_change=True, error_code=error, error_message=message,
            responses=[TopicResponse(name=t.name, partitions=[
                PartitionResponse(partition_index=p.partition_index, error_code=error,
                                  error_message=message) for p in t.partitions])
                for t in request.topics]))
        return
    if not request.topics:
        # Kafka's controller answers an empty request with an empty answer, defaults included
        respond(AlterPartitionReassignmentsResponse(
            allow_replication_factor_change=True, error_code=ErrorCode.NONE, error_message="",
            responses=[]))
        return
    responses = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            try:
                alter(broker, t.name, p.partition_index, p.replicas, allow)
                error, message = ErrorCode.NONE, None
            except Refused as refused:
                error, message = refused.error, refused.message
            partitions.append(PartitionResponse(partition_index=p.partition_index,
                                                error_code=error, error_message=message))
        responses.append(TopicResponse(name=t.name, partitions=partitions))
    respond(AlterPartitionReassignmentsResponse(
        allow_replication_factor_change=allow, error_code=ErrorCode.NONE, error_message=None,
        responses=responses))
