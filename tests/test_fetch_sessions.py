"""The fetch session cache (broker/partitions/fetch_sessions.py) on an injected clock: Kafka's
session ids, epochs and errors, and its eviction rules (FetchSessionCacheShard.tryEvict)."""
from __future__ import annotations

import random
import uuid

from protocol.errors import ErrorCode as E
from protocol.messages import FetchRequest, FetchResponse

from broker.partitions.fetch_sessions import (EVICTION_MS, INT_MAX, FetchSessionCache, next_epoch)

F = FetchRequest
TID = uuid.uuid4()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def part(p: int, offset: int = 0):
    return F.FetchPartition(partition=p, fetch_offset=offset, partition_max_bytes=1 << 20)


def data(n: int):
    """fetch_data for partitions 0..n-1 of one topic."""
    return [((TID, p), "t", TID, part(p)) for p in range(n)]


def answer(p: int, hw: int = 0, records: bytes = b"", error: int = E.NONE):
    return FetchResponse.PartitionData(partition_index=p, error_code=error, high_watermark=hw,
                                       last_stable_offset=hw, log_start_offset=0,
                                       preferred_read_replica=-1, records=records)


def create(cache, n: int = 2, hw: int = 0) -> int:
    ctx = cache.new_context(13, 0, 0, False, data(n), [])
    assert ctx.kind == "full"
    error, sid, kept = ctx.answer([((TID, p), answer(p, hw)) for p in range(n)])
    assert error == E.NONE
    return sid


def cache(slots: int = 1000, clock=None):
    return FetchSessionCache(slots, clock or Clock(), rand=random.Random(7))


def test_next_epoch_wraps_past_one_and_keeps_final():
    assert next_epoch(0) == 1 and next_epoch(5) == 6
    assert next_epoch(INT_MAX) == 1
    assert next_epoch(-1) == -1


def test_full_fetch_at_epoch_0_creates_a_session_at_epoch_1():
    c = cache()
    sid = create(c, 3)
    assert sid > 0
    session = c.get(sid)
    assert session.epoch == 1 and len(session.partitions) == 3
    assert c.size == 1 and c.partitions_cached == 3


def test_session_ids_fall_in_the_shard_that_made_them():
    c = cache()
    ids = [create(c) for _ in range(16)]
    assert len(set(ids)) == 16
    for n, sid in enumerate(ids):
        assert sid // c.id_range == n % 8  # shards in turn


def test_epoch_minus_one_is_sessionless_and_closes_the_named_session():
    c = cache()
    sid = create(c)
    ctx = c.new_context(13, sid, -1, False, data(1), [])
    assert ctx.kind == "sessionless"
    assert ctx.answer([((TID, 0), answer(0))])[:2] == (E.NONE, 0)
    assert c.get(sid) is None and c.size == 0


def test_unknown_session_and_wrong_epoch_and_topic_id_mismatch():
    c = cache()
    assert c.new_context(13, 12345, 1, False, [], []).error == E.FETCH_SESSION_ID_NOT_FOUND
    sid = create(c)
    bad = c.new_context(13, sid, 2, False, [], [])
    assert bad.kind == "error" and bad.error == E.INVALID_FETCH_SESSION_EPOCH
    assert bad.answer([])[:2] == (E.INVALID_FETCH_SESSION_EPOCH, 0)
    mixed = c.new_context(12, sid, 1, False, [], [])
    assert mixed.error == E.FETCH_SESSION_TOPIC_ID_ERROR
    # errors leave the session as it was
    assert c.get(sid).epoch == 1


def test_incremental_answers_only_changed_partitions_and_moves_epoch():
    c = cache()
    sid = create(c, 3, hw=5)
    ctx = c.new_context(13, sid, 1, False, [], [])
    assert ctx.kind == "incremental"
    assert [key[1] for key, _n, _i, _r in ctx.partitions()] == [0, 1, 2]
    error, got, kept = ctx.answer([((TID, p), answer(p, 5)) for p in range(3)])
    assert (error, got, kept) == (E.NONE, sid, [])
    assert c.get(sid).epoch == 2
    # partition 1's high watermark moved, partition 2 has records
    ctx = c.new_context(13, sid, 2, False, [], [])
    error, _sid, kept = ctx.answer([((TID, 0), answer(0, 5)), ((TID, 1), answer(1, 6)),
                                    ((TID, 2), answer(2, 5, b"x"))])
    assert [k[1] for k, _d in kept] == [1, 2]
    # the partition that returned records goes last: the next fetch reads the others first
    assert [k[1] for k in c.get(sid).partitions] == [0, 1, 2]
    ctx = c.new_context(13, sid, 3, False, [], [])
    _e, _s, kept = ctx.answer([((TID, 0), answer(0, 5, b"y")), ((TID, 1), answer(1, 6)),
                               ((TID, 2), answer(2, 5))])
    assert [k[1] for k, _d in kept] == [0]
    assert [k[1] for k in c.get(sid).partitions] == [1, 2, 0]


