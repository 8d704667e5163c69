"""DeleteTopics: by name (v0-5) or by name or id (v6)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import DeleteTopicsResponse
from protocol.schema import ZERO_UUID

from ..security.authorizer import AclOperation, ResourceType

NAME = "DeleteTopics"

Result = DeleteTopicsResponse.DeletableTopicResult
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
TOPIC_DENIED_MESSAGE = "Topic authorization failed."


def handle(broker, ctx, request, respond) -> None:
    wanted = [(s.name, s.topic_id) for s in request.topics] if ctx.api_version >= 6 else \
        [(n, None) for n in request.topic_names]
    results = []
    auth = broker.authorizer
    may_describe = may_delete = None
    if auth is not None and not auth.cluster(ctx, AclOperation.DELETE):
        may_describe = auth.predicate(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC)
        may_delete = auth.predicate(ctx, AclOperation.DELETE, ResourceType.TOPIC)
    # controller_mutation_rate: each topic's partitions, strict from v5
    quota = broker.client_quotas.mutation_quota(ctx, strict_from=5)
    for name, topic_id in wanted:
        if may_describe is not None and name is not None and not may_describe(name):
            # by name, a topic the principal may not describe is refused before it is looked up
            results.append(Result(name=name, topic_id=ZERO_UUID, error_code=TOPIC_DENIED,
                                  error_message=TOPIC_DENIED_MESSAGE))
            continue
        topic = broker.topics.get(name) if name is not None else broker.topics.by_id.get(topic_id)
        if topic is not None and may_delete is not None and not may_delete(topic.name):
            # by id, the name is shown only to a principal that may describe the topic
            shown = topic.name if name is not None or may_describe(topic.name) else None
            results.append(Result(name=shown, topic_id=topic_id if name is None else ZERO_UUID,
                                  error_code=TOPIC_DENIED, error_message=TOPIC_DENIED_MESSAGE))
            continue
        if topic is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if name is not None else \
                ErrorCode.UNKNOWN_TOPIC_ID
            results.append(Result(name=name, topic_id=topic_id, error_code=error,
                                  error_message=None))
            continue
        if topic.internal:
            results.append(Result(name=topic.name, topic_id=topic.topic_id,
                                  error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  error_message="internal topics cannot be deleted"))
            continue
        if not broker.config["delete.topic.enable"]:
            results.append(Result(name=topic.name, topic_id=topic.topic_id,
                                  error_code=ErrorCode.TOPIC_DELETION_DISABLED,
                                  error_message="delete.topic.enable is false"))
            continue
        if quota is not None and not quota.record(len(topic.partitions)):
            results.append(Result(name=topic.name, topic_id=topic.topic_id,
                                  error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                  error_message=None))
            continue
        broker.delete_topic(topic.name)
        results.append(Result(name=topic.name, topic_id=topic.topic_id,
                              error_code=ErrorCode.NONE, error_message=None))
    broker.client_quotas.finish_mutations(quota, ctx)
    respond(DeleteTopicsResponse(responses=results))
