"""The client commands against Apache Kafka 4.3.1 and against kbroker in the same run: the same
commands on the same state print the same output, apart from topic ids and record times (topic
create and describe, produce, consume alone and in a group, group list and describe of classic,
consumer, share and streams groups, and the unknown-topic and unknown-group failures)."""
from __future__ import annotations

import pytest

from tests.cli.support import json_lines, kbroker, ok, one_line_error
from tests.cli.test_cli_share_streams import (
    assert_share_described,
    assert_streams_described,
    share_scenario,
    streams_scenario,
)
from tests.conformance.kafka_server import KafkaServer
from tests.support import BrokerProcess, unique


@pytest.fixture(scope="module")
def kafka():
    server = KafkaServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kbroker_process():
    proc = BrokerProcess()
    proc.start()
    yield proc
    proc.stop()


def scenario(b: str, topic: str, group: str) -> dict:
    """Everything the commands print for one fixed sequence, ids and times left out."""
    seen = {}
    seen["create"] = ok(kbroker("topic", "create", topic, "-p", "3", "-c",
                                "retention.ms=60000", "-b", b))
    seen["alter"] = ok(kbroker("topic", "alter-config", topic, "--set", "cleanup.policy=compact",
                               "--set", "retention.ms=120000", "-b", b))
    seen["alter_bad"] = one_line_error(kbroker("topic", "alter-config", topic, "--set",
                                               "retention.ms=soon", "-b", b))
    seen["listed"] = [t for t in json_lines(kbroker("topic", "list", "-b", b, "--format",
                                                    "json")) if t["name"] == topic]
    for t in seen["listed"]:
        assert t.pop("topic_id")
    (desc,) = json_lines(kbroker("topic", "describe", topic, "-b", b, "--format", "json"))
    assert desc.pop("topic_id")
    seen["describe"] = desc
    # keyed lines: the default partitioner puts each key in the same partition on both
    seen["produce"] = json_lines(kbroker("produce", topic, "-b", b, "-K", ":", "--format",
                                         "json", input="a:one\nb:two\nc:three\na:four\n"))
    records = json_lines(kbroker("consume", topic, "-b", b, "--offset", "beginning", "-n", "4",
                                 "--format", "json"))
    for record in records:
        assert record.pop("timestamp") > 0
    seen["consume"] = sorted(records, key=lambda r: (r["partition"], r["offset"]))
    seen["kcat"] = sorted(ok(kbroker("consume", topic, "-b", b, "-f",
                                     "%p %o %k %s\\n")).splitlines())
    seen["group_consume"] = sorted(ok(kbroker("consume", topic, "-b", b, "--group", group,
                                              "--offset", "beginning", "-n", "4")).splitlines())
    (group_desc,) = json_lines(kbroker("group", "describe", group, "-b", b, "--format", "json"))
    seen["group_describe"] = group_desc
    seen["group_text"] = ok(kbroker("group", "describe", group, "-b", b))
    seen["group_list"] = [g for g in json_lines(kbroker("group", "list", "-b", b, "--format",
                                                        "json")) if g["group"] == group]
    seen["reset"] = json_lines(kbroker("group", "reset-offsets", group, "--all-topics",
                                       "--shift-by", "-1", "--execute", "-b", b,
                                       "--format", "json"))
    seen["lag"] = json_lines(kbroker("group", "lag", group, "-b", b, "--format", "json"))
    seen["group_delete"] = ok(kbroker("group", "delete", group, "-b", b))
    seen["deleted_group"] = one_line_error(kbroker("group", "describe", group, "-b", b))
    seen["add_partitions"] = ok(kbroker("topic", "add-partitions", topic, "-p", "4", "-b", b))
    # the error's name only: Kafka 4.3.1 says "The topic T currently has 4 partition(s); 2
    # would not be an increase.", broker/apis/create_partitions.py words it otherwise
    seen["fewer_partitions"] = one_line_error(kbroker("topic", "add-partitions", topic, "-p",
                                                      "2", "-b", b)).split(" (")[0]
    (grown,) = json_lines(kbroker("topic", "describe", topic, "-b", b, "--format", "json"))
    seen["grown"] = [(p["partition"], p["high_watermark"]) for p in grown["partitions"]]
    seen["unknown_topic"] = one_line_error(kbroker("topic", "describe", "no-such-topic",
                                                   "-b", b))
    seen["unknown_topic_consume"] = one_line_error(kbroker("consume", "no-such-topic",
                                                           "-b", b, "-n", "1"))
    seen["unknown_group"] = one_line_error(kbroker("group", "describe", "no-such-group",
                                                   "-b", b))
    seen["create_again"] = one_line_error(kbroker("topic", "create", topic, "-b", b))
    seen["delete"] = ok(kbroker("topic", "delete", topic, "-b", b))
    return seen


