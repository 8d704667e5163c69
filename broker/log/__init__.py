"""Partition logs: in memory by default, segment files on disk with --data-dir.

- ``PartitionLog``: the interface every topic partition's log offers (``base``).
- ``MemoryLog``: the default backend, nothing on disk (``memory``).
- ``SegmentLog``: Kafka-style segment files, indexes and crash recovery (``segments``; one
  segment in ``segment``, a compaction pass's file work in ``segment_cleaning``, file names and
  I/O in ``files``).
- ``LogManager``: maps (topic, partition) to its log, discovers partitions on start
  (``manager``).
- ``LogCleaner``: Kafka's log cleaner for compacted logs on both backends (``cleaner``).
"""
from .base import (
    AppendInfo,
    InvalidRecordError,
    LogConfig,
    OffsetOutOfRange,
    PartitionLog,
    validate_batches,
)
from .manager import LogManager
from .memory import MemoryLog


def __getattr__(name: str):
    """``SegmentLog`` is loaded on first use: a broker without a data directory needs none."""
    if name == "SegmentLog":
        from .segments import SegmentLog
        return SegmentLog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "AppendInfo", "InvalidRecordError", "LogConfig", "LogManager", "MemoryLog",
    "OffsetOutOfRange", "PartitionLog", "SegmentLog", "validate_batches",
]
