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


_FILE_SECONDS: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Each test file's time (setup, call and teardown of all its tests), to see where the
    suite's time goes: written to tests/artifacts/durations.json at the end of the session."""
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus):
    import json
    import pathlib
    if not _FILE_SECONDS or hasattr(session.config, "workerinput"):
        return
    import os
    out = pathlib.Path(__file__).parent / "artifacts" / "durations.json"
    out.parent.mkdir(exist_ok=True)
    seconds = dict(_FILE_SECONDS)
    if os.environ.get("KBROKER_DURATIONS_APPEND") and out.exists():
        # the second part of tools/run-tests.sh adds its files to the first part's
        for path, took in json.loads(out.read_text())["files"].items():
            seconds[path] = seconds.get(path, 0.0) + took
    ranked = sorted(seconds.items(), key=lambda item: -item[1])
    out.write_text(json.dumps({"total_seconds": round(sum(seconds.values()), 1),
                               "files": {k: round(v, 1) for k, v in ranked}}, indent=1) + "\n")
