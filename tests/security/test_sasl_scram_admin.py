"""SCRAM users managed by real admin clients against a broker process with a data directory:
confluent-kafka's AdminClient and Kafka's own kafka-configs (kafka.admin.ConfigCommand from the
Kafka 4.3.1 jars of tests/conformance) add users with AlterUserScramCredentials, list them with
DescribeUserScramCredentials and delete them; the users log in with SCRAM at once, keep working
after a restart, and the credentials file holds salted keys only."""
from __future__ import annotations

import os
import subprocess

import pytest

from tests.conformance.kafka_server import java_executable, resolve_kafka_jars
from tests.support import BrokerProcess, free_port

from .sasl_support import SCRAM_BOOTSTRAP, ScramClient, authenticate, handshake, listener_settings


def _start(data_dir: str, port: int, sasl_port: int) -> BrokerProcess:
    proc = BrokerProcess(port=port, data_dir=data_dir, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.scram.bootstrap.credentials": SCRAM_BOOTSTRAP, **listener_settings()})
    proc.start()
    return proc


def _login(sasl_port: int, mechanism: str, user: str, password: str) -> int:
    """The error code of the SCRAM exchange's last step (0: logged in)."""
    from tests.support import RawClient
    client = RawClient(sasl_port)
    try:
        assert handshake(client, mechanism).error_code == 0
        scram = ScramClient(mechanism, user, password)
        first = authenticate(client, scram.first())
        if first.error_code:
            return first.error_code
        return authenticate(client, scram.final(first.auth_bytes)).error_code
    finally:
        client.close()


@pytest.fixture
def ports():
    return free_port(), free_port()


def test_confluent_kafka_admin_scram_users_survive_a_restart(tmp_path, ports):
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    port, sasl_port = ports
    data_dir = str(tmp_path / "data")
    broker = _start(data_dir, port, sasl_port)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("bob", ScramCredentialInfo(
                ScramMechanism.SCRAM_SHA_256, 8192), b"bob-secret"),
            UserScramCredentialUpsertion("carol", ScramCredentialInfo(
                ScramMechanism.SCRAM_SHA_512, 4096), b"carol-secret")])
        for future in futures.values():
            future.result(timeout=30)
        assert _login(sasl_port, "SCRAM-SHA-256", "bob", "bob-secret") == 0
        assert _login(sasl_port, "SCRAM-SHA-512", "carol", "carol-secret") == 0
        assert _login(sasl_port, "SCRAM-SHA-512", "bob", "bob-secret") != 0  # not that mechanism
        described = {user: future.result(timeout=30) for user, future in
                     admin.describe_user_scram_credentials(["bob", "alice"]).items()}
        assert [(i.mechanism, i.iterations) for i in described["bob"].scram_credential_infos] \
            == [(ScramMechanism.SCRAM_SHA_256, 8192)]
        assert sorted(i.mechanism for i in described["alice"].scram_credential_infos) == \
            [ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512]
        for future in admin.alter_user_scram_credentials([UserScramCredentialDeletion(
                "carol", ScramMechanism.SCRAM_SHA_512)]).values():
            future.result(timeout=30)
        assert _login(sasl_port, "SCRAM-SHA-512", "carol", "carol-secret") != 0
    finally:
        broker.stop()
    text = open(os.path.join(data_dir, "scram-credentials.json")).read()
    assert "bob-secret" not in text and '"bob"' in text and '"carol"' not in text
    broker = _start(data_dir, port, sasl_port)  # the bootstrap setting does not apply again
    try:
        assert _login(sasl_port, "SCRAM-SHA-256", "bob", "bob-secret") == 0
        assert _login(sasl_port, "SCRAM-SHA-512", "carol", "carol-secret") != 0
    finally:
        broker.stop()


def test_kafka_configs_adds_and_deletes_a_scram_user(tmp_path, ports):
    """kafka-configs --alter (Kafka's ConfigCommand)."""
    port, sasl_port = ports
    broker = _start(str(tmp_path / "data"), port, sasl_port)
    libs = resolve_kafka_jars()
    classpath = os.pathsep.join(os.path.join(libs, n) for n in sorted(os.listdir(libs))
                                if n.endswith(".jar"))

    def kafka_configs(*args: str) -> None:
        result = subprocess.run(
            [java_executable(), "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath,
             "kafka.admin.ConfigCommand", "--bootstrap-server", broker.bootstrap, *args],
            capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        assert "Completed updating config for user dave" in result.stdout

    try:
        kafka_configs("--alter", "--add-config",
                      "SCRAM-SHA-512=[iterations=8192,password=dave-secret]",
                      "--entity-type", "users", "--entity-name", "dave")
        assert _login(sasl_port, "SCRAM-SHA-512", "dave", "dave-secret") == 0
        kafka_configs("--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users",
                      "--entity-name", "dave")
        assert _login(sasl_port, "SCRAM-SHA-512", "dave", "dave-secret") != 0
    finally:
        broker.stop()
