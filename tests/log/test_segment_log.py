"""SegmentLog only: files, rolling, reopening, crash recovery, indexes, fsync policy."""
import logging
import os
import random

import pytest

import broker.log.files as files_module
from broker.log import LogConfig, OffsetOutOfRange, SegmentLog
from broker.log.segments import CHECKPOINT_FILE
from protocol.records import iter_batches

from .batches import make_batch

from .conftest import FakeClock


def batches_of(data):
    return [(b.base_offset, b.last_offset) for b in iter_batches(bytes(data))]


def files(path):
    return sorted(os.listdir(path))


def fill(log, n, count=2, value_size=100, ts0=1000):
    for i in range(n):
        log.append(make_batch(count=count, value_size=value_size,
                              timestamps=[ts0 + 10 * i + j for j in range(count)]))


@pytest.fixture
def part_dir(tmp_path):
    return tmp_path / "my-topic-0"


def test_segment_files_and_rolling_by_bytes(part_dir):
    batch = make_batch(count=2, value_size=100)
    log = SegmentLog(part_dir, LogConfig(segment_bytes=3 * len(batch)))
    for _ in range(7):
        log.append(batch)
    assert log.segment_base_offsets == [0, 6, 12]
    names = files(part_dir)
    assert "00000000000000000000.log" in names and "00000000000000000006.log" in names
    assert "00000000000000000012.log" in names
    # rolled segments got their index files; the active one gets them on close
    assert "00000000000000000000.index" in names and "00000000000000000006.timeindex" in names
    assert os.path.getsize(part_dir / "00000000000000000000.log") == 3 * len(batch)
    assert batches_of(log.read(0, 1 << 20)) == [(i, i + 1) for i in range(0, 14, 2)]
    assert batches_of(log.read(5, 2 * len(batch))) == [(4, 5), (6, 7)]  # spans a roll
    log.close()
    assert "00000000000000000012.index" in files(part_dir)


def test_batch_bigger_than_segment_bytes_gets_its_own_segment(part_dir):
    log = SegmentLog(part_dir, LogConfig(segment_bytes=100))
    log.append(make_batch(count=3, value_size=200))
    log.append(make_batch(count=3, value_size=200))
    assert log.segment_base_offsets == [0, 3]
    assert batches_of(log.read(4, 10)) == [(3, 5)]


def test_rolling_by_segment_ms(part_dir):
    clock = FakeClock(0)
    log = SegmentLog(part_dir, LogConfig(segment_ms=1000), clock=clock)
    log.append(make_batch())
    clock.now = 1000
    log.append(make_batch())
    assert log.segment_count == 1
    clock.now = 1001
    log.append(make_batch())
    assert log.segment_base_offsets == [0, 2]
    clock.now = 5000  # an empty active segment never rolls; the clock starts at its first append
    assert log.segment_count == 2


def test_reopen_after_close_keeps_everything(part_dir):
    config = LogConfig(segment_bytes=2000, index_interval_bytes=300)
    log = SegmentLog(part_dir, config)
    fill(log, 40)
    log.delete_records_before(9)
    before = bytes(log.read(9, 1 << 20))
    state = (log.log_start_offset, log.log_end_offset, log.size_bytes, log.segment_base_offsets,
             log.offset_for_timestamp(1205), log.max_timestamp_offset())
    log.close()
    with pytest.raises(ValueError):
        log.append(make_batch())
    log = SegmentLog(part_dir, config)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes, log.segment_base_offsets,
            log.offset_for_timestamp(1205), log.max_timestamp_offset()) == state
    assert bytes(log.read(9, 1 << 20)) == before
    with pytest.raises(OffsetOutOfRange):
        log.read(8, 100)
    assert log.append(make_batch()).first_offset == 80
    log.close()


def test_reopen_without_close_after_kill(part_dir):
    """A killed process leaves no index files for the active segment and no checkpoint."""
    log = SegmentLog(part_dir, LogConfig(segment_bytes=1500))
    fill(log, 20)
    expected = bytes(log.read(0, 1 << 20))
    # no close(): simulate kill -9
    reopened = SegmentLog(part_dir, LogConfig(segment_bytes=1500))
    assert reopened.log_end_offset == 40
    assert bytes(reopened.read(0, 1 << 20)) == expected
    assert reopened.append(make_batch()).first_offset == 40
    reopened.close()


