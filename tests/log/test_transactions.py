"""What the partition logs do for transactions, on both backends: reads bounded by the last
stable offset, Kafka's upper bound for the aborted transactions of a fetch, the aborted index
following the log start offset; and the in-memory cleaner's rules for transactional data."""
from __future__ import annotations

from broker.log import LogConfig, MemoryLog
from broker.log.base import AbortedTxn, TxnIndex
from broker.topics import Partition
from protocol.errors import ErrorCode as E
from protocol.records import RecordBatch, build_batch, iter_batches

from .batches import make_batch


def bases(data) -> list[int]:
    return [b.base_offset for b in iter_batches(data)]


def fill(log, sizes=(3, 1, 2, 1)) -> list[int]:
    """Append batches of the given record counts; returns their base offsets."""
    out = []
    for n in sizes:
        out.append(log.append(make_batch(count=n, value_size=100)).first_offset)
    return out


def test_a_read_stops_before_max_offset(open_log):
    log = open_log(segment_bytes=400)  # the segment log rolls every two batches or so
    starts = fill(log, (3, 1, 2, 1, 2))
    assert starts == [0, 3, 4, 6, 7]
    assert bases(log.read(0, 1 << 20, max_offset=6)) == [0, 3, 4]
    assert bases(log.read(3, 1 << 20, max_offset=4)) == [3]
    assert log.read(4, 1 << 20, max_offset=4) == b""
    assert log.read(6, 1 << 20, max_offset=4) == b""  # above it: nothing either
    assert bases(log.read(0, 1 << 20, max_offset=9)) == [0, 3, 4, 6, 7]  # the end: no bound
    # the first batch still comes whole under a tiny max_bytes, the bound still holds
    assert bases(log.read(0, 1, max_offset=3)) == [0]
    assert log.read(0, 1, min_one_message=False, max_offset=3) == b""


def test_the_upper_bound_follows_the_sparse_offset_index(open_log):
    """index.interval.bytes=0: Kafka indexes every batch after the first of a segment; the
    bound is the last offset of the first indexed batch at or after the read's end."""
    log = open_log(index_interval_bytes=0)
    fill(log, (3, 1, 2, 1))  # offsets 0-2, 3, 4-5, 6
    first = len(log.read(0, 1, min_one_message=True))
    assert log.fetch_upper_bound(0, first) == 3  # batch 3 is indexed: its last offset
    two = len(log.read(3, 1 << 20, max_offset=6))
    assert log.fetch_upper_bound(3, two) == 6
    everything = len(log.read(0, 1 << 20))
    assert log.fetch_upper_bound(0, everything) == 7  # nothing indexed after: the end


def test_without_index_entries_the_upper_bound_is_the_log_end(open_log):
    log = open_log()  # 4096 bytes between index entries: none in a small log
    fill(log)
    assert log.fetch_upper_bound(0, len(log.read(0, 1))) == log.log_end_offset == 7


def test_a_segment_without_later_index_entries_bounds_by_the_next_segment(tmp_path, clock):
    from broker.log import SegmentLog
    log = SegmentLog(tmp_path / "t-0", LogConfig(segment_bytes=400), clock=clock)
    fill(log, (3, 1, 2, 1))
    assert log.segment_base_offsets[:2] == [0, 3]
    assert log.fetch_upper_bound(0, len(log.read(0, 1))) == 3
    log.close()


def test_collect_stops_after_a_transaction_whose_lso_reaches_the_bound():
    index = TxnIndex()
    index.append(1, 0, 5, 3)
    index.append(2, 4, 8, 9)
    index.append(3, 2, 12, 13)  # would overlap, but the scan stopped before it
    assert index.collect(0, 9) == [AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 4, 8, 9)]
    assert index.collect(6, 20) == [AbortedTxn(2, 4, 8, 9), AbortedTxn(3, 2, 12, 13)]
    assert index.collect(13, 20) == []  # every marker is below the fetch offset
    assert index.collect(0, 1) == [AbortedTxn(1, 0, 5, 3)]  # starts below 1; lso 3 >= 1


def test_the_aborted_index_follows_the_log_start_offset(open_log):
    log = open_log(segment_bytes=400)
    fill(log, (3, 1, 2, 1, 2))
    log.txn_index.append(1, 0, 3, 4)
    log.txn_index.append(2, 4, 6, 7)
    log.txn_index.append(3, 7, 8, 9)
    log.delete_records_before(4)
    assert [t.producer_id for t in log.txn_index] == [2, 3]
    log.delete_records_before(7)
    assert [t.producer_id for t in log.txn_index] == [3]
    log.truncate_to(8)  # the marker at 8 goes with its batch
    assert list(log.txn_index) == []


def test_retention_drops_the_aborted_transactions_of_the_deleted_data(open_log, clock):
    log = open_log(segment_bytes=400, retention_ms=1000)
    fill(log, (3, 1))
    log.txn_index.append(1, 0, 2, 3)
    clock.now += 10_000
    fill(log, (2, 1, 2))  # new data in new segments
    log.apply_retention(clock.now)
    assert log.log_start_offset >= 3
    assert list(log.txn_index) == []


def test_the_last_stable_offset_is_bounded_by_log_start_and_high_watermark(open_log):
    log = open_log()
    fill(log)
    assert log.last_stable_offset == 7
    log.first_unstable_offset = 3
    assert log.last_stable_offset == 3
    log.delete_records_before(5)
    assert log.last_stable_offset == 5


