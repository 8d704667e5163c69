"""Client quotas against Kafka 4.3.1 and kbroker, raw protocol: AlterClientQuotas' answers and
error messages, DescribeClientQuotas' filters, and the throttle a client gets over a
producer_byte_rate or consumer_byte_rate quota (throttle_time_ms in the answer, then the
connection reads nothing for that long).

The throttle times were recorded from Kafka 4.3.1 for these exact scenarios: 2017 ms and 6008 ms
for the third and fourth 40 kB Produce against a 10000 B/s quota, 2025 ms and 1999 ms for the
throttled Fetches; each target must land within 5% of the time Kafka's formula gives for the
bytes sent (the elapsed time of the test adds a few ms)."""
from __future__ import annotations

import os
import time

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (AlterClientQuotasRequest as A, ApiVersionsRequest,
                               DescribeClientQuotasRequest as D, FetchRequest as F,
                               ProduceRequest as P)
from protocol.records import SimpleRecord, build_batch
from tests.support import RawClient, unique

from .topics import create_topic

QUOTA = 10000.0  # bytes per second
WINDOW_S = 10  # (quota.window.num - 1) x quota.window.size.seconds: a fresh rate's window


def alter(port: int, entries, validate_only: bool = False, version: int = 1):
    request = A(entries=[
        A.EntryData(entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    ops=[A.OpData(key=k, value=v, remove=r) for k, v, r in ops])
        for entity, ops in entries], validate_only=validate_only)
    answer = RawClient.once(port, request, version)
    return sorted(((e.error_code, e.error_message,
                    tuple(sorted((x.entity_type, x.entity_name) for x in e.entity)))
                   for e in answer.entries), key=_order)


def describe(port: int, components, strict: bool = False, version: int = 1):
    answer = RawClient.once(port, D(components=[
        D.ComponentData(entity_type=t, match_type=m, match=x) for t, m, x in components],
        strict=strict), version)
    entries = None if answer.entries is None else sorted(
        (tuple(sorted((x.entity_type, x.entity_name or "") for x in e.entity)),
         tuple(sorted((v.key, v.value) for v in e.values))) for e in answer.entries)
    return answer.error_code, answer.error_message, entries


def _order(answer) -> tuple:
    code, message, entity = answer
    return int(code), message or "", repr(entity)


def normal(answers):
    """An empty entity name as None: which of the two an answer echoes is no client's concern."""
    return sorted(((c, m, tuple((t, n or None) for t, n in ent)) for c, m, ent in answers),
                  key=_order)


def described(port: int, components, expected, strict: bool = False, mine=None):
    """Describe until the answer's entries are ``expected``: Kafka's brokers apply an
    alteration from the metadata log a moment after the controller answers it."""
    deadline = time.monotonic() + 10
    while True:
        code, message, entries = describe(port, components, strict)
        assert (code, message) == (E.NONE, "")
        if mine is not None:
            entries = mine(entries)
        if entries == expected or time.monotonic() > deadline:
            return entries


def ok(*entity):
    return (E.NONE, None, tuple(sorted(entity)))


def bad(message, *entity):
    return (E.INVALID_REQUEST, message, tuple(sorted(entity)))


