"""The share coordinator's store on its own (broker/coordinator/share_state/store.py and
batches.py): Kafka's rules for initialize, write, read, summary and delete of a share
partition's state, its epochs, how state batches combine, and replay of its records."""
from __future__ import annotations

import uuid

import pytest

from broker.coordinator.share_state import batches
from broker.coordinator.share_state.persister import state_batches
from broker.coordinator.share_state.store import (
    Outcome,
    ShareGroupOffset,
    ShareStateStore,
    coordinator_key,
    parse_coordinator_key,
)
from broker.coordinator.group.share.partition import LogBatch, SharePartition
from protocol.errors import ErrorCode as E

T = uuid.UUID(int=7)
OTHER = uuid.UUID(int=8)
AVAILABLE, ACKED, ARCHIVED = 0, 2, 4


class Clock:
    def __init__(self) -> None:
        self.now = 1000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def store() -> ShareStateStore:
    return ShareStateStore(Clock(), lambda topic_id: 3 if topic_id == T else None)


def error(outcome) -> int:
    assert isinstance(outcome, Outcome), outcome
    return outcome.error


def test_initialize_then_read_and_summary(store):
    records, outcome = store.initialize("g", T, 0, state_epoch=1, start_offset=10)
    assert outcome is None and len(records) == 1
    _, state = store.read("g", T, 0, leader_epoch=-1)
    assert (state.state_epoch, state.start_offset, state.state_batches) == (1, 10, [])
    _, summary = store.summary("g", T, 0)
    assert (summary.start_offset, summary.state_epoch, summary.leader_epoch,
            summary.delivery_complete_count) == (10, 1, 0, 0)


def test_initialize_without_start_offset_has_no_delivery_complete_count(store):
    store.initialize("g", T, 0, state_epoch=0, start_offset=-1)
    assert store.summary("g", T, 0)[1].delivery_complete_count == -1


def test_uninitialized_share_partition(store):
    records, outcome = store.read("g", T, 0, leader_epoch=0)
    assert records == [] and error(outcome) == E.INVALID_REQUEST
    assert outcome.message == "Read operation on uninitialized share partition not allowed."
    records, outcome = store.write("g", T, 0, 0, 0, 5, [])
    assert records == [] and error(outcome) == E.INVALID_REQUEST
    assert outcome.message == "Write operation on uninitialized share partition not allowed."
    _, summary = store.summary("g", T, 0)
    assert (summary.start_offset, summary.state_epoch, summary.leader_epoch,
            summary.delivery_complete_count) == (-1, 0, 0, -1)
    assert store.delete("g", T, 0) == ([], None)   # nothing stored: no tombstone


@pytest.mark.parametrize("op", ["initialize", "write", "read", "summary", "delete"])
def test_unknown_topic_partition_and_negative_partition(store, op):
    args = {"initialize": (0, 0), "write": (0, 0, 0, []), "read": (0,), "summary": (),
            "delete": ()}[op]
    for topic_id, partition, code in ((OTHER, 0, E.UNKNOWN_TOPIC_OR_PARTITION),
                                      (T, 3, E.UNKNOWN_TOPIC_OR_PARTITION),
                                      (T, -1, E.INVALID_REQUEST)):
        if op in ("write", "read") and partition >= 0:
            store.states[("g", topic_id, partition)] = ShareGroupOffset(0, 0, 0, 0)
        records, outcome = getattr(store, op)("g", topic_id, partition, *args)
        assert records == [] and error(outcome) == code, (topic_id, partition)


def test_state_epoch_fences_initialize_and_write(store):
    store.initialize("g", T, 0, state_epoch=3, start_offset=0)
    assert error(store.initialize("g", T, 0, 2, 0)[1]) == E.FENCED_STATE_EPOCH
    assert error(store.write("g", T, 0, 2, -1, 0, [])[1]) == E.FENCED_STATE_EPOCH
    assert store.write("g", T, 0, -1, -1, 0, [])[1] is None    # -1: not checked
    assert store.write("g", T, 0, 3, -1, 0, [])[1] is None
    assert store.initialize("g", T, 0, 4, 7)[1] is None         # a higher one starts over
    assert store.summary("g", T, 0)[1].state_epoch == 4


