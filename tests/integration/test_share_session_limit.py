"""group.share.max.share.sessions against a real broker: a share consumer past the limit is
refused SHARE_SESSION_LIMIT_REACHED after its MaxWaitMs (as Kafka delays the refusal), and the
slot comes back as soon as the connection that opened a session closes (Kafka's disconnect
listener), without waiting for any timer."""
from __future__ import annotations

import time

from protocol.errors import ErrorCode as E
from protocol.messages import MetadataRequest

from broker.testing import EmbeddedBroker
from tests.conformance import topics
from tests.conformance.test_share_group_conformance import ShareConsumer
from tests.support import RawClient, unique


def test_the_session_limit_refuses_after_max_wait_and_a_closed_connection_frees_its_slot():
    with EmbeddedBroker({"group.share.max.share.sessions": 1}) as kb:
        admin = RawClient(kb.port)
        name = topics.create_topic(admin, unique("share-limit"), 1)
        topic_id = admin.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name=name)], allow_auto_topic_creation=False), 12).topics[0].topic_id
        group = unique("share-limit-g")
        a = ShareConsumer(RawClient(kb.port), group, (name, topic_id))
        b = ShareConsumer(RawClient(kb.port), group, (name, topic_id))
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
