"""docker-compose.yml's stack with a real engine, the way a project tests its own services
against this broker in CI:

- the tests service (tests/compose/, a kafka-python consumer group through SASL) passes against
  the broker container, which it reaches by its compose name (broker:29093);
- the host reaches the same broker on localhost (listener EXTERNAL) and sees what the tests
  service wrote;
- `stop` (SIGTERM) loses nothing the broker acknowledged, and the broker exits 0;
- `down` and `up` keep the data volume: records and committed offsets are back; `down -v` drops
  them;
- the image: non-root, no compiler, no pip cache; its size and the seconds from `up` to healthy
  are printed (docs/docker.md has the numbers).
"""
from __future__ import annotations

import threading
import time
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tests.containers.engine import BROKER_IMAGE, Stack, assert_suite_passed
from tests.support import free_port, unique

# runs alone, after the parallel part (tools/run-tests.sh): the images are built once per session,
# and each xdist worker would build the same tags at once
pytestmark = [pytest.mark.timeout(900), pytest.mark.serial]
# the data volume of a one-off container that does not start the broker, as tmpfs: no anonymous
# volume is left behind
NO_VOLUME = ["--mount", "type=tmpfs,destination=/var/lib/kbroker/data"]


@pytest.fixture(scope="module")
def stack(engine, images):
    stack = Stack(engine, ["docker-compose.yml"], port=free_port(), http_port=free_port())
    try:
        stack.healthy_s = stack.up("broker")
        print(f"\n{BROKER_IMAGE}: healthy {stack.healthy_s:.2f} s after `up`")
        yield stack
    finally:
        stack.down(volumes=True)


@pytest.fixture(scope="module")
def suite(stack):
    """The tests service run once: (exit code, output)."""
    return stack.run_service("tests")


def host_bootstrap(stack) -> str:
    return f"localhost:{stack.port}"


def read_all(bootstrap: str, topic: str, expected: int, group: str | None = None,
             timeout_s: float = 30) -> list[bytes]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=3000)
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(values) < expected and time.monotonic() < deadline:
            values.extend(r.value for r in consumer)
    finally:
        consumer.close()
    return values


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        consumer.close()


def test_image_is_non_root_without_build_tools_or_pip_cache(engine, images):
    assert engine("image", "inspect", "--format", "{{.Config.User}}", BROKER_IMAGE
                  ).stdout.strip() == "10001:10001"
    # looked at as root: what the image holds, whoever runs it
    found = engine("run", "--rm", *NO_VOLUME, "--user", "0", "--entrypoint", "sh", BROKER_IMAGE,
                   "-c",
                   "command -v gcc cc make g++ ld; ls -d /root/.cache/pip "
                   "/var/lib/kbroker/.cache/pip /wheels /src 2>/dev/null; true").stdout
    assert found.strip() == "", found
    usage = engine("run", "--rm", *NO_VOLUME, BROKER_IMAGE, "--help").stdout
    assert usage.startswith("usage: kbroker")


def test_start_to_healthy(engine, images):
    """The seconds from `run` to the first passing healthcheck, the broker alone (no compose)."""
    name = f"kbroker-start-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    engine("run", "-d", "--name", name, BROKER_IMAGE)
    try:
        while True:
            healthy, said = engine.healthcheck(name)
            if healthy:
                break
            assert time.monotonic() - started < 60, said + engine.logs(name)[-3000:]
            time.sleep(0.05)
        seconds = time.monotonic() - started
        logs = engine.logs(name)
    finally:
        engine("rm", "-f", "-v", name, check=False)
    print(f"\n{BROKER_IMAGE}: {images['broker_bytes'] / 1e6:.0f} MB, healthy {seconds:.2f} s "
          "after `run`")
    assert '"event": "broker started"' in logs


def test_tests_service_passes_against_the_broker_by_its_compose_name(suite):
    assert_suite_passed(*suite)


def test_host_reaches_the_same_broker_on_localhost(stack, suite):
    assert suite[0] == 0, suite[1][-3000:]
    admin = KafkaAdminClient(bootstrap_servers=host_bootstrap(stack))
    try:
        # the host is told to come back on localhost (advertised listener EXTERNAL)...
        brokers = admin.describe_cluster()["brokers"]
        assert [(b["host"], b["port"]) for b in brokers] == [("localhost", stack.port)]
        # ... and sees the topics the tests service made through broker:29093
        made = [t for t in admin.list_topics() if t.startswith("compose-topic-")]
    finally:
        admin.close()
    assert made, "the tests service's topics"
    assert len(read_all(host_bootstrap(stack), made[0], 48)) == 48


def produce_acknowledged(bootstrap: str, topic: str, count: int) -> list[bytes]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    try:
        values = [f"v{i}".encode() for i in range(count)]
        for value in values:
            producer.send(topic, value)
        producer.flush(30)
        return values
    finally:
        producer.close(5)


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    from kafka.structs import OffsetAndMetadata
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                         for p, o in offsets.items()})
    finally:
        consumer.close()


def test_stop_loses_nothing_acknowledged(engine, stack):
    """Records are produced until the broker is stopped under them (SIGTERM): every record it
    acknowledged is there after `start`, and it exited 0 after its orderly shutdown."""
    bootstrap = host_bootstrap(stack)
    topic, group = unique("stop"), unique("stop-group")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 3, 1)])
    admin.close()
    commit(bootstrap, group, topic, {0: 1, 1: 2, 2: 3})

    acknowledged: list[bytes] = []
    stop_producing = threading.Event()

    def produce() -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0,
                                 retries=0, max_block_ms=2000, request_timeout_ms=2000)
        i = 0
        try:
            while not stop_producing.is_set():
                value = f"r{i}".encode()
                i += 1
                try:
                    producer.send(topic, value).get(timeout=5)
                except Exception:  # noqa: BLE001 - the broker went away: not acknowledged
                    continue
                acknowledged.append(value)
        finally:
            try:
                producer.close(1)
            except Exception:  # noqa: BLE001 - records it could not send to a stopped broker
                pass

    producing = threading.Thread(target=produce, daemon=True)
    producing.start()
    while len(acknowledged) < 200:
        assert producing.is_alive()
        time.sleep(0.05)
    container = stack.container("broker")
    stack.stop("broker")
    stop_producing.set()
    producing.join(30)
    assert engine.exit_code(container) == 0
    assert '"event": "broker stopped"' in engine.logs(container)
    got_before = list(acknowledged)

    stack.start("broker")
    values = read_all(bootstrap, topic, len(got_before))
    assert set(got_before) <= set(values), f"lost {len(set(got_before) - set(values))}"
    assert len(values) == len(set(values)), "no record twice"
    assert committed(bootstrap, group, topic, 3) == {0: 1, 1: 2, 2: 3}


def test_down_and_up_keep_the_volume_and_down_v_drops_it(stack):
    bootstrap = host_bootstrap(stack)
    topic, group = unique("volume"), unique("volume-group")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.close()
    values = produce_acknowledged(bootstrap, topic, 50)
    commit(bootstrap, group, topic, {0: 7, 1: 11})

    stack.down()                      # containers gone, the volume kept
    stack.up("broker")
    assert sorted(read_all(bootstrap, topic, 50)) == sorted(values)
    assert committed(bootstrap, group, topic, 2) == {0: 7, 1: 11}

    stack.down(volumes=True)          # and now the volume too
    stack.up("broker")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert topic not in admin.list_topics()
        assert group not in repr(admin.list_groups())
    finally:
        admin.close()
