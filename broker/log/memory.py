"""MemoryLog: the default partition log, kept entirely in memory (nothing on disk).

Storage is one entry per batch in parallel lists: the batch's bytes (a memoryview slice of the
bytearray its append copied into; nothing ever resizes or rewrites that bytearray after the
append, so handing out views is safe), its base offset, its position in a virtual byte stream
(so max_bytes cuts are a bisect, not a loop), and its max timestamp. Reads are O(log n) and return
a zero-copy memoryview when the answer is a single batch, one ``bytes.join`` otherwise.

Retention works at batch granularity (Kafka deletes whole segments; here every batch behaves like
a segment of its own), which keeps memory closest to retention.bytes; retention.bytes holds at
every append, not only at the periodic check. segment.bytes, segment.ms and the flush settings do
not apply. index.interval.bytes only marks where Kafka's sparse offset index would have entries
(the whole log as one segment), because read_committed fetches bound their aborted transactions
by it as Kafka does.

All in-memory logs share a ``MemoryBudget`` (log.memory.max.bytes): appends past it drop the
oldest batches of delete-policy logs. Compaction (``cleaning_pass``) replaces the cleaned batches
in place, in steps the broker's LogCleaner runs a few milliseconds at a time.
"""
from __future__ import annotations

import heapq
import logging
from bisect import bisect_left, bisect_right
from typing import Callable

from protocol.records import RecordBatch

from .base import (
    NO_TIMESTAMP,
    AppendInfo,
    LogConfig,
    OffsetOutOfRange,
    PartitionLog,
    first_record_at_or_after,
    offset_of_max_timestamp,
    prepare_append,
    wall_clock_ms,
)
from .cleaner import (
    DEFAULT_MAP_BYTES,
    BatchFilter,
    CleanedTransactions,
    OffsetMap,
    last_records_of_producers,
    map_batch_steps,
    merge_retained_aborted,
    run_to_end,
)

__all__ = ["MemoryBudget", "MemoryLog"]


logger = logging.getLogger("broker.log")

