"""Delegation tokens (broker/security/delegation_tokens.py): the token store on an injected clock
(lifetimes, renewal, expiry, the sweep, what is kept on disk), which tokens a
DescribeDelegationToken shows under ACLs, and the Java client (kafka-clients 4.3.1) producing and
consuming after a SCRAM login with a token. tests/conformance/test_delegation_token_conformance.py
compares the raw answers with Kafka 4.3.1's."""
from __future__ import annotations

import base64
import json
import os
import subprocess

import pytest

from broker.config import BrokerConfig
from broker.errors import ConfigError
from broker.security import KafkaPrincipal
from broker.security.delegation_tokens import TOKENS_FILE, DelegationTokens
from protocol.errors import ErrorCode as E
from protocol.messages import (CreateAclsRequest, CreateDelegationTokenRequest,
                               DescribeDelegationTokenRequest)
from tests.support import ROOT, BrokerProcess, RawClient, free_port, unique

from .sasl_support import ALICE_PASSWORD, ADMIN_PASSWORD, authenticate, handshake, \
    kbroker_overrides, plain_token

ALICE, BOB, CAROL = (KafkaPrincipal("User", n) for n in ("alice", "bob", "carol"))
SECRET = "unit-test-secret"
HOUR, DAY, WEEK = 3_600_000, 86_400_000, 604_800_000
JAR = os.path.join(ROOT, "tests", "java", "target", "client-scenarios.jar")


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def tokens(clock, data_dir=None, secret=SECRET, **settings) -> DelegationTokens:
    values = {"delegation.token.secret.key": secret, **settings}
    if data_dir is not None:
        values["log.dirs"] = str(data_dir)
    return DelegationTokens(BrokerConfig(values), clock)


# -- the store


def test_without_the_secret_key_every_operation_is_disabled():
    store = tokens(Clock(), secret=None)
    assert not store.enabled
    assert store.create(ALICE, ALICE, [], -1) == (E.DELEGATION_TOKEN_AUTH_DISABLED, None)
    assert store.renew(ALICE, b"x", -1) == (E.DELEGATION_TOKEN_AUTH_DISABLED, 0)
    assert store.expire(ALICE, b"x", -1) == (E.DELEGATION_TOKEN_AUTH_DISABLED, 0)


def test_lifetimes_follow_the_settings_and_the_request():
    clock = Clock()
    store = tokens(clock, **{"delegation.token.max.lifetime.ms": WEEK,
                             "delegation.token.expiry.time.ms": DAY})
    error, token = store.create(ALICE, ALICE, [BOB], -1)
    assert error == E.NONE
    assert (token.issue_timestamp, token.expiry_timestamp, token.max_timestamp) == (
        clock.now, clock.now + DAY, clock.now + WEEK)
    # a shorter max lifetime caps the expiry too; a longer one is cut to the setting
    assert store.create(ALICE, ALICE, [], HOUR)[1].expiry_timestamp == clock.now + HOUR
    assert store.create(ALICE, ALICE, [], 2 * WEEK)[1].max_timestamp == clock.now + WEEK
    # its SCRAM password is the HMAC in base64, for both mechanisms, at 4096 iterations
    credential, owner, expiry = store.login("SCRAM-SHA-512", token.token_id)
    assert (owner, expiry, credential.iterations) == ("alice", clock.now + DAY, 4096)
    assert store.login("SCRAM-SHA-256", token.token_id)[0].iterations == 4096
    assert store.login("SCRAM-SHA-512", "no-such-token") is None


