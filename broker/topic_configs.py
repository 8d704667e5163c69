"""Topic configs as Kafka 4.3 serves them (its LogConfig): each config's type, its default and
the broker setting that default follows (the synonym DescribeConfigs names), where a value
comes from, and the checks on a new value.

A topic's value is its own (DYNAMIC_TOPIC_CONFIG) or else the broker's: the broker setting
when this broker's configuration sets it (STATIC_BROKER_CONFIG), else Kafka's default
(DEFAULT_CONFIG). ``min.insync.replicas`` differs: Kafka 4.3's controller writes a cluster-wide
record of it at its first start (KIP-966), so its value comes from a
DYNAMIC_DEFAULT_BROKER_CONFIG even on a fresh cluster.
"""
from __future__ import annotations

from typing import NamedTuple

#: Kafka's ConfigEntry types (DescribeConfigs v3+)
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(1, 10)
TYPE_NAMES = {BOOLEAN: "BOOLEAN", STRING: "STRING", INT: "INT", SHORT: "SHORT", LONG: "LONG",
              DOUBLE: "DOUBLE", LIST: "LIST", CLASS: "CLASS", PASSWORD: "PASSWORD"}
#: Kafka's ConfigSource values
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5

LONG_MAX = 9223372036854775807
INT_MAX = 2147483647
MIN_INSYNC_REPLICAS = "min.insync.replicas"


class TopicConfigDef(NamedTuple):
    type: int
    #: Kafka's default (the broker setting's when it has one)
    default: str
    #: the broker setting the default follows: DescribeConfigs' synonym; None for none
    setting: str | None = None
    #: whether DescribeConfigs names the setting at its default: Kafka does not where the
    #: setting has no default of its own (log.retention.ms: the default comes from
    #: log.retention.hours)
    listed: bool = True


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    "cleanup.policy": TopicConfigDef(LIST, "delete", "log.cleanup.policy"),
    "compression.gzip.level": TopicConfigDef(INT, "-1", "compression.gzip.level"),
    "compression.lz4.level": TopicConfigDef(INT, "9", "compression.lz4.level"),
    "compression.type": TopicConfigDef(STRING, "producer", "compression.type"),
    "compression.zstd.level": TopicConfigDef(INT, "3", "compression.zstd.level"),
    "delete.retention.ms": TopicConfigDef(LONG, "86400000", "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": TopicConfigDef(LONG, "60000", "log.segment.delete.delay.ms"),
    "flush.messages": TopicConfigDef(LONG, str(LONG_MAX), "log.flush.interval.messages"),
    "flush.ms": TopicConfigDef(LONG, str(LONG_MAX), "log.flush.interval.ms", listed=False),
    "follower.replication.throttled.replicas": TopicConfigDef(LIST, ""),
    "index.interval.bytes": TopicConfigDef(INT, "4096", "log.index.interval.bytes"),
    "leader.replication.throttled.replicas": TopicConfigDef(LIST, ""),
    "local.retention.bytes": TopicConfigDef(LONG, "-2", "log.local.retention.bytes"),
    "local.retention.ms": TopicConfigDef(LONG, "-2", "log.local.retention.ms"),
    "max.compaction.lag.ms": TopicConfigDef(LONG, str(LONG_MAX),
                                            "log.cleaner.max.compaction.lag.ms"),
    "max.message.bytes": TopicConfigDef(INT, "1048588", "message.max.bytes"),
    "message.timestamp.after.max.ms": TopicConfigDef(LONG, "3600000",
                                                     "log.message.timestamp.after.max.ms"),
    "message.timestamp.before.max.ms": TopicConfigDef(LONG, str(LONG_MAX),
                                                      "log.message.timestamp.before.max.ms"),
    "message.timestamp.type": TopicConfigDef(STRING, "CreateTime", "log.message.timestamp.type"),
    "min.cleanable.dirty.ratio": TopicConfigDef(DOUBLE, "0.5",
                                                "log.cleaner.min.cleanable.ratio"),
    "min.compaction.lag.ms": TopicConfigDef(LONG, "0", "log.cleaner.min.compaction.lag.ms"),
    MIN_INSYNC_REPLICAS: TopicConfigDef(INT, "1", MIN_INSYNC_REPLICAS),
    "preallocate": TopicConfigDef(BOOLEAN, "false", "log.preallocate"),
    "remote.log.copy.disable": TopicConfigDef(BOOLEAN, "false"),
    "remote.log.delete.on.disable": TopicConfigDef(BOOLEAN, "false"),
    "remote.storage.enable": TopicConfigDef(BOOLEAN, "false"),
    "retention.bytes": TopicConfigDef(LONG, "-1", "log.retention.bytes"),
    "retention.ms": TopicConfigDef(LONG, "604800000", "log.retention.ms", listed=False),
    "segment.bytes": TopicConfigDef(INT, "1073741824", "log.segment.bytes"),
    "segment.index.bytes": TopicConfigDef(INT, "10485760", "log.index.size.max.bytes"),
    "segment.jitter.ms": TopicConfigDef(LONG, "0", "log.roll.jitter.ms", listed=False),
    "segment.ms": TopicConfigDef(LONG, "604800000", "log.roll.ms", listed=False),
    "unclean.leader.election.enable": TopicConfigDef(BOOLEAN, "false",
                                                     "unclean.leader.election.enable"),
}


