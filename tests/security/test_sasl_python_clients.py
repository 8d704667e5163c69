"""Real Python clients through a SASL_PLAINTEXT listener of a broker process: kafka-python,
aiokafka and confluent-kafka (librdkafka) each produce and consume in a group with PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (unsecured tokens); a wrong password gets an
authentication error and no data."""
from __future__ import annotations

import asyncio
import time

import pytest

from tests.support import BrokerProcess, free_port, unique

from .sasl_support import ALICE_PASSWORD, kbroker_overrides, unsecured_jwt

SCRAM_AND_PLAIN = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
ALL = SCRAM_AND_PLAIN + ["OAUTHBEARER"]


@pytest.fixture(scope="module")
def broker():
    port = free_port()
    proc = BrokerProcess(port=port, overrides=kbroker_overrides(port))
    proc.start()
    yield proc
    proc.stop()


def _token() -> str:
    now = int(time.time())  # whole seconds: an iat of this very millisecond is "in the future"
    return unsecured_jwt({"sub": "alice", "iat": now, "exp": now + 3600, "scope": "test"})


def _messages(mechanism: str) -> list[bytes]:
    return [f"{mechanism}-{i}".encode() for i in range(5)]


# -- kafka-python


def _kafka_python_settings(mechanism: str, password: str = ALICE_PASSWORD) -> dict:
    settings = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class Provider(AbstractTokenProvider):
            def token(self):
                return _token()
        settings["sasl_oauth_token_provider"] = Provider()
    else:
        settings.update(sasl_plain_username="alice", sasl_plain_password=password)
    return settings


@pytest.mark.parametrize("mechanism", ALL)
def test_kafka_python(broker, mechanism):
    from kafka import KafkaConsumer, KafkaProducer
    topic, group = unique("sasl-kp"), unique("g")
    settings = _kafka_python_settings(mechanism)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, **settings)
    for value in _messages(mechanism):
        producer.send(topic, value).get(timeout=20)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                             auto_offset_reset="earliest", consumer_timeout_ms=15000, **settings)
    got = []
    for record in consumer:
        got.append(record.value)
        if len(got) == 5:
            break
    consumer.commit()
    consumer.close()
    assert got == _messages(mechanism)


@pytest.mark.parametrize("mechanism", SCRAM_AND_PLAIN)
def test_kafka_python_wrong_password(broker, mechanism, caplog):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError
    topic = unique("sasl-kp-no")
    # kafka-python retries the bootstrap until bootstrap_timeout_ms (30 s by default), then gives
    # up: each attempt ends with the broker's SASL_AUTHENTICATION_FAILED. kafka-python 3 drops
    # an answer that arrives together with the FIN; against Kafka 4.3.1 it mostly reports
    # "socket disconnected". Here the connection lingers open after the answer, so it sees why.
    with pytest.raises(KafkaError):
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_block_ms=3000,
                                 bootstrap_timeout_ms=3000,
                                 **_kafka_python_settings(mechanism, "wrong"))
        producer.send(topic, b"never").get(timeout=3)
    assert "SaslAuthenticationFailedError" in caplog.text
    if mechanism == "PLAIN":
        assert "Authentication failed: Invalid username or password" in caplog.text
    _assert_no_data(broker, topic)


def _assert_no_data(broker, topic: str) -> None:
    """The topic a refused client wrote to does not exist (nothing reached the log)."""
    from kafka import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap,
                             **_kafka_python_settings("PLAIN"))
    try:
        assert topic not in admin.list_topics()
    finally:
        admin.close()


# -- aiokafka


def _aiokafka_settings(mechanism: str, password: str = ALICE_PASSWORD) -> dict:
    settings = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        from aiokafka.abc import AbstractTokenProvider

        class Provider(AbstractTokenProvider):
            async def token(self):
                return _token()
        settings["sasl_oauth_token_provider"] = Provider()
    else:
        settings.update(sasl_plain_username="alice", sasl_plain_password=password)
    return settings


@pytest.mark.parametrize("mechanism", ALL)
def test_aiokafka(broker, mechanism):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    topic, group = unique("sasl-aio"), unique("g")

    async def run():
        settings = _aiokafka_settings(mechanism)
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, **settings)
        await producer.start()
        try:
            for value in _messages(mechanism):
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                    auto_offset_reset="earliest", **settings)
        await consumer.start()
        got = []
        try:
            async with asyncio.timeout(30):
                async for record in consumer:
                    got.append(record.value)
                    if len(got) == 5:
                        break
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == _messages(mechanism)


