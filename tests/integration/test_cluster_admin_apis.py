"""The APIs of placement and leadership through real clients against a broker process:
kafka-python's KafkaAdminClient (describe_topic_partitions, elect_leaders, the reassignment
calls, alter_replica_log_dirs, describe_metadata_quorum, list_config_resources) and the Java
AdminClient and consumer (tests/java/src/main/java/kbroker/ClusterScenarios.java: describeTopics,
which pages through DescribeTopicPartitions, electLeaders, alter/listPartitionReassignments,
alterReplicaLogDirs, describeMetadataQuorum, listConfigResources, and positions validated with
OffsetForLeaderEpoch). The broker's request counters (/metrics) show that each client used the
API itself and no fallback. Raw answers are compared with Kafka's in
tests/conformance/test_admin_conformance.py."""
from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import (InvalidReplicationAssignmentError, LogDirNotFoundError,
                          NoError, NoReassignmentInProgressError, UnknownTopicOrPartitionError)
from kafka.structs import TopicPartitionReplica

from tests.integration.test_java_client import jar, java_command, tail  # noqa: F401 (jar: fixture)
from tests.support import BrokerProcess, free_port, unique

NOT_NEEDED = 84  # ELECTION_NOT_NEEDED


@pytest.fixture(scope="module")
def broker():
    """One in-memory broker for the module, with its /metrics endpoint on a known port."""
    proc = BrokerProcess(overrides={"metrics.port": free_port()})
    proc.start()
    yield proc
    proc.stop()


def requests_by_api(broker) -> dict[str, int]:
    """Requests the broker has answered, by API name (all versions)."""
    port = broker.overrides["metrics.port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    counts: dict[str, int] = {}
    for m in re.finditer(r'^kafka_requests_total\{api="(\w+)",version="\d+"\} (\S+)$', text,
                         re.M):
        counts[m[1]] = counts.get(m[1], 0) + int(float(m[2]))
    return counts


@pytest.fixture
def admin(broker):
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    yield client
    client.close()


def new_topic(admin, partitions: int, prefix: str = "cluster") -> str:
    name = unique(prefix)
    admin.create_topics([NewTopic(name, partitions, 1)])
    return name


# ------------------------------------------------------------------------------ kafka-python

def test_kafka_python_describe_topic_partitions_pages_through_a_topic(broker, admin):
    topic = new_topic(admin, 5)
    missing = unique("missing")
    before = requests_by_api(broker).get("DescribeTopicPartitions", 0)
    seen, cursor, pages = [], None, 0
    while True:
        answer = admin.describe_topic_partitions([topic, missing], response_partition_limit=2,
                                                 cursor=cursor)
        pages += 1
        for t in answer["topics"]:
            if t["name"] == missing:
                assert t["error_code"] == UnknownTopicOrPartitionError.errno
                continue
            assert (t["error_code"], t["is_internal"]) == (0, False)
            for p in t["partitions"]:
                assert (p["leader_id"], p["leader_epoch"], p["replica_nodes"], p["isr_nodes"],
                        p["offline_replicas"]) == (1, 0, [1], [1], [])
                seen.append(p["partition_index"])
        cursor = answer["next_cursor"]
        if cursor is None:
            break
        assert cursor["topic_name"] == topic
    assert seen == [0, 1, 2, 3, 4] and pages == 3
    assert requests_by_api(broker)["DescribeTopicPartitions"] - before == 3
    # the topic id is Metadata's
    [described] = admin.describe_topic_partitions([topic])["topics"]
    [meta] = admin.describe_topics([topic])
    assert str(described["topic_id"]) == str(meta["topic_id"])


def test_kafka_python_elect_leaders(broker, admin):
    topic = new_topic(admin, 2)
    for election_type in (0, 1):   # preferred, unclean: the one replica already leads
        response = admin.elect_leaders(election_type, {topic: [0, 1]}, raise_errors=False)
        assert response.error_code == 0
        assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
                for r in response.replica_election_results] == [
            (topic, [(0, NOT_NEEDED), (1, NOT_NEEDED)])]
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.elect_leaders(0, {unique("missing"): [0]})
    # no partitions named: kafka-python names every partition of every topic itself
    everything = admin.elect_leaders(0, None)
    results = {(r.topic, p.partition_id): p.error_code
               for r in everything.replica_election_results for p in r.partition_result}
    assert {(topic, 0), (topic, 1), ("__consumer_offsets", 49)} <= set(results)
    assert set(results.values()) == {NOT_NEEDED}


