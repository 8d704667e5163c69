"""A streams group survives a broker restart with --data-dir: its records in __consumer_offsets
(topology, members, target and current assignments) are replayed, so its members go on at their
epochs with their tasks, without a new assignment."""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode as E
from tests.conformance import topics
from tests.conformance.test_streams_group_conformance import (
    StreamsMember, describe, heartbeat_until, word_count)
from tests.support import BrokerProcess, RawClient, unique


@pytest.fixture
def durable(tmp_path):
    broker = BrokerProcess(data_dir=str(tmp_path),
                           overrides={"group.streams.initial.rebalance.delay.ms": 0})
    broker.start()
    yield broker
    broker.stop()


def test_members_go_on_after_a_restart(durable):
    admin = RawClient(durable.port)
    source = topics.create_topic(admin, unique("durable-words"), 2)
    group = unique("durable-app")
    a = StreamsMember(RawClient(durable.port), group, word_count(group, source))
    heartbeat_until(a, lambda r: r.error_code or (r.active_tasks and not r.status))
    b = StreamsMember(RawClient(durable.port), group, word_count(group, source))
    b.heartbeat()
    for _ in range(4):
        a.heartbeat()
        b.heartbeat()
    (before,) = describe(admin, group)
    assert before.group_state == "Stable"
    assert sum(len(p) for m in (a, b) for p in m.active.values()) == 4
    admin.close()

    durable.kill()
    durable.start()

    admin = RawClient(durable.port)
    (after,) = describe(admin, group)
    assert (after.group_state, after.group_epoch, after.assignment_epoch) == \
        ("Stable", before.group_epoch, before.assignment_epoch)
    assert sorted((mm.member_id, mm.member_epoch) for mm in after.members) == \
        sorted((mm.member_id, mm.member_epoch) for mm in before.members)
    for m in (a, b):
        m.client = RawClient(durable.port)
        kept = dict(m.active)
        again = m.heartbeat()
        assert again.error_code == E.NONE and again.status == [], again
        assert again.member_epoch == m.epoch and m.active == kept
        assert again.active_tasks is None      # nothing changed: no new assignment
