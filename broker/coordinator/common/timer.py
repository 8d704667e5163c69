"""A keyed timer over the shared Timer (Kafka's CoordinatorTimer): ``schedule(key, delay, fn)``
replaces whatever was scheduled under the same key, ``cancel(key)`` drops it. Consumer groups
keep one session timeout and at most one revocation timeout per member this way.

``extend(key, delay, fn)`` is for a deadline that nearly always moves later (a session timeout
on each heartbeat): it only records the new deadline, and the timer task, when it comes due
at an older deadline, schedules itself again for the rest. A heartbeat then costs no timer
operation at all."""
from __future__ import annotations

from typing import Callable, Hashable

from ...purgatory import Timer


class _Entry:
    __slots__ = ("handle", "deadline", "fn")

    def __init__(self, handle, deadline: int | None, fn) -> None:
        self.handle = handle
        self.deadline = deadline    # None: a plain schedule(), runs when its task comes due
        self.fn = fn


class CoordinatorTimer:
    __slots__ = ("timer", "tasks")

    def __init__(self, timer: Timer) -> None:
        self.timer = timer
        self.tasks: dict[Hashable, _Entry] = {}

    def schedule(self, key: Hashable, delay_ms: int, fn: Callable[[], None]) -> None:
        self.cancel(key)
        entry = _Entry(None, None, fn)
        entry.handle = self.timer.call_later(delay_ms, lambda: self._due(key, entry))
        self.tasks[key] = entry

    def extend(self, key: Hashable, delay_ms: int, fn: Callable[[], None]) -> None:
        """Like schedule(), cheaply when the new deadline is later than the pending one."""
        deadline = self.timer.clock() + max(0, int(delay_ms))
        entry = self.tasks.get(key)
        if entry is not None and entry.deadline is not None and entry.deadline <= deadline:
            entry.deadline = deadline
            entry.fn = fn
            return
        self.cancel(key)
        entry = _Entry(None, deadline, fn)
        entry.handle = self.timer.add(deadline, lambda: self._due(key, entry))
        self.tasks[key] = entry

    def extend_to(self, key: Hashable, delay_ms: int) -> bool:
        """extend() of a deadline pending from an earlier extend() with the same function:
        False, changing nothing, when there is none or the new deadline would be earlier."""
        entry = self.tasks.get(key)
        if entry is None or entry.deadline is None:
            return False
        deadline = self.timer.clock() + delay_ms
        if entry.deadline > deadline:
            return False
        entry.deadline = deadline
        return True

    def _due(self, key: Hashable, entry: _Entry) -> None:
        if self.tasks.get(key) is not entry:
            return
        if entry.deadline is not None and entry.deadline > self.timer.clock():
            # extended since: wait for the rest
            entry.handle = self.timer.add(entry.deadline, lambda: self._due(key, entry))
            return
        del self.tasks[key]
        entry.fn()

    def cancel(self, key: Hashable) -> None:
        entry = self.tasks.pop(key, None)
        if entry is not None:
            self.timer.cancel(entry.handle)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self.tasks

    def cancel_all(self) -> None:
        for entry in self.tasks.values():
            self.timer.cancel(entry.handle)
        self.tasks.clear()
