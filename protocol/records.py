"""Record batches (magic v2): a view over the bytes of one batch.

The broker mostly moves batches as opaque bytes; it only needs the header (offsets, timestamps,
producer fields, record count) and the CRC. Records are decoded on demand.

Header layout (61 bytes), see Kafka's DefaultRecordBatch:
  baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
  attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
  producerId int64 | producerEpoch int16 | baseSequence int32 | recordCount int32
The CRC32C covers everything from attributes to the end of the batch, so the base offset and the
partition leader epoch can be rewritten in place without recomputing it.

Records (see Kafka's DefaultRecord) follow the header, compressed as a whole when the batch's
codec is not none. Each is varint/zigzag encoded:
  length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
  keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
  headerCount varint | headers [keyLength varint | key utf8 | valueLength varint | value]
`RecordBatch.records()` decodes them (for tests, the coordinator's log replay and validation);
`build_batch()` writes a batch; `set_log_append_time()` stamps a batch as the broker does.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from protocol.errors import CorruptRecordError


def crc32c(data) -> int:
    """CRC-32C of ``data``. The crc32c package loads on first use (its import reads package
    metadata: ~20 ms of every start, where a broker in memory computes no CRC); this function
    then replaces itself with the package's."""
    global crc32c
    from crc32c import crc32c as native
    crc32c = native
    return native(data)


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
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1

CREATE_TIME = 0
LOG_APPEND_TIME = 1

MAX_TIMESTAMP_OFFSET = 35  # where the maxTimestamp field starts

# The most bytes RecordBatch.records() lets a compressed batch expand to.
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024


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

    def records(self, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE):
        """Yield the batch's records as Record objects, decompressing them first if needed.

        Raises CorruptRecordError on malformed records, a record count that does not match the
        records present, bad compressed data, or compressed records that would expand beyond
        `max_decompressed_size` bytes. The CRC is not checked here: see validate().
        """
        if self.record_count < 0:
            raise CorruptRecordError(f"negative record count {self.record_count}")
        start = self.position + HEADER_SIZE
        payload = memoryview(self.buffer)[start:self.position + self.size]
        codec = self.attributes & COMPRESSION_MASK
        if codec:
            # the codecs (cramjam) load with the first compressed batch
            from protocol.compression import decompress
            data = bytes(decompress(codec, payload, max_size=max_decompressed_size))
        else:
            data = bytes(payload)
        log_append_time = self.max_timestamp if self.attributes & TIMESTAMP_TYPE_MASK else None
        return _decode_records(data, self.record_count, self.base_offset, self.base_timestamp,
                               log_append_time)


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


# ---------------------------------------------------------------------------------------------
# Records

class Record:
    """One decoded record. `offset` and `timestamp` are absolute; in a LogAppendTime batch the
    timestamp is the batch's max timestamp, as Kafka reports it."""

    __slots__ = ("attributes", "timestamp", "offset", "timestamp_delta", "offset_delta", "key",
                 "value", "headers")

    def __init__(self, attributes: int, timestamp: int, offset: int, timestamp_delta: int,
                 offset_delta: int, key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, bytes | None]]):
        self.attributes = attributes
        self.timestamp = timestamp
        self.offset = offset
        self.timestamp_delta = timestamp_delta
        self.offset_delta = offset_delta
        self.key = key
        self.value = value
        self.headers = headers

    def __eq__(self, other):
        if not isinstance(other, Record):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    __hash__ = None

    def __repr__(self) -> str:
        return (f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r}, headers={self.headers!r})")


class SimpleRecord(NamedTuple):
    """A record to write with build_batch(); a plain (key, value[, headers[, timestamp]]) tuple
    does as well. A timestamp of None is written as NO_TIMESTAMP (-1)."""

    key: bytes | None
    value: bytes | None
    headers: tuple = ()
    timestamp: int | None = None


