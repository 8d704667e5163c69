"""The web console's JSON endpoints (broker/console) on an embedded broker, with real clients
(confluent-kafka) making the topics, records, transactions and groups they show."""
from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from importlib import resources

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.testing.embedded import EmbeddedBroker
from tests.support import unique, wait_until


def request(broker, path, method="GET", body=None, headers=None):
    """(status, parsed JSON or raw bytes) of one HTTP request to the console."""
    data = None if body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json"} if body is not None else {}
    sent.update(headers or {})
    req = urllib.request.Request(broker.metrics_url + path, data=data, method=method,
                                 headers=sent)
    try:
        with urllib.request.urlopen(req, timeout=30) as response:
            status, raw, ctype = response.status, response.read(), response.headers["Content-Type"]
    except urllib.error.HTTPError as exc:
        status, raw, ctype = exc.code, exc.read(), exc.headers["Content-Type"]
    return status, json.loads(raw) if ctype == "application/json" else raw


def get(broker, path):
    status, body = request(broker, path)
    assert status == 200, body
    return body


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker({"num.partitions": 1, "log.retention.bytes": 1073741824,
                         "group.initial.rebalance.delay.ms": 0}) as b:
        yield b


@pytest.fixture(scope="module")
def acting():
    with EmbeddedBroker({"console.actions.enable": True,
                         "group.initial.rebalance.delay.ms": 0}) as b:
        yield b


def create(broker, topic, partitions=1, configs=None):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, partitions, 1,
                                                config=configs or {})]).values():
        future.result(30)


def produce(broker, topic, records, **config):
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, **config})
    for record in records:
        producer.produce(topic, **record)
    assert producer.flush(30) == 0
    return producer


def consume(broker, group, topic, n, **config):
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         **config})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append(message)
    assert len(got) == n
    return consumer, got


# ------------------------------------------------------------------ page and assets

def test_page_and_assets_are_served_from_the_package(broker):
    status, page = request(broker, "/")
    assert status == 200 and b'<script src="console.js">' in page
    for name in ("console.js", "console.css"):
        status, body = request(broker, "/" + name)
        assert status == 200
        assert body == (resources.files("broker.console") / "static" / name).read_bytes()
    # nothing is loaded from another site
    assert b"http://" not in page and b"https://" not in page


def test_console_off_serves_nothing_but_metrics_stay():
    with EmbeddedBroker({"console.enable": False}) as b:
        assert request(b, "/")[0] == 404
        assert request(b, "/api/topics")[0] == 404
        assert request(b, "/metrics")[0] == 200


def test_unknown_endpoint_and_bad_parameters_are_clear_errors(broker):
    status, body = request(broker, "/api/nothing")
    assert status == 404 and body["error"] == "NOT_FOUND"
    status, body = request(broker, "/api/topics?limit=100000")
    assert status == 400 and "limit must be at most 500" in body["message"]
    status, body = request(broker, "/api/topics?offset=x")
    assert status == 400 and "offset must be an integer" in body["message"]


# ------------------------------------------------------------------ topics

def test_topics_are_paged_and_filtered_on_the_server(broker):
    prefix = unique("paged")
    for i in range(7):
        create(broker, f"{prefix}-{i}")
    first = get(broker, f"/api/topics?filter={prefix}&limit=3")
    assert first["total"] == 7 and [t["name"] for t in first["items"]] == [
        f"{prefix}-0", f"{prefix}-1", f"{prefix}-2"]
    last = get(broker, f"/api/topics?filter={prefix}&limit=3&offset=6")
    assert [t["name"] for t in last["items"]] == [f"{prefix}-6"]
    names = [t["name"] for t in get(broker, "/api/topics?limit=500")["items"]]
    assert "__consumer_offsets" not in names
    internal = get(broker, "/api/topics?internal=true&filter=__consumer")["items"]
    assert internal[0]["name"] == "__consumer_offsets" and internal[0]["internal"]


