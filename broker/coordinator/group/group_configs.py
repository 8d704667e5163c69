"""Group configs (Kafka's GroupConfig and GroupConfigManager): the settings one group may
override with IncrementalAlterConfigs or AlterConfigs on the GROUP config resource (type 32),
read with DescribeConfigs: ``share.auto.offset.reset``, ``share.record.lock.duration.ms`` and
the other share-group configs, and the consumer- and streams-group ones Kafka 4.3 serves there.

Each config has Kafka's type, lower bound, and the broker settings that bound it
(``group.share.min.record.lock.duration.ms`` ...); a value is validated against the group's
other configs as they would be (a session timeout above the heartbeat interval). Stored in
``group-configs.json`` under the data directory when the broker has one.
"""
from __future__ import annotations

import json
import os
import re
from typing import Callable

from protocol.errors import ErrorCode

from ...config import kafka_default
from ...log.files import write_json
from ...topic_configs import BOOLEAN as BOOLEAN_TYPE, INT as INT_TYPE, type_problem

E = ErrorCode
INT, STRING, BOOLEAN = "INT", "STRING", "BOOLEAN"
_CONFIG_TYPES = {INT: INT_TYPE, BOOLEAN: BOOLEAN_TYPE}
CONFIG_FILE = "group-configs.json"

class GroupConfigDef:
    """One group config's type, default and bounds (a plain class: a dataclass exec()s its
    methods' source at every start)."""

    __slots__ = ("type", "broker", "default", "at_least", "bounds", "bounds_if_set", "choices")

    def __init__(self, type: str, broker: str | None = None, default: str | None = None,
                 at_least: int | None = None, bounds: tuple = (None, None),
                 bounds_if_set: bool = False, choices: tuple = ()) -> None:
        self.type = type
        #: the broker setting that gives the default (None: ``default`` below)
        self.broker = broker
        self.default = default
        self.at_least = at_least
        #: the broker settings bounding the value: (min setting or None, max setting or None)
        self.bounds = bounds
        #: bounds checked only when the group sets the config (Kafka's assignment intervals)
        self.bounds_if_set = bounds_if_set
        self.choices = choices


def _kind(prefix: str, what: str, at_least: int, maximum: bool = True, **kw) -> GroupConfigDef:
    broker = f"group.{prefix}.{what}"
    low = f"group.{prefix}.min.{what}"
    high = f"group.{prefix}.max.{what}" if maximum else None
    return GroupConfigDef(INT, broker=broker, at_least=at_least, bounds=(low, high), **kw)


GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    "consumer.session.timeout.ms": _kind("consumer", "session.timeout.ms", 1),
    "consumer.heartbeat.interval.ms": _kind("consumer", "heartbeat.interval.ms", 1),
    "consumer.assignment.interval.ms": _kind("consumer", "assignment.interval.ms", 0,
                                             bounds_if_set=True),
    "share.session.timeout.ms": _kind("share", "session.timeout.ms", 1),
    "share.heartbeat.interval.ms": _kind("share", "heartbeat.interval.ms", 1),
    "share.record.lock.duration.ms": _kind("share", "record.lock.duration.ms", 1000),
    "share.delivery.count.limit": _kind("share", "delivery.count.limit", 2),
    "share.partition.max.record.locks": _kind("share", "partition.max.record.locks", 100),
    "share.auto.offset.reset": GroupConfigDef(STRING, default="latest"),
    "share.isolation.level": GroupConfigDef(STRING, default="read_uncommitted",
                                            choices=("read_committed", "read_uncommitted")),
    "share.renew.acknowledge.enable": GroupConfigDef(BOOLEAN, default="true"),
    "share.assignment.interval.ms": _kind("share", "assignment.interval.ms", 0,
                                          bounds_if_set=True),
    "streams.session.timeout.ms": _kind("streams", "session.timeout.ms", 1),
    "streams.heartbeat.interval.ms": _kind("streams", "heartbeat.interval.ms", 1),
    "streams.num.standby.replicas": GroupConfigDef(
        INT, broker="group.streams.num.standby.replicas", at_least=0,
        bounds=(None, "group.streams.max.standby.replicas")),
    "streams.initial.rebalance.delay.ms": GroupConfigDef(
        INT, broker="group.streams.initial.rebalance.delay.ms", at_least=0),
    "streams.assignment.interval.ms": _kind("streams", "assignment.interval.ms", 0,
                                            bounds_if_set=True),
}

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$",
                       re.IGNORECASE)   # Java's Duration.parse takes either case