def test_an_error_is_always_answered():
    c = cache()
    sid = create(c, 1, hw=5)
    for epoch in (1, 2):
        ctx = c.new_context(13, sid, epoch, False, [], [])
        _e, _s, kept = ctx.answer([((TID, 0), answer(0, -1, error=E.NOT_LEADER_OR_FOLLOWER))])
        assert len(kept) == 1


def test_incremental_adds_updates_and_forgets():
    c = cache()
    sid = create(c, 2)
    ctx = c.new_context(13, sid, 1, False, [((TID, 1), "t", TID, part(1, 40)),
                                            ((TID, 7), "t", TID, part(7))], [(TID, 0)])
    parts = c.get(sid).partitions
    assert sorted(k[1] for k in parts) == [1, 7]
    assert parts[(TID, 1)].fetch_offset == 40
    # forgetting everything closes the session; the request is answered sessionless
    ctx = c.new_context(13, sid, 2, False, [], [(TID, 1), (TID, 7)])
    assert ctx.kind == "sessionless" and c.get(sid) is None


def test_duplicate_incremental_request_is_told_invalid_epoch():
    """Two requests at the same epoch: the second finds the session already moved on."""
    c = cache()
    sid = create(c, 1)
    first = c.new_context(13, sid, 1, False, [], [])
    second_error = c.new_context(13, sid, 1, False, [], [])
    assert second_error.error == E.INVALID_FETCH_SESSION_EPOCH
    # a context answered after another request moved the epoch answers INVALID_FETCH_SESSION_EPOCH
    c.new_context(13, sid, 2, False, [], [])
    assert first.answer([((TID, 0), answer(0))])[:2] == (E.INVALID_FETCH_SESSION_EPOCH, sid)


def test_full_cache_refuses_young_sessions_then_evicts_stale_ones():
    clock = Clock()
    c = FetchSessionCache(8, clock, rand=random.Random(1))  # one slot per shard
    first = [create(c, 5) for _ in range(8)]
    assert c.size == 8
    # every shard full of sessions younger than the eviction time: no new session
    clock.now += EVICTION_MS
    assert create(c, 100) == 0
    # one more millisecond and the least recently used is stale: evicted for the newcomer
    clock.now += 1
    sid = create(c, 1)
    assert sid > 0 and c.get(first[1]) is None and c.evictions == 1


def test_old_sessions_are_evicted_for_bigger_newcomers_not_smaller():
    clock = Clock()
    c = FetchSessionCache(8, clock, rand=random.Random(2))
    sids = [create(c, 10) for _ in range(8)]
    # all used recently, but created more than the eviction time ago (touched since)
    clock.now += EVICTION_MS + 1
    for sid in sids:
        ctx = c.new_context(13, sid, 1, False, [], [])
        ctx.answer([])
    clock.now += 10
    assert create(c, 5) == 0          # smaller than every session: refused
    assert c.size == 8
    sid = create(c, 20)               # bigger: evicts the session of its shard
    assert sid > 0 and c.size == 8 and c.evictions == 1


def test_zero_slots_never_makes_a_session():
    c = cache(slots=0)
    assert create(c, 1) == 0 and c.size == 0


def test_forgotten_partitions_and_sizes_are_counted_at_touch():
    c = cache()
    sid = create(c, 4)
    assert c.partitions_cached == 4
    c.new_context(13, sid, 1, False, [], [(TID, 0), (TID, 1)])
    assert c.partitions_cached == 2


def test_a_session_never_grows_past_what_one_request_could_name():
    c = FetchSessionCache(1000, Clock(), rand=random.Random(3), max_partitions=5)
    sid = create(c, 4)
    # re-sending known partitions and forgetting some keeps it within the bound
    ctx = c.new_context(13, sid, 1, False, data(4) + [((TID, 4), "t", TID, part(4))], [])
    assert ctx.kind == "incremental" and len(c.get(sid).partitions) == 5
    ctx = c.new_context(13, sid, 2, False, [((TID, 9), "t", TID, part(9))], [(TID, 0)])
    assert ctx.kind == "incremental" and len(c.get(sid).partitions) == 5
    # one more: the session is dropped before anything is added, the fetcher starts over
    ctx = c.new_context(13, sid, 3, False, [((TID, 10), "t", TID, part(10))], [])
    assert ctx.error == E.FETCH_SESSION_ID_NOT_FOUND
    assert c.get(sid) is None and c.partitions_cached == 0
