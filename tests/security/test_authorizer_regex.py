"""A consumer-group member's regular expression resolves only to the topics its principal may
describe (Kafka's TopicRegexResolver), through the coordinator's ``topic_filter`` hook, which
the broker points at its authorizer (deterministic: the coordinator harness of tests/coordinator,
both with joins answered at once and in bursts)."""
from __future__ import annotations

import pytest

from tests.coordinator.consumer_harness import ConsumerHarness


@pytest.mark.parametrize("batched", [False, True])
def test_regex_resolves_to_describable_topics_only(batched):
    h = ConsumerHarness(batched=batched)
    for name in ("orders-eu", "orders-us", "orders-secret"):
        h.topics.create(name, 2)
    asked = []

    def topic_filter(context):
        asked.append(context.client_id)
        return lambda name: "secret" not in name
    h.coordinator.topic_filter = topic_filter
    reply = h.heartbeat(member_id="m1", topics=None, regex="orders-.*", client_id="alice")
    h.settle()
    assert reply.error == 0
    assert h.assigned(reply) == {"orders-eu": {0, 1}, "orders-us": {0, 1}}
    assert asked == ["alice"]
    # a new topic the principal may not describe changes nothing; one it may is added
    h.topics.create("orders-secret-2", 1)
    h.topics.create("orders-ap", 1)
    epoch = reply.value.member_epoch
    reply = h.heartbeat(member_id="m1", epoch=epoch, client_id="alice")
    h.settle()
    assert set(h.assigned(reply)) == {"orders-eu", "orders-us", "orders-ap"}


def test_without_a_filter_every_topic_matches():
    h = ConsumerHarness()
    for name in ("orders-eu", "orders-secret"):
        h.topics.create(name, 1)
    reply = h.heartbeat(member_id="m1", topics=None, regex="orders-.*")
    assert set(h.assigned(reply)) == {"orders-eu", "orders-secret"}
