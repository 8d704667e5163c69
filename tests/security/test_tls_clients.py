"""Real clients over an SSL listener of a kbroker process (beside its PLAINTEXT listener): each
of kafka-python, aiokafka, confluent-kafka, kafkajs, kcat and the Java client produces and
consumes in a group with commits; with ssl.client.auth=required a client without a certificate
gets nothing and one with it works, its principal the client certificate's mapped subject."""
from __future__ import annotations

import json

import pytest

from tests.support import unique

from . import tls_clients


@pytest.mark.parametrize("client", tls_clients.CLIENTS)
def test_client_produces_and_consumes_in_a_group_over_ssl(ssl_broker, certs, client):
    topic = unique(f"tls-{client}")
    if client in ("kafka-python", "aiokafka", "confluent-kafka", "kcat"):
        tls_clients.create_topic(ssl_broker.bootstrap, topic)  # kafkajs and Java create it
    outcome = tls_clients.SCENARIOS[client](ssl_broker.ssl_bootstrap, topic,
                                            unique(f"tls-{client}-g"), certs, client_cert=False)
    assert outcome == tls_clients.expected()


def tls_principals(broker) -> list[str]:
    return [json.loads(line)["principal"] for line in broker.logs().splitlines()
            if '"TLS connection"' in line]


@pytest.mark.parametrize("client", tls_clients.CLIENTS)
def test_mtls_client_certificate_is_the_principal(mtls_broker, certs, client):
    topic = unique(f"mtls-{client}")
    if client in ("kafka-python", "aiokafka", "confluent-kafka", "kcat"):
        tls_clients.create_topic(mtls_broker.bootstrap, topic)
    before = len(tls_principals(mtls_broker))
    outcome = tls_clients.SCENARIOS[client](mtls_broker.ssl_bootstrap, topic,
                                            unique(f"mtls-{client}-g"), certs, client_cert=True)
    assert outcome == tls_clients.expected()
    seen = tls_principals(mtls_broker)[before:]
    # ssl.principal.mapping.rules turned CN=kbroker-client,OU=Development,O=kbroker into this
    assert seen and set(seen) == {"User:kbroker-client"}


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka", "java"])
def test_mtls_client_without_certificate_fails(mtls_broker, certs, client):
    topic = unique(f"mtls-none-{client}")
    tls_clients.create_topic(mtls_broker.bootstrap, topic)
    before = mtls_broker.logs().count("TLS handshake failed")
    with pytest.raises(Exception):  # noqa: B017 - each client raises its own kind
        run_briefly(client, mtls_broker.ssl_bootstrap, topic, certs)
    assert mtls_broker.logs().count("TLS handshake failed") > before
    assert mtls_broker.logs().count("PEER_DID_NOT_RETURN_A_CERTIFICATE") > 0
    # nothing reached the topic
    from kafka import KafkaConsumer, TopicPartition
    consumer = KafkaConsumer(bootstrap_servers=mtls_broker.bootstrap)
    try:
        tp = TopicPartition(topic, 0)
        assert consumer.end_offsets([tp])[tp] == 0
    finally:
        consumer.close()


def run_briefly(client, bootstrap, topic, certs):
    """The client's produce, with short timeouts: it must fail, not wait."""
    paths = certs["paths"]
    if client == "kafka-python":
        from kafka import KafkaProducer
        producer = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL",
                                 ssl_cafile=paths["ca.crt"], max_block_ms=2000,
                                 bootstrap_timeout_ms=2000)
        try:
            producer.send(topic, b"x").get(5)
        finally:
            producer.close(0)
    elif client == "confluent-kafka":
        from confluent_kafka import KafkaException, Producer
        errors = []
        producer = Producer({"bootstrap.servers": bootstrap, "security.protocol": "ssl",
                             "ssl.ca.location": paths["ca.crt"], "message.timeout.ms": 2000,
                             "error_cb": lambda e: errors.append(e)})
        results = []
        producer.produce(topic, b"x", on_delivery=lambda err, msg: results.append(err))
        producer.flush(10)
        if results != [None]:
            raise KafkaException(f"{results} {errors[:2]}")
    else:
        tls_clients.java(bootstrap, topic, unique("none"), certs, client_cert=False)
