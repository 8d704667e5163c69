"""IncrementalAlterConfigs: SET, DELETE (back to the default), APPEND and SUBTRACT (list configs
such as cleanup.policy) on a topic's configs, each resource all or nothing."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import IncrementalAlterConfigsResponse

from .alter_configs import ConfigError, apply, check_config, check_resource, duplicates

NAME = "IncrementalAlterConfigs"
VERSIONS = (0, 1)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_CONFIGS = {"cleanup.policy"}

Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


def _changes(broker, topic, configs) -> dict[str, str | None]:
    changes: dict[str, str | None] = {}
    for c in configs:
        if c.name in changes:
            raise ConfigError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        op = c.config_operation
        if op == SET:
            check_config(broker, c.name, c.value)
            changes[c.name] = c.value
        elif op == DELETE:
            changes[c.name] = None  # an unknown name is nothing to delete (Kafka: no error)
        elif op in (APPEND, SUBTRACT):
            check_config(broker, c.name, None)
            if c.name not in LIST_CONFIGS:
                verb = "APPEND" if op == APPEND else "SUBTRACT"
                raise ConfigError(ErrorCode.INVALID_CONFIG, f"Can't {verb} to key {c.name} "
                                  "because its type is not LIST.")
            current = [v for v in broker.topics.config_value(topic, c.name).split(",") if v]
            items = [v.strip() for v in (c.value or "").split(",") if v.strip()]
            if op == APPEND:
                value = current + [v for v in items if v not in current]
            else:
                value = [v for v in current if v not in items]
            text = ",".join(value)
            check_config(broker, c.name, text)
            changes[c.name] = text
        else:
            # Kafka 4.3 answers an unknown operation code with UNKNOWN_SERVER_ERROR
            raise ConfigError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Unknown config operation {op}")
    return changes


def handle(broker, ctx, request, respond) -> None:
    twice = duplicates(request.resources)
    results = []
    for res in request.resources:
        error, message = ErrorCode.NONE, None
        try:
            if (res.resource_type, res.resource_name) in twice:
                raise ConfigError(ErrorCode.INVALID_REQUEST,
                                  "Each resource must appear at most once.")
            topic = check_resource(broker, res.resource_type, res.resource_name)
            apply(broker, topic, _changes(broker, topic, res.configs), request.validate_only)
        except ConfigError as exc:
            error, message = exc.error, exc.message
        results.append(Result(error_code=error, error_message=message,
                              resource_type=res.resource_type, resource_name=res.resource_name))
    respond(IncrementalAlterConfigsResponse(responses=results))
