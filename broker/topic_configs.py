"""Topic configs as Kafka 4.3 serves them (its LogConfig): each config's type, its default and
the broker setting that default follows (the synonym DescribeConfigs names), where a value
comes from, and the checks on a new value.

A topic's value is its own (DYNAMIC_TOPIC_CONFIG) or else the broker's (broker/
broker_configs.py): a dynamic value of the broker setting, for this broker or cluster-wide, this
broker's configuration (STATIC_BROKER_CONFIG), or Kafka's default (DEFAULT_CONFIG).
``min.insync.replicas`` always has a cluster-wide value: Kafka 4.3's controller writes one at
its first start (KIP-966).
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
    #: Kafka's default where no broker setting gives one
    default: str
    #: the broker config the default follows (DescribeConfigs' synonym); None for none
    setting: str | None = None


TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    "cleanup.policy": TopicConfigDef(LIST, "delete", "log.cleanup.policy"),
    "compression.gzip.level": TopicConfigDef(INT, "-1", "compression.gzip.level"),
    "compression.lz4.level": TopicConfigDef(INT, "9", "compression.lz4.level"),
    "compression.type": TopicConfigDef(STRING, "producer", "compression.type"),
    "compression.zstd.level": TopicConfigDef(INT, "3", "compression.zstd.level"),
    "delete.retention.ms": TopicConfigDef(LONG, "86400000", "log.cleaner.delete.retention.ms"),
    "file.delete.delay.ms": TopicConfigDef(LONG, "60000", "log.segment.delete.delay.ms"),
    "flush.messages": TopicConfigDef(LONG, str(LONG_MAX), "log.flush.interval.messages"),
    "flush.ms": TopicConfigDef(LONG, str(LONG_MAX), "log.flush.interval.ms"),
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
    "retention.ms": TopicConfigDef(LONG, "604800000", "log.retention.ms"),
    "segment.bytes": TopicConfigDef(INT, "1073741824", "log.segment.bytes"),
    "segment.index.bytes": TopicConfigDef(INT, "10485760", "log.index.size.max.bytes"),
    "segment.jitter.ms": TopicConfigDef(LONG, "0", "log.roll.jitter.ms"),
    "segment.ms": TopicConfigDef(LONG, "604800000", "log.roll.ms"),
    "unclean.leader.election.enable": TopicConfigDef(BOOLEAN, "false",
                                                     "unclean.leader.election.enable"),
}


class BrokerDefaults:
    """What a topic without its own value of a config gets from the broker (broker/
    broker_configs.py: dynamic, static or Kafka's default), and the synonyms DescribeConfigs
    lists below the topic's own value."""

    def __init__(self, broker_configs) -> None:
        self.values: dict[str, str] = {}
        self.sources: dict[str, int] = {}
        self.synonyms: dict[str, list[tuple[str, str | None, int]]] = {}
        for name, spec in TOPIC_CONFIGS.items():
            synonyms = broker_configs.synonyms(spec.setting) if spec.setting else []
            self.synonyms[name] = synonyms
            if synonyms:
                self.values[name], self.sources[name] = synonyms[0][1], synonyms[0][2]
            else:
                self.values[name], self.sources[name] = spec.default, DEFAULT_CONFIG

    def value(self, name: str) -> str:
        return self.values[name]


#: the largest value of each integer type, as Java parses it
_INT_BOUNDS = {SHORT: 32767, INT: INT_MAX, LONG: LONG_MAX}


def type_problem(config_type: int, text: str) -> str | None:
    """Why ``text`` does not parse as a config of ``config_type``, in Kafka's ConfigDef words
    ("Not a number of type INT"), or None. Shared by topic, broker and group configs' checks."""
    if config_type in _INT_BOUNDS:
        bound = _INT_BOUNDS[config_type]
        try:
            number = int(text)
        except ValueError:
            number = None
        if number is None or not -bound - 1 <= number <= bound:
            return f"Not a number of type {TYPE_NAMES[config_type]}"
    elif config_type == DOUBLE:
        try:
            float(text)
        except ValueError:
            return "Not a number of type DOUBLE"
    elif config_type == BOOLEAN and text.lower() not in ("true", "false"):
        return "Expected value to be either true or false"
    return None


def validate_topic_config(name: str, value: str | None) -> str | None:
    """Why ``value`` cannot be ``name``'s value (Kafka's message), or None."""
    spec = TOPIC_CONFIGS[name]
    text = "" if value is None else str(value).strip()
    problem = type_problem(spec.type, text)
    if problem is not None:
        return f"Invalid value {value} for configuration {name}: {problem}"
    if name == "min.cleanable.dirty.ratio" and not 0 <= float(text) <= 1:
        return f"Invalid value {value} for configuration {name}: Value must be between 0 and 1"
    if name == "message.timestamp.type" and value not in ("CreateTime", "LogAppendTime"):
        return f"Invalid value {value} for configuration {name}"
    if name == "cleanup.policy" and not {v.strip() for v in text.split(",") if v.strip()} <= {
            "delete", "compact"}:
        return f"Invalid value {value} for configuration {name}"
    return None
