"""The one write path (common/runtime.py CoordinatorShard.append): a CoordinatorResult's
response reaches the caller only once its records are stored and applied, and a failed write
answers each API's error answer with nothing applied."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode, KafkaError

from broker.coordinator.common.result import CoordinatorResult
from broker.coordinator.common.runtime import CoordinatorShard

from tests.coordinator.harness import Harness, commit_errors, committed
from tests.coordinator.group.consumer.test_migration import Classic, classic_pair
from tests.coordinator.group.consumer.test_migration import harness as migration_harness
from tests.coordinator.group.test_offsets import MINUTE
from tests.coordinator.group.classic.test_scenarios import form
from tests.coordinator.group.share.test_share_groups import ShareHarness
from tests.coordinator.group.streams.test_streams_groups import StreamsHarness
from tests.coordinator.transaction.test_transaction_coordinator import Txn

E = ErrorCode


class RecordingShard(CoordinatorShard):
    def __init__(self, log) -> None:
        super().__init__(0, lambda: 0, log.persist)
        self.applied: list = []

    def replay(self, key, value, replay, producer_id=-1) -> None:
        self.applied.append((key, value))


def test_the_response_goes_out_once_the_records_are_stored_and_applied():
    h = Harness()
    h.log.auto = False
    shard = RecordingShard(h.log)
    events: list = []
    result = CoordinatorResult([(b"k", b"v")], "answer",
                               append_future=lambda exc: events.append(("future", exc)))
    shard.append(result, lambda r: events.append(("respond", r, list(shard.applied))),
                 lambda exc, r: ("failed", r))
    assert events == [] and shard.applied == []
    h.log.complete()
    assert events == [("future", None), ("respond", "answer", [(b"k", b"v")])]


def test_an_answer_that_raises_after_the_write_is_logged_not_taken_for_a_failed_write():
    """The records were stored and applied; a bug in the answer is logged as such (it used to
    vanish: the exception left through persist, whose caller took it for a refused write and
    found the write already done)."""
    from structlog.testing import capture_logs
    h = Harness()
    shard = RecordingShard(h.log)

    def respond(answer):
        raise ValueError("bad answer")
    with capture_logs() as logs:
        shard.append(CoordinatorResult([(b"k", b"v")], "answer"), respond,
                     lambda exc, r: ("failed", r))
    assert shard.applied == [(b"k", b"v")]
    events = [(e["event"], e["log_level"]) for e in logs]
    assert ("completing a stored coordinator write failed", "error") in events
    assert ("coordinator write failed", "warning") not in events


def test_a_failed_write_applies_nothing_and_answers_the_error_answer():
    h = Harness()
    h.log.auto = False
    shard = RecordingShard(h.log)
    events: list = []
    failure = RuntimeError("disk full")
    shard.append(CoordinatorResult([(b"k", b"v")], "answer",
                                   append_future=lambda exc: events.append(("future", exc))),
                 lambda r: events.append(("respond", r)),
                 lambda exc, r: ("failed", exc, r))
    h.log.complete(error=failure)
    assert shard.applied == []
    assert events == [("future", failure), ("respond", ("failed", failure, "answer"))]


def test_no_records_are_answered_at_once_without_a_write():
    h = Harness()
    shard = RecordingShard(h.log)
    out: list = []
    shard.append(CoordinatorResult([], "answer"), out.append, lambda exc, r: "failed")
    assert out == ["answer"] and h.log.writes == 0


def test_txn_offset_commit_failure_keeps_the_refused_partitions_errors():
    h = Harness()
    request = m.TxnOffsetCommitRequest(transactional_id="tx", group_id="g", producer_id=7,
                                       producer_epoch=0, generation_id=-1, member_id="")
    h.log.fail_with = KafkaError(E.NOT_LEADER_OR_FOLLOWER)
    results: list = []
    h.coordinator.txn_offset_commit(request, 3, [
        ("t", 0, 1, -1, "", None), ("t", 1, 1, -1, "x" * 5000, None),
        ("t", 2, 1, -1, "", E.UNKNOWN_TOPIC_OR_PARTITION)], results.append)
    assert results == [{("t", 0): E.NOT_COORDINATOR, ("t", 1): E.OFFSET_METADATA_TOO_LARGE,
                        ("t", 2): E.UNKNOWN_TOPIC_OR_PARTITION}]
    h.log.fail_with = None
    shard = h.coordinator.shard_for("g")
    assert not shard.offsets.has_pending_transactional_offsets("g", ("t", 0))


def test_offset_commit_failure_keeps_the_refused_partitions_errors():
    h = Harness(known_topics={"t": 1})
    h.log.fail_with = RuntimeError("disk full")
    reply = h.commit("g", {("t", 0): 1, ("t", 5): 1})
    assert commit_errors(reply) == {("t", 0): E.COORDINATOR_NOT_AVAILABLE,
                                    ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION}


def test_failed_expiry_keeps_the_group_and_its_offsets_until_the_next_check():
    h = Harness({"offsets.retention.minutes": 10, "offsets.retention.check.interval.ms": MINUTE})
    ids, _ = form(h, 1, session=60_000)
    h.commit("g", {("t", 0): 1}, generation=1, member_id=ids[0])
    h.leave("g", ids[0])
    h.log.fail_with = RuntimeError("disk full")
    h.advance_to(10 * MINUTE)
    assert h.state("g") == "Empty"
    assert h.coordinator.stats.offsets_expired_total == 0
    h.log.fail_with = None
    assert committed(h.fetch("g", {"t": [0]})) == {("t", 0): 1}
    h.advance_to(30 * MINUTE)
    assert h.group("g") is None and h.coordinator.stats.offsets_expired_total == 1


def test_share_heartbeat_failure_answers_the_error_and_joins_nobody():
    h = ShareHarness()
    h.log.fail_with = RuntimeError("disk full")
    r = h.heartbeat("m1")
    assert (r.error_code, r.member_epoch) == (E.COORDINATOR_NOT_AVAILABLE, 0)
    assert h.describe("g")[0].error_code == E.GROUP_ID_NOT_FOUND
    h.log.fail_with = None
    r = h.heartbeat("m1")
    assert r.error_code == 0 and r.member_epoch > 0


def test_streams_heartbeat_failure_answers_the_error_and_creates_no_topics():
    h = StreamsHarness()
    h.topics.create("words", 2)
    h.log.fail_with = RuntimeError("disk full")
    r = h.heartbeat("m1")
    assert r.error_code == E.COORDINATOR_NOT_AVAILABLE and h.created == {}
    h.log.fail_with = None
    r = h.heartbeat("m1")
    assert r.error_code == 0 and h.created == {"app-rep": 2, "app-store-changelog": 2}


def test_end_txn_failure_answers_the_error_and_writes_no_marker():
    txn = Txn()
    _, pid, epoch = txn.init()
    assert txn.add("tx", pid, epoch, ("t", 0)) == E.NONE
    txn.log.fail_with = KafkaError(E.NOT_LEADER_OR_FOLLOWER)
    assert txn.end("tx", pid, epoch, True) == (E.NOT_COORDINATOR, -1, -1)
    assert txn.markers.markers == []
    assert txn.init("other") == (E.NOT_COORDINATOR, -1, -1)
    txn.log.fail_with = None
    assert not txn.state().pending_transition_in_progress
    assert txn.end("tx", pid, epoch, True)[0] == E.NONE
    assert txn.markers.markers == [(pid, epoch, True, (("t", 0),))]


def test_classic_members_of_a_consumer_group_get_the_error_of_a_failed_write():
    """The migration's JoinGroup and LeaveGroup (consumer/migration.py) on a failed write: the
    append error, the request's member id, no member in the answer; nothing changed."""
    h = migration_harness()
    a, b = classic_pair(h)
    h.heartbeat(member_id="c")
    epoch = h.group().group_epoch
    h.log.fail_with = KafkaError(E.NOT_LEADER_OR_FOLLOWER)
    left = b.leave()
    assert (left.value.error_code, left.value.members) == (E.NOT_COORDINATOR, [])
    newcomer = Classic(h)
    newcomer.member_id = "newcomer"
    joined = newcomer.join()
    assert (joined.error, joined.member_id) == (E.NOT_COORDINATOR, "newcomer")
    h.log.fail_with = None
    assert b.member_id in h.group().members and "newcomer" not in h.group().members
    assert h.group().group_epoch == epoch
    assert b.leave().value.members[0].error_code == 0
