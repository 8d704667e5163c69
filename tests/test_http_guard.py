"""The HTTP port's guard (broker/http): the attacks of the issue, replayed as raw HTTP against
embedded brokers, are refused with a clear JSON error and leave nothing behind (no fault armed,
no node down, no record value in the answer); what legitimate tools send keeps working.

1. A page of another site (foreign Origin, text/plain body: no CORS preflight) or a rebound DNS
   name (foreign Host) may not arm faults or take nodes down.
2. Console reads refuse a foreign Host; with an authorizer the console and the HTTP API need an
   HTTP Basic login as a PLAIN or SCRAM user and answer only what its ACLs allow.
"""
from __future__ import annotations

import asyncio
import base64
import http.client
import json

import pytest

from broker.cli import build_parser, resolve_config
from broker.config import BrokerConfig
from broker.http.guard import HostGuard, writes_enabled
from broker.security import STANDARD_AUTHORIZER
from broker.security.authorizer import (AclBinding, AclOperation, AclPermissionType, PatternType,
                                        ResourceType)
from broker.testing.embedded import EmbeddedBroker
from tests.support import unique

FAULT = {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 1000000}
SECRET_VALUE = "the-secret-value-0f3a"


def send(kb, method: str, path: str, body: bytes | None = None, headers=None,
         host: str | None = None):
    """(status, headers, parsed JSON or raw bytes) of one request with exactly these headers
    (and the Host of the address it connects to unless ``host`` or headers say otherwise)."""
    address, port = kb.broker.http.bound
    conn = http.client.HTTPConnection(address, port, timeout=30)
    sent = {"Host": host or f"{address}:{port}", **(headers or {})}
    try:
        conn.request(method, path, body=body, headers=sent)
        response = conn.getresponse()
        raw = response.read()
        answer = json.loads(raw) if response.getheader("Content-Type") == "application/json" \
            else raw
        return response.status, response.headers, answer
    finally:
        conn.close()


def faults(kb) -> list:
    status, _, listed = send(kb, "GET", "/faults")
    assert status == 200
    return listed


# ------------------------------------------------------------------ 1: write endpoints


@pytest.fixture(scope="module")
def kb():
    with EmbeddedBroker({"nodes": 2, "console.actions.enable": True}) as b:
        yield b


def test_a_foreign_page_cannot_arm_a_fault(kb):
    """The issue's curl: Origin of another site, a text/plain body (a 'simple' request a page
    may send without preflight)."""
    status, _, body = send(kb, "POST", "/faults", json.dumps(FAULT).encode(),
                           {"Origin": "http://evil.example", "Content-Type": "text/plain"})
    assert status == 403 and body["error"] == "CROSS_ORIGIN"
    assert "http://evil.example" in body["message"]
    assert faults(kb) == []


def test_a_fault_needs_a_json_content_type(kb):
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                  None):
        headers = {} if ctype is None else {"Content-Type": ctype}
        status, _, body = send(kb, "POST", "/faults", json.dumps(FAULT).encode(), headers)
        assert status == 415 and body["error"] == "UNSUPPORTED_MEDIA_TYPE", ctype
        assert "application/json" in body["message"]
    assert faults(kb) == []


def test_a_rebound_dns_name_cannot_arm_a_fault_or_read_them(kb):
    port = kb.broker.http.bound[1]
    rebound = f"evil.example:{port}"
    status, _, body = send(kb, "POST", "/faults", json.dumps(FAULT).encode(),
                           {"Content-Type": "application/json",
                            "Origin": f"http://{rebound}"}, host=rebound)
    assert status == 403 and body["error"] == "UNTRUSTED_HOST"
    assert "metrics.allowed.hosts" in body["message"]
    assert send(kb, "GET", "/faults", host=rebound)[0] == 403
    assert send(kb, "DELETE", "/faults", host=rebound)[0] == 403
    assert faults(kb) == []


