"""Fetch long-poll: a Fetch below min_bytes waits as a delayed operation, watched by each of its
partitions, until a Produce to one of them brings enough bytes or max_wait_ms passes.

A read_committed Fetch reads below the last stable offset, so an append above it brings
nothing; the transaction marker that moves it wakes the fetch (``write_txn_markers`` calls
``partition_appended`` too: a marker is an append)."""
from __future__ import annotations

from ..purgatory import DelayedOperation, DelayedOperationPurgatory


class DelayedFetch(DelayedOperation):
    kind = "fetch"

    def __init__(self, broker, work, max_wait_ms: int, respond, read, answer) -> None:
        super().__init__(max_wait_ms)
        self.broker = broker
        self.work = work
        self.respond = respond
        #: the Fetch handler's read(broker, work) and answer(broker, work, reads)
        self.read = read
        self.answer = answer
        self.result = None
        #: the handler has just read everything and found too little: the purgatory's own
        #: first try (before it watches) would read the same again
        self.fresh = True

    def try_complete(self) -> bool:
        if self.fresh:
            self.fresh = False
            return False
        reads, total, errors = self.read(self.broker, self.work)
        if total >= self.work.min_bytes or errors:
            self.result = reads
            return True
        return False

    def on_complete(self) -> None:
        reads = self.result
        if reads is None:
            reads, _total, _errors = self.read(self.broker, self.work)
        self.respond(self.answer(self.broker, self.work, reads))

    def on_expiration(self) -> None:
        pass


class FetchPurgatory:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.purgatory = DelayedOperationPurgatory(broker.timer, "fetch")

    def wait(self, work, max_wait_ms: int, respond, read, answer) -> None:
        """Park a fetch (broker/apis/fetch.py FetchWork), watched by each partition it reads;
        ``read`` and ``answer`` are the Fetch handler's."""
        op = DelayedFetch(self.broker, work, max_wait_ms, respond, read, answer)
        keys = work.keys
        self.purgatory.try_complete_else_watch(op, keys)

    def partition_appended(self, topic: str, partition: int) -> None:
        self.purgatory.check_and_complete(("fetch", topic, partition))

    def complete_all(self) -> None:
        """At shutdown: answer every waiting fetch with what is there now."""
        self.purgatory.force_complete_all()