def test_renew_and_expire_rules():
    clock = Clock()
    store = tokens(clock)
    _, token = store.create(ALICE, CAROL, [BOB], -1)
    clock.now += 1000
    # the owner and renewers renew, the requester (carol) may not; at most expiry.time.ms
    assert store.renew(BOB, token.hmac, 5000) == (E.NONE, clock.now + 5000)
    assert store.renew(ALICE, token.hmac, 10 * DAY) == (E.NONE, clock.now + DAY)
    assert store.renew(CAROL, token.hmac, 5000) == (E.DELEGATION_TOKEN_OWNER_MISMATCH, 0)
    assert store.renew(ALICE, b"nope", 5000) == (E.DELEGATION_TOKEN_NOT_FOUND, 0)
    assert store.expire(BOB, token.hmac, 2000) == (E.NONE, clock.now + 2000)
    clock.now += 2001
    # expired but not yet swept: renewing or shortening is refused, ending it is not
    assert store.renew(ALICE, token.hmac, 5000) == (E.DELEGATION_TOKEN_EXPIRED, 0)
    assert store.expire(ALICE, token.hmac, 5000) == (E.DELEGATION_TOKEN_EXPIRED, 0)
    assert store.login("SCRAM-SHA-512", token.token_id) is not None
    assert store.expire(ALICE, token.hmac, -1) == (E.NONE, clock.now)
    assert store.login("SCRAM-SHA-512", token.token_id) is None
    assert store.renew(ALICE, token.hmac, 5000) == (E.DELEGATION_TOKEN_NOT_FOUND, 0)


def test_the_sweep_removes_expired_tokens_each_check_interval():
    clock = Clock()
    store = tokens(clock, **{"delegation.token.expiry.check.interval.ms": HOUR})
    _, short = store.create(ALICE, ALICE, [], 60_000)
    _, long = store.create(ALICE, ALICE, [], -1)
    clock.now += 120_000
    assert {t.token_id for t in store.describe(lambda t: True)} == {short.token_id,
                                                                    long.token_id}
    clock.now += HOUR
    assert {t.token_id for t in store.describe(lambda t: True)} == {long.token_id}
    assert store.login("SCRAM-SHA-256", short.token_id) is None


def test_tokens_survive_a_restart_and_not_a_new_secret(tmp_path):
    clock = Clock()
    store = tokens(clock, tmp_path)
    _, token = store.create(ALICE, ALICE, [BOB], -1)
    on_disk = json.loads((tmp_path / TOKENS_FILE).read_text())
    # no HMAC and no credential is written: they come from the secret key
    assert base64.b64encode(token.hmac).decode() not in json.dumps(on_disk)
    assert [t["token_id"] for t in on_disk["tokens"]] == [token.token_id]
    again = tokens(clock, tmp_path)
    assert again.renew(BOB, token.hmac, 5000) == (E.NONE, clock.now + 5000)
    assert again.login("SCRAM-SHA-512", token.token_id)[1] == "alice"
    # another secret key gives the same token another HMAC: the old one is unknown
    other = tokens(clock, tmp_path, secret="another-secret")
    assert other.renew(BOB, token.hmac, 5000) == (E.DELEGATION_TOKEN_NOT_FOUND, 0)


def test_a_damaged_tokens_file_stops_the_start(tmp_path):
    (tmp_path / TOKENS_FILE).write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read the delegation tokens"):
        tokens(Clock(), tmp_path)


# -- a broker process


def _login(port: int, user: str, password: str) -> RawClient:
    client = RawClient(port, client_id="tokens")
    assert handshake(client, "PLAIN").error_code == 0
    assert authenticate(client, plain_token(user, password)).error_code == 0
    return client


def _create(client, owner=None):
    C = CreateDelegationTokenRequest
    return client.call(C(owner_principal_type="User" if owner else None,
                         owner_principal_name=owner, renewers=[], max_lifetime_ms=-1), 3)


def _described(client) -> set[str]:
    answer = client.call(DescribeDelegationTokenRequest(owners=None), 3)
    assert answer.error_code == E.NONE
    return {t.token_id for t in answer.tokens}


