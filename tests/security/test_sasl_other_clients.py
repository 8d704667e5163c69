"""The Java client (kafka-clients 4.3.1), kafkajs and kcat (librdkafka) through a SASL_PLAINTEXT
listener of a broker process: each produces and consumes in a group with PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512 and, where the client makes unsecured tokens, OAUTHBEARER (the Java client's
unsecured login module, kafkajs's oauthBearerProvider, librdkafka's unsecured JWT); a wrong
password gets an authentication error and no data. The Java client also re-authenticates
(KIP-368) on a listener with connections.max.reauth.ms."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.support import ROOT, BrokerProcess, free_port, unique

from .sasl_support import ALICE_PASSWORD, kbroker_overrides

JAR = os.path.join(ROOT, "tests", "java", "target", "client-scenarios.jar")
SCENARIO_JS = os.path.join(ROOT, "tests", "js", "sasl_scenario.js")
KCAT = shutil.which("kcat") or shutil.which("kafkacat")
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
REAUTH_MS = 3000


@pytest.fixture(scope="module")
def broker():
    port = free_port()
    proc = BrokerProcess(port=port, overrides=kbroker_overrides(port))
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture
def reauth_broker():
    """SCRAM-SHA-512 sessions of REAUTH_MS; debug logs show each (re-)authentication."""
    port = free_port()
    proc = BrokerProcess(port=port, overrides=kbroker_overrides(
        port, **{"listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms":
                 REAUTH_MS, "log.level": "debug"}))
    proc.start()
    yield proc
    proc.stop()


def _no_data(broker, topic: str) -> None:
    """Nothing a refused client sent reached the broker: its topic was never created."""
    out = _kcat(broker, "PLAIN", ALICE_PASSWORD, "-L")
    assert f'topic "{topic}"' not in out.stdout


# -- Java


def _java_props(tmp_path, mechanism: str, password: str) -> str:
    if mechanism == "OAUTHBEARER":
        jaas = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'unsecuredLoginStringClaim_sub="alice";')
    else:
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        jaas = (f"org.apache.kafka.common.security.{module} required username=\"alice\" "
                f"password=\"{password}\";")
    path = tmp_path / f"client-{mechanism}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\n"
                    f"sasl.mechanism={mechanism}\n"
                    f"sasl.jaas.config={jaas}\n")
    return str(path)


def _java(broker, tmp_path, mechanism: str, password: str, topic: str, seconds: int = 0):
    assert os.path.exists(JAR), f"{JAR} is missing: run tools/install-test-deps.sh"
    cmd = ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", JAR,
           "kbroker.SaslScenarios", "produce-consume", broker.bootstrap, topic, unique("g"), "5",
           _java_props(tmp_path, mechanism, password)]
    if seconds:
        cmd.append(str(seconds))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc, lines


@pytest.mark.parametrize("mechanism", MECHANISMS + ["OAUTHBEARER"])
def test_java_client(broker, tmp_path, mechanism):
    proc, lines = _java(broker, tmp_path, mechanism, ALICE_PASSWORD, unique("sasl-java"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert [line["value"] for line in lines if "value" in line] == [f"java-{i}" for i in range(5)]
    assert lines[-1] == {"done": True}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_java_client_wrong_password(broker, tmp_path, mechanism):
    topic = unique("sasl-java-no")
    proc, lines = _java(broker, tmp_path, mechanism, "wrong", topic)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert lines[-1]["root"] == "org.apache.kafka.common.errors.SaslAuthenticationException"
    if mechanism == "PLAIN":
        assert lines[-1]["message"] == "Authentication failed: Invalid username or password"
    else:
        assert lines[-1]["message"] == ("Authentication failed during authentication due to "
                                        f"invalid credentials with SASL mechanism {mechanism}")
    _no_data(broker, topic)


def test_java_client_reauthenticates(reauth_broker, tmp_path):
    """SCRAM-SHA-512 sessions last REAUTH_MS on this listener: the Java client re-authenticates
    its connections while it keeps working, and the broker closes none as expired."""
    proc, lines = _java(reauth_broker, tmp_path, "SCRAM-SHA-512", ALICE_PASSWORD,
                        unique("sasl-java-reauth"), seconds=3 * REAUTH_MS // 1000)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len([line for line in lines if "value" in line]) == 10
    events = [json.loads(line) for line in reauth_broker.logs().splitlines()
              if line.startswith("{")]
    reauths = [e for e in events if e.get("event") == "re-authenticated"]
    assert reauths and all(e["principal"] == "User:alice" and
                           e["session_lifetime_ms"] == REAUTH_MS for e in reauths)
    assert not [e for e in events if "SASL session expired" in e.get("reason", "")]


# -- kafkajs


def _kafkajs(broker, mechanism: str, password: str, topic: str):
    node = shutil.which("node")
    assert node, "node is not installed: run tools/install-test-deps.sh"
    proc = subprocess.run([node, SCENARIO_JS, broker.bootstrap, topic, unique("g"),
                           mechanism.lower(), "alice", password],
                          capture_output=True, text=True, timeout=120)
    return proc, json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mechanism", MECHANISMS + ["OAUTHBEARER"])
def test_kafkajs(broker, mechanism):
    proc, out = _kafkajs(broker, mechanism, ALICE_PASSWORD, unique("sasl-kjs"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out["values"] == [f"kafkajs-{mechanism.lower()}-{i}" for i in range(5)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafkajs_wrong_password(broker, mechanism):
    topic = unique("sasl-kjs-no")
    proc, out = _kafkajs(broker, mechanism, "wrong", topic)
    assert proc.returncode == 2
    assert out["error"] == "KafkaJSSASLAuthenticationError", out
    _no_data(broker, topic)


# -- kcat


def _kcat(broker, mechanism: str, password: str, *args: str, stdin: str | None = None):
    assert KCAT, "kcat is not installed: run tools/install-test-deps.sh"
    security = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", f"sasl.mechanism={mechanism}"]
    if mechanism == "OAUTHBEARER":
        security += ["-X", "enable.sasl.oauthbearer.unsecure.jwt=true",
                     "-X", "sasl.oauthbearer.config=principal=alice"]
    else:
        security += ["-X", "sasl.username=alice", "-X", f"sasl.password={password}"]
    return subprocess.run([KCAT, "-b", broker.bootstrap, *security, *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("mechanism", ["PLAIN", "OAUTHBEARER"])
def test_kcat(broker, mechanism):
    topic, group = unique("sasl-kcat"), unique("g")
    produced = _kcat(broker, mechanism, ALICE_PASSWORD, "-P", "-t", topic, stdin="a\nb\nc\n")
    assert produced.returncode == 0, produced.stderr
    consumed = _kcat(broker, mechanism, ALICE_PASSWORD, "-G", group, "-o", "beginning", "-e",
                     "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100", topic)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["a", "b", "c"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kcat_scram_with_librdkafka_before_2_6_1_is_refused_as_by_kafka_4(broker, mechanism):
    """Debian's kcat links librdkafka 2.0.2, whose SCRAM client-final message repeats the client
    nonce in front of the server's (fixed in librdkafka 2.6.1). Kafka 4.x checks that nonce
    strictly (RFC 5802) and refuses it (tests/conformance/test_sasl_conformance.py shows the
    real Kafka 4.3.1 doing so); so does this broker, with Kafka's message. confluent-kafka
    (librdkafka 2.16) does SCRAM in tests/security/test_sasl_python_clients.py."""
    version = subprocess.run([KCAT, "-V"], capture_output=True, text=True).stdout
    assert "librdkafka 2.0.2" in version, version  # another librdkafka: this test must change
    result = _kcat(broker, mechanism, ALICE_PASSWORD, "-L", "-m", "2")
    assert result.returncode != 0
    assert ("Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {mechanism}") in result.stderr


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat_wrong_password(broker, mechanism):
    result = _kcat(broker, mechanism, "wrong", "-L", "-m", "2")
    assert result.returncode != 0
    assert "Authentication failed" in result.stderr or "authentication" in result.stderr.lower()


def test_java_admin_delegation_tokens_are_disabled(broker, tmp_path):
    """Without delegation.token.secret.key Kafka answers
    every token request DELEGATION_TOKEN_AUTH_DISABLED; the Java admin raises
    DelegationTokenDisabledException for it (tests/conformance/test_sasl_conformance.py compares
    the raw answers with Kafka 4.3.1's)."""
    cmd = ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", JAR,
           "kbroker.SaslScenarios", "delegation-tokens", broker.bootstrap,
           _java_props(tmp_path, "SCRAM-SHA-512", ALICE_PASSWORD)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    disabled = "org.apache.kafka.common.errors.DelegationTokenDisabledException"
    assert [(line["api"], line.get("error"), "token_id" in line, "tokens" in line)
            for line in lines] == [("create", disabled, False, False),
                                   ("describe", disabled, False, False)]