def test_topic_detail_has_partition_offsets_size_and_configs(broker):
    topic = unique("detail")
    create(broker, topic, 2, {"retention.ms": "60000"})
    produce(broker, topic, [{"value": b"x" * 100, "partition": 1} for _ in range(5)])
    detail = get(broker, f"/api/topics/{topic}")
    assert detail["partition_count"] == 2 and detail["offsets"] == 5
    p0, p1 = detail["partitions"]
    assert (p0["start_offset"], p0["end_offset"], p0["size_bytes"]) == (0, 0, 0)
    assert (p1["start_offset"], p1["end_offset"]) == (0, 5) and p1["size_bytes"] > 500
    configs = {c["name"]: c for c in detail["configs"]}
    assert configs["retention.ms"] == {"name": "retention.ms", "value": "60000",
                                       "is_default": False}
    assert configs["cleanup.policy"]["is_default"]
    assert configs["cleanup.policy"]["value"] == "delete"
    assert request(broker, "/api/topics/no-such-topic")[0] == 404


def test_message_browser_renders_json_text_hex_and_headers(broker):
    topic = unique("browse")
    create(broker, topic)
    produce(broker, topic, [
        {"key": b"order-1", "value": b'{"id": 1, "total": 9.5}', "headers": [("src", b"web")],
         "timestamp": 1_700_000_000_000},
        {"key": None, "value": "héllo".encode(), "timestamp": 1_700_000_001_000},
        {"key": b"\x00\xff", "value": b"\x01\x02\x03", "timestamp": 1_700_000_002_000},
        {"key": b"k", "value": None, "timestamp": 1_700_000_003_000},
    ])
    page = get(broker, f"/api/topics/{topic}/messages?from=beginning")["messages"]
    assert [m["offset"] for m in page] == [0, 1, 2, 3]
    first, text, binary, tombstone = page
    assert first["value"] == {"size": 23, "encoding": "json", "json": {"id": 1, "total": 9.5}}
    assert first["key"]["text"] == "order-1" and first["timestamp"] == 1_700_000_000_000
    assert first["headers"] == [{"key": "src", "value": {"size": 3, "encoding": "utf8",
                                                          "text": "web"}}]
    assert text["key"] is None and text["value"]["text"] == "héllo"
    assert binary["key"] == {"size": 2, "encoding": "hex", "text": "00ff"}
    assert binary["value"]["text"] == "010203" and tombstone["value"] is None
    # from an offset, from a time, from the end
    assert [m["offset"] for m in get(
        broker, f"/api/topics/{topic}/messages?from=offset&offset=2")["messages"]] == [2, 3]
    assert [m["offset"] for m in get(
        broker, f"/api/topics/{topic}/messages?from=timestamp&timestamp=1700000000500"
    )["messages"]] == [1, 2, 3]
    assert [m["offset"] for m in get(
        broker, f"/api/topics/{topic}/messages?from=end&limit=2")["messages"]] == [2, 3]
    status, body = request(broker, f"/api/topics/{topic}/messages?from=timestamp")
    assert status == 400 and "needs timestamp" in body["message"]
    assert request(broker, f"/api/topics/{topic}/messages?partition=3")[0] == 404


def test_topic_wide_browsing_merges_partitions_by_time(broker):
    topic = unique("merged")
    create(broker, topic, 3)
    base = 1_700_000_000_000
    produce(broker, topic, [{"value": f"v{i}".encode(), "partition": i % 3,
                             "timestamp": base + i} for i in range(9)])
    newest = get(broker, f"/api/topics/{topic}/messages?from=end&limit=4")["messages"]
    assert [m["value"]["text"] for m in newest] == ["v5", "v6", "v7", "v8"]
    oldest = get(broker, f"/api/topics/{topic}/messages?from=beginning&limit=4")["messages"]
    assert [m["value"]["text"] for m in oldest] == ["v0", "v1", "v2", "v3"]
    only = get(broker, f"/api/topics/{topic}/messages?partition=1&from=beginning")["messages"]
    assert {m["partition"] for m in only} == {1} and len(only) == 3


