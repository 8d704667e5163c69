"""Record batches: build, decode, compression codecs, corruption, and differential tests
against kafka-python's own magic-v2 implementation."""
import gzip
import io
import os
import struct
import types

import cramjam
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

import kafka.codec
from protocol import compression
from protocol.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    CorruptRecordError,
    Record,
    RecordBatch,
    SimpleRecord,
    build_batch,
    iter_batches,
    set_base_offset,
    set_log_append_time,
)

CODECS = [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4,
          compression.ZSTD]
COMPRESSED = CODECS[1:]
_HEADER = struct.Struct(">qiibIhiqqqhii")


def decode(batch_bytes, **kwargs):
    return list(RecordBatch(batch_bytes).records(**kwargs))


def compressible_records(n, base_ts=1_700_000_000_000):
    return [SimpleRecord(f"key-{i % 7}".encode(), b"value " * 20 + str(i).encode(),
                         [("trace", f"t{i}".encode())], base_ts + i * 3) for i in range(n)]


def rebuild_with_body(batch_bytes, body, codec):
    """The same batch header over another records region: new codec, length and CRC."""
    fields = list(_HEADER.unpack_from(batch_bytes, 0))
    fields[1] = HEADER_SIZE - 12 + len(body)
    fields[5] = (fields[5] & ~0x07) | codec
    buffer = bytearray(HEADER_SIZE) + body
    _HEADER.pack_into(buffer, 0, *fields)
    from crc32c import crc32c
    struct.pack_into(">I", buffer, CRC_OFFSET, crc32c(memoryview(buffer)[ATTRIBUTES_OFFSET:]))
    return bytes(buffer)


def batch_with_raw_records(raw, count):
    """A batch whose records region is `raw`, for hand-made malformed records."""
    template = build_batch([(b"k", b"v")])
    buffer = bytearray(rebuild_with_body(template, raw, 0))
    struct.pack_into(">i", buffer, HEADER_SIZE - 4, count)
    return bytes(buffer)


@pytest.fixture
def kafka_python_snappy(monkeypatch):
    """kafka-python needs python-snappy, which is not installed; back it with cramjam."""
    shim = types.SimpleNamespace(
        compress=lambda data: bytes(cramjam.snappy.compress_raw(bytes(data))),
        decompress=lambda data: bytes(cramjam.snappy.decompress_raw(bytes(data))),
    )
    monkeypatch.setattr(kafka.codec, "snappy", shim)


# ---------------------------------------------------------------------------------------------
# round trips

@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_with_nulls_headers_and_timestamps(codec):
    records = [
        SimpleRecord(b"key", b"value", [], 1000),
        SimpleRecord(None, b"no key", [("a", b"1"), ("b", None), ("ü", b"")], 1005),
        SimpleRecord(b"tombstone", None, (), 990),
        (b"", b""),
        (b"tuple", b"with headers", [("h", b"x")]),
        (b"tuple", b"with timestamp", (), 2000),
    ]
    data = build_batch(records, base_offset=100, compression=codec, producer_id=42,
                       producer_epoch=3, base_sequence=17, partition_leader_epoch=5)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.size == len(data)
    assert batch.compression == codec
    assert batch.base_offset == 100
    assert batch.last_offset == 105
    assert batch.record_count == 6
    assert batch.base_timestamp == 1000
    assert batch.max_timestamp == 2000
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 17)
    assert batch.last_sequence == 22
    assert batch.partition_leader_epoch == 5
    assert batch.timestamp_type == 0
    assert not batch.is_transactional and not batch.is_control

    decoded = list(batch.records())
    assert [r.offset for r in decoded] == list(range(100, 106))
    assert [r.offset_delta for r in decoded] == list(range(6))
    assert [r.key for r in decoded] == [b"key", None, b"tombstone", b"", b"tuple", b"tuple"]
    assert [r.value for r in decoded] == [b"value", b"no key", None, b"", b"with headers",
                                          b"with timestamp"]
    assert decoded[1].headers == [("a", b"1"), ("b", None), ("ü", b"")]
    assert decoded[4].headers == [("h", b"x")]
    assert [r.timestamp for r in decoded] == [1000, 1005, 990, -1, -1, 2000]
    assert [r.timestamp_delta for r in decoded] == [0, 5, -10, -1001, -1001, 1000]
    assert all(r.attributes == 0 for r in decoded)


