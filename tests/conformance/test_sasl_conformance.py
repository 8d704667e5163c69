"""Differential conformance of SASL: the same raw SaslHandshake/SaslAuthenticate exchanges (and
the v0 flow of raw tokens) against a real Apache Kafka 4.x broker and against kbroker, each with
a PLAINTEXT listener and a SASL_PLAINTEXT listener configured with the same Kafka settings
(PLAIN users from JAAS, SCRAM-SHA-256/512, OAUTHBEARER with the unsecured validator); and the
answers of AlterUserScramCredentials and DescribeUserScramCredentials. Each scenario asserts
Kafka's answers, observed on the real broker.

alice's SCRAM credentials are made with AlterUserScramCredentials on both brokers (Kafka's
storage tool is not run with --add-scram here).
"""
from __future__ import annotations

import base64
import os
import shutil
import struct
import subprocess
import time

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (AlterUserScramCredentialsRequest, ApiVersionsRequest,
                               DescribeUserScramCredentialsRequest, MetadataRequest,
                               SaslAuthenticateRequest)
from tests.security.sasl_support import (ALICE_PASSWORD, ScramClient, authenticate,
                                         closed_by_peer, handshake, listener_settings,
                                         oauth_initial_response, plain_token, read_raw_token,
                                         send_raw_token, unsecured_jwt)
from tests.support import BrokerProcess, RawClient, free_port, unique

from .kafka_server import KafkaServer

MECHANISM_LIST = ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256", "OAUTHBEARER"]
SHA256, SHA512 = 1, 2
GENERIC = "Authentication failed during authentication due to invalid credentials with SASL " \
          "mechanism {}"
#: SCRAM-SHA-512 sessions on the SASL listener last a minute (KIP-368); other mechanisms' never end
REAUTH_MS = 60_000
REAUTH = {"listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": REAUTH_MS}


class SaslTarget:
    def __init__(self, name: str, plain_port: int, sasl_port: int, server) -> None:
        self.name = name
        self.plain_port = plain_port
        self.sasl_port = sasl_port
        self.server = server

    def sasl(self) -> RawClient:
        return RawClient(self.sasl_port, client_id="sasl-conformance")

    def plain(self) -> RawClient:
        return RawClient(self.plain_port, client_id="sasl-conformance")


def _upsert(mechanism: int, name: str, password: str, iterations: int = 4096):
    hash_name = {SHA512: "SCRAM-SHA-512"}.get(mechanism, "SCRAM-SHA-256")
    salt = os.urandom(16)
    salted = ScramClient(hash_name, name, password).salted_password(salt, iterations)
    return AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=name, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted)


def _add_alice(target: SaslTarget) -> None:
    """alice's SCRAM credentials, then wait until a SCRAM login works (Kafka's broker learns
    them from its metadata log a moment after the controller stored them)."""
    client = target.plain()
    try:
        response = client.call(AlterUserScramCredentialsRequest(
            deletions=[], upsertions=[_upsert(SHA256, "alice", ALICE_PASSWORD)]), 0)
        assert [r.error_code for r in response.results] == [0]
        response = client.call(AlterUserScramCredentialsRequest(
            deletions=[], upsertions=[_upsert(SHA512, "alice", ALICE_PASSWORD)]), 0)
        assert [r.error_code for r in response.results] == [0]
    finally:
        client.close()
    deadline = time.monotonic() + 30
    while True:
        ok = all(_scram_login(target, mech, "alice", ALICE_PASSWORD)[1].error_code == 0
                 for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"))
        if ok:
            return
        assert time.monotonic() < deadline, "alice's SCRAM credentials never worked"
        time.sleep(0.2)


def _scram_login(target: SaslTarget, mechanism: str, user: str, password: str):
    client = target.sasl()
    try:
        assert handshake(client, mechanism).error_code == 0
        scram = ScramClient(mechanism, user, password)
        first = authenticate(client, scram.first())
        if first.error_code:
            return first, first
        return first, authenticate(client, scram.final(first.auth_bytes))
    finally:
        client.close()


@pytest.fixture(scope="module")
def sasl_kafka():
    server = KafkaServer()
    sasl_port = free_port()
    server.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{server.port},CONTROLLER://127.0.0.1:"
                     f"{server.controller_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{server.port},"
                                f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT",
        **listener_settings(), **REAUTH})
    server.start()
    target = SaslTarget("kafka", server.port, sasl_port, server)
    try:
        _add_alice(target)
        yield target
    finally:
        server.stop()


