"""Share-partition state survives a kill -9 with --data-dir (``__share_group_state``): no
acknowledged record is delivered again, and records acquired but not acknowledged, or released,
are delivered again (an acquisition is not stored, as on Kafka: an acquired record comes back
with the delivery count it had before)."""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import MetadataRequest
from tests.conformance import topics
from tests.conformance.test_share_group_conformance import (
    ShareConsumer, alter_group_configs, describe_offsets, offsets_of, produce)
from tests.support import BrokerProcess, RawClient, unique


@pytest.fixture
def durable(tmp_path):
    broker = BrokerProcess(data_dir=str(tmp_path))
    broker.start()
    yield broker
    broker.stop()


def test_share_state_survives_kill_9(durable):
    admin = RawClient(durable.port)
    name = topics.create_topic(admin, unique("durable-share"), 1)
    topic_id = admin.call(MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name)],
        allow_auto_topic_creation=False), 12).topics[0].topic_id
    group = unique("durable-g")
    assert alter_group_configs(admin, group, ("share.auto.offset.reset", "earliest", 0)) == \
        (E.NONE, None)
    produce(admin, name, 10)
    consumer = ShareConsumer(RawClient(durable.port), group, (name, topic_id))
    consumer.heartbeat()
    consumer.until_assigned(lambda: consumer.assigned == {0})
    assert consumer.fetch_until(10) == [(0, 9, 1)]
    response = consumer.acknowledge({0: [(0, 3, [1]), (4, 4, [3]), (5, 5, [2])]})
    assert [p.error_code for t in response.responses for p in t.partitions] == [E.NONE]
    admin.close()

    durable.kill()
    durable.start()

    admin = RawClient(durable.port)
    # the group and its member came back from __consumer_offsets, the share partition's state
    # from __share_group_state: as Kafka's leader, it stored the acknowledgement with the start
    # offset from before it (0; 0-3 accepted, 4 rejected, 5 released), which describe reports
    # until the next change is stored
    assert offsets_of(describe_offsets(admin, group, name))[(name, 0)][0] == 0
    again = ShareConsumer(RawClient(durable.port), group, (name, topic_id),
                          member_id=consumer.member_id)
    again.heartbeat()
    again.until_assigned(lambda: again.assigned == {0})
    # 5 was released once: its second delivery; 6-9 were acquired, which Kafka does not store
    # either: delivered again as first deliveries. Nothing of 0-4 is delivered again
    assert again.fetch_until(5) == [(5, 5, 2), (6, 9, 1)]
    response = again.fetch(max_wait_ms=300)
    assert response.error_code == E.NONE
    assert [r for t in response.responses for p in t.partitions for r in p.acquired_records] \
        == []
    admin.close()
