from __future__ import annotations

import pytest

from tests.coordinator.harness import Reply


@pytest.fixture(autouse=True)
def every_request_answered_at_most_once():
    Reply.created.clear()
    yield
    twice = [r for r in Reply.created if len(r.responses) > 1]
    Reply.created.clear()
    assert not twice, f"answered more than once: {twice[:3]}"
