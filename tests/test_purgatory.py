"""The timer and the delayed-operation purgatory (sans-I/O, fake clock)."""
from __future__ import annotations

import gc
import tracemalloc

import pytest

from broker.purgatory import DelayedOperation, DelayedOperationPurgatory, Timer, TimerHandle


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def timer(clock):
    return Timer(clock)


class Op(DelayedOperation):
    kind = "test"

    def __init__(self, delay, ready=False, log=None, deadline=None):
        super().__init__(delay, deadline)
        self.ready = ready
        self.log = log if log is not None else []

    def try_complete(self):
        return self.ready

    def on_complete(self):
        self.log.append(("complete", self))

    def on_expiration(self):
        self.log.append(("expired", self))


# --------------------------------------------------------------------------- timer

def test_timer_runs_due_callbacks_in_deadline_order(clock, timer):
    ran = []
    for deadline in (30, 10, 20, 10):
        timer.add(deadline, lambda d=deadline: ran.append(d))
    assert timer.next_deadline() == 10 and len(timer) == 4
    assert timer.advance(9) == 0
    assert timer.advance(20) == 3
    assert ran == [10, 10, 20] and timer.next_deadline() == 30
    clock.now = 100
    assert timer.advance() == 1 and timer.next_deadline() is None and len(timer) == 0


def test_timer_cancel(timer):
    ran = []
    h1 = timer.add(10, lambda: ran.append(1))
    h2 = timer.add(5, lambda: ran.append(2))
    assert timer.cancel(h2) is True and timer.cancel(h2) is False
    assert timer.next_deadline() == 10 and len(timer) == 1
    assert h1.cancel() is True
    assert timer.advance(100) == 0 and ran == []
    assert timer.cancel(None) is False


def test_callbacks_added_while_advancing_run_on_the_next_advance(timer):
    """As Kafka's timer events queue behind what arrived meanwhile: a task scheduled by a task,
    even one already due, waits for the next advance, and does not hold back the due tasks
    scheduled before it."""
    ran = []

    def first():
        ran.append("first")
        timer.add(3, lambda: ran.append("added, due"))
        timer.add(50, lambda: ran.append("added, later"))

    timer.add(5, first)
    timer.add(7, lambda: ran.append("second"))
    assert timer.advance(10) == 2
    assert ran == ["first", "second"] and timer.next_deadline() == 3
    assert timer.advance(10) == 1
    assert ran == ["first", "second", "added, due"] and timer.next_deadline() == 50


def test_on_earlier_deadline_hook(timer):
    seen = []
    timer.on_earlier_deadline = seen.append
    timer.add(100, lambda: None)
    timer.add(200, lambda: None)
    timer.add(50, lambda: None)
    h = timer.add(20, lambda: None)
    assert seen == [100, 50, 20]
    timer.cancel(h)
    timer.add(30, lambda: None)         # earlier than 50, the earliest live deadline now
    assert seen == [100, 50, 20, 30]

    def during():
        timer.add(1, lambda: None)      # not reported while advancing: the broker re-arms after
    timer.add(60, during)
    timer.advance(60)
    assert seen[-1] == 30


def test_a_failing_callback_does_not_stop_the_others(timer):
    ran = []
    timer.add(1, lambda: 1 / 0)
    timer.add(2, lambda: ran.append(2))
    assert timer.advance(5) == 2 and ran == [2]


def test_cancelled_entries_are_compacted(timer):
    handles = [timer.add(i, lambda: None) for i in range(10_000)]
    for h in handles[:9_000]:
        timer.cancel(h)
    assert len(timer) == 1_000
    assert len(timer._heap) < 3_000          # lazy deletion, bounded
    assert timer.next_deadline() == 9_000