@pytest.mark.parametrize("garbage", ["half-batch", "zeros", "random", "header-only"])
def test_torn_tail_is_truncated_on_open(part_dir, caplog, garbage):
    log = SegmentLog(part_dir, LogConfig(segment_bytes=1500))
    fill(log, 12)
    expected = bytes(log.read(0, 1 << 20))
    last = part_dir / f"{log.segment_base_offsets[-1]:020d}.log"
    log.close()
    size = os.path.getsize(last)
    tail = {
        "half-batch": make_batch(count=5)[:-20],
        "zeros": b"\x00" * 300,
        "random": random.Random(1).randbytes(333),
        "header-only": make_batch(count=5)[:61],
    }[garbage]
    with open(last, "ab") as f:
        f.write(tail)
    with caplog.at_level(logging.WARNING, logger="broker.log"):
        log = SegmentLog(part_dir, LogConfig(segment_bytes=1500))
    assert f"{len(tail)} bytes" in caplog.text
    assert os.path.getsize(last) == size
    assert log.log_end_offset == 24
    assert bytes(log.read(0, 1 << 20)) == expected
    assert log.append(make_batch(count=3)).first_offset == 24
    assert batches_of(log.read(23, 1 << 20)) == [(22, 23), (24, 26)]
    log.close()


def test_corrupt_byte_in_last_segment_truncates_from_that_batch(part_dir, caplog):
    log = SegmentLog(part_dir)  # one segment
    batch = make_batch(count=2, value_size=100)
    for _ in range(10):
        log.append(batch)
    log.close()
    path = part_dir / "00000000000000000000.log"
    with open(path, "r+b") as f:
        f.seek(4 * len(batch) + 100)  # inside the 5th batch (offsets 8-9)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x01]))
    with caplog.at_level(logging.WARNING, logger="broker.log"):
        log = SegmentLog(part_dir)
    assert f"{6 * len(batch)} bytes" in caplog.text
    assert log.log_end_offset == 8 and log.size_bytes == 4 * len(batch)
    assert log.append(make_batch()).first_offset == 8
    log.close()


def test_index_files_rebuilt_when_missing_or_corrupt(part_dir):
    config = LogConfig(segment_bytes=3000, index_interval_bytes=200)
    log = SegmentLog(part_dir, config)
    fill(log, 40)
    expected = {o: bytes(log.read(o, 700)) for o in range(0, 80, 3)}
    ts_answer = log.offset_for_timestamp(1155)
    bases = log.segment_base_offsets
    log.close()
    assert len(bases) >= 4
    first_index = part_dir / f"{bases[0]:020d}.index"
    original_index = first_index.read_bytes()
    assert len(original_index) > 0
    os.unlink(first_index)
    os.unlink(part_dir / f"{bases[1]:020d}.timeindex")
    with open(part_dir / f"{bases[2]:020d}.index", "ab") as f:
        f.write(b"\x01\x02\x03")  # not a whole entry
    log = SegmentLog(part_dir, config)
    assert first_index.read_bytes() == original_index  # rebuilt identically
    assert {o: bytes(log.read(o, 700)) for o in range(0, 80, 3)} == expected
    assert log.offset_for_timestamp(1155) == ts_answer
    assert os.path.getsize(part_dir / f"{bases[2]:020d}.index") % 8 == 0
    assert not os.path.exists(part_dir / f"{bases[-1]:020d}.index")  # active: in memory
    log.close()
    assert os.path.getsize(part_dir / f"{bases[-1]:020d}.index") % 8 == 0


def test_corruption_in_an_older_segment_deletes_later_ones(part_dir, caplog):
    config = LogConfig(segment_bytes=1500)
    log = SegmentLog(part_dir, config)
    fill(log, 20)
    bases = log.segment_base_offsets
    log.close()
    assert len(bases) >= 3
    path = part_dir / f"{bases[1]:020d}.log"
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # the last batch of the second segment
    path.write_bytes(bytes(data))
    os.unlink(part_dir / f"{bases[1]:020d}.index")  # so it gets rescanned
    with caplog.at_level(logging.WARNING, logger="broker.log"):
        log = SegmentLog(part_dir, config)
    assert "later segment(s) deleted" in caplog.text
    assert log.segment_base_offsets == bases[:2]
    assert log.log_end_offset == bases[2] - 2
    assert log.append(make_batch()).first_offset == bases[2] - 2
    assert not os.path.exists(part_dir / f"{bases[2]:020d}.log")
    log.close()


def test_index_lookups_match_a_linear_scan(part_dir):
    rng = random.Random(7)
    log = SegmentLog(part_dir, LogConfig(segment_bytes=20_000, index_interval_bytes=150))
    spans = []
    for _ in range(300):
        n = rng.randint(1, 6)
        info = log.append(make_batch(count=n, value_size=rng.randint(1, 120)))
        spans.append((info.first_offset, info.last_offset))
    whole = bytes(log.read(0, 1 << 30))
    assert batches_of(whole) == spans
    sizes = [b.size for b in iter_batches(whole)]
    starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    for _ in range(300):
        offset = rng.randrange(log.log_end_offset)
        max_bytes = rng.randint(0, 3000)
        i = next(k for k, (a, b) in enumerate(spans) if a <= offset <= b)
        j = i + 1
        while j < len(sizes) and starts[j] + sizes[j] - starts[i] <= max_bytes:
            j += 1
        assert bytes(log.read(offset, max_bytes)) == whole[starts[i]:starts[j]]
    log.close()


