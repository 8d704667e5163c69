"""The partition side of transactions, in process with an injected clock and a fake transaction
coordinator (``broker.transactions``): producer state rules, the last stable offset, markers,
the aborted index, transactional Produce, read_committed Fetch and ListOffsets,
DescribeProducers, and the state rebuilt when a partition log is reopened."""
from __future__ import annotations

import pytest

from broker.apis import describe_producers, fetch, list_offsets, produce
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.partitions.fetch_purgatory import FetchPurgatory
from broker.log import MemoryLog, SegmentLog
from broker.partitions.producer_state import ProducerStateTable
from broker.purgatory import Timer
from broker.topics import TopicManager
from broker.txn_markers import end_marker_batch, parse_end_marker, write_txn_markers
from protocol.errors import ErrorCode as E
from protocol.messages import DescribeProducersRequest as DP
from protocol.messages import FetchRequest as F
from protocol.messages import ListOffsetsRequest as L
from protocol.messages import ProduceRequest as P
from protocol.records import RecordBatch, build_batch, iter_batches

T0 = 1_700_000_000_000


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class FakeCoordinator:
    """``broker.transactions`` for these tests: records each verify_produce call and answers
    with the next scripted answer (a dict of codes, or one code for every partition), at once,
    or keeps ``done`` in ``held`` when ``hold`` is set."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.answers: list = []
        self.hold = False
        self.held: list = []

    def verify_produce(self, transactional_id, producer_id, producer_epoch, partitions,
                       produce_version, done) -> None:
        self.calls.append((transactional_id, producer_id, producer_epoch, list(partitions),
                           produce_version))
        if self.hold:
            self.held.append((list(partitions), done))
            return
        answer = self.answers.pop(0) if self.answers else E.NONE
        if not isinstance(answer, dict):
            answer = {key: answer for key in partitions}
        done(answer)


class Ctx:
    def __init__(self, version: int = 12, conn=None) -> None:
        self.api_version = version
        self.conn = conn if conn is not None else object()
        self.listener = None  # broker/network/request_channel.py Request.listener

    def park(self) -> None:
        """A long-poll Fetch parks its request (broker/network/request_channel.py Request.park)."""
        self.parked = True


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def broker(clock):
    b = Broker(BrokerConfig())
    b.clock = clock
    b.timer = Timer(clock)
    b.fetches = FetchPurgatory(b)
    b.transactions = FakeCoordinator()
    b.topics.create("t", 2)
    yield b
    b.topics.close()


def batch(pid, epoch, seq, *values, transactional=True, timestamp=T0):
    values = values or (b"v",)
    return build_batch([(None, v, (), timestamp + i) for i, v in enumerate(values)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=transactional)


def produce_request(parts, transactional_id="tx", acks=-1):
    """parts: [(topic, index, records)] -> a ProduceRequest."""
    topics = {}
    for topic, index, records in parts:
        topics.setdefault(topic, []).append(P.PartitionProduceData(index=index, records=records))
    return P(transactional_id=transactional_id, acks=acks, timeout_ms=1000, topic_data=[
        P.TopicProduceData(name=name, partition_data=data) for name, data in topics.items()])


def send(broker, parts, transactional_id="tx", version=12, ctx=None, acks=-1):
    """Produce; returns the list the answer lands in (empty while the request waits)."""
    out = []
    produce.handle(broker, ctx or Ctx(version), produce_request(parts, transactional_id, acks),
                   out.append)
    return out


def answer(out, topic_index=0, partition_index=0):
    [response] = out
    return response.responses[topic_index].partition_responses[partition_index]


def produce_one(broker, records, transactional_id="tx", version=12, partition=0):
    return answer(send(broker, [("t", partition, records)], transactional_id, version))


def fetch_request(offset, isolation, max_wait_ms=0, min_bytes=0, partition=0):
    return F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
             isolation_level=isolation, session_id=0, session_epoch=-1, topics=[
                 F.FetchTopic(topic="t", partitions=[F.FetchPartition(
                     partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)])])


def fetch_one(broker, offset, isolation, partition=0):
    out = []
    fetch.handle(broker, Ctx(), fetch_request(offset, isolation, partition=partition),
                 out.append)
    return out[0].responses[0].partitions[0]


def offsets_in(records):
    return [(b.base_offset, b.last_offset, b.is_control) for b in iter_batches(records)]


def list_offset(broker, timestamp, isolation, partition=0):
    out = []
    request = L(replica_id=-1, isolation_level=isolation, topics=[L.ListOffsetsTopic(
        name="t", partitions=[L.ListOffsetsPartition(partition_index=partition,
                                                     timestamp=timestamp)])])
    list_offsets.handle(broker, Ctx(7), request, out.append)
    p = out[0].topics[0].partitions[0]
    return p.error_code, p.timestamp, p.offset


def marker(broker, pid, epoch, commit, coordinator_epoch=0, partitions=(("t", 0),), **kw):
    return write_txn_markers(broker, pid, epoch, commit, coordinator_epoch, list(partitions),
                             **kw)


def partition(broker, index=0):
    return broker.topics.partition("t", index)


# --- producer state rules -------------------------------------------------------------------


def parsed(records):
    return RecordBatch(records)


def test_a_transaction_opens_only_with_the_verification_of_this_request():
    state = ProducerStateTable()
    first = parsed(batch(7, 0, 0))
    assert state.check(first) == (E.INVALID_TXN_STATE, None)
    code, guard = state.start_verification(7, 0, 0, supports_epoch_bump=True)
    assert code == E.NONE and guard is not None
    assert state.check(first, object()) == (E.INVALID_TXN_STATE, None)  # another request's
    assert state.check(first, guard) == (E.NONE, None)
    assert state.update(first, 10, T0) is True  # opened the transaction at offset 10
    assert state.first_unstable_offset() == 10 and not state.verifications
    # its next batches need no verification
    assert state.start_verification(7, 1, 0, True) == (E.NONE, None)
    assert state.check(parsed(batch(7, 0, 1))) == (E.NONE, None)


def test_producer_state_errors_follow_kafkas_order():
    state = ProducerStateTable()
    _, guard = state.start_verification(7, 0, 3, True)
    state.update(parsed(batch(7, 3, 0, b"a", b"b")), 0, T0)
    # a retry of the batch is a duplicate, answered with its offsets before anything else
    code, duplicate = state.check(parsed(batch(7, 3, 0, b"a", b"b")))
    assert code == E.NONE and (duplicate.first_offset, duplicate.last_offset) == (0, 1)
    assert state.check(parsed(batch(7, 2, 2))) == (E.INVALID_PRODUCER_EPOCH, None)
    assert state.start_verification(7, 2, 2, True) == (E.INVALID_PRODUCER_EPOCH, None)
    assert state.check(parsed(batch(7, 3, 5))) == (E.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    # a non-transactional write while the producer's transaction is open
    assert state.check(parsed(batch(7, 3, 2, transactional=False))) == (E.INVALID_TXN_STATE,
                                                                        None)


def test_with_epoch_bumps_a_fresh_producer_must_start_at_sequence_zero():
    state = ProducerStateTable()
    _, guard = state.start_verification(9, 4, 0, supports_epoch_bump=True)
    assert state.check(parsed(batch(9, 0, 4)), guard) == (E.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    # without epoch bumps (transaction version 1) any first sequence is taken
    state = ProducerStateTable()
    _, guard = state.start_verification(9, 4, 0, supports_epoch_bump=False)
    assert state.check(parsed(batch(9, 0, 4)), guard) == (E.NONE, None)


def test_a_marker_written_while_verifying_makes_the_verification_useless():
    """The race Kafka's verification guard closes: the coordinator aborts (transaction version
    1, same epoch) between starting a verification and the append."""
    state = ProducerStateTable()
    _, guard = state.start_verification(7, 0, 0, supports_epoch_bump=False)
    assert state.check_marker(7, 0, 0, transaction_version=1) == E.NONE
    assert state.complete(7, 0, 0, 5, T0) is None  # nothing was open here
    assert state.check(parsed(batch(7, 0, 0)), guard) == (E.INVALID_TXN_STATE, None)


def test_transaction_version_2_markers_carry_the_bumped_epoch():
    state = ProducerStateTable()
    _, guard = state.start_verification(7, 0, 5, True)
    state.update(parsed(batch(7, 5, 0, b"a", b"b")), 0, T0)
    # the transaction's own epoch is a late marker now
    assert state.check_marker(7, 5, 0, 2) == E.INVALID_PRODUCER_EPOCH
    assert state.check_marker(7, 4, 0, 2) == E.INVALID_PRODUCER_EPOCH
    assert state.check_marker(7, 6, 0, 2) == E.NONE
    assert state.complete(7, 6, 0, 2, T0 + 1) == (0, 3)
    entry = state.producers[7]
    assert (entry.epoch, entry.last_seq, entry.txn_first_offset) == (6, -1, -1)
    # the same marker again (a retry after a lost answer) is written, changing nothing
    assert state.check_marker(7, 6, 0, 2) == E.NONE
    # the next transaction starts at sequence 0 in the bumped epoch
    _, guard = state.start_verification(7, 3, 6, True)
    assert state.check(parsed(batch(7, 6, 3)), guard) == (E.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    _, guard = state.start_verification(7, 0, 6, True)
    assert state.check(parsed(batch(7, 6, 0)), guard) == (E.NONE, None)


def test_transaction_version_1_markers_carry_the_transactions_epoch():
    state = ProducerStateTable()
    _, guard = state.start_verification(7, 0, 5, False)
    state.update(parsed(batch(7, 5, 0, b"a", b"b")), 0, T0)
    assert state.check_marker(7, 4, 0, 1) == E.INVALID_PRODUCER_EPOCH
    assert state.check_marker(7, 5, 0, 1) == E.NONE
    state.complete(7, 5, 0, 2, T0)
    # sequences go on within the epoch
    _, guard = state.start_verification(7, 2, 5, False)
    assert state.check(parsed(batch(7, 5, 2)), guard) == (E.NONE, None)


def test_an_older_coordinator_epoch_is_fenced():
    state = ProducerStateTable()
    state.complete(7, 1, 4, 0, T0)
    assert state.check_marker(7, 2, 3, 2) == E.TRANSACTION_COORDINATOR_FENCED
    assert state.check_marker(7, 2, 4, 2) == E.NONE


def test_the_first_unstable_offset_is_the_oldest_open_transaction():
    state = ProducerStateTable()
    for pid, offset in ((1, 0), (2, 3), (3, 5)):
        _, guard = state.start_verification(pid, 0, 0, True)
        state.check(parsed(batch(pid, 0, 0)), guard)
        state.update(parsed(batch(pid, 0, 0)), offset, T0)
    assert state.first_unstable_offset() == 0
    assert state.complete(2, 1, 0, 6, T0) == (3, 0)  # a later one ends: the LSO stays at 0
    assert state.complete(1, 1, 0, 7, T0) == (0, 5)  # the oldest ends: up to producer 3's
    assert state.first_unstable_offset() == 5
    assert state.complete(3, 1, 0, 8, T0) == (5, 9)
    assert state.first_unstable_offset() is None


# --- markers --------------------------------------------------------------------------------


def test_the_marker_batch_is_kafkas_end_transaction_marker():
    records = end_marker_batch(7, 3, False, 11, T0)
    b = RecordBatch(records)
    assert (b.is_control, b.is_transactional, b.producer_id, b.producer_epoch,
            b.base_sequence, b.record_count, b.max_timestamp) == (True, True, 7, 3, -1, 1, T0)
    [record] = list(b.records())
    assert record.key == b"\x00\x00\x00\x00"  # version 0, type 0 = ABORT
    assert record.value == b"\x00\x00\x00\x00\x00\x0b"  # version 0, coordinator epoch 11
    assert parse_end_marker(RecordBatch(end_marker_batch(7, 3, True, 11, T0))) == (True, 11, T0)


def test_write_txn_markers_answers_an_error_code_per_partition(broker):
    assert produce_one(broker, batch(7, 0, 0, b"a", b"b")).error_code == E.NONE
    assert produce_one(broker, batch(7, 0, 0), partition=1).error_code == E.NONE
    assert partition(broker).last_stable_offset == 0
    results = marker(broker, 7, 0, True, 2, [("t", 0), ("gone", 0), ("t", 5)])
    assert results == {("t", 0): E.INVALID_PRODUCER_EPOCH,  # version 2: must be bumped
                       ("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
                       ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert marker(broker, 7, 1, True, 2, [("t", 0), ("t", 1)]) == {
        ("t", 0): E.NONE, ("t", 1): E.NONE}
    log = partition(broker).log
    assert log.log_end_offset == 3 and partition(broker).last_stable_offset == 3
    assert offsets_in(log.read(2, 1 << 20)) == [(2, 2, True)]
    assert marker(broker, 7, 2, False, 1) == {("t", 0): E.TRANSACTION_COORDINATOR_FENCED}
    assert log.log_end_offset == 3  # nothing written on an error
    # a deleted topic
    broker.delete_topic("t")
    assert marker(broker, 7, 2, True, 2) == {("t", 0): E.UNKNOWN_TOPIC_OR_PARTITION}


def test_markers_move_the_last_stable_offset_and_fill_the_aborted_index(broker):
    produce_one(broker, batch(1, 0, 0, b"a", b"b"))  # 0-1, producer 1
    produce_one(broker, batch(2, 0, 0), "other")  # 2, producer 2
    produce_one(broker, batch(-1, -1, -1, transactional=False), None)  # 3
    p = partition(broker)
    assert p.last_stable_offset == 0
    assert marker(broker, 2, 1, False) == {("t", 0): E.NONE}  # 4: aborts producer 2's
    assert p.last_stable_offset == 0  # producer 1's is still open
    assert list(p.log.txn_index) == [(2, 2, 4, 0)]
    assert marker(broker, 1, 1, False) == {("t", 0): E.NONE}  # 5
    assert p.last_stable_offset == 6
    assert list(p.log.txn_index) == [(2, 2, 4, 0), (1, 0, 5, 6)]


# --- Produce --------------------------------------------------------------------------------


def test_transactional_records_need_a_transactional_id(broker):
    out = send(broker, [("t", 0, batch(-1, -1, -1, transactional=False)),
                        ("t", 1, batch(7, 0, 0))], transactional_id=None)
    [response] = out
    parts = response.responses[0].partition_responses
    assert [(p.error_code, p.error_message, p.base_offset, p.log_start_offset)
            for p in parts] == [(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, -1, -1)] * 2
    assert partition(broker, 0).log.log_end_offset == 0  # the whole request failed
    assert broker.transactions.calls == []


def test_a_request_without_transactional_id_never_asks_the_coordinator(broker):
    p = answer(send(broker, [("t", 0, batch(5, 0, 0, transactional=False))], None))
    assert (p.error_code, p.base_offset) == (E.NONE, 0)
    assert broker.transactions.calls == []


def test_transactional_records_of_two_producers_fail_the_request(broker):
    out = send(broker, [("t", 0, batch(7, 0, 0)), ("t", 1, batch(8, 0, 0)),
                        ("nope", 0, batch(7, 0, 0))])
    [response] = out
    assert [(p.error_code, p.error_message) for r in response.responses
            for p in r.partition_responses] == [
        (E.INVALID_PRODUCER_ID_MAPPING,
         "Transactional records contained more than one producer ID")] * 3
    assert broker.transactions.calls == []


def test_only_partitions_not_yet_in_the_transaction_are_verified(broker):
    coordinator = broker.transactions
    out = send(broker, [("t", 0, batch(7, 0, 0)), ("t", 1, batch(7, 0, 0))], version=12)
    assert [p.error_code for p in out[0].responses[0].partition_responses] == [0, 0]
    assert coordinator.calls == [("tx", 7, 0, [("t", 0), ("t", 1)], 12)]
    send(broker, [("t", 0, batch(7, 0, 1)), ("t", 1, batch(7, 0, 1))])
    assert len(coordinator.calls) == 1
    # a partition the transaction has not touched yet is verified alone
    broker.topics.create("u", 1)
    send(broker, [("t", 0, batch(7, 0, 2)), ("u", 0, batch(7, 0, 0))])
    assert coordinator.calls[-1] == ("tx", 7, 0, [("u", 0)], 12)


@pytest.mark.parametrize("version,code,expected", [
    (12, E.INVALID_TXN_STATE, (E.INVALID_TXN_STATE, "Partition was not added to the transaction")),
    (12, E.NOT_COORDINATOR, (E.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been "
                             "added to the transaction. Underlying error: NOT_COORDINATOR")),
    (11, E.COORDINATOR_LOAD_IN_PROGRESS, (
        E.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been added to the "
        "transaction. Underlying error: COORDINATOR_LOAD_IN_PROGRESS")),
    (11, E.CONCURRENT_TRANSACTIONS, (
        E.NOT_ENOUGH_REPLICAS, "Unable to verify the partition has been added to the "
        "transaction. Underlying error: CONCURRENT_TRANSACTIONS")),
    (12, E.PRODUCER_FENCED, (E.PRODUCER_FENCED, None)),
])
def test_verification_errors_are_answered_as_kafka_translates_them(broker, version, code,
                                                                   expected):
    broker.transactions.answers = [code]
    p = produce_one(broker, batch(7, 0, 0), version=version)
    assert (p.error_code, p.error_message) == expected
    assert (p.base_offset, p.log_start_offset) == (-1, -1)
    assert partition(broker).log.log_end_offset == 0


def test_without_a_coordinator_the_produce_is_refused_retriably(broker):
    broker.transactions = None
    p = produce_one(broker, batch(7, 0, 0))
    assert p.error_code == E.NOT_ENOUGH_REPLICAS
    assert p.error_message.endswith("Underlying error: COORDINATOR_NOT_AVAILABLE")


def test_version_12_retries_concurrent_transactions_for_a_while(broker, clock):
    coordinator = broker.transactions
    coordinator.answers = [E.CONCURRENT_TRANSACTIONS, E.CONCURRENT_TRANSACTIONS]
    out = send(broker, [("t", 0, batch(7, 0, 0))])
    assert out == [] and len(coordinator.calls) == 1
    clock.now += 20
    broker.timer.advance(clock.now)
    assert out == [] and len(coordinator.calls) == 2
    clock.now += 20
    broker.timer.advance(clock.now)
    assert answer(out).error_code == E.NONE and len(coordinator.calls) == 3
    # past add.partitions.to.txn.retry.backoff.max.ms (100 ms) the error is the answer
    coordinator.answers = [E.CONCURRENT_TRANSACTIONS] * 10
    out = send(broker, [("t", 1, batch(7, 0, 0))])
    for _ in range(6):
        clock.now += 20
        broker.timer.advance(clock.now)
    assert (answer(out).error_code, answer(out).error_message) == (E.CONCURRENT_TRANSACTIONS,
                                                                   None)
    assert len(coordinator.calls) == 3 + 6


def test_a_late_verification_answers_then_later_requests_on_the_connection(broker):
    coordinator = broker.transactions
    coordinator.hold = True
    conn = object()
    first = send(broker, [("t", 0, batch(7, 0, 0, b"a"))], ctx=Ctx(12, conn))
    second = send(broker, [("t", 0, batch(7, 0, 1, b"b"))], ctx=Ctx(12, conn))
    plain = send(broker, [("t", 1, batch(-1, -1, -1, transactional=False))], None,
                 ctx=Ctx(12, conn))
    other = send(broker, [("t", 1, batch(-1, -1, -1, transactional=False))], None)
    assert first == [] and second == [] and plain == []  # in line behind the first
    assert answer(other).base_offset == 0  # another connection is not held up
    [(keys, done)] = coordinator.held
    done({("t", 0): E.NONE})
    assert [answer(first).base_offset, answer(second).base_offset,
            answer(plain).base_offset] == [0, 1, 1]
    assert len(coordinator.calls) == 1  # the second found the transaction open
    assert produce._WAITING == {}


def test_a_verification_overtaken_by_an_abort_is_refused(broker):
    """Transaction version 1: the coordinator aborts (same epoch) while the partition's
    verification is on its way; its late NONE must not open a transaction."""
    coordinator = broker.transactions
    coordinator.hold = True
    out = send(broker, [("t", 0, batch(7, 0, 0))], version=11)
    assert marker(broker, 7, 0, False, transaction_version=1) == {("t", 0): E.NONE}
    coordinator.held[0][1]({("t", 0): E.NONE})
    p = answer(out)
    assert (p.error_code, p.error_message, p.log_start_offset) == (E.INVALID_TXN_STATE, None, 0)


def test_per_partition_checks(broker):
    two = batch(-1, -1, -1, transactional=False) + batch(-1, -1, -1, transactional=False)
    no_sequence = batch(7, 0, -1, transactional=False)
    out = send(broker, [("t", 0, two), ("t", 1, no_sequence)], None)
    assert [(p.error_code, p.error_message) for p in out[0].responses[0].partition_responses] \
        == [(E.INVALID_RECORD, None)] * 2
    # a control batch is transactional: without a transactional id the request fails whole
    control = end_marker_batch(7, 0, True, 0, T0)
    assert produce_one(broker, control, None).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    p = produce_one(broker, control, "tx")
    assert (p.error_code, p.error_message) == (E.INVALID_RECORD, None)
    assert broker.transactions.calls == []
    assert partition(broker).log.log_end_offset == 0


def test_an_open_transaction_refuses_non_transactional_writes_of_its_producer(broker):
    produce_one(broker, batch(7, 0, 0))
    p = answer(send(broker, [("t", 0, batch(7, 0, 1, transactional=False))], None))
    assert (p.error_code, p.error_message, p.base_offset, p.log_start_offset) == (
        E.INVALID_TXN_STATE, None, -1, 0)


def test_a_duplicate_is_answered_with_its_offset_and_recorded_timestamp(broker):
    produce_one(broker, batch(-1, -1, -1, transactional=False), None)
    first = produce_one(broker, batch(7, 0, 0, b"a", b"b", timestamp=T0 + 50))
    again = produce_one(broker, batch(7, 0, 0, b"a", b"b", timestamp=T0 + 50))
    assert (first.base_offset, again.base_offset, again.log_append_time_ms) == (1, 1, T0 + 51)
    assert partition(broker).log.log_end_offset == 3


# --- Fetch ----------------------------------------------------------------------------------


def test_read_committed_stops_at_the_last_stable_offset(broker):
    produce_one(broker, batch(-1, -1, -1, b"x", transactional=False), None)  # 0
    produce_one(broker, batch(7, 0, 0, b"a", b"b"))  # 1-2
    produce_one(broker, batch(-1, -1, -1, b"y", transactional=False), None)  # 3
    committed = fetch_one(broker, 0, 1)
    assert (committed.high_watermark, committed.last_stable_offset) == (4, 1)
    assert offsets_in(committed.records) == [(0, 0, False)]
    assert committed.aborted_transactions == []
    uncommitted = fetch_one(broker, 0, 0)
    assert uncommitted.last_stable_offset == 1 and uncommitted.aborted_transactions is None
    assert len(offsets_in(uncommitted.records)) == 3
    at_lso = fetch_one(broker, 1, 1)
    assert at_lso.records == b"" and at_lso.aborted_transactions == []
    assert fetch_one(broker, 3, 1).records == b""  # above the LSO, below the high watermark
    assert fetch_one(broker, 5, 1).error_code == E.OFFSET_OUT_OF_RANGE


def test_read_committed_gets_the_aborted_transactions_of_what_it_read(broker):
    produce_one(broker, batch(7, 0, 0, b"a", b"b"))  # 0-1
    produce_one(broker, batch(8, 0, 0), "other")  # 2
    marker(broker, 7, 1, False)  # 3: abort producer 7's
    marker(broker, 8, 1, True)  # 4: commit producer 8's
    produce_one(broker, batch(7, 1, 0))  # 5: producer 7's next transaction
    p = fetch_one(broker, 0, 1)
    assert p.last_stable_offset == 5
    assert offsets_in(p.records) == [(0, 1, False), (2, 2, False), (3, 3, True), (4, 4, True)]
    assert [(t.producer_id, t.first_offset) for t in p.aborted_transactions] == [(7, 0)]
    # a fetch past the aborted transaction's marker does not get it
    assert fetch_one(broker, 4, 1).aborted_transactions == []
    marker(broker, 7, 2, False)  # 6
    assert [(t.producer_id, t.first_offset) for t in fetch_one(broker, 4, 1)
            .aborted_transactions] == [(7, 5)]


def test_a_waiting_read_committed_fetch_wakes_when_the_marker_moves_the_lso(broker, clock):
    produce_one(broker, batch(7, 0, 0, b"a"))
    out = []
    fetch.handle(broker, Ctx(), fetch_request(0, 1, max_wait_ms=500, min_bytes=1), out.append)
    assert out == []
    produce_one(broker, batch(7, 0, 1, b"b"))  # more undecided data: still nothing to read
    assert out == []
    marker(broker, 7, 1, True)
    [response] = out
    p = response.responses[0].partitions[0]
    assert p.last_stable_offset == 3
    assert offsets_in(p.records) == [(0, 0, False), (1, 1, False), (2, 2, True)]


# --- ListOffsets and DescribeProducers ------------------------------------------------------


def test_list_offsets_read_committed_answers_the_last_stable_offset(broker):
    produce_one(broker, batch(-1, -1, -1, b"x", transactional=False, timestamp=T0), None)
    produce_one(broker, batch(7, 0, 0, b"a", timestamp=T0 + 100))
    assert list_offset(broker, -1, 1) == (E.NONE, -1, 1)
    assert list_offset(broker, -1, 0) == (E.NONE, -1, 2)
    assert list_offset(broker, -2, 1) == (E.NONE, -1, 0)
    # a timestamp found at or above the LSO is not there for read_committed
    assert list_offset(broker, T0 + 50, 1) == (E.NONE, -1, -1)
    assert list_offset(broker, T0 + 50, 0) == (E.NONE, T0 + 100, 1)
    assert list_offset(broker, T0, 1) == (E.NONE, T0, 0)
    assert list_offset(broker, -3, 1) == (E.NONE, -1, -1)  # max timestamp: offset 1
    marker(broker, 7, 1, True)
    assert list_offset(broker, T0 + 50, 1) == (E.NONE, T0 + 100, 1)
    assert list_offset(broker, -1, 1) == (E.NONE, -1, 3)


def test_describe_producers_shows_the_open_transaction(broker, clock):
    produce_one(broker, batch(-1, -1, -1, transactional=False), None)
    produce_one(broker, batch(7, 0, 0, b"a", b"b", timestamp=T0 + 5))
    out = []
    request = DP(topics=[DP.TopicRequest(name="t", partition_indexes=[0])])
    describe_producers.handle(broker, Ctx(0), request, out.append)
    [state] = out[0].topics[0].partitions[0].active_producers
    assert (state.producer_id, state.producer_epoch, state.last_sequence, state.last_timestamp,
            state.coordinator_epoch, state.current_txn_start_offset) == (7, 0, 1, T0 + 6, -1, 1)
    clock.now = T0 + 99
    marker(broker, 7, 1, False, coordinator_epoch=3)
    out = []
    describe_producers.handle(broker, Ctx(0), request, out.append)
    [state] = out[0].topics[0].partitions[0].active_producers
    assert (state.producer_epoch, state.last_sequence, state.last_timestamp,
            state.coordinator_epoch, state.current_txn_start_offset) == (1, -1, T0 + 99, 3, -1)


# --- reopening ------------------------------------------------------------------------------


def write_history(broker):
    """Two producers: 7 commits, 8 aborts, 9 stays open; the last stable offset ends at 9's."""
    produce_one(broker, batch(7, 0, 0, b"a", b"b"))  # 0-1
    produce_one(broker, batch(8, 0, 0), "eight")  # 2
    marker(broker, 7, 1, True, coordinator_epoch=2)  # 3
    produce_one(broker, batch(9, 0, 0), "nine")  # 4
    produce_one(broker, batch(8, 0, 1), "eight")  # 5
    marker(broker, 8, 1, False, coordinator_epoch=2)  # 6
    produce_one(broker, batch(-1, -1, -1, transactional=False), None)  # 7


