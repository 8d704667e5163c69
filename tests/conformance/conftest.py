"""Fixtures of the differential conformance suite: the same scenario against a real Apache Kafka
4.x broker and against kbroker, started with the same group settings.

``target`` is parametrized over ["kafka", "kbroker"]; each broker starts once per session, on first
use, so ``-k kbroker`` never starts the JVM. A missing Java, Maven or jar set fails the fixture with
the reason: it never skips.
"""
from __future__ import annotations

import pytest

from tests.support import BrokerProcess, RawClient

from .kafka_server import KafkaServer

# The group settings both brokers run with (Kafka's names). Kafka's defaults except the initial
# rebalance delay, which Kafka's shipped dev config also sets to 0.
GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "offset.metadata.max.bytes": 4096,
    # small enough for a scenario to fill a group (no other scenario needs more than 3 members)
    "group.max.size": 3,
    # Kafka's default; kbroker's own default is shorter (README)
    "group.consumer.heartbeat.interval.ms": 5000,
    # kbroker's default (Kafka's is 1000): a new target assignment at each change, so that
    # a scenario sees every step at once on both brokers
    "group.consumer.assignment.interval.ms": 0,
    "group.share.assignment.interval.ms": 0,
}

# Transaction settings both brokers run with: the coordinator looks for timed-out transactions
# every second (Kafka's default is every 10 s), so a scenario sees a timeout abort within about
# two seconds. Nothing else uses transactions, so no other scenario sees a difference.
TRANSACTION_SETTINGS = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
}


def kbroker_settings() -> dict:
    """GROUP_SETTINGS and TRANSACTION_SETTINGS, less the transaction settings kbroker does not
    know yet: it refuses unknown names at start, which would fail every scenario, not only the
    transaction scenarios that need the setting."""
    from broker.config import SETTINGS
    known = {k: v for k, v in TRANSACTION_SETTINGS.items() if k in SETTINGS}
    return {**GROUP_SETTINGS, **known}


class Target:
    """One broker under test: its name ("kafka" or "kbroker") and port."""

    def __init__(self, name: str, port: int, server) -> None:
        self.name = name
        self.port = port
        self.server = server

    @property
    def is_kafka(self) -> bool:
        return self.name == "kafka"

    def __repr__(self) -> str:
        return f"Target({self.name}, port={self.port})"


@pytest.fixture(scope="session")
def kafka_server():
    server = KafkaServer(overrides={**GROUP_SETTINGS, **TRANSACTION_SETTINGS})
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kbroker_server():
    server = BrokerProcess(overrides=kbroker_settings())
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["kafka", "kbroker"])
def target(request) -> Target:
    server = request.getfixturevalue(f"{request.param}_server")
    return Target(request.param, server.port, server)


@pytest.fixture
def connect(target):
    """connect(client_id) -> a new RawClient to the target; all closed at the end of the test."""
    made: list[RawClient] = []

    def _connect(client_id: str = "conformance") -> RawClient:
        client = RawClient(target.port, client_id=client_id)
        made.append(client)
        return client

    yield _connect
    for client in made:
        client.close()