def test_leader_epoch_is_stored_by_read_and_fences_older_ones(store):
    store.initialize("g", T, 0, 0, 0)
    records, state = store.read("g", T, 0, leader_epoch=5)
    assert len(records) == 1 and state.start_offset == 0     # a newer leader: stored
    assert store.read("g", T, 0, 5)[0] == []                 # the same one: nothing to store
    assert error(store.read("g", T, 0, 4)[1]) == E.FENCED_LEADER_EPOCH
    assert error(store.write("g", T, 0, 0, 4, 0, [])[1]) == E.FENCED_LEADER_EPOCH
    assert store.write("g", T, 0, 0, 9, 0, [])[1] is None     # a write does not move it
    assert store.summary("g", T, 0)[1].leader_epoch == 5
    assert error(store.read("g", T, 0, 4)[1]) == E.FENCED_LEADER_EPOCH
    assert store.read("g", T, 0, -1)[1].start_offset == 0     # -1: not checked


def test_write_combines_batches_and_prunes_below_the_start_offset(store):
    store.initialize("g", T, 0, 0, 0)
    store.write("g", T, 0, 0, 0, 0, [(0, 9, AVAILABLE, 1)])
    store.write("g", T, 0, 0, 0, -1, [(3, 4, ACKED, 1), (8, 12, AVAILABLE, 2)])
    assert store.read("g", T, 0, -1)[1].state_batches == [
        (0, 2, AVAILABLE, 1), (3, 4, ACKED, 1), (5, 7, AVAILABLE, 1), (8, 12, AVAILABLE, 2)]
    store.write("g", T, 0, 0, 0, 5, [], delivery_complete_count=0)
    state = store.read("g", T, 0, -1)[1]
    assert state.start_offset == 5
    assert state.state_batches == [(5, 7, AVAILABLE, 1), (8, 12, AVAILABLE, 2)]
    assert store.summary("g", T, 0)[1].delivery_complete_count == 0


def test_delete_writes_a_tombstone_and_forgets_the_epochs(store):
    store.initialize("g", T, 0, 5, 0)
    records, outcome = store.delete("g", T, 0)
    assert outcome is None and records[0][1] is None
    assert store.summary("g", T, 0)[1].start_offset == -1
    assert store.initialize("g", T, 0, 1, 0)[1] is None       # the old state epoch is gone


@pytest.mark.parametrize("so_far,new,start,expected", [
    ([], [(0, 4, AVAILABLE, 1)], -1, [(0, 4, AVAILABLE, 1)]),
    # the same state and count, contiguous or overlapping: one batch
    ([(0, 4, AVAILABLE, 1)], [(5, 9, AVAILABLE, 1)], -1, [(0, 9, AVAILABLE, 1)]),
    ([(0, 4, AVAILABLE, 1)], [(2, 9, AVAILABLE, 1)], -1, [(0, 9, AVAILABLE, 1)]),
    # the one further along wins where they overlap: higher count, then higher state
    ([(0, 9, AVAILABLE, 1)], [(3, 5, ACKED, 1)], -1,
     [(0, 2, AVAILABLE, 1), (3, 5, ACKED, 1), (6, 9, AVAILABLE, 1)]),
    ([(0, 9, ACKED, 1)], [(3, 5, AVAILABLE, 1)], -1, [(0, 9, ACKED, 1)]),
    ([(0, 9, ARCHIVED, 1)], [(0, 9, AVAILABLE, 2)], -1, [(0, 9, AVAILABLE, 2)]),
    ([(0, 4, AVAILABLE, 2)], [(0, 9, ACKED, 1)], -1, [(0, 4, AVAILABLE, 2), (5, 9, ACKED, 1)]),
    # not contiguous: apart
    ([(0, 1, AVAILABLE, 1)], [(5, 6, AVAILABLE, 1)], -1,
     [(0, 1, AVAILABLE, 1), (5, 6, AVAILABLE, 1)]),
    # below the start offset: pruned, one across it cut
    ([(0, 4, AVAILABLE, 1), (5, 9, ACKED, 1)], [], 7, [(7, 9, ACKED, 1)]),
    ([(0, 4, AVAILABLE, 1)], [], 5, []),
    # huge ranges cost nothing more
    ([(0, 10**15, AVAILABLE, 1)], [(5, 5, ACKED, 1)], -1,
     [(0, 4, AVAILABLE, 1), (5, 5, ACKED, 1), (6, 10**15, AVAILABLE, 1)]),
])
def test_combine(so_far, new, start, expected):
    assert batches.combine(so_far, new, start) == expected


