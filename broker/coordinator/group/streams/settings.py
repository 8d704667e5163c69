"""A streams group's own settings: its GROUP configs (streams.session.timeout.ms,
streams.heartbeat.interval.ms, streams.num.standby.replicas, streams.initial.rebalance.delay.ms,
streams.assignment.interval.ms, kept by group_configs.py), else the broker's group.streams.*
ones, read at each use as Kafka's GroupMetadataManager reads its GroupConfigManager."""
from __future__ import annotations

from ..context import GroupContext


def session_timeout_ms(context: GroupContext, group_id: str) -> int:
    return context.setting(group_id, "streams.session.timeout.ms")


def heartbeat_interval_ms(context: GroupContext, group_id: str) -> int:
    return context.setting(group_id, "streams.heartbeat.interval.ms")


def num_standby_replicas(context: GroupContext, group_id: str) -> int:
    return context.setting(group_id, "streams.num.standby.replicas")


def initial_rebalance_delay_ms(context: GroupContext, group_id: str) -> int:
    return context.setting(group_id, "streams.initial.rebalance.delay.ms")


def assignment_interval_ms(context: GroupContext, group_id: str) -> int:
    return context.setting(group_id, "streams.assignment.interval.ms")


def assignment_configs(context: GroupContext, group_id: str) -> dict:
    """The assignor's configs, stored with the group epoch (Kafka's lastAssignmentConfigs): a
    change starts a new assignment."""
    return {"num.standby.replicas": str(num_standby_replicas(context, group_id))}
