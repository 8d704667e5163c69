"""What every partition log offers, and the per-batch work shared by the backends.

A partition log stores magic-v2 record batches exactly as producers sent them, except that the
log rewrites each batch's base offset (and, when asked, its partition leader epoch and its
LogAppendTime timestamp). All work is per batch: records are never decoded on the append or read
paths. Record-level decoding happens only in ``offset_for_timestamp`` and
``max_timestamp_offset`` (ListOffsets by time), and only for the one batch that matches.

Offsets follow Kafka's vocabulary:

- ``log_start_offset``: the first offset a consumer may read. It may point into the middle of a
  batch (after DeleteRecords); such a batch is still returned whole and clients skip the records
  before the offset they asked for.
- ``log_end_offset``: the offset the next appended record gets. With a single replica this is also
  the high watermark, and ListOffsets(latest) answers it.
"""
from __future__ import annotations

import abc
import struct
import time
from bisect import bisect_left
from typing import Callable, Mapping, NamedTuple


from protocol import records as _records
from protocol.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    CorruptRecordError,
    RecordBatch,
    iter_batches,
)

from ..values import Values

__all__ = [
    "AbortedTxn", "AppendInfo", "InvalidRecordError", "LogConfig", "OffsetOutOfRange",
    "PartitionLog", "TxnIndex", "prepare_append", "validate_batches", "wall_clock_ms",
    "NO_TIMESTAMP",
]

NO_TIMESTAMP = -1
LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