def snapshot(p):
    producers = {pid: (e.epoch, e.last_seq, e.coordinator_epoch, e.txn_first_offset)
                 for pid, e in p.producers.producers.items()}
    return producers, dict(p.producers.ongoing), list(p.log.txn_index), p.last_stable_offset


def test_a_reopened_data_dir_rebuilds_producers_open_transactions_lso_and_aborted_index(
        tmp_path, clock):
    config = BrokerConfig()
    b = Broker(config)
    b.clock = clock
    b.transactions = FakeCoordinator()
    b.topics = TopicManager(config, str(tmp_path))
    b.topics.create("t", 1)
    write_history(b)
    before = snapshot(partition(b))
    assert before == ({7: (1, -1, 2, -1), 8: (1, -1, 2, -1), 9: (0, 0, -1, 4)}, {4: 9},
                      [(8, 2, 6, 4)], 4)
    b.topics.close()
    reopened = TopicManager(config, str(tmp_path))
    reopened.load()
    assert snapshot(reopened.partition("t", 0)) == before
    reopened.close()


def test_after_a_kill_the_open_transaction_stays_above_the_lso_until_aborted(tmp_path, clock):
    """No clean close (as after kill -9): the segment is recovered and replayed."""
    config = BrokerConfig()
    b = Broker(config)
    b.clock = clock
    b.transactions = FakeCoordinator()
    b.topics = TopicManager(config, str(tmp_path))
    b.topics.create("t", 1)
    produce_one(b, batch(9, 0, 0, b"a", b"b"))
    produce_one(b, batch(-1, -1, -1, transactional=False), None)
    crashed = TopicManager(config, str(tmp_path))
    crashed.load()
    b.topics = crashed
    p = partition(b)
    assert p.last_stable_offset == 0 and p.log.log_end_offset == 3
    assert fetch_one(b, 0, 1).records == b""
    assert marker(b, 9, 1, False) == {("t", 0): E.NONE}
    got = fetch_one(b, 0, 1)
    assert got.last_stable_offset == 4
    assert [(t.producer_id, t.first_offset) for t in got.aborted_transactions] == [(9, 0)]
    crashed.close()