def test_transaction_markers_and_aborted_records_are_marked(broker):
    topic = unique("txn")
    create(broker, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "transactional.id": unique("tx")})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"kept")
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"dropped")
    assert producer.flush(30) == 0   # appended before the abort, so it is in the log
    producer.abort_transaction(30)
    # a transaction left open, then a plain record after it
    producer.begin_transaction()
    producer.produce(topic, value=b"pending")
    assert producer.flush(30) == 0
    produce(broker, topic, [{"value": b"plain"}])
    page = get(broker, f"/api/topics/{topic}/messages?from=beginning")["messages"]
    assert [(m.get("transaction"), m.get("control")) for m in page] == [
        ("committed", None), (None, "COMMIT"), ("aborted", None), (None, "ABORT"),
        ("open", None), (None, None)]
    assert page[2]["value"]["text"] == "dropped" and page[4]["value"]["text"] == "pending"
    detail = get(broker, f"/api/topics/{topic}")["partitions"][0]
    assert (detail["last_stable_offset"], detail["end_offset"]) == (4, 6)
    producer.abort_transaction(30)


# ------------------------------------------------------------------ groups

def test_classic_group_with_members_assignment_offsets_lag_and_history(broker):
    topic, group = unique("lagging"), unique("classic")
    create(broker, topic, 2)
    produce(broker, topic, [{"value": b"m", "partition": i % 2} for i in range(10)])
    consumer, got = consume(broker, group, topic, 10, **{"client.id": "console-test"})
    try:
        # commit 3 of partition 0's 5 and all of partition 1's: lag 2
        consumer.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 5)],
                        asynchronous=False)
        listed = get(broker, f"/api/groups?filter={group}")
        assert listed["total"] == 1
        summary = listed["items"][0]
        assert summary["type"] == "classic" and summary["state"] == "Stable"
        assert summary["members"] == 1 and summary["lag"] == 2
        detail = get(broker, f"/api/groups/{group}")
        assert detail["protocol"] == "range" and detail["generation"] >= 1
        [member] = detail["members"]
        assert member["client_id"] == "console-test" and member["client_host"] == "/127.0.0.1"
        assert member["assignment"] == {topic: [0, 1]} and member["leader"]
        offsets = {(o["topic"], o["partition"]): o for o in detail["offsets"]}
        assert offsets[(topic, 0)]["committed"] == 3 and offsets[(topic, 0)]["lag"] == 2
        assert offsets[(topic, 1)]["lag"] == 0
        assert offsets[(topic, 0)]["member_id"] == member["member_id"]
        [rebalance] = detail["rebalances"]
        assert rebalance["cause"] == "member joined" and rebalance["outcome"] == "stable"
        assert rebalance["joined"][0]["client_id"] == "console-test"
        assert set(rebalance["phases_ms"]) == {"join", "sync"}
        assert detail["lag_history"][-1][1] == 2
    finally:
        consumer.close()
    left = get(broker, f"/api/groups/{group}")
    assert left["state"] == "Empty" and left["rebalances"][0]["cause"] == "member left"


def test_consumer_protocol_group_shows_epoch_assignor_and_assignment(broker):
    topic, group = unique("kip848"), unique("consumer")
    create(broker, topic, 3)
    produce(broker, topic, [{"value": b"m", "partition": i % 3} for i in range(6)])
    consumer, _ = consume(broker, group, topic, 6, **{"group.protocol": "consumer"})
    try:
        wait_until(lambda: get(broker, f"/api/groups/{group}")["state"] == "Stable", 30)
        detail = get(broker, f"/api/groups/{group}")
        assert detail["type"] == "consumer" and detail["group_epoch"] >= 2
        assert detail["assignor"] == "uniform"
        [member] = detail["members"]
        assert member["assignment"] == {topic: [0, 1, 2]} and member["state"] == "STABLE"
        assert detail["rebalances"][-1]["cause"] == "member joined"
        assert get(broker, f"/api/groups?type=consumer&filter={group}")["total"] == 1
        assert get(broker, f"/api/groups?type=classic&filter={group}")["total"] == 0
    finally:
        consumer.close()