@pytest.mark.parametrize("version", [0, 1])
def test_alter_answers_and_messages(target, version):
    u = unique("u")
    cases = [
        ([([("user", u)], [("producer_byte_rate", 1024.0, False)])], [ok(("user", u))]),
        ([([("user", u)], [("producer_byte_rate", 1024.5, False)])],
         [bad("producer_byte_rate cannot be a fractional value.", ("user", u))]),
        ([([("user", u)], [("request_percentage", 12.5, False)])], [ok(("user", u))]),
        ([([("user", u)], [("connection_creation_rate", 10.0, False)])],
         [bad("Invalid configuration key connection_creation_rate", ("user", u))]),
        ([([("ip", "10.1.2.3")], [("connection_creation_rate", 10.5, False)])],
         [bad("connection_creation_rate cannot be a fractional value.", ("ip", "10.1.2.3"))]),
        ([([("ip", "10.1.2.3")], [("connection_creation_rate", 3e9, False)])],
         [bad("Proposed value for connection_creation_rate is too large for an INT.",
              ("ip", "10.1.2.3"))]),
        ([([("ip", "no-such-host.invalid")], [("connection_creation_rate", 10.0, False)])],
         [bad("no-such-host.invalid is not a valid IP or resolvable host.",
              ("ip", "no-such-host.invalid"))]),
        ([([("ip", "localhost")], [("connection_creation_rate", 10.0, False)])],
         [ok(("ip", "localhost"))]),
        ([([("ip", "10.1.2.3"), ("user", u)], [("connection_creation_rate", 10.0, False)])],
         [bad("Invalid quota entity combination, IP entity shouldnot be combined with User "
              "or ClientId", ("ip", "10.1.2.3"), ("user", u))]),
        ([([("ip", "10.1.2.3")], [("producer_byte_rate", 10.0, False)])],
         [bad("Invalid configuration key producer_byte_rate", ("ip", "10.1.2.3"))]),
        ([([("foo", "x")], [("producer_byte_rate", 10.0, False)])],
         [bad("Unhandled client quota entity type: foo", ("foo", "x"))]),
        ([([], [("producer_byte_rate", 10.0, False)])],
         [bad("Invalid empty client quota entity")]),
        ([([("user", "a-" + u), ("user", "b-" + u)], [("producer_byte_rate", 10.0, False)])],
         [ok(("user", "b-" + u))]),
        ([([("user", u)], [("producer_byte_rate", 0.0, False)])],
         [bad("Quota producer_byte_rate must be greater than 0", ("user", u))]),
        ([([("user", None)], [("request_percentage", -2.0, False)])],
         [bad("Quota request_percentage must be greater than 0", ("user", None))]),
        ([([("user", u)], [("producer_byte_rate", 1e30, False)])],
         [bad("Proposed value for producer_byte_rate is too large for a LONG.", ("user", u))]),
        ([([("user", u)], [("bogus", 1.0, False)])],
         [bad("Invalid configuration key bogus", ("user", u))]),
        ([([("user", u)], [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 2.0,
                                                                 False)])],
         [bad(f"Ignoring duplicate entity ClientQuotaEntity(entries={{user={u}}})",
              ("user", u))]),
        ([([("user", "")], [("producer_byte_rate", 5.0, False)])],
         [bad("Empty user not supported", ("user", ""))]),
        ([([("client-id", "")], [("producer_byte_rate", 5.0, False)])],
         [bad("Empty client-id not supported", ("client-id", ""))]),
        ([([("foo", ""), ("user", "")], [("producer_byte_rate", 2.0, False)])],
         [bad("Empty user not supported", ("foo", ""), ("user", ""))]),
        ([([("user", u), ("foo", "x")], [("bogus", -2.0, False)])],
         [bad("Unhandled client quota entity type: foo", ("foo", "x"), ("user", u))]),
        # removing a key nobody set is fine, even an unknown one
        ([([("user", "nobody-" + u)], [("nosuch", 0.0, True)])], [ok(("user", "nobody-" + u))]),
        ([([("user", u), ("client-id", "c")], [("producer_byte_rate", 2.0, False)]),
          ([("user", "e-" + u)], [("bogus", 1.0, False)]),
          ([("client-id", "f-" + u)], [("producer_byte_rate", 3.0, False)])],
         [ok(("client-id", "c"), ("user", u)), ok(("client-id", "f-" + u)),
          bad("Invalid configuration key bogus", ("user", "e-" + u))]),
    ]
    try:
        for entries, expected in cases:
            got = alter(target.port, entries, version=version)
            assert normal(got) == normal(expected), entries
    finally:
        # Kafka enforces the "localhost" entity on 127.0.0.1: every later test connects
        # from there
        alter(target.port, [([("ip", "localhost")], [("connection_creation_rate", 0.0, True)])])
    # what applied is what describe shows; nothing of the failed alterations
    expected = [((("user", u),), (("producer_byte_rate", 1024.0), ("request_percentage", 12.5)))]
    assert described(target.port, [("user", 0, u)], expected, strict=True) == expected
    assert describe(target.port, [("user", 0, "e-" + u)]) == (E.NONE, "", [])


