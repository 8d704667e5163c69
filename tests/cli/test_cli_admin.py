"""``kbroker acl``, ``kbroker user``, ``kbroker txn`` and ``kbroker cluster info`` as child
processes against a kbroker process with the standard authorizer (everyone allowed where no ACL
names a resource): what each creates is seen by the next command and by a real client."""
from __future__ import annotations

import pytest

from tests.cli.support import json_lines, kbroker, ok, one_line_error
from tests.support import BrokerProcess, unique

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "allow.everyone.if.no.acl.found": "true"}


@pytest.fixture(scope="module")
def broker():
    proc = BrokerProcess(overrides=AUTHORIZER)
    proc.start()
    yield proc
    proc.stop()


def test_acl_create_list_delete(broker):
    b = broker.bootstrap
    topic = unique("acl")
    created = json_lines(kbroker("acl", "create", "--principal", "User:bob", "--operation",
                                 "read", "--topic", topic, "-b", b, "--format", "json"))
    expected = {"principal": "User:bob", "host": "*", "operation": "READ",
                "permission": "ALLOW", "resource_type": "TOPIC", "resource_name": topic,
                "pattern_type": "LITERAL"}
    assert created == [expected]
    ok(kbroker("acl", "create", "--principal", "User:eve", "--operation", "write",
               "--permission", "deny", "--group", "g", "--pattern", "prefixed", "-b", b))
    assert expected in json_lines(kbroker("acl", "list", "-b", b, "--format", "json"))
    assert json_lines(kbroker("acl", "list", "--topic", topic, "-b", b, "--format", "json")) \
        == [expected]
    assert "User:bob" in ok(kbroker("acl", "list", "--principal", "User:bob", "-b", b))
    deleted = json_lines(kbroker("acl", "delete", "--principal", "User:bob", "-b", b,
                                 "--format", "json"))
    assert deleted == [expected]
    assert json_lines(kbroker("acl", "list", "--topic", topic, "-b", b, "--format",
                              "json")) == []
    one_line_error(kbroker("acl", "create", "--principal", "User:x", "--operation", "fly",
                           "--topic", "t", "-b", b), "unknown --operation 'fly'")
    one_line_error(kbroker("acl", "create", "--operation", "read", "-b", b), "needs --principal")


def test_user_create_list_delete(broker):
    b = broker.bootstrap
    user = unique("carol")
    ok(kbroker("user", "create", user, "--password", "pw1", "--mechanism", "SCRAM-SHA-512",
               "--iterations", "8192", "-b", b))
    users = {u["user"]: u for u in json_lines(kbroker("user", "list", "-b", b, "--format",
                                                      "json"))}
    assert users[user]["mechanisms"] == [{"mechanism": "SCRAM-SHA-512", "iterations": 8192}]
    ok(kbroker("user", "delete", user, "--mechanism", "SCRAM-SHA-512", "-b", b))
    users = {u["user"] for u in json_lines(kbroker("user", "list", "-b", b, "--format",
                                                   "json"))}
    assert user not in users
    one_line_error(kbroker("user", "delete", user, "--mechanism", "SCRAM-SHA-512", "-b", b),
                   "user credential that does not exist")
    one_line_error(kbroker("user", "create", user, "-b", b), "--password")


def test_txn_list_describe_abort(broker):
    from kafka import KafkaProducer
    b = broker.bootstrap
    topic, tid = unique("txn"), unique("tid")
    ok(kbroker("topic", "create", topic, "-p", "1", "-b", b))
    producer = KafkaProducer(bootstrap_servers=b, transactional_id=tid)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"stuck").get(timeout=10)
        listed = {t["transactional_id"]: t for t in json_lines(kbroker("txn", "list", "-b", b,
                                                                       "--format", "json"))}
        assert listed[tid]["state"] == "Ongoing"
        (desc,) = json_lines(kbroker("txn", "describe", tid, "-b", b, "--format", "json"))
        assert desc["state"] == "Ongoing" and desc["partitions"] == [
            {"topic": topic, "partition": 0}]
        assert desc["producer_id"] == listed[tid]["producer_id"]
        # the open transaction holds read_committed readers at its first offset
        assert ok(kbroker("consume", topic, "-b", b, "--isolation-level",
                          "read_committed")) == ""
        (aborted,) = json_lines(kbroker("txn", "abort", "--topic", topic, "--partition", "0",
                                        "-b", b, "--format", "json"))
        assert aborted["producer_id"] == desc["producer_id"] and aborted["start_offset"] == 0
        one_line_error(kbroker("txn", "abort", "--topic", topic, "--partition", "0", "-b", b),
                       "no open transaction")
        ok(kbroker("produce", topic, "-b", b, input="after\n"))
        assert ok(kbroker("consume", topic, "-b", b, "--isolation-level",
                          "read_committed")) == "after\n"
    finally:
        producer.close(timeout=2)
    one_line_error(kbroker("txn", "describe", unique("none"), "-b", b),
                   "TRANSACTIONAL_ID_NOT_FOUND")


def test_cluster_info(broker):
    b = broker.bootstrap
    (info,) = json_lines(kbroker("cluster", "info", "-b", b, "--format", "json"))
    assert info["controller"] == 1
    assert info["nodes"] == [{"id": 1, "host": "127.0.0.1", "port": broker.port, "rack": None,
                              "fenced": False}]
    apis = {a["name"]: a for a in info["api_versions"]}
    assert apis["Produce"]["api_key"] == 0 and apis["ApiVersions"]["min"] == 0
    assert "ConsumerGroupHeartbeat" in apis
    assert info["features"]["transaction.version"]["finalized"] is not None
    text = ok(kbroker("cluster", "info", "-b", b))
    assert "CONTROLLER" in text and "API VERSIONS" in text and info["cluster_id"] in text
