"""Differential conformance of delegation tokens (KIP-48) with ``delegation.token.secret.key``
set: the same raw CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and
DescribeDelegationToken exchanges, and SCRAM logins with a token (the ``tokenauth`` extension),
against Apache Kafka 4.3.1 and kbroker, each with a PLAINTEXT and a SASL_PLAINTEXT listener and
the same settings; then Kafka's own kafka-delegation-tokens tool against both.

Without the secret key both brokers refuse every token API (tests/conformance/
test_sasl_conformance.py). Kafka's broker learns a token from its metadata log a moment after its
controller made it, so a login with a new token, or a refused login with a removed one, is
retried until it shows.
"""
from __future__ import annotations

import base64
import os
import subprocess
import time

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (CreateDelegationTokenRequest, DescribeDelegationTokenRequest,
                               ExpireDelegationTokenRequest, MetadataRequest,
                               RenewDelegationTokenRequest)
from tests.security.sasl_support import (ScramClient, authenticate, handshake,
                                         listener_settings, plain_token)
from tests.support import BrokerProcess, RawClient, free_port

from .kafka_server import KafkaServer, java_executable, resolve_kafka_jars
from .test_features_conformance import kafka_tools_jar

USERS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              'username="alice" password="alice-secret" '
              + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")
TOKEN_SETTINGS = {"delegation.token.secret.key": "conformance-token-secret"}
DAY_MS, WEEK_MS = 86_400_000, 604_800_000
C = CreateDelegationTokenRequest


class Target:
    def __init__(self, name: str, plain_port: int, sasl_port: int) -> None:
        self.name = name
        self.port = plain_port
        self.sasl_port = sasl_port

    def login(self, user: str) -> RawClient:
        client = RawClient(self.sasl_port, client_id="token-conformance")
        assert handshake(client, "PLAIN").error_code == 0
        assert authenticate(client, plain_token(user, USERS[user])).error_code == 0
        return client


def _settings() -> dict:
    settings = listener_settings(mechanisms="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
    settings["listener.name.sasl_plaintext.plain.sasl.jaas.config"] = PLAIN_JAAS
    return {**settings, **TOKEN_SETTINGS}


@pytest.fixture(scope="module")
def token_kafka():
    server = KafkaServer()
    sasl_port = free_port()
    server.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{server.port},CONTROLLER://127.0.0.1:"
                     f"{server.controller_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{server.port},"
                                f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT",
        **_settings()})
    server.start()
    try:
        yield Target("kafka", server.port, sasl_port)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def token_kbroker():
    port, sasl_port = free_port(), free_port()
    server = BrokerProcess(port=port, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        **_settings()})
    server.start()
    try:
        yield Target("kbroker", port, sasl_port)
    finally:
        server.stop()


@pytest.fixture(params=["kafka", "kbroker"])
def target(request) -> Target:
    return request.getfixturevalue(f"token_{request.param}")


def create(client, owner: str | None = None, renewers=(), max_lifetime_ms: int = -1,
           renewer_type: str = "User"):
    return client.call(C(owner_principal_type="User" if owner else None,
                         owner_principal_name=owner,
                         renewers=[C.CreatableRenewers(principal_type=renewer_type,
                                                       principal_name=r) for r in renewers],
                         max_lifetime_ms=max_lifetime_ms), 3)


def renew(client, hmac: bytes, period_ms: int):
    answer = client.call(RenewDelegationTokenRequest(hmac=hmac, renew_period_ms=period_ms), 2)
    return answer.error_code, answer.expiry_timestamp_ms


def expire(client, hmac: bytes, period_ms: int):
    answer = client.call(ExpireDelegationTokenRequest(hmac=hmac,
                                                      expiry_time_period_ms=period_ms), 2)
    return answer.error_code, answer.expiry_timestamp_ms


def describe(client, owners=None):
    Owner = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner
    request = DescribeDelegationTokenRequest(owners=None if owners is None else [
        Owner(principal_type="User", principal_name=o) for o in owners])
    answer = client.call(request, 3)
    return answer.error_code, {
        t.token_id: (t.principal_name, t.token_requester_principal_name,
                     sorted(r.principal_name for r in t.renewers), t.hmac,
                     t.issue_timestamp, t.expiry_timestamp, t.max_timestamp)
        for t in answer.tokens}