def test_rebuilding_from_an_in_memory_log_gives_the_same_state(broker):
    write_history(broker)
    p = partition(broker)
    before = snapshot(p)
    copy = MemoryLog()
    copy.append(bytes(p.log.read(0, 1 << 20)))
    state = ProducerStateTable()
    state.rebuild(copy)
    assert ({pid: (e.epoch, e.last_seq, e.coordinator_epoch, e.txn_first_offset)
             for pid, e in state.producers.items()}, dict(state.ongoing), list(copy.txn_index),
            copy.last_stable_offset) == before


def test_rebuild_after_delete_records_keeps_only_what_is_left(tmp_path, clock):
    log = SegmentLog(tmp_path / "t-0", clock=clock)
    state = ProducerStateTable()
    for records in (batch(8, 0, 0), end_marker_batch(8, 1, False, 0, T0),
                    batch(-1, -1, -1, transactional=False)):
        log.append(records)
    state.rebuild(log)
    assert list(log.txn_index) == [(8, 0, 1, 2)]
    log.delete_records_before(2)
    assert list(log.txn_index) == []
    state.rebuild(log)
    assert list(log.txn_index) == [] and state.producers == {}
    log.close()


def test_a_coordinators_transactional_batch_opens_its_transaction_on_the_partition(broker):
    """A transactional offset commit the group coordinator writes into __consumer_offsets: the
    partition's last stable offset and aborted index follow it like a producer's batch."""
    produce_one(broker, batch(-1, -1, -1, transactional=False), None)  # 0
    p = partition(broker)
    first = p.append_from_coordinator(build_batch([(b"k", b"v")], producer_id=7,
                                                  producer_epoch=0, is_transactional=True))
    assert first == 1 and p.last_stable_offset == 1
    assert marker(broker, 7, 1, False) == {("t", 0): E.NONE}
    assert p.last_stable_offset == 3 and list(p.log.txn_index) == [(7, 1, 2, 3)]


