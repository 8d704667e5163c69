"""The in-memory log cleaner (cleanup.policy=compact): the last record of each key stays, with
its offset; consumers read across the gaps; tombstones go after delete.retention.ms; young and
active data is left alone. Fake clock, no sleeping."""
from __future__ import annotations

import asyncio

from broker.log import LogConfig, LogManager, MemoryLog
from broker.log.cleaner import DEFAULT_MAP_BYTES, LogCleaner
from protocol.records import RecordBatch, build_batch, iter_batches

NOW = 1_000_000_000


def compacted_log(clock, **fields) -> MemoryLog:
    return MemoryLog(LogConfig(cleanup_policy="compact", **fields), clock=clock)


def append(log: MemoryLog, *records, compression: int = 0) -> None:
    """records: (key, value) pairs, stamped NOW - 10 s, one batch."""
    log.append(build_batch([(k, v, (), NOW - 10_000) for k, v in records],
                           compression=compression))


def read_all(log: MemoryLog, offset: int | None = None) -> list[tuple[int, bytes, bytes]]:
    """Every record from offset on, reading batch after batch like a consumer does."""
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


def test_keeps_the_last_record_of_each_key_with_its_offset(clock):
    clock.now = NOW
    log = compacted_log(clock)
    append(log, (b"a", b"1"), (b"b", b"1"))
    append(log, (b"a", b"2"), (b"c", b"1"), compression=1)   # gzip survives the rewrite
    append(log, (b"b", b"2"))
    append(log, (b"a", b"3"))         # the active tail: neither cleaned nor counted, as Kafka's
    before = log.size_bytes
    freed = log.compact()
    assert freed > 0 and log.size_bytes == before - freed
    assert read_all(log) == [(2, b"a", b"2"), (3, b"c", b"1"), (4, b"b", b"2"), (5, b"a", b"3")]
    # the batch that kept only "c" still spans offsets 2-3 and is still gzip
    batch = RecordBatch(log.read(2, 1 << 20))
    assert (batch.base_offset, batch.last_offset, batch.compression) == (2, 3, 1)
    assert batch.is_valid()
    assert log.log_start_offset == 0 and log.log_end_offset == 6


def test_a_consumer_inside_a_gap_reads_on_from_the_next_batch(clock):
    clock.now = NOW
    log = compacted_log(clock)
    append(log, (b"a", b"1"))
    append(log, (b"a", b"2"))
    append(log, (b"b", b"1"))
    append(log, (b"b", b"2"))
    append(log, (b"tail", b"1"))
    log.compact()
    assert read_all(log, 0) == [(1, b"a", b"2"), (3, b"b", b"2"), (4, b"tail", b"1")]
    assert read_all(log, 2) == [(3, b"b", b"2"), (4, b"tail", b"1")]  # 2 is gone: next batch
    assert RecordBatch(log.read(0, 1 << 20)).base_offset == 1


def test_tombstones_stay_until_delete_retention_passes(clock):
    clock.now = NOW
    log = compacted_log(clock, delete_retention_ms=60_000, min_cleanable_dirty_ratio=0.01)
    append(log, (b"a", b"1"), (b"b", b"1"))
    append(log, (b"a", None))                   # a tombstone, 10 s old
    append(log, (b"z", b"tail"))
    log.compact()
    assert read_all(log) == [(1, b"b", b"1"), (2, b"a", None), (3, b"z", b"tail")]
    append(log, (b"z", b"tail2"))               # new dirty data for the next pass
    clock.now = NOW + 120_000                   # the tombstone is now older than 60 s
    log.compact()
    assert read_all(log) == [(1, b"b", b"1"), (3, b"z", b"tail"), (4, b"z", b"tail2")]


def test_young_records_wait_for_min_compaction_lag(clock):
    clock.now = NOW
    log = compacted_log(clock, min_compaction_lag_ms=3_600_000)
    append(log, (b"a", b"1"))
    append(log, (b"a", b"2"))
    append(log, (b"a", b"3"))
    assert log.compact() == 0 and len(read_all(log)) == 3
    clock.now = NOW + 7_200_000
    assert log.compact() > 0
    assert read_all(log) == [(1, b"a", b"2"), (2, b"a", b"3")]  # 2 is the last cleanable one


def test_cleaning_waits_for_enough_dirty_data(clock):
    clock.now = NOW
    log = compacted_log(clock, min_cleanable_dirty_ratio=0.5)
    for i in range(10):
        append(log, (b"k%d" % i, b"v"))
    append(log, (b"tail", b"v"))
    assert log.compact() == 0                   # nothing to remove, but now cleaned
    append(log, (b"k0", b"w"))                  # one dirty batch of eleven: ratio too low
    append(log, (b"tail", b"w"))
    assert log.compact() == 0
    assert len(read_all(log)) == 13


def test_delete_policy_logs_are_not_compacted(clock):
    clock.now = NOW
    log = MemoryLog(LogConfig(cleanup_policy="delete"), clock=clock)
    append(log, (b"a", b"1"))
    append(log, (b"a", b"2"))
    append(log, (b"a", b"3"))
    assert log.compact() == 0 and len(read_all(log)) == 3


