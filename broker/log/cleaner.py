"""Kafka's log cleaner for logs with cleanup.policy=compact, shared by both backends.

One cleaning pass over a log (Kafka's Cleaner.doClean):

1. the *offset map*: for every key in the dirty part of the log (from the first dirty offset,
   where the previous pass stopped, to the first uncleanable offset), the offset of its last
   record. Records of aborted transactions are not mapped: they never shadow anything. The map
   has a memory bound (log.cleaner.dedupe.buffer.size); when it fills, the pass covers only the
   part mapped so far and the next pass goes on from there;
2. every batch from the start of the log to the end of the mapped part is *filtered*
   (:class:`BatchFilter`): a record stays when no later record has its key; a tombstone (a null
   value) stays for delete.retention.ms after the pass that first finds it is the last of its
   key (the batch carries that deadline, its *delete horizon*, in its base timestamp, as on
   Kafka); records of aborted transactions go; a transaction marker stays while records of its
   transaction remain, then for delete.retention.ms; the last batch of each producer stays
   (emptied if nothing in it is needed) so that its epoch and sequence numbers can be rebuilt
   from the log; offsets never change.

What is cleanable (Kafka's LogCleanerManager): nothing at or above the last stable offset (its
transactions are undecided), nothing in the active segment, nothing younger than
min.compaction.lag.ms; a log is cleaned when its dirty part is more than
min.cleanable.dirty.ratio of the cleanable log, or when max.compaction.lag.ms passed for dirty
data. The backends decide where those limits fall (``MemoryLog.cleaning_pass``,
``SegmentLog.cleaning_pass``); :class:`LogCleaner` drives passes over every compacted log, the
in-memory ones on the event loop in slices of a few milliseconds, the segment files in a thread.

Everything here works on record batches as stored; records are walked without building Record
objects (a key, a null check and a span per record), and a batch that keeps all its records is
copied as it is.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import struct
import time
from typing import Callable, NamedTuple


from protocol import records as _records
from protocol.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    CorruptRecordError,
    RecordBatch,
)

from .base import NO_TIMESTAMP, AbortedTxn

__all__ = ["BatchFilter", "CleanedTransactions", "LogCleaner", "OffsetMap", "iter_keys",
           "last_records_of_producers", "map_batch", "DEFAULT_MAP_BYTES", "DELETE_HORIZON_FLAG"]

logger = logging.getLogger("broker.log")

#: attribute bit of a batch whose base timestamp is its delete horizon (Kafka's
#: DELETE_HORIZON_FLAG_MASK)
DELETE_HORIZON_FLAG = 0x40
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
_ABORT, _COMMIT = 0, 1
#: what one offset map entry costs beyond its key's bytes: the bytes object, the int and the
#: dict slot (measured with sys.getsizeof and tracemalloc on CPython 3.11-3.13)
MAP_ENTRY_OVERHEAD = 100
#: Kafka's log.cleaner.dedupe.buffer.size default: the most one pass's offset map holds
DEFAULT_MAP_BYTES = 128 * 1024 * 1024
#: a pass yields after this many records too (so a slice of the event loop stays short even
#: inside one large batch: about 1 ms of work)
RECORDS_PER_STEP = 256


# --- walking records ------------------------------------------------------------------------

def _varint(data, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: (value, position after it)."""
    byte = data[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    value, shift = byte & 0x7F, 7
    pos += 1
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("varint longer than 10 bytes")


def _zigzag(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def record_data(batch: RecordBatch):
    """The bytes of a batch's records, decompressed."""
    payload = memoryview(batch.buffer)[batch.position + HEADER_SIZE:batch.position + batch.size]
    codec = batch.attributes & COMPRESSION_MASK
    if codec:
        from protocol.compression import decompress  # protocol.compression imports records
        return decompress(codec, payload)
    return payload


def iter_keys(batch: RecordBatch, data=None):
    """Yield (offset, key) of every record of a batch; key None for a null key."""
    if data is None:
        data = record_data(batch)
    base = batch.base_offset
    pos = 0
    try:
        for _ in range(batch.record_count):
            byte = data[pos]
            if byte < 0x80:
                length, body = (byte >> 1) ^ -(byte & 1), pos + 1
            else:
                length, body = _varint(data, pos)
            p = body + 1  # attributes
            if data[p] < 0x80:  # timestamp delta, usually one byte
                p += 1
            else:
                p = _varint(data, p)[1]
            byte = data[p]
            if byte < 0x80:
                delta, p = (byte >> 1) ^ -(byte & 1), p + 1
            else:
                delta, p = _varint(data, p)
            byte = data[p]
            if byte < 0x80:
                key_length, p = (byte >> 1) ^ -(byte & 1), p + 1
            else:
                key_length, p = _varint(data, p)
            yield base + delta, (None if key_length < 0 else bytes(data[p:p + key_length]))
            pos = body + length
    except IndexError:
        raise CorruptRecordError("record truncated") from None


class _Span(NamedTuple):
    """One record of a batch as the filter sees it."""

    offset: int
    key: bytes | None
    tombstone: bool
    start: int  # where the record starts in the record data (its length varint)
    body: int  # where its attributes byte is
    after_timestamp: int  # where the field after its timestamp delta starts
    end: int
    timestamp_delta: int


def _spans(batch: RecordBatch, data):
    base = batch.base_offset
    pos = 0
    try:
        for _ in range(batch.record_count):
            length, body = _varint(data, pos)
            timestamp_delta, after_timestamp = _varint(data, body + 1)
            delta, p = _varint(data, after_timestamp)
            key_length, p = _varint(data, p)
            key = None
            if key_length >= 0:
                key = bytes(data[p:p + key_length])
                p += key_length
            value_length, p = _varint(data, p)
            end = body + length
            yield _Span(base + delta, key, value_length < 0, pos, body, after_timestamp, end,
                        timestamp_delta)
            pos = end
    except IndexError:
        raise CorruptRecordError("record truncated") from None


def _control_type(batch: RecordBatch) -> int | None:
    """ABORT (0) or COMMIT (1) for a transaction marker; None for an emptied control batch."""
    for _offset, key in iter_keys(batch):
        if key is None or len(key) < 4:
            return None
        return int.from_bytes(key[2:4], "big", signed=True)
    return None


def delete_horizon(batch: RecordBatch) -> int | None:
    return batch.base_timestamp if batch.attributes & DELETE_HORIZON_FLAG else None


# --- the offset map ---------------------------------------------------------------------------

class OffsetMap:
    """Key -> offset of its last record in the mapped part (Kafka's SkimpyOffsetMap, with the
    keys themselves instead of their hashes: no collision can drop a record). Bounded by
    ``capacity_bytes``, counted as each key's bytes plus MAP_ENTRY_OVERHEAD."""

    __slots__ = ("offsets", "capacity_bytes", "used_bytes", "latest_offset")

    def __init__(self, capacity_bytes: int) -> None:
        self.offsets: dict[bytes, int] = {}
        self.capacity_bytes = capacity_bytes
        self.used_bytes = 0
        self.latest_offset = -1  # the last offset the map covers

    def put(self, key: bytes, offset: int) -> bool:
        """Map ``key`` to ``offset``; False (nothing stored) when a new key does not fit."""
        offsets = self.offsets
        if key not in offsets:
            cost = len(key) + MAP_ENTRY_OVERHEAD
            if self.used_bytes + cost > self.capacity_bytes:
                return False
            self.used_bytes += cost
        offsets[key] = offset
        return True

    def get(self, key: bytes) -> int:
        return self.offsets.get(key, -1)

    def __len__(self) -> int:
        return len(self.offsets)


# --- transactions -----------------------------------------------------------------------------

class CleanedTransactions:
    """The transactions a pass walks through, in offset order (Kafka's
    CleanedTransactionMetadata): which data batches belong to aborted transactions, and when a
    marker may go. ``retained_aborted`` collects the aborted transactions whose markers stay
    because records of theirs were seen (the aborted index of the cleaned part)."""

    __slots__ = ("pending", "ongoing_committed", "ongoing_aborted", "retained_aborted")

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self.pending = sorted(set(aborted), key=lambda txn: txn.first_offset, reverse=True)
        self.ongoing_committed: set[int] = set()
        #: producer id -> [its aborted transaction, last offset of a batch of it seen or -1]
        self.ongoing_aborted: dict[int, list] = {}
        self.retained_aborted: list[AbortedTxn] = []

    def _consume_up_to(self, offset: int) -> None:
        pending = self.pending
        while pending and pending[-1].first_offset <= offset:
            txn = pending.pop()
            self.ongoing_aborted.setdefault(txn.producer_id, [txn, -1])

    def on_batch_read(self, batch: RecordBatch) -> bool:
        """A data batch: True when it belongs to an aborted transaction (it can go)."""
        self._consume_up_to(batch.last_offset)
        if not batch.attributes & TRANSACTIONAL_FLAG:
            return False
        aborted = self.ongoing_aborted.get(batch.producer_id)
        if aborted is not None:
            aborted[1] = batch.last_offset
            return True
        self.ongoing_committed.add(batch.producer_id)
        return False

    def on_control_batch_read(self, batch: RecordBatch) -> bool:
        """A control batch: True when its marker may go (no record of its transaction was
        seen in this pass, so none is left before it)."""
        self._consume_up_to(batch.last_offset)
        kind = _control_type(batch)
        if kind is None:
            return True  # emptied by an earlier pass
        producer_id = batch.producer_id
        if kind == _ABORT:
            aborted = self.ongoing_aborted.pop(producer_id, None)
            if aborted is not None and aborted[1] >= 0:
                self.retained_aborted.append(aborted[0])
                return False
            return True
        if kind == _COMMIT:
            if producer_id in self.ongoing_committed:
                self.ongoing_committed.discard(producer_id)
                return False
            return True
        return False


def last_records_of_producers(log) -> dict[int, tuple[int, int]]:
    """Producer id -> (offset of its last data batch's last record or -1, its epoch), from the
    producer state the partition attached to ``log`` (Kafka's lastRecordsOfActiveProducers)."""
    table = getattr(log, "producers", None)
    if table is None:
        return {}
    out = {}
    for producer_id, entry in table.producers.items():
        batches = entry.batches
        out[producer_id] = (batches[-1].last_offset if batches else -1, entry.epoch)
    return out


def map_batch(offset_map: OffsetMap, batch: RecordBatch, start: int,
              txns: CleanedTransactions) -> bool:
    """Add one dirty batch to the offset map (Kafka's buildOffsetMapForSegment, per batch).
    True when the map is full: the batch is then not covered, nor anything after it."""
    return run_steps(map_batch_steps(offset_map, batch, start, txns))


def map_batch_steps(offset_map: OffsetMap, batch: RecordBatch, start: int,
                    txns: CleanedTransactions):
    """map_batch as a generator that yields every RECORDS_PER_STEP records (a large batch
    does not hold the event loop at once) and returns whether the map is full."""
    if batch.attributes & CONTROL_FLAG:
        txns.on_control_batch_read(batch)
    elif not txns.on_batch_read(batch):
        put = offset_map.put
        step = 0
        for offset, key in iter_keys(batch):
            if key is not None and offset >= start and not put(key, offset):
                return True
            step += 1
            if step == RECORDS_PER_STEP:
                step = 0
                yield
    last = batch.last_offset
    if last >= start:
        offset_map.latest_offset = last
    return False


def run_steps(steps):
    """The return value of a generator that only yields to pause."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value


# --- filtering batches ------------------------------------------------------------------------

class BatchFilter:
    """Kafka's cleanInto record filter for one pass: ``filter(batch)`` is what of the batch
    stays (the batch as it is, a rebuilt batch, or None). Batches are given in offset order,
    from the start of the log to the end of the mapped part."""

    def __init__(self, offset_map: OffsetMap, txns: CleanedTransactions,
                 last_records: dict[int, tuple[int, int]], upper_bound: int, now: int,
                 delete_retention_ms: int) -> None:
        self.map = offset_map
        self.txns = txns
        self.last_records = last_records
        self.upper_bound = upper_bound  # the pass's first uncleanable offset
        self.now = now
        self.delete_retention_ms = delete_retention_ms
        self.records_read = 0
        self.records_kept = 0

    def filter(self, batch: RecordBatch):
        return run_steps(self.filter_steps(batch))

    def filter_steps(self, batch: RecordBatch):
        """filter as a generator that yields every RECORDS_PER_STEP records."""
        attributes = batch.attributes
        control = attributes & CONTROL_FLAG
        if control:
            can_discard = self.txns.on_control_batch_read(batch)
            horizon = delete_horizon(batch)
            discard_records = can_discard and horizon is not None and horizon <= self.now
        else:
            can_discard = discard_records = self.txns.on_batch_read(batch)
        producer_id = batch.producer_id
        last = self.last_records.get(producer_id) if producer_id >= 0 else None
        if last is not None and (batch.last_offset == last[0] if last[0] >= 0 else
                                 control and batch.producer_epoch == last[1]):
            keep_empty = True  # the producer's last batch: its state is rebuilt from it
        elif batch.next_offset == self.upper_bound:
            keep_empty = True  # the pass's last batch keeps the offsets' end in its segment
        elif discard_records:
            return None
        else:
            keep_empty = False
        self.records_read += batch.record_count
        if discard_records:
            return _empty_batch(batch) if keep_empty else None
        data = record_data(batch)
        if control:
            kept = list(_spans(batch, data))
            tombstones = False
        else:
            kept, tombstones = yield from self._kept_records(batch, data)
        if not kept:
            return _empty_batch(batch) if keep_empty else None
        self.records_kept += len(kept)
        set_horizon = (tombstones or (can_discard and control)) and \
            not attributes & DELETE_HORIZON_FLAG
        if len(kept) == batch.record_count and not set_horizon:
            return batch.bytes()
        return _rebuild(batch, data, kept,
                        self.now + self.delete_retention_ms if set_horizon else None)

    def _kept_records(self, batch: RecordBatch, data) -> tuple[list, bool]:
        """(the _Spans of the records that stay, whether one is a tombstone); walks a record
        that goes only as far as its key."""
        latest = self.map.latest_offset
        get = self.map.offsets.get
        horizon = delete_horizon(batch)
        keep_deletes = horizon is None or self.now < horizon
        base = batch.base_offset
        kept, tombstones = [], False
        pos, step = 0, 0
        try:
            for _ in range(batch.record_count):
                step += 1
                if step == RECORDS_PER_STEP:
                    step = 0
                    yield
                byte = data[pos]
                if byte < 0x80:
                    length, body = (byte >> 1) ^ -(byte & 1), pos + 1
                else:
                    length, body = _varint(data, pos)
                end = body + length
                timestamp_delta, after_timestamp = _varint(data, body + 1)
                byte = data[after_timestamp]
                if byte < 0x80:
                    delta, p = (byte >> 1) ^ -(byte & 1), after_timestamp + 1
                else:
                    delta, p = _varint(data, after_timestamp)
                offset = base + delta
                key_length, p = _varint(data, p)
                key = None
                if key_length >= 0:
                    key = bytes(data[p:p + key_length])
                    p += key_length
                # records past the mapped part stay; records without a key stay too (Kafka
                # refuses them on compacted topics at produce time; here they may exist)
                if offset <= latest and key is not None and offset < get(key, -1):
                    pos = end
                    continue  # a later record has its key
                tombstone = _varint(data, p)[0] < 0
                if tombstone and not keep_deletes and offset <= latest and key is not None:
                    pos = end
                    continue  # past its delete horizon
                kept.append(_Span(offset, key, tombstone, pos, body, after_timestamp, end,
                                  timestamp_delta))
                tombstones = tombstones or tombstone
                pos = end
        except IndexError:
            raise CorruptRecordError("record truncated") from None
        return kept, tombstones


def _empty_batch(batch: RecordBatch) -> bytes:
    """The batch's header with no records (Kafka's writeEmptyHeader): offsets, producer id,
    epoch and sequence stay, so the producer's state can be rebuilt from it."""
    attributes = batch.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG | CONTROL_FLAG)
    return _header(batch, b"", 0, attributes, batch.max_timestamp, batch.max_timestamp)


