"""Faults on share groups (broker/faults.py): ``expire_share_locks`` redelivers what a share
consumer holds at once, ``expire_member`` fences a share-group member as its session timeout
does, and ``rebalance`` is refused for a share group."""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import MetadataRequest

from broker.testing import EmbeddedBroker, FaultError
from tests.conformance import topics
from tests.conformance.test_share_group_conformance import (
    ShareConsumer, alter_group_configs, describe, produce)
from tests.support import RawClient, unique


@pytest.fixture(scope="module")
def kb():
    with EmbeddedBroker() as broker:
        yield broker


def share_topic(port: int):
    admin = RawClient(port)
    name = topics.create_topic(admin, unique("share-fault"), 1)
    topic_id = admin.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        name=name)], allow_auto_topic_creation=False), 12).topics[0].topic_id
    return admin, (name, topic_id)


def test_expire_share_locks_redelivers_now(kb):
    admin, topic = share_topic(kb.port)
    group = unique("share-fault-g")
    assert alter_group_configs(admin, group, ("share.auto.offset.reset", "earliest", 0)) == \
        (E.NONE, None)
    produce(admin, topic[0], 3)
    a = ShareConsumer(RawClient(kb.port), group, topic)
    a.heartbeat()
    a.until_assigned(lambda: a.assigned == {0})
    assert a.fetch_until(3) == [(0, 2, 1)]
    fault = kb.faults.add({"action": "expire_share_locks", "match": {"group": group}})
    assert fault.result == {"group": group, "released": 3}
    b = ShareConsumer(RawClient(kb.port), group, topic)
    b.heartbeat()
    b.until_assigned(lambda: b.assigned == {0})
    assert b.fetch_until(3, timeout=3) == [(0, 2, 2)]     # long before the 30 s lock
    response = a.acknowledge({0: [(0, 0, [1])]})
    assert [p.error_code for t in response.responses for p in t.partitions] == \
        [E.INVALID_RECORD_STATE]
    response = b.acknowledge({0: [(0, 1, [1]), (2, 2, [3])]})
    assert [p.error_code for t in response.responses for p in t.partitions] == [E.NONE]
    metrics = _metrics(kb)
    assert 'kafka_share_group_record_acknowledgements_total{ack_type="accept"} 2.0' in metrics
    assert 'kafka_share_group_record_acknowledgements_total{ack_type="reject"} 1.0' in metrics
    assert 'kafka_share_partition_records_in_flight{state="acquired"} 0.0' in metrics


def test_expire_member_and_rebalance_on_a_share_group(kb):
    admin, topic = share_topic(kb.port)
    group = unique("share-fault-g")
    a = ShareConsumer(RawClient(kb.port), group, topic)
    a.heartbeat()
    with pytest.raises(FaultError):
        kb.faults.add({"action": "rebalance", "match": {"group": group}})
    fault = kb.faults.add({"action": "expire_member", "match": {"group": group}})
    assert fault.result == {"group": group, "member_id": a.member_id}
    (g,) = describe(admin, group)
    assert (g.group_state, g.members) == ("Empty", [])
    assert a.heartbeat().error_code == E.UNKNOWN_MEMBER_ID


def _metrics(kb) -> str:
    import urllib.request
    with urllib.request.urlopen(kb.metrics_url + "/metrics", timeout=5) as r:
        return r.read().decode()