@pytest.mark.parametrize("codec", CODECS)
def test_many_records_round_trip(codec):
    records = compressible_records(5000)
    data = build_batch(records, compression=codec)
    if codec:
        assert len(data) < sum(len(r.value) for r in records) / 3
    decoded = decode(data)
    assert len(decoded) == 5000
    assert [(r.key, r.value, r.timestamp) for r in decoded] == \
        [(r.key, r.value, r.timestamp) for r in records]
    assert decoded[4999].headers == [("trace", b"t4999")]


@pytest.mark.parametrize("codec", COMPRESSED)
def test_large_values_span_many_codec_blocks(codec):
    value = os.urandom(300_000) + bytes(300_000)  # > several lz4 (64 KiB) / snappy (32 KiB) blocks
    decoded = decode(build_batch([(b"k", value), (b"k2", value[::-1])], compression=codec))
    assert decoded[0].value == value
    assert decoded[1].value == value[::-1]


def test_transactional_control_and_flags():
    data = build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], is_control=True,
                       is_transactional=True, producer_id=7, producer_epoch=1, base_sequence=0)
    batch = RecordBatch(data)
    assert batch.is_control and batch.is_transactional
    assert batch.attributes == 0x30
    batch.validate()


def test_log_append_time_at_build():
    data = build_batch([(b"a", b"1", (), 5), (b"b", b"2", (), 9)], log_append_time=123_456)
    batch = RecordBatch(data)
    assert batch.timestamp_type == 1
    assert batch.base_timestamp == batch.max_timestamp == 123_456
    assert [r.timestamp for r in batch.records()] == [123_456, 123_456]
    assert [r.timestamp_delta for r in batch.records()] == [0, 0]


def test_build_rejects_bad_input():
    with pytest.raises(ValueError):
        build_batch([])
    with pytest.raises(ValueError):
        build_batch([(b"k", b"v")], timestamp_type=1)  # LogAppendTime without the time
    with pytest.raises(ValueError):
        build_batch([(b"k", b"v")], compression=5)
    with pytest.raises(TypeError):
        build_batch([("text", b"v")])
    with pytest.raises(TypeError):
        build_batch([(b"k", b"v", [(None, b"x")])])


def test_set_log_append_time_rewrites_type_max_timestamp_and_crc():
    first = build_batch([(b"a", b"1", (), 10)], base_offset=0)
    second = build_batch([(b"b", b"2", (), 20), (b"c", b"3", (), 30)], base_offset=1,
                         compression=compression.ZSTD)
    buffer = bytearray(first + second)
    set_log_append_time(buffer, len(first), 99_999)
    batches = list(iter_batches(buffer))
    assert [b.timestamp_type for b in batches] == [0, 1]
    for batch in batches:
        batch.validate()
    assert batches[1].max_timestamp == 99_999
    assert batches[1].compression == compression.ZSTD
    assert [r.timestamp for r in batches[1].records()] == [99_999, 99_999]
    assert [r.timestamp for r in batches[0].records()] == [10]
    # Stamping is idempotent and leaves base offset rewriting CRC-neutral.
    set_log_append_time(buffer, len(first), 99_999)
    set_base_offset(buffer, len(first), 500)
    again = RecordBatch(buffer, len(first))
    again.validate()
    assert [r.offset for r in again.records()] == [500, 501]


def test_record_equality_and_repr():
    a = Record(0, 5, 1, 0, 0, b"k", b"v", [])
    b = Record(0, 5, 1, 0, 0, b"k", b"v", [])
    assert a == b
    assert a != Record(0, 5, 1, 0, 0, b"k", b"w", [])
    assert "offset=1" in repr(a)


record_strategy = st.builds(
    SimpleRecord,
    key=st.none() | st.binary(max_size=40),
    value=st.none() | st.binary(max_size=200),
    headers=st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)),
                     max_size=4),
    timestamp=st.integers(min_value=0, max_value=2**62),
)


@settings(max_examples=150, deadline=None)
@given(records=st.lists(record_strategy, min_size=1, max_size=30),
       codec=st.sampled_from(CODECS),
       base_offset=st.integers(min_value=0, max_value=2**62),
       leader_epoch=st.integers(min_value=-1, max_value=2**31 - 1))
def test_property_round_trip(records, codec, base_offset, leader_epoch):
    data = build_batch(records, compression=codec, base_offset=base_offset,
                       partition_leader_epoch=leader_epoch)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.max_timestamp == max(r.timestamp for r in records)
    decoded = list(batch.records())
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == \
        [(r.key, r.value, list(r.headers), r.timestamp) for r in records]
    assert [r.offset for r in decoded] == [base_offset + i for i in range(len(records))]