def test_far_deadlines_wait_in_buckets_and_run_exactly_in_order(clock):
    timer = Timer(clock, bucket_ms=100)
    ran = []
    for deadline in (250, 130, 250, 120, 999):
        timer.add(deadline, lambda d=deadline: ran.append((d, clock.now)))
    assert len(timer._heap) == 0 and len(timer._buckets) == 3   # nothing is due this bucket
    assert timer.next_wakeup() == 100                           # the first bucket's start
    assert timer.next_deadline() == 120                         # exact
    handle = timer.add(250, lambda: ran.append("cancelled"))
    assert handle.cancel() is True and len(timer) == 5
    for now in range(0, 1001, 10):                              # a driver waking every 10 ms
        clock.now = now
        timer.advance()
    assert ran == [(120, 120), (130, 130), (250, 250), (250, 250), (999, 1000)]
    assert len(timer) == 0 and not timer._buckets and timer.next_wakeup() is None


def test_cancelling_the_last_task_of_a_bucket_frees_it(clock):
    timer = Timer(clock, bucket_ms=100)
    handles = [timer.add(500 + i, lambda: None) for i in range(50)]
    assert len(timer._buckets) == 1
    for h in handles:
        timer.cancel(h)
    assert not timer._buckets and not timer._bucket_heap and timer.next_deadline() is None


def test_hook_reports_the_bucket_start_for_far_deadlines(clock):
    timer = Timer(clock, bucket_ms=100)
    seen = []
    timer.on_earlier_deadline = seen.append
    timer.add(950, lambda: None)
    timer.add(420, lambda: None)
    timer.add(40, lambda: None)      # within the current bucket: exact
    timer.add(470, lambda: None)     # same bucket as 420: no earlier wakeup
    assert seen == [900, 400, 40]


def test_timer_matches_a_sorted_reference_under_random_use(clock):
    """Random schedules, cancels and advances (with the clock moving between them, as in the
    broker) run exactly what a sorted list says, in (deadline, scheduling) order."""
    import random
    rng = random.Random(7)
    timer = Timer(clock, bucket_ms=64)
    reference: list[tuple[int, int]] = []      # (deadline, seq) pending
    handles: dict[int, object] = {}
    ran: list[int] = []
    expected: list[int] = []
    seq = 0
    for _ in range(20_000):
        action = rng.random()
        if action < 0.5:
            deadline = clock.now + rng.choice((0, 1, 5, 63, 64, 65, 200, 1000, 5000))
            handles[seq] = timer.add(deadline, lambda s=seq: ran.append(s))
            reference.append((deadline, seq))
            seq += 1
        elif action < 0.65 and reference:
            deadline, s = reference.pop(rng.randrange(len(reference)))
            assert timer.cancel(handles[s]) is True
        elif action < 0.75 and reference:
            # replace: cancel one and schedule another, often in the same bucket (a member's
            # next heartbeat deadline), in one step
            deadline, s = reference.pop(rng.randrange(len(reference)))
            new_deadline = deadline + rng.choice((0, 1, 3, 20, 64, 500))
            handles[seq] = TimerHandle(lambda s=seq: ran.append(s), timer)
            timer.replace(handles[s], handles[seq], new_deadline)
            assert not handles[s].active
            reference.append((new_deadline, seq))
            seq += 1
        elif action < 0.8:
            clock.now += rng.choice((1, 7, 64, 300))
        else:
            reference.sort()
            due = [entry for entry in reference if entry[0] <= clock.now]
            expected += [s for _, s in due]
            reference = [entry for entry in reference if entry[0] > clock.now]
            timer.advance()
            assert ran == expected
            assert len(timer) == len(reference)
            assert timer.next_deadline() == (min(reference)[0] if reference else None)
            wakeup = timer.next_wakeup()
            assert (wakeup is None) == (not reference)
            assert wakeup is None or wakeup <= min(reference)[0]


# --------------------------------------------------------------------------- delayed ops

def test_completes_at_once_when_ready(timer):
    purgatory = DelayedOperationPurgatory("p", timer)
    op = Op(100, ready=True)
    assert purgatory.try_complete_else_watch(op, ["k"]) is True
    assert op.log == [("complete", op)] and purgatory.waiting == 0 and len(timer) == 0


