"""Record batch compression codecs, by Kafka codec id.

  0 none | 1 gzip | 2 snappy | 3 lz4 | 4 zstd

What producers send, and so what `decompress` accepts:
- gzip: a gzip stream (several members are read in turn, as Java's GZIPInputStream does).
- snappy: the Java client (snappy-java's SnappyOutputStream) writes xerial framing: the header
  b"\\x82SNAPPY\\x00", a version and a compatible-version int32, then blocks of
  [int32 big-endian length][raw snappy block]. librdkafka and others may send raw snappy. Both
  are read; the version fields are ignored (some producers write them little-endian).
- lz4: the LZ4 frame format with independent blocks, the only kind Kafka reads. The header
  checksum is not checked (the batch CRC covers these bytes anyway), which also admits the
  broken checksum of pre-0.10 clients.
- zstd: one or more frames, with or without a content size in the frame header.

`compress` writes what the Java client writes: gzip; xerial-framed snappy in 32 KiB blocks;
LZ4 frames of independent 64 KiB blocks without checksums; zstd at level 3.

Every decompression takes `max_size` and raises CorruptRecordError before its output would
exceed it, so a small batch cannot expand into gigabytes (a decompression bomb). Bad compressed
data raises CorruptRecordError too.
"""
from __future__ import annotations

import gzip
import struct
import zlib

import cramjam

from protocol.errors import CorruptRecordError

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

DEFAULT_MAX_SIZE = 64 * 1024 * 1024

# Errors the codec libraries raise on malformed input.
_CODEC_ERRORS = (cramjam.DecompressionError, zlib.error, EOFError, ValueError, IndexError,
                 struct.error, OverflowError)


# ---------------------------------------------------------------------------------------------
# public API

