"""LogSegment: one segment of a partition log, its file and its offset and time indexes
(Kafka's LogSegment, OffsetIndex and TimeIndex).

Files, named by the segment's base offset zero-padded to 20 digits (``files``):

- ``00000000000000000000.log``: the record batches, byte for byte as in Kafka's .log files
  (kafka-dump-log can read them);
- ``.index``: sparse offset index, 8-byte entries (int32 offset relative to the segment's base
  offset, int32 file position), one entry whenever more than index.interval.bytes were appended
  since the previous entry. Our entries name the batch's *base* offset (Kafka's name its last
  offset); either way a lookup yields a batch start at or before the wanted batch;
- ``.timeindex``: 12-byte entries (int64 max timestamp so far, int32 relative offset of the
  batch that first reached it), added at the same points when the max timestamp grew, plus a
  final entry when the segment is rolled or closed, so its last entry is the segment's max
  timestamp.

Index files are written when a segment is rolled and on close (atomically, via temp file and
rename), not on every append. The active segment's indexes live in memory and are rebuilt on
open; a closed segment's are loaded if they pass a sanity check (``load_indexes``).
"""
from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right

from .base import NO_TIMESTAMP
from .files import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    OFFSET_INDEX_ENTRY,
    TIME_INDEX_ENTRY,
    TIME_INDEX_SUFFIX,
    atomic_write,
    segment_file_name,
)

__all__ = ["LogSegment"]


class LogSegment:
    """One segment: its file and in-memory indexes."""

    __slots__ = (
        "base_offset", "log_path", "fd", "writable", "size", "idx_rel", "idx_pos", "time_ts",
        "time_rel", "max_ts", "max_ts_offset", "bytes_since_index", "rolling_base_ms",
        "next_offset",
    )

    def __init__(self, directory: str, base_offset: int):
        self.base_offset = base_offset
        self.log_path = os.path.join(directory, segment_file_name(base_offset))
        self.fd: int | None = None
        self.writable = False
        self.size = 0
        self.next_offset = base_offset  # exact for the active segment only
        self.rolling_base_ms: int | None = None
        self.reset_indexes()

    def reset_indexes(self) -> None:
        self.idx_rel = array("i")
        self.idx_pos = array("i")
        self.time_ts = array("q")
        self.time_rel = array("i")
        self.max_ts = NO_TIMESTAMP
        self.max_ts_offset = self.base_offset
        self.bytes_since_index = 0

    @property
    def index_path(self) -> str:
        return self.log_path[:-len(LOG_SUFFIX)] + INDEX_SUFFIX

    @property
    def time_index_path(self) -> str:
        return self.log_path[:-len(LOG_SUFFIX)] + TIME_INDEX_SUFFIX

    def open(self, *, writable: bool = False) -> int:
        if self.fd is not None and (self.writable or not writable):
            return self.fd
        if self.fd is not None:
            os.close(self.fd)
        flags = (os.O_RDWR | os.O_CREAT) if writable else os.O_RDONLY
        self.fd = os.open(self.log_path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        self.writable = writable
        return self.fd

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            self.writable = False

    def add_batch(self, position: int, size: int, base: int, max_ts: int, interval: int) -> None:
        if max_ts > self.max_ts:
            self.max_ts = max_ts
            self.max_ts_offset = base
        if self.bytes_since_index > interval:
            self.idx_rel.append(base - self.base_offset)
            self.idx_pos.append(position)
            if self.max_ts > (self.time_ts[-1] if self.time_ts else NO_TIMESTAMP):
                self.time_ts.append(self.max_ts)
                self.time_rel.append(self.max_ts_offset - self.base_offset)
            self.bytes_since_index = 0
        self.bytes_since_index += size

    def finish_time_index(self) -> None:
        if self.max_ts > (self.time_ts[-1] if self.time_ts else NO_TIMESTAMP):
            self.time_ts.append(self.max_ts)
            self.time_rel.append(self.max_ts_offset - self.base_offset)

    def lookup_position(self, offset: int) -> int:
        """File position of a batch start at or before the batch containing ``offset``."""
        i = bisect_right(self.idx_rel, offset - self.base_offset) - 1
        return self.idx_pos[i] if i >= 0 else 0

    def start_offset_for_timestamp(self, timestamp: int) -> int:
        """An offset before which no batch of this segment has max timestamp >= timestamp."""
        i = bisect_right(self.time_ts, timestamp) - 1
        return self.base_offset + self.time_rel[i] if i >= 0 else self.base_offset

    def largest_timestamp(self) -> int:
        """Kafka's LogSegment.largestTimestamp: the max timestamp, else the file's mtime."""
        if self.max_ts >= 0:
            return self.max_ts
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except OSError:
            return NO_TIMESTAMP

    def index_data(self) -> tuple[bytes, bytes]:
        """The bytes of the .index and .timeindex files."""
        n = len(self.idx_rel)
        values = [0] * (2 * n)
        values[0::2] = self.idx_rel
        values[1::2] = self.idx_pos
        n = len(self.time_ts)
        tvalues: list[int] = [0] * (2 * n)
        tvalues[0::2] = self.time_ts
        tvalues[1::2] = self.time_rel
        return struct.pack(f">{len(values)}i", *values), struct.pack(">" + "qi" * n, *tvalues)

    def write_indexes(self, *, durable: bool = False) -> None:
        index, time_index = self.index_data()
        atomic_write(self.index_path, index, durable=durable)
        atomic_write(self.time_index_path, time_index, durable=durable)

    def load_indexes(self, next_base: int) -> bool:
        """Load the index files of a closed segment; False if missing or failing sanity checks
        (then the caller rebuilds them by scanning the segment)."""
        try:
            with open(self.index_path, "rb") as f:
                index_data = f.read()
            with open(self.time_index_path, "rb") as f:
                time_data = f.read()
        except OSError:
            return False
        if len(index_data) % OFFSET_INDEX_ENTRY or len(time_data) % TIME_INDEX_ENTRY:
            return False
        n = len(index_data) // OFFSET_INDEX_ENTRY
        values = struct.unpack(f">{2 * n}i", index_data)
        rel, pos = array("i", values[0::2]), array("i", values[1::2])
        span = next_base - self.base_offset
        if n and (rel[0] < 0 or rel[-1] >= span or pos[0] <= 0 or pos[-1] >= self.size):
            return False
        if any(rel[i] >= rel[i + 1] or pos[i] >= pos[i + 1] for i in range(n - 1)):
            return False
        n = len(time_data) // TIME_INDEX_ENTRY
        tvalues = struct.unpack(">" + "qi" * n, time_data)
        ts, trel = array("q", tvalues[0::2]), array("i", tvalues[1::2])
        if self.size > 0 and n == 0:
            return False  # the final entry (the segment's max timestamp) is missing
        if n and (trel[0] < 0 or trel[-1] >= span):
            return False
        if any(ts[i] >= ts[i + 1] or trel[i] > trel[i + 1] for i in range(n - 1)):
            return False
        self.idx_rel, self.idx_pos, self.time_ts, self.time_rel = rel, pos, ts, trel
        if n:
            self.max_ts = ts[-1]
            self.max_ts_offset = self.base_offset + trel[-1]
        self.next_offset = next_base
        return True

    def delete_files(self) -> None:
        self.close()
        for path in (self.log_path, self.index_path, self.time_index_path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
