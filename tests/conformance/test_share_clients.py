"""Real share consumers against Kafka 4.3.1 and against kbroker (the ``target`` fixture): the same
scenario on both, and the same outcome asserted of each record.

The Java client's KafkaShareConsumer (kafka-clients 4.3.1): The scenario is ShareScenarios.share-consume
(tests/java/src/main/java/kbroker/ShareScenarios.java): two consumers share 300 records of a
one-partition topic, releasing values ending in 3 once and rejecting those ending in 7; then one
consumer acquires new records and stops polling, and the other gets them after the lock
duration (the smallest Kafka allows, 15 s).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import defaultdict

from protocol.errors import ErrorCode as E
from tests.integration.test_java_client import jar, java_command, tail  # noqa: F401 - fixture
from tests.support import RawClient, unique

from . import topics
from .test_share_group_conformance import alter_group_configs, describe, produce

RECORDS = 300
LOCK_MS = 15000


def run_share_scenario(target, jar_path: str) -> tuple[list[dict], float]:
    topic, group = unique("share-java"), unique("share-java-g")
    started = time.monotonic()
    proc = subprocess.run(
        ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", jar_path,
         "kbroker.ShareScenarios", "share-consume", f"127.0.0.1:{target.port}", topic, group,
         str(RECORDS), str(LOCK_MS)],
        capture_output=True, text=True, timeout=240)
    context = (f"{target.name}: exit {proc.returncode} after {time.monotonic() - started:.1f}s"
               f"\n--- stdout\n{tail(proc.stdout)}\n--- stderr\n{tail(proc.stderr)}")
    assert proc.returncode == 0, context
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()], context


def assert_shared_as_asked(events: list, context: str, records: int = RECORDS) -> list:
    """Phase 1 of the share scenarios (Java, franz-go): consumers "a" and "b" share ``records``
    records, releasing values ending in 3 at their first delivery and rejecting those ending
    in 7. Returns phase 1's deliveries."""
    deliveries = [e for e in events if e.get("phase") == 1]
    by_offset = defaultdict(list)
    for e in deliveries:
        by_offset[e["offset"]].append(e)
    # every record delivered; both consumers got some
    assert sorted(by_offset) == list(range(records)), context
    assert {e["consumer"] for e in deliveries} == {"a", "b"}, context
    accepted = [e["offset"] for e in deliveries if e["action"] == "accept"]
    rejected = [e["offset"] for e in deliveries if e["action"] == "reject"]
    # nothing accepted twice; every record accepted or rejected exactly once
    assert len(accepted) == len(set(accepted)), context
    assert sorted(accepted + rejected) == list(range(records)), context
    for offset, seen in by_offset.items():
        value = int(seen[0]["value"][1:])
        if value % 10 == 3:
            # released at its first delivery, back once with delivery count 2
            assert [(e["delivery"], e["action"]) for e in seen] == \
                [(1, "release"), (2, "accept")], (offset, seen)
        elif value % 10 == 7:
            # rejected records never come back
            assert [(e["delivery"], e["action"]) for e in seen] == [(1, "reject")], (offset, seen)
        else:
            assert [(e["delivery"], e["action"]) for e in seen] == [(1, "accept")], (offset, seen)
    return deliveries


def test_two_share_consumers(target, jar):  # noqa: F811 - the jar fixture
    events, context = run_share_scenario(target, jar)
    deliveries = assert_shared_as_asked(events, context)
    # phase 2: what "a" acquired and sat on reaches "b" after the lock duration, as a second
    # delivery; what "a" did not take reaches "b" at once
    held = [e for e in events if e.get("phase") == 2 and e["consumer"] == "a"]
    got = [e for e in events if e.get("phase") == 2 and e["consumer"] == "b"]
    assert held, context
    assert sorted(e["offset"] for e in got) == list(range(RECORDS, RECORDS + 20)), context
    redelivered = {e["offset"]: e for e in got if e["offset"] in {h["offset"] for h in held}}
    assert set(redelivered) == {h["offset"] for h in held}, context
    assert all(e["delivery"] == 2 for e in redelivered.values()), context
    taken_at = min(h["ms"] for h in held)
    assert all(e["ms"] - taken_at >= LOCK_MS - 1000 for e in redelivered.values()), context
    fresh = [e for e in got if e["offset"] not in redelivered]
    assert all(e["delivery"] == 1 for e in fresh), context
    # Admin: describeShareGroups, listGroups(SHARE), listShareGroupOffsets of the live group
    (described,) = [e for e in events if "described" in e]
    assert described["state"] == "Stable", context
    assert sorted(m["client"] for m in described["members"]) == ["share-a", "share-b"], context
    topic = described["members"][0]["assigned"][0].rsplit("-", 1)[0]
    assert all(m["assigned"] == [f"{topic}-0"] for m in described["members"]), context
    (listed,) = [e["listed"] for e in events if "listed" in e]
    assert listed == [{"type": "Share", "state": "Stable"}], context
    (offsets,) = [e for e in events if "offsets" in e]
    # everything is accepted: the stored start offset is at most the end, the lag 0
    assert 0 <= offsets["offsets"] <= RECORDS + 20 and offsets["lag"] == 0, context
    first = min(e["ms"] for e in deliveries)
    print(f"{target.name}: first record {first} ms after the consumers started; phase 1 "
          f"{next(e['ms'] for e in events if 'phase1' in e)} ms; held by a {len(held)}, "
          f"redelivered to b after {min(e['ms'] for e in redelivered.values()) - taken_at} ms")


