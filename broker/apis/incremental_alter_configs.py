"""IncrementalAlterConfigs: SET, DELETE (back to the default), APPEND and SUBTRACT (list configs
such as cleanup.policy) on a topic's configs, each resource all or nothing."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import IncrementalAlterConfigsResponse

from .alter_configs import ConfigError, alter_each, check_config

NAME = "IncrementalAlterConfigs"

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
    answers = alter_each(broker, ctx, request, _changes)
    respond(IncrementalAlterConfigsResponse(responses=[
        Result(error_code=error, error_message=message, resource_type=res.resource_type,
               resource_name=res.resource_name)
        for res, (error, message) in zip(request.resources, answers)]))
