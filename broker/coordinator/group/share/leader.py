"""The share partitions this broker leads and the share sessions of their consumers (Kafka's
SharePartitionManager), sans-I/O: the ShareFetch and ShareAcknowledge handlers
(broker/apis/share_fetch.py, share_acknowledge.py) read the logs and call in here.

Each share partition (group, topic id, partition) is created at the first ShareFetch that names
it and starts where the group's ``share.auto.offset.reset`` says (latest by default). Its
acquisition locks are one keyed timer entry per share partition (common/timer.py), due at
its earliest lock; records a lock expiry or a release makes available again wake the parked
ShareFetches of that partition (``on_available``). The group coordinator tells this object
when a group is deleted (ShareGroupListener); a member's leaving is not its business: its
session ends at epoch -1 or with its connection.
"""
from __future__ import annotations

import uuid
from typing import Callable

import structlog

from ...common.timer import CoordinatorTimer
from ..group_configs import reset_duration_ms
from .group import ShareGroupListener
from .partition import SharePartition
from .sessions import ShareSessionCache

log = structlog.get_logger("broker.share")

#: the group configs (GROUP resource) a share partition reads, and the broker settings that
#: give their defaults
GROUP_SETTINGS = {
    "share.record.lock.duration.ms": "group.share.record.lock.duration.ms",
    "share.delivery.count.limit": "group.share.delivery.count.limit",
    "share.partition.max.record.locks": "group.share.partition.max.record.locks",
}


