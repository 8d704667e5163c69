"""ListPartitionReassignments: the partitions whose replicas are being moved, with the replicas
being added and removed; all of them (null topics) or those asked for. Nothing is ever being
moved on one node, so the answer lists no partition."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import ListPartitionReassignmentsResponse

from ..security.authorizer import AclOperation
from ..security.acl_apis import cluster_denied_message

from ..partitions.replicas import placement

NAME = "ListPartitionReassignments"

TopicAnswer = ListPartitionReassignmentsResponse.OngoingTopicReassignment
PartitionAnswer = ListPartitionReassignmentsResponse.OngoingPartitionReassignment


def _ongoing(broker, topic, indexes) -> TopicAnswer | None:
    partitions = []
    for index in indexes:
        if not 0 <= index < len(topic.partitions):
            continue
        where = placement(broker, topic.partitions[index])
        if where.reassigning:
            partitions.append(PartitionAnswer(partition_index=index, replicas=where.replicas,
                                              adding_replicas=where.adding,
                                              removing_replicas=where.removing))
    # a topic with nothing moving is left out
    return TopicAnswer(name=topic.name, partitions=partitions) if partitions else None


def handle(broker, ctx, request, respond) -> None:
    topics = broker.topics
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.DESCRIBE):
        respond(ListPartitionReassignmentsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            error_message=cluster_denied_message(NAME, AclOperation.DESCRIBE),
            topics=[TopicAnswer(name=t.name, partitions=[
                PartitionAnswer(partition_index=p, replicas=[], adding_replicas=[],
                                removing_replicas=[]) for p in t.partition_indexes])
                for t in request.topics or ()]))
        return
    if request.topics is None:
        wanted = [(topic, range(len(topic.partitions))) for topic in topics.topics.values()]
    else:
        wanted = [(topics.get(t.name), t.partition_indexes) for t in request.topics]
    answers = []
    for topic, indexes in wanted:
        if topic is not None:
            answer = _ongoing(broker, topic, indexes)
            if answer is not None:
                answers.append(answer)
    respond(ListPartitionReassignmentsResponse(error_code=ErrorCode.NONE, error_message=None,
                                               topics=answers))
