"""The asyncio driver of the timer: one loop callback armed for the next wakeup (fake loop and
clock, no sleeping)."""
from __future__ import annotations

from broker.purgatory import BUCKET_MS
from broker.timer import TICK_MS, AsyncioTimerDriver


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


class Handle:
    def __init__(self, at: int, fn) -> None:
        self.at, self.fn, self.cancelled = at, fn, False

    def cancel(self) -> None:
        self.cancelled = True


class Loop:
    """Only what the driver uses: call_later on the fake clock's milliseconds, and call_soon."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.handles: list[Handle] = []

    def call_later(self, delay_s: float, fn) -> Handle:
        handle = Handle(self.clock.now + round(delay_s * 1000), fn)
        self.handles.append(handle)
        return handle

    def call_soon(self, fn) -> Handle:
        handle = Handle(self.clock.now, fn)
        handle.soon = True
        self.handles.append(handle)
        return handle

    def soon(self) -> int:
        """How many callbacks wait for the next pass (call_soon)."""
        return sum(1 for h in self.handles if not h.cancelled and getattr(h, "soon", False))

    def run_pass(self) -> None:
        """One pass of the loop: the call_soon callbacks armed before it, in order."""
        for handle in [h for h in self.handles if getattr(h, "soon", False)]:
            self.handles.remove(handle)
            if not handle.cancelled:
                handle.fn()

    def armed(self) -> list[int]:
        return [h.at for h in self.handles if not h.cancelled]

    def run_until(self, t: int) -> None:
        """Fire armed callbacks in time order up to t, moving the clock to each."""
        while True:
            due = [h for h in self.handles if not h.cancelled and h.at <= t]
            if not due:
                break
            handle = min(due, key=lambda h: h.at)
            self.handles.remove(handle)
            self.clock.now = max(self.clock.now, handle.at)
            handle.fn()
        self.clock.now = t


def test_a_far_deadline_wakes_at_its_bucket_then_runs_at_its_deadline():
    clock = Clock()
    driver = AsyncioTimerDriver(clock)
    loop = Loop(clock)
    driver.start(loop)
    ran = []
    deadline = 4 * BUCKET_MS + 500
    driver.timer.add(deadline, lambda: ran.append(clock.now))
    assert loop.armed() == [4 * BUCKET_MS]          # one callback, at the bucket's start
    loop.run_until(4 * BUCKET_MS)
    assert ran == [] and loop.armed() == [deadline]  # re-armed for the exact deadline
    loop.run_until(deadline)
    assert ran == [deadline] and loop.armed() == []


def test_an_earlier_deadline_rearms_the_one_callback():
    clock = Clock()
    driver = AsyncioTimerDriver(clock)
    loop = Loop(clock)
    driver.start(loop)
    ran = []
    driver.timer.add(10 * BUCKET_MS, lambda: ran.append("late"))
    driver.timer.add(20, lambda: ran.append("soon"))
    assert loop.armed() == [20]                      # the earlier arm was cancelled
    loop.run_until(10 * BUCKET_MS)
    assert ran == ["soon", "late"] and loop.armed() == []


def test_cancelled_work_leaves_nothing_armed_after_the_wakeup():
    clock = Clock()
    driver = AsyncioTimerDriver(clock)
    loop = Loop(clock)
    driver.start(loop)
    handle = driver.timer.add(3 * BUCKET_MS + 1, lambda: None)
    handle.cancel()
    loop.run_until(10 * BUCKET_MS)
    assert loop.armed() == [] and len(driver.timer) == 0


def test_due_work_runs_on_the_next_loop_pass_and_work_it_schedules_on_the_pass_after():
    """Kafka's timer hands a task that is already due to its executor at once (SystemTimer: an
    expired entry is submitted, not put in the wheel), so a task due now runs on the loop's next
    pass, without waiting for a tick; a task it schedules (an initial delayed join extending
    itself at delay 0) runs on the pass after, once the requests read meanwhile are handled."""
    clock = Clock()
    driver = AsyncioTimerDriver(clock)
    loop = Loop(clock)
    driver.start(loop)
    ran = []

    def first():
        ran.append(("first", clock.now))
        driver.timer.add(clock.now, lambda: ran.append(("second", clock.now)))

    clock.now = 5
    driver.timer.add(5, first)
    assert ran == [] and loop.soon() == 1           # not run inside add: on the next pass
    loop.run_pass()
    assert ran == [("first", 5)] and loop.soon() == 1
    loop.run_pass()
    assert ran == [("first", 5), ("second", 5)] and loop.armed() == []


def test_a_deadline_in_the_future_waits_at_least_a_tick():
    clock = Clock()
    driver = AsyncioTimerDriver(clock)
    loop = Loop(clock)
    driver.start(loop)
    driver.timer.add(1, lambda: None)
    assert loop.soon() == 0 and loop.armed() == [TICK_MS]
