import os

import pytest

from broker.log import LogConfig, LogManager, MemoryLog, SegmentLog
from broker.log.manager import parse_partition_dir_name

from .batches import make_batch


def test_parse_partition_dir_name_splits_on_last_dash():
    assert parse_partition_dir_name("my-topic-12") == ("my-topic", 12)
    assert parse_partition_dir_name("__consumer_offsets-49") == ("__consumer_offsets", 49)
    assert parse_partition_dir_name("a.b_c-0") == ("a.b_c", 0)
    for bad in ("topic", "topic-", "-3", "topic-x", "topic-1.abc-delete", "bad name-1"):
        assert parse_partition_dir_name(bad) is None


def test_in_memory_manager():
    manager = LogManager(None)
    assert manager.start() == []
    log = manager.get_or_create("orders", 0)
    assert isinstance(log, MemoryLog)
    assert manager.get_or_create("orders", 0) is log
    log.append(make_batch(count=2))
    assert manager.get("orders", 1) is None
    assert ("orders", 0) in manager and len(manager) == 1
    assert manager.delete_partition("orders", 0)
    assert manager.get("orders", 0) is None
    assert not manager.delete_partition("orders", 0)


def test_invalid_topic_names_are_rejected(tmp_path):
    manager = LogManager(tmp_path)
    for bad in ("", ".", "..", "a/b", "../x", "x" * 250, "spa ce"):
        with pytest.raises(ValueError):
            manager.get_or_create(bad, 0)
    with pytest.raises(ValueError):
        manager.get_or_create("ok", -1)


def test_disk_manager_discovers_partitions_on_start(tmp_path):
    compact = LogConfig(cleanup_policy="compact", segment_bytes=100 * 1024 * 1024)
    manager = LogManager(tmp_path, {"segment.bytes": "1000"})
    assert manager.default_config.segment_bytes == 1000
    a0 = manager.get_or_create("my-dashed-topic", 0)
    a1 = manager.get_or_create("my-dashed-topic", 1)
    offsets = manager.get_or_create("__consumer_offsets", 7, compact)
    assert isinstance(a0, SegmentLog) and offsets.config is compact
    for log, n in ((a0, 3), (a1, 1), (offsets, 2)):
        for _ in range(n):
            log.append(make_batch(count=2))
    manager.close()
    assert sorted(os.listdir(tmp_path)) == [
        "__consumer_offsets-7", "my-dashed-topic-0", "my-dashed-topic-1"]
    (tmp_path / "not-a-partition").mkdir()
    (tmp_path / "stale-0.0123456789abcdef0123456789abcdef-delete").mkdir()

    configs = {("__consumer_offsets", 7): compact}
    manager = LogManager(tmp_path, config_for=lambda t, p: configs.get((t, p)))
    assert manager.start() == [
        ("__consumer_offsets", 7), ("my-dashed-topic", 0), ("my-dashed-topic", 1)]
    assert not (tmp_path / "stale-0.0123456789abcdef0123456789abcdef-delete").exists()
    assert manager.get("my-dashed-topic", 0).log_end_offset == 6
    assert manager.get("my-dashed-topic", 1).log_end_offset == 2
    assert manager.get("__consumer_offsets", 7).config is compact
    assert manager.partitions_of("my-dashed-topic") == [0, 1]
    # retention never touches the compacted offsets log
    manager.set_config("my-dashed-topic", LogConfig(retention_ms=0, segment_bytes=1))
    manager.apply_retention(now_ms=10**13)
    assert manager.get("__consumer_offsets", 7).log_start_offset == 0
    assert manager.get("my-dashed-topic", 0).log_start_offset == 6

    assert manager.delete_partition("my-dashed-topic", 1)
    assert not (tmp_path / "my-dashed-topic-1").exists()
    assert manager.delete_topic("my-dashed-topic") == 1
    assert sorted(os.listdir(tmp_path)) == ["__consumer_offsets-7", "not-a-partition"]
    manager.close()