def _read_varint(data: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Read a zigzag varint of at most `max_bytes` bytes (5 for int32, 10 for int64)."""
    if pos >= end:
        raise CorruptRecordError("record truncated inside a varint")
    byte = data[pos]
    pos += 1
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos
    value = byte & 0x7F
    shift = 7
    limit = pos + max_bytes - 1
    while True:
        if pos >= end:
            raise CorruptRecordError("record truncated inside a varint")
        if pos >= limit:
            raise CorruptRecordError(f"varint longer than {max_bytes} bytes")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    if value >> (32 if max_bytes == 5 else 64):
        raise CorruptRecordError("varint out of range")
    return (value >> 1) ^ -(value & 1), pos


def _read_nullable_bytes(data: bytes, pos: int, end: int, what: str):
    """A varint length (-1 = null) and that many bytes -> (bytes or None, next position)."""
    length, pos = _read_varint(data, pos, end, 5)
    if length == -1:
        return None, pos
    if length < 0:
        raise CorruptRecordError(f"invalid record {what} length {length}")
    if pos + length > end:
        raise CorruptRecordError(f"record {what} truncated")
    return data[pos:pos + length], pos + length


def _decode_records(data: bytes, count: int, base_offset: int, base_timestamp: int,
                    log_append_time: int | None):
    end = len(data)
    pos = 0
    read = _read_varint
    for _ in range(count):
        length, pos = read(data, pos, end, 5)
        record_end = pos + length
        if length < 6:  # attributes, and at least one byte for each of 5 varints
            raise CorruptRecordError(f"invalid record length {length}")
        if record_end > end:
            raise CorruptRecordError(
                f"record of {length} bytes truncated: {end - pos} bytes remain")
        attributes = data[pos]
        if attributes > 127:
            attributes -= 256
        timestamp_delta, pos = read(data, pos + 1, record_end, 10)
        offset_delta, pos = read(data, pos, record_end, 5)

        key, pos = _read_nullable_bytes(data, pos, record_end, "key")
        value, pos = _read_nullable_bytes(data, pos, record_end, "value")

        header_count, pos = read(data, pos, record_end, 5)
        if header_count < 0:
            raise CorruptRecordError(f"invalid record header count {header_count}")
        headers = []
        for _ in range(header_count):
            header_key_length, pos = read(data, pos, record_end, 5)
            if header_key_length < 0 or pos + header_key_length > record_end:
                raise CorruptRecordError(f"invalid record header key length {header_key_length}")
            try:
                header_key = data[pos:pos + header_key_length].decode("utf-8")
            except UnicodeDecodeError as e:
                raise CorruptRecordError(f"record header key is not UTF-8: {e}") from None
            pos += header_key_length
            header_value, pos = _read_nullable_bytes(data, pos, record_end, "header value")
            headers.append((header_key, header_value))

        if pos != record_end:
            raise CorruptRecordError(
                f"record length {length} does not match its {length - (record_end - pos)} "
                f"bytes of fields")
        timestamp = (base_timestamp + timestamp_delta if log_append_time is None
                     else log_append_time)
        yield Record(attributes, timestamp, base_offset + offset_delta, timestamp_delta,
                     offset_delta, key, value, headers)
    if pos != end:
        raise CorruptRecordError(
            f"{end - pos} bytes left over after the batch's {count} records")


def _write_varint(out: bytearray, value: int) -> None:
    """Append a zigzag varint (int32 and int64 alike; the caller keeps values in range)."""
    value = (value << 1) ^ (value >> 63)
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


_BYTES_LIKE = (bytes, bytearray, memoryview)


def _write_bytes(out: bytearray, data, what: str) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
        return
    if not isinstance(data, _BYTES_LIKE):
        raise TypeError(f"record {what} must be bytes or None, not {type(data).__name__}")
    _write_varint(out, len(data))
    out += data


def build_batch(records, *, base_offset: int = 0, compression: int = 0, timestamp_type: int = 0,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = -1,
                base_sequence: int = NO_SEQUENCE,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                is_transactional: bool = False, is_control: bool = False,
                log_append_time: int | None = None, offset_deltas=None,
                last_offset_delta: int | None = None) -> bytes:
    """Encode one magic-v2 record batch.

    `records` is a non-empty sequence of SimpleRecord or (key, value[, headers[, timestamp]])
    tuples; headers are (str key, bytes-or-None value) pairs. Offsets are base_offset + index,
    or base_offset + offset_deltas[index] for the records a compaction kept (with
    `last_offset_delta` keeping the batch's original last offset, as Kafka's cleaner does).
    The base timestamp is the first record's, the max timestamp the largest. With
    `log_append_time` the batch is LogAppendTime and every record's timestamp is that time, as
    Kafka's MemoryRecordsBuilder does.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    if log_append_time is not None:
        timestamp_type = LOG_APPEND_TIME
    elif timestamp_type == LOG_APPEND_TIME:
        raise ValueError("a LogAppendTime batch needs log_append_time")
    elif timestamp_type != CREATE_TIME:
        raise ValueError(f"invalid timestamp type {timestamp_type}")
    if not 0 <= compression <= 4:
        raise ValueError(f"unknown compression codec {compression}")

    body = bytearray()
    record = bytearray()
    base_timestamp = None
    max_timestamp = NO_TIMESTAMP
    for index, item in enumerate(records):
        offset_delta = index if offset_deltas is None else offset_deltas[index]
        n = len(item)
        if not 2 <= n <= 4:
            raise ValueError(f"a record is (key, value[, headers[, timestamp]]), not {item!r}")
        key = item[0]
        value = item[1]
        headers = item[2] if n > 2 else ()
        timestamp = item[3] if n > 3 else None
        if log_append_time is not None:
            timestamp = log_append_time
        elif timestamp is None:
            timestamp = NO_TIMESTAMP
        if base_timestamp is None:
            base_timestamp = timestamp
        if timestamp > max_timestamp:
            max_timestamp = timestamp

        del record[:]
        record.append(0)  # attributes: unused in v2 records
        _write_varint(record, timestamp - base_timestamp)
        _write_varint(record, offset_delta)
        _write_bytes(record, key, "key")
        _write_bytes(record, value, "value")
        _write_varint(record, len(headers))
        for header_key, header_value in headers:
            if isinstance(header_key, str):
                header_key = header_key.encode("utf-8")
            elif header_key is None:
                raise TypeError("a record header key must be a str, not None")
            _write_bytes(record, header_key, "header key")
            _write_bytes(record, header_value, "header value")
        _write_varint(body, len(record))
        body += record

    if compression:
        from protocol.compression import compress
        body = compress(compression, body)

    attributes = compression
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG
    if is_control:
        attributes |= CONTROL_FLAG
    count = len(records)

    buffer = bytearray(HEADER_SIZE)
    buffer += body
    _HEADER.pack_into(
        buffer, 0, base_offset, len(buffer) - LOG_OVERHEAD, partition_leader_epoch, 2, 0,
        attributes, count - 1 if last_offset_delta is None else last_offset_delta, base_timestamp,
        max_timestamp, producer_id, producer_epoch, base_sequence, count)
    _CRC.pack_into(buffer, CRC_OFFSET, crc32c(memoryview(buffer)[ATTRIBUTES_OFFSET:]))
    return bytes(buffer)


_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")


def set_log_append_time(buffer, position: int, timestamp: int) -> None:
    """Stamp the batch at `position` as LogAppendTime with `timestamp` as its max timestamp and
    recompute its CRC, in place (Kafka's DefaultRecordBatch.setMaxTimestamp). `buffer` must be
    writable; RecordBatch views made before the call keep the old values."""
    batch = RecordBatch(buffer, position)
    _ATTRIBUTES.pack_into(buffer, position + ATTRIBUTES_OFFSET,
                          batch.attributes | TIMESTAMP_TYPE_MASK)
    _TIMESTAMP.pack_into(buffer, position + MAX_TIMESTAMP_OFFSET, timestamp)
    start = position + ATTRIBUTES_OFFSET
    _CRC.pack_into(buffer, position + CRC_OFFSET,
                   crc32c(memoryview(buffer)[start:position + batch.size]))