def test_control_batches_and_producer_fields_are_kept(clock):
    clock.now = NOW
    log = compacted_log(clock)
    log.append(build_batch([(b"a", b"1", (), NOW), (b"a", b"2", (), NOW)], producer_id=7,
                           producer_epoch=1, base_sequence=0))
    log.append(build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", (), NOW)],
                           is_control=True))
    log.append(build_batch([(b"b", b"1", (), NOW)]))
    log.compact()
    first = RecordBatch(log.read(0, 1 << 20))
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 1, 0)
    assert first.last_offset == 1 and [r.offset for r in first.records()] == [1]
    control = RecordBatch(log.read(2, 1 << 20))
    assert control.is_control and control.base_offset == 2


def test_a_log_larger_than_4_mib_is_cleaned(clock):
    """Issue 14, defect 7: cleaning gave up for good once more than 4 MiB built up."""
    clock.now = NOW
    log = compacted_log(clock)
    value = b"v" * 1000
    for i in range(6000):  # 6.3 MiB, 100 keys
        append(log, (b"k%d" % (i % 100), value))
    append(log, (b"tail", b"x"))
    assert log.size_bytes > 6 * 1024 * 1024
    assert log.compact() > 6_000_000
    assert log.size_bytes < 120_000
    assert read_all(log) == [(5900 + i, b"k%d" % i, value) for i in range(100)] + [
        (6000, b"tail", b"x")]


def run_pass(steps, between=None) -> tuple[int, int]:
    """Drive a cleaning pass by hand: (bytes freed, steps taken); ``between(step)`` runs at
    every step, as the event loop's other work does."""
    taken = 0
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value, taken
        taken += 1
        if between is not None:
            between(taken)


def test_a_pass_yields_after_every_batch_while_appends_go_on(clock):
    clock.now = NOW
    log = compacted_log(clock)
    for i in range(200):
        append(log, (b"k%d" % (i % 10), b"%d" % i))
    append(log, (b"tail", b"x"))
    freed, taken = run_pass(log.cleaning_pass(NOW, DEFAULT_MAP_BYTES),
                            lambda step: append(log, (b"new", b"%d" % step)))
    assert freed > 0
    assert taken >= 200 + 10  # a step per dirty batch mapped, one per batch filtered
    records = read_all(log)
    assert records[:10] == [(190 + i, b"k%d" % i, b"%d" % (190 + i)) for i in range(10)]
    assert records[10] == (200, b"tail", b"x")
    assert [r[2] for r in records[11:]] == [b"%d" % step for step in range(1, taken + 1)]
    assert log.log_end_offset == 201 + taken


def test_a_pass_ends_with_nothing_changed_when_retention_moves_batches(clock):
    clock.now = NOW
    log = compacted_log(clock)
    for i in range(50):
        append(log, (b"k%d" % (i % 5), b"%d" % i))
    append(log, (b"tail", b"x"))
    size = log.size_bytes

    def delete_records(step):
        if step == 20:
            log.delete_records_before(3)

    freed, _ = run_pass(log.cleaning_pass(NOW, DEFAULT_MAP_BYTES), delete_records)
    assert freed == 0
    assert log.log_start_offset == 3 and len(read_all(log)) == 48
    assert log.size_bytes < size  # only what DeleteRecords dropped
    assert log.compact() > 0  # the next pass cleans
    assert len(read_all(log)) == 6


def test_the_cleaner_gives_the_event_loop_back_between_slices(clock):
    """Slices of slice_ms: a fake timer that moves 1 ms per reading makes each slice a few
    steps, and another task runs between them."""
    clock.now = NOW
    manager = LogManager(None, LogConfig(cleanup_policy="compact"), clock=clock)
    log = manager.get_or_create("compacted", 0)
    for i in range(300):
        log.append(build_batch([(b"k%d" % (i % 3), b"%d" % i, (), NOW - 10_000)]))
    ticks = iter(range(10**9))
    cleaner = LogCleaner(manager, slice_ms=5, clock=clock, timer=lambda: next(ticks) / 1000)
    turns = []

    async def other_work():
        while True:
            turns.append(cleaner.slices)
            await asyncio.sleep(0)

    async def run():
        other = asyncio.get_running_loop().create_task(other_work())
        await asyncio.sleep(0)
        assert await cleaner.clean_filthiest() is True
        other.cancel()
        assert await cleaner.clean_filthiest() is False  # nothing dirty is left

    asyncio.run(run())
    assert cleaner.slices >= 100  # about 600 steps, 5 per slice
    assert len(set(turns)) >= cleaner.slices - 1  # the other task ran between slices
    # 299, in the active segment (the last batch), is not cleaned and shadows nothing yet
    assert [r[1:] for r in read_all(log)] == [(b"k2", b"296"), (b"k0", b"297"), (b"k1", b"298"),
                                             (b"k2", b"299")]


def test_a_log_whose_pass_moves_nothing_waits_a_backoff(clock):
    """One key larger than the cleaner's map: the pass cannot start, and the cleaner does not
    pick the log again at once (it would spin)."""
    clock.now = NOW
    manager = LogManager(None, LogConfig(cleanup_policy="compact"), clock=clock)
    log = manager.get_or_create("big-keys", 0)
    for i in range(5):
        log.append(build_batch([(b"k" * 500, b"%d" % i, (), NOW - 10_000)]))
    cleaner = LogCleaner(manager, clock=clock, dedupe_buffer_size=100, backoff_ms=15_000)

    async def run():
        assert await cleaner.clean_filthiest() is True
        assert await cleaner.clean_filthiest() is False  # resting
        clock.now += 15_001
        assert await cleaner.clean_filthiest() is True

    asyncio.run(run())
    assert len(read_all(log)) == 5