# ---------------------------------------------------------------------------------------------
# differential tests against kafka-python

def kafka_python_build(codec, records):
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
        producer_epoch=-1, base_sequence=-1, batch_size=16 * 1024 * 1024)
    for i, r in enumerate(records):
        assert builder.append(i, r.timestamp, r.key, r.value, list(r.headers)) is not None
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode_with_ours(codec, kafka_python_snappy):
    records = compressible_records(300) + [SimpleRecord(None, None, [("n", None)], 5)]
    data = kafka_python_build(codec, records)
    batch = RecordBatch(data)
    assert batch.compression == codec  # kafka-python falls back to none if nothing is gained
    batch.validate()
    decoded = list(batch.records())
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == \
        [(i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(records)]


@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_decode_with_kafka_python(codec, kafka_python_snappy):
    records = compressible_records(300) + [SimpleRecord(None, None, [("n", None)], 5)]
    data = build_batch(records, base_offset=1000, compression=codec, producer_id=9,
                       producer_epoch=2, base_sequence=40)
    theirs = DefaultRecordBatch(bytearray(data))
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert (theirs.base_offset, theirs.next_offset) == (1000, 1000 + len(records))
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (9, 2, 40)
    assert theirs.max_timestamp == max(r.timestamp for r in records)
    decoded = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs]
    assert decoded == [(1000 + i, r.timestamp, r.key, r.value, list(r.headers))
                       for i, r in enumerate(records)]


def test_kafka_python_reads_log_append_time(kafka_python_snappy):
    buffer = bytearray(build_batch(compressible_records(3), compression=compression.LZ4))
    set_log_append_time(buffer, 0, 777)
    theirs = DefaultRecordBatch(buffer)
    assert theirs.validate_crc()
    assert theirs.timestamp_type == 1
    assert [r.timestamp for r in theirs] == [777, 777, 777]


# ---------------------------------------------------------------------------------------------
# codec formats

def xerial_frame(payload, block_size, version_format=">ii"):
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(version_format, 1, 1))
    for start in range(0, len(payload), block_size):
        block = bytes(cramjam.snappy.compress_raw(payload[start:start + block_size]))
        out += struct.pack(">i", len(block)) + block
    return bytes(out)


@pytest.mark.parametrize("version_format", [">ii", "<ii"])
def test_hand_built_xerial_snappy_batch_decodes(version_format):
    records = compressible_records(400)
    plain = build_batch(records)
    body = plain[HEADER_SIZE:]
    framed = xerial_frame(body, 1000, version_format)  # many small blocks
    data = rebuild_with_body(plain, framed, compression.SNAPPY)
    assert [r.value for r in decode(data)] == [r.value for r in records]


def test_raw_snappy_batch_decodes():
    records = compressible_records(50)
    plain = build_batch(records)
    raw = bytes(cramjam.snappy.compress_raw(plain[HEADER_SIZE:]))
    data = rebuild_with_body(plain, raw, compression.SNAPPY)
    assert [r.key for r in decode(data)] == [r.key for r in records]


def test_snappy_compress_writes_xerial_framing_like_java():
    out = compression.compress(compression.SNAPPY, bytes(100_000))
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    (first_block,) = struct.unpack_from(">i", out, 16)
    assert bytes(cramjam.snappy.decompress_raw(out[20:20 + first_block])) == bytes(32 * 1024)
    assert kafka.codec._detect_xerial_stream(out)


def test_lz4_frames_are_java_compatible_and_standard():
    import lz4.frame
    payload = b"abc" * 100_000
    out = compression.compress(compression.LZ4, payload)
    flg, bd = out[4], out[5]
    assert flg == 0x60  # version 1, independent blocks, no checksums, no content size
    assert bd == 0x40   # 64 KiB blocks
    assert lz4.frame.decompress(out) == payload  # verifies the header checksum too
    incompressible = os.urandom(70_000)
    out = compression.compress(compression.LZ4, incompressible)
    assert lz4.frame.decompress(out) == incompressible
    assert compression.decompress(compression.LZ4, out) == incompressible


