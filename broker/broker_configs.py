"""Broker configs as Kafka 4.3 describes and alters them: Kafka's catalogue of broker configs
(broker/kafka_broker_configs.json, written by tools/gen_broker_configs.py from a real Kafka),
this broker's static values, and the dynamic ones set at runtime with IncrementalAlterConfigs or
AlterConfigs, for this broker (entity "<node id>", DYNAMIC_BROKER_CONFIG) or cluster-wide
(entity "", DYNAMIC_DEFAULT_BROKER_CONFIG), kept in ``<data-dir>/broker-configs.json``.

A config's value is the first of: this broker's dynamic value, the cluster-wide one, this
broker's configuration (STATIC_BROKER_CONFIG, where it sets a Kafka config away from Kafka's
default), Kafka's default. The dynamic values of the settings topics take their defaults from
(log.retention.ms, log.segment.bytes, message.max.bytes, ...) apply to every topic at once, as
on Kafka; the others are kept and described, and this broker's behaviour does not change.
kbroker's own settings (console.enable, metrics.port, ...) are not Kafka configs and are not
listed.
"""
from __future__ import annotations

import json
import os
from typing import NamedTuple

from .config import SETTINGS, kafka_configs
from .log.files import write_json
from .topic_configs import (DEFAULT_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
                            LIST, STATIC_BROKER_CONFIG, type_problem)

FILE_NAME = "broker-configs.json"
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
INVALID_REQUEST, INVALID_CONFIG = 42, 40
UNKNOWN_TYPE = 0
MIN_INSYNC_REPLICAS = "min.insync.replicas"

#: where a config's own default is null, the setting Kafka derives it from: named as its
#: DEFAULT_CONFIG synonym beside any value set for the config
FALLBACK_SYNONYMS = {
    "log.retention.ms": ("log.retention.hours", "168"),
    "log.roll.ms": ("log.roll.hours", "168"),
    "log.roll.jitter.ms": ("log.roll.jitter.hours", "0"),
    "log.flush.interval.ms": ("log.flush.scheduler.interval.ms", "9223372036854775807"),
}
#: configs a Kafka node always sets (node.id is required; broker.id follows it)
NODE_ID_CONFIGS = ("node.id", "broker.id")


class ConfigSpec(NamedTuple):
    type: int
    read_only: bool
    sensitive: bool
    default: str | None


#: how a name Kafka does not know is described (Kafka keeps and lists it all the same)
UNKNOWN_SPEC = ConfigSpec(UNKNOWN_TYPE, True, False, None)


class BrokerConfigError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Entry(NamedTuple):
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    type: int
    #: (name, value, source), most specific first
    synonyms: list


_catalogue: dict[str, ConfigSpec] | None = None


def catalogue() -> dict[str, ConfigSpec]:
    global _catalogue
    if _catalogue is None:
        _catalogue = {name: ConfigSpec(*row) for name, row in kafka_configs().items()}
    return _catalogue


def _text(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (tuple, list)):
        return ",".join(str(v) for v in value)
    return str(value)


def static_value(broker_config, name: str) -> str | None:
    """This broker's configuration of Kafka config ``name``, where it sets one: a value away
    from both its own default and Kafka's, or a default of its own where Kafka's is not null
    (kbroker's -1 or 604800000 where Kafka says null are the same behaviour)."""
    if name in NODE_ID_CONFIGS:
        return str(broker_config["node.id"])
    if name in broker_config.kafka_only:
        return broker_config.kafka_only[name]
    setting = SETTINGS.get(name)
    spec = catalogue().get(name)
    if setting is None or spec is None:
        return None
    value = _text(broker_config[name])
    if value is None or value == spec.default:
        return None
    if value == _text(setting.default) and spec.default is None:
        return None
    return value