def test_completed_by_event_then_never_expires(clock, timer):
    purgatory = DelayedOperationPurgatory("p", timer)
    op = Op(100)
    assert purgatory.try_complete_else_watch(op, ["a", "b"]) is False
    assert op.deadline_ms == 100 and purgatory.waiting_by_kind() == {"test": 1}
    assert purgatory.check_and_complete("a") == 0
    op.ready = True
    assert purgatory.check_and_complete("b") == 1
    assert purgatory.check_and_complete("a") == 0
    clock.now = 1000
    timer.advance()
    assert op.log == [("complete", op)]
    assert purgatory.waiting == 0 and purgatory.num_keys() == 0 and len(timer) == 0


def test_expiry_then_event_completes_once(clock, timer):
    purgatory = DelayedOperationPurgatory("p", timer)
    op = Op(100)
    purgatory.try_complete_else_watch(op, ["k"])
    clock.now = 100
    timer.advance()
    assert op.log == [("complete", op), ("expired", op)]
    op.ready = True
    assert purgatory.check_and_complete("k") == 0
    assert op.force_complete() is False
    assert op.log == [("complete", op), ("expired", op)]


def test_event_and_expiry_in_the_same_tick(clock, timer):
    """A completion triggered from another callback due at the same time wins exactly once."""
    purgatory = DelayedOperationPurgatory("p", timer)
    op = Op(100)
    purgatory.try_complete_else_watch(op, ["k"])
    # an event scheduled for the same millisecond, added after the op (runs after it)...
    timer.add(100, lambda: op.force_complete())
    # ...and one added before the op would run first: model both orders
    op2 = Op(100)
    timer.add(100, lambda: op2.force_complete())
    purgatory.try_complete_else_watch(op2, ["k2"])
    clock.now = 100
    timer.advance()
    assert op.log == [("complete", op), ("expired", op)]
    assert op2.log == [("complete", op2)]          # completed by the event, not expired
    assert purgatory.waiting == 0


def test_force_complete_inside_try_complete_kafka_style(timer):
    class SelfCompleting(Op):
        def try_complete(self):
            return self.force_complete() if self.ready else False

    purgatory = DelayedOperationPurgatory("p", timer)
    op = SelfCompleting(50)
    purgatory.try_complete_else_watch(op, ["k"])
    op.ready = True
    assert purgatory.check_and_complete("k") == 1
    assert op.log == [("complete", op)]


def test_absolute_deadline_and_watch_twice(clock, timer):
    purgatory = DelayedOperationPurgatory("p", timer)
    clock.now = 10
    op = Op(0, deadline=500)
    purgatory.try_complete_else_watch(op, ["k"])
    assert op.deadline_ms == 500
    with pytest.raises(ValueError):
        purgatory.try_complete_else_watch(op, ["other"])


def test_complete_all_and_force_complete_all(timer):
    purgatory = DelayedOperationPurgatory(timer, "tolerates (timer, name)")
    ops = [Op(100) for _ in range(3)]
    purgatory.try_complete_else_watch(ops[0], ["a"])
    purgatory.try_complete_else_watch(ops[1], ["a", "b"])
    purgatory.try_complete_else_watch(ops[2], ["b"])
    assert len(purgatory.watched("a")) == 2
    assert purgatory.complete_all("a") == 2
    assert purgatory.watched("b") == [ops[2]]
    assert purgatory.force_complete_all() == 1
    assert purgatory.waiting == 0 and len(timer) == 0


def test_counts_by_kind(timer):
    class Fetch(Op):
        kind = "fetch"
    purgatory = DelayedOperationPurgatory("p", timer)
    for i in range(3):
        purgatory.try_complete_else_watch(Op(10), [("member", i)])
    purgatory.try_complete_else_watch(Fetch(10), [("fetch", "t", 0)])
    assert purgatory.waiting_by_kind() == {"test": 3, "fetch": 1}
    purgatory.complete_all(("fetch", "t", 0))
    assert purgatory.waiting_by_kind() == {"test": 3}


# --------------------------------------------------------------------------- scale

