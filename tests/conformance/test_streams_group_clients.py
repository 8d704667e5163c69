"""Kafka Streams 4.3 with the streams rebalance protocol (KIP-1071) against Kafka 4.3.1 and
against kbroker (the ``target`` fixture), and the same application on the classic protocol.

The scenarios are kbroker.StreamsGroupScenarios (tests/java/src/main/java/kbroker/
StreamsGroupScenarios.java): a word count with exactly_once_v2, two instances in one group over
a 3-partition input (6 tasks), with streams.num.standby.replicas=1 on the group (so the 3
tasks with a store have a standby each, never on the instance that runs them); one instance
leaves and the other counts the rest alone. Its
output, read with read_committed, holds exactly one update per input word (counts 1..n per
word); Admin.describeStreamsGroups shows both members with 3 tasks each. An application whose
source topic is missing fails with MissingSourceTopicException, as on Kafka.

Printed: the time from starting the second instance until both process records, and from
closing one until the other owns every task (the issue's benchmark).
"""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.integration.test_java_client import jar, java_command, tail  # noqa: F401 - fixture
from tests.support import unique

MAIN = "kbroker.StreamsGroupScenarios"


def run(jar_path: str, *args: str, timeout: float = 240) -> tuple[list[dict], str]:
    command = java_command(jar_path, *args)
    command[command.index("-jar"):command.index("-jar") + 2] = ["-cp", jar_path, MAIN]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    lines = []
    for raw in proc.stdout.splitlines():
        try:
            lines.append(json.loads(raw))
        except ValueError:
            pass
    context = (f"exit {proc.returncode}\n--- stdout\n{tail(proc.stdout)}\n--- stderr\n"
               f"{tail(proc.stderr)}")
    assert proc.returncode == 0 and lines and lines[-1] == {"done": True}, context
    return lines, context


def line(lines: list[dict], key: str) -> dict:
    for entry in lines:
        if key in entry:
            return entry
    raise AssertionError(f"no {key!r} in {lines}")


@pytest.mark.parametrize("protocol", ["streams", "classic"])
def test_two_instances_count_exactly_once(target, jar, tmp_path, protocol):  # noqa: F811
    app = unique(f"wc-{protocol}")
    lines, context = run(jar, "wordcount", f"127.0.0.1:{target.port}", f"{app}-in",
                         f"{app}-out", app, str(tmp_path / "state"), "30", protocol)
    expected = line(lines, "expected")["expected"]
    assert line(lines, "a_owns_all")["a_owns_all"] is True, context
    both = line(lines, "both_processing")
    assert both["both_processing"] is True and (both["a"], both["b"]) == (3, 3), context
    assert line(lines, "counted_first_half")["counted_first_half"] is True, context
    handed = line(lines, "a_owns_all_after_b_left")
    assert handed["a_owns_all_after_b_left"] is True, context
    assert line(lines, "counted_all")["counted_all"] is True, context
    assert not any("streams_error" in entry for entry in lines), context
    committed = line(lines, "read_committed")["read_committed"]
    assert committed == {w: list(range(1, n + 1)) for w, n in expected.items()}, context
    if protocol == "streams":
        described = line(lines, "described")["described"]
        assert described["state"] == "Stable", context
        assert described["subtopologies"] == 2
        members = described["members"]
        assert sorted(mm["active"] for mm in members) == [3, 3], context
        assert len({mm["process_id"] for mm in members}) == 2
        # streams.num.standby.replicas=1: each task of the stateful subtopology (1, the
        # counts store) has one standby, on the instance that does not run it
        standbys = sorted(t for mm in members for t in mm["standby_tasks"])
        assert standbys == ["1_0", "1_1", "1_2"], context
        for mm in members:
            assert not set(mm["standby_tasks"]) & set(mm["active_tasks"]), context
    print(f"{target.name} {protocol}: both instances process records {both['ms']:.0f} ms after "
          f"the second started; the first owns every task {handed['ms']:.0f} ms after the "
          f"second began to close (its close took {handed['close_ms']:.0f} ms)")


def test_missing_source_topic(target, jar, tmp_path):  # noqa: F811
    app = unique("wc-missing")
    topic = unique("absent")
    lines, context = run(jar, "missing-source", f"127.0.0.1:{target.port}", topic, app,
                         str(tmp_path / "state"))
    seen = line(lines, "states")
    assert seen["streams_error"].startswith("MissingSourceTopicException: Missing source "
                                            f"topics: Source topics {topic} are missing."), \
        context
    assert seen["states"][-1] in ("PENDING_ERROR", "ERROR"), context
    described = line(lines, "described")["described"]
    assert described["subtopologies"] == 2, context