def test_kafka_python_partition_reassignments(broker, admin):
    topic = new_topic(admin, 3)
    p0, p1, p2 = (TopicPartition(topic, p) for p in range(3))
    assert admin.alter_partition_reassignments({p0: [1], p1: None, p2: [2]}) == {
        p0: None, p1: NoReassignmentInProgressError, p2: InvalidReplicationAssignmentError}
    assert admin.list_partition_reassignments() == {}
    assert admin.list_partition_reassignments({topic: [0, 1, 2]}) == {}
    assert requests_by_api(broker)["ListPartitionReassignments"] >= 2


def test_kafka_python_alter_replica_log_dirs_in_memory(broker, admin):
    topic = new_topic(admin, 2)
    [described] = admin.describe_log_dirs(topic_partitions={topic: [0]})
    [log_dir] = described["log_dirs"]
    assert log_dir["log_dir"] == "in-memory"
    here, other = TopicPartitionReplica(topic, 0, 1), TopicPartitionReplica(topic, 1, 1)
    assert admin.alter_replica_log_dirs({here: "in-memory", other: "/no/such/dir"}) == {
        here: NoError, other: LogDirNotFoundError}


def test_kafka_python_alter_replica_log_dirs_on_disk(tmp_path):
    """With a data directory the log directory is its absolute path, as Kafka's."""
    proc = BrokerProcess(data_dir=str(tmp_path / "data"))
    proc.start()
    client = KafkaAdminClient(bootstrap_servers=proc.bootstrap)
    try:
        topic = new_topic(client, 1)
        [described] = client.describe_log_dirs(topic_partitions={topic: [0]})
        path = described["log_dirs"][0]["log_dir"]
        assert path == str(tmp_path / "data")
        replica = TopicPartitionReplica(topic, 0, 1)
        assert client.alter_replica_log_dirs({replica: path}) == {replica: NoError}
        assert client.alter_replica_log_dirs({replica: path + "/"}) == {
            replica: LogDirNotFoundError}
        assert client.alter_replica_log_dirs({TopicPartitionReplica(topic, 5, 1): path}) == {
            TopicPartitionReplica(topic, 5, 1): UnknownTopicOrPartitionError}
    finally:
        client.close()
        proc.stop()


def test_kafka_python_describe_metadata_quorum(broker, admin):
    asked = int(time.time() * 1000)
    quorum = admin.describe_metadata_quorum()
    [topic] = quorum["topics"]
    [partition] = topic["partitions"]
    assert topic["topic_name"] == "__cluster_metadata"
    assert (partition["partition_index"], partition["leader_id"], partition["leader_epoch"],
            partition["observers"], partition["error"]) == (0, 1, 1, [], None)
    [voter] = partition["current_voters"]
    assert voter["replica_id"] == 1
    assert voter["log_end_offset"] == partition["high_watermark"] >= 0
    assert asked <= voter["last_fetch_timestamp"] == voter["last_caught_up_timestamp"] \
        <= int(time.time() * 1000)
    assert quorum["nodes"] == [{"node_id": 1, "listeners": [
        {"name": "PLAINTEXT", "host": "127.0.0.1", "port": broker.port}]}]
    # each topic change is a metadata change: the high watermark moves with it
    new_topic(admin, 1)
    later = admin.describe_metadata_quorum()["topics"][0]["partitions"][0]
    assert later["high_watermark"] > partition["high_watermark"]


def test_kafka_python_list_config_resources(broker, admin):
    topic = new_topic(admin, 1)
    listed = admin.list_config_resources()
    assert listed["broker"] == ["1"] and listed["broker_logger"] == ["1"]
    assert {topic, "__consumer_offsets", "__transaction_state"} <= set(listed["topic"])
    assert set(listed) == {"broker", "broker_logger", "topic"}   # no groups, no client metrics
    assert admin.list_config_resources(["BROKER"]) == {"broker": ["1"]}
    assert admin.list_config_resources(["GROUP", "CLIENT_METRICS"]) == {}


# ---------------------------------------------------------------------------------- Java

def run_java(jar, broker, *args: str) -> tuple[list[dict], str]:
    started = time.monotonic()
    proc = subprocess.run(java_command(jar, *args), capture_output=True, text=True, timeout=240)
    context = (f"exit {proc.returncode} after {time.monotonic() - started:.1f}s\n"
               f"--- stdout\n{tail(proc.stdout)}\n--- stderr\n{tail(proc.stderr)}\n"
               f"--- broker log\n{tail(broker.logs())}")
    assert proc.returncode == 0, context
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert lines[-1] == {"done": True}, context
    return lines, context


