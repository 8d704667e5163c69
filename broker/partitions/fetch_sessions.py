"""Fetch sessions (KIP-227): the broker remembers what a consumer fetches, so the consumer sends
only what changed (incremental fetches) and the broker answers only the partitions whose data or
offsets changed.

Kafka's rules (FetchSession.scala): a request's (session id, epoch) says what it is. Epoch -1 is
a full fetch without a session (closing the one named); epoch 0 is a full fetch that asks for a
new session (closing the one named); epoch N > 0 is the next incremental fetch of session id,
which must be at exactly that epoch. The cache has ``max.incremental.fetch.session.cache.slots``
slots in 8 shards, each with its share of the slots and its own range of session ids; a new
session goes to the next shard in turn and takes a free slot there, or evicts a session that
has not been used for two minutes, or else one that is smaller (fewer partitions), the
privileged (followers') sessions last. A session younger than two minutes is never evicted by
another's arrival.

No I/O here: time comes from the injected ``clock`` (milliseconds) and ``rand`` picks ids.
"""
from __future__ import annotations

import random as _random

from protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
#: Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS: a session used within this long is not
#: stale, and one created within this long cannot be evicted by a newcomer
EVICTION_MS = 120_000
#: Kafka's NumFetchSessionCacheShards
SHARDS = 8
INT_MAX = 2**31 - 1
#: the fewest bytes a partition takes in a Fetch request (v12+: partition, current leader
#: epoch, fetch offset, last fetched epoch, log start offset, partition max bytes, tag count):
#: socket.request.max.bytes over this is the most partitions one request can name
MIN_FETCH_PARTITION_BYTES = 33


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: the epoch after ``epoch`` (wrapping past 1)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT_MAX else epoch + 1


class CachedPartition:
    """One partition of a session: what the fetcher last asked (the request fields an
    incremental fetch may omit) and what it was last told (high watermark, log start offset),
    so that an unchanged partition can be left out of the answer."""

    __slots__ = ("topic", "topic_id", "partition", "partition_max_bytes", "fetch_offset",
                 "current_leader_epoch", "log_start_offset", "last_fetched_epoch",
                 "high_watermark", "local_log_start_offset", "replica_directory_id")

    def __init__(self, topic, topic_id, req) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = req.partition
        self.high_watermark = -1
        self.local_log_start_offset = -1
        self.update_request(req)

    def update_request(self, req) -> None:
        self.partition_max_bytes = req.partition_max_bytes
        self.fetch_offset = req.fetch_offset
        self.current_leader_epoch = req.current_leader_epoch
        self.log_start_offset = req.log_start_offset
        self.last_fetched_epoch = req.last_fetched_epoch
        self.replica_directory_id = getattr(req, "replica_directory_id", None)

    def must_respond(self, data, update: bool) -> bool:
        """Kafka's maybeUpdateResponseData: an incremental answer carries the partition when it
        has records, a new high watermark or log start offset, an error, a preferred read
        replica or a diverging epoch; ``update`` records what the fetcher is now told."""
        must = bool(data.records)
        if self.high_watermark != data.high_watermark:
            must = True
            if update:
                self.high_watermark = data.high_watermark
        if self.local_log_start_offset != data.log_start_offset:
            must = True
            if update:
                self.local_log_start_offset = data.log_start_offset
        if data.preferred_read_replica != -1:
            must = True
        if data.error_code != ErrorCode.NONE:
            if update:
                self.high_watermark = -1
            must = True
        if data.diverging_epoch is not None and data.diverging_epoch.end_offset >= 0:
            must = True
        return must


class FetchSession:
    __slots__ = ("id", "privileged", "partitions", "uses_topic_ids", "creation_ms",
                 "last_used_ms", "epoch", "cached_size", "by_all", "by_privileged", "resolved")

    def __init__(self, session_id: int, privileged: bool, partitions: dict, uses_topic_ids: bool,
                 now: int) -> None:
        self.id = session_id
        self.privileged = privileged
        #: (topic id or name, partition) -> CachedPartition, in the order answers are read
        self.partitions = partitions
        self.uses_topic_ids = uses_topic_ids
        self.creation_ms = now
        self.last_used_ms = now
        self.epoch = next_epoch(INITIAL_EPOCH)
        #: the size, and where it may be evicted from, as of the last touch (Kafka's keys)
        self.cached_size = -1
        self.by_all = False
        self.by_privileged = False
        #: what the Fetch handler made of the partitions (names, logs, purgatory keys), kept
        #: while the partitions and their order stay the same; None after any change
        self.resolved = None

    def evictable_key(self) -> tuple:
        return (self.privileged, self.cached_size, self.id)

    def update(self, fetch_data, to_forget) -> None:
        """An incremental request: add or update the partitions it names, drop the forgotten."""
        parts = self.partitions
        for key, topic, topic_id, req in fetch_data:
            cached = parts.get(key)
            if cached is None:
                parts[key] = CachedPartition(topic, topic_id, req)
                self.resolved = None
            else:
                cached.update_request(req)
        for key in to_forget:
            if parts.pop(key, None) is not None:
                self.resolved = None