def test_tokens_made_renewed_expired_and_described_as_kafka(target):
    alice, bob, carol = (target.login(u) for u in ("alice", "bob", "carol"))
    try:
        before = int(time.time() * 1000)
        mine = create(alice, renewers=["bob"])
        assert (mine.error_code, mine.principal_type, mine.principal_name,
                mine.token_requester_principal_name) == (E.NONE, "User", "alice", "alice")
        # Kafka's Uuid string (22 url-safe base64 characters) and an HmacSHA512
        assert len(mine.token_id) == 22 and "=" not in mine.token_id and len(mine.hmac) == 64
        assert before - 1000 <= mine.issue_timestamp_ms <= before + 5000
        assert mine.expiry_timestamp_ms - mine.issue_timestamp_ms == DAY_MS
        assert mine.max_timestamp_ms - mine.issue_timestamp_ms == WEEK_MS
        short = create(alice, max_lifetime_ms=60_000)
        assert (short.error_code, short.max_timestamp_ms - short.issue_timestamp_ms,
                short.expiry_timestamp_ms - short.issue_timestamp_ms) == (E.NONE, 60_000, 60_000)
        for_bob = create(alice, owner="bob")
        assert (for_bob.error_code, for_bob.principal_name,
                for_bob.token_requester_principal_name) == (E.NONE, "bob", "alice")
        group = create(alice, renewers=["ops"], renewer_type="Group")
        assert (group.error_code, group.token_id, group.hmac, group.issue_timestamp_ms) == (
            E.INVALID_PRINCIPAL_TYPE, "", b"", -1)

        # Kafka's broker shows tokens once its metadata log has them
        deadline = time.monotonic() + 30
        while len(describe(alice)[1]) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        error, tokens = describe(alice)
        assert error == E.NONE
        assert {k: v[:4] for k, v in tokens.items()} == {
            mine.token_id: ("alice", "alice", ["bob"], mine.hmac),
            short.token_id: ("alice", "alice", [], short.hmac),
            for_bob.token_id: ("bob", "alice", [], for_bob.hmac)}
        assert tokens[mine.token_id][4:] == (mine.issue_timestamp_ms, mine.expiry_timestamp_ms,
                                             mine.max_timestamp_ms)
        assert set(describe(alice, ["bob"])[1]) == {mine.token_id, for_bob.token_id}
        assert describe(alice, []) == (E.NONE, {})
        # without an authorizer every token may be described
        assert set(describe(carol)[1]) == set(tokens)

        # the owner and the renewers renew and expire; the requester and others may not
        now = int(time.time() * 1000)
        error, expiry = renew(bob, mine.hmac, 60_000)
        assert error == E.NONE and now + 60_000 - 1000 <= expiry <= now + 65_000
        error, expiry = renew(alice, mine.hmac, -1)  # the default: expiry.time.ms from now
        assert error == E.NONE and now + DAY_MS - 1000 <= expiry <= now + DAY_MS + 5000
        assert renew(carol, mine.hmac, 60_000) == (E.DELEGATION_TOKEN_OWNER_MISMATCH, 0)
        assert renew(alice, for_bob.hmac, 60_000) == (E.DELEGATION_TOKEN_OWNER_MISMATCH, 0)
        assert renew(alice, b"no such token", 60_000) == (E.DELEGATION_TOKEN_NOT_FOUND, 0)
        assert expire(carol, mine.hmac, 1000) == (E.DELEGATION_TOKEN_OWNER_MISMATCH, 0)
        assert expire(alice, b"no such token", -1) == (E.DELEGATION_TOKEN_NOT_FOUND, 0)
        now = int(time.time() * 1000)
        error, expiry = expire(bob, mine.hmac, 500)
        assert error == E.NONE and now + 500 - 1000 <= expiry <= now + 5000
        error, expiry = expire(bob, for_bob.hmac, -1)
        assert error == E.NONE and now - 1000 <= expiry <= now + 5000

        deadline = time.monotonic() + 30
        while for_bob.token_id in describe(alice)[1] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert set(describe(alice)[1]) == {mine.token_id, short.token_id}

        # past its expiry a token is kept until the hourly sweep, but cannot be renewed
        time.sleep(1.0)
        assert renew(alice, mine.hmac, 60_000) == (E.DELEGATION_TOKEN_EXPIRED, 0)
        assert expire(alice, mine.hmac, 60_000) == (E.DELEGATION_TOKEN_EXPIRED, 0)
        error, _ = expire(alice, mine.hmac, -1)
        assert error == E.NONE
    finally:
        for client in (alice, bob, carol):
            client.close()


def _token_login(target: Target, mechanism: str, token_id: str, password: str):
    client = RawClient(target.sasl_port, client_id="token-conformance")
    assert handshake(client, mechanism).error_code == 0
    scram = ScramClient(mechanism, token_id, password)
    scram.bare += ",tokenauth=true"  # extensions belong to the client-first-message-bare
    first = authenticate(client, scram.first())
    if first.error_code:
        client.close()
        return first.error_code, first.error_message, None
    final = authenticate(client, scram.final(first.auth_bytes))
    if final.error_code:
        client.close()
        return final.error_code, final.error_message, None
    return final.error_code, final.error_message, client


