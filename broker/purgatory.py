"""Delayed operations and the timer that expires them. Sans-I/O: no asyncio, no threads.

Time comes only from an injected ``clock() -> int`` (milliseconds). Nothing here runs on its own:
the broker drives it. It calls :meth:`Timer.advance` with the current time whenever the earliest
deadline is due, and keeps one ``loop.call_at`` armed for :meth:`Timer.next_deadline`. The
:attr:`Timer.on_earlier_deadline` hook tells it when a newly added deadline is earlier than the one
it armed for, so that a single re-armed callback is enough however many operations wait::

    timer = Timer(clock)
    timer.on_earlier_deadline = lambda deadline_ms: rearm(deadline_ms)
    ...
    def on_wakeup():                      # scheduled with loop.call_at
        timer.advance(clock())
        deadline = timer.next_deadline()
        if deadline is not None:
            rearm(deadline)

:class:`DelayedOperation` is Kafka's delayed operation: ``try_complete`` says whether it can finish
now, ``on_complete`` runs exactly once when it finishes (by an event or by its timeout), and
``on_expiration`` runs after ``on_complete`` when the finish was the timeout.
:class:`DelayedOperationPurgatory` watches operations under keys (a member, a group, a partition)
so an event on a key can complete the operations waiting on it, and expires them via the timer.
The group coordinator's DelayedJoin/DelayedHeartbeat/DelayedSync and the data plane's Fetch
long-poll (keys like ``("fetch", topic, partition)``) all use it.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Callable, Hashable, Iterable

import structlog

log = structlog.get_logger("broker.purgatory")

Clock = Callable[[], int]

# Rebuild the heap when cancelled entries exceed half the live ones (and there are at least this
# many), so lazy deletion holds at most about one and a half times the live entries in memory.
_COMPACT_MIN = 1024


class TimerHandle:
    """One scheduled callback. ``cancel`` through :meth:`Timer.cancel` (or ``handle.cancel()``)."""

    __slots__ = ("deadline_ms", "fn", "timer", "cancelled", "fired")

    def __init__(self, deadline_ms: int, fn: Callable[[], None], timer: "Timer") -> None:
        self.deadline_ms = deadline_ms
        self.fn = fn
        self.timer = timer
        self.cancelled = False
        self.fired = False

    @property
    def active(self) -> bool:
        return not (self.cancelled or self.fired)

    def cancel(self) -> bool:
        return self.timer.cancel(self)

    def __repr__(self) -> str:
        state = "cancelled" if self.cancelled else "fired" if self.fired else "pending"
        return f"<TimerHandle at {self.deadline_ms} {state}>"


class Timer:
    """A min-heap of deadlines over an injected clock: O(log n) add, O(1) cancel (lazy)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._heap: list[tuple[int, int, TimerHandle]] = []
        self._seq = itertools.count()
        self._live = 0
        self._cancelled_in_heap = 0
        self._advancing = False
        #: Called with the new earliest deadline whenever ``add`` makes the earliest deadline
        #: earlier (the broker re-arms its single ``loop.call_at``). Not called during ``advance``.
        self.on_earlier_deadline: Callable[[int], None] | None = None

    def __len__(self) -> int:
        """Number of pending (not cancelled, not fired) callbacks."""
        return self._live

    def now(self) -> int:
        return self.clock()

    def add(self, deadline_ms: int, fn: Callable[[], None]) -> TimerHandle:
        """Run ``fn()`` at the first ``advance(now)`` with ``now >= deadline_ms``."""
        deadline_ms = int(deadline_ms)
        previous = self._peek()
        handle = TimerHandle(deadline_ms, fn, self)
        heapq.heappush(self._heap, (deadline_ms, next(self._seq), handle))
        self._live += 1
        hook = self.on_earlier_deadline
        if hook is not None and not self._advancing and (previous is None or deadline_ms < previous):
            hook(deadline_ms)
        return handle

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        return self.add(self.clock() + max(0, int(delay_ms)), fn)

    def cancel(self, handle: TimerHandle | None) -> bool:
        """Cancel a pending callback; True if it was pending. Cancelling twice is harmless."""
        if handle is None or handle.cancelled or handle.fired:
            return False
        handle.cancelled = True
        handle.fn = None  # drop references now; the heap entry itself goes lazily
        self._live -= 1
        self._cancelled_in_heap += 1
        if (self._cancelled_in_heap >= _COMPACT_MIN
                and 2 * self._cancelled_in_heap > self._live):
            self._compact()
        return True

    def _compact(self) -> None:
        self._heap = [entry for entry in self._heap if not entry[2].cancelled]
        heapq.heapify(self._heap)
        self._cancelled_in_heap = 0

    def _peek(self) -> int | None:
        heap = self._heap
        while heap and heap[0][2].cancelled:
            heapq.heappop(heap)
            self._cancelled_in_heap -= 1
        return heap[0][0] if heap else None

    def next_deadline(self) -> int | None:
        """The earliest pending deadline, or None when nothing is scheduled."""
        return self._peek()

    def advance(self, now_ms: int | None = None) -> int:
        """Run every callback due at ``now_ms`` (default: the clock) in deadline order.

        Callbacks added while advancing that are already due also run in this call. Returns the
        number of callbacks run.
        """
        if now_ms is None:
            now_ms = self.clock()
        heap = self._heap
        ran = 0
        self._advancing = True
        try:
            while heap:
                deadline, _, handle = heap[0]
                if handle.cancelled:
                    heapq.heappop(heap)
                    self._cancelled_in_heap -= 1
                    continue
                if deadline > now_ms:
                    break
                heapq.heappop(heap)
                handle.fired = True
                self._live -= 1
                fn, handle.fn = handle.fn, None
                ran += 1
                try:
                    fn()
                except Exception:  # one failing callback must not stop the others
                    log.exception("timer callback failed", deadline_ms=deadline)
                heap = self._heap  # a callback may have compacted the heap
        finally:
            self._advancing = False
        return ran