def test_requests_queued_behind_a_closed_connection_are_dropped(broker):
    class Conn:
        closed = False

    conn = Conn()
    coordinator = broker.transactions
    coordinator.hold = True
    first = send(broker, [("t", 0, batch(7, 0, 0))], ctx=Ctx(12, conn))
    second = send(broker, [("t", 1, batch(-1, -1, -1, transactional=False))], None,
                  ctx=Ctx(12, conn))
    conn.closed = True
    coordinator.held[0][1]({("t", 0): E.NONE})
    assert answer(first).error_code == E.NONE and second == []
    assert partition(broker, 1).log.log_end_offset == 0 and produce._WAITING == {}


# --- a real broker process: kill -9 with a transaction open ---------------------------------

OPEN_TRANSACTION_PRODUCER = r"""
import sys, time
import confluent_kafka
p = confluent_kafka.Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2],
                              "transaction.timeout.ms": 6000, "linger.ms": 0})
p.init_transactions(20)
p.begin_transaction()
for i in range(2):
    p.produce(sys.argv[3], b"committed-%d" % i, partition=0)
p.commit_transaction(20)
p.begin_transaction()
for i in range(3):
    p.produce(sys.argv[3], b"open-%d" % i, partition=0)
p.flush(20)
print("open", flush=True)
time.sleep(120)
"""