# --- the cleaner ----------------------------------------------------------------------------

NOW = 1_000_000_000


def compacted_partition(clock) -> Partition:
    clock.now = NOW
    log = MemoryLog(LogConfig(cleanup_policy="compact", min_cleanable_dirty_ratio=0.0),
                    clock=clock)
    return Partition(None, 0, log)


def put(p, *records, pid=-1, epoch=-1, seq=-1):
    """Append (key, value) records as one batch, transactional when pid is given."""
    transactional = pid >= 0
    data = build_batch([(k, v, (), NOW - 10_000) for k, v in records], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)
    guard = None
    if transactional:
        _, guard = p.producers.start_verification(pid, seq, epoch, True)
    code, first, _ = p.append_batch(data, RecordBatch(data), verification=guard)
    assert code == E.NONE
    return first


def end(p, pid, epoch, commit):
    assert p.write_end_marker(pid, epoch, commit, 0, NOW - 10_000) == E.NONE


def committed_view(p) -> dict[bytes, tuple[int, bytes]]:
    """What a read_committed consumer ends up with per key (offset, value)."""
    log = p.log
    data = log.read(log.log_start_offset, 1 << 20, max_offset=log.last_stable_offset)
    aborted = log.aborted_transactions(log.log_start_offset, len(data))
    view = {}
    for batch in iter_batches(data):
        if batch.is_control:
            continue
        if batch.is_transactional and any(
                t.producer_id == batch.producer_id and t.first_offset <= batch.base_offset
                <= t.last_offset for t in aborted):
            continue
        for r in batch.records():
            view[r.key] = (r.offset, r.value)
    return view


def kept(p) -> list[tuple[int, bool]]:
    return [(b.base_offset, b.is_control) for b in iter_batches(p.log.read(0, 1 << 20))]


def test_aborted_records_neither_shadow_nor_survive_and_markers_stay(clock):
    p = compacted_partition(clock)
    put(p, (b"a", b"1"), (b"b", b"1"))  # 0-1
    put(p, (b"a", b"2"), (b"c", b"1"), pid=7, epoch=0, seq=0)  # 2-3, aborted below
    end(p, 7, 1, commit=False)  # 4
    put(p, (b"b", b"2"), pid=8, epoch=0, seq=0)  # 5, committed
    end(p, 8, 1, commit=True)  # 6
    put(p, (b"a", b"3"), pid=7, epoch=1, seq=0)  # 7: open, so the LSO stays at 7
    put(p, (b"a", b"4"))  # 8, above the LSO
    put(p, (b"e", b"1"))  # 9, the active tail
    before = committed_view(p)
    assert before == {b"a": (0, b"1"), b"b": (5, b"2")}
    assert p.log.compact() > 0
    assert committed_view(p) == before
    # the aborted batch is gone, both markers stay, nothing at or above the LSO was touched
    assert kept(p) == [(0, False), (4, True), (5, False), (6, True), (7, False), (8, False),
                       (9, False)]
    first = RecordBatch(p.log.read(0, 1 << 20))
    assert [r.key for r in first.records()] == [b"a"]  # b=1 gave way to the committed b=2


def test_producer_state_outlives_the_batches_compaction_removes(clock):
    """The in-memory log is never replayed, so a producer whose batches were cleaned away is
    still recognised: its retry is a duplicate, its next transaction starts where it should."""
    p = compacted_partition(clock)
    put(p, (b"x", b"1"), pid=9, epoch=0, seq=0)  # 0: producer 9 (transactional), committed
    end(p, 9, 1, commit=True)  # 1
    put(p, (b"a", b"2"), pid=7, epoch=0, seq=0)  # 2: producer 7, aborted
    end(p, 7, 1, commit=False)  # 3
    put(p, (b"x", b"2"))  # 4
    put(p, (b"z", b"1"))  # 5, the active tail
    p.log.compact()
    assert kept(p) == [(1, True), (3, True), (4, False), (5, False)]
    again = build_batch([(b"x", b"1", (), NOW - 10_000)], producer_id=9, producer_epoch=0,
                        base_sequence=0, is_transactional=True)
    assert p.producers.check(RecordBatch(again)) == (E.INVALID_PRODUCER_EPOCH, None)
    nxt = build_batch([(b"a", b"3", (), NOW)], producer_id=7, producer_epoch=1,
                      base_sequence=1, is_transactional=True)
    _, guard = p.producers.start_verification(7, 1, 1, True)
    assert p.producers.check(RecordBatch(nxt), guard) == (E.OUT_OF_ORDER_SEQUENCE_NUMBER, None)


def test_an_undecided_transaction_is_not_cleaned_even_when_superseded(clock):
    p = compacted_partition(clock)
    put(p, (b"a", b"1"), pid=7, epoch=0, seq=0)  # 0, open
    put(p, (b"a", b"2"))  # 1
    put(p, (b"a", b"3"))  # 2
    put(p, (b"z", b"1"))  # 3
    assert p.log.last_stable_offset == 0
    assert p.log.compact() == 0
    assert kept(p) == [(0, False), (1, False), (2, False), (3, False)]
    end(p, 7, 1, commit=True)  # 4
    assert p.log.compact() > 0  # decided now: a=1 and a=2 give way to a=3
    assert kept(p) == [(2, False), (3, False), (4, True)]
    assert committed_view(p) == {b"a": (2, b"3"), b"z": (3, b"1")}