class DelayedOperation:
    """An operation that completes on an event or when its deadline passes, exactly once.

    Subclasses override :meth:`try_complete` (return True when the operation can finish now; the
    purgatory then completes it; calling ``self.force_complete()`` inside it, Kafka style, works
    too), :meth:`on_complete` (runs once, on every kind of completion) and :meth:`on_expiration`
    (runs after ``on_complete`` when the deadline passed first). The timeout is ``delay_ms`` from
    the moment the operation is watched, or an absolute ``deadline_ms``.
    ``kind`` names the operation for metrics ("heartbeat", "join", "fetch", ...).
    """

    __slots__ = ("delay_ms", "deadline_ms", "completed", "_timer_handle", "_keys", "_purgatory",
                 "__weakref__")

    kind = "operation"

    def __init__(self, delay_ms: int, deadline_ms: int | None = None) -> None:
        # Kafka's DelayedOperation takes a delay; the deadline is fixed when the operation is
        # watched (now + delay) unless an absolute deadline_ms is given here.
        self.delay_ms = max(0, int(delay_ms))
        self.deadline_ms = None if deadline_ms is None else int(deadline_ms)
        self.completed = False
        self._timer_handle: TimerHandle | None = None
        self._keys: tuple = ()
        self._purgatory: DelayedOperationPurgatory | None = None

    # -- to override
    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass

    # -- lifecycle
    @property
    def is_completed(self) -> bool:
        return self.completed

    def force_complete(self) -> bool:
        """Complete now unless already completed; True only for the call that completed it."""
        if self.completed:
            return False
        self.completed = True
        purgatory = self._purgatory
        if purgatory is not None:
            purgatory._forget(self)
        elif self._timer_handle is not None:
            self._timer_handle.cancel()
            self._timer_handle = None
        self.on_complete()
        return True

    def _expire(self) -> None:
        self._timer_handle = None
        if self.force_complete():
            self.on_expiration()

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} deadline={self.deadline_ms}"
                f"{' completed' if self.completed else ''}>")


