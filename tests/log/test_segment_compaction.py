"""Compaction of segment files (issue 14, defect 6): cleaned segments replace the old ones
crash-safely, the indexes stay right, transactions follow Kafka's cleaner rules, and the
producer state rebuilt from the cleaned log is the one before. Fake clock, no sleeping."""
from __future__ import annotations

import asyncio
import os
import threading

import pytest

from broker.log import LogConfig, LogManager, SegmentLog
from broker.log import files as files_module
from broker.log import segment as segment_module
from broker.log import segment_cleaning
from broker.log import segments as segments_module
from broker.log.cleaner import LogCleaner
from broker.topics import Partition
from protocol.errors import ErrorCode as E
from protocol.records import RecordBatch, build_batch, iter_batches

NOW = 1_000_000_000


def compacted(path, clock, **fields) -> SegmentLog:
    fields.setdefault("segment_bytes", 2000)
    fields.setdefault("cleanup_policy", "compact")
    return SegmentLog(path, LogConfig(**fields), clock=clock)


def put(log, key, value, ts=NOW - 10_000):
    return log.append(build_batch([(key, value, (), ts)])).first_offset


def read_all(log, offset=None):
    out = []
    offset = log.log_start_offset if offset is None else offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data:
            break
        for batch in iter_batches(data):
            out += [(r.offset, r.key, r.value) for r in batch.records() if r.offset >= offset]
            offset = batch.next_offset
    return out


def files(path) -> list[str]:
    return sorted(os.listdir(path))


def fill(log, rounds=40, keys=7):
    for i in range(rounds * keys):
        put(log, b"k%d" % (i % keys), b"v%d" % i)


def test_segments_are_rewritten_with_the_last_record_of_each_key(tmp_path, clock):
    clock.now = NOW
    log = compacted(tmp_path, clock)
    fill(log)
    before = read_all(log)
    segments, size = log.segment_count, log.size_bytes
    assert segments > 5
    freed = log.compact()
    assert freed > 0 and log.size_bytes == size - freed
    on_disk = sum(os.path.getsize(tmp_path / n) for n in files(tmp_path) if n.endswith(".log"))
    assert on_disk == log.size_bytes
    after = read_all(log)
    active = log.segment_base_offsets[-1]
    latest = {key: offset for offset, key, _ in before if offset < active}
    # the last record of each key below the active segment, and all of the active segment
    assert after == [r for r in before if r[0] >= active or r[0] == latest[r[1]]]
    assert [r for r in after if r[0] >= active] == [r for r in before if r[0] >= active]
    assert log.log_start_offset == 0 and log.log_end_offset == 280
    assert not [n for n in files(tmp_path) if n.endswith((".cleaned", ".swap"))]
    # a read inside a gap goes on from the next batch; the time index finds what is left
    assert RecordBatch(log.read(5, 1 << 20)).base_offset == after[0][0]
    assert log.offset_for_timestamp(0) == (after[0][0], NOW - 10_000)
    log.close()
    reopened = compacted(tmp_path, clock)
    assert read_all(reopened) == after
    assert reopened.segment_base_offsets == log.segment_base_offsets
    # the indexes written by the cleaner pass the sanity checks: nothing was rescanned
    for seg in reopened._segments[:-1]:
        assert seg.load_indexes(reopened._bases[reopened._bases.index(seg.base_offset) + 1])
    reopened.close()


def test_the_next_pass_merges_small_cleaned_segments_and_starts_at_the_checkpoint(tmp_path,
                                                                                 clock):
    clock.now = NOW
    log = compacted(tmp_path, clock)
    fill(log)
    log.compact()
    many = log.segment_count
    assert log.cleanable_ratio(NOW) is None  # nothing dirty: the checkpoint says so
    log.close()
    log = compacted(tmp_path, clock)
    assert log.cleanable_ratio(NOW) is None  # nor after a restart
    put(log, b"k1", b"again")
    log._roll()
    put(log, b"tail", b"x")
    assert log.compact() > 0
    assert many > 5 and log.segment_count == 2  # the small cleaned segments went into one
    assert sorted(r[1:] for r in read_all(log)) == sorted(
        [(b"k%d" % k, b"v%d" % (273 + k)) for k in (0, 2, 3, 4, 5, 6)] +
        [(b"k1", b"again"), (b"tail", b"x")])
    log.close()


