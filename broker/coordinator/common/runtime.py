"""What the group and the transaction coordinators share (Kafka's coordinator-common runtime).

A coordinator is sharded over the partitions of its internal topic (``__consumer_offsets``,
``__transaction_state``): the key (a group id, a transactional id) hashes to a partition, and
the shard of that partition owns the key's state. Both coordinators get from here:

* routing: ``partition_for(key)`` and ``shard_for(key)`` (Java's hashCode, as Kafka);
* loading: a shard replays its partition at start and answers COORDINATOR_LOAD_IN_PROGRESS
  meanwhile (``begin_loading`` / ``load`` / ``finish_loading``);
* the write path: an operation gives its shard a CoordinatorResult (result.py), its records
  and response, with the caller's ``respond``; :meth:`CoordinatorShard.append` persists the
  records, applies them with the same code as the replay, and only then answers;
  :meth:`CoordinatorShard.write_marker` writes a transaction marker into the partition
  (transactional offset commits end with one);
* the keyed timer (timer.py).

Sans-I/O: the broker supplies ``persist(partition, records, on_done, producer=None)`` (records
are ``(key, value)`` bytes; ``producer`` is ``(producer_id, producer_epoch)`` for a transactional
write) and ``persist_marker(partition, producer_id, producer_epoch, commit, coordinator_epoch,
on_done, transaction_version=)`` (version 2 markers carry the transaction's bumped epoch); each calls ``on_done(None)`` once stored or ``on_done(exc)``.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, NamedTuple

import structlog

from protocol.errors import ErrorCode

from .hashing import partition_for
from .result import CoordinatorResult

log = structlog.get_logger("broker.coordinator")

E = ErrorCode
_PARTITION_CACHE_SIZE = 100_000
NO_PRODUCER_ID = -1


class EndMarker(NamedTuple):
    """A transaction marker met while loading a partition (a control batch)."""

    producer_id: int
    producer_epoch: int
    commit: bool


def _stored_now(partition, producer_id, producer_epoch, commit, coordinator_epoch,
                on_done, transaction_version=2) -> None:
    on_done(None)


class CoordinatorShard:
    """One partition's state machine. Subclasses implement :meth:`replay` (and
    :meth:`replay_end_transaction` when they take transactional writes) and may hook
    :meth:`after_apply`, :meth:`on_loaded` and :meth:`on_unload`."""

    def __init__(self, partition: int, clock: Callable[[], int], persist: Callable,
                 persist_marker: Callable | None = None) -> None:
        self.partition = partition
        self.clock = clock
        self._persist = persist
        self._persist_marker = persist_marker or _stored_now
        self.loading = False
        self._load_started_ms: int | None = None
        self._loaded_records = 0

    # ------------------------------------------------------------------ the state machine
    def replay(self, key: bytes, value: bytes | None, replay: bool,
               producer_id: int = NO_PRODUCER_ID) -> None:
        raise NotImplementedError

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        """A transaction marker: pending transactional records become real or vanish."""

    def after_apply(self) -> None:
        """Called after a batch of records was applied (live or loaded)."""

    def on_loaded(self) -> None:
        """Called once the partition is replayed, before the shard answers requests."""

    def on_unload(self, error: ErrorCode) -> None:
        """Drop the state, answering whoever waits with ``error``."""

    # ------------------------------------------------------------------ the write path
    def append(self, result: CoordinatorResult, respond: Callable[[Any], None] | None = None,
               error_response: Callable[[BaseException, Any], Any] | None = None) -> None:
        """The one write path (Kafka's scheduleWriteOperation): persist ``result.records``; once
        stored apply them, complete ``result.append_future`` and hand ``result.response`` to
        ``respond``. On failure nothing is applied, ``append_future`` gets the failure and
        ``respond`` gets ``error_response(exc, result.response)``, the API's error answer.
        No records: answered at once. ``result.producer`` makes it a transactional write whose
        records stay pending until the transaction's marker."""
        records, response, producer, append_future = result
        if not records:
            if append_future is not None:
                append_future(None)
            if respond is not None:
                respond(response)
            return
        state = {"done": False}
        producer_id = NO_PRODUCER_ID if producer is None else producer[0]

        def done(exc: BaseException | None = None) -> None:
            if state["done"]:
                return
            state["done"] = True
            if exc is None:
                for key, value in records:
                    try:
                        self.replay(key, value, False, producer_id)
                    except Exception:
                        log.exception("failed to apply a stored record", partition=self.partition)
                self.after_apply()
            else:
                log.warning("coordinator write failed", partition=self.partition, error=str(exc))
            try:
                if append_future is not None:
                    append_future(exc)
                if respond is not None:
                    respond(response if exc is None else error_response(exc, response))
            except Exception:
                # a bug after the write: said as such, never taken for a failed write (the
                # caller of persist would otherwise swallow it through done(exc) above)
                log.exception("completing a stored coordinator write failed",
                              partition=self.partition)

        try:
            if producer is None:
                self._persist(self.partition, records, done)
            else:
                self._persist(self.partition, records, done, producer=producer)
        except Exception as exc:  # the log refused synchronously
            done(exc)

    def write_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int,
                     on_done: Callable[[BaseException | None], None],
                     transaction_version: int = 2) -> None:
        """Write a COMMIT/ABORT marker for ``producer_id`` and apply it once stored."""
        state = {"done": False}

        def done(exc: BaseException | None = None) -> None:
            if state["done"]:
                return
            state["done"] = True
            if exc is None:
                self.replay_end_transaction(producer_id, commit)
                self.after_apply()
            try:
                on_done(exc)
            except Exception:  # as in append: not a failed marker write
                log.exception("completing a stored coordinator marker failed",
                              partition=self.partition)

        try:
            self._persist_marker(self.partition, producer_id, producer_epoch, commit,
                                 coordinator_epoch, done, transaction_version=transaction_version)
        except Exception as exc:
            log.warning("coordinator marker write failed", partition=self.partition,
                        error=str(exc))
            done(exc)

    # ------------------------------------------------------------------ loading
    def begin_loading(self) -> None:
        """Forget everything (the partition is about to be replayed from its log)."""
        self.on_unload(E.NOT_COORDINATOR)
        self.loading = True
        self._load_started_ms = self.clock()
        self._loaded_records = 0

    def load(self, entries: Iterable) -> int:
        """Replay ``(key, value)`` or ``(key, value, producer_id)`` records and EndMarkers."""
        n = 0
        for entry in entries:
            try:
                if isinstance(entry, EndMarker):
                    self.replay_end_transaction(entry.producer_id, entry.commit)
                elif len(entry) == 3:
                    self.replay(entry[0], entry[1], True, entry[2])
                else:
                    self.replay(entry[0], entry[1], True)
            except ValueError as exc:
                log.warning("skipped an unreadable coordinator record",
                            partition=self.partition, error=str(exc))
            n += 1
        self.after_apply()
        self._loaded_records += n
        return n

    def finish_loading(self) -> None:
        self.loading = False
        self.on_loaded()

    @property
    def load_duration_ms(self) -> int:
        return self.clock() - (self._load_started_ms or self.clock())

    def unload(self, error: ErrorCode = E.NOT_COORDINATOR) -> None:
        self.on_unload(error)


