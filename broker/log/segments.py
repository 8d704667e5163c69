"""SegmentLog: a partition log in segment files, laid out like Kafka's (Kafka's UnifiedLog and
LocalLog).

Directory ``<data_dir>/<topic>-<partition>/`` holds the segments, each a ``.log`` file of record
batches with its ``.index`` and ``.timeindex`` (``segment``: LogSegment), named by its base
offset (``files``), plus ``log-start-offset.checkpoint`` (version line, then the log start
offset), rewritten atomically (temp file, fsync, rename, fsync of the directory) whenever
DeleteRecords or retention moves the log start offset.

Opening (recovery)
    Every batch of the last segment is checked (header, CRC32C, offsets increasing); a torn or
    corrupt tail is truncated at the end of the last whole valid batch and a warning says how
    many bytes were dropped. Older segments were fsynced when they were rolled, so they are
    trusted if their index files pass a sanity check; if an index is missing or insane the
    segment is rescanned the same way, and (as Kafka does) corruption found in an older segment
    truncates it there and deletes every later segment. The log start offset is the larger of
    the checkpoint and the first segment's base offset; if the checkpoint is past everything that
    survived, the log restarts empty at the checkpointed offset.

Durability: the fsync policy (Kafka's flush.messages / flush.ms, alias
log.flush.interval.messages / log.flush.interval.ms)
    Default here, as in Kafka: never fsync on a message count or a timer. ``append`` returns after
    ``os.pwrite`` has handed the batches to the operating system, so an acknowledged write is in
    the OS page cache: it survives the broker process crashing or being killed with SIGKILL
    (kill -9), because the kernel still writes those pages to disk. It does NOT survive a power
    loss, kernel panic or VM reset: whatever the kernel had not yet written back (Linux
    typically writes dirty pages back within ~30 s) is lost, and on the next start the torn
    tail is truncated. Segments are fsynced when they are rolled and on ``close()`` (clean
    shutdown), as Kafka does. For stronger guarantees set flush.messages=1 (fdatasync before
    every append returns; slow) or a flush.ms interval and call ``maybe_flush`` periodically.
    Kafka itself relies on replication rather than fsync for durability; a single-broker
    development stand-in cannot, so this trade-off is the same as running Kafka with one broker.

Compaction (cleanup.policy=compact, ``cleaning_pass``)
    The cleaner's thread writes cleaned segments beside the log (``segment_cleaning``); on the
    event loop they are swapped in crash-safely (``_swap_in``), and opening a log finishes or
    drops a swap a crash interrupted. ``cleaner-offset.checkpoint`` (version line, then an
    offset) is where the next pass starts, Kafka's cleaner offset checkpoint.

segment.ms is counted from the first append into the segment by this process (or from opening
it), using the injected clock; Kafka counts from the first batch's timestamp, which rolls a
segment per append when producers send old timestamps. Deleted segments are unlinked at once
(Kafka renames them *.deleted and removes them after file.delete.delay.ms).
"""
from __future__ import annotations

import logging
import os
import shutil
import threading
from bisect import bisect_left, bisect_right
from typing import Callable

from protocol.records import HEADER_SIZE, LOG_OVERHEAD, CorruptRecordError, RecordBatch

from . import files, segment_cleaning
from .base import (
    INT_MAX,
    NO_TIMESTAMP,
    AppendInfo,
    LogConfig,
    OffsetOutOfRange,
    PartitionLog,
    first_record_at_or_after,
    offset_of_max_timestamp,
    prepare_append,
)
from .cleaner import (
    DEFAULT_MAP_BYTES,
    last_records_of_producers,
    merge_retained_aborted,
    run_to_end,
)
from .files import (
    CHECKPOINT_FILE,
    CHECKPOINT_VERSION,
    CLEANED_SUFFIX,
    CLEANER_CHECKPOINT_FILE,
    INDEX_SUFFIX,
    LAST_DELTA,
    LAST_DELTA_AT,
    LENGTH_AT,
    LOG_SUFFIX,
    MAX_TS,
    MAX_TS_AT,
    NEED_FOR_MAX_TS,
    NEED_FOR_NEXT,
    NEED_FOR_SIZE,
    SCAN_CHUNK,
    SEGMENT_NAME,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    Reader,
    atomic_write,
    segment_file_name,
    segment_path,
    write_all,
)
from .segment import LogSegment