class MemoryLog(PartitionLog):
    def __init__(self, config: LogConfig | None = None, *, start_offset: int = 0,
                 clock: Callable[[], int] | None = None):
        super().__init__(config, clock=clock)
        self._start = start_offset  # log start offset
        self._end = start_offset  # log end offset
        self._bases: list[int] = []  # base offset of each stored batch
        self._views: list = []  # the bytes of each batch
        self._positions: list[int] = []  # virtual byte position where each batch starts
        self._max_ts: list[int] = []  # each batch's max timestamp
        # running maximum of _max_ts over every batch ever appended (an upper bound of the true
        # running maximum once batches were deleted from the front): lets offset_for_timestamp
        # bisect to the first candidate instead of scanning.
        self._running_max: list[int] = []
        self._retention_ts: dict[int, int] = {}  # base offset -> append time, for batches without timestamps
        self._stream_end = 0  # virtual byte position after the last batch
        self._max_cache: tuple[int, int] | None = None  # (max timestamp, base offset of its batch)
        self._closed = False
        self._cleaned_to = start_offset  # compaction cleaned the batches below this offset
        #: changes whenever batches are removed or replaced: a cleaning pass in progress
        #: gives up when it sees a change
        self._version = 0
        #: the broker-wide MemoryBudget this log's bytes count against (None: unbounded)
        self.budget = None
        # where Kafka's offset index would have an entry: the virtual positions of those batches,
        # one whenever more than index.interval.bytes were appended since the previous one
        self._index_positions: list[int] = []
        self._bytes_since_index = 0

    # --- offsets ---

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    @property
    def size_bytes(self) -> int:
        return self._stream_end - self._positions[0] if self._positions else 0

    # --- append / read ---

    def append(self, batches, *, log_append_time: int | None = None,
               partition_leader_epoch: int | None = None) -> AppendInfo:
        if self._closed:
            raise ValueError("log is closed")
        buf, entries = prepare_append(batches, self._end, log_append_time, partition_leader_epoch)
        view = memoryview(buf)
        first_offset = self._end
        bases, views, positions, max_ts_list, running = (
            self._bases, self._views, self._positions, self._max_ts, self._running_max)
        stream = self._stream_end
        running_max = running[-1] if running else NO_TIMESTAMP
        append_max = NO_TIMESTAMP
        cache = self._max_cache
        interval = self.config.index_interval_bytes
        since_index = self._bytes_since_index
        for position, size, base, _next, max_ts in entries:
            if since_index > interval:
                self._index_positions.append(stream)
                since_index = 0
            since_index += size
            bases.append(base)
            views.append(view if size == len(buf) else view[position:position + size])
            positions.append(stream)
            max_ts_list.append(max_ts)
            if max_ts > running_max:
                running_max = max_ts
            running.append(running_max)
            if max_ts < 0:
                self._retention_ts[base] = self._clock()
            if max_ts > append_max:
                append_max = max_ts
            if cache is not None and max_ts > cache[0]:
                cache = (max_ts, base)
            stream += size
        self._stream_end = stream
        self._bytes_since_index = since_index
        self._end = entries[-1][3]
        self._max_cache = cache
        config = self.config
        if (config.retention_bytes >= 0 and config.delete_enabled
                and stream - positions[0] > config.retention_bytes):
            self._drop_front(self._over_retention_bytes())  # holds at append, not only later
        if self.budget is not None:
            self.budget.grow(len(buf))
        return AppendInfo(
            first_offset=first_offset, last_offset=self._end - 1,
            log_append_time=-1 if log_append_time is None else log_append_time,
            log_start_offset=self._start, max_timestamp=append_max, size=len(buf),
            batch_count=len(entries))

    def _first_batch(self, offset: int) -> int:
        """Index of the first batch a read from ``offset`` returns (may be len: none)."""
        first = bisect_right(self._bases, offset) - 1
        # only the part compaction cleaned has gaps: there, an offset can fall after its
        # batch's last record, and the read starts at the next batch
        if first < 0 or (offset < self._cleaned_to
                         and RecordBatch(self._views[first]).last_offset < offset):
            first += 1
        return first

    def read(self, offset: int, max_bytes: int, *, min_one_message: bool = True,
             max_offset: int | None = None):
        if offset < self._start or offset > self._end:
            raise OffsetOutOfRange(offset, self._start, self._end)
        if offset == self._end:
            return b""
        positions = self._positions
        count = len(positions)
        end_position = self._stream_end
        if max_offset is not None and max_offset < self._end:
            if offset >= max_offset:
                return b""
            count = bisect_left(self._bases, max_offset)  # batches below it
            if count < len(positions):
                end_position = positions[count]
        first = self._first_batch(offset)
        if first >= count:
            return b""
        limit = positions[first] + max_bytes
        # batches first..after-1 start within limit
        after = bisect_right(positions, limit, first, count)
        if after == count and end_position <= limit:
            stop = count
        else:
            stop = after - 1  # the batch starting at after-1 ends beyond the limit
        if stop <= first:
            if not min_one_message:
                return b""
            stop = first + 1
        if stop == first + 1:
            return self._views[first]
        return b"".join(self._views[first:stop])

    def fetch_upper_bound(self, offset: int, size: int) -> int:
        first = self._first_batch(offset)
        if first >= len(self._positions):
            return self._end
        index_positions = self._index_positions
        i = bisect_left(index_positions, self._positions[first] + size)
        if i == len(index_positions):
            return self._end
        batch = bisect_left(self._positions, index_positions[i])
        return RecordBatch(self._views[batch]).last_offset

    # --- ListOffsets ---

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        if not self._bases:
            return None
        start_index = max(bisect_right(self._bases, self._start) - 1, 0)
        index = max(bisect_left(self._running_max, timestamp), start_index)
        max_ts = self._max_ts
        for i in range(index, len(max_ts)):
            if max_ts[i] >= timestamp:
                found = first_record_at_or_after(
                    RecordBatch(self._views[i]), timestamp, self._start)
                if found is not None:
                    return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        if not self._bases:
            return None
        if self._max_cache is None:
            best = max(self._max_ts)
            self._max_cache = (best, self._bases[self._max_ts.index(best)])
        best, base = self._max_cache
        if best < 0:
            return None
        i = bisect_left(self._bases, base)
        return offset_of_max_timestamp(RecordBatch(self._views[i])), best

    # --- moving the ends ---

    def _drop_front(self, count: int) -> int:
        """Delete the first ``count`` batches; return the bytes freed."""
        if count <= 0:
            return 0
        freed = (self._positions[count] if count < len(self._positions)
                 else self._stream_end) - self._positions[0]
        self._version += 1
        if self.budget is not None:
            self.budget.shrink(freed)
        if self._retention_ts:
            for base in self._bases[:count]:
                self._retention_ts.pop(base, None)
        del self._bases[:count], self._views[:count], self._positions[:count]
        del self._max_ts[:count], self._running_max[:count]
        if self._index_positions:
            kept = self._positions[0] if self._positions else self._stream_end
            del self._index_positions[:bisect_left(self._index_positions, kept)]
        if self._max_cache is not None and (not self._bases or self._max_cache[1] < self._bases[0]):
            self._max_cache = None
        first = self._bases[0] if self._bases else self._end
        if first > self._start:
            self._start = first
        self._log_start_moved()
        return freed

    def truncate_to(self, offset: int) -> None:
        if offset >= self._end:
            return
        if offset <= self._start:
            self._restart_at(offset)
            return
        keep = bisect_right(self._bases, offset) - 1  # the batch containing offset goes too
        new_end = self._bases[keep]
        if new_end < self._start:  # it also held the log start offset: nothing readable is left
            self._restart_at(self._start)
            return
        self._drop_back(keep)
        self._end = new_end
        self._cleaned_to = min(self._cleaned_to, new_end)
        self.txn_index.truncate_to(new_end)

    def _restart_at(self, offset: int) -> None:
        self._drop_back(0)
        self._start = self._end = self._cleaned_to = offset
        self.txn_index.clear()

    def _drop_back(self, keep: int) -> None:
        self._version += 1
        if keep < len(self._bases):
            if self.budget is not None:
                self.budget.shrink(self._stream_end - self._positions[keep])
            self._stream_end = self._positions[keep]
        if self._retention_ts:
            for base in self._bases[keep:]:
                self._retention_ts.pop(base, None)
        del self._bases[keep:], self._views[keep:], self._positions[keep:]
        del self._max_ts[keep:], self._running_max[keep:]
        del self._index_positions[bisect_left(self._index_positions, self._stream_end):]
        self._max_cache = None

    def delete_records_before(self, offset: int) -> int:
        offset = self._check_delete_records_offset(offset)
        if offset > self._start:
            self._start = offset
            self._drop_front(self._breached_by_start())
            self._log_start_moved()
        return self._start

    def _breached_by_start(self) -> int:
        """How many leading batches lie wholly below the log start offset."""
        if self._start >= self._end:
            return len(self._bases)
        return bisect_right(self._bases, self._start) - 1

    def apply_retention(self, now_ms: int | None = None) -> int:
        config = self.config
        freed = 0
        if config.delete_enabled:
            now = self._clock() if now_ms is None else now_ms
            if config.retention_ms >= 0:
                max_ts, n = self._max_ts, 0
                while n < len(max_ts):
                    ts = max_ts[n] if max_ts[n] >= 0 else self._retention_ts.get(
                        self._bases[n], now)
                    if now - ts <= config.retention_ms:
                        break
                    n += 1
                freed += self._drop_front(n)
            if config.retention_bytes >= 0 and self.size_bytes >= config.retention_bytes:
                freed += self._drop_front(self._over_retention_bytes())
        freed += self._drop_front(self._breached_by_start())
        return freed

    def _over_retention_bytes(self) -> int:
        """How many leading batches retention.bytes deletes: as many as leave the log at least
        retention.bytes large (Kafka deletes whole segments while the rest stays above it)."""
        positions = self._positions
        if not positions:
            return 0
        excess = self._stream_end - positions[0] - self.config.retention_bytes
        if excess < 0:
            return 0
        if self._stream_end - positions[0] <= excess:
            return len(positions)
        return bisect_right(positions, positions[0] + excess) - 1

    # --- compaction ---

    def _batch_time(self, i: int, now: int) -> int:
        ts = self._max_ts[i]
        return ts if ts >= 0 else self._retention_ts.get(self._bases[i], now)

    def _cleanable(self, now: int) -> tuple[int, int, bool] | None:
        """(first dirty batch, first uncleanable batch, max.compaction.lag.ms passed) when the
        log has dirty batches the cleaner may touch. Every batch is a segment here: the last
        one is the active segment, the one holding the last stable offset and those younger
        than min.compaction.lag.ms (from the first dirty one on) are not cleanable."""
        config = self.config
        bases = self._bases
        if not config.compact_enabled or len(bases) < 2:
            return None
        end = len(bases) - 1
        stable = self.last_stable_offset
        if stable < self._end:
            end = min(end, max(bisect_right(bases, stable) - 1, 0))
        dirty = bisect_left(bases, self._cleaned_to, 0, end)
        lag = config.min_compaction_lag_ms
        if lag > 0:
            n = dirty
            while n < end and self._batch_time(n, now) <= now - lag:
                n += 1
            end = n
        if dirty >= end:
            return None
        max_lag = config.max_compaction_lag_ms
        overdue = 0 <= max_lag < now and self._batch_time(dirty, now) < now - max_lag
        return dirty, end, overdue

    def cleanable_ratio(self, now: int) -> float | None:
        """The dirty share of the cleanable log when it needs cleaning (more than
        min.cleanable.dirty.ratio, or dirty data older than max.compaction.lag.ms), else None
        (Kafka's LogToClean.cleanableRatio and the cleaner manager's choice)."""
        found = self._cleanable(now)
        if found is None:
            return None
        dirty, end, overdue = found
        positions = self._positions
        total = positions[end] - positions[0]
        ratio = (positions[end] - positions[dirty]) / total if total else 0.0
        if ratio > self.config.min_cleanable_dirty_ratio or overdue:
            return ratio
        return None

    def compact(self, now_ms: int | None = None) -> int:
        """One whole cleaning pass now, if the log needs one (see ``broker.log.cleaner``);
        returns the bytes freed. The broker's cleaner runs the same pass in slices."""
        now = self._clock() if now_ms is None else now_ms
        if self.cleanable_ratio(now) is None:
            return 0
        return run_to_end(self.cleaning_pass(now))

    def cleaning_pass(self, now: int, map_bytes: int = DEFAULT_MAP_BYTES):
        """Kafka's cleaning pass as a generator that yields after every batch (the driver
        decides when to give the event loop back) and returns the bytes freed. Offsets do
        not change: a batch keeps its base and last offset, consumers skip the gaps.

        It works on the batches as they are when each step runs: appends only add batches
        after the cleaned part; anything else that moves batches (retention, DeleteRecords,
        truncation, the memory budget) ends the pass with nothing changed."""
        found = self._cleanable(now)
        if found is None:
            return 0
        dirty, end, _overdue = found
        version = self._version
        bases, views = self._bases, self._views
        first_dirty = max(self._cleaned_to, bases[0])
        upper = bases[end]  # the first uncleanable offset
        # 1. the offset map of the dirty part
        offset_map = OffsetMap(map_bytes)
        aborted = [txn for txn in self.txn_index if txn.first_offset < upper]
        txns = CleanedTransactions(aborted)
        full = False
        for i in range(dirty, end):
            if (yield from map_batch_steps(offset_map, RecordBatch(views[i]), first_dirty,
                                           txns)):
                full = True
                break
            yield
            if self._version != version:
                return 0
        if not full:
            offset_map.latest_offset = upper - 1
        end_offset = offset_map.latest_offset + 1
        if end_offset <= first_dirty:
            logger.warning("log cleaner: one key does not fit log.cleaner.dedupe.buffer.size "
                           "(%d bytes); the log is left uncompacted", map_bytes)
            return 0
        # 2. every batch up to the end of the mapped part, filtered
        count = bisect_left(bases, end_offset, 0, end + 1)
        keep = BatchFilter(offset_map, CleanedTransactions(aborted),
                           last_records_of_producers(self), upper, now,
                           self.config.delete_retention_ms)
        kept, kept_bases, kept_positions, kept_max_ts, kept_running = [], [], [], [], []
        index_positions, since_index = [], 0
        interval = self.config.index_interval_bytes
        size, high = 0, NO_TIMESTAMP
        for i in range(count):
            view = views[i]
            out = yield from keep.filter_steps(RecordBatch(view))
            if out is not None:
                if isinstance(out, bytes):
                    out = memoryview(out)
                elif len(view.obj) != len(view):
                    out = memoryview(bytes(view))  # its own bytes: the shared buffer can go
                else:
                    out = view
                batch = RecordBatch(out)
                if since_index > interval:
                    index_positions.append(size)
                    since_index = 0
                since_index += len(out)
                kept.append(out)
                kept_bases.append(batch.base_offset)
                kept_positions.append(size)
                kept_max_ts.append(batch.max_timestamp)
                if batch.max_timestamp > high:
                    high = batch.max_timestamp
                kept_running.append(high)
                size += len(out)
            yield
            if self._version != version:
                return 0
        # 3. the cleaned batches take the place of the old ones, ending where they ended, so
        # the positions of the batches after them stay as they are
        positions = self._positions
        head_end = positions[count] if count < len(positions) else self._stream_end
        shift = head_end - size
        for j in range(0, len(kept_positions), 50_000):
            kept_positions[j:j + 50_000] = [p + shift for p in kept_positions[j:j + 50_000]]
            yield
            if self._version != version:
                return 0
        freed = head_end - positions[0] - size
        self._views[:count] = kept
        self._bases[:count] = kept_bases
        self._positions[:count] = kept_positions
        self._max_ts[:count] = kept_max_ts
        self._running_max[:count] = kept_running
        self._index_positions[:bisect_left(self._index_positions, head_end)] = [
            p + shift for p in index_positions]
        if self._retention_ts:
            survivors = set(kept_bases)
            self._retention_ts = {b: t for b, t in self._retention_ts.items()
                                  if b in survivors or b >= end_offset}
        self._max_cache = None
        self._cleaned_to = max(self._cleaned_to, end_offset)
        cleaned_end = self._bases[len(kept)] if len(kept) < len(self._bases) else self._end
        merge_retained_aborted(self.txn_index, keep.txns.retained_aborted, cleaned_end)
        self._version += 1
        if self.budget is not None and freed:
            self.budget.shrink(freed)
        return freed

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._closed = True

    def delete(self) -> None:
        self.close()
        if self.budget is not None:
            self.budget.forget(self)
        self._drop_back(0)


