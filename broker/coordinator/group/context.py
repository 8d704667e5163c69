"""What a group shard gives the managers of its group types and offsets (classic/manager.py,
consumer/manager.py, share/manager.py, offsets.py): its groups, clock, timer and purgatories,
settings and counters, topic metadata, whether it is loading, and the write path. Managers hold
this narrow context, never the shard, so the shard can hold them without an import loop and a
manager reaches nothing of the shard it is not given."""
from __future__ import annotations

from typing import Any, Callable

from ...purgatory import DelayedOperationPurgatory, Timer
from .group import GroupMetadata


class GroupContext:
    """One shard's context, made by the shard (shard.py), which keeps ``loading`` current,
    gives ``make_classic`` and sets ``consumer`` and ``streams`` once it made those managers
    (offsets and the migration between the protocols use them)."""

    __slots__ = ("partition", "config", "clock", "timer", "heartbeat_purgatory",
                 "rebalance_purgatory", "stats", "new_uuid", "topics", "groups", "loading",
                 "append", "maybe_drop_transient_group", "make_classic", "_classic", "consumer",
                 "streams", "group_config")

    def __init__(self, partition: int, config: Any, clock: Callable[[], int], timer: Timer,
                 heartbeat_purgatory: DelayedOperationPurgatory,
                 rebalance_purgatory: DelayedOperationPurgatory, stats: "Stats",
                 new_uuid: Callable[[], object], topics: Any, groups: dict,
                 append: Callable[..., None],
                 maybe_drop_transient_group: Callable[[GroupMetadata], None]) -> None:
        self.partition = partition
        self.config = config
        self.clock = clock
        self.timer = timer
        self.heartbeat_purgatory = heartbeat_purgatory
        self.rebalance_purgatory = rebalance_purgatory
        self.stats = stats
        self.new_uuid = new_uuid
        #: topic metadata for consumer groups: get(name), by_id(topic_id), names(), version()
        self.topics = topics
        #: the shard's group table: the same dict, never rebound
        self.groups = groups
        self.loading = False
        #: the write path, ``append(result, respond, error_response)``: persist and apply
        #: ``result.records``, then ``respond(result.response)`` (common/result.py)
        self.append = append
        #: forget a group that a join created and that holds nothing
        self.maybe_drop_transient_group = maybe_drop_transient_group
        #: makes the classic groups' manager at its first use (the shard's)
        self.make_classic: Callable[[], Any] | None = None
        self._classic: Any = None
        self.consumer: Any = None
        self.streams: Any = None
        #: ``group_config(group_id) -> mapping`` of a group's own configs (the GROUP config
        #: resource, group_configs.py), set by the coordinator; None: broker defaults only
        self.group_config: Callable[[str], Any] | None = None

    @property
    def classic(self) -> Any:
        """The classic groups' manager (classic/manager.py), made at its first use."""
        if self._classic is None:
            self._classic = self.make_classic()
        return self._classic

    def setting(self, group_id: str, name: str) -> int:
        """A group config of ``group_id`` (consumer.session.timeout.ms, share.*, streams.*):
        the group's own value, else the broker's group.<name> setting (Kafka's
        GroupConfigManager, read per group at each use)."""
        configs = self.group_config(group_id) if self.group_config is not None else None
        value = configs.get(name) if configs else None
        if value is None:
            return getattr(self.config, "group_" + name.replace(".", "_"))
        return int(value)


class Stats:
    """Counters the metrics layer reads (shared by every shard of a coordinator)."""

    def __init__(self) -> None:
        self.rebalances_total = 0           # join phases completed with members (new generations)
        self.rebalances_started_total = 0
        self.expired_members_total = 0      # removed on heartbeat/session expiry
        self.offsets_expired_total = 0
        self.consumer_group_rebalances_total = 0  # consumer-group epoch bumps
        self.share_group_rebalances_total = 0     # share-group epoch bumps
        self.streams_group_rebalances_total = 0   # streams-group epoch bumps
        #: called with the rebalance's duration in ms when a group becomes Stable (metrics)
        self.on_group_stable: Callable[[int], None] | None = None
        self._history = None

    @property
    def history(self):
        """Each group's recent rebalances, noted by the state machines (history.py), made at
        the first one."""
        if self._history is None:
            from .history import RebalanceHistory
            self._history = RebalanceHistory()
        return self._history

    def group_stable(self, group: GroupMetadata, now: int) -> None:
        started = group.rebalance_started_ms
        if self.on_group_stable is not None and started is not None and now >= started:
            self.on_group_stable(now - started)