# The header fields the log needs, read in one unpack: baseOffset, batchLength,
# partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta, baseTimestamp, maxTimestamp.
_HEAD = struct.Struct(">qiibIhiqq")
_BASE_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
PARTITION_LEADER_EPOCH_OFFSET = 12
MAX_TIMESTAMP_OFFSET = 35


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class OffsetOutOfRange(Exception):
    """The requested offset is below the log start offset or above the log end offset.

    The fetch handler answers OFFSET_OUT_OF_RANGE (error code 1) for it.
    """

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int):
        super().__init__(
            f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class InvalidRecordError(CorruptRecordError):
    """A batch whose CRC is fine but whose header breaks Kafka's rules (Kafka's
    InvalidRecordException, error INVALID_RECORD = 87), e.g. a record count that disagrees with
    the batch's offset range. Plain CorruptRecordError maps to CORRUPT_MESSAGE (2)."""


class LogConfig(Values):
    """The topic configs a partition log obeys, named after Kafka's topic-level keys.

    Defaults are Kafka's broker defaults. ``-1`` means unlimited for the retention settings;
    the flush settings default to Kafka's Long.MAX_VALUE, i.e. never fsync on a count or a timer
    (see ``broker.log.segments`` for what that means for durability). A plain class: a
    dataclass exec()s its methods' source at every start.
    """

    __slots__ = ("retention_ms", "retention_bytes", "segment_bytes", "segment_ms",
                 "index_interval_bytes", "flush_messages", "flush_ms", "cleanup_policy",
                 "delete_retention_ms", "min_compaction_lag_ms", "min_cleanable_dirty_ratio",
                 "max_compaction_lag_ms")

    def __init__(self, *, retention_ms: int = 604_800_000, retention_bytes: int = -1,
                 segment_bytes: int = 1_073_741_824, segment_ms: int = 604_800_000,
                 index_interval_bytes: int = 4096, flush_messages: int = LONG_MAX,
                 flush_ms: int = LONG_MAX, cleanup_policy: str = "delete",
                 delete_retention_ms: int = 86_400_000, min_compaction_lag_ms: int = 0,
                 min_cleanable_dirty_ratio: float = 0.5,
                 max_compaction_lag_ms: int = LONG_MAX) -> None:
        self.retention_ms = retention_ms  # retention.ms: 7 days; -1 = keep forever
        self.retention_bytes = retention_bytes  # retention.bytes: per partition; -1 = unlimited
        self.segment_bytes = segment_bytes  # segment.bytes: 1 GiB
        self.segment_ms = segment_ms  # segment.ms: 7 days
        self.index_interval_bytes = index_interval_bytes  # index.interval.bytes
        self.flush_messages = flush_messages  # flush.messages (log.flush.interval.messages)
        self.flush_ms = flush_ms  # flush.ms (log.flush.interval.ms)
        #: cleanup.policy: "delete", "compact" or "compact,delete"
        self.cleanup_policy = cleanup_policy
        self.delete_retention_ms = delete_retention_ms  # delete.retention.ms: tombstones stay
        #: min.compaction.lag.ms: younger records are not compacted
        self.min_compaction_lag_ms = min_compaction_lag_ms
        self.min_cleanable_dirty_ratio = min_cleanable_dirty_ratio  # min.cleanable.dirty.ratio
        #: max.compaction.lag.ms: dirty data older than this is cleaned whatever the dirty ratio
        #: (and a compacted log's active segment rolls after it)
        self.max_compaction_lag_ms = max_compaction_lag_ms


    # Kafka's topic config key for each field, for from_topic_config / to_topic_config.
    KAFKA_KEYS = {
        "retention_ms": "retention.ms",
        "retention_bytes": "retention.bytes",
        "segment_bytes": "segment.bytes",
        "segment_ms": "segment.ms",
        "index_interval_bytes": "index.interval.bytes",
        "flush_messages": "flush.messages",
        "flush_ms": "flush.ms",
        "cleanup_policy": "cleanup.policy",
        "delete_retention_ms": "delete.retention.ms",
        "min_compaction_lag_ms": "min.compaction.lag.ms",
        "min_cleanable_dirty_ratio": "min.cleanable.dirty.ratio",
        "max_compaction_lag_ms": "max.compaction.lag.ms",
    }

    @classmethod
    def from_topic_config(cls, configs: Mapping[str, object] | None = None,
                          base: "LogConfig | None" = None) -> "LogConfig":
        """Build from Kafka-named topic configs (string or int values); unknown keys are ignored
        (they belong to other components, e.g. max.message.bytes to the produce handler)."""
        values = {} if base is None else {name: getattr(base, name) for name in cls.__slots__}
        for name, key in cls.KAFKA_KEYS.items():
            if configs is not None and key in configs and configs[key] is not None:
                raw = configs[key]
                if name == "cleanup_policy":
                    values[name] = str(raw).strip()
                elif name == "min_cleanable_dirty_ratio":
                    values[name] = float(raw)
                else:
                    values[name] = int(raw)
        return cls(**values)

    def to_topic_config(self) -> dict[str, str]:
        return {key: str(getattr(self, name)) for name, key in self.KAFKA_KEYS.items()}

    @property
    def delete_enabled(self) -> bool:
        """Time/size retention applies only when cleanup.policy contains "delete"."""
        return self._has_policy("delete")

    @property
    def compact_enabled(self) -> bool:
        """The log cleaner keeps only the last record of each key (cleanup.policy compact)."""
        return self._has_policy("compact")

    def _has_policy(self, policy: str) -> bool:
        return policy in (p.strip() for p in self.cleanup_policy.split(","))



class AppendInfo(Values):
    """What the Produce response needs from an append."""

    __slots__ = ("first_offset", "last_offset", "log_append_time", "log_start_offset",
                 "max_timestamp", "size", "batch_count")

    def __init__(self, first_offset: int, last_offset: int, log_append_time: int,
                 log_start_offset: int, max_timestamp: int, size: int,
                 batch_count: int = 1) -> None:
        self.first_offset = first_offset  # the base offset given to the first batch
        self.last_offset = last_offset  # the offset of the last record appended
        #: the LogAppendTime stamped on the batches, or -1 for CreateTime
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset  # the log start offset after the append
        self.max_timestamp = max_timestamp  # the largest max_timestamp of the batches
        self.size = size  # bytes appended
        self.batch_count = batch_count


    @property
    def record_count(self) -> int:
        return self.last_offset - self.first_offset + 1


def validate_batches(buffer) -> list[RecordBatch]:
    """Parse and check every batch of a producer's records field, the way Kafka's LogValidator
    checks magic-v2 batches before an append. Raises CorruptRecordError (CORRUPT_MESSAGE) for a
    truncated batch, a wrong magic or a CRC mismatch, and InvalidRecordError (INVALID_RECORD) when
    the record count disagrees with the offset range. Does not decode records."""
    batches = []
    view = memoryview(buffer)
    position, end = 0, len(view)
    if end == 0:
        raise CorruptRecordError("empty records")
    while position < end:
        batch = RecordBatch(view, position)
        batch.validate()
        count_from_offsets = batch.last_offset_delta + 1
        if count_from_offsets <= 0:
            raise InvalidRecordError(
                f"batch has an invalid offset range: last offset delta {batch.last_offset_delta}")
        if batch.record_count <= 0:
            raise InvalidRecordError(f"invalid record count {batch.record_count}")
        if batch.record_count != count_from_offsets:
            raise InvalidRecordError(
                f"inconsistent batch: {count_from_offsets} offsets but {batch.record_count} records")
        batches.append(batch)
        position += batch.size
    return batches


def prepare_append(batches, next_offset: int, log_append_time: int | None = None,
                   partition_leader_epoch: int | None = None):
    """Assign offsets from ``next_offset`` to a producer's batches, in place when they are a
    writable view (a large request frame, which the server reads into a buffer of its own and
    hands to nobody else), else in a fresh bytearray copy.

    Returns ``(buffer, entries)`` where each entry is
    ``(position, size, base_offset, next_offset, max_timestamp)``. Nothing is decoded beyond the
    batch headers. With ``log_append_time`` each batch's timestamp type becomes LogAppendTime and
    its max timestamp that time (the CRC is recomputed, as Kafka's setMaxTimestamp does). Raises
    CorruptRecordError on a structurally broken buffer, before anything is stored.
    """
    if isinstance(batches, memoryview) and not batches.readonly and batches.contiguous:
        buf = batches
    else:
        buf = bytearray(batches)
    end = len(buf)
    if end == 0:
        raise CorruptRecordError("no record batch to append")
    entries = []
    position = 0
    unpack = _HEAD.unpack_from
    while position < end:
        if end - position < HEADER_SIZE:
            raise CorruptRecordError(
                f"record batch header truncated: {end - position} of {HEADER_SIZE} bytes")
        (_base, length, _ple, magic, _crc, attributes, last_delta, _bts, max_ts
         ) = unpack(buf, position)
        size = LOG_OVERHEAD + length
        if magic != 2:
            raise CorruptRecordError(f"unsupported record batch magic {magic}")
        if length < HEADER_SIZE - LOG_OVERHEAD or position + size > end:
            raise CorruptRecordError(f"record batch length {length} does not fit the buffer")
        if last_delta < 0:
            raise InvalidRecordError(f"negative last offset delta {last_delta}")
        _BASE_OFFSET.pack_into(buf, position, next_offset)
        if partition_leader_epoch is not None:
            _INT32.pack_into(buf, position + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
        if log_append_time is not None:
            _INT16.pack_into(buf, position + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
            _INT64.pack_into(buf, position + MAX_TIMESTAMP_OFFSET, log_append_time)
            crc = _records.crc32c(
                memoryview(buf)[position + ATTRIBUTES_OFFSET:position + size])
            _UINT32.pack_into(buf, position + CRC_OFFSET, crc)
            max_ts = log_append_time
        following = next_offset + last_delta + 1
        entries.append((position, size, next_offset, following, max_ts))
        next_offset = following
        position += size
    return buf, entries


# --- record-level timestamp lookups (ListOffsets), only for the one batch that matters ---------

def _iter_record_offsets_and_timestamps(batch: RecordBatch):
    """Yield (offset, timestamp) of each record of one batch."""
    if batch.timestamp_type == 1:  # LogAppendTime: every record carries the batch max timestamp
        for delta in range(batch.last_offset_delta + 1):
            yield batch.base_offset + delta, batch.max_timestamp
        return
    for record in batch.records():
        yield record.offset, record.timestamp


def first_record_at_or_after(batch: RecordBatch, target_ts: int, min_offset: int):
    """(offset, timestamp) of the first record with timestamp >= target_ts and offset >=
    min_offset in this batch, or None. Falls back to the batch (its first offset >= min_offset
    and its max timestamp) when the records cannot be decoded."""
    if batch.max_timestamp < target_ts or batch.last_offset < min_offset:
        return None
    decoded = False
    try:
        for offset, timestamp in _iter_record_offsets_and_timestamps(batch):
            decoded = True
            if offset >= min_offset and timestamp >= target_ts:
                return offset, timestamp
    except (CorruptRecordError, IndexError, ValueError, TypeError, AttributeError):
        decoded = False
    if decoded:
        return None
    return max(batch.base_offset, min_offset), batch.max_timestamp


def offset_of_max_timestamp(batch: RecordBatch) -> int:
    """The offset of the first record whose timestamp equals the batch's max timestamp (Kafka's
    RecordBatch.offsetOfMaxTimestamp); the batch's base offset if records cannot be decoded."""
    try:
        for offset, timestamp in _iter_record_offsets_and_timestamps(batch):
            if timestamp == batch.max_timestamp:
                return offset
    except (CorruptRecordError, IndexError, ValueError, TypeError, AttributeError):
        pass
    return batch.base_offset


class AbortedTxn(NamedTuple):
    """One aborted transaction (Kafka's .txnindex entry): its producer, its first offset, the
    offset of its ABORT marker, and the last stable offset when the marker was written."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TxnIndex:
    """The aborted transactions of a partition log in marker order, which read_committed
    fetches return so consumers can drop the aborted records. Kept in memory and rebuilt from
    the batches when a log is opened; entries whose marker falls below the log start offset go
    when it moves (retention, DeleteRecords)."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: list[AbortedTxn] = []

    def __len__(self) -> int:
        return len(self.entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __iter__(self):
        return iter(self.entries)

    def append(self, producer_id: int, first_offset: int, last_offset: int,
               last_stable_offset: int) -> None:
        entries = self.entries
        if entries and entries[-1].last_offset >= last_offset:
            raise ValueError(f"aborted transaction ending at {last_offset} is not after the "
                             f"last one, ending at {entries[-1].last_offset}")
        entries.append(AbortedTxn(producer_id, first_offset, last_offset, last_stable_offset))

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Kafka's collectAbortedTxns: the transactions that end at or after ``fetch_offset``
        and start below ``upper_bound_offset``, scanning in marker order and stopping after the
        first one whose last stable offset reaches the bound (nothing later can start below
        it)."""
        entries = self.entries
        out = []
        for i in range(bisect_left(entries, fetch_offset, key=_last_offset), len(entries)):
            txn = entries[i]
            if txn.first_offset < upper_bound_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                break
        return out

    def drop_below(self, offset: int) -> None:
        """Forget the transactions whose marker is below ``offset`` (the new log start)."""
        entries = self.entries
        if entries and entries[0].last_offset < offset:
            del entries[:bisect_left(entries, offset, key=_last_offset)]

    def truncate_to(self, offset: int) -> None:
        """Forget the transactions whose marker is at or above ``offset`` (a truncated log)."""
        entries = self.entries
        if entries and entries[-1].last_offset >= offset:
            del entries[bisect_left(entries, offset, key=_last_offset):]

    def clear(self) -> None:
        self.entries.clear()


def _last_offset(txn: AbortedTxn) -> int:
    return txn.last_offset


class PartitionLog(abc.ABC):
    """The log of one topic partition (also used for ``__consumer_offsets``).

    Synchronous and deterministic: the broker calls it from the event loop; time enters only
    through ``now_ms`` arguments and the injected ``clock``.
    """

    config: LogConfig

    def __init__(self, config: LogConfig | None = None, *,
                 clock: Callable[[], int] | None = None):
        self.config = config if config is not None else LogConfig()
        self._clock = clock if clock is not None else wall_clock_ms
        #: the aborted transactions whose markers this log holds (kept by the partition's
        #: producer state, pruned here as the log start offset moves)
        self.txn_index = TxnIndex()
        #: the first offset of the oldest ongoing transaction, None when none is open; set by
        #: the partition's producer state after every append that may move it
        self.first_unstable_offset: int | None = None
        #: the partition's ProducerStateTable, when it has one: the cleaner keeps each
        #: producer's last batch so that the table can be rebuilt from the log
        self.producers = None

    # --- offsets ---

    @property
    @abc.abstractmethod
    def log_start_offset(self) -> int: ...

    @property
    @abc.abstractmethod
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int:
        """Single replica: every appended record is committed."""
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset not yet decided (Kafka's LSO): every record below it is committed,
        aborted or non-transactional. The first unstable offset, at least the log start offset,
        bounded by the high watermark; the high watermark when no transaction is open.
        read_committed consumers read only below it."""
        first = self.first_unstable_offset
        high_watermark = self.high_watermark
        if first is None:
            return high_watermark
        start = self.log_start_offset
        if first < start:
            first = start
        return first if first < high_watermark else high_watermark

    @property
    @abc.abstractmethod
    def size_bytes(self) -> int: ...

    # --- the hot path ---

    @abc.abstractmethod
    def append(self, batches, *, log_append_time: int | None = None,
               partition_leader_epoch: int | None = None) -> AppendInfo:
        """Append one or more already-validated v2 batches; offsets start at log_end_offset.

        The caller checks CRCs and producer sequences first (see ``validate_batches``). The
        input buffer is copied, never modified. ``log_append_time`` stamps LogAppendTime on every
        batch (topic config message.timestamp.type=LogAppendTime); ``partition_leader_epoch``
        overwrites the batches' leader epoch field as Kafka's leader does.
        """

    @abc.abstractmethod
    def read(self, offset: int, max_bytes: int, *, min_one_message: bool = True,
             max_offset: int | None = None):
        """Whole batches starting with the batch that contains ``offset``, at most ``max_bytes``
        in total, except that with ``min_one_message`` the first batch is returned whole even if
        it is larger (Kafka's rule, so a big batch cannot stall a consumer).

        ``max_offset`` (a batch boundary, e.g. the last stable offset for read_committed) stops
        the read before the batch that starts there; at or above it nothing is returned.

        Returns a bytes-like object (``bytes`` or a read-only-by-convention ``memoryview``; do not
        modify it); empty at the log end offset. Raises OffsetOutOfRange when ``offset`` is below
        the log start offset or above the log end offset.
        """

    @abc.abstractmethod
    def fetch_upper_bound(self, offset: int, size: int) -> int:
        """The offset below which a read of ``size`` bytes from ``offset`` can hold records, as
        Kafka estimates it for the aborted transactions of a fetch: the last offset of the first
        batch at or after the read's end that the sparse offset index names (an entry every
        index.interval.bytes), else the next segment's base offset, else the log end offset."""

    def aborted_transactions(self, offset: int, size: int) -> list[AbortedTxn]:
        """The aborted transactions a read_committed fetch of ``size`` bytes from ``offset``
        returns (Kafka's collectAbortedTxns with its upper bound)."""
        if not self.txn_index:
            return []
        return self.txn_index.collect(offset, self.fetch_upper_bound(offset, size))

    def _log_start_moved(self) -> None:
        """Forget the aborted transactions wholly below the (new) log start offset."""
        if self.txn_index:
            self.txn_index.drop_below(self.log_start_offset)

    def batches(self, chunk_bytes: int = 1 << 20):
        """Every stored batch from the log start offset on, read a chunk at a time (replay of
        producer state and of __consumer_offsets at startup)."""
        offset = self.log_start_offset
        while offset < self.log_end_offset:
            data = self.read(offset, chunk_bytes, min_one_message=True)
            if not data:
                return
            for batch in iter_batches(data):
                yield batch
                offset = batch.next_offset

    # --- ListOffsets ---

    @abc.abstractmethod
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record, at or after the log start offset, whose
        timestamp is >= ``timestamp``; None when there is none (ListOffsets then answers
        offset -1). Record-precise; a batch whose records cannot be decoded answers its first
        offset, which makes a consumer re-read some older records, never skip newer ones."""

    @abc.abstractmethod
    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record carrying the largest timestamp in the log
        (ListOffsets timestamp -3, MAX_TIMESTAMP); None for an empty log (answer -1, -1)."""

    # --- moving the ends ---

    @abc.abstractmethod
    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= ``offset`` (Kafka's truncateTo: a batch
        that contains ``offset`` goes as a whole, so the log end offset can end up below
        ``offset``; callers truncate at batch boundaries). If ``offset`` is below the first
        stored batch the log is emptied and restarts at ``offset``."""

    @abc.abstractmethod
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (-1 means the high
        watermark) and drop the storage wholly below it. Returns the new log start offset.
        Raises OffsetOutOfRange if ``offset`` is above the high watermark."""

    @abc.abstractmethod
    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete the oldest data breaching retention.ms / retention.bytes (only when
        cleanup.policy contains "delete"), plus storage wholly below the log start offset.
        Returns the number of bytes deleted."""

    def cleanable_ratio(self, now: int) -> float | None:
        """The dirty share of the cleanable part when the log needs a cleaning pass
        (cleanup.policy=compact, see ``broker.log.cleaner``), else None."""
        return None

    def cleaning_pass(self, now: int, map_bytes: int):
        """A cleaning pass as a generator for ``LogCleaner`` (returns the bytes freed)."""
        return 0
        yield  # noqa: unreachable - makes this a generator

    def compact(self, now_ms: int | None = None) -> int:
        """One whole cleaning pass now if the log needs one; returns the bytes freed."""
        return 0

    def maybe_flush(self, now_ms: int | None = None) -> bool:
        """Apply flush.ms from a periodic task (Kafka's log flusher). Returns True if flushed."""
        return False

    @abc.abstractmethod
    def flush(self) -> None: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def delete(self) -> None:
        """Close and remove all stored data (topic/partition deletion)."""
        self.close()

    def _check_delete_records_offset(self, offset: int) -> int:
        if offset == -1:
            return self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRange(offset, self.log_start_offset, self.log_end_offset)
        return offset

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} start={self.log_start_offset} "
                f"end={self.log_end_offset} size={self.size_bytes}>")