def test_replay_rebuilds_the_same_state(store):
    written = []
    written += store.initialize("g", T, 0, 2, 0)[0]
    written += store.read("g", T, 0, 3)[0]
    written += store.write("g", T, 0, 2, 3, 4, [(4, 6, ACKED, 1), (7, 8, AVAILABLE, 2)], 3)[0]
    written += store.initialize("h", T, 1, 0, 0)[0]
    written += store.delete("h", T, 1)[0]
    again = ShareStateStore(Clock(), store.partition_count)
    for key, value in written:
        again.replay(key, value)
    assert again.states == store.states
    assert again.leader_epochs == store.leader_epochs
    assert again.state_epochs == store.state_epochs


def test_coordinator_key_round_trip_and_validation():
    key = coordinator_key("grp", T, 4)
    assert parse_coordinator_key(key) == ("grp", T, 4)
    for bad in ("", "a:b", "a:b:c:d", " :%s:1" % key.split(":")[1], "g:notanid:1",
                "g:%s:x" % key.split(":")[1]):
        with pytest.raises(ValueError):
            parse_coordinator_key(bad)


def test_the_leaders_state_is_stored_and_read_back(store):
    """What the share-partition leader stores (persister.py) reads back as the same share
    partition: acknowledged records stay done, released ones come back with their count."""
    sp = SharePartition()
    sp.initialize(0)
    sp.acquire("m", [LogBatch(0, 5)], now=0, max_records=10)
    sp.acknowledge("m", [(0, 1, [1]), (2, 2, [2]), (3, 3, [3])], now=0)   # accept, release, reject
    store.replace("g", T, 0, 1, sp.start_offset, state_batches(sp), 0)
    stored = store.read("g", T, 0, -1)[1]
    assert stored.start_offset == 2
    assert stored.state_batches == [(2, 2, AVAILABLE, 1), (3, 3, ARCHIVED, 1)]
    again = SharePartition()
    again.restore(stored.start_offset, stored.state_batches)
    assert again.fetch_offset() == 2
    assert [(o, s, c) for o, s, c, _m, _d in again.in_flight()] == [
        (2, AVAILABLE, 1), (3, ARCHIVED, 1)]


def test_the_leader_stores_the_start_offset_from_before_each_change():
    """As Kafka's leader (observed in tests/conformance/test_share_state_conformance.py): the
    state of an acknowledgement is stored with the start offset from before it moved, and the
    records it finished; an acquisition is not stored."""
    from broker.coordinator.share_state.persister import stored_view
    sp = SharePartition()
    sp.initialize(0)
    sp.acquire("m", [LogBatch(0, 9)], now=0, max_records=10)
    sp.acknowledge("m", [(0, 2, [1]), (3, 4, [2]), (5, 5, [3])], now=0)
    assert stored_view(sp) == (0, [(0, 2, ACKED, 1), (3, 4, AVAILABLE, 1),
                                   (5, 5, ARCHIVED, 1)], 4)
    sp.acknowledge("m", [(6, 7, [1])], now=0)
    assert stored_view(sp) == (3, [(3, 4, AVAILABLE, 1), (5, 5, ARCHIVED, 1),
                                   (6, 7, ACKED, 1)], 3)
    # records gone from the log (retention): what they were is not known, the start is now
    sp.move_start_to(5)
    assert stored_view(sp) == (5, [(5, 5, ARCHIVED, 1), (6, 7, ACKED, 1)], 3)