class Synonym(NamedTuple):
    name: str
    value: str
    source: int


class BrokerDefaults:
    """What a topic without its own value gets from this broker: per config, the value and its
    source, and the synonyms DescribeConfigs lists below the topic's own value."""

    def __init__(self, broker_config) -> None:
        self.values: dict[str, str] = {}
        self.sources: dict[str, int] = {}
        self.synonyms: dict[str, list[Synonym]] = {}
        for name, spec in TOPIC_CONFIGS.items():
            synonyms = []
            static = _static_value(broker_config, spec.setting)
            if name == MIN_INSYNC_REPLICAS:
                # the cluster-wide record Kafka's controller writes at its first start
                dynamic = static if static is not None else spec.default
                synonyms.append(Synonym(spec.setting, dynamic, DYNAMIC_DEFAULT_BROKER_CONFIG))
            if static is not None:
                synonyms.append(Synonym(spec.setting, static, STATIC_BROKER_CONFIG))
            if spec.setting is not None and spec.listed:
                synonyms.append(Synonym(spec.setting, spec.default, DEFAULT_CONFIG))
            first = synonyms[0] if synonyms else None
            self.values[name] = first.value if first is not None else spec.default
            self.sources[name] = first.source if first is not None else DEFAULT_CONFIG
            self.synonyms[name] = synonyms

    def value(self, name: str) -> str:
        return self.values[name]


def _static_value(broker_config, setting: str | None) -> str | None:
    """The broker setting's value as text where this broker's configuration sets it away from
    Kafka's default; None where it is not set or not a setting of this broker."""
    if setting is None:
        return None
    from .config import SETTINGS  # the settings table; config.py does not import this module
    spec = SETTINGS.get(setting)
    if spec is None:
        return None
    value = broker_config[setting]
    if value == spec.default:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if setting == "log.flush.interval.ms" and value < 0:
        return None  # -1 here means Kafka's null: never
    return str(value)


def validate_topic_config(name: str, value: str | None) -> str | None:
    """Why ``value`` cannot be ``name``'s value (Kafka's message), or None."""
    spec = TOPIC_CONFIGS[name]
    text = "" if value is None else str(value).strip()
    if spec.type in (INT, LONG):
        try:
            number = int(text)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type " \
                   f"{TYPE_NAMES[spec.type]}"
        bound = INT_MAX if spec.type == INT else LONG_MAX
        if not -bound - 1 <= number <= bound:
            return f"Invalid value {value} for configuration {name}: Not a number of type " \
                   f"{TYPE_NAMES[spec.type]}"
    elif spec.type == DOUBLE:
        try:
            ratio = float(text)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type DOUBLE"
        if name == "min.cleanable.dirty.ratio" and not 0 <= ratio <= 1:
            return f"Invalid value {value} for configuration {name}: Value must be between 0 and 1"
    elif spec.type == BOOLEAN:
        if text.lower() not in ("true", "false"):
            return f"Invalid value {value} for configuration {name}: Expected value to be " \
                   "either true or false"
    if name == "message.timestamp.type" and value not in ("CreateTime", "LogAppendTime"):
        return f"Invalid value {value} for configuration {name}"
    if name == "cleanup.policy" and not {v.strip() for v in text.split(",") if v.strip()} <= {
            "delete", "compact"}:
        return f"Invalid value {value} for configuration {name}"
    return None