def test_same_output_on_kafka_and_kbroker(kafka, kbroker_process):
    topic, group = unique("both"), unique("g")
    on_kafka = scenario(kafka.bootstrap, topic, group)
    on_kbroker = scenario(kbroker_process.bootstrap, topic, group)
    # what the scenario shows, checked once on Kafka's side
    assert on_kafka["describe"]["configs"] == {"cleanup.policy": "compact",
                                               "retention.ms": "120000"}
    assert "INVALID_CONFIG" in on_kafka["alter_bad"]
    assert on_kafka["describe"]["partition_count"] == 3
    assert [r["value"] for r in on_kafka["consume"] if r["key"] == "a"] == ["one", "four"]
    assert on_kafka["group_consume"] == ["four", "one", "three", "two"]
    offsets = on_kafka["group_describe"]["offsets"]
    assert {o["topic"] for o in offsets} == {topic}
    assert all(o["lag"] == 0 and o["committed_offset"] == o["log_end_offset"] > 0
               for o in offsets)
    assert on_kafka["group_describe"]["state"] == "Empty"
    assert all(r["lag"] == 1 for r in on_kafka["lag"])
    assert "UNKNOWN_TOPIC_OR_PARTITION" in on_kafka["unknown_topic"]
    assert "GROUP_ID_NOT_FOUND" in on_kafka["unknown_group"]
    assert "GROUP_ID_NOT_FOUND" in on_kafka["deleted_group"]
    assert "INVALID_PARTITIONS" in on_kafka["fewer_partitions"]
    assert [p for p, _ in on_kafka["grown"]] == [0, 1, 2, 3] and on_kafka["grown"][3][1] == 0
    for key in on_kafka:
        assert on_kbroker[key] == on_kafka[key], key


def active_groups(b: str, topic: str, classic: str, modern: str) -> dict:
    """describe of a group with a kafka-python member (classic protocol) and of one with a
    confluent-kafka member (KIP-848 consumer protocol), and reset-offsets refusing both."""
    import time

    from confluent_kafka import Consumer
    from kafka import KafkaConsumer
    ok(kbroker("topic", "create", topic, "-p", "2", "-b", b))
    old = KafkaConsumer(topic, bootstrap_servers=b, group_id=classic, client_id="old-member")
    new = Consumer({"bootstrap.servers": b, "group.id": modern, "group.protocol": "consumer",
                    "client.id": "new-member"})
    new.subscribe([topic])
    seen = {}
    try:
        deadline = time.monotonic() + 30
        while (not old.assignment() or not new.assignment()) and time.monotonic() < deadline:
            old.poll(100)
            new.poll(0.1)
        for gid in (classic, modern):
            (desc,) = json_lines(kbroker("group", "describe", gid, "-b", b, "--format", "json"))
            for member in desc["members"]:
                assert member.pop("member_id")
            for row in desc["offsets"]:
                assert row.pop("member_id")
            seen[gid] = desc
            seen[gid + " reset"] = one_line_error(kbroker(
                "group", "reset-offsets", gid, "--all-topics", "--to-earliest", "--execute",
                "-b", b))
    finally:
        old.close()
        new.close()
    return seen


def test_active_classic_and_consumer_groups_on_kafka_and_kbroker(kafka, kbroker_process):
    topic, classic, modern = unique("active"), unique("classic"), unique("modern")
    on_kafka = active_groups(kafka.bootstrap, topic, classic, modern)
    on_kbroker = active_groups(kbroker_process.bootstrap, topic, classic, modern)
    assert on_kafka[classic]["type"] == "classic" and on_kafka[modern]["type"] == "consumer"
    for gid in (classic, modern):
        assert on_kafka[gid]["state"] == "Stable"
        (member,) = on_kafka[gid]["members"]
        assert member["assignment"] == [{"topic": topic, "partition": 0},
                                        {"topic": topic, "partition": 1}]
        assert "is inactive, but the current state is Stable" in on_kafka[gid + " reset"]
    for key in on_kafka:
        assert on_kbroker[key] == on_kafka[key], key


