"""Share sessions (share/sessions.py) and the share partitions a broker leads (share/leader.py)
on a fake clock: epochs, the session limit, lock expiry through the keyed timer, deleted groups,
and the group configs a share partition reads."""
from __future__ import annotations

import uuid

import pytest

from protocol.errors import ErrorCode

from broker.coordinator.group.share.leader import ShareLeader
from broker.coordinator.group.share.partition import AcknowledgeType as A, LogBatch
from broker.coordinator.group.share.sessions import (
    INT32_MAX, ShareSessionCache, ShareSessionError, next_epoch)
from broker.purgatory import Timer

from tests.coordinator.harness import FakeClock

E = ErrorCode
T = uuid.UUID(int=7)
CONFIG = {"group.share.max.share.sessions": 2, "group.share.record.lock.duration.ms": 30000,
          "group.share.delivery.count.limit": 5, "group.share.partition.max.record.locks": 2000}


def test_session_epochs_and_partitions():
    cache = ShareSessionCache(10)
    s = cache.open("g", "m", [(T, 0)])
    assert s.epoch == 1
    with pytest.raises(ShareSessionError) as err:
        cache.advance("g", "m", 2)
    assert err.value.code == E.INVALID_SHARE_SESSION_EPOCH
    cache.advance("g", "m", 1, add=[(T, 1)], forget=[(T, 0)])
    assert list(s.partitions) == [(T, 1)] and s.epoch == 2
    with pytest.raises(ShareSessionError) as err:
        cache.advance("g", "other", 1)
    assert err.value.code == E.SHARE_SESSION_NOT_FOUND
    assert cache.open("g", "m", []).epoch == 1          # epoch 0 again: a fresh session
    assert next_epoch(INT32_MAX) == 1 and next_epoch(-1) == -1


def test_session_limit():
    cache = ShareSessionCache(2)
    cache.open("g", "a", [])
    cache.open("g", "b", [])
    with pytest.raises(ShareSessionError) as err:
        cache.open("g", "c", [])
    assert err.value.code == E.SHARE_SESSION_LIMIT_REACHED
    cache.open("g", "a", [])                            # replacing its own is no new session
    cache.remove("g", "b")
    cache.open("g", "c", [])
    assert sorted(k[1] for k in cache.sessions) == ["a", "c"]


def leader(configs=None):
    clock = FakeClock(0)
    timer = Timer(clock)
    lead = ShareLeader(CONFIG, clock, timer)
    woken = []
    lead.on_available = lambda topic_id, p: woken.append((topic_id, p))
    lead.group_config = lambda group_id: (configs or {}).get(group_id, {})
    return lead, clock, timer, woken


def test_locks_expire_through_the_timer_and_wake_fetches():
    lead, clock, timer, woken = leader()
    sp = lead.partition("g", (T, 0), log_start=0, log_end=0)
    assert sp.start_offset == 0
    sp.acquire("m", [LogBatch(0, 9)], clock(), 500)
    lead.locks_changed("g", (T, 0))
    clock.now = 29_999
    timer.advance(clock.now)
    assert woken == []
    clock.now = 30_000
    timer.advance(clock.now)
    assert woken == [(T, 0)] and sp.fetch_offset() == 0 and sp.available == 10


def test_reset_lock_duration_and_limits_follow_group_configs():
    lead, clock, timer, woken = leader({"g": {"share.auto.offset.reset": "earliest",
                                              "share.record.lock.duration.ms": 15000,
                                              "share.delivery.count.limit": 2}})
    sp = lead.partition("g", (T, 0), log_start=3, log_end=10)
    assert sp.start_offset == 3 and sp.lock_duration_ms == 15000
    assert sp.delivery_count_limit == 2
    latest = lead.partition("h", (T, 0), log_start=3, log_end=10)
    assert latest.start_offset == 10 and latest.lock_duration_ms == 30000


