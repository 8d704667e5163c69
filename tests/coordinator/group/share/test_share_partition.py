"""The share-partition state machine (broker/coordinator/group/share/partition.py) on a fake clock:
acquire, each acknowledgement type, lock expiry, the delivery limit, gaps, the in-flight limit,
skipped (control or aborted) batches, and what must never happen: a record acquired by two
members at once, or delivered again once accepted or rejected."""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode

from broker.coordinator.group.share.partition import (
    ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, AcknowledgeError, AcknowledgeType as A,
    LogBatch, SharePartition)

E = ErrorCode


def batches(*ranges, skip=()):
    return [LogBatch(first, last, (first, last) in skip) for first, last in ranges]


def fresh(**kw) -> SharePartition:
    sp = SharePartition(**kw)
    sp.initialize(0)
    return sp


def test_acquire_new_records_then_nothing_more_for_anyone():
    sp = fresh()
    assert sp.acquire("a", batches((0, 4), (5, 9)), now=0, max_records=500) == [(0, 9, 1)]
    assert sp.next_offset == 10 and sp.fetch_offset() == 10
    # the same batches read again yield nothing: every record is locked by "a"
    assert sp.acquire("b", batches((0, 4), (5, 9)), now=1, max_records=500) == []
    assert all(state is ACQUIRED and member == "a" for _o, state, _c, member, _d in
               sp.in_flight())


def test_max_records_batch_optimized_and_record_limit():
    sp = fresh()
    # batch-optimized: a batch is finished even past max_records, the next one is not started
    assert sp.acquire("a", batches((0, 4), (5, 9)), 0, max_records=3) == [(0, 4, 1)]
    assert sp.acquire("b", batches((5, 9)), 0, max_records=2, record_limit=True) == [(5, 6, 1)]
    assert sp.fetch_offset() == 7 and sp.next_offset == 7


def test_accept_moves_the_start_offset_and_is_final():
    sp = fresh()
    sp.acquire("a", batches((0, 9)), 0, 500)
    sp.acknowledge("a", [(0, 4, [A.ACCEPT])], now=1)
    assert sp.start_offset == 5
    sp.expire_locks(10**9)                     # expiry releases only what is still acquired
    assert sp.acquire("b", batches((0, 9)), 2, 500) == [(5, 9, 2)]
    assert sp.state_of(3) is None and sp.start_offset == 5


def test_release_redelivers_with_a_higher_delivery_count():
    sp = fresh()
    sp.acquire("a", batches((0, 3)), 0, 500)
    sp.acknowledge("a", [(0, 3, [A.ACCEPT, A.RELEASE, A.ACCEPT, A.RELEASE])], now=1)
    assert sp.start_offset == 1 and sp.fetch_offset() == 1
    assert sp.acquire("b", batches((0, 3)), 2, 500) == [(1, 1, 2), (3, 3, 2)]


def test_reject_and_gap_archive_for_good():
    sp = fresh()
    sp.acquire("a", batches((0, 3)), 0, 500)
    sp.acknowledge("a", [(0, 1, [A.REJECT]), (2, 2, [A.GAP]), (3, 3, [A.RELEASE])], now=1)
    assert [s for _o, s, *_ in sp.in_flight()] == [AVAILABLE]
    assert sp.start_offset == 3
    assert sp.acquire("a", batches((0, 3)), 2, 500) == [(3, 3, 2)]


def test_acknowledge_errors_change_nothing():
    sp = fresh()
    sp.acquire("a", batches((0, 4)), 0, 500)
    before = sp.in_flight()
    with pytest.raises(AcknowledgeError) as err:
        sp.acknowledge("b", [(0, 1, [A.ACCEPT])], now=1)
    assert (err.value.code, err.value.message) == (E.INVALID_RECORD_STATE,
                                                   "Member is not the owner of offset")
    with pytest.raises(AcknowledgeError) as err:   # the first batch is valid, the second not
        sp.acknowledge("a", [(0, 1, [A.ACCEPT]), (3, 7, [A.ACCEPT])], now=1)
    assert err.value.code == E.INVALID_REQUEST
    assert sp.in_flight() == before
    sp.acknowledge("a", [(0, 0, [A.ACCEPT])], now=1)
    with pytest.raises(AcknowledgeError) as err:   # twice
        sp.acknowledge("a", [(1, 1, [A.ACCEPT]), (1, 1, [A.ACCEPT])], now=1)
    assert err.value.code == E.INVALID_REQUEST
    sp.acknowledge("a", [(2, 2, [A.ACCEPT])], now=1)
    with pytest.raises(AcknowledgeError) as err:   # already accepted
        sp.acknowledge("a", [(2, 2, [A.ACCEPT])], now=1)
    assert err.value.code == E.INVALID_RECORD_STATE
    assert sp.state_of(1) is ACQUIRED


def test_lock_expiry_releases_to_others_and_renew_extends_it():
    sp = fresh(lock_duration_ms=30_000)
    sp.acquire("a", batches((0, 4)), now=1000, max_records=500)
    assert sp.next_deadline() == 31_000
    sp.acknowledge("a", [(0, 1, [A.RENEW])], now=20_000)
    assert sp.expire_locks(30_999) == 0
    assert sp.expire_locks(31_000) == 3             # 2, 3, 4; 0 and 1 were renewed
    assert sp.next_deadline() == 50_000
    assert sp.acquire("b", batches((0, 4)), 31_001, 500) == [(2, 4, 2)]
    with pytest.raises(AcknowledgeError):           # a's lock on 2-4 is gone
        sp.acknowledge("a", [(2, 4, [A.ACCEPT])], now=31_002)
    assert sp.expire_locks(50_000) == 2 and sp.state_of(0) is AVAILABLE