@pytest.mark.parametrize("crash_at", range(12))
def test_a_crash_anywhere_in_the_swap_leaves_a_whole_log(tmp_path, clock, monkeypatch,
                                                         crash_at):
    """Every file operation of the swap is a crash point; the reopened log holds either the
    old segments or the cleaned ones, never a mix, a loss or a leftover file."""
    clock.now = NOW
    log = compacted(tmp_path, clock)
    fill(log, rounds=20)
    before = read_all(log)
    operations = []

    class Crash(Exception):
        pass

    def count(name, real):
        def wrapper(*args, **kwargs):
            if len(operations) == crash_at:
                raise Crash(name)
            operations.append(name)
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(segments_module.os, "rename", count("rename", os.rename))
    monkeypatch.setattr(files_module, "fsync_dir", count("fsync", files_module.fsync_dir))
    monkeypatch.setattr(segment_module.LogSegment, "delete_files",
                        count("delete", segment_module.LogSegment.delete_files))
    try:
        log.compact()
        crashed = False
    except Crash:
        crashed = True
    monkeypatch.undo()
    if not crashed:
        assert crash_at >= len(operations)
        return
    cleaned = {(o, k, v) for o, k, v in before if
               o == max(o2 for o2, k2, _ in before if k2 == k)}
    reopened = compacted(tmp_path, clock)
    got = read_all(reopened)
    assert got == before or set(got) >= cleaned and len(got) < len(before), (crash_at, got)
    assert [o for o, _, _ in got] == sorted({o for o, _, _ in got})
    assert not [n for n in files(tmp_path) if n.endswith((".cleaned", ".swap"))]
    reopened.compact(NOW)
    assert set(read_all(reopened)) >= cleaned
    reopened.close()


def test_a_pass_swaps_nothing_in_when_segments_were_deleted_meanwhile(tmp_path, clock):
    clock.now = NOW
    log = compacted(tmp_path, clock, cleanup_policy="compact,delete")
    fill(log)
    before = log.size_bytes
    steps = log.cleaning_pass(NOW)
    work = next(steps)
    result = work()  # the file work, done while ...
    assert [n for n in files(tmp_path) if n.endswith(".cleaned")]
    log.delete_records_before(60)  # ... DeleteRecords drops the first segments
    with pytest.raises(StopIteration) as stop:
        steps.send(result)
    assert stop.value.value == 0
    assert not [n for n in files(tmp_path) if n.endswith(".cleaned")]
    assert log.size_bytes < before and len(read_all(log)) == 280 - 60
    assert log.compact() > 0  # the next pass cleans what is left
    log.close()


def test_closing_the_log_stops_the_file_work(tmp_path, clock):
    clock.now = NOW
    log = compacted(tmp_path, clock)
    fill(log)
    steps = log.cleaning_pass(NOW)
    work = next(steps)
    log.close()
    with pytest.raises(segment_cleaning.CleaningAborted):
        work()
    assert not [n for n in files(tmp_path) if n.endswith(".cleaned")]


def test_the_broker_cleaner_does_the_file_work_in_its_thread(tmp_path, clock, monkeypatch):
    clock.now = NOW
    manager = LogManager(str(tmp_path), LogConfig(cleanup_policy="compact", segment_bytes=2000),
                         clock=clock)
    log = manager.get_or_create("compacted", 0)
    fill(log)
    threads = []
    real = segment_cleaning.clean_files

    def clean_files(job):
        threads.append(threading.get_ident())
        return real(job)

    monkeypatch.setattr(segment_cleaning, "clean_files", clean_files)
    cleaner = LogCleaner(manager, clock=clock)

    async def run():
        assert await cleaner.clean_filthiest() is True
        await cleaner.stop()

    asyncio.run(run())
    assert threads and threads[0] != threading.get_ident()
    assert len(read_all(log)) < 20 and cleaner.bytes_freed > 0
    manager.close()