def test_groups_deleted():
    lead, clock, timer, woken = leader()
    sp = lead.partition("g", (T, 0), 0, 0)
    sp.acquire("n", [LogBatch(0, 4)], 0, 500)
    sp.acknowledge("n", [(0, 4, [A.ACCEPT])], 0)
    lead.on_group_deleted("g")
    fresh = lead.partition("g", (T, 0), 0, 0)
    assert fresh is not sp and fresh.start_offset == 0


def test_by_duration_reset_starts_at_the_first_record_that_young():
    lead, clock, timer, woken = leader({"g": {"share.auto.offset.reset": "by_duration:PT1M"}})
    clock.now = 10 * 60_000
    asked = []

    def offset_for_timestamp(ts):
        asked.append(ts)
        return (42, ts + 5)
    sp = lead.partition("g", (T, 0), 0, 100, offset_for_timestamp)
    assert asked == [9 * 60_000] and sp.start_offset == 42
    none = lead.partition("g", (T, 1), 0, 100, lambda ts: None)
    assert none.start_offset == 100


def test_a_deleted_topic_takes_its_share_partitions():
    lead, clock, timer, woken = leader()
    stored = []
    lead.persist = lambda group_id, key, sp: stored.append((group_id, key, sp is None))
    other = uuid.UUID(int=8)
    lead.partition("g", (T, 0), 0, 0)
    lead.partition("g", (other, 0), 0, 0)
    lead.partition("h", (T, 1), 0, 0)
    stored.clear()
    lead.drop_topic_everywhere(T)
    assert sorted(stored) == [("g", (T, 0), True), ("h", (T, 1), True)]
    assert list(lead.partitions_of("g")) == [(other, 0)] and "h" not in lead.groups


def test_a_closed_connection_ends_the_sessions_it_opened_and_releases():
    """Kafka's ShareSessionCache on disconnect: the sessions the connection opened end at once and
    what their members held is available again; other connections' sessions stay."""
    lead, clock, timer, woken = leader()
    lead.sessions.max_sessions = 10
    conn, other = object(), object()
    sp = lead.partition("g", (T, 0), 0, 0)
    sp.acquire("m", [LogBatch(0, 4)], 0, 500)
    sp.acquire("n", [LogBatch(5, 6)], 0, 500)
    lead.sessions.open("g", "m", [(T, 0)], conn)
    lead.sessions.open("g", "n", [(T, 0)], other)
    lead.sessions.advance("g", "m", 1)
    lead.connection_closed(object())                    # a connection with no session
    assert lead.sessions.get("g", "m") is not None and sp.available == 0 and woken == []
    lead.connection_closed(conn)                        # no timer advanced: at once
    assert lead.sessions.get("g", "m") is None and sp.available == 5 and woken == [(T, 0)]
    assert lead.sessions.get("g", "n") is not None and conn not in lead.sessions.by_connection
    lead.connection_closed(conn)                        # told twice: nothing more
    assert sp.available == 5 and woken == [(T, 0)]


def test_a_session_ended_otherwise_is_no_longer_its_connections():
    """A session closed at epoch -1, replaced at epoch 0 on another connection, or of a deleted
    group is not ended again when the first connection closes."""
    lead, clock, timer, woken = leader()
    lead.sessions.max_sessions = 10
    first, second = object(), object()
    sp = lead.partition("g", (T, 0), 0, 0)
    lead.sessions.open("g", "m", [(T, 0)], first)
    lead.sessions.open("g", "m", [(T, 0)], second)      # epoch 0 again, on a new connection
    assert first not in lead.sessions.by_connection
    sp.acquire("m", [LogBatch(0, 1)], 0, 500)
    lead.connection_closed(first)
    assert lead.sessions.get("g", "m") is not None and sp.available == 0
    lead.close_session("g", "m")                        # epoch -1
    assert lead.sessions.by_connection == {} and sp.available == 2
    lead.sessions.open("g", "y", [(T, 0)], first)
    lead.on_group_deleted("g")
    assert lead.sessions.by_connection == {} and lead.sessions.sessions == {}