def test_an_entity_named_twice_applies_once_and_says_it_ignored_the_second(target):
    u = unique("twice")
    assert alter(target.port, [([("user", u)], [("producer_byte_rate", 1.0, False)]),
                               ([("user", u)], [("consumer_byte_rate", 2.0, False)])]) == [
        bad(f"Ignoring duplicate entity ClientQuotaEntity(entries={{user={u}}})",
            ("user", u))]
    expected = [((("user", u),), (("producer_byte_rate", 1.0),))]
    assert described(target.port, [("user", 0, u)], expected) == expected


def test_validate_only_and_removal(target):
    u = unique("v")
    assert alter(target.port, [([("user", u)], [("producer_byte_rate", 5.0, False)])],
                 validate_only=True) == [ok(("user", u))]
    assert describe(target.port, [("user", 0, u)]) == (E.NONE, "", [])
    assert alter(target.port, [([("user", u)], [("producer_byte_rate", 5.0, False),
                                                 ("consumer_byte_rate", 6.0, False)])]) == [
        ok(("user", u))]
    assert alter(target.port, [([("user", u)], [("producer_byte_rate", 0.0, True)])]) == [
        ok(("user", u))]
    expected = [((("user", u),), (("consumer_byte_rate", 6.0),))]
    assert described(target.port, [("user", 0, u)], expected) == expected
    # the last key removed: the entity is gone
    alter(target.port, [([("user", u)], [("consumer_byte_rate", 0.0, True)])])
    assert described(target.port, [("user", 0, u)], []) == []


def test_describe_filters(target):
    p = unique("f")
    port = target.port
    alter(port, [([("user", p)], [("producer_byte_rate", 100.0, False)]),
                 ([("user", p), ("client-id", p)], [("consumer_byte_rate", 200.0, False)]),
                 ([("user", p), ("client-id", None)], [("request_percentage", 30.0, False)]),
                 ([("client-id", p)], [("controller_mutation_rate", 4.5, False)])])
    mine = lambda entries: [e for e in entries if any(n == p for _t, n in e[0])]  # noqa: E731
    user_only = ((("user", p),), (("producer_byte_rate", 100.0),))
    user_client = ((("client-id", p), ("user", p)), (("consumer_byte_rate", 200.0),))
    user_default_client = ((("client-id", ""), ("user", p)), (("request_percentage", 30.0),))
    client_only = ((("client-id", p),), (("controller_mutation_rate", 4.5),))
    expected = sorted([user_only, user_client, user_default_client, client_only])
    assert described(port, [], expected, mine=mine) == expected
    assert describe(port, [("user", 0, p)])[2] == sorted(
        [user_only, user_client, user_default_client])
    assert describe(port, [("user", 0, p)], strict=True)[2] == [user_only]
    assert describe(port, [("user", 0, p), ("client-id", 1, None)])[2] == [user_default_client]
    assert describe(port, [("user", 0, p), ("client-id", 2, None)])[2] == sorted(
        [user_client, user_default_client])
    assert mine(describe(port, [("client-id", 0, p)])[2]) == sorted([user_client, client_only])
    assert mine(describe(port, [("client-id", 0, p)], strict=True)[2]) == [client_only]
    assert mine(describe(port, [], strict=True)[2]) == []
    assert mine(describe(port, [("ip", 2, None)])[2]) == []


@pytest.mark.parametrize("components, code, message", [
    ([("ip", 1, None), ("user", 2, None)], E.INVALID_REQUEST,
     "Invalid entity filter component combination. IP filter component should not be used "
     "with user or clientId filter component."),
    ([("user", 0, None)], E.INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", 1, "x")], E.INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", 2, "x")], E.INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("bad", 2, None)], E.UNSUPPORTED_VERSION, "Unsupported entity type bad"),
    ([("", 2, None)], E.INVALID_REQUEST, "Invalid empty entity type."),
    ([("user", 5, None)], E.INVALID_REQUEST, "Unknown match type 5"),
    ([("user", 2, None), ("user", 1, None)], E.INVALID_REQUEST,
     "Entity type user cannot appear more than once in the filter."),
])
def test_describe_refuses_bad_filters(target, components, code, message):
    assert describe(target.port, components) == (code, message, None)