def test_share_group_shows_each_records_state(broker):
    """A share group (KIP-932): members, and per share partition the start offset, in-flight
    records by state, delivery counts, owners and lock expiry; rejected records listed as
    archived."""
    import confluent_kafka as ck
    from tests.conformance.test_share_group_conformance import alter_group_configs
    from tests.support import RawClient
    topic, group = unique("share"), unique("share-g")
    create(broker, topic, 1)
    admin = RawClient(broker.port)
    alter_group_configs(admin, group, ("share.auto.offset.reset", "earliest", 0))
    admin.close()
    produce(broker, topic, [{"value": f"m{i}".encode(), "partition": 0} for i in range(6)])
    consumer = ck.ShareConsumer({"bootstrap.servers": f"127.0.0.1:{broker.port}",
                                 "group.id": group, "share.acknowledgement.mode": "explicit"})
    try:
        consumer.subscribe([topic])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 6 and time.monotonic() < deadline:
            got += [msg for msg in consumer.poll(0.5) if msg.error() is None]
        assert len(got) == 6
        for msg in got:     # accept 0-1, reject 2, keep 3-5 acquired
            if msg.offset() < 3:
                consumer.acknowledge(msg, ck.AcknowledgeType.REJECT if msg.offset() == 2
                                     else ck.AcknowledgeType.ACCEPT)
        consumer.commit_sync(10)
        summary = get(broker, f"/api/groups?type=share&filter={group}")
        assert summary["total"] == 1 and summary["items"][0]["type"] == "share"
        detail = get(broker, f"/api/groups/{group}")
        assert (detail["type"], detail["state"], detail["assignor"]) == \
            ("share", "Stable", "simple")
        [member] = detail["members"]
        assert member["assignment"] == {topic: [0]}
        [sp] = detail["share_partitions"]
        assert (sp["topic"], sp["partition"], sp["start_offset"], sp["end_offset"]) == \
            (topic, 0, 3, 6)
        assert sp["counts"] == {"available": 0, "acquired": 3, "acknowledged": 0,
                                "archived": 0}
        assert [(r["offset"], r["state"], r["delivery_count"], r["member_id"])
                for r in sp["records"]] == [(o, "acquired", 1, member["member_id"])
                                            for o in (3, 4, 5)]
        assert all(0 < r["lock_expires_in_ms"] <= 30000 for r in sp["records"])
        # the rejected record is gone from the in-flight records but listed as archived
        assert sp["archived"] == [{"offset": 2, "delivery_count": 1, "reason": "rejected"}]
    finally:
        consumer.close()


def test_streams_group_shows_topology_and_tasks(broker):
    """A streams group (KIP-1071): its topology's subtopologies with their topics, and each
    member's process and active tasks."""
    from tests.conformance.test_streams_group_conformance import StreamsMember, word_count
    from tests.support import RawClient
    topic, group = unique("streams-in"), unique("streams-app")
    create(broker, topic, 2)
    client = RawClient(broker.port)
    try:
        member = StreamsMember(client, group, word_count(group, topic))
        deadline = time.monotonic() + 10
        while not member.active and time.monotonic() < deadline:
            member.heartbeat()
            time.sleep(0.1)
        detail = get(broker, f"/api/groups/{group}")
        assert (detail["type"], detail["state"], detail["assignor"]) == \
            ("streams", "Stable", "sticky")
        assert [(s["id"], s["source_topics"], s["repartition_sink_topics"],
                 s["repartition_source_topics"], s["changelog_topics"])
                for s in detail["topology"]["subtopologies"]] == [
            ("0", [topic], [f"{group}-words-repartition"], [], []),
            ("1", [], [], [f"{group}-words-repartition"], [f"{group}-counts-changelog"])]
        [m] = detail["members"]
        assert (m["process_id"], m["member_epoch"]) == (member.process_id, member.epoch)
        assert m["tasks"] == {"active": ["0_0", "0_1", "1_0", "1_1"], "standby": [],
                              "warmup": []}
        assert get(broker, f"/api/groups?type=streams&filter={group}")["total"] == 1
    finally:
        client.close()