@pytest.mark.parametrize("options", [
    dict(store_size=True, content_checksum=True, block_checksum=True),
    dict(store_size=False, block_size="BLOCKSIZE_MAX1MB"),
    dict(store_size=False, block_size="BLOCKSIZE_MAX4MB"),
    dict(store_size=True, block_size="BLOCKSIZE_MAX256KB", block_checksum=True),
])
def test_lz4_frames_from_python_lz4_decode(options):
    import lz4.frame
    options = dict(options)
    if "block_size" in options:
        options["block_size"] = getattr(lz4.frame, options["block_size"])
    payload = os.urandom(10_000) + b"x" * 2_000_000
    frame = lz4.frame.compress(payload, block_linked=False, **options)
    assert compression.decompress(compression.LZ4, frame) == payload


def test_lz4_dependent_blocks_are_rejected_as_kafka_does():
    import lz4.frame
    frame = lz4.frame.compress(b"x" * 300_000, block_linked=True)
    with pytest.raises(CorruptRecordError, match="dependent"):
        compression.decompress(compression.LZ4, frame)


def test_zstd_without_content_size_decodes():
    records = compressible_records(2000)
    plain = build_batch(records)
    body = plain[HEADER_SIZE:]
    stream = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(stream, closefd=False) as writer:
        for start in range(0, len(body), 10_000):
            writer.write(body[start:start + 10_000])
    frame = stream.getvalue()
    assert zstandard.frame_content_size(frame) == -1
    data = rebuild_with_body(plain, frame, compression.ZSTD)
    assert [r.value for r in decode(data)] == [r.value for r in records]
    # Grows past the initial guess of eight times the compressed size.
    assert len(body) > 8 * len(frame)


def test_zstd_with_content_size_and_several_frames():
    cctx = zstandard.ZstdCompressor(write_content_size=True)
    frames = cctx.compress(b"a" * 100_000) + cctx.compress(b"b" * 50_000)
    assert compression.decompress(compression.ZSTD, frames) == b"a" * 100_000 + b"b" * 50_000


def test_gzip_several_members_and_trailing_bytes():
    data = gzip.compress(b"one ") + gzip.compress(b"two")
    assert compression.decompress(compression.GZIP, data) == b"one two"
    assert compression.decompress(compression.GZIP, gzip.compress(b"x") + b"\x00\x00") == b"x"


@pytest.mark.parametrize("codec", CODECS)
def test_compress_decompress_empty_and_small(codec):
    for payload in (b"", b"x", bytes(range(256))):
        assert bytes(compression.decompress(codec, compression.compress(codec, payload))) == \
            payload


def test_unknown_codec():
    with pytest.raises(CorruptRecordError):
        compression.decompress(5, b"abc")
    with pytest.raises(ValueError):
        compression.compress(6, b"abc")


# ---------------------------------------------------------------------------------------------
# corruption and limits