class CoordinatorRuntime:
    """Routes keys to shards and drives their loading; ``shards[p]`` owns partition ``p``."""

    def __init__(self, num_partitions: int, make_shard: Callable[[int], CoordinatorShard]):
        self.num_partitions = num_partitions
        #: key -> partition: hashing is per request (the services read it on their hot paths)
        self.key_partitions: dict[str, int] = {}
        self.shards = [make_shard(p) for p in range(num_partitions)]

    def partition_for(self, key: str) -> int:
        partitions = self.key_partitions
        partition = partitions.get(key)
        if partition is None:
            if len(partitions) >= _PARTITION_CACHE_SIZE:
                partitions.clear()
            partition = partitions[key] = partition_for(key, self.num_partitions)
        return partition

    def shard_for(self, key: str):
        """On every request: one dict lookup for a key seen before."""
        partition = self.key_partitions.get(key)
        if partition is None:
            partition = self.partition_for(key)
        return self.shards[partition]

    @property
    def shards_loading(self) -> set[int]:
        return {shard.partition for shard in self.shards if shard.loading}

    def begin_loading(self, partition: int) -> None:
        self.shards[partition].begin_loading()

    def load(self, partition: int, entries: Iterable) -> int:
        return self.shards[partition].load(entries)

    def finish_loading(self, partition: int) -> None:
        self.shards[partition].finish_loading()

    def unload_all(self, error: ErrorCode = E.NOT_COORDINATOR) -> None:
        for shard in self.shards:
            shard.unload(error)