def test_unknown_group_is_not_found(broker):
    status, body = request(broker, "/api/groups/no-such-group")
    assert status == 404 and "not found" in body["message"]


# ------------------------------------------------------------------ broker

def test_broker_view_marks_settings_and_counts_requests_errors_and_connections(broker):
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(unique("b"), value=b"x")
    producer.flush(30)
    view = get(broker, "/api/broker")
    settings = {s["name"]: s for s in view["settings"]}
    assert settings["num.partitions"]["non_default"] is False
    assert settings["log.retention.bytes"]["non_default"] is True
    assert settings["log.retention.bytes"]["value"] == 1073741824
    # the embedded broker runs with 0 ms (the broker's default is 100, Kafka's 3000)
    delay = settings["group.initial.rebalance.delay.ms"]
    assert delay["differs_from_kafka"] and delay["kafka_default"] == 3000
    assert settings["metrics.port"]["kafka_setting"] is False
    # Kafka's defaults come from its catalogue: every default the README says differs, and
    # only those (plus what the embedded broker and this test's broker set)
    differs = {n for n, s in settings.items() if s["differs_from_kafka"]}
    readme = open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")).read()
    documented = set(re.findall(r"^\| `([a-z.]+)`", readme, re.M))
    documented |= {"group.consumer.min.heartbeat.interval.ms",
                   "group.streams.min.heartbeat.interval.ms", "group.streams.heartbeat.interval.ms",
                   "group.streams.initial.rebalance.delay.ms",
                   "group.streams.assignment.interval.ms", "transaction.state.log.segment.bytes"}
    assert {"group.share.assignment.interval.ms", "group.streams.assignment.interval.ms",
            "offsets.topic.segment.bytes"} <= differs
    assert not {n for n in differs if settings[n]["non_default"] is False} - documented
    assert settings["group.consumer.min.assignment.interval.ms"]["differs_from_kafka"] is False
    assert settings["super.users"]["kafka_setting"] is True
    apis = {a["api"]: a for a in view["apis"]}
    assert apis["Produce"]["requests"] >= 1 and apis["Metadata"]["requests"] >= 1
    assert view["listeners"][0]["name"] == "PLAINTEXT"
    assert view["connections"]["total"] >= 1
    assert {"peer", "listener", "principal"} <= set(view["connections"]["items"][0])
    producer.flush(1)


def test_errors_per_api_are_shown(broker):
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers,
                         "group.id": unique("err")})
    try:
        # a commit for a partition of a topic that does not exist
        with pytest.raises(Exception):
            consumer.commit(offsets=[TopicPartition(unique("missing"), 0, 1)],
                            asynchronous=False)
    finally:
        consumer.close()
    apis = {a["api"]: a for a in get(broker, "/api/broker")["apis"]}
    assert apis["OffsetCommit"]["errors"].get("UNKNOWN_TOPIC_OR_PARTITION", 0) >= 1


# ------------------------------------------------------------------ actions

def test_console_is_read_only_by_default(broker):
    status, body = request(broker, "/api/topics", "POST", {"name": unique("no")})
    assert status == 403 and body["error"] == "ACTIONS_DISABLED"
    assert get(broker, "/api/overview")["actions"] is False


def test_actions_refuse_other_origins_and_non_json(acting):
    status, body = request(acting, "/api/topics", "POST", {"name": unique("x")},
                           headers={"Origin": "http://evil.example"})
    assert status == 403 and body["error"] == "CROSS_ORIGIN"
    # a name that is not this endpoint's address (DNS rebinding) may not act
    port = acting.broker.http.bound[1]
    status, body = request(acting, "/api/topics", "POST", {"name": unique("x")},
                           headers={"Host": f"rebound.example:{port}",
                                    "Origin": f"http://rebound.example:{port}"})
    assert status == 403 and body["error"] == "UNTRUSTED_HOST"
    for host in (f"localhost:{port}", f"[::1]:{port}"):
        status, body = request(acting, "/api/topics", "POST", {"name": 5},
                               headers={"Host": host})
        assert status == 400 and body["message"] == "name must be a string"
    status, body = request(acting, "/api/topics", "POST", {"name": unique("x")},
                           headers={"Content-Type": "text/plain"})
    assert status == 415 and body["error"] == "UNSUPPORTED_MEDIA_TYPE"
    assert "application/json" in body["message"]


