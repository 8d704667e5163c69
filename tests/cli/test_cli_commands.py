"""The client commands of ``kbroker`` (broker/cli/commands.py) run as a user runs them, as child
processes against a kbroker process: the issue's "Done when" sequence, every topic, produce,
consume and group command with their options, and the failures (unknown topic or group, no
broker at an address) as one line and a non-zero exit; security settings: test_cli_security.py."""
from __future__ import annotations

import json
import re
import time

from tests.cli.support import json_lines, kbroker, ok, one_line_error
from tests.support import free_port, unique


def test_done_when_sequence(broker):
    b = broker.bootstrap
    topic, group = unique("done"), unique("g")
    assert topic in ok(kbroker("topic", "create", topic, "--partitions", "3", "-b", b))
    described = json_lines(kbroker("topic", "describe", topic, "-b", b, "--format", "json"))
    assert len(described) == 1 and described[0]["name"] == topic
    assert [p["partition"] for p in described[0]["partitions"]] == [0, 1, 2]
    assert ok(kbroker("produce", topic, "-b", b, input="one\ntwo\nthree\n")).startswith(
        f"produced 3 records to {topic}")
    records = json_lines(kbroker("consume", topic, "-b", b, "--offset", "beginning", "-n", "3",
                                 "--format", "json"))
    assert sorted(r["value"] for r in records) == ["one", "three", "two"]
    assert all(set(r) == {"topic", "partition", "offset", "timestamp", "key", "value",
                          "headers"} and r["topic"] == topic and r["key"] is None
               for r in records)
    plain = ok(kbroker("consume", topic, "-b", b, "--group", group, "--offset", "beginning",
                       "-n", "3"))
    assert sorted(plain.splitlines()) == ["one", "three", "two"]
    (desc,) = json_lines(kbroker("group", "describe", group, "-b", b, "--format", "json"))
    assert desc["group"] == group and desc["state"] == "Empty" and desc["type"] == "classic"
    by_partition = {(o["topic"], o["partition"]): o for o in desc["offsets"]}
    ends = {p["partition"]: 0 for p in described[0]["partitions"]}
    for r in records:
        ends[r["partition"]] = max(ends[r["partition"]], r["offset"] + 1)
    assert {k: (o["committed_offset"], o["log_end_offset"], o["lag"])
            for k, o in by_partition.items()} == \
        {(topic, p): (end, end, 0) for p, end in ends.items() if end}
    assert desc["total_lag"] == 0
    one_line_error(kbroker("topic", "describe", unique("missing"), "-b", b),
                   "does not exist", "UNKNOWN_TOPIC_OR_PARTITION")
    one_line_error(kbroker("consume", unique("missing"), "-b", b, "-n", "1"),
                   "does not exist", "UNKNOWN_TOPIC_OR_PARTITION")
    port = free_port()
    for args in (("topic", "list"), ("produce", topic), ("consume", topic),
                 ("group", "describe", group)):
        one_line_error(kbroker(*args, "-b", f"127.0.0.1:{port}", input="x\n"),
                       f"no broker at 127.0.0.1:{port}", "connection refused")


def test_bootstrap_from_the_environment(broker):
    topic = unique("env")
    ok(kbroker("topic", "create", topic, env={"KBROKER_BOOTSTRAP": broker.bootstrap}))
    listed = json_lines(kbroker("topic", "list", "--format", "json",
                                env={"KBROKER_BOOTSTRAP": broker.bootstrap}))
    assert topic in {t["name"] for t in listed}
    # -b wins over the environment
    one_line_error(kbroker("topic", "list", "-b", f"127.0.0.1:{free_port()}",
                           env={"KBROKER_BOOTSTRAP": broker.bootstrap}), "no broker at")


