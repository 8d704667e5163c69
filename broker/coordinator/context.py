"""What a group shard gives the managers of its group types and offsets (classic/manager.py,
consumer/manager.py, offsets.py): its groups, clock, timer and purgatories, settings and
counters, and the write path. Managers depend on this narrow view, not on the shard, so the
shard can hold them without an import loop."""
from __future__ import annotations

from typing import Any, Callable, Protocol

from ..purgatory import DelayedOperationPurgatory, Timer
from .group import GroupMetadata
from .history import RebalanceHistory


class GroupContext(Protocol):
    """The shard as its managers see it (GroupCoordinatorShard implements it)."""

    partition: int
    config: Any
    clock: Callable[[], int]
    timer: Timer
    heartbeat_purgatory: DelayedOperationPurgatory
    rebalance_purgatory: DelayedOperationPurgatory
    stats: "Stats"
    new_uuid: Callable[[], object]
    #: topic metadata for consumer groups: get(name), by_id(topic_id), names(), version()
    topics: Any
    groups: dict
    loading: bool
    #: the group types' managers: offsets and the migration between protocols use both
    classic: Any
    consumer: Any

    def write(self, records: list, done: Callable) -> None:
        """Persist records; ``done(exc)`` once stored (they are applied first)."""

    def maybe_drop_transient_group(self, group: GroupMetadata) -> None:
        """Forget a group that a join created and that holds nothing."""


class Stats:
    """Counters the metrics layer reads (shared by every shard of a coordinator)."""

    def __init__(self) -> None:
        self.rebalances_total = 0           # join phases completed with members (new generations)
        self.rebalances_started_total = 0
        self.expired_members_total = 0      # removed on heartbeat/session expiry
        self.removed_members_total = 0      # removed for any reason (left, expired, missed sync)
        self.offset_commits_total = 0
        self.offsets_expired_total = 0
        self.groups_deleted_total = 0
        self.consumer_group_rebalances_total = 0  # consumer-group epoch bumps
        self.share_group_rebalances_total = 0     # share-group epoch bumps
        self.streams_group_rebalances_total = 0   # streams-group epoch bumps
        #: called with the rebalance's duration in ms when a group becomes Stable (metrics)
        self.on_group_stable: Callable[[int], None] | None = None
        #: each group's recent rebalances, noted by the state machines (history.py)
        self.history = RebalanceHistory()

    def group_stable(self, group: GroupMetadata, now: int) -> None:
        started = group.rebalance_started_ms
        if self.on_group_stable is not None and started is not None and now >= started:
            self.on_group_stable(now - started)
