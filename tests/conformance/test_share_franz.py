"""franz-go's share consumer (kgo.ShareGroup, franz-go v1.22.3) against Kafka 4.3.1 and against
kbroker (the ``target`` fixture): the same scenario on both, the same outcome asserted of each
record.

The scenario is tests/go/share/main.go: consumers "a" and "b" share 300 records of a
one-partition topic, at most 50 a fetch (ShareFetch's record_limit acquire mode, which splits the
one batch they were produced in), releasing values ending in 3 once and rejecting those ending
in 7; "b" leaves; then "a" acquires 20 new records and stops (no poll, no fetch: it pauses the
topic and stays in the group), and a new consumer "c" gets them as second deliveries once their
acquisition locks expire (the smallest lock Kafka allows, 15 s). franz-go exposes the
acknowledgement types (Record.Ack: accept, release, reject, renew) and the delivery count
(Record.DeliveryCount), so every per-record check of the Java scenario applies here too.
FRANZ_DEBUG=1 in the environment makes the clients log at debug level on stderr.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from protocol.errors import ErrorCode as E
from tests.support import RawClient, unique

from . import topics
from .test_share_clients import assert_shared_as_asked
from .test_share_group_conformance import alter_group_configs, produce

RECORDS = 300
LOCK_MS = 15000
GO_DIR = Path(__file__).resolve().parents[1] / "go"


def go_env() -> dict:
    """Modules from the Go module proxy, cached under ~/.cache so a machine downloads them once
    (tools/install-test-deps.sh builds the same way)."""
    cache = Path.home() / ".cache"
    return {**os.environ, "GOFLAGS": "-mod=mod", "GOMODCACHE": str(cache / "go-mod"),
            "GOCACHE": os.environ.get("GOCACHE", str(cache / "go-build"))}


@pytest.fixture(scope="session")
def share_binary() -> str:
    """tests/go/bin/share, built from tests/go (go.mod pins franz-go); quick when it is cached.
    Linked under a name of this process's and renamed into place: test workers may build it at
    once, and one may be running it."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    built = GO_DIR / "bin" / f"share.{os.getpid()}"
    proc = subprocess.run([go, "build", "-o", str(built), "./share"], cwd=GO_DIR, env=go_env(),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    os.replace(built, GO_DIR / "bin" / "share")
    return str(GO_DIR / "bin" / "share")


def tail(text: str, n: int = 4000) -> str:
    return text[-n:]


def test_franz_go_share_consumers(target, share_binary):
    admin = RawClient(target.port, client_id="share-admin")
    topic, group = topics.create_topic(admin, unique("share-franz"), 1), unique("share-franz-g")
    assert alter_group_configs(admin, group, ("share.auto.offset.reset", "earliest", 0),
                               ("share.record.lock.duration.ms", str(LOCK_MS), 0)) == \
        (E.NONE, None)
    produce(admin, topic, RECORDS)
    admin.close()
    started = time.monotonic()
    proc = subprocess.run([share_binary, f"127.0.0.1:{target.port}", topic, group, str(RECORDS),
                           str(LOCK_MS)], capture_output=True, text=True, timeout=180)
    context = (f"{target.name}: exit {proc.returncode} after {time.monotonic() - started:.1f}s"
               f"\n--- stdout\n{tail(proc.stdout)}\n--- stderr\n{tail(proc.stderr)}")
    assert proc.returncode == 0, context
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    # no acknowledgement refused while the consumers run (closing "a" may release records "c"
    # accepted since; that is the close's business)
    closing = next(i for i, e in enumerate(events) if "phase2" in e)
    assert [e for e in events[:closing] if "ack_error" in e] == [], context

    deliveries = assert_shared_as_asked(events, context, RECORDS)

    # phase 2: "a" took records and stopped; "b" had left, so "a" alone fetched and acquired all
    # 20, and "c" gets every one of them as a second delivery, not before their locks expire
    # (a paused partition leaves "a"'s share session, and its acquired records stay locked)
    held = [e for e in events if e.get("phase") == 2 and e["consumer"] == "a"]
    got = [e for e in events if e.get("phase") == 2 and e["consumer"] == "c"]
    assert held and all(e["delivery"] == 1 for e in held), context
    assert sorted(e["offset"] for e in got) == list(range(RECORDS, RECORDS + 20)), context
    assert all(e["delivery"] == 2 for e in got), context
    taken_at = min(e["ms"] for e in held)
    assert all(e["ms"] - taken_at >= LOCK_MS - 1000 for e in got), context

    first = min(e["ms"] for e in deliveries)
    phase1 = next(e["ms"] for e in events if "phase1" in e)
    print(f"{target.name}: franz-go first record {first} ms after the consumers started, all "
          f"{RECORDS} settled at {phase1} ms ({sum(e['consumer'] == 'a' for e in deliveries)} "
          f"deliveries to a, {sum(e['consumer'] == 'b' for e in deliveries)} to b); a held "
          f"{len(held)}, c got the 20 after {min(e['ms'] for e in got) - taken_at} ms; "
          f"run {time.monotonic() - started:.1f} s")