def test_after_kill_9_an_open_transaction_stays_above_the_lso_until_it_times_out(tmp_path):
    import subprocess
    import sys
    import time

    from protocol.messages import CreateTopicsRequest as C
    from tests.support import BrokerProcess, RawClient

    settings = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 200}
    first = BrokerProcess(data_dir=str(tmp_path), overrides=settings)
    first.start()
    client = RawClient(first.port)
    client.call(C(topics=[C.CreatableTopic(name="k9", num_partitions=1, replication_factor=1)],
                  timeout_ms=5000), 7)
    client.close()
    producer = subprocess.Popen([sys.executable, "-c", OPEN_TRANSACTION_PRODUCER,
                                 first.bootstrap, "k9-txn", "k9"], stdout=subprocess.PIPE,
                                text=True)
    try:
        assert producer.stdout.readline().strip() == "open"
        first.kill()
    finally:
        producer.kill()
        producer.wait()
    again = BrokerProcess(data_dir=str(tmp_path), overrides=settings, port=first.port)
    again.start()
    try:
        client = RawClient(again.port)

        def fetched(isolation):
            request = fetch_request(0, isolation)
            request.topics[0].topic = "k9"
            p = client.call(request, 11).responses[0].partitions[0]
            records = [(r.offset, "marker" if b.is_control else r.value)
                       for b in iter_batches(p.records) for r in b.records()]
            return p.last_stable_offset, p.aborted_transactions, records

        def latest(isolation):
            request = L(replica_id=-1, isolation_level=isolation, topics=[L.ListOffsetsTopic(
                name="k9", partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
            return client.call(request, 5).topics[0].partitions[0].offset

        committed = [(0, b"committed-0"), (1, b"committed-1"), (2, "marker")]
        lso, aborted, records = fetched(1)
        assert (lso, aborted, records, latest(1), latest(0)) == (3, [], committed, 3, 6)
        deadline = time.monotonic() + 30
        while latest(1) == 3 and time.monotonic() < deadline:
            time.sleep(0.2)  # the coordinator aborts the transaction once it times out
        lso, aborted, records = fetched(1)
        assert (lso, records) == (7, committed + [(3, b"open-0"), (4, b"open-1"),
                                                  (5, b"open-2"), (6, "marker")])
        [txn] = aborted
        assert txn.first_offset == 3
        client.close()
    finally:
        again.stop()