__all__ = ["SegmentLog", "CHECKPOINT_FILE", "segment_file_name"]

logger = logging.getLogger("broker.log")

class SegmentLog(PartitionLog):
    """A partition log in segment files under ``directory`` (created if missing)."""

    def __init__(self, directory: str, config: LogConfig | None = None, *,
                 clock: Callable[[], int] | None = None):
        super().__init__(config, clock=clock)
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._start = 0
        self._end = 0
        self._size = 0
        self._unflushed_messages = 0
        self._last_flush_ms = self._clock()
        self._dir_dirty = False
        self._closed = False
        #: changes whenever segments are deleted, truncated or replaced (not when one rolls):
        #: a cleaning pass whose files are ready swaps them in only if it has not changed
        self._layout = 0
        #: where the next cleaning pass starts (Kafka's cleaner offset checkpoint)
        self._first_dirty: int | None = None
        self._cleaning_stop: threading.Event | None = None
        self._load()

    # --- offsets ---

    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def segment_base_offsets(self) -> list[int]:
        return list(self._bases)

    @property
    def _active(self) -> LogSegment:
        return self._segments[-1]

    # --- opening ---

    def _load(self) -> None:
        segment_cleaning.complete_swaps(self.directory)
        self._first_dirty = self._read_checkpoint(CLEANER_CHECKPOINT_FILE)
        bases = set()
        for name in os.listdir(self.directory):
            if name.endswith(TMP_SUFFIX):
                os.unlink(os.path.join(self.directory, name))  # an interrupted atomic write
                continue
            match = SEGMENT_NAME.match(name)
            if match and match.group(2) == "log":
                bases.add(int(match.group(1)))
        for name in os.listdir(self.directory):  # index files whose segment is gone
            match = SEGMENT_NAME.match(name)
            if match and match.group(2) != "log" and int(match.group(1)) not in bases:
                os.unlink(os.path.join(self.directory, name))
        checkpoint = self._read_checkpoint()
        segments = [LogSegment(self.directory, base) for base in sorted(bases)]
        for seg in segments:
            seg.size = os.path.getsize(seg.log_path)
        i = 0
        while i < len(segments):
            seg = segments[i]
            last = i == len(segments) - 1
            if not last and seg.load_indexes(segments[i + 1].base_offset):
                i += 1
                continue
            valid_end, next_offset = self._scan(seg)
            if valid_end < seg.size:
                dropped = seg.size - valid_end
                later = segments[i + 1:]
                logger.warning(
                    "partition log %s: truncating segment %s from byte %d: %d bytes of torn or "
                    "corrupt data dropped%s", self.directory, os.path.basename(seg.log_path),
                    valid_end, dropped,
                    f", and {len(later)} later segment(s) deleted" if later else "")
                os.truncate(seg.log_path, valid_end)
                seg.size = valid_end
                for stale in later:
                    stale.delete_files()
                del segments[i + 1:]
                last = True
            if not last and next_offset > segments[i + 1].base_offset:
                logger.warning("partition log %s: segment %s overlaps the next one; "
                               "deleting the later segments", self.directory, seg.log_path)
                for stale in segments[i + 1:]:
                    stale.delete_files()
                del segments[i + 1:]
                last = True
            seg.next_offset = next_offset
            if not last:
                seg.finish_time_index()
                seg.write_indexes()
            i += 1
        self._segments = segments
        self._bases = [seg.base_offset for seg in segments]
        if not segments:
            self._new_segment(checkpoint or 0)
        active = self._active
        active.open(writable=True)
        for stale in (active.index_path, active.time_index_path):
            try:  # the active segment's indexes live in memory until it rolls or closes
                os.unlink(stale)
            except FileNotFoundError:
                pass
        if active.size:
            active.rolling_base_ms = self._clock()
        self._end = active.next_offset
        self._size = sum(seg.size for seg in self._segments)
        self._start = max(checkpoint or 0, self._segments[0].base_offset)
        if self._start > self._end:
            logger.warning(
                "partition log %s: log start offset %d from the checkpoint is past the log end "
                "offset %d; restarting the log empty at %d", self.directory, self._start,
                self._end, self._start)
            self._truncate_fully_and_start_at(self._start)
        self._delete_segments(self._count_deletable(self._breached_by_start))

    def _scan(self, seg: LogSegment, *, validate: bool = True) -> tuple[int, int]:
        """Read every batch of a segment, rebuilding its in-memory indexes; stop at the first
        torn or corrupt batch. Returns (end of the valid data, next offset)."""
        seg.reset_indexes()
        fd = seg.open()
        reader = Reader(fd, seg.size, SCAN_CHUNK)
        interval = self.config.index_interval_bytes
        pos = 0
        expected = seg.base_offset
        while pos < seg.size:
            got = reader.ensure(pos, HEADER_SIZE)
            if got is None:
                break
            buf, rel = got
            _base, length = LENGTH_AT.unpack_from(buf, rel)
            size = LOG_OVERHEAD + length
            if length < HEADER_SIZE - LOG_OVERHEAD:
                break
            got = reader.ensure(pos, size)
            if got is None:
                break
            buf, rel = got
            try:
                batch = RecordBatch(buf, rel)
                if validate:
                    batch.validate()
            except CorruptRecordError:
                break
            if batch.base_offset < expected or batch.last_offset_delta < 0:
                break
            seg.add_batch(pos, size, batch.base_offset, batch.max_timestamp, interval)
            expected = batch.next_offset
            pos += size
        return pos, expected

    def _read_checkpoint(self, name: str = CHECKPOINT_FILE) -> int | None:
        path = os.path.join(self.directory, name)
        try:
            with open(path, "r", encoding="ascii") as f:
                lines = f.read().split()
            if len(lines) >= 2 and int(lines[0]) == CHECKPOINT_VERSION:
                value = int(lines[1])
                return value if value >= 0 else None
        except (OSError, ValueError):
            pass
        return None

    def _write_checkpoint(self, name: str = CHECKPOINT_FILE, offset: int | None = None) -> None:
        value = self._start if offset is None else offset
        atomic_write(os.path.join(self.directory, name),
                      f"{CHECKPOINT_VERSION}\n{value}\n".encode("ascii"), durable=True)

    # --- segments ---

    def _new_segment(self, base_offset: int) -> LogSegment:
        seg = LogSegment(self.directory, base_offset)
        fd = seg.open(writable=True)
        os.ftruncate(fd, 0)  # a leftover file of that name holds nothing we still need
        for stale in (seg.index_path, seg.time_index_path):
            try:
                os.unlink(stale)
            except FileNotFoundError:
                pass
        self._segments.append(seg)
        self._bases.append(base_offset)
        self._dir_dirty = True
        return seg

    def _roll(self) -> LogSegment:
        """Close the active segment for appends (fsync it, write its indexes) and start a new
        one at the log end offset."""
        old = self._active
        old.finish_time_index()
        if old.fd is not None:
            files.sync_data(old.fd)
        old.write_indexes()
        old.next_offset = self._end
        return self._new_segment(self._end)

    def _should_roll(self, seg: LogSegment, incoming: int, last_offset: int, now: int) -> bool:
        if seg.size == 0:
            return False
        config = self.config
        if seg.size + incoming > min(config.segment_bytes, INT_MAX):
            return True
        roll_ms = config.segment_ms
        if config.compact_enabled and config.max_compaction_lag_ms > 0:
            roll_ms = min(roll_ms, config.max_compaction_lag_ms)  # Kafka's maxSegmentMs
        if seg.rolling_base_ms is not None and now - seg.rolling_base_ms > roll_ms:
            return True
        return last_offset - seg.base_offset > INT_MAX  # relative offsets are int32

    # --- append / read ---

    def append(self, batches, *, log_append_time: int | None = None,
               partition_leader_epoch: int | None = None) -> AppendInfo:
        if self._closed:
            raise ValueError("log is closed")
        buf, entries = prepare_append(batches, self._end, log_append_time, partition_leader_epoch)
        now = self._clock()
        first_offset = self._end
        next_offset = entries[-1][3]
        seg = self._active
        if self._should_roll(seg, len(buf), next_offset - 1, now):
            seg = self._roll()
        fd = seg.fd if seg.writable else seg.open(writable=True)
        position = seg.size
        try:
            write_all(fd, buf, position)
        except OSError:
            try:  # leave no partial batch behind (e.g. disk full)
                os.ftruncate(fd, position)
            except OSError:
                pass
            raise
        interval = self.config.index_interval_bytes
        append_max = NO_TIMESTAMP
        for rel_pos, size, base, _next, max_ts in entries:
            seg.add_batch(position + rel_pos, size, base, max_ts, interval)
            if max_ts > append_max:
                append_max = max_ts
        if seg.rolling_base_ms is None:
            seg.rolling_base_ms = now
        seg.size = position + len(buf)
        seg.next_offset = next_offset
        self._size += len(buf)
        self._end = next_offset
        self._unflushed_messages += next_offset - first_offset
        config = self.config
        if (self._unflushed_messages >= config.flush_messages
                or now - self._last_flush_ms >= config.flush_ms):
            self._flush(now)
        return AppendInfo(
            first_offset=first_offset, last_offset=next_offset - 1,
            log_append_time=-1 if log_append_time is None else log_append_time,
            log_start_offset=self._start, max_timestamp=append_max, size=len(buf),
            batch_count=len(entries))

    def _locate(self, seg: LogSegment, reader: Reader, offset: int):
        """(position, size, base offset) of the first batch of ``seg`` whose last offset is
        >= offset."""
        pos = seg.lookup_position(offset)
        size_limit = reader.limit
        while pos < size_limit:
            got = reader.ensure(pos, NEED_FOR_NEXT)
            if got is None:
                return None
            buf, rel = got
            base, length = LENGTH_AT.unpack_from(buf, rel)
            size = LOG_OVERHEAD + length
            if base + LAST_DELTA.unpack_from(buf, rel + LAST_DELTA_AT)[0] >= offset:
                return pos, size, base
            pos += size
        return None

    def _batch_end(self, seg: LogSegment, reader: Reader, pos: int, limit: int) -> int:
        """Starting from the batch boundary ``pos``, the end of the last whole batch that ends
        at or before ``limit`` (and the reader's limit); jumps ahead with the offset index
        instead of walking every header."""
        end_limit = min(limit, reader.limit)
        i = bisect_right(seg.idx_pos, end_limit) - 1
        if i >= 0 and seg.idx_pos[i] > pos:
            pos = seg.idx_pos[i]  # a batch boundary; everything before it fits
        while pos < end_limit:
            got = reader.ensure(pos, NEED_FOR_SIZE)
            if got is None:
                break
            buf, rel = got
            size = LOG_OVERHEAD + LENGTH_AT.unpack_from(buf, rel)[1]
            if pos + size > end_limit:
                break
            pos += size
        return pos

    def _position_of(self, offset: int) -> tuple[int, int]:
        """(segment index, file position) of the batch that starts at ``offset`` (a batch
        boundary below the log end offset), or of the first batch after it."""
        index = bisect_right(self._bases, offset) - 1
        seg = self._segments[index]
        fd = seg.fd if seg.fd is not None else seg.open()
        found = self._locate(seg, Reader(fd, seg.size, 1 << 16), offset)
        return index, seg.size if found is None else found[0]

    def read(self, offset: int, max_bytes: int, *, min_one_message: bool = True,
             max_offset: int | None = None):
        if offset < self._start or offset > self._end:
            raise OffsetOutOfRange(offset, self._start, self._end)
        if offset == self._end:
            return b""
        segments = self._segments
        last_index, last_limit = len(segments) - 1, None  # the read may not pass these
        if max_offset is not None and max_offset < self._end:
            if offset >= max_offset:
                return b""
            last_index, last_limit = self._position_of(max_offset)
        index = bisect_right(self._bases, offset) - 1
        budget = max(max_bytes, 0)
        chunk = budget + 2 * self.config.index_interval_bytes + 4096
        pieces = []
        first = True
        while index <= last_index:
            seg = segments[index]
            limit = seg.size if index < last_index or last_limit is None else last_limit
            index += 1
            if limit == 0:
                continue
            fd = seg.fd if seg.fd is not None else seg.open()
            reader = Reader(fd, limit, chunk)
            if first:
                found = self._locate(seg, reader, offset)
                if found is None:
                    continue  # nothing at or after offset here; try the next segment
                start, first_size, _base = found
                first = False
                if first_size > budget:
                    if not min_one_message:
                        return b""
                    return reader.slice(start, start + first_size)
            else:
                start = 0
                got = reader.ensure(0, NEED_FOR_SIZE)
                if got is None:
                    break
                first_size = LOG_OVERHEAD + LENGTH_AT.unpack_from(*got)[1]
                if first_size > budget:
                    break
            end = self._batch_end(seg, reader, start + first_size, start + budget)
            pieces.append(reader.slice(start, end))
            budget -= end - start
            if end < limit or budget <= 0:
                break
        if not pieces:
            return b""
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def fetch_upper_bound(self, offset: int, size: int) -> int:
        segments = self._segments
        index = bisect_right(self._bases, offset) - 1
        seg = segments[index]
        fd = seg.fd if seg.fd is not None else seg.open()
        found = self._locate(seg, Reader(fd, seg.size, 1 << 16), offset)
        if found is None and index + 1 < len(segments):
            index += 1  # the read started at the next segment
            seg = segments[index]
        target = size if found is None else found[0] + size
        # Kafka reads within one segment; a read here that went on into the next ones ends in
        # the segment where its bytes ran out
        while target > seg.size and index + 1 < len(segments):
            target -= seg.size
            index += 1
            seg = segments[index]
        i = bisect_left(seg.idx_pos, target)
        if i < len(seg.idx_pos):
            fd = seg.fd if seg.fd is not None else seg.open()
            got = Reader(fd, seg.size, NEED_FOR_NEXT).ensure(seg.idx_pos[i], NEED_FOR_NEXT)
            if got is not None:
                buf, rel = got
                base = LENGTH_AT.unpack_from(buf, rel)[0]
                return base + LAST_DELTA.unpack_from(buf, rel + LAST_DELTA_AT)[0]
        if index + 1 < len(segments):
            return segments[index + 1].base_offset
        return self._end

    def _iter_batch_headers(self, seg: LogSegment, reader: Reader, pos: int):
        """Yield (position, size, base offset, next offset, max timestamp) from ``pos`` on."""
        while pos < seg.size:
            got = reader.ensure(pos, NEED_FOR_MAX_TS)
            if got is None:
                return
            buf, rel = got
            base, length = LENGTH_AT.unpack_from(buf, rel)
            size = LOG_OVERHEAD + length
            next_offset = base + LAST_DELTA.unpack_from(buf, rel + LAST_DELTA_AT)[0] + 1
            yield pos, size, base, next_offset, MAX_TS.unpack_from(buf, rel + MAX_TS_AT)[0]
            pos += size

    # --- ListOffsets ---

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        start_offset = self._start
        for i in range(max(bisect_right(self._bases, start_offset) - 1, 0), len(self._segments)):
            seg = self._segments[i]
            if seg.size == 0 or seg.max_ts < timestamp:
                continue
            from_offset = max(seg.start_offset_for_timestamp(timestamp), start_offset)
            fd = seg.fd if seg.fd is not None else seg.open()
            reader = Reader(fd, seg.size, 1 << 16)
            for pos, size, _base, next_offset, max_ts in self._iter_batch_headers(
                    seg, reader, seg.lookup_position(from_offset)):
                if next_offset <= start_offset or max_ts < timestamp:
                    continue
                got = reader.ensure(pos, size)
                if got is None:
                    break
                found = first_record_at_or_after(RecordBatch(*got), timestamp, start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        # Only batches holding offsets >= the log start offset count (MemoryLog drops the rest;
        # here the segment holding the log start offset may still keep older batches).
        best_ts, best_seg, best_base = NO_TIMESTAMP, None, 0
        segments = self._segments
        for i, seg in enumerate(segments):
            upper = segments[i + 1].base_offset if i + 1 < len(segments) else self._end
            if seg.size == 0 or upper <= self._start:
                continue
            if seg.max_ts_offset >= self._start:
                ts, base = seg.max_ts, seg.max_ts_offset
            else:
                ts, base = self._max_timestamp_from(seg, self._start)
            if ts > best_ts:
                best_ts, best_seg, best_base = ts, seg, base
        if best_seg is None:
            return None
        fd = best_seg.fd if best_seg.fd is not None else best_seg.open()
        reader = Reader(fd, best_seg.size, 1 << 16)
        for pos, size, base, _next, _max_ts in self._iter_batch_headers(
                best_seg, reader, best_seg.lookup_position(best_base)):
            if base >= best_base:
                got = reader.ensure(pos, size)
                if got is None:
                    break
                return offset_of_max_timestamp(RecordBatch(*got)), best_ts
        return best_base, best_ts

    def _max_timestamp_from(self, seg: LogSegment, offset: int) -> tuple[int, int]:
        """(max timestamp, base offset of the first batch with it) over the batches of ``seg``
        that hold offsets >= ``offset``; scans the segment's headers (rare: ListOffsets -3 after
        DeleteRecords moved the log start offset past the segment's max)."""
        fd = seg.fd if seg.fd is not None else seg.open()
        reader = Reader(fd, seg.size, 1 << 20)
        best_ts, best_base = NO_TIMESTAMP, seg.base_offset
        for _pos, _size, base, next_offset, max_ts in self._iter_batch_headers(
                seg, reader, seg.lookup_position(offset)):
            if next_offset > offset and max_ts > best_ts:
                best_ts, best_base = max_ts, base
        return best_ts, best_base

    # --- moving the ends ---

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        self._layout += 1
        for seg in self._segments:
            seg.delete_files()
        self._segments, self._bases = [], []
        self._new_segment(offset)
        self._start = self._end = offset
        self._size = 0
        self._active.next_offset = offset
        self._write_checkpoint()
        self.txn_index.clear()

    def truncate_to(self, offset: int) -> None:
        if offset >= self._end:
            return
        if offset <= self._start:
            self._truncate_fully_and_start_at(offset)
            return
        keep = bisect_right(self._bases, offset) - 1
        seg = self._segments[keep]
        self._layout += 1
        fd = seg.open(writable=True)
        found = self._locate(seg, Reader(fd, seg.size, 1 << 16), offset)
        if found is not None and found[2] < self._start:
            # the batch to remove also holds the log start offset: nothing readable is left
            self._truncate_fully_and_start_at(self._start)
            return
        for later in self._segments[keep + 1:]:
            self._size -= later.size
            later.delete_files()
        del self._segments[keep + 1:], self._bases[keep + 1:]
        if found is not None:
            cut = found[0]
            os.ftruncate(fd, cut)
            self._size -= seg.size - cut
            seg.size = cut
        for stale in (seg.index_path, seg.time_index_path):
            try:
                os.unlink(stale)
            except FileNotFoundError:
                pass
        _valid_end, seg.next_offset = self._scan(seg, validate=False)
        seg.rolling_base_ms = None
        self._end = seg.next_offset
        self.txn_index.truncate_to(self._end)

    def delete_records_before(self, offset: int) -> int:
        offset = self._check_delete_records_offset(offset)
        if offset > self._start:
            self._start = offset
            self._write_checkpoint()
            self._delete_segments(self._count_deletable(self._breached_by_start))
            self._log_start_moved()
        return self._start

    def _breached_by_start(self, seg: LogSegment, next_seg: LogSegment | None) -> bool:
        return next_seg is not None and next_seg.base_offset <= self._start

    def _count_deletable(self, predicate) -> int:
        """How many leading segments Kafka's deletableSegments would delete: stop at the first
        one the predicate keeps; never the active segment when it is empty."""
        segments = self._segments
        count = 0
        for i, seg in enumerate(segments):
            next_seg = segments[i + 1] if i + 1 < len(segments) else None
            if next_seg is None and seg.size == 0:
                break
            if not predicate(seg, next_seg):
                break
            count += 1
        return count

    def _delete_segments(self, count: int) -> int:
        if count <= 0:
            return 0
        self._layout += 1
        if count == len(self._segments):
            self._roll()  # keep an (empty) active segment at the log end offset
        freed = 0
        for seg in self._segments[:count]:
            freed += seg.size
            seg.delete_files()
        del self._segments[:count], self._bases[:count]
        self._size -= freed
        self._dir_dirty = True
        if self._bases[0] > self._start:
            self._start = self._bases[0]
            self._write_checkpoint()
            self._log_start_moved()
        return freed

    def apply_retention(self, now_ms: int | None = None) -> int:
        config = self.config
        freed = 0
        if config.delete_enabled:
            now = self._clock() if now_ms is None else now_ms
            if config.retention_ms >= 0:
                retention_ms = config.retention_ms
                freed += self._delete_segments(self._count_deletable(
                    lambda seg, _next: now - seg.largest_timestamp() > retention_ms))
            if config.retention_bytes >= 0 and self._size >= config.retention_bytes:
                diff = self._size - config.retention_bytes

                def size_breached(seg: LogSegment, _next) -> bool:
                    nonlocal diff
                    if diff - seg.size >= 0:
                        diff -= seg.size
                        return True
                    return False

                freed += self._delete_segments(self._count_deletable(size_breached))
        freed += self._delete_segments(self._count_deletable(self._breached_by_start))
        return freed

    # --- compaction ---

    def _cleanable(self, now: int):
        """Where a cleaning pass would work, when the log has dirty segments the cleaner may
        touch (Kafka's cleanableOffsets and calculateCleanableBytes): (first uncleanable
        segment's index, first dirty offset, first uncleanable offset, clean bytes, cleanable
        bytes, max.compaction.lag.ms passed). Never the active segment, nothing from the
        segment holding the last stable offset on, no segment younger than
        min.compaction.lag.ms."""
        config = self.config
        segments, bases = self._segments, self._bases
        if not config.compact_enabled or len(segments) < 2:
            return None
        first_dirty = self._first_dirty
        if first_dirty is None or not self._start <= first_dirty <= self._end:
            first_dirty = self._start
        dirty_index = max(bisect_right(bases, first_dirty) - 1, 0)
        uncleanable = min(self.last_stable_offset, segments[-1].base_offset)
        lag = config.min_compaction_lag_ms
        if lag > 0:
            for seg in segments[dirty_index:-1]:
                if seg.largest_timestamp() > now - lag:
                    uncleanable = min(uncleanable, seg.base_offset)
                    break
        index = bisect_right(bases, max(first_dirty, uncleanable)) - 1
        first_uncleanable = bases[index]
        if first_dirty >= first_uncleanable:
            return None
        cleanable = sum(seg.size for seg in segments[dirty_index:index])
        if not cleanable:
            return None
        clean = sum(seg.size for seg in segments if seg.base_offset < first_dirty)
        overdue = False
        max_lag = config.max_compaction_lag_ms
        if 0 <= max_lag < now:
            for seg in segments[dirty_index:index]:
                first_ts = self._first_batch_timestamp(seg)
                if 0 < first_ts < now - max_lag:
                    overdue = True
                    break
        return index, first_dirty, first_uncleanable, clean, cleanable, overdue

    def _first_batch_timestamp(self, seg: LogSegment) -> int:
        fd = seg.fd if seg.fd is not None else seg.open()
        got = Reader(fd, seg.size, NEED_FOR_MAX_TS).ensure(0, NEED_FOR_MAX_TS)
        return NO_TIMESTAMP if got is None else MAX_TS.unpack_from(got[0], got[1] + MAX_TS_AT)[0]

    def cleanable_ratio(self, now: int) -> float | None:
        found = self._cleanable(now)
        if found is None:
            return None
        _index, _dirty, _upper, clean, cleanable, overdue = found
        ratio = cleanable / (clean + cleanable)
        if ratio > self.config.min_cleanable_dirty_ratio or overdue:
            return ratio
        return None

    def compact(self, now_ms: int | None = None) -> int:
        """One whole cleaning pass now, file work included, in this thread (tests and tools;
        the broker's LogCleaner does the file work in its own thread)."""
        now = self._clock() if now_ms is None else now_ms
        if self.cleanable_ratio(now) is None:
            return 0
        return run_to_end(self.cleaning_pass(now))

    def cleaning_pass(self, now: int, map_bytes: int = DEFAULT_MAP_BYTES):
        """Kafka's cleaning pass over the segment files: the generator yields the file work
        (a callable, see ``segment_cleaning.clean_files``) once, gets its result back, and
        swaps the cleaned segments in, which takes a few renames. Returns the bytes freed.

        The swap is crash-safe as Kafka's: each cleaned segment is written and fsynced as
        ``*.cleaned``, renamed ``*.swap`` (the log file first), then the segments it replaces
        are deleted and the ``.swap`` files take their names (the log file last); opening the
        log finishes or drops an interrupted swap (``segment_cleaning.complete_swaps``). A pass
        whose segments were deleted, truncated or replaced meanwhile swaps nothing in."""
        found = self._cleanable(now)
        if found is None:
            return 0
        index, first_dirty, first_uncleanable, _clean, _cleanable, _overdue = found
        config = self.config
        stop = threading.Event()
        job = segment_cleaning.CleaningJob(
            directory=self.directory,
            segments=[(seg.base_offset, seg.size) for seg in self._segments[:index]],
            first_dirty=first_dirty, first_uncleanable=first_uncleanable, now=now,
            delete_retention_ms=config.delete_retention_ms,
            segment_bytes=min(config.segment_bytes, INT_MAX),
            index_interval_bytes=config.index_interval_bytes,
            aborted=[txn for txn in self.txn_index if txn.first_offset < first_uncleanable],
            last_records=last_records_of_producers(self), map_bytes=map_bytes, stop=stop)
        layout = self._layout
        self._cleaning_stop = stop
        try:
            result = yield lambda: segment_cleaning.clean_files(job)
        finally:
            stop.set()  # a closed generator: the thread stops at its next batch
            self._cleaning_stop = None
        if isinstance(result, BaseException):
            if not isinstance(result, segment_cleaning.CleaningAborted):
                logger.warning("partition log %s: cleaning failed: %s", self.directory, result)
            return 0
        if self._layout != layout or self._closed:
            for cleaned in result.cleaned:
                segment_cleaning.remove_cleaned(self.directory, cleaned.base_offset)
            return 0
        if not result.cleaned:
            return 0
        freed = self._swap_in(result.cleaned)
        cleaned_end = self._bases[len(result.cleaned)]
        merge_retained_aborted(self.txn_index, result.retained_aborted, cleaned_end)
        self._first_dirty = result.end_offset
        self._write_checkpoint(CLEANER_CHECKPOINT_FILE, result.end_offset)
        return freed

    def _stop_cleaning(self) -> None:
        self._layout += 1
        if self._cleaning_stop is not None:
            self._cleaning_stop.set()

    def _swap_in(self, cleaned_segments: list) -> int:
        directory = self.directory
        freed = 0
        for cleaned in cleaned_segments:
            base = cleaned.base_offset
            i = bisect_left(self._bases, base)
            olds = self._segments[i:i + len(cleaned.replaces)]
            if [old.base_offset for old in olds] != cleaned.replaces:
                raise RuntimeError(f"cleaned segment {base} replaces {cleaned.replaces}, "
                                   f"found {[old.base_offset for old in olds]}")
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                os.rename(segment_path(directory, base, suffix + CLEANED_SUFFIX),
                          segment_path(directory, base, suffix + SWAP_SUFFIX))
            files.fsync_dir(directory)
            for old in olds:
                old.delete_files()
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
                os.rename(segment_path(directory, base, suffix + SWAP_SUFFIX),
                          segment_path(directory, base, suffix))
            files.fsync_dir(directory)
            seg = LogSegment(directory, base)
            seg.size = cleaned.size
            seg.idx_rel, seg.idx_pos = cleaned.idx_rel, cleaned.idx_pos
            seg.time_ts, seg.time_rel = cleaned.time_ts, cleaned.time_rel
            seg.max_ts, seg.max_ts_offset = cleaned.max_ts, cleaned.max_ts_offset
            following = i + len(olds)
            seg.next_offset = self._bases[following]
            old_size = sum(old.size for old in olds)
            self._segments[i:following] = [seg]
            self._bases[i:following] = [base]
            self._size += seg.size - old_size
            freed += old_size - seg.size
        self._layout += 1
        return freed

    # --- flushing and closing ---

    def _flush(self, now: int) -> None:
        fd = self._active.fd
        if fd is not None:
            files.sync_data(fd)
        if self._dir_dirty:
            files.fsync_dir(self.directory)
            self._dir_dirty = False
        self._unflushed_messages = 0
        self._last_flush_ms = now

    def flush(self) -> None:
        """fsync the active segment (older ones were fsynced when rolled)."""
        if not self._closed:
            self._flush(self._clock())

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        if self._closed:
            return False
        now = self._clock() if now_ms is None else now_ms
        if self._unflushed_messages and now - self._last_flush_ms >= self.config.flush_ms:
            self._flush(now)
            return True
        return False

    def close(self) -> None:
        if self._closed:
            return
        self._stop_cleaning()
        active = self._active
        self._flush(self._clock())
        active.finish_time_index()
        active.write_indexes(durable=True)
        self._write_checkpoint()
        for seg in self._segments:
            seg.close()
        self._closed = True

    def delete(self) -> None:
        self._stop_cleaning()
        for seg in self._segments:
            seg.close()
        self._closed = True
        shutil.rmtree(self.directory, ignore_errors=True)