class MemoryBudget:
    """What in-memory storage may hold over all partitions (log.memory.max.bytes), enforced
    when data is appended: past it, the oldest batches go, first of whichever log holds the
    oldest, as retention.ms would drop them. Only logs whose cleanup.policy has "delete" give
    data up (retention never drops a compacted log's; compaction bounds those). Each time it
    is reached, a little more than the excess goes (1/64 of the budget), so the work is done
    once per that many bytes appended, not per append."""

    def __init__(self, max_bytes: int, clock: Callable[[], int] | None = None) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        self.dropped_bytes = 0  # kafka_log_memory_dropped_bytes_total
        self.logs: dict[int, MemoryLog] = {}
        self._clock = clock or wall_clock_ms
        self._warned = False

    def add(self, log: "MemoryLog") -> None:
        log.budget = self
        self.logs[id(log)] = log
        self.used += log.size_bytes

    def forget(self, log: "MemoryLog") -> None:
        if self.logs.pop(id(log), None) is not None:
            self.used -= log.size_bytes
            log.budget = None

    def grow(self, n: int) -> None:
        self.used += n
        if 0 <= self.max_bytes < self.used:
            self._make_room()

    def shrink(self, n: int) -> None:
        self.used -= n

    def _make_room(self) -> None:
        target = self.max_bytes - (self.max_bytes >> 6)
        now = self._clock()
        heap = [(log._batch_time(0, now), key, log) for key, log in self.logs.items()
                if log._bases and log.config.delete_enabled]
        heapq.heapify(heap)
        dropped = 0
        while heap and self.used > target:
            _oldest, key, log = heapq.heappop(heap)
            younger = heap[0][0] if heap else None
            bases, count, freed = log._bases, 0, 0
            need = self.used - target
            positions, end = log._positions, log._stream_end
            while count < len(bases) and freed < need and (
                    younger is None or log._batch_time(count, now) <= younger):
                count += 1
                freed = (positions[count] if count < len(positions) else end) - positions[0]
            dropped += log._drop_front(max(count, 1))
            if log._bases:
                heapq.heappush(heap, (log._batch_time(0, now), key, log))
        self.dropped_bytes += dropped
        if not self._warned:
            self._warned = True
            if dropped:
                logger.warning(
                    "in-memory storage reached log.memory.max.bytes (%d bytes): the oldest "
                    "records of topics with cleanup.policy=delete are dropped as retention "
                    "would, %d bytes now (kafka_log_memory_dropped_bytes_total counts them); "
                    "raise log.memory.max.bytes, lower retention, or use --data-dir",
                    self.max_bytes, dropped)
            else:
                logger.warning(
                    "in-memory storage holds %d bytes, more than log.memory.max.bytes (%d), "
                    "all of it in compacted logs, which retention does not drop", self.used,
                    self.max_bytes)

