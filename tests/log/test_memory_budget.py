"""In-memory storage has a bound (issue 14, defect 9): retention.bytes holds at every append,
and log.memory.max.bytes bounds all partitions together, dropping the oldest records of
delete-policy topics first, with one warning and a counter. Fake clock, no sleeping."""
from __future__ import annotations

import logging

from broker.log import LogConfig, LogManager, MemoryLog
from protocol.records import build_batch

NOW = 1_000_000_000


def batch(i: int, size: int = 1000, ts: int = NOW) -> bytes:
    return build_batch([(b"k%d" % i, b"x" * size, (), ts)])


def test_retention_bytes_holds_at_every_append(clock):
    log = MemoryLog(LogConfig(retention_bytes=10_000, retention_ms=-1), clock=clock)
    one = len(batch(0))
    for i in range(100):
        log.append(batch(i))
        assert log.size_bytes < 10_000 + one  # Kafka's rule: at least retention.bytes stays
    assert log.size_bytes >= 10_000
    assert log.log_start_offset == 100 - log.size_bytes // one


def test_the_budget_drops_the_oldest_records_of_every_log_first(clock, caplog):
    clock.now = NOW
    manager = LogManager(None, LogConfig(retention_ms=-1), clock=clock)
    budget = manager.set_memory_budget(64_000)
    old, new = manager.get_or_create("old", 0), manager.get_or_create("new", 0)
    compacted = manager.get_or_create("compacted", 0, LogConfig(cleanup_policy="compact"))
    for i in range(10):
        compacted.append(batch(i, ts=NOW - 10**6))  # the oldest of all, but never dropped
    for i in range(20):
        old.append(batch(i, ts=NOW - 1000 + i))
    caplog.set_level(logging.WARNING, logger="broker.log")
    for i in range(200):
        new.append(batch(i, ts=NOW + i))
        assert budget.used <= 64_000
        assert budget.used == old.size_bytes + new.size_bytes + compacted.size_bytes
    assert compacted.log_start_offset == 0 and compacted.size_bytes > 10_000
    assert old.size_bytes == 0 and old.log_start_offset == 20  # older than anything in "new"
    assert new.log_start_offset > 0 and new.log_end_offset == 200
    appended = sum(len(batch(i)) for i in range(20)) + sum(len(batch(i)) for i in range(200))
    assert budget.dropped_bytes == appended - new.size_bytes
    warnings = [r for r in caplog.records if "log.memory.max.bytes" in r.getMessage()]
    assert len(warnings) == 1  # not one per append


def test_a_deleted_topic_gives_its_bytes_back(clock):
    manager = LogManager(None, LogConfig(retention_ms=-1), clock=clock)
    budget = manager.set_memory_budget(1 << 20)
    log = manager.get_or_create("doomed", 0)
    for i in range(10):
        log.append(batch(i))
    assert budget.used == log.size_bytes > 0
    manager.delete_partition("doomed", 0)
    assert budget.used == 0 and not budget.logs


def test_compaction_gives_its_bytes_back(clock):
    clock.now = NOW
    manager = LogManager(None, LogConfig(cleanup_policy="compact"), clock=clock)
    budget = manager.set_memory_budget(1 << 20)
    log = manager.get_or_create("compacted", 0)
    for i in range(50):
        log.append(build_batch([(b"same-key", b"x" * 100, (), NOW)]))
    before = budget.used
    assert log.compact() > 0
    assert budget.used == log.size_bytes < before


def test_no_budget_means_no_bound(clock):
    manager = LogManager(None, LogConfig(retention_ms=-1), clock=clock)
    budget = manager.set_memory_budget(-1)
    log = manager.get_or_create("big", 0)
    for i in range(100):
        log.append(batch(i))
    assert log.log_start_offset == 0 and budget.used == log.size_bytes
    assert LogManager("/nonexistent", clock=clock).set_memory_budget(1) is None  # on disk
