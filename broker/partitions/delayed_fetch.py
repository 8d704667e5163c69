"""A Fetch that found less than its min_bytes (Kafka's DelayedFetch): it waits in the fetch
purgatory (fetch_purgatory.py), reads again whenever one of its partitions is appended to, and is
answered once it has enough, a read fails, or max_wait_ms passes. Loaded with the Fetch handler,
not at the broker's start."""
from __future__ import annotations

from ..purgatory import DelayedOperation
from .read import read


class DelayedFetch(DelayedOperation):
    kind = "fetch"

    def __init__(self, broker, work, max_wait_ms: int, respond) -> None:
        super().__init__(max_wait_ms)
        self.broker = broker
        self.work = work
        #: ``respond(reads)``: the Fetch handler answers with what was read
        self.respond = respond
        self.result = None
        #: the handler has just read everything and found too little: the purgatory's own
        #: first try (before it watches) would read the same again
        self.fresh = True

    def try_complete(self) -> bool:
        if self.fresh:
            self.fresh = False
            return False
        reads, total, errors = read(self.broker, self.work)
        if total >= self.work.min_bytes or errors:
            self.result = reads
            return True
        return False

    def on_complete(self) -> None:
        reads = self.result
        if reads is None:
            reads, _total, _errors = read(self.broker, self.work)
        self.respond(reads)

    def on_expiration(self) -> None:
        pass
