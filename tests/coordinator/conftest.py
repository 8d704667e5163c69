from __future__ import annotations

import pytest

from tests.coordinator.consumer_harness import ConsumerHarness
from tests.coordinator.harness import Reply


@pytest.fixture(autouse=True)
def every_request_answered_at_most_once():
    Reply.created.clear()
    yield
    twice = [r for r in Reply.created if len(r.responses) > 1]
    Reply.created.clear()
    assert not twice, f"answered more than once: {twice[:3]}"


@pytest.fixture(params=["at once", "batched"])
def joins_at_once_and_batched(request):
    """The test with every heartbeat answered at once, and again with the broker's batching of
    joins (consumer/join_bursts.py) settled after each heartbeat: one join at a time
    must give the same answers and records both ways."""
    ConsumerHarness.batched_by_default = request.param == "batched"
    yield request.param
    ConsumerHarness.batched_by_default = False
