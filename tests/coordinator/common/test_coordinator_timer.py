"""The keyed coordinator timer: replacing, cancelling and cheaply extending deadlines."""
from __future__ import annotations

from broker.coordinator.common.timer import CoordinatorTimer
from broker.purgatory import Timer

from tests.coordinator.harness import FakeClock


def make():
    clock = FakeClock(0)
    timer = Timer(clock)
    return clock, timer, CoordinatorTimer(timer)


def run_to(clock, timer, t):
    while True:
        deadline = timer.next_deadline()
        if deadline is None or deadline > t:
            break
        clock.now = max(clock.now, deadline)
        timer.advance(clock.now)
    clock.now = t
    timer.advance(t)


def test_schedule_replaces_the_task_of_the_same_key():
    clock, timer, keyed = make()
    fired = []
    keyed.schedule("k", 100, lambda: fired.append("first"))
    keyed.schedule("k", 200, lambda: fired.append("second"))
    run_to(clock, timer, 150)
    assert fired == []
    run_to(clock, timer, 200)
    assert fired == ["second"] and not keyed.is_scheduled("k")


def test_extend_moves_the_deadline_without_new_timer_tasks():
    clock, timer, keyed = make()
    fired = []
    keyed.extend("s", 1000, lambda: fired.append(clock.now))
    for t in range(100, 2001, 100):       # a heartbeat every 100 ms for 2 s
        run_to(clock, timer, t)
        keyed.extend("s", 1000, lambda: fired.append(clock.now))
        assert len(timer) == 1
    run_to(clock, timer, 2999)
    assert fired == []
    run_to(clock, timer, 3000)
    assert fired == [3000]


def test_extend_to_an_earlier_deadline_and_cancel():
    clock, timer, keyed = make()
    fired = []
    keyed.extend("s", 1000, lambda: fired.append("late"))
    keyed.extend("s", 10, lambda: fired.append("early"))
    run_to(clock, timer, 10)
    assert fired == ["early"]
    keyed.extend("t", 10, lambda: fired.append("cancelled"))
    keyed.cancel("t")
    run_to(clock, timer, 2000)
    assert fired == ["early"]