def _rebuild(batch: RecordBatch, data, kept: list, horizon: int | None) -> bytes:
    """The batch with only the ``kept`` records, copied as they are stored; with a new delete
    horizon each record's timestamp delta is rewritten against it (the base timestamp)."""
    attributes = batch.attributes
    base_timestamp = batch.base_timestamp
    log_append_time = attributes & TIMESTAMP_TYPE_MASK
    max_timestamp = NO_TIMESTAMP
    parts = []
    if horizon is None:
        for span in kept:
            parts.append(data[span.start:span.end])
            timestamp = base_timestamp + span.timestamp_delta
            if timestamp > max_timestamp:
                max_timestamp = timestamp
    else:
        attributes |= DELETE_HORIZON_FLAG
        for span in kept:
            timestamp = base_timestamp + span.timestamp_delta
            if timestamp > max_timestamp:
                max_timestamp = timestamp
            body = b"".join((data[span.body:span.body + 1], _zigzag(timestamp - horizon),
                             data[span.after_timestamp:span.end]))
            parts.append(_zigzag(len(body)))
            parts.append(body)
        base_timestamp = horizon
    if log_append_time:
        max_timestamp = batch.max_timestamp
    body = b"".join(parts)
    codec = attributes & COMPRESSION_MASK
    if codec:
        from protocol.compression import compress
        body = compress(codec, body)
    return _header(batch, body, len(kept), attributes, base_timestamp, max_timestamp)