class FetchSessionCacheShard:
    def __init__(self, max_entries: int, eviction_ms: int, id_range: int, shard: int,
                 rand) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.id_range = id_range
        self.shard = shard
        self.rand = rand
        self.sessions: dict[int, FetchSession] = {}
        self.partitions_cached = 0
        self.evictions = 0

    def new_session_id(self) -> int:
        low = max(1, self.shard * self.id_range)
        high = (self.shard + 1) * self.id_range  # exclusive
        while True:
            sid = self.rand.randrange(low, high)
            if sid not in self.sessions and sid != INVALID_SESSION_ID:
                return sid

    def maybe_create(self, now: int, privileged: bool, size: int, uses_topic_ids: bool,
                     create_partitions) -> int:
        """A new session's id, or 0 when no slot is free and none may be evicted. The slot is
        found before the partitions are copied."""
        if len(self.sessions) >= self.max_entries and not self._try_evict(
                privileged, (privileged, size, 0), now):
            return INVALID_SESSION_ID
        session = FetchSession(self.new_session_id(), privileged, create_partitions(),
                               uses_topic_ids, now)
        self.sessions[session.id] = session
        self.touch(session, now)
        return session.id

    def _try_evict(self, privileged: bool, key: tuple, now: int) -> bool:
        """Kafka's tryEvict: the least recently used session if stale, else the first
        evictable one (non-privileged before privileged, then smaller, then lower id) if the
        newcomer's key is not smaller than it."""
        if not self.sessions:
            return False
        oldest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - oldest.last_used_ms > self.eviction_ms:
            self.remove(oldest)
            self.evictions += 1
            return True
        pool = [s for s in self.sessions.values()
                if (s.by_privileged if privileged else s.by_all)]
        if not pool:
            return False
        victim = min(pool, key=FetchSession.evictable_key)
        if key < victim.evictable_key():
            return False
        self.remove(victim)
        self.evictions += 1
        return True

    def remove(self, session: FetchSession) -> FetchSession | None:
        if self.sessions.pop(session.id, None) is None:
            return None
        self.partitions_cached -= max(session.cached_size, 0)
        return session

    def touch(self, session: FetchSession, now: int) -> None:
        """Mark the session used now; its size and evictability are fixed until the next."""
        session.last_used_ms = now
        if session.cached_size != -1:
            self.partitions_cached -= session.cached_size
        session.cached_size = len(session.partitions)
        old = now - session.creation_ms > self.eviction_ms
        session.by_privileged = (not session.privileged) or old
        session.by_all = old
        self.partitions_cached += session.cached_size


class FetchContext:
    """What one Fetch request reads and how its answer is made (Kafka's FetchContext kinds):
    ``error`` (a session error, nothing read), ``sessionless`` (full, no session), ``full``
    (full, creating a session when it answers) and ``incremental``."""

    __slots__ = ("kind", "error", "fetch_data", "session", "shard", "epoch", "uses_topic_ids",
                 "privileged", "manager")

    def __init__(self, kind: str, error: int = ErrorCode.NONE, fetch_data=(), session=None,
                 shard=None, epoch: int = 0, uses_topic_ids: bool = False,
                 privileged: bool = False, manager=None) -> None:
        self.kind = kind
        self.error = error
        self.fetch_data = fetch_data
        self.session = session
        self.shard = shard
        self.epoch = epoch
        self.uses_topic_ids = uses_topic_ids
        self.privileged = privileged
        self.manager = manager

    def partitions(self, names=None):
        """(key, topic name or None, topic id, request fields) of every partition to read;
        an incremental fetch reads all the session's partitions, resolving names it could not
        resolve before through ``names`` (topic id -> name)."""
        if self.kind == "incremental":
            out = []
            for key, cp in self.session.partitions.items():
                if cp.topic is None and names is not None and self.session.uses_topic_ids:
                    cp.topic = names(cp.topic_id)
                    self.session.resolved = None
                out.append((key, cp.topic, cp.topic_id, cp))
            return out
        return self.fetch_data

    def answer(self, updates: list) -> tuple[int, int, list]:
        """(error, session id, the (key, data) to send) for the read ``updates`` (key, data),
        in read order; updates the session as Kafka's updateAndGenerateResponseData does."""
        if self.kind == "error":
            return self.error, INVALID_SESSION_ID, []
        if self.kind == "sessionless":
            return ErrorCode.NONE, INVALID_SESSION_ID, updates
        if self.kind == "full":
            fetch_req = {key: (topic, topic_id, req) for key, topic, topic_id, req
                         in self.fetch_data}

            def create() -> dict:
                parts = {}
                for key, data in updates:
                    topic, topic_id, req = fetch_req[key]
                    cp = CachedPartition(topic, topic_id, req)
                    cp.high_watermark = data.high_watermark
                    cp.local_log_start_offset = data.log_start_offset
                    parts[key] = cp
                return parts
            manager = self.manager
            sid = manager.next_shard().maybe_create(
                manager.clock(), self.privileged, len(updates), self.uses_topic_ids, create)
            return ErrorCode.NONE, sid, updates
        session = self.session
        if session.epoch != next_epoch(self.epoch):
            # another request of the session came in between (a duplicate)
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH, session.id, []
        parts = session.partitions
        out = []
        for key, data in updates:
            cp = parts.get(key)
            if cp is None:
                continue
            if cp.must_respond(data, True):
                out.append((key, data))
                if data.records:
                    # to the end: the next fetch reads the others first (fairness)
                    del parts[key]
                    parts[key] = cp
                    session.resolved = None
        return ErrorCode.NONE, session.id, out


