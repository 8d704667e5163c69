"""What a streams application can make the broker spend is bounded as on Kafka: internal topics
are created through the same limits as CreateTopics (Kafka's controller refuses more than
10,000 partitions in one request), so a topology asking for more gets none created and stays
MISSING_INTERNAL_TOPICS."""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode as E
from broker.testing import EmbeddedBroker
from tests.conformance import topics
from tests.conformance.test_streams_group_conformance import (
    MISSING_INTERNAL_TOPICS, StreamsMember, partition_count, word_count)
from tests.support import RawClient, unique


@pytest.fixture(scope="module")
def kb():
    with EmbeddedBroker() as broker:
        yield broker


def test_an_excessive_repartition_topic_is_not_created(kb):
    admin = RawClient(kb.port)
    source = topics.create_topic(admin, unique("bounds-in"), 1)
    group = unique("bounds-app")
    topology = word_count(group, source)
    topology.subtopologies[1].repartition_source_topics[0].partitions = 20_000
    member = StreamsMember(RawClient(kb.port), group, topology)
    for _ in range(3):
        response = member.heartbeat()
        assert response.error_code == E.NONE
        assert MISSING_INTERNAL_TOPICS in [s.status_code for s in response.status]
    assert partition_count(admin, f"{group}-words-repartition") is None
    assert partition_count(admin, f"{group}-counts-changelog") is None
    # within the limits the same shape is created
    small = word_count(group + "-2", source)
    small.subtopologies[1].repartition_source_topics[0].partitions = 4
    other = StreamsMember(RawClient(kb.port), group + "-2", small)
    assert other.heartbeat().error_code == E.NONE
    assert partition_count(admin, f"{group}-2-words-repartition") == 4
