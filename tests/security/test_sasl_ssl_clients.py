"""SASL over TLS: a SASL_SSL listener (the TLS of broker/security/tls.py with the SASL of
broker/security/sasl.py on top). kafka-python, aiokafka, confluent-kafka and the Java client each
authenticate with SCRAM-SHA-512 and PLAIN over TLS, produce and consume in a group; kafkajs with
SCRAM-SHA-512 and PLAIN, kcat with PLAIN (Debian's kcat cannot do SCRAM with Kafka 4: see
test_sasl_other_clients.py); the principal is the SASL user, not the (absent) certificate; a
wrong password writes nothing."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from tests.support import BrokerProcess, free_port, unique

from . import tls_clients
from .sasl_support import ALICE_PASSWORD, SCRAM_BOOTSTRAP, listener_settings

@pytest.fixture(scope="module")
def broker(certs):
    port, sasl_ssl_port = free_port(), free_port()
    proc = BrokerProcess(port=port, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{sasl_ssl_port}",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": certs["paths"]["broker.p12"],
        "ssl.keystore.password": certs["password"],
        "sasl.scram.bootstrap.credentials": SCRAM_BOOTSTRAP,
        "log.level": "debug",
        **listener_settings("sasl_ssl")})
    proc.start()
    proc.sasl_ssl = f"127.0.0.1:{sasl_ssl_port}"
    yield proc
    proc.stop()


def principals(broker) -> list[str]:
    """The principals of the SASL logins in the broker's debug log, in order."""
    return [json.loads(line).get("principal") for line in broker.logs().splitlines()
            if '"event": "authenticated"' in line]


def kafka_python(bootstrap, topic, group, certs, mechanism) -> dict:
    return tls_clients.run_kafka_python(bootstrap, topic, group, dict(
        security_protocol="SASL_SSL", ssl_cafile=certs["paths"]["ca.crt"],
        sasl_mechanism=mechanism, sasl_plain_username="alice",
        sasl_plain_password=ALICE_PASSWORD))


def aiokafka(bootstrap, topic, group, certs, mechanism) -> dict:
    from aiokafka.helpers import create_ssl_context
    return tls_clients.run_aiokafka(bootstrap, topic, group, dict(
        security_protocol="SASL_SSL", ssl_context=create_ssl_context(
            cafile=certs["paths"]["ca.crt"]),
        sasl_mechanism=mechanism, sasl_plain_username="alice",
        sasl_plain_password=ALICE_PASSWORD))


def _confluent(bootstrap, certs, mechanism, password=ALICE_PASSWORD) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "sasl_ssl",
            "ssl.ca.location": certs["paths"]["ca.crt"], "sasl.mechanism": mechanism,
            "sasl.username": "alice", "sasl.password": password}


def confluent_kafka(bootstrap, topic, group, certs, mechanism) -> dict:
    return tls_clients.run_confluent_kafka(topic, group, _confluent(bootstrap, certs, mechanism))


def java(bootstrap, topic, group, certs, mechanism) -> dict:
    module = {"PLAIN": "plain.PlainLoginModule",
              "SCRAM-SHA-512": "scram.ScramLoginModule"}[mechanism]
    return tls_clients.run_java(bootstrap, topic, group, {
        "security.protocol": "SASL_SSL", "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": certs["paths"]["truststore.p12"],
        "ssl.truststore.password": certs["password"], "sasl.mechanism": mechanism,
        "sasl.jaas.config": f"org.apache.kafka.common.security.{module} required "
                            f'username="alice" password="{ALICE_PASSWORD}";'})


CLIENTS = {"kafka-python": kafka_python, "aiokafka": aiokafka,
           "confluent-kafka": confluent_kafka, "java": java}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
@pytest.mark.parametrize("client", list(CLIENTS))
def test_clients_produce_and_consume_over_sasl_ssl(broker, certs, client, mechanism):
    topic = unique(f"sasl-ssl-{client}")
    if client != "java":  # the Java scenario creates its topic itself, over SASL_SSL
        tls_clients.create_topic(broker.bootstrap, topic)
    before = len(principals(broker))
    outcome = CLIENTS[client](broker.sasl_ssl, topic, unique("g"), certs, mechanism)
    assert outcome == tls_clients.expected()
    logins = principals(broker)[before:]
    assert logins and set(logins) == {"User:alice"}


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kafkajs_over_sasl_ssl(broker, certs, mechanism):
    node = shutil.which("node")
    assert node, "node is not installed: run tools/install-test-deps.sh"
    topic = unique("sasl-ssl-kafkajs")
    tls_clients.create_topic(broker.bootstrap, topic)
    before = len(principals(broker))
    result = subprocess.run(
        [node, os.path.join(os.path.dirname(tls_clients.JAR), "..", "..", "js",
                            "sasl_scenario.js"), broker.sasl_ssl, topic, unique("g"),
         mechanism.lower(), "alice", ALICE_PASSWORD, certs["paths"]["ca.crt"]],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    # two partitions: the order holds within each
    assert sorted(out["values"]) == [f"kafkajs-{mechanism.lower()}-{i}" for i in range(5)]
    assert set(principals(broker)[before:]) == {"User:alice"}


def test_kcat_over_sasl_ssl(broker, certs):
    assert tls_clients.KCAT, "kcat is not installed: run tools/install-test-deps.sh"
    topic, group = unique("sasl-ssl-kcat"), unique("g")
    settings = ["-X", "security.protocol=sasl_ssl",
                "-X", f"ssl.ca.location={certs['paths']['ca.crt']}",
                "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice",
                "-X", f"sasl.password={ALICE_PASSWORD}"]

    def kcat(*args, stdin=None):
        result = subprocess.run([tls_clients.KCAT, "-b", broker.sasl_ssl, *settings, *args],
                                input=stdin, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr[-1500:]
        return result.stdout
    kcat("-P", "-t", topic, stdin="a\nb\nc\n")
    assert sorted(kcat("-G", group, "-o", "beginning", "-e", topic).split()) == ["a", "b", "c"]


def test_a_wrong_password_over_sasl_ssl_writes_nothing(broker, certs):
    from confluent_kafka import Producer
    topic = unique("sasl-ssl-wrong")
    tls_clients.create_topic(broker.bootstrap, topic)
    errors, results = [], []
    producer = Producer({**_confluent(broker.sasl_ssl, certs, "SCRAM-SHA-512", "not-it"),
                         "message.timeout.ms": 2000, "error_cb": lambda e: errors.append(e)})
    producer.produce(topic, b"x", on_delivery=lambda err, msg: results.append(err))
    producer.flush(15)
    assert results and results[0] is not None
    assert any(re.search("Authentication failed", e.str()) for e in errors), errors[:3]
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.end_offsets([tp])[tp] == 0
    finally:
        consumer.close()