class FetchSessionCache:
    """Kafka's FetchManager over its sharded FetchSessionCache."""

    def __init__(self, slots: int, clock, eviction_ms: int = EVICTION_MS, shards: int = SHARDS,
                 rand=None, max_partitions: int = INT_MAX) -> None:
        self.clock = clock
        #: the most partitions a session may hold: what one request could name
        self.max_partitions = max_partitions
        rand = rand or _random.Random()
        self.id_range = INT_MAX // shards
        self.shards = [FetchSessionCacheShard(slots // shards, eviction_ms, self.id_range, n,
                                              rand) for n in range(shards)]
        self._counter = 0

    def shard_of(self, session_id: int) -> FetchSessionCacheShard | None:
        n = session_id // self.id_range
        return self.shards[n] if 0 <= n < len(self.shards) else None

    def next_shard(self) -> FetchSessionCacheShard:
        shard = self.shards[self._counter % len(self.shards)]
        self._counter += 1
        return shard

    def get(self, session_id: int) -> FetchSession | None:
        shard = self.shard_of(session_id)
        return None if shard is None else shard.sessions.get(session_id)

    @property
    def size(self) -> int:
        return sum(len(s.sessions) for s in self.shards)

    @property
    def partitions_cached(self) -> int:
        return sum(s.partitions_cached for s in self.shards)

    @property
    def evictions(self) -> int:
        return sum(s.evictions for s in self.shards)

    def new_context(self, version: int, session_id: int, epoch: int, privileged: bool,
                    fetch_data: list, to_forget: list) -> FetchContext:
        """Kafka's FetchManager.newContext. ``fetch_data``: (key, topic name or None, topic id,
        request partition) in request order; ``to_forget``: keys."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch
            if session_id != INVALID_SESSION_ID:
                shard = self.shard_of(session_id)
                session = None if shard is None else shard.sessions.get(session_id)
                if session is not None:
                    shard.remove(session)
            if epoch == FINAL_EPOCH:
                return FetchContext("sessionless", fetch_data=fetch_data)
            return FetchContext("full", fetch_data=fetch_data, uses_topic_ids=version >= 13,
                                privileged=privileged, manager=self)
        shard = self.shard_of(session_id)
        session = None if shard is None else shard.sessions.get(session_id)
        if session is None:
            return FetchContext("error", ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return FetchContext("error", ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != (version >= 13):
            return FetchContext("error", ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        if len(session.partitions) + len(fetch_data) > self.max_partitions:
            # kbroker's bound, checked before anything is added (Kafka has none): a session
            # grown by incremental requests past what one full request could hold is
            # dropped, and its fetcher starts over with a full fetch
            parts = session.partitions
            grown = len(parts) + sum(1 for key, *_ in fetch_data if key not in parts) - sum(
                1 for key in set(to_forget) if key in parts)
            if grown > self.max_partitions:
                shard.remove(session)
                return FetchContext("error", ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        session.update(fetch_data, to_forget)
        if not session.partitions:
            # nothing left to fetch: the session closes, and this request is answered as
            # a sessionless fetch of what it named
            shard.remove(session)
            return FetchContext("sessionless", fetch_data=fetch_data)
        shard.touch(session, self.clock())
        session.epoch = next_epoch(session.epoch)
        return FetchContext("incremental", session=session, shard=shard, epoch=epoch)