def steps(lines: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for line in lines:
        if "step" in line:
            out.setdefault(line["step"], []).append(line)
    return out


def test_java_cluster_admin(broker, jar):
    prefix = unique("java-cluster")
    a, b, missing = f"{prefix}-a", f"{prefix}-b", f"{prefix}-missing"
    before = requests_by_api(broker)
    lines, context = run_java(jar, broker, "cluster-admin", broker.bootstrap, prefix)
    after = requests_by_api(broker)
    got = steps(lines)
    assert got["cluster"] == [{"step": "cluster", "node": 1}], context

    # describeTopics: every partition of both topics, gathered over pages of two partitions
    # (a 0-1, a 2 + b 0, b 1 + the missing topic): DescribeTopicPartitions, not Metadata
    def partition(p):
        return {"partition": p, "leader": 1, "replicas": [1], "isr": [1], "elr": [],
                "last_known_elr": []}
    assert [(d["topic"], d["internal"], d["has_id"], d["partitions"])
            for d in got["describe-topics"]] == [
        (a, False, True, [partition(p) for p in range(3)]),
        (b, False, True, [partition(p) for p in range(2)])], context
    assert got["describe-missing"][0]["error"] == "UnknownTopicOrPartitionException"
    used = after.get("DescribeTopicPartitions", 0) - before.get("DescribeTopicPartitions", 0)
    assert used == 3, (used, context)

    for line, kind in zip(got["elect-leaders"], ("PREFERRED", "UNCLEAN")):
        assert line == {"step": "elect-leaders", "type": kind, "results": {
            f"{a}-0": "ElectionNotNeededException", f"{a}-1": "ElectionNotNeededException",
            f"{missing}-0": "UnknownTopicOrPartitionException"},
            "all_partitions": 0}, context

    assert got["reassignments"] == [{
        "step": "reassignments", "a0": "none", "a1": "InvalidReplicaAssignmentException",
        "a2": "NoReassignmentInProgressException", "ongoing": 0, "ongoing_of_a": 0}], context
    assert got["alter-replica-log-dirs"] == [{
        "step": "alter-replica-log-dirs", "dirs": 1, "same_dir": "none",
        "unknown_dir": "LogDirNotFoundException"}], context

    [quorum] = got["quorum"]
    assert (quorum["leader"], quorum["leader_epoch"], quorum["observers"]) == (1, 1, 0), context
    [voter] = quorum["voters"]
    assert voter["id"] == 1 and voter["log_end_offset"] == quorum["high_watermark"] >= 0
    assert quorum["asked_at"] <= voter["last_fetch"] == voter["last_caught_up"] \
        <= quorum["answered_at"]
    assert voter["directory_id"] not in ("null", "AAAAAAAAAAAAAAAAAAAAAA")
    assert quorum["nodes"] == [{"id": 1, "endpoints": [
        {"name": "PLAINTEXT", "host": "127.0.0.1", "port": broker.port}]}], context

    [resources] = got["config-resources"]
    assert resources["all"][:2] == ["BROKER_LOGGER:1", "BROKER:1"], context
    assert {f"TOPIC:{a}", f"TOPIC:{b}", "TOPIC:__consumer_offsets"} <= set(resources["all"][2:])
    assert all(r.startswith("TOPIC:") for r in resources["all"][2:])
    assert resources["brokers"] == ["BROKER:1"]
    for api in ("ElectLeaders", "AlterPartitionReassignments", "ListPartitionReassignments",
                "AlterReplicaLogDirs", "DescribeQuorum", "ListConfigResources"):
        assert after.get(api, 0) > before.get(api, 0), api


def test_java_consumer_validates_positions_with_offset_for_leader_epoch(broker, jar):
    """A committed offset with its leader epoch is validated before the first fetch; a seek
    past the end of epoch 0 is truncation: LogTruncationException at 10 without a reset policy,
    the position moved to 10 with one (a consumer that skipped validation would fetch at 100
    and get OFFSET_OUT_OF_RANGE instead)."""
    topic = unique("java-validate")
    before = requests_by_api(broker).get("OffsetForLeaderEpoch", 0)
    lines, context = run_java(jar, broker, "validate-position", broker.bootstrap, topic,
                              unique("java-validate-group"))
    got = steps(lines)
    assert got["committed-with-epoch"] == [{"step": "committed-with-epoch",
                                            "offsets": [4, 5, 6, 7, 8, 9], "position": 10}], context
    assert got["truncated-no-reset"] == [{
        "step": "truncated-no-reset", "error": "LogTruncationException",
        "divergent": {f"{topic}-0": {"offset": 10, "epoch": 0}}}], context
    assert got["truncated-earliest"] == [{"step": "truncated-earliest", "position": 10,
                                          "offsets": [10, 11, 12]}], context
    assert requests_by_api(broker)["OffsetForLeaderEpoch"] - before >= 3, context

