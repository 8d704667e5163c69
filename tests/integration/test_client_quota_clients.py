"""Real producers under a producer_byte_rate quota: kafka-python and confluent-kafka send as
fast as they can, and the rate the broker lets through converges to the quota.

The broker runs with quota.window.num=3 (Kafka's default is 11) so a test sees several of the
quota's periods in seconds: a client starts with a burst of (samples - 1) windows of quota, is
then throttled (throttle_time_ms, the connection muted), and from then on averages the quota.
The quotas are kept in --data-dir and hold again after a restart."""
from __future__ import annotations

import time

import pytest

from protocol.messages import AlterClientQuotasRequest as A, DescribeClientQuotasRequest as D
from tests.support import BrokerProcess, RawClient, unique

# runs alone, after the parallel part (tools/run-tests.sh): a measured byte rate held against the quota
pytestmark = pytest.mark.serial

QUOTA = 100_000  # bytes per second
RUN_S = 9.0
#: one period of the quota's windows (3 x 1 s) after the start: the first burst is behind
STEADY_FROM_S = 3.0
VALUE = b"v" * 1000


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("quota-data"))


@pytest.fixture(scope="module")
def quota_broker(data_dir):
    proc = BrokerProcess(data_dir=data_dir, overrides={"quota.window.num": 3,
                                                       "auto.create.topics.enable": "true"})
    proc.start()
    yield proc
    proc.stop()


def set_quota(port: int, client_id: str, rate: float) -> None:
    answer = RawClient.once(port, A(entries=[A.EntryData(
        entity=[A.EntityData(entity_type="client-id", entity_name=client_id)],
        ops=[A.OpData(key="producer_byte_rate", value=rate, remove=False)])],
        validate_only=False), 1)
    assert [e.error_code for e in answer.entries] == [0]


def measured_rate(send, flush, seconds: float) -> float:
    """Bytes of values acknowledged per second while sending as fast as the client lets, from
    STEADY_FROM_S on (after the first burst and its throttle)."""
    acked = []
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        send(acked)
    flush()
    elapsed = time.monotonic() - started
    steady_from = STEADY_FROM_S if seconds > STEADY_FROM_S else 0.0
    later = sum(1 for t in acked if t - started >= steady_from)
    return later * len(VALUE) / (elapsed - steady_from)


def kafka_python_rate(bootstrap: str, client_id: str, topic: str, seconds: float) -> float:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, acks=1,
                             linger_ms=5)
    pending = []

    def send(acked) -> None:
        future = producer.send(topic, VALUE)
        future.add_callback(lambda _md: acked.append(time.monotonic()))
        pending.append(future)
        if len(pending) > 200:  # a bounded backlog: the rate is what the broker lets through
            pending.pop(0).get(timeout=60)

    try:
        return measured_rate(send, producer.flush, seconds)
    finally:
        producer.close()


def confluent_rate(bootstrap: str, client_id: str, topic: str, seconds: float) -> float:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1,
                         "linger.ms": 5, "queue.buffering.max.kbytes": 200})

    def send(acked) -> None:
        def done(err, _msg) -> None:
            if err is None:
                acked.append(time.monotonic())
        try:
            producer.produce(topic, VALUE, on_delivery=done)
        except BufferError:  # the queue is full: wait for the broker
            producer.poll(0.05)
        producer.poll(0)

    return measured_rate(send, lambda: producer.flush(60), seconds)


@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_a_producer_converges_to_its_byte_rate_quota(quota_broker, client):
    client_id = unique(client)
    topic = unique("quota-topic")
    free = unique("free")
    rate_of = kafka_python_rate if client == "kafka-python" else confluent_rate
    set_quota(quota_broker.port, client_id, QUOTA)
    rate = rate_of(quota_broker.bootstrap, client_id, topic, RUN_S)
    # the values are ~93% of what a request counts (batch and request headers)
    assert 0.75 * QUOTA <= rate <= 1.3 * QUOTA, rate
    # the same client without a quota is far faster: the quota, not the client, set the rate
    unlimited = rate_of(quota_broker.bootstrap, free, topic, 2.0)
    assert unlimited > 3 * QUOTA, unlimited


def test_quotas_persist_across_a_restart(data_dir, quota_broker):
    client_id = unique("persisted")
    set_quota(quota_broker.port, client_id, 12345.0)
    quota_broker.stop()
    quota_broker.start()
    answer = RawClient.once(quota_broker.port, D(components=[D.ComponentData(
        entity_type="client-id", match_type=0, match=client_id)], strict=False), 1)
    assert [([(e.entity_type, e.entity_name) for e in entry.entity],
             [(v.key, v.value) for v in entry.values]) for entry in answer.entries] == [
        ([("client-id", client_id)], [("producer_byte_rate", 12345.0)])]
