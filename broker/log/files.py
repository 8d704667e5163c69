"""The files of a partition directory and positional I/O on them (Kafka's FileRecords and the
file utilities its storage layer uses).

Names: per segment ``<base offset, 20 digits>.log``, ``.index`` and ``.timeindex``; ``.tmp``
for an atomic write in progress; ``.cleaned`` and ``.swap`` for a cleaning pass's segments
(``segment_cleaning``); ``log-start-offset.checkpoint`` and ``cleaner-offset.checkpoint``
(version line, then an offset).

The batch-header structs read the few fields of a record batch's header that the log needs
(base offset, length, last offset delta, max timestamp) without decoding the batch.

Other modules call the fsync helpers through this module (``files.sync_data(fd)``), so tests
can replace them in one place.
"""
from __future__ import annotations

import os
import re
import struct

CHECKPOINT_FILE = "log-start-offset.checkpoint"
CLEANER_CHECKPOINT_FILE = "cleaner-offset.checkpoint"
CHECKPOINT_VERSION = 0
LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TMP_SUFFIX = ".tmp"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SWAP_LOG = re.compile(r"^(\d{20})\.log\.swap$")
SWAP_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex)\.swap$")
SEGMENT_NAME = re.compile(r"^(\d{20})\.(log|index|timeindex)$")
SCAN_CHUNK = 4 << 20
OFFSET_INDEX_ENTRY = 8
TIME_INDEX_ENTRY = 12

LENGTH_AT = struct.Struct(">qi")  # base offset, batch length
LAST_DELTA = struct.Struct(">i")  # at +23
MAX_TS = struct.Struct(">q")  # at +35
LAST_DELTA_AT = 23
MAX_TS_AT = 35
NEED_FOR_SIZE = 12
NEED_FOR_NEXT = 27
NEED_FOR_MAX_TS = 43


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    return f"{base_offset:020d}{suffix}"


def segment_path(directory: str, base_offset: int, suffix: str) -> str:
    return os.path.join(directory, segment_file_name(base_offset, suffix))


def pread_full(fd: int, length: int, position: int) -> bytes:
    data = os.pread(fd, length, position)
    if len(data) == length or not data:
        return data
    parts = [data]
    got = len(data)
    while got < length:
        more = os.pread(fd, length - got, position + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def write_all(fd: int, data, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view = view[written:]
        position += written


def sync_data(fd: int) -> None:
    """fdatasync where the platform has it (the file's size is data, so appends are covered)."""
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:
        os.fsync(fd)


def fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, *, durable: bool, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` whole or not at all: a temporary file renamed over it
    (``durable``: the file and then its directory fsynced, so the rename survives a crash).
    ``mode`` is the new file's (0o600 for secrets)."""
    tmp = path + TMP_SUFFIX
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        write_all(fd, data, 0)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(os.path.dirname(path))


def write_json(path: str, doc, *, mode: int = 0o644, **options) -> None:
    """A state file of the data directory (topics, configs, ACLs, credentials, quotas,
    features, tokens) written durably and atomically as JSON (``options``: json.dumps's),
    its directory made first if this is a fresh data directory."""
    import json  # noqa: PLC0415 - not needed by the log's own files
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    atomic_write(path, json.dumps(doc, **options).encode(), durable=True, mode=mode)


class Reader:
    """Buffered positional reads over one segment file: one pread per chunk."""

    __slots__ = ("fd", "limit", "chunk", "buf", "start")

    def __init__(self, fd: int, limit: int, chunk: int):
        self.fd = fd
        self.limit = limit
        self.chunk = chunk
        self.buf = b""
        self.start = 0

    def ensure(self, pos: int, n: int):
        """(buffer, index) such that buffer[index:index + n] is the file's [pos, pos + n);
        None if the file (up to limit) ends first."""
        start = self.start
        if pos >= start and pos + n <= start + len(self.buf):
            return self.buf, pos - start
        if pos + n > self.limit:
            return None
        length = min(max(n, self.chunk), self.limit - pos)
        buf = pread_full(self.fd, length, pos)
        if len(buf) < n:
            return None
        self.buf = buf
        self.start = pos
        return buf, 0

    def slice(self, start: int, end: int):
        if start >= self.start and end <= self.start + len(self.buf):
            rel = start - self.start
            if rel == 0 and end - start == len(self.buf):
                return self.buf
            return memoryview(self.buf)[rel:rel + end - start]
        return pread_full(self.fd, end - start, start)
