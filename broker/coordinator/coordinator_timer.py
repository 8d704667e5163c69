"""A keyed timer over the shared Timer (Kafka's CoordinatorTimer): ``schedule(key, delay, fn)``
replaces whatever was scheduled under the same key, ``cancel(key)`` drops it. Consumer groups
keep one session timeout and at most one revocation timeout per member this way."""
from __future__ import annotations

from typing import Callable, Hashable

from ..purgatory import Timer


class CoordinatorTimer:
    __slots__ = ("timer", "tasks")

    def __init__(self, timer: Timer) -> None:
        self.timer = timer
        self.tasks: dict[Hashable, object] = {}

    def schedule(self, key: Hashable, delay_ms: int, fn: Callable[[], None]) -> None:
        previous = self.tasks.pop(key, None)
        if previous is not None:
            self.timer.cancel(previous)

        def run() -> None:
            if self.tasks.get(key) is handle:
                del self.tasks[key]
                fn()

        handle = self.timer.call_later(delay_ms, run)
        self.tasks[key] = handle

    def cancel(self, key: Hashable) -> None:
        handle = self.tasks.pop(key, None)
        if handle is not None:
            self.timer.cancel(handle)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self.tasks

    def cancel_all(self) -> None:
        for handle in self.tasks.values():
            self.timer.cancel(handle)
        self.tasks.clear()
