"""A small magic-v2 record batch builder for the log tests (until protocol.records has one)."""
from __future__ import annotations

import struct

from crc32c import crc32c

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _zigzag_varint(value: int) -> bytes:
    raw = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytearray(b"\x00")  # attributes
    body += _zigzag_varint(timestamp_delta)
    body += _zigzag_varint(offset_delta)
    for field in (key, value):
        if field is None:
            body += _zigzag_varint(-1)
        else:
            body += _zigzag_varint(len(field)) + field
    body += _zigzag_varint(0)  # no headers
    return _zigzag_varint(len(body)) + bytes(body)


def make_batch(values=None, *, timestamps=None, base_offset: int = 0, attributes: int = 0,
               producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
               partition_leader_epoch: int = -1, count: int | None = None,
               value_size: int = 8) -> bytes:
    """One uncompressed v2 batch. ``values``: list of bytes (or give ``count``);
    ``timestamps``: one per record (default 1000, 1001, ...)."""
    if values is None:
        values = [bytes([65 + i % 26]) * value_size for i in range(count or 1)]
    if timestamps is None:
        timestamps = [1000 + i for i in range(len(values))]
    base_ts = timestamps[0]
    records = b"".join(
        _record(i, ts - base_ts, None, value) for i, (ts, value) in enumerate(zip(timestamps, values)))
    n = len(values)
    header = bytearray(_HEADER.pack(
        base_offset, 0, partition_leader_epoch, 2, 0, attributes, n - 1, base_ts, max(timestamps),
        producer_id, producer_epoch, base_sequence, n))
    batch = header + records
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return bytes(batch)


def base_offset_of(batch) -> int:
    return struct.unpack_from(">q", batch, 0)[0]


def split_batches(buffer) -> list[bytes]:
    """Split concatenated batches into a list of bytes."""
    data = bytes(buffer)
    out, pos = [], 0
    while pos < len(data):
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        out.append(data[pos:pos + size])
        pos += size
    return out
