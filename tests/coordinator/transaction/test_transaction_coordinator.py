"""The transaction coordinator on a fake clock: the state machine, fencing, version 1 and 2
ends, markers, timeouts, replay of __transaction_state and the group coordinator's transactional
offsets."""
from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from protocol import messages as m
from protocol.errors import ErrorCode

from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group import records as rec
from broker.coordinator.group.group import OffsetAndMetadata
from broker.coordinator.common.runtime import EndMarker
from broker.coordinator.transaction import TransactionCoordinator
from broker.coordinator.transaction.coordinator import SWEEP_SLICE
from broker.coordinator.transaction.metadata import TransactionState
from broker.purgatory import Timer

from tests.coordinator.harness import FakeClock, FakeLog

E = ErrorCode
S = TransactionState


class MarkerLog:
    """What the coordinator asked the partitions to write."""

    def __init__(self) -> None:
        self.markers: list = []
        self.group_markers: list = []

    def write(self, producer_id, epoch, commit, coordinator_epoch, partitions,
              transaction_version=2):
        self.markers.append((producer_id, epoch, commit, tuple(partitions)))
        return {tp: E.NONE for tp in partitions}


class Txn:
    def __init__(self, config=None) -> None:
        self.clock = FakeClock(1_000_000)
        self.timer = Timer(self.clock)
        self.log = FakeLog()
        self.markers = MarkerLog()
        self.groups = GroupCoordinator({}, self.clock, self.timer, FakeLog().persist)
        self.ids = iter(range(1000, 10**6))
        self.coordinator = self.make(config)

    def make(self, config=None) -> TransactionCoordinator:
        def group_marker(partition, pid, epoch, commit, ce, on_done, transaction_version=2):
            self.markers.group_markers.append((partition, pid, epoch, commit))
            self.groups.complete_transaction(partition, pid, epoch, commit, ce, on_done,
                                             transaction_version)

        return TransactionCoordinator(
            config or {}, self.clock, self.timer, self.log.persist,
            write_markers=self.markers.write, write_group_marker=group_marker,
            allocate_producer_id=lambda: next(self.ids),
            group_partition_for=self.groups.partition_for)

    def advance(self, ms: int) -> None:
        self.clock.now += ms
        self.timer.advance(self.clock.now)

    def init(self, tid="tx", timeout=60000, expected=None):
        out = []
        self.coordinator.init_producer_id(tid, timeout, expected, lambda *a: out.append(a))
        assert len(out) == 1
        return out[0]

    def add(self, tid, pid, epoch, *partitions, version=0):
        out = []
        self.coordinator.add_partitions(tid, pid, epoch, list(partitions), version, out.append)
        return out[0]

    def end(self, tid, pid, epoch, commit, version=0):
        out = []
        self.coordinator.end_transaction(tid, pid, epoch, commit, version,
                                         lambda *a: out.append(a))
        return out[0]

    def state(self, tid="tx"):
        return self.coordinator.shard_for(tid).transactions[tid]


@pytest.fixture
def txn():
    return Txn()


def test_init_producer_id_allocates_then_bumps_the_epoch(txn):
    assert txn.init() == (E.NONE, 1000, 0)
    assert txn.init() == (E.NONE, 1000, 1)
    assert txn.state().state is S.EMPTY