def _eventually_login(target, mechanism, token_id, password, want_ok: bool):
    deadline = time.monotonic() + 30
    while True:
        error, message, client = _token_login(target, mechanism, token_id, password)
        if (error == E.NONE) == want_ok or time.monotonic() > deadline:
            return error, message, client
        time.sleep(0.2)


def test_a_token_logs_in_over_scram_and_may_not_ask_for_tokens(target):
    alice = target.login("alice")
    try:
        token = create(alice)
        assert token.error_code == E.NONE
        password = base64.b64encode(token.hmac).decode()
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            error, message, client = _eventually_login(target, mechanism, token.token_id,
                                                       password, want_ok=True)
            assert (error, message) == (E.NONE, ""), mechanism
            try:
                # a token's holder is its owner, but gets no tokens of its own
                metadata = client.call(MetadataRequest(topics=[],
                                                       allow_auto_topic_creation=False), 12)
                assert metadata.brokers
                assert create(client).error_code == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
                assert describe(client) == (E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, {})
                assert renew(client, token.hmac, 1000) == (
                    E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1)
            finally:
                client.close()
        generic = ("Authentication failed during authentication due to invalid credentials "
                   "with SASL mechanism SCRAM-SHA-512")
        assert _token_login(target, "SCRAM-SHA-512", token.token_id, "wrong")[:2] == (
            E.SASL_AUTHENTICATION_FAILED, generic)
        assert _token_login(target, "SCRAM-SHA-512", "no-such-token", password)[:2] == (
            E.SASL_AUTHENTICATION_FAILED, generic)
        # the token's id is no user name without tokenauth
        client = RawClient(target.sasl_port, client_id="token-conformance")
        try:
            assert handshake(client, "SCRAM-SHA-512").error_code == 0
            first = authenticate(client, ScramClient("SCRAM-SHA-512", token.token_id,
                                                     password).first())
            assert (first.error_code, first.error_message) == (E.SASL_AUTHENTICATION_FAILED,
                                                               generic)
        finally:
            client.close()

        assert expire(alice, token.hmac, -1)[0] == E.NONE
        error, message, client = _eventually_login(target, "SCRAM-SHA-512", token.token_id,
                                                   password, want_ok=False)
        assert (error, message) == (E.SASL_AUTHENTICATION_FAILED, generic)
    finally:
        alice.close()


def delegation_tokens_tool(target: Target, config_file: str, *args: str) -> str:
    """kafka-delegation-tokens.sh (org.apache.kafka.tools.DelegationTokenCommand)."""
    libs = resolve_kafka_jars()
    jars = [os.path.join(libs, n) for n in sorted(os.listdir(libs)) if n.endswith(".jar")]
    result = subprocess.run(
        [java_executable(), "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp",
         os.pathsep.join([kafka_tools_jar(), *jars]),
         "org.apache.kafka.tools.DelegationTokenCommand",
         "--bootstrap-server", f"127.0.0.1:{target.sasl_port}",
         "--command-config", config_file, *args],
        capture_output=True, text=True, timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode == 0 and "Exception" not in out, out[-3000:]
    return result.stdout


def test_kafka_delegation_tokens_tool(target, tmp_path):
    config = tmp_path / "alice.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
                      'required username="alice" password="alice-secret";\n')
    out = delegation_tokens_tool(target, str(config), "--create", "--max-life-time-period", "-1",
                                 "--renewer-principal", "User:bob")
    assert "Calling create token operation with renewers :[User:bob]" in out
    assert "Created delegation token with tokenId :" in out
    row = next(line for line in out.splitlines()
               if line.split() and len(line.split()[0]) == 22 and "User:alice" in line)
    token_id, hmac = row.split()[0], row.split()[1]
    # the tool asks for no owner's tokens unless told whose (an empty owner list): none
    out = delegation_tokens_tool(target, str(config), "--describe")
    assert "Total number of tokens : 0" in out and token_id not in out
    deadline = time.monotonic() + 30
    while token_id not in (listed := delegation_tokens_tool(
            target, str(config), "--describe", "--owner-principal", "User:alice")):
        assert time.monotonic() < deadline, listed
        time.sleep(0.5)
    assert "User:bob" in listed.split(token_id, 1)[1].splitlines()[0]
    out = delegation_tokens_tool(target, str(config), "--renew", "--renew-time-period", "60000",
                                 "--hmac", hmac)
    assert "Completed renew operation. New expiry date :" in out
    out = delegation_tokens_tool(target, str(config), "--expire", "--expiry-time-period", "-1",
                                 "--hmac", hmac)
    assert "Completed expire operation. New expiry date :" in out