def test_topic_lifecycle(broker):
    b = broker.bootstrap
    topic = unique("life")
    out = ok(kbroker("topic", "create", topic, "-p", "2", "-r", "1", "-c", "retention.ms=60000",
                     "-c", "cleanup.policy=compact", "-b", b))
    assert out.splitlines() == ["TOPIC" + " " * (len(topic) - 3) + "STATUS",
                                topic.ljust(max(len(topic), 5)) + "  OK"]
    again = kbroker("topic", "create", topic, "-b", b)
    one_line_error(again, f"could not create topic {topic!r}", "TOPIC_ALREADY_EXISTS")
    ok(kbroker("topic", "create", topic, "--if-not-exists", "-b", b))

    listed = {t["name"]: t for t in json_lines(kbroker("topic", "list", "-b", b, "--format",
                                                       "json"))}
    assert listed[topic]["partitions"] == 2 and listed[topic]["replication_factor"] == 1
    assert "__consumer_offsets" not in listed
    (desc,) = json_lines(kbroker("topic", "describe", topic, "-b", b, "--format", "json"))
    assert desc["configs"] == {"cleanup.policy": "compact", "retention.ms": "60000"}
    assert desc["partition_count"] == 2 and desc["topic_id"]
    assert all(p["leader"] == 1 and p["replicas"] == [1] and p["isr"] == [1]
               and p["log_start_offset"] == 0 and p["high_watermark"] == 0
               for p in desc["partitions"])
    text = ok(kbroker("topic", "describe", topic, "-b", b))
    assert re.search(r"^retention\.ms +60000$", text, re.M) and "HIGH-WATERMARK" in text

    ok(kbroker("topic", "alter-config", topic, "--set", "retention.ms=1000", "--delete",
               "cleanup.policy", "-b", b))
    (desc,) = json_lines(kbroker("topic", "describe", topic, "-b", b, "--format", "json"))
    assert desc["configs"] == {"retention.ms": "1000"}
    (full,) = json_lines(kbroker("topic", "describe", topic, "-a", "-b", b, "--format",
                                 "json"))
    assert full["configs"]["cleanup.policy"] == "delete" and len(full["configs"]) > 10
    bad = kbroker("topic", "alter-config", topic, "--set", "retention.ms=soon", "-b", b)
    one_line_error(bad, "INVALID_CONFIG")

    ok(kbroker("topic", "add-partitions", topic, "-p", "4", "-b", b))
    (desc,) = json_lines(kbroker("topic", "describe", topic, "-b", b, "--format", "json"))
    assert desc["partition_count"] == 4

    ok(kbroker("topic", "delete", topic, "-b", b))
    assert topic not in {t["name"] for t in json_lines(kbroker("topic", "list", "-b", b,
                                                               "--format", "json"))}
    one_line_error(kbroker("topic", "delete", topic, "-b", b), "UNKNOWN_TOPIC_OR_PARTITION")
    ok(kbroker("topic", "delete", topic, "--if-exists", "-b", b))


def test_produce_keys_headers_partition_and_formats(broker):
    b = broker.bootstrap
    topic = unique("keys")
    ok(kbroker("topic", "create", topic, "-p", "3", "-b", b))
    lines = "trace:1,env:dev|k1=v1\n|k2=v=2\n"
    out = json_lines(kbroker("produce", topic, "-b", b, "--header-separator", "|", "-K", "=",
                             "-p", "2", "-z", "gzip", "--acks", "1", "-H", "from=cli",
                             "--format", "json", input=lines))
    assert out == [{"topic": topic, "records": 2,
                    "partitions": [{"partition": 2, "first_offset": 0, "last_offset": 1,
                                    "records": 2}]}]
    records = json_lines(kbroker("consume", topic, "-b", b, "--format", "json"))
    assert [(r["partition"], r["offset"], r["key"], r["value"], r["headers"])
            for r in records] == [
        (2, 0, "k1", "v1", [{"key": "from", "value": "cli"}, {"key": "trace", "value": "1"},
                            {"key": "env", "value": "dev"}]),
        (2, 1, "k2", "v=2", [{"key": "from", "value": "cli"}])]
    kcat = ok(kbroker("consume", topic, "-b", b, "-f", "%t %p %o %k=%s %K/%S [%h]\\n"))
    assert kcat.splitlines() == [f"{topic} 2 0 k1=v1 2/2 [from=cli,trace=1,env=dev]",
                                 f"{topic} 2 1 k2=v=2 2/3 [from=cli]"]
    one_line_error(kbroker("produce", topic, "-b", b, "-K", "=", input="no separator\n"),
                   "no key separator")
    one_line_error(kbroker("produce", topic, "-b", b, "-p", "9", input="x\n"),
                   "has no partition 9")