def test_create_and_delete_topic_use_the_apis_validation(acting):
    name = unique("made")
    status, body = request(acting, "/api/topics", "POST",
                           {"name": name, "partitions": 3, "configs": {"retention.ms": "1000"}})
    assert status == 200 and body["partitions"] == 3
    assert get(acting, f"/api/topics/{name}")["partition_count"] == 3
    # CreateTopics' own answers: exists, bad name, bad config, bad partition count
    status, body = request(acting, "/api/topics", "POST", {"name": name})
    assert status == 409 and body["error"] == "TOPIC_ALREADY_EXISTS"
    status, body = request(acting, "/api/topics", "POST", {"name": "bad name!"})
    assert status == 400 and body["error"] == "INVALID_TOPIC_EXCEPTION"
    status, body = request(acting, "/api/topics", "POST",
                           {"name": unique("c"), "configs": {"no.such": "1"}})
    assert status == 400 and body["error"] == "INVALID_CONFIG"
    status, body = request(acting, "/api/topics", "POST", {"name": unique("p"), "partitions": 0})
    assert status == 400 and body["error"] == "INVALID_PARTITIONS"
    status, body = request(acting, "/api/topics", "POST", {"name": 5})
    assert status == 400 and body["message"] == "name must be a string"
    status, body = request(acting, f"/api/topics/{name}", "DELETE")
    assert status == 200 and request(acting, f"/api/topics/{name}")[0] == 404
    status, body = request(acting, "/api/topics/__consumer_offsets", "DELETE")
    assert status == 403 and body["error"] == "TOPIC_AUTHORIZATION_FAILED"
    status, body = request(acting, f"/api/topics/{name}", "DELETE")
    assert status == 404 and body["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_produce_a_test_message_that_a_consumer_reads(acting):
    topic = unique("tested")
    create(acting, topic, 2)
    status, body = request(acting, f"/api/topics/{topic}/messages", "POST",
                           {"partition": 1, "key": "k1", "value": '{"a": 1}',
                            "headers": {"h": "v"}})
    assert status == 200 and body == {"topic": topic, "partition": 1, "offset": 0}
    consumer, [message] = consume(acting, unique("reader"), topic, 1)
    consumer.close()
    assert (message.partition(), message.key(), message.value()) == (1, b"k1", b'{"a": 1}')
    assert message.headers() == [("h", b"v")]
    status, body = request(acting, f"/api/topics/{topic}/messages", "POST",
                           {"partition": 7, "value": "x"})
    assert status == 404 and body["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_reset_offsets_to_earliest_latest_and_a_time_then_delete_the_group(acting):
    topic, group = unique("reset"), unique("resetting")
    create(acting, topic)
    base = int(time.time() * 1000) - 60_000
    produce(acting, topic, [{"value": f"v{i}".encode(), "timestamp": base + i * 1000}
                            for i in range(10)])
    consumer, _ = consume(acting, group, topic, 10)
    consumer.commit(asynchronous=False)
    # an active group: the coordinator refuses a commit without a member, as Kafka does
    status, body = request(acting, f"/api/groups/{group}/reset-offsets", "POST",
                           {"to": "earliest"})
    assert status == 409 and body["error"] == "UNKNOWN_MEMBER_ID"
    assert "stop its consumers" in body["message"]
    consumer.close()

    def committed():
        offsets = get(acting, f"/api/groups/{group}")["offsets"]
        return {o["partition"]: o["committed"] for o in offsets}

    assert committed() == {0: 10}
    status, body = request(acting, f"/api/groups/{group}/reset-offsets", "POST",
                           {"to": "earliest"})
    assert status == 200 and body["offsets"] == [{"topic": topic, "partition": 0, "offset": 0}]
    assert committed() == {0: 0}
    status, _ = request(acting, f"/api/groups/{group}/reset-offsets", "POST",
                        {"to": "timestamp", "timestamp": base + 4500})
    assert status == 200 and committed() == {0: 5}
    status, _ = request(acting, f"/api/groups/{group}/reset-offsets", "POST",
                        {"to": "latest", "topic": topic})
    assert status == 200 and committed() == {0: 10}
    status, body = request(acting, f"/api/groups/{group}/reset-offsets", "POST", {"to": "later"})
    assert status == 400 and "earliest, latest or timestamp" in body["message"]
    status, body = request(acting, f"/api/groups/{group}", "DELETE")
    assert status == 200 and request(acting, f"/api/groups/{group}")[0] == 404
    status, body = request(acting, f"/api/groups/{group}", "DELETE")
    assert status == 404 and body["error"] == "GROUP_ID_NOT_FOUND"


def test_deleting_a_group_with_members_is_refused(acting):
    topic, group = unique("busy"), unique("busy")
    create(acting, topic)
    produce(acting, topic, [{"value": b"x"}])
    consumer, _ = consume(acting, group, topic, 1)
    try:
        status, body = request(acting, f"/api/groups/{group}", "DELETE")
        assert status == 409 and body["error"] == "NON_EMPTY_GROUP"
    finally:
        consumer.close()


# ------------------------------------------------------------------ bounds

def test_assets_are_package_data_of_the_wheel():
    import pathlib
    import tomllib
    root = pathlib.Path(__file__).resolve().parent.parent
    data = tomllib.loads((root / "pyproject.toml").read_text())
    assert data["tool"]["setuptools"]["package-data"]["broker.console"] == ["static/*"]
    assert {p.name for p in (root / "broker" / "console" / "static").iterdir()} == {
        "index.html", "console.js", "console.css"}


def test_lag_history_samples_at_most_once_a_second_and_is_bounded():
    from broker.console.views import LagHistory
    history = LagHistory(per_group=3, max_groups=2, every_ms=1000)
    for t, lag in ((0, 5), (400, 6), (1000, 7), (2000, 8), (3000, 9)):
        history.sample("g", t, lag)
    assert history.of("g") == [[1000, 7], [2000, 8], [3000, 9]]   # 400 ms was too soon
    # looks within the second replace the newest sample, so the chart ends at the lag shown
    history.sample("g", 3200, 10)
    assert history.of("g") == [[2000, 8], [3000, 9], [3200, 10]]
    history.sample("g", 3500, 11)
    assert history.of("g") == [[2000, 8], [3000, 9], [3500, 11]]
    history.sample("g", 4100, 12)   # a second after 3000: the sample stays
    history.sample("g", 4200, 13)
    assert history.of("g") == [[3000, 9], [4100, 12], [4200, 13]]
    history.sample("h", 0, 1)
    history.sample("i", 0, 1)
    assert history.of("g") == [] and history.of("i") == [[0, 1]]    # g looked at least recently


def test_request_rates_are_over_the_snapshots_kept():
    from broker.console.views import RequestRates
    now = [100.0]
    rates = RequestRates(clock=lambda: now[0])
    assert rates.rates({"Fetch": 10}) == {}
    now[0] = 102.0
    assert rates.rates({"Fetch": 30, "Produce": 4}) == {"Fetch": 10.0, "Produce": 2.0}
    now[0] = 102.5   # under a second since the last snapshot: none is taken
    rates.rates({"Fetch": 40})
    assert len(rates.snapshots) == 2


def test_values_are_cut_at_the_shown_bound():
    from broker.console.views import MAX_SHOWN_BYTES, render
    big = render(b"x" * (MAX_SHOWN_BYTES + 10))
    assert big["truncated"] and big["size"] == MAX_SHOWN_BYTES + 10
    assert len(big["text"]) == MAX_SHOWN_BYTES
    # a cut inside a multi-byte character still shows the text before it
    cut = render(b"x" + "é".encode() * (MAX_SHOWN_BYTES // 2))
    assert cut["encoding"] == "utf8" and cut["truncated"]
    assert cut["text"] == "x" + "é" * (MAX_SHOWN_BYTES // 2 - 1)
    assert render(b'{"a": [1, 2]}')["json"] == {"a": [1, 2]}
    assert render(b"[not json")["encoding"] == "utf8"


def test_a_group_whose_coordinator_is_loading_answers_503():
    with EmbeddedBroker() as b:
        coordinator = b.broker.coordinator
        partition = b.call(coordinator.partition_for, "loading-group")
        b.call(coordinator.runtime.begin_loading, partition)
        status, body = request(b, "/api/groups/loading-group")
        assert status == 503 and body["error"] == "COORDINATOR_LOAD_IN_PROGRESS"
        assert get(b, "/api/groups")["loading"] == 1
        b.call(coordinator.runtime.finish_loading, partition)
        assert request(b, "/api/groups/loading-group")[0] == 404
        assert get(b, "/api/groups")["loading"] == 0


def test_reset_offsets_of_an_empty_consumer_protocol_group(acting):
    topic, group = unique("kip848-reset"), unique("kip848-reset")
    create(acting, topic, 2)
    produce(acting, topic, [{"value": b"m", "partition": i % 2} for i in range(6)])
    consumer, _ = consume(acting, group, topic, 6, **{"group.protocol": "consumer"})
    consumer.commit(asynchronous=False)
    status, body = request(acting, f"/api/groups/{group}/reset-offsets", "POST",
                           {"to": "earliest"})
    assert status == 409 and body["error"] in ("UNKNOWN_MEMBER_ID", "STALE_MEMBER_EPOCH")
    consumer.close()
    wait_until(lambda: get(acting, f"/api/groups/{group}")["state"] == "Empty", 30)
    status, body = request(acting, f"/api/groups/{group}/reset-offsets", "POST",
                           {"to": "earliest", "topic": topic})
    assert status == 200, body
    offsets = {o["partition"]: o["committed"]
               for o in get(acting, f"/api/groups/{group}")["offsets"]}
    assert offsets == {0: 0, 1: 0}
    # a consumer of the group reads everything again
    again, got = consume(acting, group, topic, 6, **{"group.protocol": "consumer"})
    again.close()
    assert sorted((m.partition(), m.offset()) for m in got) == [(p, o) for p in (0, 1)
                                                                for o in range(3)]


def test_one_message_answer_shows_a_bounded_number_of_bytes(broker, monkeypatch):
    from broker.console import views
    monkeypatch.setattr(views, "MAX_SHOWN_TOTAL", 3000)
    topic = unique("big")
    create(broker, topic)
    produce(broker, topic, [{"value": bytes([65 + i]) * 1000} for i in range(5)])
    page = get(broker, f"/api/topics/{topic}/messages?from=beginning")["messages"]
    sizes = [len(m["value"]["text"]) for m in page]
    # three whole values spend the budget; the rest are cut to SHOWN_WHEN_SPENT bytes
    assert sizes == [1000, 1000, 1000, 256, 256]
    assert all(m["value"]["size"] == 1000 for m in page)
    assert [m["value"].get("truncated", False) for m in page] == [False] * 3 + [True] * 2


def test_http_connections_beyond_the_bound_are_answered_busy(broker, monkeypatch):
    import socket
    from broker.http import server
    monkeypatch.setattr(server, "MAX_HTTP_CONNECTIONS", 2)
    host, port = broker.broker.http.bound
    idle = [socket.create_connection((host, port)) for _ in range(2)]
    try:
        wait_until(lambda: broker.broker.http.open == 2, 10)
        status, body = request(broker, "/api/overview")
        assert status == 503 and body == b"busy\n"
    finally:
        for s in idle:
            s.close()
    wait_until(lambda: request(broker, "/api/overview")[0] == 200, 10)
