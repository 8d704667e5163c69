"""Idempotent producer state per partition: producer id -> epoch and recent batch sequences.

Kafka keeps the last five batches per producer so a retried batch is recognised as a duplicate
and answered with its original offset; a gap in sequence numbers is OUT_OF_ORDER_SEQUENCE_NUMBER;
an older epoch is INVALID_PRODUCER_EPOCH (the producer was fenced). The state is rebuilt from the
batch headers when a partition log is opened, so it survives a restart with a data directory.
"""
from __future__ import annotations

from collections import deque

from protocol.errors import ErrorCode

CACHED_BATCHES = 5
INT32_MAX = 2**31 - 1


class _BatchMetadata:
    __slots__ = ("first_seq", "last_seq", "first_offset", "last_offset", "timestamp")

    def __init__(self, first_seq, last_seq, first_offset, last_offset, timestamp):
        self.first_seq = first_seq
        self.last_seq = last_seq
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.timestamp = timestamp


class _ProducerEntry:
    __slots__ = ("epoch", "batches")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.batches: deque[_BatchMetadata] = deque(maxlen=CACHED_BATCHES)


def _next_seq(seq: int) -> int:
    return 0 if seq == INT32_MAX else seq + 1


class ProducerStateTable:
    __slots__ = ("producers",)

    def __init__(self) -> None:
        self.producers: dict[int, _ProducerEntry] = {}

    def check(self, batch) -> tuple[int, _BatchMetadata | None]:
        """Validate one batch: (NONE, None) to append, (NONE, original) for a duplicate,
        or (error code, None)."""
        entry = self.producers.get(batch.producer_id)
        epoch = batch.producer_epoch
        seq = batch.base_sequence
        if entry is None:
            return ErrorCode.NONE, None
        if epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH, None
        if epoch > entry.epoch:
            if seq != 0:
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None
            return ErrorCode.NONE, None
        last_seq = batch.last_sequence
        for cached in entry.batches:
            if cached.first_seq == seq and cached.last_seq == last_seq:
                return ErrorCode.NONE, cached
        if entry.batches:
            expected = _next_seq(entry.batches[-1].last_seq)
            if seq != expected:
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None
        return ErrorCode.NONE, None

    def update(self, batch, first_offset: int, timestamp: int) -> None:
        """Record an appended batch (its offsets are final)."""
        if batch.producer_id < 0:
            return
        entry = self.producers.get(batch.producer_id)
        if entry is None or batch.producer_epoch > entry.epoch:
            entry = self.producers[batch.producer_id] = _ProducerEntry(batch.producer_epoch)
        entry.batches.append(_BatchMetadata(
            batch.base_sequence, batch.last_sequence, first_offset,
            first_offset + batch.last_offset_delta, timestamp))

    def rebuild(self, log) -> None:
        """Replay the batch headers of a reopened log."""
        self.producers.clear()
        for batch in log.batches():
            if batch.producer_id >= 0 and batch.base_sequence >= 0:
                self.update(batch, batch.base_offset, batch.max_timestamp)
