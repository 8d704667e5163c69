"""CreatePartitions: grow a topic's partition count."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import CreatePartitionsResponse

from ..security.authorizer import AclOperation, ResourceType
from .create_topics import assignment_problem

NAME = "CreatePartitions"

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


#: Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: the new partitions of one request, in all
MAX_RECORDS_PER_REQUEST = 10_000


def handle(broker, ctx, request, respond) -> None:
    results = []
    records = 0     # new partitions so far: Kafka's controller writes one record each
    auth = broker.authorizer
    may_alter = auth.predicate(ctx, AclOperation.ALTER, ResourceType.TOPIC) \
        if auth is not None else None
    # controller_mutation_rate: the partitions each topic adds, strict from v3
    quota = broker.client_quotas.mutation_quota(ctx, strict_from=3)
    for t in request.topics:
        if may_alter is not None and not may_alter(t.name):
            results.append(Result(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  error_message=None))
            continue
        topic = broker.topics.get(t.name)
        if topic is None:
            results.append(Result(name=t.name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  error_message=f"The topic '{t.name}' does not exist."))
            continue
        current = len(topic.partitions)
        if t.count < current:
            results.append(Result(name=t.name, error_code=ErrorCode.INVALID_PARTITIONS,
                                  error_message=f"The topic {t.name} currently has {current} "
                                  f"partition(s); {t.count} would not be an increase."))
            continue
        if t.count == current:
            results.append(Result(name=t.name, error_code=ErrorCode.INVALID_PARTITIONS,
                                  error_message=f"Topic already has {current} partition(s)."))
            continue
        assignments = None
        if t.assignments is not None:
            assignments = [list(a.broker_ids) for a in t.assignments]
            if len(assignments) != t.count - current:
                problem = (f"Attempted to add {t.count - current} additional partition(s), but "
                           f"only {len(assignments)} assignment(s) were specified.")
            else:
                problem = assignment_problem(broker, assignments,
                                             len(topic.partitions[0].replicas))
            if problem is not None:
                results.append(Result(name=t.name,
                                      error_code=ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                      error_message=problem))
                continue
        if quota is not None and not quota.record(t.count - current):
            results.append(Result(name=t.name, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                  error_message=None))
            continue
        if records + (t.count - current) > MAX_RECORDS_PER_REQUEST:
            # Kafka's record list overflows in this topic: it fails (UNKNOWN_SERVER_ERROR),
            # and so does every later topic that adds a partition; checked before allocating
            records = MAX_RECORDS_PER_REQUEST
            results.append(Result(name=t.name, error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                  error_message=None))
            continue
        records += t.count - current
        if not request.validate_only:
            broker.topics.add_partitions(t.name, t.count, assignments)
        results.append(Result(name=t.name, error_code=ErrorCode.NONE, error_message=None))
    broker.client_quotas.finish_mutations(quota, ctx)
    respond(CreatePartitionsResponse(results=results))
