"""AlterConfigs (the legacy, whole-set form): a topic's explicit configs become exactly the ones
in the request; every other config returns to its default. The validation shared with
IncrementalAlterConfigs lives here too."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import AlterConfigsResponse

from ..broker_configs import SET, BrokerConfigError
from ..coordinator.group.group_configs import GroupConfigError
from ..security.authorizer import AclOperation
from ..topic_configs import TOPIC_CONFIGS, validate_topic_config
from .describe_configs import config_resource_denied

NAME = "AlterConfigs"

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32

Result = AlterConfigsResponse.AlterConfigsResourceResponse


class ConfigError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def duplicates(resources) -> set[tuple[int, str]]:
    """(type, name) of resources named more than once in one request."""
    seen: set[tuple[int, str]] = set()
    twice: set[tuple[int, str]] = set()
    for res in resources:
        key = (res.resource_type, res.resource_name)
        (twice if key in seen else seen).add(key)
    return twice


def check_resource(broker, resource_type: int, name: str):
    """The topic a config change applies to; ConfigError for anything else."""
    if resource_type == TOPIC:
        topic = broker.topics.get(name)
        if topic is None:
            raise ConfigError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              f"The topic '{name}' does not exist.")
        return topic
    if resource_type == BROKER_LOGGER:
        raise ConfigError(ErrorCode.INVALID_REQUEST,
                          "Log levels are set with --log-level when the broker starts")
    raise ConfigError(ErrorCode.INVALID_REQUEST, f"Unexpected resource type {resource_type}")


def check_config(broker, name: str, value: str | None) -> None:
    if name not in TOPIC_CONFIGS:
        raise ConfigError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    if value is not None:
        problem = validate_topic_config(name, value)
        if problem:
            raise ConfigError(ErrorCode.INVALID_CONFIG, problem)


def apply(broker, topic, configs: dict[str, str | None], validate_only: bool) -> None:
    """Set (None: reset to the default) topic configs, unless only validating."""
    if not validate_only and configs:
        broker.topics.alter_configs(topic.name, configs)


def alter_each(broker, ctx, request, changes_for) -> list[tuple[ErrorCode, str | None]]:
    """(error, message) per resource of an AlterConfigs or IncrementalAlterConfigs request:
    ``changes_for(broker, topic, configs)`` says what to set (None: back to the default); each
    resource changes all or nothing."""
    twice = duplicates(request.resources)
    answers = []
    for res in request.resources:
        try:
            if (res.resource_type, res.resource_name) in twice:
                raise ConfigError(ErrorCode.INVALID_REQUEST,
                                  "Each resource must appear at most once.")
            refused = config_resource_denied(broker, ctx, AclOperation.ALTER_CONFIGS,
                                             res.resource_type, res.resource_name)
            if refused is not None:
                raise ConfigError(*refused)
            if res.resource_type == BROKER:
                alter_broker(broker, res, request.validate_only, replace=changes_for is _whole_set)
                answers.append((ErrorCode.NONE, None))
                continue
            if res.resource_type == GROUP:
                alter_group(broker, res, request.validate_only, replace=changes_for is _whole_set)
                answers.append((ErrorCode.NONE, None))
                continue
            topic = check_resource(broker, res.resource_type, res.resource_name)
            apply(broker, topic, changes_for(broker, topic, res.configs), request.validate_only)
            answers.append((ErrorCode.NONE, None))
        except ConfigError as exc:
            answers.append((exc.error, exc.message))
    return answers


def alter_broker(broker, res, validate_only: bool, replace: bool) -> None:
    """A BROKER resource: this broker's dynamic configs (its id) or the cluster-wide ones ("")
    (broker/broker_configs.py), changed one by one or, with AlterConfigs, replaced as a whole
    set."""
    changes = [(c.name, getattr(c, "config_operation", SET), c.value) for c in res.configs]
    try:
        broker.topics.broker_configs.alter(res.resource_name, changes, replace=replace,
                                           validate_only=validate_only)
    except BrokerConfigError as exc:
        raise ConfigError(exc.code, exc.message) from None


def alter_group(broker, res, validate_only: bool, replace: bool) -> None:
    """A GROUP resource (type 32): the group's own configs
    (broker/coordinator/group/group_configs.py), set, deleted (back to the default) or, with
    AlterConfigs, replaced as a whole set."""
    changes: dict[str, str | None] = {}
    for c in res.configs:
        op = getattr(c, "config_operation", 0)
        if c.name in changes:
            raise ConfigError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        if op in (2, 3):
            verb = "APPEND" if op == 2 else "SUBTRACT"
            raise ConfigError(ErrorCode.INVALID_CONFIG, f"Can't {verb} to key {c.name} "
                              "because its type is not LIST.")
        changes[c.name] = None if op == 1 else c.value
    try:
        broker.group_configs.alter(res.resource_name, changes, replace=replace,
                                   validate_only=validate_only)
    except GroupConfigError as exc:
        raise ConfigError(exc.code, exc.message) from None


def _whole_set(broker, topic, configs) -> dict[str, str | None]:
    wanted: dict[str, str | None] = {}
    for c in configs:
        check_config(broker, c.name, c.value)
        wanted[c.name] = c.value
    changes: dict[str, str | None] = {name: None for name in topic.configs if name not in wanted}
    changes.update(wanted)
    return changes


def handle(broker, ctx, request, respond) -> None:
    answers = alter_each(broker, ctx, request, _whole_set)
    respond(AlterConfigsResponse(responses=[
        Result(error_code=error, error_message=message, resource_type=res.resource_type,
               resource_name=res.resource_name)
        for res, (error, message) in zip(request.resources, answers)]))