def test_a_foreign_page_cannot_take_a_node_down(kb):
    for headers, host, error in (
            ({"Origin": "http://evil.example", "Content-Type": "application/json"}, None,
             "CROSS_ORIGIN"),
            ({"Content-Type": "text/plain"}, None, "UNSUPPORTED_MEDIA_TYPE"),
            ({"Content-Type": "application/json"}, "evil.example", "UNTRUSTED_HOST")):
        status, _, body = send(kb, "POST", "/nodes/2/down", b"", headers, host)
        assert status in (403, 415) and body["error"] == error
    assert [(n["node"], n["state"]) for n in kb.nodes()] == [(1, "up"), (2, "up")]


def test_console_actions_refuse_foreign_pages_too(kb):
    name = unique("evil")
    status, _, body = send(kb, "POST", "/api/topics", json.dumps({"name": name}).encode(),
                           {"Origin": "http://evil.example", "Content-Type": "text/plain"})
    assert status == 403 and body["error"] == "CROSS_ORIGIN"
    status, _, body = send(kb, "POST", "/api/topics", json.dumps({"name": name}).encode(),
                           {"Content-Type": "text/plain"})
    assert status == 415
    assert send(kb, "GET", f"/api/topics/{name}")[0] == 404


def test_what_test_tools_send_still_arms_faults_and_moves_nodes(kb):
    """curl of docker-compose.faults.yml, kafkajs' http.request in tests/js/fault_scenario.js:
    a JSON content type, no Origin; a browser on the console page: its own Origin."""
    address, port = kb.broker.http.bound
    status, _, added = send(kb, "POST", "/faults", json.dumps(FAULT).encode(),
                            {"Content-Type": "application/json; charset=utf-8"})
    assert status == 201 and added["count"] == FAULT["count"]
    status, _, _ = send(kb, "DELETE", f"/faults/{added['id']}",
                        headers={"Origin": f"http://{address}:{port}"})
    assert status == 200 and faults(kb) == []
    for host in (f"localhost:{port}", f"LOCALHOST.:{port}", f"[::1]:{port}"):
        assert send(kb, "GET", "/faults", host=host)[0] == 200
    status, _, body = send(kb, "POST", "/nodes/2/down", b"", {"Content-Type": "application/json"})
    assert status == 200 and body["state"] == "down"
    status, _, body = send(kb, "POST", "/nodes/2/up", b"", {"Content-Type": "application/json"})
    assert status == 200 and body["state"] == "up"


def test_scrapes_and_healthchecks_answer_any_host(kb):
    for path in ("/metrics", "/health", "/ready"):
        assert send(kb, "GET", path, host="prometheus.monitoring.svc:9404")[0] == 200


def test_writes_off_refuses_faults_and_nodes_but_lists_them():
    with EmbeddedBroker({"nodes": 2, "metrics.write.enable": False}) as off:
        status, _, body = send(off, "POST", "/faults", json.dumps(FAULT).encode(),
                               {"Content-Type": "application/json"})
        assert status == 403 and body["error"] == "WRITES_DISABLED"
        assert "metrics.write.enable" in body["message"]
        status, _, body = send(off, "POST", "/nodes/2/down", b"",
                               {"Content-Type": "application/json"})
        assert status == 403 and body["error"] == "WRITES_DISABLED"
        assert faults(off) == []
        assert send(off, "GET", "/nodes")[0] == 200
        assert [n["state"] for n in off.nodes()] == ["up", "up"]


def test_allowed_hosts_let_a_container_name_arm_faults():
    """docker-compose.faults.yml posts to http://broker:9404: a name the broker is told."""
    with EmbeddedBroker({"metrics.allowed.hosts": "broker"}) as named:
        port = named.broker.http.bound[1]
        status, _, body = send(named, "POST", "/faults", json.dumps(FAULT).encode(),
                               {"Content-Type": "application/json"}, host=f"broker:{port}")
        assert status == 201
        assert send(named, "POST", "/faults", json.dumps(FAULT).encode(),
                    {"Content-Type": "application/json"}, host=f"other:{port}")[0] == 403
        assert [f["id"] for f in faults(named)] == [body["id"]]


def cli_config(*args: str) -> BrokerConfig:
    return resolve_config(build_parser().parse_args(list(args)), environ={})