# --------------------------------------------------------------------------- confluent-kafka

def test_confluent_share_consumers(target):
    """confluent-kafka 2.16's ShareConsumer (librdkafka's preview): two consumers in explicit
    mode share 60 records, releasing values ending in 3 once and rejecting those ending in 7."""
    import confluent_kafka as ck
    total = 60
    admin = RawClient(target.port, client_id="share-admin")
    topic, group = topics.create_topic(admin, unique("share-ck"), 1), unique("share-ck-g")
    assert alter_group_configs(admin, group, ("share.auto.offset.reset", "earliest", 0)) == \
        (E.NONE, None)
    produce(admin, topic, total)
    admin.close()
    consumers = [ck.ShareConsumer({"bootstrap.servers": f"127.0.0.1:{target.port}",
                                   "group.id": group, "share.acknowledgement.mode": "explicit",
                                   "client.id": f"ck-{who}"}) for who in "ab"]
    seen = defaultdict(list)
    finished = 0
    started = time.monotonic()
    first = None
    try:
        for c in consumers:
            c.subscribe([topic])
        while finished < total:
            assert time.monotonic() - started < 60, f"{finished} of {total}: {dict(seen)}"
            for who, c in zip("ab", consumers):
                for msg in c.poll(0.2):
                    assert msg.error() is None, msg.error()
                    if first is None:
                        first = time.monotonic() - started
                    value = int(msg.value().decode()[1:])
                    delivery = msg.delivery_count()
                    if value % 10 == 7:
                        action = ck.AcknowledgeType.REJECT
                    elif value % 10 == 3 and delivery == 1:
                        action = ck.AcknowledgeType.RELEASE
                    else:
                        action = ck.AcknowledgeType.ACCEPT
                    c.acknowledge(msg, action)
                    seen[msg.offset()].append((who, delivery, action.name.lower()))
                    finished += action != ck.AcknowledgeType.RELEASE
                c.commit_sync(10)
    finally:
        for c in consumers:
            c.close()
    assert sorted(seen) == list(range(total))
    for offset, deliveries in seen.items():
        kinds = [(d, a) for _who, d, a in deliveries]
        if offset % 10 == 3:
            assert kinds == [(1, "release"), (2, "accept")], (offset, deliveries)
        elif offset % 10 == 7:
            assert kinds == [(1, "reject")], (offset, deliveries)
        else:
            assert kinds == [(1, "accept")], (offset, deliveries)
    print(f"{target.name}: confluent-kafka first record after {first:.2f} s, all "
          f"{total} settled after {time.monotonic() - started:.2f} s, by consumer "
          f"{ {w: sum(1 for d in seen.values() for x in d if x[0] == w) for w in 'ab'} }")


def test_confluent_acknowledgements_sent_at_close_are_kept(target, capfd):
    """A confluent-kafka share consumer waits in a long poll, gets records produced meanwhile,
    accepts them and closes at once: its acknowledgements ride the close (librdkafka sends its
    leave heartbeat, then a ShareAcknowledge at epoch -1). As on Kafka, they are kept: a
    consumer of the group that comes after gets none of those records, and the closing one is
    not told its share session was not found."""
    import confluent_kafka as ck
    total = 10
    admin = RawClient(target.port, client_id="share-admin")
    topic, group = topics.create_topic(admin, unique("share-close"), 1), unique("share-close-g")
    assert alter_group_configs(admin, group, ("share.auto.offset.reset", "earliest", 0)) == \
        (E.NONE, None)

    def consumer(name):
        c = ck.ShareConsumer({"bootstrap.servers": f"127.0.0.1:{target.port}",
                              "group.id": group, "share.acknowledgement.mode": "explicit",
                              "client.id": name})
        c.subscribe([topic])
        return c

    first = consumer("ck-first")
    got = []
    started = time.monotonic()
    try:
        while time.monotonic() - started < 2:      # assigned, fetching, nothing to get
            assert not list(first.poll(0.2))
        produce(admin, topic, total)
        while len(got) < total:
            assert time.monotonic() - started < 30, (target.name, [m.offset() for m in got])
            batch = [msg for msg in first.poll(0.2) if msg.error() is None]
            for msg in batch:
                first.acknowledge(msg, ck.AcknowledgeType.ACCEPT)
            got += batch
    finally:
        first.close()
    assert sorted(msg.offset() for msg in got) == list(range(total))
    closing = capfd.readouterr().err
    assert "share session was not found" not in closing, (target.name, closing[-2000:])
    later = consumer("ck-later")
    again = []
    try:
        # a record produced now shows the later consumer was assigned and did fetch
        produce(admin, topic, 1, start=total)
        waited = time.monotonic()
        while not any(offset >= total for offset in again):
            assert time.monotonic() - waited < 30, (target.name, again)
            again += [msg.offset() for msg in later.poll(0.2) if msg.error() is None]
    finally:
        later.close()
        admin.close()
    assert again == [total], (target.name, again)