class DelayedOperationPurgatory:
    """Delayed operations watched under keys, expired by a shared :class:`Timer`.

    Memory per waiting operation is the operation, one timer entry and one slot per watch key; an
    operation's slots are removed when it completes, so nothing accumulates. No task per operation.
    """

    def __init__(self, name: str, timer: Timer) -> None:
        if isinstance(name, Timer):  # tolerate (timer, name)
            name, timer = timer, name
        self.timer = timer
        self.name = name
        # key -> a single operation, or a dict used as an ordered set when several watch the key
        self._watchers: dict[Hashable, object] = {}
        self._waiting_by_kind: dict[str, int] = {}
        self._waiting = 0

    # -- metrics
    def __len__(self) -> int:
        return self._waiting

    @property
    def waiting(self) -> int:
        """Operations watched and not yet completed."""
        return self._waiting

    def waiting_by_kind(self) -> dict[str, int]:
        return {kind: n for kind, n in self._waiting_by_kind.items() if n}

    def num_keys(self) -> int:
        return len(self._watchers)

    # -- operations
    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if it can; otherwise watch it under ``keys`` until its deadline.

        Returns True when the operation completed here. An operation is watched at most once.
        """
        if op.completed:
            return True
        if op._purgatory is not None:
            raise ValueError(f"{op!r} is already watched")
        if op.try_complete() or op.completed:
            op.force_complete()
            return True
        if op.deadline_ms is None:
            op.deadline_ms = self.timer.clock() + op.delay_ms
        keys = tuple(keys)
        op._keys = keys
        op._purgatory = self
        watchers = self._watchers
        for key in keys:
            current = watchers.get(key)
            if current is None:
                watchers[key] = op
            elif type(current) is dict:
                current[op] = None
            else:
                watchers[key] = {current: None, op: None}
        self._waiting += 1
        kind = op.kind
        self._waiting_by_kind[kind] = self._waiting_by_kind.get(kind, 0) + 1
        op._timer_handle = self.timer.add(op.deadline_ms, op._expire)
        return False

    def watched(self, key: Hashable) -> list[DelayedOperation]:
        current = self._watchers.get(key)
        if current is None:
            return []
        if type(current) is dict:
            return list(current)
        return [current]

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete every operation watched under ``key``; returns how many completed."""
        done = 0
        for op in self.watched(key):
            if op.completed:
                continue
            if op.try_complete():
                op.force_complete()
            if op.completed:
                done += 1
        return done

    def complete_all(self, key: Hashable) -> int:
        """Force-complete every operation watched under ``key`` (partition moved, group gone)."""
        return sum(1 for op in self.watched(key) if op.force_complete())

    def force_complete_all(self) -> int:
        """Force-complete every waiting operation (shutdown)."""
        ops: dict[DelayedOperation, None] = {}
        for current in list(self._watchers.values()):
            if type(current) is dict:
                ops.update(current)
            else:
                ops[current] = None
        return sum(1 for op in ops if op.force_complete())

    def _forget(self, op: DelayedOperation) -> None:
        """Called once when a watched operation completes: drop its timer and watch slots."""
        op._purgatory = None
        if op._timer_handle is not None:
            self.timer.cancel(op._timer_handle)
            op._timer_handle = None
        watchers = self._watchers
        for key in op._keys:
            current = watchers.get(key)
            if current is op:
                del watchers[key]
            elif type(current) is dict:
                current.pop(op, None)
                if len(current) == 1:
                    watchers[key] = next(iter(current))
                elif not current:
                    del watchers[key]
        op._keys = ()
        self._waiting -= 1
        self._waiting_by_kind[op.kind] -= 1
