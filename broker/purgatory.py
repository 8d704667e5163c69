"""Delayed operations and the timer that expires them. Sans-I/O: no asyncio, no threads.

Time comes only from an injected ``clock() -> int`` (milliseconds). Nothing here runs on its own:
the broker drives it. It calls :meth:`Timer.advance` with the current time whenever
:meth:`Timer.next_wakeup` is due, and keeps one ``loop.call_at`` armed for it. The
:attr:`Timer.on_earlier_deadline` hook tells it when a newly scheduled task needs an earlier
wakeup than the one it armed for, so that a single re-armed callback is enough however many
operations wait::

    timer = Timer(clock)
    timer.on_earlier_deadline = lambda wakeup_ms: rearm(wakeup_ms)
    ...
    def on_wakeup():                      # scheduled with loop.call_at
        timer.advance(clock())
        wakeup = timer.next_wakeup()
        if wakeup is not None:
            rearm(wakeup)

:class:`DelayedOperation` is Kafka's delayed operation: ``try_complete`` says whether it can finish
now, ``on_complete`` runs exactly once when it finishes (by an event or by its timeout), and
``on_expiration`` runs after ``on_complete`` when the finish was the timeout. Like Kafka's, it is
itself the timer's task: watching one allocates no handle and no callback object.
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

#: Width of the timer's buckets. A task due at least one bucket ahead waits in an unordered
#: bucket (O(1) schedule and cancel, no garbage); when the bucket's start time comes its tasks
#: move into the exact heap. A member's DelayedHeartbeat is replaced seconds before its deadline,
#: so heartbeats never reach the heap; short waits (a Fetch long-poll) go straight into it.
BUCKET_MS = 1024

# Rebuild the heap when cancelled entries are more than half of it (and at least this many).
_COMPACT_MIN = 1024
_IN_HEAP = object()  # TimerTask._slot of a task waiting in the exact heap
_heappush = heapq.heappush
_heappop = heapq.heappop


class TimerTask:
    """Something the timer runs once at ``deadline_ms`` (Kafka's TimerTask). A task is scheduled
    at most once; ``_slot`` says where it waits: None (not scheduled, run or cancelled), the heap,
    or the dict of its bucket."""

    __slots__ = ("deadline_ms", "_slot")

    def run(self) -> None:
        raise NotImplementedError

    @property
    def active(self) -> bool:
        """Scheduled and neither run nor cancelled."""
        return self._slot is not None


class TimerHandle(TimerTask):
    """A plain callback scheduled with :meth:`Timer.add` / :meth:`Timer.call_later`."""

    __slots__ = ("fn", "timer")

    def __init__(self, fn: Callable[[], None], timer: "Timer") -> None:
        self.deadline_ms = 0
        self._slot = None
        self.fn = fn
        self.timer = timer

    def run(self) -> None:
        fn, self.fn = self.fn, None
        fn()

    def cancel(self) -> bool:
        return self.timer.cancel(self)

    def __repr__(self) -> str:
        return f"<TimerHandle at {self.deadline_ms}{'' if self.active else ' done'}>"


class Timer:
    """Tasks by deadline over an injected clock, run in (deadline, scheduling) order.

    Deadlines within the current bucket live in a min-heap; later ones in buckets of
    :data:`BUCKET_MS` (dicts used as ordered sets) found through a small heap of bucket indexes,
    as in Kafka's timing wheel. Scheduling and cancelling a task in a bucket is O(1) and frees its
    slot at once; the heap deletes lazily and compacts."""

    def __init__(self, clock: Clock, bucket_ms: int = BUCKET_MS) -> None:
        self.clock = clock
        self._bucket_ms = bucket_ms
        self._heap: list[tuple[int, int, TimerTask]] = []
        self._buckets: dict[int, dict[TimerTask, None]] = {}
        self._bucket_heap: list[int] = []     # indexes of _buckets (possibly stale)
        # deadlines before this go straight into the heap: their bucket's time has come
        self._horizon = (int(clock()) // bucket_ms + 1) * bucket_ms
        self._seq = itertools.count()
        self._live = 0
        self._cancelled_in_heap = 0
        self._advancing = False
        #: Called with the new earliest wakeup whenever scheduling a task makes it earlier (the
        #: broker re-arms its single ``loop.call_at``). Not called during ``advance``.
        self.on_earlier_deadline: Callable[[int], None] | None = None

    def __len__(self) -> int:
        """Number of pending (not cancelled, not run) tasks."""
        return self._live

    def now(self) -> int:
        return self.clock()

    def add(self, deadline_ms: int, fn: Callable[[], None]) -> TimerHandle:
        """Run ``fn()`` at the first ``advance(now)`` with ``now >= deadline_ms``."""
        handle = TimerHandle(fn, self)
        self.schedule(handle, deadline_ms)
        return handle

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        return self.add(self.clock() + max(0, int(delay_ms)), fn)

    def schedule(self, task: TimerTask, deadline_ms: int) -> None:
        """Run ``task.run()`` at the first ``advance(now)`` with ``now >= deadline_ms``."""
        if task._slot is not None:
            raise ValueError(f"{task!r} is already scheduled")
        deadline_ms = int(deadline_ms)
        task.deadline_ms = deadline_ms
        heap = self._heap
        bucket_heap = self._bucket_heap
        size = self._bucket_ms
        # the earliest wakeup so far (cancelled entries included: a driver armed for one of
        # them wakes, finds nothing due and re-arms)
        if heap:
            previous = heap[0][0]
            if bucket_heap and bucket_heap[0] * size < previous:
                previous = bucket_heap[0] * size
        else:
            previous = bucket_heap[0] * size if bucket_heap else None
        if deadline_ms < self._horizon:
            task._slot = _IN_HEAP
            _heappush(heap, (deadline_ms, next(self._seq), task))
            wakeup = deadline_ms
        else:
            index = deadline_ms // size
            bucket = self._buckets.get(index)
            if bucket is None:
                bucket = self._buckets[index] = {}
                _heappush(bucket_heap, index)
            bucket[task] = None
            task._slot = bucket
            wakeup = index * size
        self._live += 1
        hook = self.on_earlier_deadline
        if hook is not None and not self._advancing and (previous is None or wakeup < previous):
            hook(wakeup)

    def cancel(self, task: TimerTask | None) -> bool:
        """Cancel a pending task; True if it was pending. Cancelling twice is harmless."""
        if task is None:
            return False
        slot = task._slot
        if slot is None:
            return False
        task._slot = None
        self._live -= 1
        if type(task) is TimerHandle:
            task.fn = None  # drop references now
        if slot is _IN_HEAP:
            heap = self._heap
            if heap[0][2] is task:
                _heappop(heap)
            else:
                self._cancelled_in_heap += 1
                if (self._cancelled_in_heap >= _COMPACT_MIN
                        and 2 * self._cancelled_in_heap > len(heap)):
                    self._compact()
        else:
            del slot[task]
            if not slot:
                index = task.deadline_ms // self._bucket_ms
                del self._buckets[index]
                bucket_heap = self._bucket_heap
                if bucket_heap[0] == index:
                    _heappop(bucket_heap)
        return True

    def replace(self, old: TimerTask, new: TimerTask, deadline_ms: int) -> None:
        """``cancel(old)`` then ``schedule(new, deadline_ms)``, in one step when both deadlines
        fall in the same bucket: ``new`` takes ``old``'s place there (after the bucket's other
        tasks, as scheduling it would put it). A member's DelayedHeartbeat handing over to the
        next one, several times a second, mostly does."""
        slot = old._slot
        deadline_ms = int(deadline_ms)
        size = self._bucket_ms
        if (slot is None or slot is _IN_HEAP or new._slot is not None
                or deadline_ms // size != old.deadline_ms // size):
            self.cancel(old)
            self.schedule(new, deadline_ms)
            return
        del slot[old]
        old._slot = None
        if type(old) is TimerHandle:
            old.fn = None
        new.deadline_ms = deadline_ms
        new._slot = slot
        slot[new] = None

    def _compact(self) -> None:
        self._heap = [entry for entry in self._heap if entry[2]._slot is _IN_HEAP]
        heapq.heapify(self._heap)
        self._cancelled_in_heap = 0

    def _clean_tops(self) -> None:
        heap = self._heap
        while heap and heap[0][2]._slot is not _IN_HEAP:
            _heappop(heap)
            self._cancelled_in_heap -= 1
        bucket_heap = self._bucket_heap
        while bucket_heap and bucket_heap[0] not in self._buckets:
            _heappop(bucket_heap)

    def next_wakeup(self) -> int | None:
        """When to call :meth:`advance` next: the earliest heap deadline or the start of the
        earliest bucket, whichever comes first; None when nothing is scheduled."""
        self._clean_tops()
        heap, bucket_heap = self._heap, self._bucket_heap
        if bucket_heap:
            start = bucket_heap[0] * self._bucket_ms
            return heap[0][0] if heap and heap[0][0] < start else start
        return heap[0][0] if heap else None

    def next_deadline(self) -> int | None:
        """The earliest pending deadline exactly, or None when nothing is scheduled."""
        self._clean_tops()
        heap, bucket_heap = self._heap, self._bucket_heap
        best = heap[0][0] if heap else None
        if bucket_heap and (best is None or bucket_heap[0] * self._bucket_ms < best):
            earliest = min(task.deadline_ms for task in self._buckets[bucket_heap[0]])
            best = earliest if best is None else min(best, earliest)
        return best

    def _flush(self, now_ms: int) -> None:
        """Move the tasks of every bucket whose start time has come into the heap, in the order
        they were scheduled."""
        size = self._bucket_ms
        bucket_heap = self._bucket_heap
        heap = self._heap
        seq = self._seq
        while bucket_heap and bucket_heap[0] * size <= now_ms:
            bucket = self._buckets.pop(_heappop(bucket_heap), None)
            if bucket is None:
                continue  # stale index
            for task in bucket:
                task._slot = _IN_HEAP
                _heappush(heap, (task.deadline_ms, next(seq), task))
        horizon = (now_ms // size + 1) * size
        if horizon > self._horizon:
            self._horizon = horizon

    def advance(self, now_ms: int | None = None) -> int:
        """Run every task due at ``now_ms`` (default: the clock) in deadline order.

        A task scheduled while advancing waits for the next call even if it is already due, as
        in Kafka, where a timer operation that schedules another one puts a new event at the
        end of the coordinator's queue: what arrived in between is handled first (an initial
        delayed join that extends itself sees the members that joined meanwhile). Returns the
        number of tasks run.
        """
        if now_ms is None:
            now_ms = self.clock()
        self._flush(now_ms)
        heap = self._heap
        ran = 0
        scheduled_before = next(self._seq)
        later = []  # scheduled during this call, already due: next call
        self._advancing = True
        try:
            while heap:
                deadline, seq, task = heap[0]
                if task._slot is not _IN_HEAP:
                    _heappop(heap)
                    self._cancelled_in_heap -= 1
                    continue
                if deadline > now_ms:
                    break
                if seq > scheduled_before:
                    later.append(_heappop(heap))
                    continue
                _heappop(heap)
                task._slot = None
                self._live -= 1
                ran += 1
                try:
                    task.run()
                except Exception:  # one failing task must not stop the others
                    log.exception("timer task failed", deadline_ms=deadline)
                heap = self._heap  # a task may have compacted the heap
        finally:
            self._advancing = False
            for entry in later:
                _heappush(self._heap, entry)
        return ran


class _Keys(tuple):
    """The watch keys of an operation watched under several; a single key is kept as itself."""

    __slots__ = ()


class DelayedOperation(TimerTask):
    """An operation that completes on an event or when its deadline passes, exactly once.

    Subclasses override :meth:`try_complete` (return True when the operation can finish now; the
    purgatory then completes it; calling ``self.force_complete()`` inside it, Kafka style, works
    too), :meth:`on_complete` (runs once, on every kind of completion) and :meth:`on_expiration`
    (runs after ``on_complete`` when the deadline passed first). The timeout is ``delay_ms`` from
    the moment the operation is watched, or an absolute ``deadline_ms``.
    ``kind`` names the operation for metrics ("heartbeat", "join", "fetch", ...).
    """

    __slots__ = ("delay_ms", "completed", "_keys", "_purgatory")

    kind = "operation"

    def __init__(self, delay_ms: int, deadline_ms: int | None = None) -> None:
        # Kafka's DelayedOperation takes a delay; the deadline is fixed when the operation is
        # watched (now + delay) unless an absolute deadline_ms is given here.
        self.delay_ms = delay_ms if delay_ms > 0 else 0
        self.deadline_ms = deadline_ms
        self.completed = False
        self._slot = None
        self._keys = None   # the key, or _Keys of several, while watched
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
        self.on_complete()
        return True

    def run(self) -> None:
        """The deadline passed (the timer runs this)."""
        if self.force_complete():
            self.on_expiration()

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} deadline={self.deadline_ms}"
                f"{' completed' if self.completed else ''}>")


class DelayedOperationPurgatory:
    """Delayed operations watched under keys, expired by a shared :class:`Timer`.

    Memory per waiting operation is the operation, its slot in the timer and one slot per watch
    key; an operation's slots are removed when it completes, so nothing accumulates. No task per
    operation.
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
        keys = tuple(keys) if type(keys) is not tuple else keys
        op._keys = keys[0] if len(keys) == 1 else _Keys(keys)
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
        by_kind = self._waiting_by_kind
        kind = op.kind
        by_kind[kind] = by_kind.get(kind, 0) + 1
        self.timer.schedule(op, op.deadline_ms)
        return False

    def replace(self, old: DelayedOperation | None, new: DelayedOperation, key: Hashable) -> bool:
        """Complete ``old`` if it still waits, then watch ``new`` under ``key``: the same as
        ``old.force_complete()`` followed by ``try_complete_else_watch(new, (key,))``. When
        ``old`` is the only operation watching ``key`` and has nothing to do on completion (a
        member's DelayedHeartbeat handing over to the next one), its watch slot and
        waiting count pass to ``new`` in one step. Returns what try_complete_else_watch does."""
        watchers = self._watchers
        if (old is None or old.completed or old._purgatory is not self or old._keys is not key
                or type(old).on_complete is not DelayedOperation.on_complete
                or old.kind != new.kind or watchers.get(key) is not old
                or new.completed or new._purgatory is not None):
            if old is not None:
                old.force_complete()
            return self.try_complete_else_watch(new, (key,))
        old.completed = True
        old._purgatory = None
        old._keys = None
        if new.try_complete() or new.completed:
            self.timer.cancel(old)
            del watchers[key]
            self._waiting -= 1
            self._waiting_by_kind[old.kind] -= 1
            new.force_complete()
            return True
        if new.deadline_ms is None:
            new.deadline_ms = self.timer.clock() + new.delay_ms
        new._keys = key
        new._purgatory = self
        watchers[key] = new
        self.timer.replace(old, new, new.deadline_ms)
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
        if op._slot is not None:
            self.timer.cancel(op)
        watchers = self._watchers
        keys = op._keys
        for key in (keys if type(keys) is _Keys else (keys,)):
            current = watchers.get(key)
            if current is op:
                del watchers[key]
            elif type(current) is dict:
                current.pop(op, None)
                if len(current) == 1:
                    watchers[key] = next(iter(current))
                elif not current:
                    del watchers[key]
        op._keys = None
        self._waiting -= 1
        self._waiting_by_kind[op.kind] -= 1