@pytest.mark.parametrize("codec", CODECS)
def test_flipped_byte_fails_crc(codec):
    data = bytearray(build_batch(compressible_records(20), compression=codec))
    assert RecordBatch(data).is_valid()
    data[len(data) // 2] ^= 0x01
    batch = RecordBatch(data)
    assert not batch.is_valid()
    with pytest.raises(CorruptRecordError, match="CRC"):
        batch.validate()


def test_truncated_batch():
    data = build_batch(compressible_records(20))
    with pytest.raises(CorruptRecordError):
        RecordBatch(data[:-1])
    with pytest.raises(CorruptRecordError):
        RecordBatch(data[:HEADER_SIZE - 1])
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data + data[:30]))


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncated_compressed_records(codec):
    plain = build_batch(compressible_records(200))
    compressed = compression.compress(codec, plain[HEADER_SIZE:])
    data = rebuild_with_body(plain, compressed[:len(compressed) // 2], codec)
    with pytest.raises(CorruptRecordError):
        decode(data)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_garbage_compressed_records(codec):
    plain = build_batch([(b"k", b"v")])
    data = rebuild_with_body(plain, b"\x00garbage, not compressed at all" * 3, codec)
    with pytest.raises(CorruptRecordError):
        decode(data)


def test_record_count_mismatch():
    data = bytearray(build_batch(compressible_records(3)))
    struct.pack_into(">i", data, HEADER_SIZE - 4, 4)
    with pytest.raises(CorruptRecordError, match="truncated"):
        list(RecordBatch(data).records())
    struct.pack_into(">i", data, HEADER_SIZE - 4, 2)
    with pytest.raises(CorruptRecordError, match="left over"):
        list(RecordBatch(data).records())
    struct.pack_into(">i", data, HEADER_SIZE - 4, -1)
    with pytest.raises(CorruptRecordError, match="negative"):
        list(RecordBatch(data).records())


def test_bad_varint():
    with pytest.raises(CorruptRecordError, match="varint"):
        decode(batch_with_raw_records(b"\xff" * 11, 1))
    # A record whose timestamp delta varint runs past the record's length.
    record = bytes([0]) + b"\xff\xff\xff\xff\xff\xff"
    raw = bytes([len(record) * 2]) + record
    with pytest.raises(CorruptRecordError):
        decode(batch_with_raw_records(raw, 1))


def _raw_record(fields: bytes) -> bytes:
    return bytes([len(fields) * 2]) + fields  # zigzag length, fits one byte here


def test_negative_lengths_other_than_null():
    # attributes, ts delta 0, offset delta 0, key length -2 (zigzag 3)
    bad_key = _raw_record(b"\x00\x00\x00\x03ab\x00\x00")
    with pytest.raises(CorruptRecordError, match="key length"):
        decode(batch_with_raw_records(bad_key, 1))
    bad_value = _raw_record(b"\x00\x00\x00\x01\x05\x00")  # null key, value length -3
    with pytest.raises(CorruptRecordError, match="value length"):
        decode(batch_with_raw_records(bad_value, 1))
    bad_headers = _raw_record(b"\x00\x00\x00\x01\x01\x01")  # header count -1
    with pytest.raises(CorruptRecordError, match="header count"):
        decode(batch_with_raw_records(bad_headers, 1))
    null_header_key = _raw_record(b"\x00\x00\x00\x01\x01\x02\x01\x01")
    with pytest.raises(CorruptRecordError, match="header key"):
        decode(batch_with_raw_records(null_header_key, 1))
    good = _raw_record(b"\x00\x00\x00\x01\x01\x02\x02h\x01")
    assert decode(batch_with_raw_records(good, 1))[0].headers == [("h", None)]


def test_record_length_mismatch_and_overrun():
    fields = b"\x00\x00\x00\x01\x01\x00"
    too_long = bytes([(len(fields) + 1) * 2]) + fields + b"\x00"  # one stray byte inside
    with pytest.raises(CorruptRecordError, match="does not match"):
        decode(batch_with_raw_records(too_long, 1))
    key_overrun = _raw_record(b"\x00\x00\x00\x10ab\x01\x00")  # key length 8, record shorter
    with pytest.raises(CorruptRecordError, match="key truncated"):
        decode(batch_with_raw_records(key_overrun, 1))


def test_bad_utf8_header_key():
    bad = _raw_record(b"\x00\x00\x00\x01\x01\x02\x02\xff\x01")
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        decode(batch_with_raw_records(bad, 1))


def _bomb_variants():
    payload = bytes(8 * 1024 * 1024)
    stream = io.BytesIO()
    with zstandard.ZstdCompressor().stream_writer(stream, closefd=False) as writer:
        writer.write(payload)
    return [
        ("gzip", compression.GZIP, gzip.compress(payload)),
        ("snappy-xerial", compression.SNAPPY, compression.compress(compression.SNAPPY, payload)),
        ("snappy-raw", compression.SNAPPY, bytes(cramjam.snappy.compress_raw(payload))),
        ("lz4", compression.LZ4, compression.compress(compression.LZ4, payload)),
        ("zstd", compression.ZSTD, compression.compress(compression.ZSTD, payload)),
        ("zstd-no-size", compression.ZSTD, stream.getvalue()),
    ]


@pytest.mark.parametrize("name,codec,compressed", _bomb_variants(),
                         ids=[v[0] for v in _bomb_variants()])
def test_decompression_bomb_guard(name, codec, compressed):
    limit = 1024 * 1024
    assert len(compressed) < limit // 2
    with pytest.raises(CorruptRecordError, match="limit"):
        compression.decompress(codec, compressed, max_size=limit)
    assert len(compression.decompress(codec, compressed, max_size=8 * 1024 * 1024)) == \
        8 * 1024 * 1024


def test_records_honour_max_decompressed_size():
    records = compressible_records(2000)
    data = build_batch(records, compression=compression.ZSTD)
    with pytest.raises(CorruptRecordError):
        RecordBatch(data).records(max_decompressed_size=10_000)
    assert len(decode(data, max_decompressed_size=10_000_000)) == 2000


def test_decompress_none_respects_limit():
    with pytest.raises(CorruptRecordError):
        compression.decompress(compression.NONE, b"x" * 11, max_size=10)
