"""Share sessions and the connections that opened them, on a real broker: a session ends as soon
as its connection closes (Kafka's disconnect listener), which frees its slot of
group.share.max.share.sessions and releases what its member held, even while that member's
ShareFetch is parked as a long poll."""
from __future__ import annotations

import time

from protocol.errors import ErrorCode as E
from protocol.messages import MetadataRequest

from broker.testing import EmbeddedBroker
from tests.conformance import topics
from tests.conformance.test_share_group_conformance import (
    ShareConsumer, acquired, alter_group_configs, produce)
from tests.support import RawClient, unique


def share_topic(kb, prefix: str):
    admin = RawClient(kb.port)
    name = topics.create_topic(admin, unique(prefix), 1)
    topic_id = admin.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        name=name)], allow_auto_topic_creation=False), 12).topics[0].topic_id
    return admin, (name, topic_id)


def test_the_session_limit_refuses_after_max_wait_and_a_closed_connection_frees_its_slot():
    with EmbeddedBroker({"group.share.max.share.sessions": 1}) as kb:
        admin, topic = share_topic(kb, "share-limit")
        group = unique("share-limit-g")
        a = ShareConsumer(RawClient(kb.port), group, topic)
        b = ShareConsumer(RawClient(kb.port), group, topic)
        a.heartbeat()
        b.heartbeat()
        assert a.fetch(max_wait_ms=0).error_code == E.NONE           # the one session
        started = time.monotonic()
        refused = b.fetch(max_wait_ms=300)
        waited = time.monotonic() - started
        assert refused.error_code == E.SHARE_SESSION_LIMIT_REACHED and waited >= 0.25, \
            (refused, waited)
        a.client.close()                                              # a's session ends with it
        deadline = time.monotonic() + 5
        while (answer := b.fetch(max_wait_ms=0)).error_code == E.SHARE_SESSION_LIMIT_REACHED:
            assert time.monotonic() < deadline, answer
        assert answer.error_code == E.NONE, answer
        assert kb.call(lambda: len(kb.broker.shares.sessions.sessions)) == 1



def held_with_a_parked_fetch(kb, prefix: str, max_wait_ms: int):
    """Consumer ``a`` holds all 5 records of a new topic and has a ShareFetch parked (nothing
    left to acquire); ``b`` is assigned the same partition. -> (a, b)"""
    from protocol.messages import ShareFetchRequest as F
    admin, topic = share_topic(kb, prefix)
    group = unique(prefix + "-g")
    assert alter_group_configs(admin, group, ("share.auto.offset.reset", "earliest", 0)) == \
        (E.NONE, None)
    produce(admin, topic[0], 5)
    a = ShareConsumer(RawClient(kb.port), group, topic)
    b = ShareConsumer(RawClient(kb.port), group, topic)
    for member in (a, b):
        member.heartbeat()
        member.until_assigned(lambda m=member: m.assigned == {0})
    assert a.fetch_until(5) == [(0, 4, 1)]
    a.client.send(F(group_id=group, member_id=a.member_id, share_session_epoch=a.session_epoch,
                    max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, max_records=500,
                    batch_size=500, topics=[F.FetchTopic(topic_id=topic[1], partitions=[
                        F.FetchPartition(partition_index=0, acknowledgement_batches=[])])],
                    forgotten_topics_data=[]), 1)
    deadline = time.monotonic() + 5
    while kb.call(lambda: kb.broker.fetches.purgatory.waiting_by_kind().get("share_fetch", 0)) < 1:
        assert time.monotonic() < deadline, "the ShareFetch was not parked"
        time.sleep(0.01)
    return a, b


def test_a_parked_share_fetch_of_a_closed_session_acquires_nothing():
    """``a``'s share session is closed (a ShareFetch at epoch -1, sent on another connection)
    while its ShareFetch is parked: its records are released, which wakes the parked fetch; that
    fetch must not acquire them again for a session that is gone: ``b`` gets them at once, not
    after the 30 s lock."""
    with EmbeddedBroker() as kb:
        a, b = held_with_a_parked_fetch(kb, "share-closed", 30000)
        closer = ShareConsumer(RawClient(kb.port), a.group, (a.topic, a.topic_id),
                               member_id=a.member_id)
        assert closer.fetch(epoch=-1, max_wait_ms=0).error_code == E.NONE
        assert b.fetch_until(5, timeout=5) == [(0, 4, 2)]


def test_a_member_leaving_the_group_keeps_its_session_and_records():
    """``a`` leaves the group (a heartbeat at epoch -1) while its ShareFetch is parked: as on
    Kafka, its share session and what it acquired stay until the session closes (a consumer
    leaves before it sends its last acknowledgements), so ``b`` gets nothing of them."""
    with EmbeddedBroker() as kb:
        a, b = held_with_a_parked_fetch(kb, "share-left", 30000)
        leave = ShareConsumer(RawClient(kb.port), a.group, (a.topic, a.topic_id),
                              member_id=a.member_id)
        assert leave.heartbeat(epoch=-1).error_code == E.NONE
        opened = b.fetch(max_wait_ms=500)
        assert opened.error_code == E.NONE and acquired(opened) == []
        assert kb.call(lambda: kb.broker.shares.sessions.get(a.group, a.member_id)) is not None
        assert acquired(b.fetch(max_wait_ms=300)) == []


def test_a_closed_connection_with_a_parked_share_fetch_releases_within_its_wait():
    """A consumer killed while its ShareFetch is parked: as on Kafka, whose network layer does
    not read a connection with a request in flight, the close is seen when the parked fetch is
    answered (at its MaxWaitMs, 500 ms for the Java and librdkafka share consumers); then the
    records go to ``b``, long before their 30 s lock."""
    with EmbeddedBroker() as kb:
        a, b = held_with_a_parked_fetch(kb, "share-gone", 500)
        a.client.close()
        started = time.monotonic()
        assert b.fetch_until(5, timeout=5) == [(0, 4, 2)]
        assert time.monotonic() - started < 5