class BrokerConfigs:
    """This broker's configs: Kafka's catalogue, the static values of its configuration and the
    dynamic ones (``per_broker``, ``cluster``)."""

    def __init__(self, broker_config, node_id: int, data_dir: str | None) -> None:
        self.config = broker_config
        self.node_id = node_id
        self.path = os.path.join(data_dir, FILE_NAME) if data_dir else None
        self.per_broker: dict[str, str] = {}
        #: Kafka 4.3's controller writes min.insync.replicas cluster-wide at its first start
        #: (KIP-966), from its static configuration
        self.cluster: dict[str, str] = {
            MIN_INSYNC_REPLICAS: static_value(broker_config, MIN_INSYNC_REPLICAS)
            or catalogue()[MIN_INSYNC_REPLICAS].default}
        #: called after every change (the topics' defaults follow)
        self.listeners: list = []
        self._load()

    # -- reading

    def synonyms(self, name: str) -> list[tuple[str, str | None, int]]:
        """Every value ``name`` has, most specific first, with the source of each, as
        DescribeConfigs lists them (Kafka's default only where it is not null, and a derived
        default's setting only beside another value)."""
        out = []
        if name in self.per_broker:
            out.append((name, self.per_broker[name], DYNAMIC_BROKER_CONFIG))
        if name in self.cluster:
            out.append((name, self.cluster[name], DYNAMIC_DEFAULT_BROKER_CONFIG))
        static = static_value(self.config, name)
        if static is not None:
            out.append((name, static, STATIC_BROKER_CONFIG))
        spec = catalogue().get(name)
        if spec is not None and spec.default is not None:
            out.append((name, spec.default, DEFAULT_CONFIG))
        elif out and name in FALLBACK_SYNONYMS:
            fallback, value = FALLBACK_SYNONYMS[name]
            out.append((fallback, value, DEFAULT_CONFIG))
        return out

    def entry(self, name: str) -> Entry:
        spec = catalogue().get(name)
        synonyms = self.synonyms(name)
        if spec is None:  # a name Kafka does not know, stored all the same (as Kafka does)
            return Entry(name, None, synonyms[0][2], UNKNOWN_SPEC.read_only,
                         UNKNOWN_SPEC.sensitive, UNKNOWN_SPEC.type,
                         [(n, None, s) for n, _, s in synonyms])
        value, source = (synonyms[0][1], synonyms[0][2]) if synonyms else (None, DEFAULT_CONFIG)
        if spec.sensitive:
            value = None
            synonyms = [(n, None, s) for n, _, s in synonyms]
        return Entry(name, value, source, spec.read_only, spec.sensitive, spec.type, synonyms)

    def describe(self, entity: str, keys) -> list[Entry]:
        """The entries of entity ``str(node_id)`` (every config) or ``""`` (the cluster-wide
        dynamic values only, as Kafka lists its default entity)."""
        if entity == "":
            out = []
            for n in sorted(n for n in self.cluster if keys is None or n in keys):
                spec = catalogue().get(n, UNKNOWN_SPEC)
                value = self.cluster[n]
                out.append(Entry(n, value, DYNAMIC_DEFAULT_BROKER_CONFIG, spec.read_only,
                                 spec.sensitive, spec.type,
                                 [(n, value, DYNAMIC_DEFAULT_BROKER_CONFIG)]))
            return out
        names = set(catalogue()) | set(self.per_broker) | set(self.cluster)
        if keys is not None:
            names &= set(keys)
        return [self.entry(n) for n in sorted(names)]

    # -- changes

    def check_entity(self, entity: str) -> None:
        if entity not in ("", str(self.node_id)):
            raise BrokerConfigError(INVALID_REQUEST, f"Unexpected broker id, expected "
                                    f"{self.node_id}, but received {entity}")

    def alter(self, entity: str, changes: list[tuple[str, int, str | None]], replace: bool,
              validate_only: bool) -> None:
        """Apply (name, operation, value) changes to the entity's dynamic values, all or none;
        ``replace`` (AlterConfigs): the entity's dynamic values become exactly these."""
        self.check_entity(entity)
        current = self.cluster if entity == "" else self.per_broker
        new = {} if replace else dict(current)
        if replace and entity == "" and MIN_INSYNC_REPLICAS in current:
            new[MIN_INSYNC_REPLICAS] = current[MIN_INSYNC_REPLICAS]
        refused = []
        seen = set()
        for name, op, value in changes:
            if name in seen:
                raise BrokerConfigError(INVALID_REQUEST, "Error due to duplicate config keys")
            seen.add(name)
            spec = catalogue().get(name)
            if spec is not None and spec.read_only:
                refused.append(name)
                continue
            if op == DELETE:
                new.pop(name, None)
                continue
            if spec is not None and spec.sensitive and op == SET:
                raise BrokerConfigError(
                    INVALID_REQUEST, "These security configs can be dynamically updated only "
                    f"per-listener using the listener prefix: [{name}]")
            if op in (APPEND, SUBTRACT):
                if spec is None or spec.type != LIST:
                    verb = "append" if op == APPEND else "subtract"
                    raise BrokerConfigError(INVALID_CONFIG, f"Config value {verb} is not "
                                            f"allowed for config key: {name}")
                have = self.entry(name).value or ""
                items = [v for v in have.split(",") if v]
                given = [v.strip() for v in (value or "").split(",") if v.strip()]
                if op == APPEND:
                    items += [v for v in given if v not in items]
                else:
                    items = [v for v in items if v not in given]
                value = ",".join(items)
            elif op != SET:
                raise BrokerConfigError(39, f"Unknown config operation {op}")  # UNKNOWN_SERVER_ERROR
            if spec is not None:
                check_value(name, spec, value)
            new[name] = value
        if refused:
            raise BrokerConfigError(INVALID_REQUEST, "Cannot update these configs "
                                    f"dynamically: [{', '.join(refused)}]")
        if validate_only:
            return
        current.clear()
        current.update(new)
        self._save()
        for listener in self.listeners:
            listener()

    # -- persistence

    def _load(self) -> None:
        if self.path is None or not os.path.exists(self.path):
            return
        with open(self.path) as f:
            doc = json.load(f)
        self.per_broker.update(doc.get("broker", {}))
        self.cluster.update(doc.get("cluster", {}))

    def _save(self) -> None:
        if self.path is None:
            return
        write_json(self.path, {"broker": self.per_broker, "cluster": self.cluster}, indent=1,
                   sort_keys=True)


def check_value(name: str, spec: ConfigSpec, value: str | None) -> None:
    """Kafka's type check of a new value (its message)."""
    problem = type_problem(spec.type, (value or "").strip())
    if problem is not None:
        raise BrokerConfigError(INVALID_REQUEST,
                                f"Invalid value {value} for configuration {name}: {problem}")
