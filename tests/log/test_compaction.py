"""The in-memory log cleaner (cleanup.policy=compact): the last record of each key stays, with
its offset; consumers read across the gaps; tombstones go after delete.retention.ms; young and
active data is left alone. Fake clock, no sleeping."""
from __future__ import annotations

from broker.log import LogConfig, MemoryLog
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


def test_a_log_too_large_for_one_pass_is_left_alone(clock, monkeypatch):
    from broker.log import memory
    monkeypatch.setattr(memory, "MAX_PASS_BYTES", 200)
    clock.now = NOW
    log = compacted_log(clock)
    for i in range(5):
        append(log, (b"a", b"%d" % i))
    assert log.compact() == 0 and len(read_all(log)) == 5
