"""The real Java client (org.apache.kafka:kafka-clients 4.x) against a real broker process.

The client runs as ``java -jar tests/java/target/client-scenarios.jar SUBCOMMAND ...`` (source in
tests/java/src/main/java/kbroker/ClientScenarios.java) and prints one JSON object per line on
stdout, which these tests parse. The jar is built by tools/install-test-deps.sh, never here.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from tests.support import ROOT, unique

JAVA_DIR = os.path.join(ROOT, "tests", "java")
JAR = os.path.join(JAVA_DIR, "target", "client-scenarios.jar")
BUILD_HINT = ("run `bash tools/install-test-deps.sh` (it builds the jar with "
              "`mvn -q -f tests/java/pom.xml package`)")

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 2          # fixed by ClientScenarios.produce-consume
PER_PARTITION = 40
EARLY_TS, LATE_TS, MID_TS = 1_000_000, 2_000_000, 1_500_000


@pytest.fixture(scope="module")
def jar():
    """The scenarios jar; a clear failure (never a skip) when it is missing or older than its
    sources."""
    if shutil.which("java") is None:
        pytest.fail("`java` is not on PATH: Java 17 is needed for the Java client tests")
    if not os.path.exists(JAR):
        pytest.fail(f"{JAR} is missing: {BUILD_HINT}")
    sources = [os.path.join(JAVA_DIR, "pom.xml")] + glob.glob(
        os.path.join(JAVA_DIR, "src", "**", "*"), recursive=True)
    stale = [s for s in sources if os.path.isfile(s) and os.path.getmtime(s) > os.path.getmtime(JAR)]
    if stale:
        pytest.fail(f"{JAR} is older than {', '.join(os.path.relpath(s, ROOT) for s in stale)}: "
                    f"{BUILD_HINT}")
    return JAR


def java_command(jar: str, *args: str) -> list[str]:
    return ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-jar", jar, *args]


def tail(text: str, n: int = 4000) -> str:
    return text if len(text) <= n else "...\n" + text[-n:]


# ---------------------------------------------------------------- produce and consume

def expected_partition(p: int) -> list[tuple[int, int, str, str]]:
    """(offset, timestamp, key, value) of partition p, as ClientScenarios produces them: the
    records are sent alternating between partitions and the first half carries EARLY_TS."""
    total = PER_PARTITION * PARTITIONS
    return [(i, EARLY_TS if i * PARTITIONS + p < total // 2 else LATE_TS,
             f"java-k{p}-{i}", f"java-v{p}-{i}" * 3) for i in range(PER_PARTITION)]


@pytest.mark.parametrize("codec", CODECS)
def test_java_produce_consume(broker, jar, codec):
    topic = unique(f"java-{codec}")
    started = time.monotonic()
    proc = subprocess.run(
        java_command(jar, "produce-consume", broker.bootstrap, topic, codec, str(PER_PARTITION)),
        capture_output=True, text=True, timeout=180)
    context = (f"exit {proc.returncode} after {time.monotonic() - started:.1f}s\n"
               f"--- stdout\n{tail(proc.stdout)}\n--- stderr\n{tail(proc.stderr)}\n"
               f"--- broker log\n{tail(broker.logs())}")
    assert proc.returncode == 0, context
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert lines[-1] == {"done": True}, context
    expected = {p: expected_partition(p) for p in range(PARTITIONS)}

    # every send acknowledged at the next offset of its partition, with its CreateTime
    acked = next(line["acked"] for line in lines if "acked" in line)
    sent = [(p, i, expected[p][i][1]) for i in range(PER_PARTITION) for p in range(PARTITIONS)]
    assert [tuple(a) for a in acked] == sent, context

    def phase(name):
        got = {p: [] for p in range(PARTITIONS)}
        for line in lines:
            if line.get("phase") == name:
                got[line["p"]].append((line["o"], line["ts"], line["k"], line["v"]))
        return got

    # from earliest: exactly what was produced, in order per partition
    assert phase("earliest") == expected, context
    bounds = next(line["bounds"] for line in lines if "bounds" in line)
    assert bounds == {str(p): [0, PER_PARTITION] for p in range(PARTITIONS)}, context

    # ListOffsets by timestamp: the first record at or after the midpoint, then consume from there
    first_late = {p: next(r for r in expected[p] if r[1] >= MID_TS) for p in range(PARTITIONS)}
    answer = next(line["offsetsForTimes"] for line in lines if "offsetsForTimes" in line)
    assert answer == {str(p): {"o": first_late[p][0], "ts": LATE_TS} for p in range(PARTITIONS)}, \
        context
    assert first_late[0][0] == PER_PARTITION // 2
    assert phase("from-timestamp") == {p: expected[p][first_late[p][0]:]
                                       for p in range(PARTITIONS)}, context


# ---------------------------------------------------------------- consumer group

class GroupMember:
    """One `group-consume` process; its stdout lines are parsed as they arrive."""

    def __init__(self, jar: str, name: str, bootstrap: str, topic: str, group: str,
                 assignor: str, extra: tuple[str, ...] = ()) -> None:
        self.name = name
        self.lines: list[dict] = []
        self.lock = threading.Lock()
        self.stderr = tempfile.TemporaryFile(mode="w+")
        # the consumer protocol takes its heartbeat interval from the broker (and refuses
        # heartbeat.interval.ms)
        interval = () if assignor.startswith("consumer") else (
            "--prop", "heartbeat.interval.ms=500")
        self.proc = subprocess.Popen(
            java_command(jar, "group-consume", bootstrap, topic, group, assignor, "120",
                         *interval, *extra),
            stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                line = {"unparsed": raw.rstrip("\n")}
            with self.lock:
                self.lines.append(line)

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.lines)

    def records(self) -> list[tuple[int, int, str]]:
        return [(line["p"], line["o"], line["v"]) for line in self.snapshot() if "o" in line]

    def latest_assignment(self):
        assigned = [line for line in self.snapshot() if "assigned" in line]
        return (assigned[-1]["generation"], assigned[-1]["assignment"]) if assigned else None

    def stop(self, timeout: float = 40.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout)
        self.reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def report(self) -> str:
        self.stderr.seek(0)
        out = "\n".join(json.dumps(line) for line in self.snapshot())
        return (f"--- {self.name} (exit {self.proc.poll()}) stdout\n{tail(out, 3000)}\n"
                f"--- {self.name} stderr\n{tail(self.stderr.read(), 3000)}")


class MemberSet:
    """A group's member processes, live and retired, with what a failing test reports (every
    member's output and the broker log) and a wait that fails early when a member exits."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.live: dict[str, GroupMember] = {}
        self.retired: list[GroupMember] = []

    def context(self, what: str) -> str:
        parts = [m.report() for m in self.retired + list(self.live.values())]
        return (f"{what}\n" + "\n".join(parts)
                + f"\n--- broker log\n{tail(self.broker.logs(), 6000)}")

    def all_records(self) -> list:
        return [r for m in self.retired + list(self.live.values()) for r in m.records()]

    def wait_for(self, what: str, condition, timeout: float = 60.0,
                 watch_exits: bool = True) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            for m in self.live.values():
                if watch_exits and m.proc.poll() is not None:
                    pytest.fail(self.context(f"{m.name} exited while waiting for {what}"))
            time.sleep(0.1)
        pytest.fail(self.context(f"timed out after {timeout}s waiting for {what}"))


