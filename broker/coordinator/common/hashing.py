"""Routing a group to its coordinator shard: Java's ``String.hashCode`` and Kafka's ``Utils.abs``.

Never Python's ``hash()``: it is salted per process, so a group would move between restarts.
"""
from __future__ import annotations

DEFAULT_NUM_PARTITIONS = 50


def java_string_hashcode(s: str) -> int:
    """Java's ``String.hashCode()``: ``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units,
    wrapped to a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``n & 0x7fffffff``, so ``-2**31`` maps to 0 (not to ``2**31``)."""
    return n & 0x7FFFFFFF if n == -0x80000000 else abs(n)


def partition_for(group_id: str, n: int = DEFAULT_NUM_PARTITIONS) -> int:
    """The ``__consumer_offsets`` partition (and coordinator shard) that owns ``group_id``."""
    return java_abs(java_string_hashcode(group_id)) % n