def test_init_refuses_bad_timeouts_and_empty_ids(txn):
    assert txn.init(timeout=900001)[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert txn.init(timeout=0)[0] == E.INVALID_TRANSACTION_TIMEOUT
    assert txn.init(tid="")[0] == E.INVALID_REQUEST
    assert txn.init(timeout=900000)[0] == E.NONE


def test_init_with_the_last_epoch_is_a_retry(txn):
    txn.init()
    assert txn.init(expected=(1000, 0)) == (E.NONE, 1000, 1)
    # the answer was lost and the producer asks again with its old epoch: same epoch
    assert txn.init(expected=(1000, 0)) == (E.NONE, 1000, 1)
    assert txn.init(expected=(1000, 5))[0] == E.PRODUCER_FENCED


def test_version1_commit_writes_markers_then_completes(txn):
    _, pid, epoch = txn.init()
    assert txn.add("tx", pid, epoch, ("t", 0), ("t", 1)) == E.NONE
    assert txn.state().state is S.ONGOING
    assert txn.end("tx", pid, epoch, True) == (E.NONE, -1, -1)
    assert txn.markers.markers == [(pid, epoch, True, (("t", 0), ("t", 1)))]
    md = txn.state()
    assert md.state is S.COMPLETE_COMMIT and md.partitions == set()
    # a retried commit is fine, an abort now is not
    assert txn.end("tx", pid, epoch, True)[0] == E.NONE
    assert txn.end("tx", pid, epoch, False)[0] == E.INVALID_TXN_STATE


def test_version1_errors(txn):
    assert txn.add("tx", 1, 0, ("t", 0)) == E.INVALID_PRODUCER_ID_MAPPING
    _, pid, epoch = txn.init()
    assert txn.add("tx", pid, epoch + 1, ("t", 0)) == E.PRODUCER_FENCED
    assert txn.add("tx", pid + 1, epoch, ("t", 0)) == E.INVALID_PRODUCER_ID_MAPPING
    assert txn.end("tx", pid, epoch, True)[0] == E.INVALID_TXN_STATE  # nothing added


def test_version2_end_bumps_the_epoch_and_answers_it(txn):
    _, pid, epoch = txn.init()
    assert txn.add("tx", pid, epoch, ("t", 0), version=2) == E.NONE
    assert txn.end("tx", pid, epoch, True, version=2) == (E.NONE, pid, epoch + 1)
    assert txn.markers.markers == [(pid, epoch + 1, True, (("t", 0),))]
    assert txn.state().producer_epoch == epoch + 1
    # a retry with the old epoch is answered with the new one; an abort with the new epoch and
    # nothing added is allowed in version 2 and bumps again
    assert txn.end("tx", pid, epoch, True, version=2) == (E.NONE, pid, epoch + 1)
    assert txn.end("tx", pid, epoch + 1, False, version=2) == (E.NONE, pid, epoch + 2)
    assert txn.end("tx", pid, epoch + 2, True, version=2)[0] == E.INVALID_TXN_STATE


def test_a_new_producer_fences_and_aborts_the_open_transaction(txn):
    _, pid, epoch = txn.init()
    txn.add("tx", pid, epoch, ("t", 0))
    # the abort runs at once here; the new producer is told to retry
    assert txn.init()[0] == E.CONCURRENT_TRANSACTIONS
    assert txn.markers.markers == [(pid, epoch + 1, False, (("t", 0),))]
    assert txn.state().state is S.COMPLETE_ABORT
    assert txn.init() == (E.NONE, pid, epoch + 2)
    # the old producer is fenced everywhere
    assert txn.add("tx", pid, epoch, ("t", 1)) == E.PRODUCER_FENCED
    assert txn.end("tx", pid, epoch, True)[0] == E.PRODUCER_FENCED


def test_concurrent_transactions_while_the_end_is_being_written(txn):
    _, pid, epoch = txn.init()
    txn.add("tx", pid, epoch, ("t", 0))
    txn.log.auto = False
    out = []
    txn.coordinator.end_transaction("tx", pid, epoch, True, 0, lambda *a: out.append(a))
    assert out == []
    assert txn.add("tx", pid, epoch, ("t", 1)) == E.CONCURRENT_TRANSACTIONS
    assert txn.init()[0] == E.CONCURRENT_TRANSACTIONS
    txn.log.complete(1)   # PrepareCommit stored: answered, markers out, CompleteCommit pending
    assert out == [(E.NONE, -1, -1)]
    assert txn.state().state is S.PREPARE_COMMIT
    assert txn.add("tx", pid, epoch, ("t", 1)) == E.CONCURRENT_TRANSACTIONS
    txn.log.complete()
    assert txn.state().state is S.COMPLETE_COMMIT
    txn.log.auto = True
    assert txn.add("tx", pid, epoch, ("t", 1)) == E.NONE


def test_a_failed_write_leaves_the_state_as_it_was(txn):
    _, pid, epoch = txn.init()
    txn.log.fail_with = RuntimeError("disk full")
    assert txn.add("tx", pid, epoch, ("t", 0)) != E.NONE
    txn.log.fail_with = None
    assert txn.state().state is S.EMPTY and not txn.state().pending_transition_in_progress
    assert txn.add("tx", pid, epoch, ("t", 0)) == E.NONE


def test_timed_out_transactions_are_aborted_and_the_producer_fenced():
    txn = Txn({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})
    _, pid, epoch = txn.init(timeout=5000)
    txn.add("tx", pid, epoch, ("t", 0))
    txn.advance(4000)
    assert txn.markers.markers == []
    txn.advance(2000)
    assert txn.markers.markers == [(pid, epoch + 1, False, (("t", 0),))]
    assert txn.state().state is S.COMPLETE_ABORT
    assert txn.end("tx", pid, epoch, True)[0] == E.PRODUCER_FENCED


def test_timed_out_transactions_are_aborted_in_slices_with_one_summary_line():
    """10,000 transactions past their timeout were aborted in one pass, holding every request
    of the broker for seconds: now SWEEP_SLICE per timer tick, each tick a turn of the event
    loop, and one log line for the sweep."""
    txn = Txn({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})
    n = 2 * SWEEP_SLICE + 50
    for i in range(n):
        _, pid, epoch = txn.init(f"tx-{i}", timeout=5000)
        txn.add(f"tx-{i}", pid, epoch, ("t", i % 3))

    def aborted() -> int:
        return sum(txn.coordinator.shard_for(f"tx-{i}").transactions[f"tx-{i}"].state
                   is S.COMPLETE_ABORT for i in range(n))

    txn.advance(5000)
    assert aborted() == 0
    with capture_logs() as logs:
        txn.advance(1000)      # the sweep: its first slice
        assert aborted() == SWEEP_SLICE
        txn.advance(0)         # the next tick
        assert aborted() == 2 * SWEEP_SLICE
        # a client ends one of the rest between slices: the sweep leaves it alone
        md = txn.coordinator.shard_for(f"tx-{n - 1}").transactions[f"tx-{n - 1}"]
        assert txn.end(f"tx-{n - 1}", md.producer_id, md.producer_epoch, True)[0] == E.NONE
        txn.advance(0)
    assert aborted() == n - 1
    assert md.state is S.COMPLETE_COMMIT
    assert len(txn.markers.markers) == n
    summary = [e for e in logs if e["log_level"] == "info"]
    assert [(e["event"], e["count"], e["slices"]) for e in summary] == [
        ("aborted transactions past their timeout", n - 1, 3)]
    assert not [e for e in logs if e["log_level"] not in ("info", "debug")]


def test_a_sweep_still_going_is_not_started_again():
    txn = Txn({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})
    for i in range(SWEEP_SLICE + 1):
        _, pid, epoch = txn.init(f"tx-{i}", timeout=1000)
        txn.add(f"tx-{i}", pid, epoch, ("t", 0))
    txn.clock.now += 1001
    assert txn.coordinator.abort_timed_out_transactions() == SWEEP_SLICE + 1
    assert txn.coordinator.abort_timed_out_transactions() == 0   # its second slice waits
    txn.advance(0)
    assert len(txn.markers.markers) == SWEEP_SLICE + 1


def test_verify_and_implicit_add(txn):
    _, pid, epoch = txn.init()
    out = []
    txn.coordinator.verify_produce("tx", pid, epoch, [("t", 0)], 9, out.append)
    assert out == [{("t", 0): E.INVALID_TXN_STATE}]   # not added, older Produce version
    txn.coordinator.verify_produce("tx", pid, epoch, [("t", 0)], 11, out.append)
    assert out[-1] == {("t", 0): E.TRANSACTION_ABORTABLE}
    txn.coordinator.verify_produce("tx", pid, epoch, [("t", 0)], 12, out.append)
    assert out[-1] == {("t", 0): E.NONE} and txn.state().partitions == {("t", 0)}
    txn.coordinator.verify_produce("tx", pid, epoch + 1, [("t", 0)], 9, out.append)
    assert out[-1] == {("t", 0): E.INVALID_PRODUCER_EPOCH}


def test_replay_restores_the_state_and_finishes_prepared_transactions(txn):
    _, pid, epoch = txn.init()
    txn.add("tx", pid, epoch, ("t", 0))
    txn.log.auto = False
    txn.coordinator.end_transaction("tx", pid, epoch, True, 0, lambda *a: None)
    txn.log.complete(1)   # PrepareCommit stored, CompleteCommit never
    partition = txn.coordinator.partition_for("tx")
    records = txn.log.records(partition)
    restarted = txn.make()
    txn.markers.markers.clear()
    restarted.runtime.begin_loading(partition)
    assert restarted.init_producer_id("tx", 1000, None, lambda *a: None) is None
    restarted.runtime.load(partition, records)
    restarted.runtime.finish_loading(partition)
    md = restarted.shard_for("tx").transactions["tx"]
    assert md.state is S.PREPARE_COMMIT and md.partitions == {("t", 0)}
    txn.log.auto = True
    txn.advance(1)
    assert txn.markers.markers == [(pid, epoch, True, (("t", 0),))]
    assert md.state is S.COMPLETE_COMMIT
    assert restarted.max_producer_id() == pid


def test_transactional_offsets_become_visible_on_commit_only(txn):
    _, pid, epoch = txn.init()
    group = "g"
    offsets_partition = txn.groups.partition_for(group)
    assert txn.add("tx", pid, epoch, ("__consumer_offsets", offsets_partition)) == E.NONE
    request = m.TxnOffsetCommitRequest(transactional_id="tx", group_id=group, producer_id=pid,
                                       producer_epoch=epoch, generation_id=-1, member_id="")
    results = []
    txn.groups.txn_offset_commit(request, 3, [("t", 0, 42, -1, "", None)], results.append)
    assert results == [{("t", 0): E.NONE}]
    shard = txn.groups.shard_for(group)
    assert shard.offsets.fetch(group, [("t", [0])], False) == [("t", [(0, -1, -1, "", E.NONE)])]
    assert shard.offsets.fetch(group, [("t", [0])], True)[0][1][0][4] == E.UNSTABLE_OFFSET_COMMIT
    assert txn.end("tx", pid, epoch, True)[0] == E.NONE
    assert txn.markers.group_markers == [(offsets_partition, pid, epoch, True)]
    assert shard.offsets.fetch(group, [("t", [0])], True) == [("t", [(0, 42, -1, "", E.NONE)])]


def test_aborted_offsets_are_dropped_and_replay_agrees(txn):
    group = "g"
    shard = txn.groups.shard_for(group)
    _, pid, epoch = txn.init()
    txn.add("tx", pid, epoch, ("__consumer_offsets", shard.partition))
    request = m.TxnOffsetCommitRequest(transactional_id="tx", group_id=group, producer_id=pid,
                                       producer_epoch=epoch, generation_id=-1, member_id="")
    txn.groups.txn_offset_commit(request, 3, [("t", 0, 7, -1, "", None)], lambda r: None)
    txn.end("tx", pid, epoch, False)
    assert shard.offsets.fetch(group, [("t", [0])], True) == [("t", [(0, -1, -1, "", E.NONE)])]
    # the same story replayed from the log: pending, then dropped by the ABORT marker
    replayed = GroupCoordinator({}, txn.clock, txn.timer)
    record = rec.offset_commit_record(group, "t", 0, OffsetAndMetadata(7, -1, "", 1, None))
    p = replayed.partition_for(group)
    replayed.runtime.begin_loading(p)
    replayed.runtime.load(p, [(record[0], record[1], pid), EndMarker(pid, epoch, False)])
    replayed.runtime.finish_loading(p)
    assert replayed.shard_for(group).offsets.fetch(group, [("t", [0])], True) == \
        [("t", [(0, -1, -1, "", E.NONE)])]


def test_describe_and_list(txn):
    _, pid, epoch = txn.init()
    txn.add("tx", pid, epoch, ("t", 0), ("t", 1))
    txn.init("other")
    d = txn.coordinator.describe("tx")
    assert (d.error_code, d.transaction_state, d.producer_id) == (0, "Ongoing", pid)
    assert [(t.topic, sorted(t.partitions)) for t in d.topics] == [("t", [0, 1])]
    assert txn.coordinator.describe("nope").error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    error, unknown, rows = txn.coordinator.list_transactions([], ["Ongoing", "Bogus"])
    assert (error, unknown, [r[0] for r in rows]) == (E.NONE, ["Bogus"], ["tx"])
    error, _, rows = txn.coordinator.list_transactions([], [], -1, "oth.*")
    assert [r[0] for r in rows] == ["other"]


def test_idle_transactional_ids_expire_with_a_tombstone():
    txn = Txn({"transactional.id.expiration.ms": 60_000,
               "transaction.remove.expired.transaction.cleanup.interval.ms": 10_000})
    _, pid, epoch = txn.init("idle")
    _, other, _ = txn.init("busy", timeout=900_000)
    txn.add("busy", other, 0, ("t", 0))          # Ongoing: never expires
    txn.advance(50_000)
    assert txn.coordinator.describe("idle").error_code == E.NONE
    txn.advance(20_000)                          # past 60 s idle, at a sweep
    assert txn.coordinator.describe("idle").error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    assert txn.coordinator.describe("busy").transaction_state == "Ongoing"
    partition = txn.coordinator.partition_for("idle")
    assert txn.log.records(partition)[-1][1] is None   # the tombstone
    # the id starts over with a new producer id
    assert txn.init("idle")[1] not in (pid, other)
