"""Faults on streams groups (broker/faults.py): ``streams_status`` makes a streams group answer
a status on demand (so an application can be tested with MISSING_SOURCE_TOPICS or
SHUTDOWN_APPLICATION), ``expire_member`` fences a member as its session timeout does, and
``rebalance`` is refused for a streams group."""
from __future__ import annotations

import time

import pytest

from protocol.errors import ErrorCode as E

from broker.testing import EmbeddedBroker, FaultError
from tests.conformance import topics
from tests.conformance.test_streams_group_conformance import (
    StreamsMember, describe, heartbeat_until, statuses, word_count)
from tests.support import RawClient, unique


@pytest.fixture(scope="module")
def kb():
    with EmbeddedBroker() as broker:
        yield broker


def ready_member(port: int):
    admin = RawClient(port)
    source = topics.create_topic(admin, unique("streams-fault"), 2)
    group = unique("streams-fault-app")
    member = StreamsMember(RawClient(port), group, word_count(group, source))
    heartbeat_until(member, lambda r: r.error_code or (r.active_tasks and not r.status))
    assert member.active, member
    return admin, group, member


def test_streams_status_on_demand(kb):
    _admin, group, member = ready_member(kb.port)
    fault = kb.faults.add({"action": "streams_status", "match": {"group": group},
                           "status": "MISSING_SOURCE_TOPICS", "duration_ms": 60_000})
    assert fault.result == {"group": group, "status": 1}
    told = member.heartbeat()
    assert statuses(told) == [(1, f"Source topics are missing. (fault {fault.id})")]
    assert told.member_epoch == member.epoch          # the group itself is unchanged
    kb.faults.clear()
    assert member.heartbeat().status == []
    fault = kb.faults.add({"action": "streams_status", "match": {"group": group},
                           "status": 4, "duration_ms": 300})
    assert [s for s, _d in statuses(member.heartbeat())] == [4]
    time.sleep(0.4)
    assert member.heartbeat().status == []            # its duration is over
    with pytest.raises(FaultError, match="unknown status 'NOPE'"):
        kb.faults.add({"action": "streams_status", "match": {"group": group},
                       "status": "NOPE"})
    with pytest.raises(FaultError, match="needs match.group"):
        kb.faults.add({"action": "streams_status", "status": 1})


def test_expire_member_and_rebalance_on_a_streams_group(kb):
    admin, group, member = ready_member(kb.port)
    with pytest.raises(FaultError, match="is a streams group"):
        kb.faults.add({"action": "rebalance", "match": {"group": group}})
    fault = kb.faults.add({"action": "expire_member", "match": {"group": group}})
    assert fault.result == {"group": group, "member_id": member.member_id}
    (d,) = describe(admin, group)
    assert (d.group_state, d.members) == ("Empty", [])
    fenced = member.heartbeat()
    assert fenced.error_code == E.UNKNOWN_MEMBER_ID
    # each epoch bump (the join, the internal topics, the fence) is counted
    import re
    from tests.testing.test_share_faults import _metrics
    counted = re.search(r"^kafka_coordinator_streams_group_rebalances_total (\S+)$",
                        _metrics(kb), re.M)
    assert counted is not None and float(counted.group(1)) >= 3