def _header(batch: RecordBatch, body, count: int, attributes: int, base_timestamp: int,
            max_timestamp: int) -> bytes:
    out = bytearray(HEADER_SIZE)
    out += body
    _HEADER.pack_into(out, 0, batch.base_offset, len(out) - LOG_OVERHEAD,
                      batch.partition_leader_epoch, 2, 0, attributes, batch.last_offset_delta,
                      base_timestamp, max_timestamp, batch.producer_id, batch.producer_epoch,
                      batch.base_sequence, count)
    _CRC.pack_into(out, CRC_OFFSET, _records.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


# --- driving passes ---------------------------------------------------------------------------

class LogCleaner:
    """Cleans the compacted logs of a LogManager, one log at a time, the filthiest first
    (Kafka's CleanerThread): when no log needs cleaning it waits log.cleaner.backoff.ms.

    A log's ``cleaning_pass(now, map_bytes)`` is a generator: an in-memory log's pass runs on
    the event loop and is resumed until ``slice_ms`` are used, then the loop runs other work; a
    segment log's pass does its file work in ``executor`` (one thread: the
    pass yields a callable for it) and swaps the cleaned segments in on the loop."""

    def __init__(self, logs, *, backoff_ms: int = 15_000,
                 dedupe_buffer_size: int = DEFAULT_MAP_BYTES, slice_ms: float = 5.0,
                 clock: Callable[[], int] | None = None,
                 timer: Callable[[], float] = time.perf_counter) -> None:
        self.logs = logs
        self.backoff_ms = backoff_ms
        self.dedupe_buffer_size = dedupe_buffer_size
        self.slice_s = slice_ms / 1000.0
        self.clock = clock or logs._clock
        self.timer = timer  # seconds, for the length of a slice
        self.executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._task: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self.passes = 0
        self.bytes_freed = 0
        #: logs whose last pass moved nothing, and when they may be picked again
        self._resting: dict = {}
        self.slices = 0
        self.longest_slice_s = 0.0
        self.pass_longest_slice_s = 0.0

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="log-cleaner")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        if self.executor is not None:
            self.executor.shutdown(wait=True)
            self.executor = None

    def wake(self) -> None:
        """Look for work now instead of at the end of the backoff (tests, a config change)."""
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        while True:
            try:
                cleaned = await self.clean_filthiest()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - one log's failure must not stop the cleaner
                logger.exception("log cleaner: a cleaning pass failed")
                cleaned = False
            if not cleaned:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), self.backoff_ms / 1000.0)
                except asyncio.TimeoutError:
                    pass

    def filthiest(self, now: int):
        """(key, log) of the log with the largest cleanable ratio among those that need
        cleaning, or None."""
        best, best_ratio = None, -1.0
        resting = self._resting
        for key, log in self.logs.items():
            if not log.config.compact_enabled:
                continue
            if key in resting:
                if resting[key] > now:
                    continue
                del resting[key]
            ratio = log.cleanable_ratio(now)
            if ratio is not None and ratio > best_ratio:
                best, best_ratio = (key, log), ratio
        return best

    async def clean_filthiest(self) -> bool:
        """Run one pass over the filthiest log; False when no log needed cleaning."""
        now = self.clock()
        chosen = self.filthiest(now)
        if chosen is None:
            return False
        key, log = chosen
        started, slices = time.monotonic(), self.slices
        self.pass_longest_slice_s = 0.0
        try:
            freed = await self.run_pass(log, now)
        except Exception:
            self._resting[key] = now + self.backoff_ms  # Kafka marks it uncleanable
            raise
        self.passes += 1
        self.bytes_freed += freed
        if not freed and log.cleanable_ratio(self.clock()) is not None:
            # nothing moved (the pass gave up, or one key is larger than the map): this log
            # waits a backoff instead of being picked again at once
            self._resting[key] = now + self.backoff_ms
        if freed:
            logger.info("log cleaner: cleaned %s-%d, %d bytes freed in %.0f ms; the event loop "
                        "was held %d times, at most %.1f ms", key[0], key[1], freed,
                        (time.monotonic() - started) * 1000, self.slices - slices,
                        self.pass_longest_slice_s * 1000)
        return True

    async def run_pass(self, log, now: int) -> int:
        steps = log.cleaning_pass(now, self.dedupe_buffer_size)
        try:
            return await self._drive(steps)
        finally:
            steps.close()  # a cancelled pass: its file work stops at its next batch

    async def _drive(self, steps) -> int:
        loop = asyncio.get_running_loop()
        send = None
        slice_s, timer = self.slice_s, self.timer
        while True:
            started = timer()
            try:
                while True:
                    work = steps.send(send)
                    send = None
                    if work is not None:
                        break  # file work for the thread
                    if timer() - started >= slice_s:
                        break
            except StopIteration as stop:
                self._note_slice(started)
                return stop.value or 0
            self._note_slice(started)
            if work is not None:
                if self.executor is None:
                    self.executor = concurrent.futures.ThreadPoolExecutor(
                        1, thread_name_prefix="log-cleaner")
                try:
                    send = await loop.run_in_executor(self.executor, work)
                except Exception as exc:  # noqa: BLE001 - the pass decides what it means
                    send = exc
            else:
                await asyncio.sleep(0)

    def _note_slice(self, started: float) -> None:
        self.slices += 1
        spent = self.timer() - started
        if spent > self.longest_slice_s:
            self.longest_slice_s = spent
        if spent > self.pass_longest_slice_s:
            self.pass_longest_slice_s = spent


def run_to_end(steps) -> int:
    """Run a cleaning pass synchronously (tests, LogManager.compact): file work in this
    thread."""
    send = None
    while True:
        try:
            work = steps.send(send)
        except StopIteration as stop:
            return stop.value or 0
        send = None
        if work is not None:
            try:
                send = work()
            except Exception as exc:  # noqa: BLE001
                send = exc


def merge_retained_aborted(index, retained: list[AbortedTxn], cleaned_end: int) -> None:
    """After a pass: the aborted transactions whose markers lie below ``cleaned_end`` are those
    the pass kept (the others' markers went, or are going, with their records)."""
    entries = index.entries
    keep_after = [txn for txn in entries if txn.last_offset >= cleaned_end]
    merged = sorted(retained, key=lambda txn: txn.last_offset)
    index.entries = [txn for txn in merged if txn.last_offset < cleaned_end] + keep_after