def batch(size: int) -> bytes:
    return build_batch([SimpleRecord(key=None, value=os.urandom(size),
                                     timestamp=int(time.time() * 1000))])


def produce(client: RawClient, topic: str, size: int = 40000):
    return client.call(P(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[
            P.PartitionProduceData(index=0, records=batch(size))])]), 9)


def expected_throttle(total_bytes: float, elapsed_ms: float) -> float:
    """Kafka's throttle for a rate first recorded ``elapsed_ms`` ago: the window is then
    (samples - 1) full windows plus what elapsed."""
    window = WINDOW_S * 1000 + elapsed_ms
    return (total_bytes / (window / 1000) - QUOTA) / QUOTA * window


def test_producer_byte_rate_throttles_and_mutes(target):
    client_id = unique("throttled-producer")
    setup = RawClient(target.port, client_id="setup")
    topic = create_topic(setup, unique("quota"), 1)
    assert alter(target.port, [([("client-id", client_id)],
                                [("producer_byte_rate", QUOTA, False)])]) == [
        ok(("client-id", client_id))]
    producer = RawClient(target.port, client_id=client_id)
    other = RawClient(target.port, client_id=unique("free-producer"))
    sizes = []
    throttles = []
    started = time.monotonic()
    for _ in range(3):
        answer = produce(producer, topic)
        assert answer.responses[0].partition_responses[0].error_code == E.NONE
        throttles.append(answer.throttle_time_ms)
    sent = time.monotonic()
    # a producer with another client id has no quota
    assert [produce(other, topic).throttle_time_ms for _ in range(4)] == [0, 0, 0, 0]
    assert throttles[:2] == [0, 0]
    # each request is about 40 kB plus headers: 3 of them over 10 s pass 10000 B/s by ~20%
    low = expected_throttle(3 * 40000, (sent - started) * 1000) * 0.95
    high = expected_throttle(3 * 40200, 0) * 1.05
    assert low <= throttles[2] <= high, throttles
    # the answer came at once; the connection then reads nothing for the throttle time
    t = time.monotonic()
    producer.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    waited_ms = (time.monotonic() - t) * 1000
    assert waited_ms >= throttles[2] - 50 - (t - sent) * 1000, (waited_ms, throttles)
    # another connection of the same client is not muted
    t = time.monotonic()
    RawClient.once(target.port, ApiVersionsRequest(client_software_name="t",
                                                   client_software_version="1"), 3)
    assert time.monotonic() - t < 1.0
    for c in (setup, producer, other):
        c.close()


def fetch(client: RawClient, topic: str, offset: int, version: int):
    answer = client.call(F(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=10 ** 7, isolation_level=0,
        session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
        topics=[F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=10 ** 7,
            current_leader_epoch=-1, log_start_offset=-1, last_fetched_epoch=-1)])]), version)
    sizes = [len(p.records or b"") for t in answer.responses for p in t.partitions]
    return answer, sizes


@pytest.mark.parametrize("version", [11, 12])
def test_consumer_byte_rate_answers_empty_and_throttles(target, version):
    client_id = unique("throttled-consumer")
    setup = RawClient(target.port, client_id="setup")
    topic = create_topic(setup, unique("quota"), 1)
    produce(setup, topic)
    produce(setup, topic)
    alter(target.port, [([("client-id", client_id)], [("consumer_byte_rate", QUOTA, False)])])
    consumer = RawClient(target.port, client_id=client_id)
    started = time.monotonic()
    answer, sizes = fetch(consumer, topic, 0, version)
    assert answer.throttle_time_ms == 0 and sizes == [80144]
    produce(setup, topic)
    # the third batch takes the rate (answers counted whole) over 10000 B/s: an empty
    # answer with the throttle time, and the bytes are not counted
    answer, sizes = fetch(consumer, topic, 2, version)
    elapsed_ms = (time.monotonic() - started) * 1000
    assert answer.responses == [] and answer.session_id == 0
    assert expected_throttle(80144 + 40072, elapsed_ms) * 0.95 <= answer.throttle_time_ms \
        <= expected_throttle(80144 + 40072 + 200, 0) * 1.05, answer.throttle_time_ms
    first = answer.throttle_time_ms
    t = time.monotonic()
    answer, sizes = fetch(consumer, topic, 2, version)
    # read only after the mute; still over the quota, so empty again
    assert (time.monotonic() - t) * 1000 >= first - 50
    # 120 kB over 10 s and the part of a window that passed: 1999 ms on both when measured,
    # less the longer the mute and this fetch took
    assert answer.responses == [] and 1000 <= answer.throttle_time_ms <= 2100
    setup.close()
    consumer.close()