# --------------------------------------------------------------------------- a killed consumer

#: a share consumer in a process of its own: it acquires records, says which, and sits on them
#: (explicit mode, no acknowledgement) until it is killed
HOLDER = r"""
import json, sys, time
import confluent_kafka as ck
port, topic, group = sys.argv[1:4]
c = ck.ShareConsumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": group,
                      "share.acknowledgement.mode": "explicit", "client.id": "ck-holder"})
c.subscribe([topic])
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    held = [(m.offset(), m.delivery_count()) for m in c.poll(0.5) if m.error() is None]
    if held:
        print(json.dumps(held), flush=True)
        break
time.sleep(600)
"""


def both_assigned(client: RawClient, group: str) -> bool:
    """Whether the share group has two members, each assigned a partition."""
    (described,) = describe(client, group)
    return len(described.members) == 2 and all(
        member.assignment is not None and any(tp.partitions for tp in
                                              member.assignment.topic_partitions)
        for member in described.members)


def what_the_broker_saw(target, group: str) -> dict:
    """For a failure's message: the group as described, and kbroker's log lines about it."""
    client = RawClient(target.port, client_id="share-diagnose")
    try:
        (described,) = describe(client, group)
    finally:
        client.close()
    log_path = getattr(target.server, "log_path", None)
    lines = []
    if log_path:
        with open(log_path) as log:
            lines = [line.strip() for line in log if group in line]
    return {"members": [(m.member_id, m.member_epoch, m.client_id, str(m.assignment))
                        for m in described.members], "log": lines[-30:]}


def test_a_killed_share_consumer_releases_its_records_at_once(target):
    """A share consumer killed (kill -9) while it holds acquired records: the broker sees its
    connection close and ends its share session, releasing the records at once, as Kafka's
    ShareSessionCache does from its connection disconnect listener. The other consumer gets
    them as a second delivery long before their acquisition lock (30 s) would have expired."""
    import confluent_kafka as ck
    total = 20
    admin = RawClient(target.port, client_id="share-admin")
    topic, group = topics.create_topic(admin, unique("share-kill"), 1), unique("share-kill-g")
    assert alter_group_configs(admin, group, ("share.auto.offset.reset", "earliest", 0)) == \
        (E.NONE, None)
    produce(admin, topic, total)
    admin.close()
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(target.port), topic, group],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    other = None
    seen_by_broker = None
    try:
        line = holder.stdout.readline()
        assert line, f"{target.name}: the holder said nothing: {holder.stderr.read()[-2000:]}"
        held = dict(json.loads(line))
        assert held and all(count == 1 for count in held.values()), held
        other = ck.ShareConsumer({"bootstrap.servers": f"127.0.0.1:{target.port}",
                                  "group.id": group, "share.acknowledgement.mode": "explicit",
                                  "client.id": "ck-other"})
        other.subscribe([topic])
        seen: dict[int, int] = {}
        watcher = RawClient(target.port, client_id="share-watch")
        started = time.monotonic()
        # both members hold the partition (Kafka's first assignment to a new member can take
        # seconds on a loaded machine), and a while after that what the holder has is not free
        while not (both_assigned(watcher, group) and time.monotonic() - started > 3):
            assert time.monotonic() - started < 60, (target.name, describe(watcher, group))
            for msg in other.poll(0.2):
                assert msg.error() is None, msg.error()
                seen[msg.offset()] = msg.delivery_count()
                other.acknowledge(msg, ck.AcknowledgeType.ACCEPT)
        watcher.close()
        assert not set(seen) & set(held), (target.name, seen, held)
        killed = time.monotonic()
        holder.kill()
        holder.wait(10)
        while len(seen) < total and time.monotonic() - killed < 10:
            for msg in other.poll(0.2):
                assert msg.error() is None, msg.error()
                seen[msg.offset()] = msg.delivery_count()
                other.acknowledge(msg, ck.AcknowledgeType.ACCEPT)
        after = time.monotonic() - killed
        if len(seen) < total:
            seen_by_broker = what_the_broker_saw(target, group)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        if other is not None:
            other.close()
    assert sorted(seen) == list(range(total)), (target.name, seen, held, seen_by_broker)
    assert {offset: seen[offset] for offset in held} == {offset: 2 for offset in held}, \
        (target.name, seen, held)
    assert after < 10, (target.name, after)     # the lock is 30 s: the disconnect released them
    print(f"{target.name}: {len(held)} records held by the killed consumer, all {total} at the "
          f"other {after:.2f} s after the kill")