def compress(codec: int, data, *, level: int | None = None) -> bytes:
    """Compress `data` (bytes-like) with a Kafka codec; `level` None means Kafka's default."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        return gzip.compress(data, compresslevel=6 if level is None else level, mtime=0)
    if codec == SNAPPY:
        return _xerial_snappy_compress(data)
    if codec == LZ4:
        return _lz4_frame_compress(data)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3 if level is None else level))
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data, *, max_size: int = DEFAULT_MAX_SIZE):
    """Decompress `data` (bytes-like) compressed with a Kafka codec.

    Returns a bytes-like object (bytes or bytearray). Raises CorruptRecordError when the data is
    malformed, the codec is unknown, or the output would exceed `max_size` bytes.
    """
    try:
        if codec == NONE:
            if len(data) > max_size:
                raise _too_large(max_size)
            return bytes(data)
        if codec == GZIP:
            return _gzip_decompress(data, max_size)
        if codec == SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec == LZ4:
            return _lz4_decompress(data, max_size)
        if codec == ZSTD:
            return _zstd_decompress(data, max_size)
    except CorruptRecordError:
        raise
    except _CODEC_ERRORS as e:
        raise CorruptRecordError(
            f"invalid {CODEC_NAMES[codec]} compressed data: {e}") from e
    raise CorruptRecordError(f"unknown compression codec {codec}")


def _too_large(max_size: int) -> CorruptRecordError:
    return CorruptRecordError(f"decompressed records exceed the limit of {max_size} bytes")


# ---------------------------------------------------------------------------------------------
# gzip

_GZIP_MAGIC = b"\x1f\x8b"


def _gzip_decompress(data, max_size: int) -> bytes:
    data = bytes(data)
    parts = []
    total = 0
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        # max_length bounds the output; one byte more than allowed tells us it is too large.
        chunk = d.decompress(data, max_size - total + 1)
        total += len(chunk)
        if total > max_size:
            raise _too_large(max_size)
        parts.append(chunk)
        if not d.eof:
            if d.unconsumed_tail:
                raise _too_large(max_size)
            raise CorruptRecordError("gzip data truncated")
        data = d.unused_data
        # Another member follows; anything else after a complete member is ignored, as in
        # Java's GZIPInputStream.
        if not data.startswith(_GZIP_MAGIC):
            break
    return b"".join(parts)


# ---------------------------------------------------------------------------------------------
# snappy

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible version 1
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java's default block size
_INT32 = struct.Struct(">i")


def _xerial_snappy_compress(data) -> bytes:
    view = memoryview(data)
    out = bytearray(XERIAL_HEADER)
    compress_raw = cramjam.snappy.compress_raw
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = compress_raw(view[start:start + XERIAL_BLOCK_SIZE])
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def _snappy_decompress(data, max_size: int):
    view = memoryview(data)
    if len(view) >= len(XERIAL_HEADER) and view[:8] == XERIAL_MAGIC:
        out = bytearray()
        pos = len(XERIAL_HEADER)
        end = len(view)
        while pos < end:
            if end - pos < 4:
                raise CorruptRecordError("xerial snappy block length truncated")
            (length,) = _INT32.unpack_from(view, pos)
            pos += 4
            if length < 0 or length > end - pos:
                raise CorruptRecordError(f"xerial snappy block of {length} bytes is truncated")
            block = view[pos:pos + length]
            pos += length
            if len(out) + cramjam.snappy.decompress_raw_len(block) > max_size:
                raise _too_large(max_size)
            out += cramjam.snappy.decompress_raw(block)
        return out
    if cramjam.snappy.decompress_raw_len(view) > max_size:
        raise _too_large(max_size)
    return bytes(cramjam.snappy.decompress_raw(view))


# ---------------------------------------------------------------------------------------------
# lz4 (frame format, https://github.com/lz4/lz4/blob/dev/doc/lz4_Frame_format.md)

LZ4_MAGIC = 0x184D2204
_LZ4_FLG_VERSION_1 = 0x40
_LZ4_FLG_BLOCK_INDEPENDENCE = 0x20
_LZ4_FLG_BLOCK_CHECKSUM = 0x10
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_CONTENT_CHECKSUM = 0x04
_LZ4_FLG_DICT_ID = 0x01
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}
_LZ4_UNCOMPRESSED_BIT = 0x80000000
_LZ4_BLOCK_SIZE = 64 * 1024  # what Kafka's Lz4BlockOutputStream writes
_UINT32_LE = struct.Struct("<I")
_UINT64_LE = struct.Struct("<Q")

_PRIME32_1 = 2654435761
_PRIME32_2 = 2246822519
_PRIME32_3 = 3266489917
_PRIME32_4 = 668265263
_PRIME32_5 = 374761393
_MASK32 = 0xFFFFFFFF


def _xxh32_short(data: bytes, seed: int = 0) -> int:
    """XXH32 of fewer than 16 bytes (enough for an LZ4 frame descriptor)."""
    if len(data) >= 16:
        raise ValueError("only inputs shorter than 16 bytes are supported")
    h = (seed + _PRIME32_5 + len(data)) & _MASK32
    pos = 0
    while pos + 4 <= len(data):
        (word,) = _UINT32_LE.unpack_from(data, pos)
        h = (h + word * _PRIME32_3) & _MASK32
        h = (((h << 17) | (h >> 15)) & _MASK32) * _PRIME32_4 & _MASK32
        pos += 4
    for byte in data[pos:]:
        h = (h + byte * _PRIME32_5) & _MASK32
        h = (((h << 11) | (h >> 21)) & _MASK32) * _PRIME32_1 & _MASK32
    h ^= h >> 15
    h = (h * _PRIME32_2) & _MASK32
    h ^= h >> 13
    h = (h * _PRIME32_3) & _MASK32
    h ^= h >> 16
    return h


def _lz4_frame_header() -> bytes:
    descriptor = bytes((_LZ4_FLG_VERSION_1 | _LZ4_FLG_BLOCK_INDEPENDENCE, 4 << 4))
    checksum = (_xxh32_short(descriptor) >> 8) & 0xFF
    return _UINT32_LE.pack(LZ4_MAGIC) + descriptor + bytes((checksum,))


_LZ4_FRAME_HEADER = _lz4_frame_header()
_LZ4_END_MARK = b"\x00\x00\x00\x00"


def _lz4_frame_compress(data) -> bytes:
    view = memoryview(data)
    out = bytearray(_LZ4_FRAME_HEADER)
    compress_block = cramjam.lz4.compress_block
    for start in range(0, len(view), _LZ4_BLOCK_SIZE):
        chunk = view[start:start + _LZ4_BLOCK_SIZE]
        block = compress_block(chunk, store_size=False)
        if len(block) < len(chunk):
            out += _UINT32_LE.pack(len(block))
            out += block
        else:
            out += _UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_BIT)
            out += chunk
    out += _LZ4_END_MARK
    return bytes(out)


def _lz4_decompress(data, max_size: int) -> bytearray:
    view = memoryview(data)
    end = len(view)
    out = bytearray()
    pos = 0
    scratch = None
    decompress_block_into = cramjam.lz4.decompress_block_into
    while True:  # one or more frames
        if end - pos < 7:
            raise CorruptRecordError("lz4 frame header truncated")
        (magic,) = _UINT32_LE.unpack_from(view, pos)
        if magic != LZ4_MAGIC:
            raise CorruptRecordError(f"not an lz4 frame: magic {magic:#010x}")
        flg = view[pos + 4]
        bd = view[pos + 5]
        pos += 6
        if flg >> 6 != 1:
            raise CorruptRecordError(f"unsupported lz4 frame version {flg >> 6}")
        if not flg & _LZ4_FLG_BLOCK_INDEPENDENCE:
            raise CorruptRecordError("lz4 frames with dependent blocks are not supported")
        if flg & _LZ4_FLG_DICT_ID:
            raise CorruptRecordError("lz4 frames with a dictionary are not supported")
        block_max = _LZ4_BLOCK_SIZES.get((bd >> 4) & 0x07)
        if block_max is None or bd & 0x8F:
            raise CorruptRecordError(f"invalid lz4 block descriptor {bd:#04x}")
        if flg & _LZ4_FLG_CONTENT_SIZE:
            if end - pos < 9:
                raise CorruptRecordError("lz4 frame header truncated")
            (content_size,) = _UINT64_LE.unpack_from(view, pos)
            if len(out) + content_size > max_size:
                raise _too_large(max_size)
            pos += 8
        pos += 1  # header checksum, not verified (see the module docstring)
        if scratch is None or len(scratch) < block_max:
            scratch = bytearray(block_max)
        block_checksum = 4 if flg & _LZ4_FLG_BLOCK_CHECKSUM else 0
        while True:  # blocks up to the end mark
            if end - pos < 4:
                raise CorruptRecordError("lz4 frame truncated before its end mark")
            (size,) = _UINT32_LE.unpack_from(view, pos)
            pos += 4
            if size == 0:
                break
            uncompressed = size & _LZ4_UNCOMPRESSED_BIT
            size &= ~_LZ4_UNCOMPRESSED_BIT
            if size > block_max:
                raise CorruptRecordError(
                    f"lz4 block of {size} bytes exceeds the frame's maximum {block_max}")
            if end - pos < size + block_checksum:
                raise CorruptRecordError("lz4 block truncated")
            block = view[pos:pos + size]
            pos += size + block_checksum
            if uncompressed:
                out += block
            else:
                n = decompress_block_into(block, scratch)
                out += memoryview(scratch)[:n]
            if len(out) > max_size:
                raise _too_large(max_size)
        if flg & _LZ4_FLG_CONTENT_CHECKSUM:
            if end - pos < 4:
                raise CorruptRecordError("lz4 content checksum truncated")
            pos += 4
        if pos == end:
            return out


# ---------------------------------------------------------------------------------------------
# zstd

ZSTD_MAGIC = 0xFD2FB528
_ZSTD_MIN_BUFFER = 64 * 1024


def _zstd_content_size(view) -> int | None:
    """The content size in the first frame's header, or None when the header has none."""
    if len(view) < 6 or _UINT32_LE.unpack_from(view, 0)[0] != ZSTD_MAGIC:
        return None
    descriptor = view[4]
    size_flag = descriptor >> 6
    single_segment = (descriptor >> 5) & 1
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[descriptor & 0x03]
    width = (1 if single_segment else 0, 2, 4, 8)[size_flag]
    if width == 0 or len(view) < pos + width:
        return None
    size = int.from_bytes(view[pos:pos + width], "little")
    return size + 256 if width == 2 else size


def _zstd_decompress(data, max_size: int) -> bytearray:
    view = memoryview(data)
    known = _zstd_content_size(view)
    if known is not None and known > max_size:
        raise _too_large(max_size)
    # cramjam decompresses into a buffer and fails when the output does not fit; frames without
    # a content size are handled by growing the buffer up to max_size.
    capacity = min(max_size, known if known is not None else max(_ZSTD_MIN_BUFFER, 8 * len(view)))
    while True:
        buffer = bytearray(capacity)
        try:
            n = cramjam.zstd.decompress_into(view, buffer)
        except cramjam.DecompressionError as e:
            if capacity >= max_size:
                raise CorruptRecordError(
                    f"invalid zstd data or output over the limit of {max_size} bytes: {e}"
                ) from e
            capacity = min(max_size, max(capacity * 4, _ZSTD_MIN_BUFFER))
            continue
        del buffer[n:]
        return buffer