def test_write_defaults_cli_on_loopback_only_embedded_always():
    assert cli_config()["metrics.write.enable"] == "auto"
    assert writes_enabled(cli_config())  # 127.0.0.1
    assert writes_enabled(cli_config("--override", "metrics.host=::1"))
    assert writes_enabled(cli_config("--override", "metrics.host=localhost"))
    for host in ("0.0.0.0", "", "::", "192.168.1.20", "broker"):
        assert not writes_enabled(cli_config("--override", f"metrics.host={host}")), host
    assert writes_enabled(cli_config("--override", "metrics.host=0.0.0.0", "--override",
                                     "metrics.write.enable=true"))
    assert not writes_enabled(cli_config("--override", "metrics.write.enable=false"))
    assert writes_enabled(EmbeddedBroker({"metrics.host": "0.0.0.0"}).config)
    assert not writes_enabled(EmbeddedBroker({"metrics.write.enable": "false"}).config)


def test_trusted_host_names():
    guard = HostGuard(BrokerConfig({
        "listeners": "INTERNAL://0.0.0.0:29092,EXTERNAL://0.0.0.0:9092",
        "advertised.listeners": "INTERNAL://broker:29092,EXTERNAL://localhost:9092",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "metrics.host": "0.0.0.0", "metrics.allowed.hosts": "kbroker.proxy.example"}))
    for host in ("broker:9404", "localhost:9404", "127.0.0.1:9404", "10.0.0.7", "[::1]:9404",
                 "kbroker.proxy.example", "Broker:9404"):
        assert guard.direct(host), host
    for host in ("", "evil.example:9404", "broker.evil.example", "127.0.0.1.nip.io:9404",
                 "localhost.evil.example"):
        assert not guard.direct(host), host


# ------------------------------------------------------------------ 2: console reads


def test_console_reads_refuse_a_foreign_host(kb):
    topic = kb.create_topic()
    status, _, body = send(kb, "POST", f"/api/topics/{topic}/messages",
                           json.dumps({"value": SECRET_VALUE}).encode(),
                           {"Content-Type": "application/json"})
    assert status == 200
    port = kb.broker.http.bound[1]
    for path in (f"/api/topics/{topic}/messages", "/api/topics", f"/api/topics/{topic}",
                 "/api/groups", "/api/broker", "/api/overview", "/"):
        status, _, body = send(kb, "GET", path, host=f"evil.example:{port}")
        assert status == 403 and body["error"] == "UNTRUSTED_HOST", path
        assert SECRET_VALUE not in json.dumps(body) and topic not in json.dumps(body)
    status, _, body = send(kb, "GET", f"/api/topics/{topic}/messages")
    assert status == 200 and [m["value"]["text"] for m in body["messages"]] == [SECRET_VALUE]


PLAIN_USERS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'user_admin="admin-pw" user_alice="alice-pw";')


@pytest.fixture(scope="module")
def secured():
    """An authorizer, PLAIN users admin (super user) and alice, SCRAM user bob."""
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT",
        "listener.name.sasl.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl.plain.sasl.jaas.config": PLAIN_USERS,
        "sasl.scram.bootstrap.credentials": "SCRAM-SHA-256=[name=bob,password=bob-pw]",
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin",
        "console.actions.enable": True, "connection.failed.authentication.delay.ms": 250}
    with EmbeddedBroker(settings) as b:
        yield b