def produce(bootstrap: str, topic: str, partitions: int, start: int, count: int) -> None:
    """`count` records per partition with values p-i for i in [start, start+count)."""
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for i in range(start, start + count):
        for p in range(partitions):
            producer.send(topic, key=f"k{p}".encode(), value=f"{p}-{i}".encode(), partition=p)
    producer.flush(30)
    producer.close()


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky", "consumer:uniform",
                                      "consumer:range"])
def test_java_consumer_group_exactly_once(broker, jar, assignor):
    """Three members share a 6-partition topic, commit after every poll and consume everything
    exactly once; one leaves with close() (LeaveGroup, or a heartbeat with epoch -1) and the
    others take its partitions; restarted, it resumes at the committed offsets. Classic members
    assign with range or cooperative-sticky; "consumer:..." members use group.protocol=consumer
    (KIP-848) with that server-side assignor."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    partitions, topic, group = 6, unique("java-grp"), unique(f"java-{assignor}")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    produce(broker.bootstrap, topic, partitions, 0, 10)                     # offsets 0..9

    group_set = MemberSet(broker)
    members, retired = group_set.live, group_set.retired

    def start(name: str) -> GroupMember:
        members[name] = GroupMember(jar, name, broker.bootstrap, topic, group, assignor)
        return members[name]

    context, all_records, wait_for = (group_set.context, group_set.all_records,
                                      group_set.wait_for)

    def balanced() -> bool:
        """Every live member saw the same generation and the assignments split all partitions
        evenly with no overlap."""
        latest = [m.latest_assignment() for m in members.values()]
        if any(a is None for a in latest):
            return False
        # a consumer-protocol member whose partitions did not change is not called back when
        # its epoch moves on, so only classic members must report the same generation
        if not assignor.startswith("consumer") and len({g for g, _ in latest}) != 1:
            return False
        owned = [p for _, a in latest for p in a]
        share = partitions // len(members)
        return sorted(owned) == list(range(partitions)) and all(len(a) == share for _, a in latest)

    def consumed_up_to(per_partition: int) -> bool:
        return len({(p, o) for p, o, _ in all_records()}) >= partitions * per_partition

    def assert_exactly_once(per_partition: int) -> None:
        seen: dict[tuple[int, int], str] = {}
        duplicates = []
        for p, o, v in all_records():
            if (p, o) in seen:
                duplicates.append((p, o))
            seen[(p, o)] = v
        assert not duplicates, context(f"records delivered more than once: {sorted(duplicates)}")
        want = {(p, i): f"{p}-{i}" for p in range(partitions) for i in range(per_partition)}
        assert seen == want, context("consumed records differ from produced ones")

    try:
        timings = {}
        t0 = time.monotonic()
        for name in ("a", "b", "c"):
            start(name)
        wait_for("three balanced members", balanced)
        wait_for("the first 60 records", lambda: consumed_up_to(10))
        assert_exactly_once(10)
        timings["form+consume"] = time.monotonic() - t0

        # one member leaves cleanly: close() sends LeaveGroup, the others take its partitions
        t0 = time.monotonic()
        leaving = members.pop("c")
        retired.append(leaving)
        code = leaving.stop()
        assert code in (0, 143), context(f"c exited with {code}")
        assert {"closed": "signal"} in leaving.snapshot(), context("c did not close its consumer")
        left_with = leaving.latest_assignment()[1]
        wait_for("two members owning all partitions", balanced, timeout=30)
        timings["leave+rebalance"] = time.monotonic() - t0
        produce(broker.bootstrap, topic, partitions, 10, 5)                 # offsets 10..14
        wait_for("records 10..14", lambda: consumed_up_to(15))
        assert_exactly_once(15)
        taken_over = {p for p, o, _ in all_records() if o >= 10 and p in left_with}
        assert taken_over == set(left_with), context("c's partitions were not taken over")

        # restarted, it joins again and resumes at the committed offsets (earliest reset would
        # re-read from 0 and show up as duplicates)
        t0 = time.monotonic()
        again = start("c")
        wait_for("three balanced members again", balanced)
        timings["rejoin+rebalance"] = time.monotonic() - t0
        produce(broker.bootstrap, topic, partitions, 15, 5)                 # offsets 15..19
        wait_for("records 15..19", lambda: consumed_up_to(20))
        assert_exactly_once(20)
        mine = again.latest_assignment()[1]
        assert sorted({p for p, _, _ in again.records()}) == mine, context("restarted c idle")
        assert all(o >= 15 for _, o, _ in again.records()), context("restarted c re-read")

        for m in list(members.values()):
            code = m.stop()
            assert code in (0, 143), context(f"{m.name} exited with {code}")
        # what OffsetFetch answers for the group once everyone is gone
        from kafka import KafkaConsumer, TopicPartition
        probe = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                              enable_auto_commit=False)
        committed = {p: probe.committed(TopicPartition(topic, p)) for p in range(partitions)}
        probe.close()
        assert committed == {p: 20 for p in range(partitions)}, context(f"offsets {committed}")
        print("timings:", {k: round(v, 2) for k, v in timings.items()})
    finally:
        for m in retired + list(members.values()):
            m.kill()
        admin.close()


def test_java_admin_client(jar, broker):
    """The Java AdminClient as topic tools and UIs use it (ClientScenarios.admin): incremental
    config changes, DeleteRecords, DescribeLogDirs, ACLs without an authorizer and
    DescribeProducers. Real Kafka 4.3.1 printed the same lines (producer id aside)."""
    topic = unique("java-admin")
    proc = subprocess.run(java_command(jar, "admin", broker.bootstrap, topic),
                          capture_output=True, text=True, timeout=180)
    context = (f"exit {proc.returncode}\n--- stdout\n{tail(proc.stdout)}\n--- stderr\n"
               f"{tail(proc.stderr)}\n--- broker log\n{tail(broker.logs())}")
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    # a failing step prints {"step": ..., "error": "<exception class>: <message>"} and exits 1
    failed = [line for line in lines if "error" in line and line.get("step") != "acls"]
    assert proc.returncode == 0 and not failed, context
    assert lines[-1] == {"done": True}, context
    steps = {line["step"]: line for line in lines if "step" in line}
    assert steps["produced"] == {"step": "produced", "last_offset": 9}, context
    assert steps["configs"] == {"step": "configs", "retention_ms": "3600000",
                                "retention_source": "DYNAMIC_TOPIC_CONFIG",
                                "cleanup_policy": "delete,compact"}, context
    assert steps["configs-reset"] == {"step": "configs-reset", "retention_ms": "604800000",
                                      "retention_source": "DEFAULT_CONFIG"}, context
    assert steps["delete-records"] == {"step": "delete-records", "low_watermark": 4,
                                       "earliest": 4}, context
    log_dirs = steps["log-dirs"]
    assert log_dirs["dirs"] == 1 and log_dirs["size"] > 0 and log_dirs["offset_lag"] == 0, \
        context
    assert steps["acls"] == {"step": "acls", "error": "SecurityDisabledException"}, context
    active = steps["producers"]["active"]
    assert len(active) == 1, context
    assert active[0]["producer_id"] >= 0 and active[0]["producer_epoch"] == 0, context
    assert active[0]["last_sequence"] == 9, context


def test_java_consumer_protocol_static_restart_and_killed_member(jar):
    """group.protocol=consumer with the Java client: a static member closes (a heartbeat with
    epoch -2) and comes back with its partitions while the other member sees nothing move; then
    a SIGKILLed member is fenced after the broker's session timeout and its partitions move."""
    from tests.support import BrokerProcess
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    broker = BrokerProcess(overrides={"group.consumer.session.timeout.ms": 6000,
                                      "group.consumer.min.session.timeout.ms": 6000})
    broker.start()
    partitions, topic, group = 6, unique("java-cp"), unique("java-cp-static")
    group_set = MemberSet(broker)
    members = group_set.live

    def start(name: str, instance: str) -> GroupMember:
        members[name] = GroupMember(jar, name, broker.bootstrap, topic, group,
                                    "consumer:uniform", ("--static", instance))
        return members[name]

    context = group_set.context

    def wait_for(what: str, condition, timeout: float = 60.0) -> None:
        # members are killed on purpose here: an exit is not a failure
        group_set.wait_for(what, condition, timeout, watch_exits=False)

    def owned(name: str) -> list[int]:
        latest = members[name].latest_assignment()
        return sorted(latest[1]) if latest else []

    def split() -> bool:
        a, b = owned("a"), owned("b")
        return len(a) == 3 and len(b) == 3 and sorted(a + b) == list(range(partitions))

    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(topic, partitions, 1)])
        admin.close()
        start("a", "java-a")
        start("b", "java-b")
        wait_for("two static members sharing the topic", split)
        before = owned("b")
        a_lines = len(members["a"].snapshot())
        assert members["b"].stop() in (0, 143), context("b did not close")
        start("b", "java-b")
        wait_for("b back with its partitions", lambda: owned("b") == before)
        moved = [line for line in members["a"].snapshot()[a_lines:]
                 if "assigned" in line and line["assigned"] or "revoked" in line
                 and line["revoked"]]
        assert moved == [], context("a saw partitions move while b restarted")

        members["b"].kill()
        wait_for("a owning every partition after b's session expired",
                 lambda: owned("a") == list(range(partitions)), timeout=40)
        assert "member fenced: its session expired" in broker.logs()
    finally:
        for m in members.values():
            m.kill()
        broker.stop()