@pytest.mark.parametrize("mechanism", SCRAM_AND_PLAIN)
def test_aiokafka_wrong_password(broker, mechanism, caplog):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError
    topic = unique("sasl-aio-no")

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                    **_aiokafka_settings(mechanism, "wrong"))
        try:
            await producer.start()
            await producer.send_and_wait(topic, b"never")
        finally:
            await producer.stop()

    # the bootstrap fails; its log says why: the broker's SASL_AUTHENTICATION_FAILED
    with pytest.raises(KafkaError):
        asyncio.run(run())
    assert "[Error 58] SaslAuthenticationFailed" in caplog.text
    if mechanism == "PLAIN":
        assert "Authentication failed: Invalid username or password" in caplog.text
    _assert_no_data(broker, topic)


# -- confluent-kafka (librdkafka)


def _confluent_settings(broker, mechanism: str, password: str = ALICE_PASSWORD) -> dict:
    settings = {"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        settings.update({"enable.sasl.oauthbearer.unsecure.jwt": True,
                         "sasl.oauthbearer.config": "principal=alice scope=test"})
    else:
        settings.update({"sasl.username": "alice", "sasl.password": password})
    return settings


@pytest.mark.parametrize("mechanism", ALL)
def test_confluent_kafka(broker, mechanism):
    from confluent_kafka import Consumer, Producer
    topic, group = unique("sasl-ck"), unique("g")
    producer = Producer(_confluent_settings(broker, mechanism))
    delivered = []
    for value in _messages(mechanism):
        producer.produce(topic, value, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None] * 5
    consumer = Consumer({**_confluent_settings(broker, mechanism), "group.id": group,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < 5 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert got == _messages(mechanism)


@pytest.mark.parametrize("mechanism", SCRAM_AND_PLAIN)
def test_confluent_kafka_wrong_password(broker, mechanism):
    from confluent_kafka import KafkaError, Producer
    errors = []
    producer = Producer({**_confluent_settings(broker, mechanism, "wrong"),
                         "error_cb": errors.append, "message.timeout.ms": 2000})
    delivered = []
    topic = unique("sasl-ck-no")
    producer.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(10)
    auth_errors = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth_errors, errors
    if mechanism == "PLAIN":
        assert "Authentication failed: Invalid username or password" in auth_errors[0].str()
    assert delivered and delivered[0] is not None  # not delivered
    _assert_no_data(broker, topic)


# -- re-authentication (KIP-368)

REAUTH_MS = 2000


@pytest.fixture
def reauth_broker():
    """Sessions of REAUTH_MS on every mechanism; debug logs show each (re-)authentication."""
    port = free_port()
    proc = BrokerProcess(port=port, overrides=kbroker_overrides(
        port, **{"connections.max.reauth.ms": REAUTH_MS, "log.level": "debug"}))
    proc.start()
    yield proc
    proc.stop()


def _reauth_events(broker) -> tuple[list, list]:
    import json
    events = [json.loads(line) for line in broker.logs().splitlines() if line.startswith("{")]
    return ([e for e in events if e.get("event") == "re-authenticated"],
            [e for e in events if "SASL session expired" in e.get("reason", "")])


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_clients_reauthenticate_before_their_session_ends(reauth_broker, client):
    """Producing for three session lifetimes: the client re-authenticates its connection and
    the broker closes none as expired."""
    topic = unique("sasl-reauth")
    deadline = time.monotonic() + 3 * REAUTH_MS / 1000
    sent = 0
    if client == "kafka-python":
        from kafka import KafkaProducer
        producer = KafkaProducer(bootstrap_servers=reauth_broker.bootstrap,
                                 **_kafka_python_settings("SCRAM-SHA-256"))
        while time.monotonic() < deadline:
            producer.send(topic, b"x").get(timeout=10)
            sent += 1
            time.sleep(0.05)
        producer.close()
    else:
        from confluent_kafka import Producer
        producer = Producer(_confluent_settings(reauth_broker, "SCRAM-SHA-256"))
        while time.monotonic() < deadline:
            producer.produce(topic, b"x")
            assert producer.flush(10) == 0
            sent += 1
            time.sleep(0.05)
    reauths, expired = _reauth_events(reauth_broker)
    assert sent > 20
    assert reauths and all(e["principal"] == "User:alice" for e in reauths)
    assert expired == []