def test_100k_watched_members_memory_and_cleanup(clock, timer):
    """100k operations watched, each under its own key (a member), with no task per member:
    half complete by event, half expire; afterwards nothing is left behind."""
    purgatory = DelayedOperationPurgatory("heartbeats", timer)
    n = 100_000
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    ops = []
    for i in range(n):
        op = Op(10_000 + i % 1000, log=[])
        purgatory.try_complete_else_watch(op, [("member", i)])
        ops.append(op)
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    per_op = held / n
    print(f"purgatory memory: {per_op:.0f} bytes per watched operation (incl. the op itself)")
    assert per_op < 2048                        # a sanity bound, not a benchmark
    assert purgatory.waiting == n and len(timer) == n and purgatory.num_keys() == n
    for i in range(0, n, 2):
        ops[i].ready = True
        assert purgatory.check_and_complete(("member", i)) == 1
    clock.now = 20_000
    assert timer.advance() == n // 2
    assert purgatory.waiting == 0 and purgatory.num_keys() == 0 and len(timer) == 0
    assert len(timer._heap) <= 2 * 1024        # cancelled entries were compacted away
    assert sum(1 for op in ops if op.log[-1][0] == "expired") == n // 2
    assert all(len(op.log) in (1, 2) for op in ops)


# --------------------------------------------------------------------------- replace

def test_replace_hands_the_watch_over_like_complete_then_watch(clock, timer):
    purgatory = DelayedOperationPurgatory("p", timer)
    log = []
    old = Op(100, log=log)
    purgatory.try_complete_else_watch(old, ["member"])
    new = Op(200, log=log)
    assert purgatory.replace(old, new, "member") is False
    assert log == [("complete", old)] and old.completed and not new.completed
    assert purgatory.watched("member") == [new] and purgatory.waiting == 1 and len(timer) == 1
    assert purgatory.waiting_by_kind() == {"test": 1}
    clock.now = 200
    timer.advance()
    assert log == [("complete", old), ("complete", new), ("expired", new)]
    assert purgatory.waiting == 0 and purgatory.num_keys() == 0 and len(timer) == 0


def test_replace_with_a_ready_operation_completes_it_at_once(timer):
    purgatory = DelayedOperationPurgatory("p", timer)
    old = Op(100)
    purgatory.try_complete_else_watch(old, ["member"])
    new = Op(100, ready=True)
    assert purgatory.replace(old, new, "member") is True
    assert old.completed and new.completed
    assert purgatory.waiting == 0 and purgatory.num_keys() == 0 and len(timer) == 0


def test_replace_falls_back_when_the_key_is_shared_or_old_is_gone(timer):
    purgatory = DelayedOperationPurgatory("p", timer)
    a, b = Op(100), Op(100)
    purgatory.try_complete_else_watch(a, ["k"])
    purgatory.try_complete_else_watch(b, ["k"])
    c = Op(100)
    assert purgatory.replace(a, c, "k") is False       # two watch "k": the general path
    assert a.completed and set(purgatory.watched("k")) == {b, c} and purgatory.waiting == 2
    d = Op(100)
    assert purgatory.replace(None, d, "other") is False
    assert purgatory.watched("other") == [d] and purgatory.waiting == 3


def test_replace_hands_the_slot_over_in_one_step_when_old_has_no_on_complete(clock, timer):
    """The heartbeat case: the old operation does nothing on completion, so its watch slot and
    waiting count pass straight to the new one; the outcome is the same as complete + watch."""
    class Liveness(DelayedOperation):
        kind = "heartbeat"

        def __init__(self, deadline, ready=False, log=None):
            super().__init__(0, deadline)
            self.ready, self.log = ready, log

        def try_complete(self):
            return self.ready

        def on_expiration(self):
            self.log.append(self)

    expired = []
    purgatory = DelayedOperationPurgatory("p", timer)
    old = Liveness(100, log=expired)
    purgatory.try_complete_else_watch(old, ["member"])
    new = Liveness(300, log=expired)
    assert purgatory.replace(old, new, "member") is False
    assert old.completed and not old.active and new.active
    assert purgatory.watched("member") == [new] and purgatory.waiting == 1 and len(timer) == 1
    assert purgatory.waiting_by_kind() == {"heartbeat": 1}
    ready = Liveness(500, ready=True, log=expired)
    assert purgatory.replace(new, ready, "member") is True
    assert new.completed and ready.completed
    assert purgatory.waiting == 0 and purgatory.num_keys() == 0 and len(timer) == 0
    clock.now = 1000
    timer.advance()
    assert expired == []
