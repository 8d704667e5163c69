"""Record batches (magic v2): a view over the bytes of one batch.

The broker mostly moves batches as opaque bytes; it only needs the header (offsets, timestamps,
producer fields, record count) and the CRC. Records are decoded on demand.

Header layout (61 bytes), see Kafka's DefaultRecordBatch:
  baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
  attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
  producerId int64 | producerEpoch int16 | baseSequence int32 | recordCount int32
The CRC32C covers everything from attributes to the end of the batch, so the base offset and the
partition leader epoch can be rewritten in place without recomputing it.
"""
from __future__ import annotations

import struct

from crc32c import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes before the length-counted part
CRC_OFFSET = 17  # where the crc field starts
ATTRIBUTES_OFFSET = 21  # where the CRC-covered part starts

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


class CorruptRecordError(ValueError):
    """A batch that cannot be read: truncated, wrong magic, bad CRC or bad record encoding."""


class RecordBatch:
    """A view over one magic-v2 record batch inside a larger buffer."""

    __slots__ = (
        "buffer", "position", "base_offset", "batch_length", "partition_leader_epoch", "magic",
        "crc", "attributes", "last_offset_delta", "base_timestamp", "max_timestamp",
        "producer_id", "producer_epoch", "base_sequence", "record_count",
    )

    def __init__(self, buffer, position: int = 0):
        if len(buffer) - position < HEADER_SIZE:
            raise CorruptRecordError(
                f"record batch header truncated: {len(buffer) - position} of {HEADER_SIZE} bytes")
        (self.base_offset, self.batch_length, self.partition_leader_epoch, self.magic, self.crc,
         self.attributes, self.last_offset_delta, self.base_timestamp, self.max_timestamp,
         self.producer_id, self.producer_epoch, self.base_sequence, self.record_count,
         ) = _HEADER.unpack_from(buffer, position)
        if self.magic != 2:
            raise CorruptRecordError(f"unsupported record batch magic {self.magic}")
        if self.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(f"record batch length {self.batch_length} is too small")
        if position + LOG_OVERHEAD + self.batch_length > len(buffer):
            raise CorruptRecordError(
                f"record batch truncated: length {self.batch_length} exceeds the "
                f"{len(buffer) - position - LOG_OVERHEAD} bytes that remain")
        self.buffer = buffer
        self.position = position

    @property
    def size(self) -> int:
        """Total bytes of the batch including the offset and length fields."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    def bytes(self) -> memoryview:
        return memoryview(self.buffer)[self.position:self.position + self.size]

    def compute_crc(self) -> int:
        start = self.position + ATTRIBUTES_OFFSET
        return crc32c(memoryview(self.buffer)[start:self.position + self.size])

    def is_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def validate(self) -> None:
        actual = self.compute_crc()
        if actual != self.crc:
            raise CorruptRecordError(
                f"record batch CRC mismatch: stored {self.crc:#010x}, computed {actual:#010x}")


def set_base_offset(buffer: bytearray, position: int, base_offset: int) -> None:
    """Rewrite a batch's base offset in place; the CRC does not cover it."""
    _BASE_OFFSET.pack_into(buffer, position, base_offset)


def iter_batches(buffer, position: int = 0, end: int | None = None):
    """Yield each RecordBatch in a buffer of concatenated batches; raise on a partial one."""
    end = len(buffer) if end is None else end
    while position < end:
        batch = RecordBatch(buffer, position)
        yield batch
        position += batch.size
