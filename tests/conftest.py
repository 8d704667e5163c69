"""Shared fixtures: a real broker process on a free port, in memory or with a data directory."""
from __future__ import annotations

import pytest

from tests.support import BrokerProcess, free_port  # noqa: F401  (re-exported for tests)


@pytest.fixture(scope="module")
def broker():
    """One in-memory broker per test module (topics are named per test to stay independent)."""
    proc = BrokerProcess()
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session", autouse=True)
def no_broker_outlives_the_session():
    """A test that fails before stopping its broker must not leave the process running."""
    yield
    BrokerProcess.kill_leftovers()
