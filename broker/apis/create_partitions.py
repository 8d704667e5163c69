"""CreatePartitions: grow a topic's partition count."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import CreatePartitionsResponse

NAME = "CreatePartitions"
VERSIONS = (0, 3)

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def handle(broker, ctx, request, respond) -> None:
    results = []
    for t in request.topics:
        topic = broker.topics.get(t.name)
        if topic is None:
            results.append(Result(name=t.name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  error_message=f"The topic '{t.name}' does not exist."))
            continue
        current = len(topic.partitions)
        if t.count < current:
            results.append(Result(name=t.name, error_code=ErrorCode.INVALID_PARTITIONS,
                                  error_message=f"Topic currently has {current} partitions, "
                                  f"which is higher than the requested {t.count}."))
            continue
        if t.count == current:
            results.append(Result(name=t.name, error_code=ErrorCode.INVALID_PARTITIONS,
                                  error_message=f"Topic already has {current} partitions."))
            continue
        if t.assignments is not None and (
                len(t.assignments) != t.count - current or
                any(a.broker_ids != [broker.node_id] for a in t.assignments)):
            results.append(Result(name=t.name, error_code=ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                  error_message="Invalid replica assignment"))
            continue
        if not request.validate_only:
            broker.topics.add_partitions(t.name, t.count)
        results.append(Result(name=t.name, error_code=ErrorCode.NONE, error_message=None))
    respond(CreatePartitionsResponse(results=results))