@pytest.fixture(scope="module")
def sasl_kbroker():
    port, sasl_port = free_port(), free_port()
    server = BrokerProcess(port=port, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        **listener_settings(), **REAUTH})
    server.start()
    target = SaslTarget("kbroker", port, sasl_port, server)
    try:
        _add_alice(target)
        yield target
    finally:
        server.stop()


@pytest.fixture(params=["kafka", "kbroker"])
def target(request) -> SaslTarget:
    return request.getfixturevalue(f"sasl_{request.param}")


@pytest.fixture
def client(target):
    c = target.sasl()
    yield c
    c.close()


def _metadata_ok(client: RawClient) -> bool:
    response = client.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    return bool(response.brokers)


# -- SaslHandshake


@pytest.mark.parametrize("version", [0, 1])
def test_unknown_mechanism(client, version):
    response = handshake(client, "FOO", version)
    assert (response.error_code, response.mechanisms) == (E.UNSUPPORTED_SASL_MECHANISM,
                                                          MECHANISM_LIST)
    assert closed_by_peer(client)


def test_api_versions_then_handshake(client):
    versions = client.call(ApiVersionsRequest(client_software_name="c",
                                              client_software_version="1"), 3)
    assert versions.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert keys[17] == (0, 1) and keys[36] == (0, 2)
    assert keys[50] == (0, 0) and keys[51] == (0, 0)  # Describe/AlterUserScramCredentials
    assert handshake(client, "PLAIN").mechanisms == MECHANISM_LIST


