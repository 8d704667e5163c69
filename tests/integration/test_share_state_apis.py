"""The share-partition leader and the share coordinator's APIs meet in one store
(broker/coordinator/share_state/persister.py): state an API writes is what the leader reads at
its next fetch, and what the leader stores survives a kill -9 for the APIs to read back.
kbroker only: on Kafka the group coordinator initializes share partitions itself, so an API
write before a group's first assignment does not decide where it starts there."""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import MetadataRequest
from tests.conformance import topics
from tests.conformance.test_share_group_conformance import (
    ShareConsumer, acquired, alter_group_configs, produce)
from tests.conformance.test_share_state_conformance import (
    coordinator_ready, initialize, read, summary, write)
from broker.coordinator.share_state.store import coordinator_key
from tests.support import BrokerProcess, RawClient, unique

AVAILABLE, ACKED, ARCHIVED = 0, 2, 4


@pytest.fixture
def durable(tmp_path):
    broker = BrokerProcess(data_dir=str(tmp_path))
    broker.start()
    yield broker
    broker.stop()


def new_topic(admin) -> tuple[str, object]:
    name = topics.create_topic(admin, unique("ss-api"), 1)
    topic_id = admin.call(MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name)],
        allow_auto_topic_creation=False), 12).topics[0].topic_id
    return name, topic_id


def consumer_of(port, group, topic) -> ShareConsumer:
    consumer = ShareConsumer(RawClient(port), group, topic)
    consumer.heartbeat()
    consumer.until_assigned(lambda: consumer.assigned == {0})
    return consumer


def test_the_leader_reads_what_the_apis_wrote(durable):
    admin = RawClient(durable.port)
    name, tid = new_topic(admin)
    group = unique("ss-api-g")
    coordinator_ready(admin, coordinator_key(group, tid, 0))
    produce(admin, name, 10)
    # stored before the group's first fetch: start at 2, 4-5 accepted, 6 released twice
    assert initialize(admin, group, tid, (0, 0, 2)) == [(0, E.NONE, None)]
    assert write(admin, group, tid, 0, 0, -1, -1,
                 [(4, 5, ACKED, 1), (6, 6, AVAILABLE, 2)]) == (E.NONE, None)
    consumer = consumer_of(durable.port, group, (name, tid))
    assert consumer.fetch_until(6) == [(2, 3, 1), (6, 6, 3), (7, 9, 1)]
    # a write while the leader holds the share partition: it reads the store again, and what
    # it had acquired is delivered again
    assert write(admin, group, tid, 0, 0, -1, -1, [(2, 3, ARCHIVED, 1)]) == (E.NONE, None)
    assert consumer.fetch_until(4) == [(6, 6, 3), (7, 9, 1)]
    consumer.client.close()
    admin.close()


def test_what_the_leader_stored_is_read_after_kill_9(durable):
    admin = RawClient(durable.port)
    name, tid = new_topic(admin)
    group = unique("ss-api-g")
    assert alter_group_configs(admin, group, ("share.auto.offset.reset", "earliest", 0)) == \
        (E.NONE, None)
    produce(admin, name, 10)
    consumer = consumer_of(durable.port, group, (name, tid))
    assert consumer.fetch_until(10) == [(0, 9, 1)]
    response = consumer.acknowledge({0: [(0, 3, [1]), (4, 4, [3]), (5, 5, [2])]})
    assert [p.error_code for t in response.responses for p in t.partitions] == [E.NONE]
    admin.close()

    # killed while the consumer's connection is open: closing it first would end its share
    # session and release records 6-9 (a later store) before the kill, or not, by timing
    durable.kill()
    consumer.client.close()
    durable.start()
    admin = RawClient(durable.port)
    assert read(admin, group, tid, 0) == (E.NONE, None, 0, 0, [
        (0, 3, ACKED, 1), (4, 4, ARCHIVED, 1), (5, 5, AVAILABLE, 1)])
    assert summary(admin, group, tid, 0) == (E.NONE, None, 0, 0, 0, 5)
    # deleted by the API: the group starts again by its reset policy (earliest)
    from tests.conformance.test_share_state_conformance import delete
    assert delete(admin, group, tid, 0) == [(0, E.NONE, None)]
    again = consumer_of(durable.port, group, (name, tid))
    assert again.fetch_until(10) == [(0, 9, 1)]
    assert acquired(again.fetch(max_wait_ms=100)) == []
    again.client.close()
    admin.close()


def test_describe_offsets_reads_the_share_coordinator(durable):
    """DescribeShareGroupOffsets answers from the stored state, as Kafka's group coordinator
    reads the share coordinator's summary: what a state API wrote shows at once."""
    from tests.conformance.test_share_group_conformance import describe_offsets, offsets_of
    admin = RawClient(durable.port)
    name, tid = new_topic(admin)
    group = unique("ss-api-g")
    coordinator_ready(admin, coordinator_key(group, tid, 0))
    produce(admin, name, 10)
    assert initialize(admin, group, tid, (0, 0, 4)) == [(0, E.NONE, None)]
    assert write(admin, group, tid, 0, 0, -1, -1, [(4, 5, ACKED, 1)], 2) == (E.NONE, None)
    # not a share group (yet): nothing to describe
    assert offsets_of(describe_offsets(admin, group, name))[(name, 0)] == (-1, -1, 0)
    member = consumer_of(durable.port, group, (name, tid))   # joined, never fetched
    assert offsets_of(describe_offsets(admin, group, name))[(name, 0)] == (4, 4, 0)
    # v0 stores no delivery-complete count: the lag is not known
    assert write(admin, group, tid, 0, 0, -1, -1, [], version=0) == (E.NONE, None)
    assert offsets_of(describe_offsets(admin, group, name))[(name, 0)] == (4, -1, 0)
    member.client.close()
    admin.close()
