"""Random operation sequences give the same answers from MemoryLog and SegmentLog."""
import shutil
import tempfile
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.log import LogConfig, MemoryLog, OffsetOutOfRange, SegmentLog

from .batches import make_batch

batch_st = st.builds(
    lambda n, size, ts: make_batch(count=n, value_size=size, timestamps=[ts + 7 * i for i in range(n)]),
    st.integers(1, 5), st.integers(0, 90), st.integers(0, 2000))

op_st = st.one_of(
    st.tuples(st.just("append"), st.lists(batch_st, min_size=1, max_size=3)),
    st.tuples(st.just("read"), st.integers(-2, 80), st.integers(-1, 1500), st.booleans()),
    st.tuples(st.just("timestamp"), st.integers(-1, 2100)),
    st.tuples(st.just("delete_records"), st.integers(0, 80)),
    st.tuples(st.just("truncate"), st.integers(0, 80)),
    st.tuples(st.just("reopen")),
)


def outcome(call):
    try:
        result = call()
    except OffsetOutOfRange as exc:
        return ("out of range", exc.offset, exc.log_start_offset, exc.log_end_offset)
    if isinstance(result, memoryview):
        return bytes(result)
    return result


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op_st, max_size=40), segment_bytes=st.integers(1, 700),
       interval=st.integers(0, 300))
def test_memory_and_segment_logs_agree(ops, segment_bytes, interval):
    config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=interval)
    directory = tempfile.mkdtemp()
    # fsync only costs time here (it is tested in test_segment_log)
    with mock.patch("broker.log.files.sync_data"), \
            mock.patch("broker.log.files.fsync_dir"), \
            mock.patch("broker.log.files.os.fsync"):
        run_ops(ops, config, directory)


def run_ops(ops, config, directory):
    try:
        memory = MemoryLog(config)
        disk = SegmentLog(directory, config)
        for op in ops:
            kind = op[0]
            if kind == "append":
                buffer = b"".join(op[1])
                assert memory.append(buffer) == disk.append(buffer)
            elif kind == "read":
                _, offset, max_bytes, min_one = op
                assert outcome(lambda: memory.read(offset, max_bytes, min_one_message=min_one)) == \
                    outcome(lambda: disk.read(offset, max_bytes, min_one_message=min_one))
            elif kind == "timestamp":
                assert memory.offset_for_timestamp(op[1]) == disk.offset_for_timestamp(op[1])
            elif kind == "delete_records":
                assert outcome(lambda: memory.delete_records_before(op[1])) == \
                    outcome(lambda: disk.delete_records_before(op[1]))
            elif kind == "truncate":
                memory.truncate_to(op[1])
                disk.truncate_to(op[1])
            elif kind == "reopen":
                disk.close()
                disk = SegmentLog(directory, config)
            assert (memory.log_start_offset, memory.log_end_offset) == \
                (disk.log_start_offset, disk.log_end_offset)
            assert memory.max_timestamp_offset() == disk.max_timestamp_offset()
            start = memory.log_start_offset
            assert outcome(lambda: memory.read(start, 1 << 20)) == \
                outcome(lambda: disk.read(start, 1 << 20))
        disk.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
