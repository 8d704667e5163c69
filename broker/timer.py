"""Drives the sans-I/O timer (broker/purgatory.py) from the asyncio event loop.

One ``loop.call_at`` handle is armed for the earliest deadline, however many delayed operations
wait: no task per member or per request. A deadline that is already due runs on the loop's next
pass (``call_soon``), after the I/O read in this one, as Kafka's timer hands an expired task to its
executor at once (SystemTimer: an entry already due is submitted, not put in the wheel); a later
deadline wakes the loop at most once per :data:`TICK_MS`, the wheel's tick. Work that a timer task
schedules runs on the following pass (Timer.advance), like a new event at the end of Kafka's
coordinator queue: an initial delayed join at ``group.initial.rebalance.delay.ms=0`` extends itself
while each pass brings new members, and completes on the first pass that brings none.
"""
from __future__ import annotations

from .purgatory import Timer

#: The timer's resolution for deadlines in the future, as Kafka's SystemTimer (tickMs=1).
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
        delay = deadline_ms - self.clock()
        self.armed_for = deadline_ms
        if delay <= 0:
            self.handle = self.loop.call_soon(self._fire)
        else:
            self.handle = self.loop.call_later(max(TICK_MS, delay) / 1000.0, self._fire)

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