# --- transactions -----------------------------------------------------------------------------

def partition(path, clock) -> Partition:
    return Partition(None, 0, compacted(path, clock, min_cleanable_dirty_ratio=0.0,
                                        segment_bytes=300))


def produce(p, key, value, *, pid=-1, epoch=-1, seq=-1, transactional=False):
    data = build_batch([(key, value, (), NOW - 10_000)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq,
                       is_transactional=transactional)
    guard = None
    if transactional:
        _, guard = p.producers.start_verification(pid, seq, epoch, True)
    code, first, _ = p.append_batch(data, RecordBatch(data), verification=guard)
    assert code == E.NONE
    return first


def end(p, pid, epoch, commit):
    assert p.write_end_marker(pid, epoch, commit, 0, NOW - 10_000) == E.NONE


def batches(log):
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data:
            break
        for b in iter_batches(data):
            out.append((b.base_offset, b.is_control, b.record_count))
            offset = b.next_offset
    return out


def roll(p):
    """Start a new segment, so that everything before it is cleanable."""
    log = p.log
    log._roll()


def test_aborted_records_go_markers_stay_then_go_after_delete_retention(tmp_path, clock):
    clock.now = NOW
    p = partition(tmp_path, clock)
    produce(p, b"a", b"1")  # 0
    produce(p, b"a", b"2", pid=7, epoch=0, seq=0, transactional=True)  # 1, aborted
    end(p, 7, 1, commit=False)  # 2
    produce(p, b"b", b"1", pid=8, epoch=0, seq=0, transactional=True)  # 3, committed
    end(p, 8, 1, commit=True)  # 4
    produce(p, b"b", b"2")  # 5: b=1 is superseded
    roll(p)
    produce(p, b"z", b"1")  # 6, the active segment
    p.log.compact(NOW)
    # 1 is gone (aborted), the markers stay: records of their transactions were seen
    assert batches(p.log) == [(0, False, 1), (2, True, 1), (4, True, 1), (5, False, 1),
                              (6, False, 1)]
    assert [(t.producer_id, t.last_offset) for t in p.log.txn_index] == [(7, 2)]
    roll(p)
    produce(p, b"z", b"2")  # 7
    p.log.compact(NOW)
    # nothing of the transactions is left: the markers get their delete horizon, and stay
    # the producers' last batches (the epoch is rebuilt from them)
    assert batches(p.log) == [(0, False, 1), (2, True, 1), (4, True, 1), (5, False, 1),
                              (6, False, 1), (7, False, 1)]
    assert list(p.log.txn_index) == []
    markers = [b for b in iter_batches(p.log.read(2, 1 << 20)) if b.is_control]
    assert all(b.attributes & 0x40 and b.base_timestamp == NOW + 86_400_000 for b in markers)
    p.log.close()


def test_markers_of_producers_that_wrote_again_go_after_delete_retention(tmp_path, clock):
    clock.now = NOW
    p = partition(tmp_path, clock)
    produce(p, b"a", b"1", pid=7, epoch=0, seq=0, transactional=True)  # 0
    end(p, 7, 1, commit=False)  # 1
    produce(p, b"a", b"2", pid=7, epoch=1, seq=0)  # 2: producer 7 writes again, idempotent
    roll(p)
    produce(p, b"z", b"1")  # 3
    p.log.compact(NOW)
    assert batches(p.log) == [(1, True, 1), (2, False, 1), (3, False, 1)]
    roll(p)
    produce(p, b"z", b"2")  # 4
    p.log.compact(NOW)  # the marker may go now: it gets its horizon
    roll(p)
    produce(p, b"z", b"3")  # 5
    clock.now = NOW + 86_400_001
    p.log.compact(clock.now)
    # z=2 stays: z=3 is in the active segment, which shadows nothing yet
    assert batches(p.log) == [(2, False, 1), (4, False, 1), (5, False, 1)]
    p.log.close()


def test_nothing_at_or_above_the_last_stable_offset_is_cleaned(tmp_path, clock):
    clock.now = NOW
    p = partition(tmp_path, clock)
    produce(p, b"a", b"1")  # 0
    produce(p, b"a", b"2")  # 1
    roll(p)
    produce(p, b"a", b"3", pid=7, epoch=0, seq=0, transactional=True)  # 2, open
    produce(p, b"a", b"4")  # 3
    roll(p)
    produce(p, b"a", b"5")  # 4
    roll(p)
    produce(p, b"z", b"1")  # 5
    assert p.log.last_stable_offset == 2
    p.log.compact(NOW)
    # only the segment below the LSO's segment was cleaned, against what it holds itself
    assert batches(p.log) == [(1, False, 1), (2, False, 1), (3, False, 1), (4, False, 1),
                              (5, False, 1)]
    end(p, 7, 1, commit=True)  # 6
    roll(p)
    produce(p, b"z", b"2")  # 7
    p.log.compact(NOW)
    assert [b for b in batches(p.log) if not b[1]] == [(4, False, 1), (5, False, 1),
                                                        (7, False, 1)]
    p.log.close()


def test_producer_state_rebuilt_from_the_cleaned_log_is_the_one_before(tmp_path, clock):
    """An idempotent producer whose records were all superseded keeps its last batch (empty),
    so after a restart its retry is still a duplicate and its next sequence still fits."""
    clock.now = NOW
    p = partition(tmp_path, clock)
    produce(p, b"a", b"1", pid=9, epoch=3, seq=0)  # 0
    produce(p, b"a", b"2", pid=9, epoch=3, seq=1)  # 1
    produce(p, b"a", b"3")  # 2
    roll(p)
    produce(p, b"z", b"1")  # 3
    p.log.compact(NOW)
    assert batches(p.log) == [(1, False, 0), (2, False, 1), (3, False, 1)]
    p.log.close()
    reopened = Partition(None, 0, compacted(tmp_path, clock, min_cleanable_dirty_ratio=0.0,
                                            segment_bytes=300))
    reopened.producers.rebuild(reopened.log)
    entry = reopened.producers.producers[9]
    assert (entry.epoch, entry.last_seq) == (3, 1)
    retry = build_batch([(b"a", b"2", (), NOW)], producer_id=9, producer_epoch=3,
                        base_sequence=1)
    code, duplicate = reopened.producers.check(RecordBatch(retry))
    assert code == E.NONE and duplicate is not None and duplicate.first_offset == 1
    gap = build_batch([(b"a", b"9", (), NOW)], producer_id=9, producer_epoch=3,
                      base_sequence=5)
    assert reopened.producers.check(RecordBatch(gap))[0] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    reopened.log.close()


def test_tombstones_keep_their_delete_horizon_across_a_restart(tmp_path, clock):
    clock.now = NOW
    log = compacted(tmp_path, clock, min_cleanable_dirty_ratio=0.0, delete_retention_ms=60_000,
                    segment_bytes=300)
    put(log, b"a", b"1")
    put(log, b"a", None)
    put(log, b"b", b"1")
    log._roll()
    put(log, b"z", b"1")
    log.compact(NOW)
    assert read_all(log) == [(1, b"a", None), (2, b"b", b"1"), (3, b"z", b"1")]
    log.close()
    log = compacted(tmp_path, clock, min_cleanable_dirty_ratio=0.0, delete_retention_ms=60_000,
                    segment_bytes=300)
    log._roll()
    put(log, b"z", b"2")
    clock.now = NOW + 30_000
    log.compact(clock.now)
    assert (1, b"a", None) in read_all(log)  # 30 s of 60 s
    log._roll()
    put(log, b"z", b"3")
    clock.now = NOW + 61_000
    log.compact(clock.now)
    assert [r for r in read_all(log) if r[1] == b"a"] == []
    log.close()