class ShareLeader(ShareGroupListener):
    def __init__(self, config, clock: Callable[[], int], timer) -> None:
        self.config = config
        self.clock = clock
        self.timer = CoordinatorTimer(timer)
        self.sessions = ShareSessionCache(int(config["group.share.max.share.sessions"]))
        #: group id -> {(topic id, partition): SharePartition}
        self.groups: dict[str, dict[tuple, SharePartition]] = {}
        #: records acknowledged, by type name (accept, release, reject, gap, renew): metrics
        self.acknowledged: dict[str, int] = {}
        #: ``group_config(group_id) -> mapping`` of the group's own configs; None: defaults
        self.group_config: Callable[[str], dict] | None = None
        #: ``on_available(topic_id, partition)``: records became acquirable again
        self.on_available: Callable[[uuid.UUID, int], None] | None = None
        #: ``persist(group_id, key, share partition or None)``: store the share partition's
        #: state (None: it is gone), as Kafka's share coordinator does; None: in memory only
        self.persist: Callable | None = None
        #: ``load_state(group_id, key) -> (start offset, batches) | None``: the stored state of
        #: a share partition not held yet (broker/coordinator/share_state/persister.py)
        self.load_state: Callable | None = None

    # ------------------------------------------------------------------ settings
    def setting(self, group_id: str, name: str):
        """A group config's value: the group's own, else the broker's default."""
        configs = self.group_config(group_id) if self.group_config is not None else None
        if configs and configs.get(name) is not None:
            return configs[name]
        broker_name = GROUP_SETTINGS.get(name)
        if broker_name is not None:
            return self.config[broker_name]
        return {"share.auto.offset.reset": "latest",
                "share.isolation.level": "read_uncommitted"}.get(name)

    def lock_duration_ms(self, group_id: str) -> int:
        return int(self.setting(group_id, "share.record.lock.duration.ms"))

    def read_committed(self, group_id: str) -> bool:
        return str(self.setting(group_id, "share.isolation.level")).lower() == "read_committed"

    # ------------------------------------------------------------------ share partitions
    def get(self, group_id: str, key: tuple) -> SharePartition | None:
        return self.groups.get(group_id, {}).get(key)

    def partition(self, group_id: str, key: tuple, log_start: int, log_end: int,
                  offset_for_timestamp: Callable | None = None) -> SharePartition:
        """The share partition, created and initialized by share.auto.offset.reset when new
        (earliest, latest, or by_duration: the first record no older than the duration, with
        ``offset_for_timestamp(ts) -> (offset, ts) | None``); its limits follow the group's
        configs as they are now."""
        sp = self.groups.get(group_id, {}).get(key)
        stored = None
        if sp is None and self.load_state is not None:
            stored = self.load_state(group_id, key)
        if stored is not None:
            sp = self.groups.setdefault(group_id, {})[key] = SharePartition()
            sp.restore(*stored)
        if sp is None:
            sp = SharePartition()
            reset = str(self.setting(group_id, "share.auto.offset.reset")).lower()
            start = log_start if reset == "earliest" else log_end
            duration = reset_duration_ms(reset)
            if duration is not None and offset_for_timestamp is not None:
                found = offset_for_timestamp(self.clock() - duration)
                start = found[0] if found is not None else log_end
            sp.initialize(start)
            self.groups.setdefault(group_id, {})[key] = sp
            log.debug("share partition initialized", group=group_id, topic_id=str(key[0]),
                      partition=key[1], start_offset=sp.start_offset, reset=reset)
            self._store(group_id, key)
        sp.lock_duration_ms = self.lock_duration_ms(group_id)
        sp.delivery_count_limit = int(self.setting(group_id, "share.delivery.count.limit"))
        sp.max_in_flight = int(self.setting(group_id, "share.partition.max.record.locks"))
        return sp

    def restore(self, group_id: str, key: tuple, start_offset: int, batches) -> None:
        """A share partition as its stored state left it (at start)."""
        sp = self.groups.setdefault(group_id, {}).get(key)
        if sp is None:
            sp = self.groups[group_id][key] = SharePartition()
        sp.restore(start_offset, batches)

    def forget(self, group_id: str, key: tuple) -> None:
        """A stored share partition's tombstone (at start)."""
        partitions = self.groups.get(group_id, {})
        partitions.pop(key, None)
        if not partitions:
            self.groups.pop(group_id, None)

    def reload(self, group_id: str, key: tuple) -> None:
        """Its stored state changed under it: the share partition is read again at its next
        fetch (what it had acquired is delivered again)."""
        self.timer.cancel(("locks", group_id, key))
        self.forget(group_id, key)

    def _store(self, group_id: str, key: tuple) -> None:
        if self.persist is not None:
            self.persist(group_id, key, self.get(group_id, key))

    def reset(self, group_id: str, key: tuple, start_offset: int) -> None:
        """AlterShareGroupOffsets: the share partition starts again at ``start_offset``, with
        nothing in flight."""
        sp = self.groups.get(group_id, {}).get(key)
        if sp is None:
            sp = self.groups.setdefault(group_id, {})[key] = SharePartition()
        sp.initialize(start_offset)
        self.locks_changed(group_id, key)
        self._store(group_id, key)

    def drop_topic(self, group_id: str, topic_id) -> bool:
        """DeleteShareGroupOffsets: forget the group's share partitions of a topic."""
        partitions = self.groups.get(group_id, {})
        keys = [key for key in partitions if key[0] == topic_id]
        for key in list(keys):  # releasing wakes fetches, which may change what ``keys`` is
            del partitions[key]
            self.timer.cancel(("locks", group_id, key))
            self._store(group_id, key)
        return bool(keys)

    def drop_topic_everywhere(self, topic_id) -> None:
        """A deleted topic: every share group's share partitions of it go."""
        for group_id in list(self.groups):
            self.drop_topic(group_id, topic_id)
            if not self.groups.get(group_id):
                self.groups.pop(group_id, None)

    def locks_changed(self, group_id: str, key: tuple) -> None:
        """After an acquisition, acknowledgement or release: the partition's timer entry is
        due at its earliest lock again."""
        sp = self.get(group_id, key)
        deadline = None if sp is None else sp.next_deadline()
        timer_key = ("locks", group_id, key)
        if deadline is None:
            self.timer.cancel(timer_key)
            return
        self.timer.schedule(timer_key, max(0, deadline - self.clock()),
                            lambda: self._expire(group_id, key))

    def changed(self, group_id: str, key: tuple) -> None:
        """After acknowledgements: the lock timer follows, and records released for
        redelivery wake the parked ShareFetches of the partition."""
        self.locks_changed(group_id, key)
        self._store(group_id, key)
        sp = self.get(group_id, key)
        if sp is not None and sp.available:
            self._available(key)

    def _expire(self, group_id: str, key: tuple) -> None:
        sp = self.get(group_id, key)
        if sp is None:
            return
        released = sp.expire_locks(self.clock())
        self._store(group_id, key)
        if released:
            log.debug("acquisition locks expired", group=group_id, topic_id=str(key[0]),
                      partition=key[1], released=released)
            self._available(key)
        self.locks_changed(group_id, key)

    def _available(self, key: tuple) -> None:
        if self.on_available is not None:
            self.on_available(*key)

    def expire_all_locks(self, group_id: str) -> int:
        """Expire every acquisition lock of the group now (a fault a test may inject)."""
        released = 0
        for key, sp in list(self.groups.get(group_id, {}).items()):
            n = sp.expire_locks(2**62)
            self._store(group_id, key)
            released += n
            if n:
                self._available(key)
            self.locks_changed(group_id, key)
        return released

    def release_member(self, group_id: str, member_id: str, keys) -> int:
        """Give back what ``member_id`` holds in the share partitions ``keys``."""
        released = 0
        partitions = self.groups.get(group_id, {})
        for key in list(keys):  # releasing wakes fetches, which may change what ``keys`` is
            sp = partitions.get(key)
            if sp is None:
                continue
            n = sp.release_member(member_id)
            if n:
                self._store(group_id, key)
                released += n
                self._available(key)
                self.locks_changed(group_id, key)
        return released

    def connection_closed(self, conn) -> None:
        """A client connection closed (the network layer's disconnect listener): the share
        sessions it opened end and release what their members held, as Kafka's
        ShareSessionCache does on disconnect."""
        if not self.sessions.by_connection:
            return
        for session in self.sessions.opened_by(conn):
            released = self.close_session(session.group_id, session.member_id)
            log.info("share session ended: its connection closed", group=session.group_id,
                     member=session.member_id, released=released)

    def close_session(self, group_id: str, member_id: str) -> int:
        """ShareFetch or ShareAcknowledge at epoch -1 was answered: the session goes, and what
        the member still holds in its partitions is released (Kafka's releaseSession).
        -> the records released."""
        session = self.sessions.remove(group_id, member_id)
        if session is None:
            return 0
        return self.release_member(group_id, member_id, session.partitions)

    # ------------------------------------------------------------------ ShareGroupListener
    def on_group_deleted(self, group_id: str) -> None:
        self.sessions.remove_group(group_id)
        for key in self.groups.pop(group_id, {}):
            self.timer.cancel(("locks", group_id, key))
            if self.persist is not None:
                self.persist(group_id, key, None)

    def partitions_of(self, group_id: str) -> dict[tuple, SharePartition]:
        return dict(self.groups.get(group_id, {}))
