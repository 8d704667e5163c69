"""A consumer group's own settings: its GROUP configs (consumer.session.timeout.ms,
consumer.heartbeat.interval.ms, consumer.assignment.interval.ms, set with
IncrementalAlterConfigs and kept by group_configs.py), else the broker's group.consumer.* ones,
read at each use as Kafka's GroupMetadataManager reads its GroupConfigManager."""
from __future__ import annotations

from ..context import GroupContext


def session_timeout_ms(context: GroupContext, group_id: str) -> int:
    return context.setting(group_id, "consumer.session.timeout.ms")


def heartbeat_interval_ms(context: GroupContext, group_id: str) -> int:
    return context.setting(group_id, "consumer.heartbeat.interval.ms")


def assignment_interval_ms(context: GroupContext, group_id: str) -> int:
    return context.setting(group_id, "consumer.assignment.interval.ms")