def test_consume_start_positions(broker):
    b = broker.bootstrap
    topic = unique("pos")
    ok(kbroker("topic", "create", topic, "-p", "1", "-b", b))
    ok(kbroker("produce", topic, "-b", b, input="a\nb\n"))
    between = int(time.time() * 1000) + 5
    time.sleep(0.02)
    ok(kbroker("produce", topic, "-b", b, input="c\nd\n"))
    assert ok(kbroker("consume", topic, "-b", b)).splitlines() == ["a", "b", "c", "d"]
    assert ok(kbroker("consume", topic, "-b", b, "-o", "2")).splitlines() == ["c", "d"]
    assert ok(kbroker("consume", topic, "-b", b, "-o", "1", "-n", "2")).splitlines() == \
        ["b", "c"]
    assert ok(kbroker("consume", topic, "-b", b, "-o", "end")) == ""
    assert ok(kbroker("consume", topic, "-b", b, "-o", f"@{between}")).splitlines() == \
        ["c", "d"]
    assert ok(kbroker("consume", topic, "-b", b, "-o", "@2000-01-01T00:00:00Z")).splitlines() \
        == ["a", "b", "c", "d"]
    assert ok(kbroker("consume", topic, "-b", b, "-o", "@2999-01-01T00:00:00Z")) == ""
    one_line_error(kbroker("consume", topic, "-b", b, "-o", "soon"), "bad --offset")
    one_line_error(kbroker("consume", topic, "-b", b, "-p", "3"), "has no partition 3")


def test_produce_a_file_with_progress(broker, tmp_path):
    b = broker.bootstrap
    topic = unique("file")
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"line {i}\n" for i in range(5000)))
    result = kbroker("produce", topic, "-b", b, "-f", str(path), "--progress", "-z", "gzip")
    assert ok(result).startswith(f"produced 5000 records to {topic}")
    assert "100.0%" in result.err and "5000 records" in result.err
    records = json_lines(kbroker("consume", topic, "-b", b, "--format", "json"))
    assert [r["value"] for r in records] == [f"line {i}" for i in range(5000)]


def test_consume_read_committed(broker):
    from kafka import KafkaProducer
    b = broker.bootstrap
    topic = unique("txn")
    ok(kbroker("topic", "create", topic, "-p", "1", "-b", b))
    producer = KafkaProducer(bootstrap_servers=b, transactional_id=unique("tx"))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"aborted")
        producer.flush()
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"committed")
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"open")
        producer.flush()
        committed = ok(kbroker("consume", topic, "-b", b, "--isolation-level",
                               "read_committed"))
        everything = ok(kbroker("consume", topic, "-b", b))
    finally:
        producer.close(timeout=5)
    assert committed.splitlines() == ["committed"]
    assert everything.splitlines() == ["aborted", "committed", "open"]


