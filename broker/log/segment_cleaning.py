"""The file work of compacting a SegmentLog (the segment side of Kafka's Cleaner) and the
recovery of a swap a crash interrupted (Kafka's LogLoader).

A cleaning pass (``SegmentLog.cleaning_pass``) hands ``clean_files`` a ``CleaningJob`` of plain
values; in the cleaner's thread it builds the offset map of the dirty segments and writes each
group of segments, cleaned, as ``<base>.log.cleaned`` with ``.index.cleaned`` and
``.timeindex.cleaned``, fsynced. Nothing the log uses is touched: on the event loop the log
renames the files ``.swap`` (the log first), deletes the segments they replace and renames the
``.swap`` files to their final names (the log last). Opening a log (``complete_swaps``) deletes
``.cleaned`` files and finishes an interrupted swap: a ``.log.swap`` replaces every segment whose
base offset falls in its offset range.
"""
from __future__ import annotations

import logging
import os
import threading

from protocol.records import HEADER_SIZE, LOG_OVERHEAD, RecordBatch

from . import files
from .base import INT_MAX
from .cleaner import BatchFilter, CleanedTransactions, OffsetMap, map_batch
from .files import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LAST_DELTA,
    LAST_DELTA_AT,
    LENGTH_AT,
    LOG_SUFFIX,
    NEED_FOR_NEXT,
    SCAN_CHUNK,
    SEGMENT_NAME,
    SWAP_FILE,
    SWAP_LOG,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    Reader,
    segment_path,
    write_all,
)
from .segment import LogSegment

__all__ = ["CleaningAborted", "CleaningJob", "clean_files", "complete_swaps", "remove_cleaned"]

logger = logging.getLogger("broker.log")


class CleaningAborted(Exception):
    """The log was closed or deleted while a pass worked on its files."""


class CleaningJob:
    """What a cleaning pass's thread needs, as plain values (nothing it reads is shared with
    the event loop but the segment files, which are immutable once rolled)."""

    __slots__ = ("directory", "segments", "first_dirty", "first_uncleanable", "now",
                 "delete_retention_ms", "segment_bytes", "index_interval_bytes", "aborted",
                 "last_records", "map_bytes", "stop")

    def __init__(self, **values) -> None:
        for name, value in values.items():
            setattr(self, name, value)


class _CleanedSegment:
    """One cleaned segment written as ``<base>.*.cleaned``, replacing the segments at
    ``replaces`` (base offsets), with its indexes."""

    __slots__ = ("base_offset", "replaces", "size", "idx_rel", "idx_pos", "time_ts", "time_rel",
                 "max_ts", "max_ts_offset")


class _CleaningResult:
    __slots__ = ("end_offset", "cleaned", "retained_aborted", "bytes_read", "bytes_written")


def _file_batches(path: str, size: int, stop: threading.Event):
    """(position, RecordBatch) of every batch of a segment file up to ``size``."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        reader = Reader(fd, size, SCAN_CHUNK)
        pos = 0
        while pos < size:
            if stop.is_set():
                raise CleaningAborted()
            got = reader.ensure(pos, HEADER_SIZE)
            if got is None:
                return
            length = LENGTH_AT.unpack_from(*got)[1]
            got = reader.ensure(pos, LOG_OVERHEAD + length)
            if got is None:
                return
            batch = RecordBatch(*got)
            yield pos, batch
            pos += batch.size
    finally:
        os.close(fd)


def _group_by_size(segments: list[tuple[int, int]], max_size: int,
                   first_uncleanable: int) -> list[list[tuple[int, int]]]:
    """Kafka's groupSegmentsBySize: consecutive segments whose sizes add up to at most
    segment.bytes and whose offsets fit one segment's int32 relative offsets."""
    groups = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i][1]
        i += 1
        while i < len(segments):
            base, seg_size = segments[i]
            last = (segments[i + 1][0] if i + 1 < len(segments) else first_uncleanable) - 1
            if size + seg_size > max_size or (seg_size and last - group[0][0] > INT_MAX):
                break
            group.append(segments[i])
            size += seg_size
            i += 1
        groups.append(group)
    return groups


def clean_files(job: CleaningJob) -> _CleaningResult:
    """The file work of one cleaning pass (run in the cleaner's thread): the offset map of the
    dirty segments, then every segment up to the end of the mapped part rewritten, by groups,
    into ``<base>.log.cleaned`` with its indexes, fsynced. Nothing the log uses is touched:
    the event loop swaps the files in."""
    stop = job.stop
    offset_map = OffsetMap(job.map_bytes)
    txns = CleanedTransactions(job.aborted)
    result = _CleaningResult()
    result.bytes_read = result.bytes_written = 0
    segments = job.segments
    start = job.first_dirty
    full = False
    for i, (base, size) in enumerate(segments):
        next_base = segments[i + 1][0] if i + 1 < len(segments) else job.first_uncleanable
        if next_base <= start:
            continue
        for _pos, batch in _file_batches(segment_path(job.directory, base, LOG_SUFFIX),
                                         size, stop):
            if batch.last_offset < start:
                continue
            result.bytes_read += batch.size
            if map_batch(offset_map, batch, start, txns):
                full = True
                break
        if full:
            break
        offset_map.latest_offset = next_base - 1
    end_offset = offset_map.latest_offset + 1
    result.end_offset = end_offset
    result.cleaned = []
    if end_offset <= start:
        return result
    keep = BatchFilter(offset_map, CleanedTransactions(job.aborted), job.last_records,
                       job.first_uncleanable, job.now, job.delete_retention_ms)
    to_clean = [seg for seg in segments if seg[0] < end_offset]
    written = []
    try:
        for group in _group_by_size(to_clean, job.segment_bytes, job.first_uncleanable):
            cleaned = _clean_group(job, group, keep, result)
            written.append(cleaned.base_offset)
            result.cleaned.append(cleaned)
    except BaseException:
        for base in written:
            remove_cleaned(job.directory, base)
        raise
    result.retained_aborted = keep.txns.retained_aborted
    return result