def _share_outcome(seen: dict) -> dict:
    """What must match on both brokers: member ids and epochs, and which consumer got which
    partition, are the brokers' own choice."""
    desc = dict(seen["describe"])
    members = desc.pop("members")
    epochs = (desc.pop("group_epoch"), desc.pop("assignment_epoch"))
    assert all(isinstance(e, int) and e > 0 for e in epochs)
    desc["clients"] = sorted(m["client_id"] for m in members)
    desc["assignments"] = sorted([(a["topic"], a["partition"]) for a in m["assignment"]]
                                 for m in members)
    return {"describe": desc, "lag": seen["lag"], "reset": seen["reset"],
            "after_reset": seen["after_reset"], "listed": seen["listed"], "gone": seen["gone"]}


def test_share_group_on_kafka_and_kbroker(kafka, kbroker_process):
    topic, group = unique("share"), unique("share-g")
    on_kafka = share_scenario(kafka.bootstrap, kafka.port, topic, group)
    on_kbroker = share_scenario(kbroker_process.bootstrap, kbroker_process.port, topic, group)
    assert_share_described(on_kafka, topic, group)
    assert_share_described(on_kbroker, topic, group)
    assert _share_outcome(on_kbroker) == _share_outcome(on_kafka)


def _streams_outcome(seen: dict) -> dict:
    """What must match on both brokers: all but the member's ids (the test's own random ones)
    and the epochs."""
    desc = dict(seen["describe"])
    for key in ("group_epoch", "assignment_epoch"):
        assert desc.pop(key) > 0
    desc["members"] = [{k: v for k, v in m.items()
                        if k not in ("member_id", "process_id", "member_epoch")}
                       for m in desc["members"]]
    desc["offsets"] = [{k: v for k, v in o.items() if k != "member_id"}
                       for o in desc["offsets"]]
    lag = [{k: v for k, v in r.items() if k != "member_id"} for r in seen["lag"]]
    return {"describe": desc, "lag": lag, "reset": seen["reset"],
            "after_reset": seen["after_reset"]}


def test_streams_group_on_kafka_and_kbroker(kafka, kbroker_process):
    source, group = unique("words"), unique("streams")
    on_kafka = streams_scenario(kafka.bootstrap, kafka.port, source, group)
    on_kbroker = streams_scenario(kbroker_process.bootstrap, kbroker_process.port, source, group)
    assert_streams_described(on_kafka, source, group)
    assert_streams_described(on_kbroker, source, group)
    assert _streams_outcome(on_kbroker) == _streams_outcome(on_kafka)


def transactions(b: str, topic: str, tid: str) -> dict:
    """consume under both isolation levels around aborted, committed and open transactions, and
    txn list/describe of the open one."""
    from kafka import KafkaProducer
    ok(kbroker("topic", "create", topic, "-p", "1", "-b", b))
    producer = KafkaProducer(bootstrap_servers=b, transactional_id=tid)
    seen = {}
    try:
        producer.init_transactions()
        for value, end in ((b"aborted", producer.abort_transaction),
                           (b"committed", producer.commit_transaction)):
            producer.begin_transaction()
            producer.send(topic, value).get(timeout=10)
            end()
        producer.begin_transaction()
        producer.send(topic, b"open").get(timeout=10)
        for level in ("read_committed", "read_uncommitted"):
            seen[level] = json_lines(kbroker("consume", topic, "-b", b, "--isolation-level",
                                             level, "--format", "json"))
            for record in seen[level]:
                record.pop("timestamp")
        (desc,) = json_lines(kbroker("txn", "describe", tid, "-b", b, "--format", "json"))
        seen["txn"] = (desc["state"], desc["partitions"], desc["transaction_timeout_ms"])
    finally:
        producer.close(timeout=2)
    return seen


def test_isolation_levels_on_kafka_and_kbroker(kafka, kbroker_process):
    topic, tid = unique("iso"), unique("tid")
    on_kafka = transactions(kafka.bootstrap, topic, tid)
    on_kbroker = transactions(kbroker_process.bootstrap, topic, tid)
    assert [r["value"] for r in on_kafka["read_committed"]] == ["committed"]
    assert [r["value"] for r in on_kafka["read_uncommitted"]] == ["aborted", "committed", "open"]
    assert on_kafka["txn"] == ("Ongoing", [{"topic": topic, "partition": 0}], 60000)
    assert on_kbroker == on_kafka
