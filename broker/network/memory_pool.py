"""The broker's two memory budgets over all connections.

``MemoryPool`` is Kafka's memory pool for ``queued.max.request.bytes``: request bytes read and not
yet answered; a connection that finds none left waits (reads nothing more) until some is given
back. ``AnswerBudget`` bounds ``queued.max.response.bytes``: bytes of answers made and not yet
taken by the sockets; a Fetch reads at most what is left of it, so clients that ask for much and
read slowly, or not at all, cannot make the broker hold more than it.
"""
from __future__ import annotations

import asyncio
import collections


class MemoryPool:
    """queued.max.request.bytes (0: unlimited). Like Kafka's SimpleMemoryPool it admits a
    request while any memory is left, so one request can go past the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit if limit > 0 else 0
        #: request bytes held: read (or being read) and not yet answered
        self.used = 0
        #: connections waiting for memory, woken in the order they came
        self.waiters: collections.deque = collections.deque()
        self.wake_scheduled = False

    def reserve(self, conn, size: int) -> bool:
        """Hold ``size`` bytes for the frame ``conn`` starts reading; False (and ``conn``
        waits, its ``waiting_for_memory`` set) when none is left."""
        if self.used < self.limit:
            self.used += size
            conn.frame_reserved = size
            return True
        if not conn.waiting_for_memory:
            conn.waiting_for_memory = True
            self.waiters.append(conn)
        return False

    def release(self, size: int) -> None:
        self.used -= size
        if self.waiters and not self.wake_scheduled and self.used < self.limit:
            self.wake_scheduled = True
            asyncio.get_running_loop().call_soon(self._wake_waiters)

    def _wake_waiters(self) -> None:
        """From the loop, never inside a handler's respond: the waiting connections read
        again, first come first, while memory is left."""
        self.wake_scheduled = False
        waiters = self.waiters
        while waiters and self.used < self.limit:
            conn = waiters.popleft()
            conn.waiting_for_memory = False
            conn._update_reading()


class AnswerBudget:
    """queued.max.response.bytes (0: unlimited): answers made and not yet taken by the
    sockets, over all connections (``holding``: the connections that have some)."""

    def __init__(self, limit: int, metrics, limit_log) -> None:
        self.limit = limit if limit > 0 else 0
        self.metrics = metrics
        self.limit_log = limit_log
        self.used = 0
        self.holding: set = set()

    def made(self, conn, size: int) -> None:
        self.used += size
        self.holding.add(conn)

    def released(self, conn, size: int) -> None:
        self.used -= size
        if not conn.answers_held:
            self.holding.discard(conn)

    def fetch_budget(self) -> int | None:
        """The record bytes a Fetch may read now: what is left (None: unlimited). When none
        seems left, the sockets are looked at first: they may have taken answers since. A Fetch
        with no budget waits as a long poll does, and is answered without records if there is
        still none when it must be answered."""
        limit = self.limit
        if not limit:
            return None
        if self.used >= limit:
            for conn in list(self.holding):
                conn._answers_sent()
            if self.used >= limit:
                self.metrics.fetch_held_back()
                self.limit_log.note("warning", "fetches wait: answers not taken by their "
                                    "sockets fill queued.max.response.bytes",
                                    queued_max_response_bytes=limit,
                                    connections_holding=len(self.holding))
                return 0
        return limit - self.used
