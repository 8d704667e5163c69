"""The group story at info level (never per heartbeat) and the counters the metrics layer reads."""
from __future__ import annotations

from structlog.testing import capture_logs

from tests.coordinator.harness import E, Harness
from tests.coordinator.group.classic.test_scenarios import form


def test_group_story_is_logged_at_info():
    h = Harness()
    with capture_logs() as logs:
        ids, _ = form(h, 2)
        for _ in range(20):
            h.heartbeat("g", ids[0], 1)
        h.advance(10000)            # ids[1] is silent and expires... and so is ids[0]
    info = [entry for entry in logs if entry["log_level"] == "info"]
    events = [entry["event"] for entry in info]
    assert events.count("member joined") == 2
    joined = next(e for e in info if e["event"] == "member joined")
    assert {"group", "member", "client_id", "client_host", "protocols"} <= joined.keys()
    started = next(e for e in info if e["event"] == "rebalance started")
    assert started["reason"]
    completed = next(e for e in info if e["event"] == "rebalance completed")
    assert completed["generation"] == 1 and completed["members"] == 2
    assert "duration_ms" in completed
    assert "member expired" in events
    assert not any("heartbeat" in e for e in events)     # nothing per heartbeat at info
    assert len(info) < 20


def test_offsets_loaded_is_logged():
    h = Harness()
    h.commit("g", {("t", 0): 1})
    target = Harness()
    p = h.coordinator.partition_for("g")
    with capture_logs() as logs:
        target.coordinator.runtime.begin_loading(p)
        target.coordinator.runtime.load(p, h.log.records(p))
        target.coordinator.runtime.finish_loading(p)
    loaded = [e for e in logs if e["event"] == "offsets loaded"]
    assert loaded and loaded[0]["offsets"] == 1 and loaded[0]["partition"] == p


def test_counters():
    h = Harness()
    ids, _ = form(h, 2)
    c = h.coordinator
    assert c.rebalances_total == 1 and c.stats.rebalances_started_total == 1
    assert c.member_count() == 2 and c.group_count() == 1
    assert c.groups_by_state()["Stable"] == 1
    h.advance(10000)
    assert c.expired_members_total == 2 and c.member_count() == 0
    assert c.groups_by_state()["Empty"] == 1


def test_callbacks_are_cleared_when_invoked_and_member_stays():
    h = Harness()
    ids, joins = form(h, 2, sync=False)
    group = h.group()
    assert all(mm.awaiting_join is None for mm in group.members.values())
    assert group.num_members_awaiting_join == 0
    s1 = h.sync("g", ids[1], 1)
    assert group.members[ids[1]].awaiting_sync is not None
    h.sync("g", ids[0], 1, {ids[0]: b"", ids[1]: b"x"})
    assert s1.error == E.NONE and s1.assignment == b"x"
    assert all(mm.awaiting_sync is None for mm in group.members.values())
    assert list(group.members) == ids


def test_close_answers_waiting_requests():
    h = Harness()
    ids, _ = form(h, 2)
    waiting = h.join(member_id=ids[0], client_id="c0")
    assert not waiting.done
    h.coordinator.close()
    assert waiting.error == E.NOT_COORDINATOR
    assert h.coordinator.heartbeat_purgatory.waiting == 0
    assert h.timer.next_deadline() is None
