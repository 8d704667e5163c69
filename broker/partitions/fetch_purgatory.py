"""Fetch long-poll: a Fetch below min_bytes waits as a delayed operation, watched by each of its
partitions, until a Produce to one of them brings enough bytes or max_wait_ms passes.

A read_committed Fetch reads below the last stable offset, so an append above it brings
nothing; the transaction marker that moves it wakes the fetch (``write_txn_markers`` calls
``partition_appended`` too: a marker is an append)."""
from __future__ import annotations

from ..purgatory import DelayedOperationPurgatory


class FetchPurgatory:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.purgatory = DelayedOperationPurgatory(broker.timer, "fetch")

    def wait(self, op) -> None:
        """Park a fetch (delayed_fetch.py DelayedFetch), watched by each partition it reads."""
        self.purgatory.try_complete_else_watch(op, op.work.keys)

    def partition_appended(self, topic: str, partition: int) -> None:
        self.purgatory.check_and_complete(("fetch", topic, partition))

    def complete_all(self) -> None:
        """At shutdown: answer every waiting fetch with what is there now."""
        self.purgatory.force_complete_all()