def test_group_describe_lag_reset_and_delete(broker):
    b = broker.bootstrap
    topic, group = unique("grp"), unique("g")
    ok(kbroker("topic", "create", topic, "-p", "2", "-b", b))
    ok(kbroker("produce", topic, "-b", b, "-p", "0", input="a\nb\nc\n"))
    ok(kbroker("produce", topic, "-b", b, "-p", "1", input="d\n"))
    assert len(ok(kbroker("consume", topic, "-b", b, "-g", group, "-n", "2")).splitlines()) == 2
    (desc,) = json_lines(kbroker("group", "describe", group, "-b", b, "--format", "json"))
    lags = {o["partition"]: (o["committed_offset"], o["log_end_offset"], o["lag"])
            for o in desc["offsets"]}
    # two records printed and committed; which partitions they came from is the fetch's choice
    assert sum(committed for committed, _, _ in lags.values()) == 2
    assert all(lag == end - committed for committed, end, lag in lags.values())
    assert sum(lag for _, _, lag in lags.values()) == desc["total_lag"]
    assert desc["members"] == [] and desc["state"] == "Empty"

    listed = {g["group"]: g for g in json_lines(kbroker("group", "list", "-b", b, "--format",
                                                       "json"))}
    assert listed[group] == {"group": group, "type": "classic", "state": "Empty",
                             "protocol_type": "consumer"}
    lag_rows = json_lines(kbroker("group", "lag", group, "-b", b, "--format", "json"))
    assert {r["partition"]: r["lag"] for r in lag_rows} == \
        {p: lag for p, (_, _, lag) in lags.items()}
    text = ok(kbroker("group", "describe", group, "-b", b))
    assert "CURRENT-OFFSET  LOG-END-OFFSET  LAG" in text and topic in text

    dry = kbroker("group", "reset-offsets", group, "--topic", topic, "--to-earliest", "-b", b,
                  "--format", "json")
    assert [(r["partition"], r["new_offset"], r["executed"]) for r in json_lines(dry)] == \
        [(0, 0, False), (1, 0, False)]
    assert "dry run" in dry.err
    (same,) = json_lines(kbroker("group", "describe", group, "-b", b, "--format", "json"))
    assert same["offsets"] == desc["offsets"]  # a dry run commits nothing

    ok(kbroker("group", "reset-offsets", group, "--topic", f"{topic}:0", "--to-offset", "1",
               "--execute", "-b", b))
    ok(kbroker("group", "reset-offsets", group, "--topic", f"{topic}:1", "--to-latest",
               "--execute", "-b", b))
    (moved,) = json_lines(kbroker("group", "describe", group, "-b", b, "--format", "json"))
    assert {o["partition"]: o["committed_offset"] for o in moved["offsets"]} == {0: 1, 1: 1}
    ok(kbroker("group", "reset-offsets", group, "--all-topics", "--shift-by", "5", "--execute",
               "-b", b))
    (shifted,) = json_lines(kbroker("group", "describe", group, "-b", b, "--format", "json"))
    assert {o["partition"]: o["committed_offset"] for o in shifted["offsets"]} == {0: 3, 1: 1}
    ok(kbroker("group", "reset-offsets", group, "--all-topics", "--to-datetime",
               "2000-01-01T00:00:00Z", "--execute", "-b", b))
    (dated,) = json_lines(kbroker("group", "describe", group, "-b", b, "--format", "json"))
    assert {o["partition"]: o["committed_offset"] for o in dated["offsets"]} == {0: 0, 1: 0}
    # the next member of the group starts at the reset offsets
    assert sorted(ok(kbroker("consume", topic, "-b", b, "-g", group)).splitlines()) == \
        ["a", "b", "c", "d"]

    one_line_error(kbroker("group", "describe", unique("nobody"), "-b", b),
                   "does not exist", "GROUP_ID_NOT_FOUND")
    ok(kbroker("group", "delete", group, "-b", b))
    one_line_error(kbroker("group", "describe", group, "-b", b), "GROUP_ID_NOT_FOUND")
    one_line_error(kbroker("group", "delete", group, "-b", b), "GROUP_ID_NOT_FOUND")


