"""DeleteTopics: by name (v0-5) or by name or id (v6)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import DeleteTopicsResponse

NAME = "DeleteTopics"
VERSIONS = (1, 6)

Result = DeleteTopicsResponse.DeletableTopicResult


def handle(broker, ctx, request, respond) -> None:
    wanted = [(s.name, s.topic_id) for s in request.topics] if ctx.api_version >= 6 else \
        [(n, None) for n in request.topic_names]
    results = []
    for name, topic_id in wanted:
        topic = broker.topics.get(name) if name is not None else broker.topics.by_id.get(topic_id)
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
        broker.delete_topic(topic.name)
        results.append(Result(name=topic.name, topic_id=topic.topic_id,
                              error_code=ErrorCode.NONE, error_message=None))
    respond(DeleteTopicsResponse(responses=results))
