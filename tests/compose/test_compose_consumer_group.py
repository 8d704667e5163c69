"""A consumer group formed by kafka-python against the broker of the compose stack: two members
share a topic's partitions, commit, and one takes over when the other leaves."""
from __future__ import annotations

import threading
import time
import urllib.request
import uuid

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import CommitFailedError, RebalanceInProgressError

PARTITIONS = 4
TIMEOUT = 60.0


def wait_for(condition, what: str, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Member(threading.Thread):
    """One group member polling in its own thread; commits after every poll with records."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str,
                 security: dict) -> None:
        super().__init__(name=name, daemon=True)
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, client_id=name,
            enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=10000, heartbeat_interval_ms=500, **security)
        self.consumer.subscribe([topic])
        # metadata loaded before the first join: kafka-python 3.0.12 can lose the rejoin a
        # leader makes when a topic's metadata arrives after it assigned (tests/support.py)
        wait_for(lambda: topic in self.consumer.topics(), f"metadata of {topic}")
        self.lock = threading.Lock()
        self.values: list[str] = []
        self.partitions: frozenset[int] = frozenset()
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                batches = self.consumer.poll(timeout_ms=200)
                got = [r.value.decode() for records in batches.values() for r in records]
                if got:
                    try:
                        self.consumer.commit()
                    except (CommitFailedError, RebalanceInProgressError):
                        pass  # a rebalance overtook this commit: the records come again
                assignment = frozenset(tp.partition for tp in self.consumer.assignment())
                with self.lock:
                    self.values.extend(got)
                    self.partitions = assignment
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.consumer.close()  # sends LeaveGroup

    def seen(self) -> set[str]:
        with self.lock:
            return set(self.values)

    def assignment(self) -> frozenset[int]:
        with self.lock:
            return self.partitions

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        assert not self.is_alive(), f"{self.name} did not close"
        assert self.error is None, f"{self.name} failed: {self.error!r}"


def produce(bootstrap: str, topic: str, values: list[str], security: dict) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **security)
    try:
        for i, value in enumerate(values):
            producer.send(topic, value=value.encode(), partition=i % PARTITIONS)
        producer.flush(30)
    finally:
        producer.close(5)


def test_consumer_group_shares_commits_and_takes_over(bootstrap, security):
    run = uuid.uuid4().hex[:8]
    topic, group = f"compose-topic-{run}", f"compose-group-{run}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="compose-tests", **security)
    members: list[Member] = []
    try:
        admin.create_topics([NewTopic(name=topic, num_partitions=PARTITIONS,
                                      replication_factor=1)])
        first = [f"a{i}" for i in range(40)]
        produce(bootstrap, topic, first, security)

        one = Member(bootstrap, group, topic, f"member-one-{run}", security)
        members.append(one)
        one.start()
        wait_for(lambda: one.assignment() == set(range(PARTITIONS)),
                 "the first member to get every partition")

        two = Member(bootstrap, group, topic, f"member-two-{run}", security)
        members.append(two)
        two.start()

        def shared() -> bool:  # each member's view is the one from its latest poll
            a, b = one.assignment(), two.assignment()
            return a and b and not a & b and a | b == set(range(PARTITIONS))

        wait_for(shared, "the two members to share the partitions")
        wait_for(lambda: one.seen() | two.seen() == set(first), "every record to be consumed")

        def committed() -> dict[int, int]:
            offsets = admin.list_group_offsets(group)[group]
            return {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == topic}

        wait_for(lambda: committed() == {p: 10 for p in range(PARTITIONS)},
                 "committed offsets at the end of every partition")

        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable"
        assert len(described["members"]) == 2
        assert described["protocol_type"] == "consumer"

        two.stop()  # LeaveGroup: the first member takes over without waiting for a timeout
        wait_for(lambda: one.assignment() == set(range(PARTITIONS)),
                 "the remaining member to take every partition")
        second = [f"b{i}" for i in range(8)]
        produce(bootstrap, topic, second, security)
        wait_for(lambda: set(second) <= one.seen(), "the remaining member to get new records")
        one.stop()

        assert admin.describe_groups([group])[group]["group_state"] == "Empty"
        final = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                              enable_auto_commit=False, **security)
        try:
            for p in range(PARTITIONS):
                assert final.committed(TopicPartition(topic, p)) == 12
        finally:
            final.close()
    finally:
        for member in members:
            member.stopping.set()
        admin.close()


def test_metrics_endpoint_is_ready_and_counts_requests(metrics_url):
    if metrics_url is None:
        import pytest
        pytest.skip("METRICS_URL not set")
    with urllib.request.urlopen(metrics_url + "/ready", timeout=10) as response:
        assert response.status == 200
    with urllib.request.urlopen(metrics_url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    assert 'kafka_requests_total{api="ApiVersions"' in text
    assert "kafka_coordinator_groups" in text