def test_request_before_authentication_closes_without_answer(client):
    client.send(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    assert closed_by_peer(client)


def test_second_api_versions_closes(client):
    assert client.call(ApiVersionsRequest(), 0).error_code == 0
    client.send(ApiVersionsRequest(), 0)
    assert closed_by_peer(client)


def test_handshake_during_authenticate_is_illegal_sasl_state(client):
    assert handshake(client, "PLAIN").error_code == 0
    response = handshake(client, "PLAIN")
    assert response.error_code == E.ILLEGAL_SASL_STATE
    assert closed_by_peer(client)


# -- PLAIN


@pytest.mark.parametrize("version", [0, 1, 2])
def test_plain_success(client, version):
    assert handshake(client, "PLAIN").error_code == 0
    response = authenticate(client, plain_token("alice", ALICE_PASSWORD), version)
    assert (response.error_code, response.error_message, response.auth_bytes) == (0, "", b"")
    assert response.session_lifetime_ms == 0
    assert _metadata_ok(client)
    again = authenticate(client, b"x")
    assert (again.error_code, again.error_message) == (
        E.ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful "
                              "authentication")
    assert handshake(client, "PLAIN").error_code == E.ILLEGAL_SASL_STATE
    assert _metadata_ok(client)


@pytest.mark.parametrize("user,password,authzid,message", [
    ("alice", "wrong", "", "Authentication failed: Invalid username or password"),
    ("nobody", "x", "", "Authentication failed: Invalid username or password"),
    ("alice", "", "", "Authentication failed: password not specified"),
    ("alice", ALICE_PASSWORD, "admin", "Authentication failed: Client requested an "
                                      "authorization id that is different from username"),
])
def test_plain_failure(client, user, password, authzid, message):
    """The failure is answered connection.failed.authentication.delay.ms (100, both brokers'
    default) after the attempt, then the connection closes: Kafka holds the answer itself, not
    only the close (a lower bound: a slow machine cannot fail it)."""
    assert handshake(client, "PLAIN").error_code == 0
    started = time.monotonic()
    response = authenticate(client, plain_token(user, password, authzid))
    assert time.monotonic() - started >= 0.1
    assert (response.error_code, response.error_message) == (E.SASL_AUTHENTICATION_FAILED,
                                                             message)
    assert closed_by_peer(client)


def test_plain_malformed_token(client):
    handshake(client, "PLAIN")
    response = authenticate(client, b"just-one-token")
    assert (response.error_code, response.error_message) == (
        E.SASL_AUTHENTICATION_FAILED, "Invalid SASL/PLAIN response: expected 3 tokens, got 1")
    assert closed_by_peer(client)


# -- the v0 flow: raw size-prefixed tokens without Kafka headers


def test_v0_flow_plain(client):
    assert handshake(client, "PLAIN", version=0).error_code == 0
    send_raw_token(client, plain_token("alice", ALICE_PASSWORD))
    assert read_raw_token(client) == b""
    assert _metadata_ok(client)


def test_v0_flow_wrong_password_closes_without_answer(client):
    handshake(client, "PLAIN", version=0)
    send_raw_token(client, plain_token("alice", "wrong"))
    assert closed_by_peer(client)


def test_v0_flow_scram(client):
    assert handshake(client, "SCRAM-SHA-256", version=0).error_code == 0
    scram = ScramClient("SCRAM-SHA-256", "alice", ALICE_PASSWORD)
    send_raw_token(client, scram.first())
    server_first = read_raw_token(client)
    assert server_first.startswith(b"r=" + scram.nonce.encode()) and b",i=4096" in server_first
    send_raw_token(client, scram.final(server_first))
    assert read_raw_token(client) == b"v=" + base64.b64encode(scram.server_signature)
    assert _metadata_ok(client)


# -- SCRAM


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram(target, mechanism):
    first, final = _scram_login(target, mechanism, "alice", ALICE_PASSWORD)
    assert first.error_code == 0 and final.error_code == 0
    assert final.auth_bytes.startswith(b"v=")
    first, final = _scram_login(target, mechanism, "alice", "wrong")
    assert first.error_code == 0
    assert (final.error_code, final.error_message) == (E.SASL_AUTHENTICATION_FAILED,
                                                       GENERIC.format(mechanism))
    first, _ = _scram_login(target, mechanism, "nobody", "x")
    assert (first.error_code, first.error_message) == (E.SASL_AUTHENTICATION_FAILED,
                                                       GENERIC.format(mechanism))


@pytest.mark.parametrize("message", [
    b"n,,n=alice,r=abcdef,tokenauth=true",
    b"not a scram message",
])
def test_scram_refused_first_messages(client, message):
    handshake(client, "SCRAM-SHA-256")
    response = authenticate(client, message)
    assert (response.error_code, response.error_message) == (
        E.SASL_AUTHENTICATION_FAILED, GENERIC.format("SCRAM-SHA-256"))
    assert closed_by_peer(client)


# -- OAUTHBEARER


def test_oauthbearer(client):
    now = int(time.time())
    handshake(client, "OAUTHBEARER")
    token = unsecured_jwt({"sub": "alice", "iat": now - 5, "exp": now + 3600})
    response = authenticate(client, oauth_initial_response(token))
    assert (response.error_code, response.auth_bytes) == (0, b"")
    # the session ends with the token (credential lifetime), even without connections.max.reauth.ms
    assert 3_500_000 < response.session_lifetime_ms <= 3_600_000
    assert _metadata_ok(client)


@pytest.mark.parametrize("claims", [
    {"sub": "alice", "iat": -120, "exp": -60},
    {"iat": -5, "exp": 3600},
])
def test_oauthbearer_invalid_token(client, claims):
    now = int(time.time())
    claims = {k: (v + now if k in ("iat", "exp") else v) for k, v in claims.items()}
    handshake(client, "OAUTHBEARER")
    challenge = authenticate(client, oauth_initial_response(unsecured_jwt(claims)))
    assert (challenge.error_code, challenge.auth_bytes) == (0, b'{"status":"invalid_token"}')
    failed = authenticate(client, b"\x01")
    assert (failed.error_code, failed.error_message) == (E.SASL_AUTHENTICATION_FAILED,
                                                         '{"status":"invalid_token"}')
    assert closed_by_peer(client)


def test_oauthbearer_malformed_message(client):
    handshake(client, "OAUTHBEARER")
    response = authenticate(client, b"n,,\x01nothing\x01\x01")
    assert (response.error_code, response.error_message) == (
        E.SASL_AUTHENTICATION_FAILED, GENERIC.format("OAUTHBEARER"))
    assert closed_by_peer(client)


# -- sasl.server.max.receive.size (524288) before authentication


def test_frame_over_max_receive_size_before_authentication(client):
    client.sock.sendall(struct.pack(">i", 524289) + b"\0" * 1024)
    assert closed_by_peer(client)


# -- AlterUserScramCredentials and DescribeUserScramCredentials


def _results(response):
    return sorted((r.user, r.error_code, r.error_message) for r in response.results)


def test_alter_user_scram_credentials_errors(target):
    client = target.plain()
    try:
        bob, carol = unique("bob"), unique("carol")
        Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
        response = client.call(AlterUserScramCredentialsRequest(
            deletions=[Deletion(name=bob, mechanism=SHA256), Deletion(name="", mechanism=SHA256),
                       Deletion(name=carol, mechanism=SHA256)],
            upsertions=[_upsert(SHA256, carol, "x"), _upsert(3, "dave", "x"),
                        _upsert(SHA512, "erin", "x", iterations=4095),
                        _upsert(SHA512, "frank", "x", iterations=16385)]), 0)
        assert _results(response) == sorted([
            (bob, E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
            ("", E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
            (carol, E.RESOURCE_NOT_FOUND,
             "Attempt to delete a user credential that does not exist"),
            ("dave", E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            ("erin", E.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            ("frank", E.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        ])
        response = client.call(AlterUserScramCredentialsRequest(
            deletions=[], upsertions=[_upsert(SHA256, bob, "x"), _upsert(SHA512, bob, "x")]), 0)
        assert _results(response) == [(bob, E.DUPLICATE_RESOURCE, "A user credential cannot be "
                                                                   "altered twice in the same "
                                                                   "request")]
    finally:
        client.close()


def test_alter_then_describe_then_delete(target):
    client = target.plain()
    try:
        bob = unique("bob")
        response = client.call(AlterUserScramCredentialsRequest(
            deletions=[], upsertions=[_upsert(SHA512, bob, "bob-secret", iterations=8192)]), 0)
        assert _results(response) == [(bob, 0, None)]
        deadline = time.monotonic() + 10
        while True:
            described = client.call(DescribeUserScramCredentialsRequest(
                users=[DescribeUserScramCredentialsRequest.UserName(name=bob)]), 0)
            if described.results[0].error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert (described.error_code, described.error_message) == (0, "")
        [result] = described.results
        assert (result.user, result.error_code, result.error_message) == (bob, 0, "")
        assert [(c.mechanism, c.iterations) for c in result.credential_infos] == [(SHA512, 8192)]
        Name = DescribeUserScramCredentialsRequest.UserName
        both = client.call(DescribeUserScramCredentialsRequest(
            users=[Name(name="alice"), Name(name="nobody"), Name(name="alice")]), 0)
        assert sorted((r.user, r.error_code, r.error_message, len(r.credential_infos))
                      for r in both.results) == [
            ("alice", E.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the same user "
                                            "twice in a single request: alice", 0),
            ("nobody", E.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does "
                                             "not exist: nobody", 0)]
        everyone = client.call(DescribeUserScramCredentialsRequest(users=[]), 0)
        by_user = {r.user: sorted((c.mechanism, c.iterations) for c in r.credential_infos)
                   for r in everyone.results}
        assert by_user["alice"] == [(SHA256, 4096), (SHA512, 4096)]
        Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
        response = client.call(AlterUserScramCredentialsRequest(
            deletions=[Deletion(name=bob, mechanism=SHA512)], upsertions=[]), 0)
        assert _results(response) == [(bob, 0, None)]
    finally:
        client.close()


# -- librdkafka before 2.6.1 repeats the client nonce in its SCRAM client-final message


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kcat_with_librdkafka_2_0_scram_is_refused(target, mechanism):
    """Kafka 4.x compares the client-final nonce strictly (RFC 5802), so Debian's kcat
    (librdkafka 2.0.2) cannot log in with SCRAM; PLAIN works (tests/security)."""
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    assert kcat, "kcat is not installed: run tools/install-test-deps.sh"
    assert "librdkafka 2.0.2" in subprocess.run([kcat, "-V"], capture_output=True,
                                                text=True).stdout
    result = subprocess.run(
        [kcat, "-b", f"127.0.0.1:{target.sasl_port}", "-X", "security.protocol=SASL_PLAINTEXT",
         "-X", f"sasl.mechanism={mechanism}", "-X", "sasl.username=alice",
         "-X", f"sasl.password={ALICE_PASSWORD}", "-L", "-m", "2"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert ("SASL authentication error: Authentication failed during authentication due to "
            f"invalid credentials with SASL mechanism {mechanism}") in result.stderr


# -- re-authentication (KIP-368): SCRAM-SHA-512 sessions of REAUTH_MS


def _scram_exchange(client: RawClient, mechanism: str, user: str, password: str,
                    version: int = 2):
    assert handshake(client, mechanism).error_code == 0
    scram = ScramClient(mechanism, user, password)
    first = authenticate(client, scram.first(), version)
    assert first.error_code == 0, first
    return authenticate(client, scram.final(first.auth_bytes), version)


def _add_bob(target: SaslTarget) -> None:
    client = target.plain()
    try:
        response = client.call(AlterUserScramCredentialsRequest(
            deletions=[], upsertions=[_upsert(SHA512, "bob", "bob-secret")]), 0)
        assert [r.error_code for r in response.results] == [0]
    finally:
        client.close()
    deadline = time.monotonic() + 30
    while _scram_login(target, "SCRAM-SHA-512", "bob", "bob-secret")[1].error_code != 0:
        assert time.monotonic() < deadline, "bob's SCRAM credentials never worked"
        time.sleep(0.2)


def test_session_lifetime_and_reauthentication(client):
    done = _scram_exchange(client, "SCRAM-SHA-512", "alice", ALICE_PASSWORD)
    assert (done.error_code, done.session_lifetime_ms) == (0, REAUTH_MS)
    assert _metadata_ok(client)
    again = _scram_exchange(client, "SCRAM-SHA-512", "alice", ALICE_PASSWORD)
    assert (again.error_code, again.session_lifetime_ms) == (0, REAUTH_MS)
    assert _metadata_ok(client)
    # a second re-authentication within a second is an ordinary, refused, SaslHandshake
    assert handshake(client, "SCRAM-SHA-512").error_code == E.ILLEGAL_SASL_STATE
    assert _metadata_ok(client)


def test_session_lifetime_only_for_its_mechanism(client):
    assert handshake(client, "PLAIN").error_code == 0
    done = authenticate(client, plain_token("alice", ALICE_PASSWORD))
    assert (done.error_code, done.session_lifetime_ms) == (0, 0)
    assert handshake(client, "PLAIN").error_code == E.ILLEGAL_SASL_STATE  # no session to renew


def test_reauthentication_with_another_principal_fails(target, client):
    _add_bob(target)
    assert _scram_exchange(client, "SCRAM-SHA-512", "alice", ALICE_PASSWORD).error_code == 0
    response = _scram_exchange(client, "SCRAM-SHA-512", "bob", "bob-secret")
    assert (response.error_code, response.error_message) == (
        E.SASL_AUTHENTICATION_FAILED,
        "Cannot change principals during re-authentication from User.alice: User.bob")
    assert closed_by_peer(client)


def test_reauthentication_with_another_mechanism_closes(client):
    assert _scram_exchange(client, "SCRAM-SHA-512", "alice", ALICE_PASSWORD).error_code == 0
    assert handshake(client, "SCRAM-SHA-256").error_code == 0
    client.send(SaslAuthenticateRequest(
        auth_bytes=ScramClient("SCRAM-SHA-256", "alice", ALICE_PASSWORD).first()), 2)
    assert closed_by_peer(client)


def test_other_request_during_authenticate(client):
    """Kafka answers it with the API's error response (Metadata without topics: an empty one),
    then closes the connection."""
    assert handshake(client, "PLAIN").error_code == 0
    response = client.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    assert (response.brokers, response.topics, response.cluster_id, response.controller_id) == (
        [], [], None, -1)
    assert closed_by_peer(client)


# -- delegation tokens (no delegation.token.secret.key on either broker)


def _token_answers(client: RawClient) -> list:
    """Each token API's answer, field by field, at its highest version."""
    from protocol.messages import (CreateDelegationTokenRequest, DescribeDelegationTokenRequest,
                                   ExpireDelegationTokenRequest, RenewDelegationTokenRequest)
    C = CreateDelegationTokenRequest
    created = client.call(C(owner_principal_type=None, owner_principal_name=None, renewers=[
        C.CreatableRenewers(principal_type="User", principal_name="bob")],
        max_lifetime_ms=-1), 3)
    for_bob = client.call(C(owner_principal_type="User", owner_principal_name="bob",
                            renewers=[], max_lifetime_ms=-1), 3)
    renewed = client.call(RenewDelegationTokenRequest(hmac=b"x", renew_period_ms=-1), 2)
    expired = client.call(ExpireDelegationTokenRequest(hmac=b"x", expiry_time_period_ms=-1), 2)
    described = client.call(DescribeDelegationTokenRequest(owners=None), 3)
    return [
        ("create", created.error_code, created.principal_type, created.principal_name,
         created.token_requester_principal_type, created.token_requester_principal_name,
         created.token_id, created.hmac, created.issue_timestamp_ms,
         created.expiry_timestamp_ms, created.max_timestamp_ms),
        ("create for bob", for_bob.error_code, for_bob.principal_type, for_bob.principal_name,
         for_bob.token_requester_principal_name),
        ("renew", renewed.error_code, renewed.expiry_timestamp_ms),
        ("expire", expired.error_code, expired.expiry_timestamp_ms),
        ("describe", described.error_code, described.tokens),
    ]


def test_delegation_tokens_on_a_plaintext_listener_are_not_allowed(target):
    client = target.plain()
    try:
        assert _token_answers(client) == [
            ("create", E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "User", "ANONYMOUS", "User",
             "ANONYMOUS", "", b"", -1, -1, -1),
            ("create for bob", E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, "User", "bob",
             "ANONYMOUS"),
            ("renew", E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1),
            ("expire", E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1),
            ("describe", E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, []),
        ]
    finally:
        client.close()


def test_delegation_tokens_without_a_secret_key_are_disabled(client):
    assert handshake(client, "PLAIN").error_code == 0
    assert authenticate(client, plain_token("alice", ALICE_PASSWORD)).error_code == 0
    assert _token_answers(client) == [
        ("create", E.DELEGATION_TOKEN_AUTH_DISABLED, "User", "alice", "User", "alice", "", b"",
         0, 0, 0),
        ("create for bob", E.DELEGATION_TOKEN_AUTH_DISABLED, "User", "bob", "alice"),
        ("renew", E.DELEGATION_TOKEN_AUTH_DISABLED, 0),
        ("expire", E.DELEGATION_TOKEN_AUTH_DISABLED, 0),
        ("describe", E.DELEGATION_TOKEN_AUTH_DISABLED, []),
    ]