def test_delivery_count_limit_archives():
    sp = fresh(delivery_count_limit=3)
    for delivery in (1, 2, 3):
        assert sp.acquire("a", batches((0, 0)), delivery, 500) == [(0, 0, delivery)]
        sp.acknowledge("a", [(0, 0, [A.RELEASE])], now=delivery)
    assert sp.state_of(0) is None and sp.start_offset == 1   # archived, start moved past
    assert list(sp.archived) == [(0, 3, "delivery limit")]
    assert sp.acquire("a", batches((0, 0)), 9, 500) == []
    sp2 = fresh(delivery_count_limit=2)
    for t in (0, 40_000):
        sp2.acquire("a", batches((0, 0)), t, 500)
        sp2.expire_locks(t + 30_000)
    assert sp2.start_offset == 1                           # two lock expiries are two deliveries


def test_in_flight_limit():
    sp = fresh(max_in_flight=5)
    assert sp.acquire("a", batches((0, 9)), 0, 500) == [(0, 4, 1)]
    assert not sp.can_acquire()
    assert sp.acquire("b", batches((5, 9)), 0, 500) == []
    sp.acknowledge("a", [(0, 1, [A.ACCEPT])], now=1)
    assert sp.can_acquire()
    assert sp.acquire("b", batches((5, 9)), 1, 500) == [(5, 6, 1)]


def test_gaps_and_skipped_batches_are_archived():
    sp = fresh()
    # offsets 3-4 are not in the log (compacted); 5-6 is a control batch
    got = sp.acquire("a", batches((0, 2), (5, 6), (7, 8), skip=[(5, 6)]), 0, 500)
    assert got == [(0, 2, 1), (7, 8, 1)]
    assert [(o, s) for o, s, *_ in sp.in_flight()] == [
        (0, ACQUIRED), (1, ACQUIRED), (2, ACQUIRED), (3, ARCHIVED), (4, ARCHIVED),
        (5, ARCHIVED), (6, ARCHIVED), (7, ACQUIRED), (8, ACQUIRED)]
    sp.acknowledge("a", [(0, 2, [A.ACCEPT])], now=1)
    assert sp.start_offset == 7


def test_release_member_and_log_start_moving():
    sp = fresh()
    sp.acquire("a", batches((0, 4)), 0, 500)
    sp.acquire("b", batches((5, 6)), 0, 500)
    assert sp.release_member("a") == 5
    assert sp.fetch_offset() == 0
    sp.move_start_to(3)
    assert sp.start_offset == 3 and sp.fetch_offset() == 3
    assert sp.acquire("b", batches((0, 6)), 1, 500) == [(3, 4, 2)]


def test_stored_offsets_lag_one_change_behind_as_kafkas():
    sp = fresh()
    sp.acquire("a", batches((0, 4)), 0, 500)
    sp.acknowledge("a", [(0, 2, [A.ACCEPT]), (4, 4, [A.ACCEPT])], now=1)
    assert sp.start_offset == 3
    assert sp.stored_offsets() == (0, 4)        # stored before the start offset moved
    sp.acknowledge("a", [(3, 3, [A.ACCEPT])], now=2)
    assert sp.start_offset == 5 and sp.stored_offsets() == (3, 2)


def test_snapshot_and_restore_keep_every_record_state():
    import uuid

    from broker.coordinator.group.share import state
    from protocol import messages as m
    sp = fresh()
    sp.acquire("a", batches((0, 9)), 0, 500)
    sp.acknowledge("a", [(0, 3, [A.ACCEPT]), (4, 4, [A.REJECT]), (5, 5, [A.RELEASE]),
                         (7, 7, [A.ACCEPT])], now=1)
    value = state.snapshot_value(sp, leader_epoch=0, now=5)
    decoded = m.ShareSnapshotValue.decode(value, 0, 2, exact=False)
    assert decoded.start_offset == 5
    # 5 released (delivered once); 6 acquired: stored as it was before (not delivered); 7
    # accepted; 8-9 acquired at the end: not stored at all, as on Kafka
    assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in decoded.state_batches] == [(5, 5, 0, 1), (6, 6, 0, 0), (7, 7, 2, 1)]
    again = SharePartition()
    again.restore(decoded.start_offset, [(b.first_offset, b.last_offset, b.delivery_state,
                                          b.delivery_count) for b in decoded.state_batches])
    assert again.acquire("b", batches((0, 9)), 2, 500) == [(5, 5, 2), (6, 6, 1), (8, 9, 1)]
    assert state.decode(state.snapshot_key("g", uuid.UUID(int=3), 0), None)[:3] == \
        ("g", uuid.UUID(int=3), 0)
    # Kafka's partition of the state topic: Java hash of "group:topicId:partition"
    assert state.coordinator_key("g", uuid.UUID(int=3), 0) == "g:AAAAAAAAAAAAAAAAAAAAAw:0"