def test_java_classic_group_rolled_to_the_consumer_protocol_and_back(broker, jar):
    """Three classic Java members (range) consume a 6-partition topic and commit after every
    poll; one by one each is restarted with group.protocol=consumer. The first restart upgrades
    the running group (online migration); the classic members keep working in it until their
    turn. Then they are rolled back one by one: when the last consumer-protocol member leaves,
    the group is a classic group again. Every record is consumed exactly once throughout."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    partitions, topic, group = 6, unique("java-roll"), unique("java-roll")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()
    group_set = MemberSet(broker)
    members, retired = group_set.live, group_set.retired
    produced = 0

    def start(name: str, assignor: str) -> None:
        members[name] = GroupMember(jar, name, broker.bootstrap, topic, group, assignor)

    context, all_records, wait_for = (group_set.context, group_set.all_records,
                                      group_set.wait_for)

    def covered() -> bool:
        latest = [m.latest_assignment() for m in members.values()]
        if any(a is None for a in latest):
            return False
        owned = [p for _, a in latest for p in a]
        return sorted(owned) == list(range(partitions))

    def produce_more(count: int) -> None:
        nonlocal produced
        produce(broker.bootstrap, topic, partitions, produced, count)
        produced += count
        wait_for(f"records up to {produced}",
                 lambda: len({(p, o) for p, o, _ in all_records()}) >= partitions * produced)

    try:
        for name in ("a", "b", "c"):
            start(name, "range")
        wait_for("three classic members", covered)
        produce_more(5)
        for name in ("a", "b", "c"):
            leaving = members.pop(name)
            retired.append(leaving)
            assert leaving.stop() in (0, 143), context(f"{name} did not stop")
            start(name, "consumer:uniform")
            wait_for(f"{name} back with the consumer protocol, everything covered", covered)
            produce_more(5)
        assert "classic group converted to a consumer group" in broker.logs()
        for name in ("a", "b", "c"):
            leaving = members.pop(name)
            retired.append(leaving)
            assert leaving.stop() in (0, 143), context(f"{name} did not stop")
            start(name, "range")
            wait_for(f"{name} back with the classic protocol, everything covered", covered)
            produce_more(5)
        assert "consumer group converted back to a classic group" in broker.logs()
        seen: dict[tuple[int, int], int] = {}
        for p, o, _v in all_records():
            seen[(p, o)] = seen.get((p, o), 0) + 1
        duplicates = sorted(k for k, n in seen.items() if n > 1)
        assert not duplicates, context(f"consumed twice: {duplicates}")
        assert len(seen) == partitions * produced, context("records missing")
    finally:
        for m in retired + list(members.values()):
            m.kill()


# ---------------------------------------------------------------- fetch sessions

def fetch_counts(port: int) -> dict[str, float]:
    """The broker's fetch requests by session kind, and its fetch sessions (/metrics)."""
    import re
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {m[1]: float(m[2]) for m in re.finditer(
        r'^kafka_fetch_requests_by_session_total\{kind="(\w+)"\} (\S+)$', text, re.M)}
    out["sessions"] = float(re.search(r"^kafka_incremental_fetch_sessions (\S+)$", text,
                                      re.M)[1])
    out["versions"] = sorted(int(m[1]) for m in re.finditer(
        r'^kafka_requests_total\{api="Fetch",version="(\d+)"\} \S+$', text, re.M))
    return out