def basic(user: str, password: str | None = None) -> dict:
    token = base64.b64encode(f"{user}:{password or user + '-pw'}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def as_user(kb, user, method, path, document=None, password=None):
    headers = basic(user, password)
    body = None
    if document is not None:
        headers["Content-Type"] = "application/json"
        body = json.dumps(document).encode()
    status, _, answer = send(kb, method, path, body, headers)
    return status, answer


def grant(kb, rtype, name, principal, op) -> None:
    acl = AclBinding(rtype, name, PatternType.LITERAL, principal, "*", op,
                     AclPermissionType.ALLOW)
    kb.call(lambda: kb.broker.authorizer.create([acl]))


@pytest.fixture(scope="module")
def topics(secured):
    """A secret topic with a record (written by admin through the console), a topic alice may
    read, one bob may only describe, and a group with offsets on the secret topic."""
    secret, readable, described = unique("secret"), unique("open"), unique("described")
    group = unique("g-secret")
    for name in (secret, readable, described):
        assert as_user(secured, "admin", "POST", "/api/topics", {"name": name})[0] == 200
        status, _ = as_user(secured, "admin", "POST", f"/api/topics/{name}/messages",
                            {"value": SECRET_VALUE if name == secret else "public"})
        assert status == 200
    status, _ = as_user(secured, "admin", "POST", f"/api/groups/{group}/reset-offsets",
                        {"to": "earliest", "topic": secret})
    assert status == 200
    grant(secured, ResourceType.TOPIC, readable, "User:alice", AclOperation.READ)
    grant(secured, ResourceType.TOPIC, described, "User:bob", AclOperation.DESCRIBE)
    return {"secret": secret, "readable": readable, "described": described, "group": group}


def test_without_a_login_the_console_asks_for_one(secured, topics):
    for path in (f"/api/topics/{topics['secret']}/messages", "/api/topics", "/", "/faults",
                 "/nodes"):
        status, headers, body = send(secured, "GET", path)
        assert status == 401, path
        assert headers["WWW-Authenticate"].startswith('Basic realm="kbroker"')
        assert body["error"] == "SASL_AUTHENTICATION_FAILED"
        assert SECRET_VALUE not in json.dumps(body)
    # the request: a foreign Host is refused before any login is asked
    status, _, body = send(secured, "GET", f"/api/topics/{topics['secret']}/messages",
                           host="evil.example")
    assert status == 403 and body["error"] == "UNTRUSTED_HOST"


def test_a_failed_login_is_answered_after_the_failed_authentication_delay(secured, topics):
    held = []

    async def pause(seconds):
        held.append(seconds)

    secured.call(setattr, secured.broker.http, "pause", pause)
    try:
        for user, password in (("alice", "wrong"), ("nobody", "nobody-pw"), ("bob", "alice-pw")):
            status, headers, body = send(secured, "GET", f"/api/topics/{topics['secret']}"
                                         "/messages", headers=basic(user, password))
            assert status == 401 and "WWW-Authenticate" in headers
            assert SECRET_VALUE not in json.dumps(body)
        status, _, _ = send(secured, "GET", "/api/topics",
                            headers={"Authorization": "Basic !!not base64"})
        assert status == 401
        # a request without credentials is the browser's first one: asked at once
        assert send(secured, "GET", "/api/topics")[0] == 401
        assert held == [0.25] * 4
        assert as_user(secured, "alice", "GET", "/api/topics")[0] == 200
        assert held == [0.25] * 4
    finally:
        secured.call(setattr, secured.broker.http, "pause", asyncio.sleep)


def test_a_user_sees_only_the_topics_and_records_its_acls_allow(secured, topics):
    secret, readable = topics["secret"], topics["readable"]
    status, body = as_user(secured, "alice", "GET", f"/api/topics/{secret}/messages")
    assert status == 403 and body["error"] == "TOPIC_AUTHORIZATION_FAILED"
    assert SECRET_VALUE not in json.dumps(body)
    assert as_user(secured, "alice", "GET", f"/api/topics/{secret}")[0] == 403
    status, listed = as_user(secured, "alice", "GET", "/api/topics")
    assert status == 200 and [t["name"] for t in listed["items"]] == [readable]
    status, body = as_user(secured, "alice", "GET", f"/api/topics/{readable}/messages")
    assert status == 200 and [m["value"]["text"] for m in body["messages"]] == ["public"]
    status, overview = as_user(secured, "alice", "GET", "/api/overview")
    assert overview["topics"] == 1 and overview["groups"] == 0
    assert overview["principal"] == "User:alice"
    # the broker view shows the settings: DESCRIBE_CONFIGS on the cluster, as DescribeConfigs
    status, body = as_user(secured, "alice", "GET", "/api/broker")
    assert status == 403 and body["error"] == "CLUSTER_AUTHORIZATION_FAILED"


def test_a_scram_user_logs_in_and_describe_is_not_read(secured, topics):
    described = topics["described"]
    status, listed = as_user(secured, "bob", "GET", "/api/topics")
    assert status == 200 and [t["name"] for t in listed["items"]] == [described]
    assert as_user(secured, "bob", "GET", f"/api/topics/{described}")[0] == 200
    status, body = as_user(secured, "bob", "GET", f"/api/topics/{described}/messages")
    assert status == 403 and body["error"] == "TOPIC_AUTHORIZATION_FAILED"
    assert "public" not in json.dumps(body)


def test_groups_are_shown_to_whom_their_acls_allow(secured, topics):
    group = topics["group"]
    status, listed = as_user(secured, "alice", "GET", "/api/groups")
    assert status == 200 and group not in json.dumps(listed)
    status, body = as_user(secured, "alice", "GET", f"/api/groups/{group}")
    assert status == 403 and body["error"] == "GROUP_AUTHORIZATION_FAILED"
    grant(secured, ResourceType.GROUP, group, "User:alice", AclOperation.DESCRIBE)
    status, listed = as_user(secured, "alice", "GET", "/api/groups")
    assert [g["group_id"] for g in listed["items"]] == [group]
    # the group's offsets of a topic alice may not describe are left out, as OffsetFetch does
    status, body = as_user(secured, "alice", "GET", f"/api/groups/{group}")
    assert status == 200 and body["offsets"] == [] and body["lag"] == 0
    status, body = as_user(secured, "admin", "GET", f"/api/groups/{group}")
    assert [o["topic"] for o in body["offsets"]] == [topics["secret"]]


def test_actions_need_the_acls_their_kafka_apis_need(secured, topics):
    secret, group = topics["secret"], topics["group"]
    made = unique("alice-made")
    for method, path, document, error in (
            ("POST", "/api/topics", {"name": made}, "TOPIC_AUTHORIZATION_FAILED"),
            ("POST", f"/api/topics/{secret}/messages", {"value": "x"},
             "TOPIC_AUTHORIZATION_FAILED"),
            ("DELETE", f"/api/topics/{secret}", None, "TOPIC_AUTHORIZATION_FAILED"),
            ("POST", f"/api/groups/{group}/reset-offsets", {"to": "latest"},
             "GROUP_AUTHORIZATION_FAILED"),
            ("DELETE", f"/api/groups/{group}", None, "GROUP_AUTHORIZATION_FAILED")):
        status, body = as_user(secured, "alice", method, path, document)
        assert status == 403 and body["error"] == error, (path, body)
    assert as_user(secured, "admin", "GET", f"/api/topics/{made}")[0] == 404
    status, body = as_user(secured, "admin", "GET", f"/api/topics/{secret}/messages")
    assert [m["value"]["text"] for m in body["messages"]] == [SECRET_VALUE]
    assert as_user(secured, "admin", "GET", f"/api/groups/{group}")[0] == 200
    # WRITE on the topic is what Produce needs
    grant(secured, ResourceType.TOPIC, secret, "User:alice", AclOperation.WRITE)
    status, body = as_user(secured, "alice", "POST", f"/api/topics/{secret}/messages",
                           {"value": "from alice"})
    assert status == 200 and body["offset"] == 1


def test_faults_and_nodes_need_the_cluster_acls(secured, topics):
    for method, path, document in (("GET", "/faults", None), ("POST", "/faults", FAULT),
                                   ("GET", "/nodes", None)):
        status, body = as_user(secured, "alice", method, path, document)
        assert status == 403 and body["error"] == "CLUSTER_AUTHORIZATION_FAILED"
    status, listed = as_user(secured, "admin", "GET", "/faults")
    assert status == 200 and listed == []
    status, added = as_user(secured, "admin", "POST", "/faults", FAULT)
    assert status == 201
    assert as_user(secured, "admin", "DELETE", "/faults") == (200, {"cleared": 1})


def test_the_broker_view_never_shows_a_secret_setting(secured, topics):
    status, body = as_user(secured, "admin", "GET", "/api/broker")
    assert status == 200
    shown = {s["name"]: s["value"] for s in body["settings"]}
    assert shown["sasl.scram.bootstrap.credentials"] == "[hidden]"
    assert "bob-pw" not in json.dumps(body)


def test_the_http_package_is_part_of_the_wheel():
    """setuptools finds packages by their __init__.py: without one the image has no server."""
    from setuptools import find_packages
    from tests.support import ROOT
    assert "broker.http" in find_packages(ROOT, include=["broker*"])
