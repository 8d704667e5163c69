"""A coordinator's internal topic as its storage (Kafka's CoordinatorPartitionWriter and
CoordinatorLoaderImpl): records are appended to partition N of the topic as ordinary record
batches, transactional writes as transactional batches, markers as control batches; at start
every partition is replayed into its shard while the shard answers
COORDINATOR_LOAD_IN_PROGRESS.

The replay gives the event loop back every few milliseconds (``LOAD_SLICE_S``), so the broker
answers other requests (ApiVersions, Metadata, Produce, Fetch, the shards already loaded)
meanwhile. Below the last stable offset only the last record of each key is replayed, the state
the log cleaner would leave: how long a load takes follows the live state, not the number of
commits since the log was last cleaned."""
from __future__ import annotations

import asyncio
import time
from bisect import bisect_left

import structlog

from protocol.records import CONTROL_FLAG, SimpleRecord, build_batch

from ...log.cleaner import CleanedTransactions, iter_keys
from .runtime import EndMarker

log = structlog.get_logger("broker.coordinator")

NO_SEQUENCE = -1
#: the most one slice of a partition's replay holds the event loop
LOAD_SLICE_S = 0.005


def partition_writer(broker, topic: str):
    """``persist(partition, records, on_done, producer=None)`` appending to ``topic``."""
    def persist(partition: int, records, on_done, producer=None) -> None:
        target = broker.topics.partition(topic, partition)
        try:
            now = broker.clock()
            batch_records = [SimpleRecord(key, value, timestamp=now) for key, value in records]
            if producer is None:
                target.log.append(build_batch(batch_records),
                                  partition_leader_epoch=target.leader_epoch)
            else:
                # the partition's producer state opens the transaction, so that its last
                # stable offset and aborted index cover it until the marker
                target.append_from_coordinator(build_batch(
                    batch_records, producer_id=producer[0], producer_epoch=producer[1],
                    base_sequence=NO_SEQUENCE, is_transactional=True))
        except Exception as exc:  # noqa: BLE001 - answered as Kafka answers a failed append
            log.error("coordinator log append failed", topic=topic, partition=partition,
                      error=str(exc))
            on_done(exc)
            return
        broker.fetches.partition_appended(topic, partition)
        on_done(None)

    return persist


def marker_writer(broker, topic: str):
    """``persist_marker(partition, producer_id, producer_epoch, commit, coordinator_epoch,
    on_done)``: a transaction marker into a partition of ``topic``."""
    def persist_marker(partition: int, producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int, on_done, transaction_version: int = 2) -> None:
        from ...txn_markers import write_txn_markers
        errors = write_txn_markers(broker, producer_id, producer_epoch, commit,
                                   coordinator_epoch, [(topic, partition)],
                                   transaction_version=transaction_version)
        error = errors.get((topic, partition), 0)
        on_done(None if not error else RuntimeError(f"marker not written: error {error}"))

    return persist_marker


def read_entries(partition_log):
    """The records of a partition log in offset order: ``(key, value, producer_id)`` (producer
    id -1 outside transactions) and an EndMarker per control batch; below the last stable
    offset only the last record of each key (see ``_load_entries``)."""
    return (entry for entry in _load_entries(partition_log) if entry is not None)


def _load_entries(partition_log):
    """read_entries' entries, and a None after each batch of the first pass, where a slice may
    end. The first pass maps each key to the offset of its last record below the last stable
    offset, leaving out aborted transactions (they shadow nothing), as the log cleaner's offset
    map does; the second replays those records, every control batch, and everything from the
    last stable offset on (undecided transactions). Batches without a record to replay are
    not decoded."""
    start = partition_log.log_start_offset
    stable = partition_log.last_stable_offset
    aborted = [txn for txn in partition_log.txn_index if txn.first_offset < stable]
    txns = CleanedTransactions(aborted)
    latest: dict[bytes, int] = {}
    for batch in partition_log.batches():
        if batch.base_offset >= stable:
            break
        if batch.attributes & CONTROL_FLAG:
            txns.on_control_batch_read(batch)
        elif not txns.on_batch_read(batch):
            for offset, key in iter_keys(batch):
                if key is not None and offset >= start:
                    latest[key] = offset
        yield None
    wanted = sorted(latest.values())
    del latest
    for batch in partition_log.batches():
        if batch.is_control:
            for record in batch.records():
                key = record.key
                if key is not None and len(key) >= 4:
                    yield EndMarker(batch.producer_id, batch.producer_epoch,
                                    int.from_bytes(key[2:4], "big") == 1)
            continue
        below = batch.base_offset < stable
        if below:
            i = bisect_left(wanted, batch.base_offset)
            if i == len(wanted) or wanted[i] > batch.last_offset:
                yield None
                continue
        producer_id = batch.producer_id if batch.is_transactional else -1
        for record in batch.records():
            offset = record.offset
            if offset >= start and record.key is not None and (
                    not below or offset >= stable or _is_wanted(wanted, offset)):
                yield record.key, record.value, producer_id


def _is_wanted(wanted: list[int], offset: int) -> bool:
    i = bisect_left(wanted, offset)
    return i < len(wanted) and wanted[i] == offset


def begin_loading_all(broker, runtime, topic: str) -> None:
    """Mark every shard as loading: called before the listeners accept, so that no request is
    answered from a shard that has not replayed its partition yet."""
    for partition in broker.topics.get(topic).partitions:
        runtime.begin_loading(partition.index)


async def load_all(broker, runtime, topic: str, slice_s: float | None = None,
                   timer=time.perf_counter) -> tuple[int, float]:
    """Replay every partition of ``topic`` into ``runtime``'s shards (already loading), each
    in slices of about ``slice_s`` (default LOAD_SLICE_S) with the event loop's other work in
    between: a shard answers as soon as its own partition is replayed. Returns (records
    replayed, seconds)."""
    if slice_s is None:
        slice_s = LOAD_SLICE_S
    partitions = broker.topics.get(topic).partitions
    started = time.monotonic()
    total = 0
    for partition in partitions:
        entries = _Slices(_load_entries(partition.log), slice_s, timer)
        while not entries.finished:
            entries.start_slice()
            total += runtime.load(partition.index, entries)
            await asyncio.sleep(0)
        runtime.finish_loading(partition.index)
    return total, round(time.monotonic() - started, 3)


class _Slices:
    """The entries of a replay, as an iterator that stops when the current slice's time is
    up (``finished`` tells whether the entries ran out)."""

    __slots__ = ("source", "slice_s", "timer", "deadline", "finished", "_count")

    def __init__(self, source, slice_s: float, timer) -> None:
        self.source = source
        self.slice_s = slice_s
        self.timer = timer
        self.deadline = 0.0
        self.finished = False
        self._count = 0

    def start_slice(self) -> None:
        self.deadline = self.timer() + self.slice_s

    def __iter__(self):
        return self

    def __next__(self):
        while True:
            self._count += 1
            if not self._count & 31 and self.timer() >= self.deadline:
                raise StopIteration
            try:
                entry = next(self.source)
            except StopIteration:
                self.finished = True
                raise
            if entry is not None:
                return entry