def test_java_consumer_fetches_in_a_session(jar):
    """The Java consumer fetches over Fetch v18 in a fetch session: one full fetch creates it,
    then incremental fetches, and it reads every record produced before and while it runs."""
    from tests.support import BrokerProcess, free_port
    metrics_port = free_port()
    server = BrokerProcess(overrides={"metrics.port": metrics_port})
    server.start()
    member = None
    try:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        partitions, topic, group = 3, unique("java-session"), unique("java-session-g")
        admin = KafkaAdminClient(bootstrap_servers=server.bootstrap)
        admin.create_topics([NewTopic(topic, partitions, 1)])
        admin.close()
        produce(server.bootstrap, topic, partitions, 0, 5)
        member = GroupMember(jar, "s1", server.bootstrap, topic, group, "range")
        sets = MemberSet(server)
        sets.live["s1"] = member
        sets.wait_for("the first records", lambda: len(member.records()) == 15)
        produce(server.bootstrap, topic, partitions, 5, 5)
        sets.wait_for("every record", lambda: len(member.records()) == 30)
        time.sleep(1.5)  # idle long polls: incremental fetches with nothing changed
        counts = fetch_counts(metrics_port)
        assert counts.get("full", 0) >= 1 and counts.get("incremental", 0) >= 3, counts
        assert counts.get("error", 0) == 0 and counts["sessions"] >= 1, counts
        got = sorted(member.records())
        assert got == sorted((p, i, f"{p}-{i}") for p in range(partitions) for i in range(10))
        assert counts["versions"] == [18], counts
    finally:
        if member is not None:
            member.stop()
        server.stop()