def test_quota_apis_are_advertised_as_kafka_does(target):
    answer = RawClient.once(target.port, ApiVersionsRequest(
        client_software_name="conformance", client_software_version="1"), 3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert (ranges.get(48), ranges.get(49)) == ((0, 1), (0, 1))


def kafka_configs(port: int, *args: str) -> tuple[int, str, str]:
    """Kafka's own kafka-configs (kafka.admin.ConfigCommand, the Java admin client)."""
    import subprocess

    from .kafka_server import java_executable, resolve_kafka_jars
    libs = resolve_kafka_jars()
    classpath = os.pathsep.join(os.path.join(libs, n) for n in sorted(os.listdir(libs))
                                if n.endswith(".jar"))
    result = subprocess.run(
        [java_executable(), "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath,
         "kafka.admin.ConfigCommand", "--bootstrap-server", f"127.0.0.1:{port}", *args],
        capture_output=True, text=True, timeout=120)
    cause = [line for line in result.stderr.splitlines() if line.startswith("Caused by")]
    return result.returncode, result.stdout, cause[-1] if cause else ""


def test_kafka_configs_alters_and_describes_quotas(target):
    name = unique("cc")
    port = target.port
    assert kafka_configs(port, "--alter", "--add-config",
                         "producer_byte_rate=1024,consumer_byte_rate=2048",
                         "--entity-type", "clients", "--entity-name", name) == (
        0, f"Completed updating config for client {name}.\n", "")
    assert kafka_configs(port, "--alter", "--add-config", "request_percentage=50.5",
                         "--entity-type", "users", "--entity-name", name,
                         "--entity-type", "clients", "--entity-default") == (
        0, f"Completed updating config for user {name}.\n", "")
    assert kafka_configs(port, "--alter", "--add-config", "producer_byte_rate=10.5",
                         "--entity-type", "clients", "--entity-name", name) == (
        1, "", "Caused by: org.apache.kafka.common.errors.InvalidRequestException: "
               "producer_byte_rate cannot be a fractional value.")
    expected = (0, f"Quota configs for client-id '{name}' are consumer_byte_rate=2048.0, "
                   "producer_byte_rate=1024.0\n", "")
    described(port, [("client-id", 0, name)], [((("client-id", name),), (
        ("consumer_byte_rate", 2048.0), ("producer_byte_rate", 1024.0)))], strict=True)
    assert kafka_configs(port, "--describe", "--entity-type", "clients",
                         "--entity-name", name) == expected
    assert kafka_configs(port, "--describe", "--entity-type", "users", "--entity-name", name,
                         "--entity-type", "clients") == (
        0, f"Quota configs for user-principal '{name}', the default client-id are "
           "request_percentage=50.5\n", "")


def test_controller_mutation_rate_refuses_then_throttles(target):
    """Kafka 4.3.1 gave: 10 and 5 partitions pass (the bucket holds 11 x 1 s x 1/s), the next
    topic THROTTLING_QUOTA_EXCEEDED with throttle 3928 ms and no message, and after the mute a
    CreateTopics v5 (permissive) passes, throttled 972 ms."""
    from protocol.messages import CreateTopicsRequest as C
    client_id = unique("mutations")
    alter(target.port, [([("client-id", client_id)],
                         [("controller_mutation_rate", 1.0, False)])])
    if target.is_kafka:
        time.sleep(1)  # Kafka's brokers apply the quota from the metadata log
    client = RawClient(target.port, client_id=client_id)
    prefix = unique("mut")

    def create(name: str, partitions: int, version: int = 7):
        answer = client.call(C(topics=[C.CreatableTopic(
            name=f"{prefix}-{name}", num_partitions=partitions, replication_factor=1,
            assignments=[], configs=[])], timeout_ms=30000, validate_only=False), version)
        return answer.throttle_time_ms, [(t.error_code, t.error_message) for t in answer.topics]

    started = time.monotonic()
    assert create("a", 10) == (0, [(E.NONE, None)])
    assert create("b", 5) == (0, [(E.NONE, None)])
    throttle, results = create("c", 1)
    # 4 tokens short, less what came back since the first topic
    refilled_ms = (time.monotonic() - started) * 1000
    assert results == [(E.THROTTLING_QUOTA_EXCEEDED, None)]
    assert 4000 - refilled_ms - 50 <= throttle <= 4000
    t = time.monotonic()
    throttle, results = create("d", 1, version=5)
    assert (time.monotonic() - t) * 1000 >= 3400  # muted first
    assert results == [(E.NONE, None)] and 500 <= throttle <= 1050
    client.close()


def client_from(address: str, port: int) -> RawClient:
    """A RawClient whose connection comes from ``address`` (any 127.x.x.x reaches the
    loopback): an address of its own, whose connection rate nothing else in the session adds
    to (Kafka resolves the "localhost" entity of other tests to 127.0.0.1)."""
    import socket
    client = RawClient.__new__(RawClient)
    client.sock = socket.create_connection(("127.0.0.1", port), timeout=10,
                                           source_address=(address, 0))
    client.client_id = "conformance"
    client.correlation_id = 0
    return client


def test_connection_creation_rate_closes_the_connection_over_it_unread(target):
    """Kafka 4.3.1 at 2/s for one address: 20 connections at once are served, the 21st is never
    read and is reset after 504 ms (the throttle, at most one quota window; Kafka's acceptor
    closes throttled sockets between its 500 ms polls)."""
    from protocol.messages import ApiVersionsRequest as V
    address = "127.0.0.2"
    ip = [([("ip", address)], [("connection_creation_rate", 2.0, False)])]
    assert alter(target.port, ip) == [ok(("ip", address))]
    clients = []
    try:
        time.sleep(1.5)  # Kafka's brokers apply the quota from the metadata log
        for _ in range(20):
            client = client_from(address, target.port)
            clients.append(client)
            client.call(V(client_software_name="t", client_software_version="1"), 3)
        client = client_from(address, target.port)
        clients.append(client)
        t = time.monotonic()
        with pytest.raises(ConnectionError):
            client.call(V(client_software_name="t", client_software_version="1"), 3)
        assert 0.3 <= time.monotonic() - t <= 1.3
    finally:
        for client in clients:
            client.close()
        alter(target.port, [([("ip", address)], [("connection_creation_rate", 0.0, True)])])
    time.sleep(1.0 if target.is_kafka else 0)
    other = client_from(address, target.port)
    other.call(V(client_software_name="t", client_software_version="1"), 3)
    other.close()


def test_request_percentage_throttles_at_most_one_window(target):
    """Kafka 4.3.1 with request_percentage=0.0001: the first Fetch already passes it, is
    answered empty with throttle_time_ms 1000 (Kafka's request quota throttles at most one
    quota window), and the connection reads nothing for that long."""
    client_id = unique("request-quota")
    setup = RawClient(target.port, client_id="setup")
    topic = create_topic(setup, unique("quota"), 1)
    produce(setup, topic, 100)
    alter(target.port, [([("client-id", client_id)], [("request_percentage", 0.0001, False)])])
    if target.is_kafka:
        time.sleep(1)  # Kafka's brokers apply the quota from the metadata log
    consumer = RawClient(target.port, client_id=client_id)
    answer, _sizes = fetch(consumer, topic, 0, 11)
    assert (answer.throttle_time_ms, answer.responses) == (1000, [])
    t = time.monotonic()
    answer = produce(consumer, topic, 100)
    assert time.monotonic() - t >= 0.9  # muted first
    # a throttled Produce still appends its records
    assert answer.responses[0].partition_responses[0].error_code == E.NONE
    assert answer.throttle_time_ms == 1000
    setup.close()
    consumer.close()