def _clean_group(job: CleaningJob, group: list[tuple[int, int]], keep: BatchFilter,
                 result: _CleaningResult) -> _CleanedSegment:
    directory = job.directory
    base_offset = group[0][0]
    seg = LogSegment(directory, base_offset)
    path = segment_path(directory, base_offset, LOG_SUFFIX + CLEANED_SUFFIX)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0),
                 0o644)
    try:
        out = bytearray()
        position = 0
        interval = job.index_interval_bytes
        for base, size in group:
            for _pos, batch in _file_batches(segment_path(directory, base, LOG_SUFFIX), size,
                                             job.stop):
                kept = keep.filter(batch)
                if kept is None:
                    continue
                kept_batch = RecordBatch(kept)
                seg.add_batch(position, len(kept), kept_batch.base_offset,
                              kept_batch.max_timestamp, interval)
                out += kept
                position += len(kept)
                if len(out) >= SCAN_CHUNK:
                    os.write(fd, out)
                    out.clear()
        if out:
            os.write(fd, out)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        remove_cleaned(directory, base_offset)
        raise
    os.close(fd)
    # the cleaned segment keeps the modification time of the last one it replaces (retention
    # of batches without timestamps goes by it, as on Kafka)
    last = segment_path(directory, group[-1][0], LOG_SUFFIX)
    try:
        stat = os.stat(last)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    except OSError:
        pass
    seg.finish_time_index()
    index, time_index = seg.index_data()
    for suffix, data in ((INDEX_SUFFIX, index), (TIME_INDEX_SUFFIX, time_index)):
        index_path = segment_path(directory, base_offset, suffix + CLEANED_SUFFIX)
        index_fd = os.open(index_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(index_fd, data, 0)
            os.fsync(index_fd)
        finally:
            os.close(index_fd)
    cleaned = _CleanedSegment()
    cleaned.base_offset = base_offset
    cleaned.replaces = [base for base, _size in group]
    cleaned.size = position
    cleaned.idx_rel, cleaned.idx_pos = seg.idx_rel, seg.idx_pos
    cleaned.time_ts, cleaned.time_rel = seg.time_ts, seg.time_rel
    cleaned.max_ts, cleaned.max_ts_offset = seg.max_ts, seg.max_ts_offset
    result.bytes_written += position
    return cleaned


def remove_cleaned(directory: str, base_offset: int) -> None:
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        for tail in (CLEANED_SUFFIX, SWAP_SUFFIX):
            try:
                os.unlink(segment_path(directory, base_offset, suffix + tail))
            except FileNotFoundError:
                pass


def _next_offset_of(path: str) -> int:
    """The offset after the last whole batch of a segment file (a .swap being recovered)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        reader = Reader(fd, size, SCAN_CHUNK)
        pos, next_offset = 0, -1
        while pos < size:
            got = reader.ensure(pos, NEED_FOR_NEXT)
            if got is None:
                break
            buf, rel = got
            base, length = LENGTH_AT.unpack_from(buf, rel)
            next_offset = base + LAST_DELTA.unpack_from(buf, rel + LAST_DELTA_AT)[0] + 1
            pos += LOG_OVERHEAD + length
        return next_offset
    finally:
        os.close(fd)


def complete_swaps(directory: str) -> None:
    """Finish or undo a swap of cleaned segments that a crash interrupted (Kafka's
    LogLoader): ``*.cleaned`` files were not complete and go; a ``.log.swap`` was complete
    (written and fsynced before its rename), so the segments it replaces, those whose base
    offsets fall in its offset range, go and it takes their place; index ``.swap`` files
    without their ``.log.swap`` go (the indexes are rebuilt)."""
    names = os.listdir(directory)
    swaps: dict[int, str] = {}
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            os.unlink(os.path.join(directory, name))
        else:
            match = SWAP_LOG.match(name)
            if match:
                swaps[int(match.group(1))] = name
    for name in names:
        match = SWAP_FILE.match(name)
        if match and match.group(2) != "log" and int(match.group(1)) not in swaps:
            os.unlink(os.path.join(directory, name))
    if not swaps:
        return
    low = min(swaps)
    high = max(_next_offset_of(os.path.join(directory, name)) for name in swaps.values())
    for name in os.listdir(directory):
        match = SEGMENT_NAME.match(name)
        if match and low <= int(match.group(1)) < high:
            logger.info("partition log %s: deleting %s, replaced by a cleaned segment whose "
                        "swap a crash interrupted", directory, name)
            os.unlink(os.path.join(directory, name))
    for name in os.listdir(directory):
        if SWAP_FILE.match(name):
            os.rename(os.path.join(directory, name),
                      os.path.join(directory, name[:-len(SWAP_SUFFIX)]))
    files.fsync_dir(directory)