def reset_duration_ms(value: str) -> int | None:
    """The milliseconds of ``by_duration:<ISO-8601 duration>`` (None for another strategy)."""
    v = value.strip()
    if not v.lower().startswith("by_duration:"):
        return None
    match = _DURATION.match(v[len("by_duration:"):])
    if match is None:
        return None
    days, hours, minutes, seconds = match.groups()
    return int(((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000
               + float(seconds or 0) * 1000)


class GroupConfigError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _invalid(name: str, value, reason: str) -> GroupConfigError:
    return GroupConfigError(E.INVALID_CONFIG,
                            f"Invalid value {value} for configuration {name}: {reason}")


def valid_reset(value: str) -> bool:
    """Kafka's ShareGroupAutoOffsetResetStrategy: earliest, latest or by_duration:<ISO-8601>."""
    v = value.strip().lower()
    if v in ("earliest", "latest"):
        return True
    if v.startswith("by_duration:"):
        duration = value.strip()[len("by_duration:"):]
        return duration.upper() not in ("", "P", "PT") and bool(_DURATION.match(duration))
    return False


class GroupConfigs:
    """Every group's own configs; ``broker_config`` (a mapping by Kafka's names) gives the
    defaults and bounds."""

    def __init__(self, broker_config, data_dir: str | None = None) -> None:
        self.broker_config = broker_config
        self.path = os.path.join(data_dir, CONFIG_FILE) if data_dir else None
        self.configs: dict[str, dict[str, str]] = {}
        #: called with the group id after its configs changed
        self.on_change: Callable[[str], None] | None = None
        self._load()

    def broker_setting(self, name: str):
        return self.broker_config[name]

    def default(self, name: str) -> str:
        d = GROUP_CONFIGS[name]
        if d.broker is not None:
            return str(self.broker_setting(d.broker))
        return d.default

    def get(self, group_id: str) -> dict[str, str]:
        """The configs the group set (nothing for its defaults)."""
        return self.configs.get(group_id, {})

    def value(self, group_id: str, name: str) -> str:
        return self.get(group_id).get(name, self.default(name))

    # ------------------------------------------------------------------ validation
    def _parse(self, name: str, value: str):
        d = GROUP_CONFIGS[name]
        text = value.strip() if isinstance(value, str) else value
        if d.type in (INT, BOOLEAN):
            problem = type_problem(_CONFIG_TYPES[d.type], str(text))
            if problem is not None:
                raise _invalid(name, value, problem)
        if d.type == INT:
            number = int(text)
            if d.at_least is not None and number < d.at_least:
                raise _invalid(name, value, f"Value must be at least {d.at_least}")
            return number
        if d.type == BOOLEAN:
            return str(text).lower() == "true"
        if d.choices and text not in d.choices:
            raise _invalid(name, value, "String must be one of: " + ", ".join(d.choices))
        if name == "share.auto.offset.reset" and not valid_reset(str(text)):
            raise _invalid(name, value, f"Invalid value `{text}` for configuration {name}. The "
                           "value must be either 'earliest', 'latest' or of the format "
                           "'by_duration:<PnDTnHnMn.nS>'.")
        return text

    def validate(self, group_id: str, changes: dict[str, str | None]) -> dict[str, str]:
        """The group's configs after ``changes`` (None: back to the default), validated as
        Kafka's GroupConfig.validate does; raises GroupConfigError."""
        if not group_id:
            raise GroupConfigError(E.INVALID_REQUEST, "Default group resources are not allowed.")
        for name in changes:
            if name not in GROUP_CONFIGS:
                raise GroupConfigError(E.INVALID_CONFIG, f"Unknown group config name: {name}")
        explicit = {**self.get(group_id)}
        for name, value in changes.items():
            if value is None:
                explicit.pop(name, None)
            else:
                explicit[name] = value
        values = {name: self._parse(name, explicit.get(name, self.default(name)))
                  for name in GROUP_CONFIGS}
        for name, d in GROUP_CONFIGS.items():
            if d.bounds_if_set and name not in explicit:
                continue
            low, high = d.bounds
            if low is not None and values[name] < int(self.broker_setting(low)):
                raise GroupConfigError(E.INVALID_CONFIG,
                                       f"{name} must be greater than or equal to {low}")
            if high is not None and values[name] > int(self.broker_setting(high)):
                raise GroupConfigError(E.INVALID_CONFIG,
                                       f"{name} must be less than or equal to {high}")
        for kind in ("consumer", "share", "streams"):
            if values[f"{kind}.session.timeout.ms"] <= values[f"{kind}.heartbeat.interval.ms"]:
                raise GroupConfigError(E.INVALID_CONFIG, f"{kind}.session.timeout.ms must be "
                                       f"greater than {kind}.heartbeat.interval.ms")
        return explicit

    def alter(self, group_id: str, changes: dict[str, str | None], replace: bool = False,
              validate_only: bool = False) -> None:
        """Apply ``changes`` (``replace``: AlterConfigs, every config not named goes back to
        its default)."""
        if replace:
            changes = {**{name: None for name in self.get(group_id)}, **changes}
        explicit = self.validate(group_id, changes)
        if validate_only:
            return
        if explicit:
            self.configs[group_id] = {k: str(v).strip() for k, v in explicit.items()}
        else:
            self.configs.pop(group_id, None)
        self._save()
        if self.on_change is not None:
            self.on_change(group_id)

    # ------------------------------------------------------------------ describe
    def describe(self, group_id: str, keys=None) -> list[tuple]:
        """[(name, value, source, type, synonyms)] with Kafka's config sources: 8 for the
        group's own, 4 for a broker setting given at start, 5 for a default; synonyms as
        (name, value, source), the group's own first."""
        out = []
        own = self.get(group_id)
        for name, d in GROUP_CONFIGS.items():
            if keys is not None and name not in keys:
                continue
            synonyms = []
            if name in own:
                synonyms.append((name, own[name], 8))
            if d.broker is not None:
                value = self.broker_setting(d.broker)
                default = self._broker_default(d.broker)
                if str(value) != str(default):
                    synonyms.append((d.broker, str(value), 4))
                synonyms.append((d.broker, str(default), 5))
            else:
                synonyms.append((name, d.default, 5))
            value, source = synonyms[0][1], synonyms[0][2]
            out.append((name, value, source, d.type, synonyms))
        return out

    @staticmethod
    def _broker_default(name: str):
        """Kafka's default of a group.* broker setting, as broker_configs.py describes broker
        configs: where this broker's default differs (a shorter heartbeat interval, no
        assignment interval) its value shows as a static broker config over Kafka's default,
        what Kafka shows when its server.properties sets the same value."""
        return kafka_default(name)

    # ------------------------------------------------------------------ storage
    def _save(self) -> None:
        if self.path is None:
            return
        write_json(self.path, self.configs, indent=1, sort_keys=True)

    def _load(self) -> None:
        if self.path is None or not os.path.exists(self.path):
            return
        with open(self.path) as f:
            data = json.load(f)
        self.configs = {str(g): {str(k): str(v) for k, v in c.items() if k in GROUP_CONFIGS}
                        for g, c in data.items() if isinstance(c, dict)}
