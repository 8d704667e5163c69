"""Drives the sans-I/O timer (broker/purgatory.py) from the asyncio event loop.

One ``loop.call_at`` handle is armed for the earliest deadline, however many delayed operations
wait: no task per member or per request. Like Kafka's timer (a timing wheel with a 1 ms tick,
run by its own thread), it wakes at most once per :data:`TICK_MS`: work that is due at once
(an initial delayed join at ``group.initial.rebalance.delay.ms=0``) runs one tick later, after
the requests that arrive within that tick.
"""
from __future__ import annotations

from .purgatory import Timer

#: The timer's resolution, as Kafka's SystemTimer (tickMs=1).
TICK_MS = 1


class AsyncioTimerDriver:
    def __init__(self, clock) -> None:
        self.clock = clock
        self.timer = Timer(clock)
        self.timer.on_earlier_deadline = self._arm
        self.loop = None
        self.handle = None
        self.armed_for = None

    def start(self, loop) -> None:
        self.loop = loop
        deadline = self.timer.next_wakeup()
        if deadline is not None:
            self._arm(deadline)

    def _arm(self, deadline_ms: int) -> None:
        if self.loop is None:
            return
        if self.armed_for is not None and self.armed_for <= deadline_ms:
            return
        if self.handle is not None:
            self.handle.cancel()
        delay = max(TICK_MS, deadline_ms - self.clock()) / 1000.0
        self.armed_for = deadline_ms
        self.handle = self.loop.call_later(delay, self._fire)

    def _fire(self) -> None:
        self.handle = None
        self.armed_for = None
        self.timer.advance(self.clock())
        deadline = self.timer.next_wakeup()
        if deadline is not None:
            self._arm(deadline)

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.handle = None
        self.loop = None