def test_describe_shows_tokens_by_acl():
    """With the StandardAuthorizer, a principal sees its own tokens, and others' only with
    DESCRIBE on the token or DESCRIBE_TOKENS on the owner; creating a token for another owner
    needs CREATE_TOKENS on that user."""
    port = free_port()
    proc = BrokerProcess(port=port, overrides=kbroker_overrides(port, **{
        "delegation.token.secret.key": SECRET,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin"}))
    proc.start()
    try:
        admin = _login(port, "admin", ADMIN_PASSWORD)
        alice = _login(port, "alice", ALICE_PASSWORD)
        mine = _create(alice)
        assert mine.error_code == E.NONE
        refused = _create(alice, owner="bob")
        assert refused.error_code == E.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        theirs = _create(admin, owner="bob")
        assert theirs.error_code == E.NONE
        assert _described(alice) == {mine.token_id}
        assert _described(admin) == {mine.token_id, theirs.token_id}

        Creation = CreateAclsRequest.AclCreation
        acl = dict(resource_pattern_type=3, principal="User:alice", host="*",
                   permission_type=3)  # LITERAL, ALLOW
        answer = admin.call(CreateAclsRequest(creations=[
            Creation(resource_type=6, resource_name=theirs.token_id, operation=8, **acl),
            Creation(resource_type=7, resource_name="User:carol", operation=13, **acl),
        ]), 3)  # DESCRIBE on the DELEGATION_TOKEN, CREATE_TOKENS on the USER carol
        assert [r.error_code for r in answer.results] == [0, 0]
        assert _described(alice) == {mine.token_id, theirs.token_id}
        for_carol = _create(alice, owner="carol")
        assert (for_carol.error_code, for_carol.principal_name) == (E.NONE, "carol")
        admin.close()
        alice.close()
    finally:
        proc.stop()


def test_java_client_logs_in_with_a_token(tmp_path):
    """A token made over the raw protocol, then the Java client's ScramLoginModule with
    tokenauth="true": it produces and consumes in a group as the token's owner; once the
    token is expired, the same login is refused."""
    assert os.path.exists(JAR), f"{JAR} is missing: run tools/install-test-deps.sh"
    port = free_port()
    proc = BrokerProcess(port=port, overrides=kbroker_overrides(port, **{
        "delegation.token.secret.key": SECRET, "log.level": "debug"}))
    proc.start()
    try:
        alice = _login(port, "alice", ALICE_PASSWORD)
        token = _create(alice)
        assert token.error_code == E.NONE
        props = tmp_path / "token.properties"
        props.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{token.token_id}" password="{base64.b64encode(token.hmac).decode()}" '
            'tokenauth="true";\n')

        def java(topic):
            cmd = ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", JAR,
                   "kbroker.SaslScenarios", "produce-consume", proc.bootstrap, topic,
                   unique("g"), "5", str(props)]
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
            return run, [json.loads(line) for line in run.stdout.splitlines()
                         if line.startswith("{")]

        run, lines = java(unique("token-java"))
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert [line["value"] for line in lines if "value" in line] == [
            f"java-{i}" for i in range(5)]
        events = [json.loads(line) for line in proc.logs().splitlines() if line.startswith("{")]
        logins = {(e.get("principal"), e.get("mechanism")) for e in events
                  if e.get("event") == "authenticated"}
        assert ("User:alice", "SCRAM-SHA-512") in logins
        assert not any(str(e.get("principal", "")).endswith(token.token_id) for e in events)

        from protocol.messages import ExpireDelegationTokenRequest
        assert alice.call(ExpireDelegationTokenRequest(
            hmac=token.hmac, expiry_time_period_ms=-1), 2).error_code == E.NONE
        run, lines = java(unique("token-java-expired"))
        assert run.returncode == 2, run.stdout[-3000:] + run.stderr[-3000:]
        assert lines[-1]["root"] == "org.apache.kafka.common.errors.SaslAuthenticationException"
        alice.close()
    finally:
        proc.stop()