def test_active_groups_members_and_no_reset_while_active(broker, tmp_path):
    """A classic member (kafka-python) and a KIP-848 consumer group member (confluent-kafka,
    group.protocol=consumer): describe shows each member and its assignment; reset-offsets
    refuses an active group as kafka-consumer-groups.sh does."""
    from confluent_kafka import Consumer
    from kafka import KafkaConsumer
    b = broker.bootstrap
    topic, classic, modern = unique("act"), unique("classic"), unique("modern")
    ok(kbroker("topic", "create", topic, "-p", "2", "-b", b))
    old = KafkaConsumer(topic, bootstrap_servers=b, group_id=classic, client_id="old-member")
    new = Consumer({"bootstrap.servers": b, "group.id": modern, "group.protocol": "consumer",
                    "client.id": "new-member"})
    new.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        while (not old.assignment() or not new.assignment()) and time.monotonic() < deadline:
            old.poll(100)
            new.poll(0.1)
        for gid, kind, client_id in ((classic, "classic", "old-member"),
                                     (modern, "consumer", "new-member")):
            (desc,) = json_lines(kbroker("group", "describe", gid, "-b", b, "--format", "json"))
            assert desc["type"] == kind and desc["state"] == "Stable"
            (member,) = desc["members"]
            assert member["client_id"] == client_id
            assert member["assignment"] == [{"topic": topic, "partition": 0},
                                            {"topic": topic, "partition": 1}]
            one_line_error(kbroker("group", "reset-offsets", gid, "--all-topics",
                                   "--to-earliest", "--execute", "-b", b),
                           f"the group '{gid}' is inactive, but the current state is Stable")
    finally:
        old.close()
        new.close()
    # without confluent-kafka a KIP-848 group cannot be described: one line says what to install
    blocker = tmp_path / "blocked" / "confluent_kafka"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('not installed')\n")
    from tests.support import ROOT
    one_line_error(kbroker("group", "describe", modern, "-b", b,
                           env={"PYTHONPATH": f"{blocker.parent}:{ROOT}"}),
                   "KIP-848 consumer group", "pip install confluent-kafka")
    assert ok(kbroker("group", "describe", classic, "-b", b,
                      env={"PYTHONPATH": f"{blocker.parent}:{ROOT}"}))


def test_usage_errors_are_short(broker):
    b = broker.bootstrap
    one_line_error(kbroker("consume", "t", "-b", b, "-g", "g", "-o", "5"), "reset-offsets")
    one_line_error(kbroker("consume", "t", "-b", b, "-n", "0"), "-n must be at least 1")
    one_line_error(kbroker("topic", "create", "t", "-c", "nonsense", "-b", b), "NAME=VALUE")
    missing = kbroker("topic", "create", "-b", b)
    assert missing.returncode == 2 and "Traceback" not in missing.err
    assert "the following arguments are required: TOPIC" in missing.err



def test_json_is_one_object_a_line(broker):
    """--format json prints JSON lines a script can read one at a time."""
    b = broker.bootstrap
    topic = unique("jl")
    ok(kbroker("topic", "create", topic, "-p", "2", "-b", b))
    for line in ok(kbroker("topic", "list", "-b", b, "--format", "json")).splitlines():
        assert isinstance(json.loads(line), dict)



def test_follow_prints_new_records_and_commits_on_ctrl_c(broker):
    """--follow keeps waiting past the end; Ctrl-C (SIGINT) ends it with status 0 after it
    commits what it printed for its group."""
    import os
    import signal
    import subprocess
    import sys

    from tests.support import ROOT
    b = broker.bootstrap
    topic, group = unique("follow"), unique("g")
    ok(kbroker("topic", "create", topic, "-p", "1", "-b", b))
    ok(kbroker("produce", topic, "-b", b, input="before\n"))
    proc = subprocess.Popen([sys.executable, "-m", "broker", "consume", topic, "-b", b,
                             "--group", group, "--follow"], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "before\n"
        ok(kbroker("produce", topic, "-b", b, input="after\n"))
        assert proc.stdout.readline() == "after\n"
        assert proc.poll() is None  # still following
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (desc,) = json_lines(kbroker("group", "describe", group, "-b", b, "--format", "json"))
    assert [(o["committed_offset"], o["lag"]) for o in desc["offsets"]] == [(2, 0)]
    # -n ends a follow as soon as enough records came
    assert ok(kbroker("consume", topic, "-b", b, "--follow", "-n", "2")) == "before\nafter\n"