def test_log_start_offset_checkpoint(part_dir):
    log = SegmentLog(part_dir, LogConfig(segment_bytes=1000))
    fill(log, 10)
    log.delete_records_before(5)
    assert (part_dir / CHECKPOINT_FILE).read_text().split() == ["0", "5"]
    del log  # crash: no close
    log = SegmentLog(part_dir, LogConfig(segment_bytes=1000))
    assert log.log_start_offset == 5
    log.close()


def test_checkpoint_past_the_surviving_data_restarts_there(part_dir):
    log = SegmentLog(part_dir)
    fill(log, 5)
    log.delete_records_before(10)
    log.close()
    os.truncate(part_dir / "00000000000000000000.log", 0)  # lost on power failure
    log = SegmentLog(part_dir)
    assert (log.log_start_offset, log.log_end_offset) == (10, 10)
    assert log.append(make_batch()).first_offset == 10
    assert log.segment_base_offsets == [10]
    log.close()


def test_retention_deletes_whole_segments_only(part_dir):
    batch = make_batch(count=1, value_size=100)
    log = SegmentLog(part_dir, LogConfig(segment_bytes=3 * len(batch), retention_ms=-1,
                                         retention_bytes=4 * len(batch)))
    for _ in range(8):
        log.append(batch)  # segments [0-2] [3-5] [6-7]
    assert log.segment_base_offsets == [0, 3, 6]
    assert log.apply_retention(now_ms=0) == 3 * len(batch)
    assert log.segment_base_offsets == [3, 6] and log.log_start_offset == 3
    assert not os.path.exists(part_dir / "00000000000000000000.log")
    assert not os.path.exists(part_dir / "00000000000000000000.index")
    # time retention may take the active segment too: the log then rolls first
    log.config = LogConfig(segment_bytes=3 * len(batch), retention_ms=10)
    assert log.apply_retention(now_ms=10**9) == 5 * len(batch)
    assert log.segment_base_offsets == [8]
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (8, 8, 0)
    log.close()
    log = SegmentLog(part_dir)
    assert (log.log_start_offset, log.log_end_offset) == (8, 8)
    log.close()


def test_delete_records_drops_segments_below_but_keeps_active(part_dir):
    batch = make_batch(count=2, value_size=100)
    log = SegmentLog(part_dir, LogConfig(segment_bytes=2 * len(batch)))
    for _ in range(5):
        log.append(batch)  # [0-3] [4-7] [8-9]
    log.delete_records_before(9)
    assert log.segment_base_offsets == [8]
    log.delete_records_before(10)
    assert log.segment_base_offsets == [8]  # the active segment stays until it rolls
    assert bytes(log.read(10, 100)) == b""
    log.close()


def test_truncate_to_across_segments_then_reopen(part_dir):
    log = SegmentLog(part_dir, LogConfig(segment_bytes=1000))
    fill(log, 15)
    log.truncate_to(12)
    assert log.log_end_offset == 12
    assert max(log.segment_base_offsets) <= 12
    assert log.append(make_batch(count=2)).first_offset == 12
    log.close()
    log = SegmentLog(part_dir, LogConfig(segment_bytes=1000))
    assert log.log_end_offset == 14
    assert batches_of(log.read(11, 1 << 20))[0] == (10, 11)
    log.close()


def test_flush_policy(part_dir, monkeypatch):
    synced = []
    monkeypatch.setattr(files_module, "sync_data", lambda fd: synced.append(fd))
    clock = FakeClock(0)
    log = SegmentLog(part_dir, LogConfig(), clock=clock)  # defaults: never on count or time
    fill(log, 5)
    clock.now = 10**8  # (less than segment.ms: a roll would fsync)
    assert not log.maybe_flush() and synced == []
    log.config = LogConfig(flush_messages=4)
    log.append(make_batch(count=2))
    assert len(synced) == 1  # 12 unflushed messages >= 4
    log.append(make_batch(count=2))
    log.append(make_batch(count=1))
    assert len(synced) == 1
    log.append(make_batch(count=1))
    assert len(synced) == 2
    log.config = LogConfig(flush_ms=100)
    log.append(make_batch())
    assert not log.maybe_flush(now_ms=clock.now + 50)
    assert log.maybe_flush(now_ms=clock.now + 100)
    assert len(synced) == 3
    log.close()  # a clean shutdown fsyncs
    assert len(synced) == 4


def test_stray_files_are_cleaned_on_open(part_dir):
    log = SegmentLog(part_dir)
    fill(log, 3)
    log.close()
    (part_dir / "00000000000000000099.index").write_bytes(b"")
    (part_dir / "00000000000000000000.index.tmp").write_bytes(b"xx")
    log = SegmentLog(part_dir)
    assert "00000000000000000099.index" not in files(part_dir)
    assert "00000000000000000000.index.tmp" not in files(part_dir)
    assert log.log_end_offset == 6
    log.delete()
    assert not part_dir.exists()
