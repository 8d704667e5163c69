"""The broker's own bounds on a Fetch answer: Kafka's ``fetch.max.bytes`` (whatever the request's
max_bytes, except that the first batch goes whole), and ``queued.max.response.bytes``, the answers
not yet taken by the sockets (tests/integration/test_connection_limits.py runs the slow readers
it is for). Raw requests and a real consumer against an EmbeddedBroker."""
from __future__ import annotations

import pytest
from kafka import KafkaConsumer, TopicPartition

from broker.config import BrokerConfig, ConfigError
from broker.testing import EmbeddedBroker
from protocol import messages as m
from protocol.records import SimpleRecord, build_batch, iter_batches
from tests.support import RawClient

BATCHES = 10
RECORDS_PER_BATCH = 10


def _fill(client: RawClient, topic: str) -> int:
    """Ten batches of about 10 KB each; the size of one."""
    P = m.ProduceRequest
    size = 0
    for b in range(BATCHES):
        batch = build_batch([SimpleRecord(None, bytes([b]) * 1000)
                             for _ in range(RECORDS_PER_BATCH)])
        size = len(batch)
        answer = client.call(P(acks=1, timeout_ms=5000, topic_data=[P.TopicProduceData(
            name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])]), 9)
        assert answer.responses[0].partition_responses[0].error_code == 0
    return size


def _fetch(client: RawClient, topic: str, max_bytes: int = 52428800):
    F = m.FetchRequest
    answer = client.call(F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes,
                           isolation_level=0, session_id=0, session_epoch=-1,
                           topics=[F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                               partition=0, fetch_offset=0,
                               partition_max_bytes=52428800)])]), 12)
    part = answer.responses[0].partitions[0]
    assert (answer.error_code, part.error_code) == (0, 0)
    return list(iter_batches(bytes(part.records)))


@pytest.mark.parametrize("limit_batches", [2.5, 0.5])
def test_fetch_max_bytes_bounds_every_answer_but_the_first_batch_goes_whole(limit_batches):
    with EmbeddedBroker() as probe:       # the size of a batch, to set the limit from
        topic = probe.create_topic()
        with RawClient(probe.port) as client:
            size = _fill(client, topic)
    limit = max(1024, int(size * limit_batches))
    with EmbeddedBroker({"fetch.max.bytes": limit}) as kb:
        topic = kb.create_topic()
        with RawClient(kb.port) as client:
            _fill(client, topic)
            batches = _fetch(client, topic)
            assert len(batches) == max(1, int(limit_batches))
            assert len(_fetch(client, topic, max_bytes=size)) == 1  # the request's own, smaller

        # a real consumer reads everything, a few batches per fetch
        consumer = KafkaConsumer(bootstrap_servers=kb.bootstrap_servers,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 consumer_timeout_ms=5000)
        consumer.assign([TopicPartition(topic, 0)])
        values = [r.value for r in consumer]
        consumer.close()
        assert len(values) == BATCHES * RECORDS_PER_BATCH
        assert values[0] == bytes([0]) * 1000 and values[-1] == bytes([BATCHES - 1]) * 1000


@pytest.mark.parametrize("settings,message", [
    ({"fetch.max.bytes": 1023}, "fetch.max.bytes must be at least 1024"),
    ({"queued.max.response.bytes": 0}, "queued.max.response.bytes must be positive"),
])
def test_bad_limits_are_refused_at_start(settings, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(settings)
