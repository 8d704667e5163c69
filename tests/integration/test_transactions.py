"""Kafka transactions with real clients: transactional producers, read_committed consumers,
consume-transform-produce, fencing, Kafka Streams exactly_once_v2, PySpark, and a kill -9 of the
broker in the middle of transactions.

Every scenario is a function of a bootstrap address, so the same scenario runs against kbroker
(the committed suite) and against Apache Kafka 4.3.1, on which each was validated. Run the module
with ``KBROKER_TXN_TESTS_ON=kafka`` to run all of them against Kafka instead (the durability
scenario then kills and restarts a Kafka on its data). In every run,
``test_java_commit_abort_agrees_with_kafka`` runs the Java commit/abort scenario on both brokers
and compares what the clients saw.

The Java scenarios are in tests/java/src/main/java/kbroker/TransactionScenarios.java (kafka-clients
and kafka-streams 4.3.1, which use transaction version 2 against a broker that offers it).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import time
import types

import pytest

from tests.conformance.kafka_server import KafkaServer, wait_for_group_coordinator
from tests.integration.test_consumer_groups import create_topic
from tests.integration.test_java_client import jar, java_command, tail  # noqa: F401 (jar: fixture)
from tests.integration.test_pyspark import read_kafka, spark  # noqa: F401 (spark: fixture)
from tests.support import BrokerProcess, api_versions_ok, unique

ON_KAFKA = os.environ.get("KBROKER_TXN_TESTS_ON") == "kafka"

PARTITIONS = 2
PER_TXN = 5         # records per partition in each transaction of the commit/abort scenarios
# (tag, how it ends, the group offset it commits on every partition)
PLAN = [("c1", "commit", 5), ("a2", "abort", 10), ("c3", "commit", 15)]
WAIT = 20.0         # seconds any one client call may block
# The broker setting that makes a timed-out transaction abort soon after its timeout (Kafka's
# default checks every 10 s).
ABORT_CHECK = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}


@pytest.fixture(scope="module")
def kafka():
    """Apache Kafka 4.3.1, started once for the module."""
    server = KafkaServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def broker(request):
    """kbroker, or the reference Kafka with KBROKER_TXN_TESTS_ON=kafka."""
    if ON_KAFKA:
        yield request.getfixturevalue("kafka")
        return
    proc = BrokerProcess()
    proc.start()
    yield proc
    proc.stop()


@contextlib.contextmanager
def broker_log_on_failure(server):
    """A failing scenario's message, followed by the end of the broker's log."""
    try:
        yield
    except Exception as e:
        raise AssertionError(f"{type(e).__name__}: {e}\n--- broker log\n"
                             f"{tail(server.logs(), 6000)}") from e


def poll_until(fetch, want: int, timeout: float = 30.0, grace: float = 1.0) -> list:
    """fetch() until `want` items arrived (or `timeout`), then for `grace` seconds more, so
    that anything beyond what was wanted shows up too."""
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got.extend(fetch())
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        got.extend(fetch())
    return got


def group_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    """The group's committed offset of each partition of `topic` as a read_committed member
    reads it (confluent-kafka: OffsetFetch with require_stable, answered UNSTABLE_OFFSET_COMMIT
    and retried while offsets of a transaction await its marker; an end of transaction
    returns before its markers are written)."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                   timeout=WAIT)
    finally:
        consumer.close()
    return {tp.partition: tp.offset if tp.offset >= 0 else None for tp in found}


# ---------------------------------------------------------------- what commit/abort must show

def value(tag: str, p: int, i: int) -> str:
    return f"{tag}-{p}-{i}"


def expected_commit_abort(isolation: str) -> list[tuple[int, int, str]]:
    """(partition, offset, value) read from the beginning after the PLAN: each transaction takes
    PER_TXN offsets of each partition and one more for its marker."""
    out = []
    for n, (tag, how, _) in enumerate(PLAN):
        if how == "commit" or isolation == "read_uncommitted":
            out += [(p, n * (PER_TXN + 1) + i, value(tag, p, i))
                    for p in range(PARTITIONS) for i in range(PER_TXN)]
    return sorted(out)


COMMITTED_AFTER = [{0: 5, 1: 5}, {0: 5, 1: 5}, {0: 15, 1: 15}]  # the group's offsets after each


def assert_commit_abort(outcome: dict) -> None:
    """What a client of the PLAN must see: read_committed only the committed transactions,
    read_uncommitted every record, the group's offsets moved by the committed ones only."""
    assert outcome["committed_after"] == COMMITTED_AFTER, outcome["committed_after"]
    for isolation in ("read_committed", "read_uncommitted"):
        assert sorted(outcome[isolation]) == expected_commit_abort(isolation), \
            f"{isolation}: {sorted(outcome[isolation])}"


# ---------------------------------------------------------------- Java scenarios

class JavaRun:
    """One `java -jar client-scenarios.jar SCENARIO ...` run: its JSON lines and exit code."""

    def __init__(self, jar_path: str, *args: str, timeout: float = 150) -> None:
        started = time.monotonic()
        proc = subprocess.run(java_command(jar_path, *args), capture_output=True, text=True,
                              timeout=timeout)
        self.seconds = time.monotonic() - started
        self.code = proc.returncode
        self.stdout, self.stderr = proc.stdout, proc.stderr
        self.lines = []
        for raw in proc.stdout.splitlines():
            with contextlib.suppress(ValueError):
                self.lines.append(json.loads(raw))

    def context(self) -> str:
        return (f"exit {self.code} after {self.seconds:.1f}s\n--- stdout\n{tail(self.stdout)}\n"
                f"--- stderr\n{tail(self.stderr)}")

    def check(self, code: int = 0) -> "JavaRun":
        assert self.code == code, self.context()
        if code == 0:
            assert self.lines and self.lines[-1] == {"done": True}, self.context()
        return self

    def line(self, key: str, **match) -> dict:
        for line in self.lines:
            if key in line and all(line.get(k) == v for k, v in match.items()):
                return line
        raise AssertionError(f"no line with {key!r} {match}\n{self.context()}")


def records(rows) -> list[tuple[int, int, str]]:
    return sorted((p, o, v) for p, o, v in rows)


def partition_offsets(by_partition: dict) -> dict[int, int | None]:
    return {int(p): o for p, o in by_partition.items()}


def java_commit_abort(jar_path: str, bootstrap: str, names: tuple[str, str, str]) -> dict:
    """txn-commit-abort (TransactionScenarios.commitAbort): the PLAN with the Java producer, the
    group's offsets sent with sendOffsetsToTransaction; each transaction described while open
    and after it ended. Returns what was observed, the timings apart."""
    topic, txn_id, group = names
    run = JavaRun(jar_path, "txn-commit-abort", bootstrap, topic, txn_id, group).check()
    steps = {}
    timings = {"init_ms": run.line("step", step="init")["ms"]}
    for tag, how, _ in PLAN:
        opened = dict(run.line("phase", step=tag, phase="open"))
        ended = dict(run.line("phase", step=tag, phase=how))
        timings[tag] = {k: ended.pop(k) for k in ("end_ms", "settled_ms", "first_visible_ms",
                                                   "all_visible_ms") if k in ended}
        steps[tag] = {"open": opened, "end": ended}
    return {
        "steps": steps,
        "timings": timings,
        "committed_after": [{int(p): c and c["offset"] for p, c in steps[tag]["end"]
                             ["committed"].items()} for tag, _, _ in PLAN],
        "watcher": records(run.line("watcher")["watcher"]),
        "read_committed": records(run.line("read_committed")["read_committed"]),
        "read_uncommitted": records(run.line("read_uncommitted")["read_uncommitted"]),
        "context": run.context(),
    }


def assert_java_commit_abort(outcome: dict, topic: str) -> None:
    """Kafka 4.3.1's answers to the Java commit/abort scenario (transaction version 2)."""
    context = outcome["context"]
    assert_commit_abort(outcome)
    # the read_committed consumer polling throughout saw exactly the committed records
    assert outcome["watcher"] == expected_commit_abort("read_committed"), context
    for n, (tag, how, offset) in enumerate(PLAN):
        opened, ended = outcome["steps"][tag]["open"], outcome["steps"][tag]["end"]
        first = n * (PER_TXN + 1)
        assert sorted(map(tuple, opened["acked"])) == [
            (p, first + i) for p in range(PARTITIONS) for i in range(PER_TXN)], context
        # open: the records are in the log up to the high watermark, the last stable offset
        # stays at the transaction's first offset, and read_committed sees nothing of it
        assert opened["seen_while_open"] == 0, context
        assert opened["lso"] == {"0": first, "1": first}, context
        assert opened["hw"] == {"0": first + PER_TXN, "1": first + PER_TXN}, context
        assert opened["listed"] == "Ongoing", context
        described = opened["describe"]
        assert described["state"] == "Ongoing", context
        # transaction version 2 bumps the epoch at every end: 0, 1, 2 while open
        assert described["epoch"] == n, context
        assert described["timeout_ms"] == 60000, context
        data = [f"{topic}-{p}" for p in range(PARTITIONS)]
        offsets_partition = [t for t in described["partitions"] if t not in data]
        assert sorted(set(described["partitions"]) & set(data)) == data, context
        assert len(offsets_partition) == 1 and offsets_partition[0].startswith(
            "__consumer_offsets-"), context
        # ended: the marker took one offset, nothing is unstable any more
        assert ended["lso"] == ended["hw"] == {"0": first + PER_TXN + 1,
                                               "1": first + PER_TXN + 1}, context
        assert ended["describe"]["state"] == ("CompleteCommit" if how == "commit"
                                              else "CompleteAbort"), context
        assert ended["describe"]["epoch"] == n + 1, context
        assert ended["describe"]["partitions"] == [], context
        # the metadata sent with the offsets is the committed transaction's
        assert {c["metadata"] for c in ended["committed"].values()} == {
            "c3" if n == 2 else "c1"}, context


def comparable(outcome: dict, topic: str) -> dict:
    """The Java commit/abort outcome without its timings and output, the topic's name
    replaced (in the partitions a transaction describes)."""
    kept = {k: v for k, v in outcome.items() if k not in ("timings", "context")}
    return json.loads(json.dumps(kept).replace(topic, "TOPIC"))


def test_java_commit_abort(broker, jar):
    """The Java producer's committed transactions are seen by read_committed consumers (one
    polling throughout, one reading afterwards) and its aborted one never is; read_uncommitted
    sees all three; the group's offsets move only with the committed ones."""
    names = (unique("txn-java"), unique("txn-java-id"), unique("txn-java-group"))
    with broker_log_on_failure(broker):
        outcome = java_commit_abort(jar, broker.bootstrap, names)
        assert_java_commit_abort(outcome, names[0])
    print("Java commit/abort timings (ms):", outcome["timings"])


def consume_transform_produce_steps(lines: list[dict]) -> list[dict]:
    """The per-transaction lines of a consume-transform-produce run, offsets keyed by int."""
    return [{"action": line["action"], "read": [tuple(r) for r in line["read"]],
             "next": partition_offsets(line["next"]),
             "committed": partition_offsets(line["committed"])}
            for line in lines if "txn" in line]


def assert_consume_transform_produce(steps: list[dict], read_committed, read_uncommitted,
                                     records_in: int) -> None:
    """Input record i (on partition i % 2) becomes "out-in-i" on the same output partition
    exactly once in read_committed; aborted transactions left their copies in the log (seen by
    read_uncommitted) but did not move the group's offsets; committed ones moved them to
    exactly what they sent."""
    want = {p: [f"out-in-{i}" for i in range(p, records_in, PARTITIONS)]
            for p in range(PARTITIONS)}
    got = {p: [v for q, _, v in sorted(read_committed) if q == p] for p in range(PARTITIONS)}
    assert got == want, f"read_committed output: {got}"
    aborted = [s for s in steps if s["action"] == "abort"]
    assert aborted and all(s["read"] for s in aborted), steps
    assert len(read_uncommitted) == len(read_committed) + sum(len(s["read"]) for s in aborted)
    committed = {p: None for p in range(PARTITIONS)}
    for step in steps:
        if step["action"] == "commit":
            committed = {**committed, **step["next"]}
        assert step["committed"] == committed, f"after {step}: {step['committed']}"
    assert committed == {p: records_in // PARTITIONS for p in range(PARTITIONS)}


def test_java_consume_transform_produce(broker, jar):
    """A Java consumer (group member, read_committed) and transactional producer copy an input
    topic to an output topic with sendOffsetsToTransaction; every third transaction aborts and
    is redone. The output read with read_committed holds each input record exactly once."""
    records_in = 40
    with broker_log_on_failure(broker):
        run = JavaRun(jar, "txn-consume-transform-produce", broker.bootstrap, unique("txn-in"),
                      unique("txn-out"), unique("txn-ctp"), unique("txn-ctp-id"),
                      str(records_in)).check()
        steps = consume_transform_produce_steps(run.lines)
        try:
            assert_consume_transform_produce(
                steps, run.line("read_committed")["read_committed"],
                run.line("read_uncommitted")["read_uncommitted"], records_in)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{run.context()}") from e
    print(f"Java consume-transform-produce: {len(steps)} transactions in {run.seconds:.1f}s")


def test_java_fencing(broker, jar):
    """Three Java producers with one transactional id, each initialized while the one before
    has a transaction open: the newer fences the older and aborts its transaction. Kafka 4.3.1
    answers the fenced producer's next send with INVALID_PRODUCER_EPOCH
    (InvalidProducerEpochException, which its commit then rethrows) and an EndTxn with the old
    epoch with PRODUCER_FENCED (ProducerFencedException). Only the last transaction is read
    with read_committed."""
    topic = unique("txn-fence")
    with broker_log_on_failure(broker):
        run = JavaRun(jar, "txn-fence", broker.bootstrap, topic, unique("txn-fence-id")).check()
        context = run.context()
        a_open = run.line("step", step="a-open")["describe"]
        assert (a_open["state"], a_open["epoch"], a_open["partitions"]) == (
            "Ongoing", 0, [f"{topic}-0"]), context
        # B's InitProducerId aborted A's transaction (its marker at offset 3, epoch 1) and
        # returned epoch 2
        b_init = run.line("step", step="b-init")
        assert (b_init["describe"]["state"], b_init["describe"]["epoch"]) == ("Empty", 2), context
        assert b_init["lso"] == b_init["hw"] == {"0": 4}, context
        a_fenced = run.line("step", step="a-fenced")
        assert a_fenced["send"]["error"] == "InvalidProducerEpochException", context
        assert a_fenced["commit"]["error"] == "InvalidProducerEpochException", context
        c_init = run.line("step", step="c-init")["describe"]
        assert (c_init["state"], c_init["epoch"]) == ("Empty", 4), context
        assert run.line("step", step="b-fenced")["commit"]["error"] == \
            "ProducerFencedException", context
        c_commit = run.line("step", step="c-commit")
        assert (c_commit["describe"]["state"], c_commit["describe"]["epoch"]) == (
            "CompleteCommit", 5), context
        assert c_commit["lso"] == c_commit["hw"] == {"0": 12}, context
        assert records(run.line("read_committed")["read_committed"]) == [
            (0, 8, "c-0"), (0, 9, "c-1"), (0, 10, "c-2")], context
        assert records(run.line("read_uncommitted")["read_uncommitted"]) == [
            (0, o, f"{t}-{i}") for t, first in (("a", 0), ("b", 4), ("c", 8))
            for i, o in enumerate(range(first, first + 3))], context
    print(f"Java fencing: B's initTransactions {b_init['ms']} ms, C's "
          f"{run.line('step', step='c-init')['ms']} ms")


def test_streams_word_count_exactly_once_v2(broker, jar, tmp_path):
    """Kafka Streams (exactly_once_v2, no cache: one count per word occurrence) counts 40 lines;
    its JVM halts in the middle of a transaction after part of the second half was counted and
    sent; a second run on the same state directory (same transactional id, static member)
    finishes. Read with read_committed, each word's counts are exactly 1, 2, ..., n; the halted
    transaction's counts are in the log (read_uncommitted shows them) but never committed."""
    names = (unique("wc-in"), unique("wc-out"), unique("wc-app"))
    state_dir = str(tmp_path / "streams-state")
    lines, halt_after = 40, 150     # 100 counts in the first half, 200 in all
    with broker_log_on_failure(broker):
        first = JavaRun(jar, "streams-wordcount", broker.bootstrap, *names, state_dir,
                        str(lines), str(halt_after)).check(code=3)
        expected = first.line("expected")["expected"]
        assert first.line("halting")["halting"] == halt_after, first.context()
        second = JavaRun(jar, "streams-wordcount", broker.bootstrap, *names, state_dir,
                         str(lines), "0").check()
        context = first.context() + "\n" + second.context()
        assert second.line("counted")["counted"] == expected, context
        committed = second.line("read_committed")["read_committed"]
        assert committed == {w: list(range(1, n + 1)) for w, n in expected.items()}, context
        uncommitted = second.line("read_uncommitted")["read_uncommitted"]
        assert sum(map(len, uncommitted.values())) > sum(map(len, committed.values())), context
    print(f"Streams word count: first run {first.seconds:.1f}s (halted), second run "
          f"{second.seconds:.1f}s, {second.line('counted')['ms']} ms from start to all counts")


# ---------------------------------------------------------------- confluent-kafka

def confluent_read(bootstrap: str, topic: str, isolation: str, want: int) -> list:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("txn-reader"),
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])

    def fetch():
        out = []
        for m in consumer.consume(100, 0.2):
            if m.error():
                raise AssertionError(f"consume: {m.error()}")
            out.append((m.partition(), m.offset(), m.value().decode()))
        return out

    try:
        return poll_until(fetch, want)
    finally:
        consumer.close()


def confluent_produce(producer, topic: str, tag: str) -> None:
    """PER_TXN records on each partition, all acknowledged: in the log even if the transaction
    aborts (abort_transaction purges what librdkafka has not sent yet)."""
    for i in range(PER_TXN):
        for p in range(PARTITIONS):
            producer.produce(topic, value=value(tag, p, i).encode(), partition=p)
    assert producer.flush(WAIT) == 0


def confluent_commit_abort(bootstrap: str) -> dict:
    """The PLAN with confluent-kafka's transactional producer; the group's offsets sent with
    send_offsets_to_transaction under the group metadata of a consumer of that group."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic, group = unique("txn-ck"), unique("txn-ck-group")
    create_topic(bootstrap, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn-ck-id"),
                         "linger.ms": 5})
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committed_after = []
    try:
        producer.init_transactions(WAIT)
        for tag, how, offset in PLAN:
            producer.begin_transaction()
            confluent_produce(producer, topic, tag)
            producer.send_offsets_to_transaction(
                [TopicPartition(topic, p, offset) for p in range(PARTITIONS)],
                member.consumer_group_metadata(), WAIT)
            if how == "commit":
                producer.commit_transaction(WAIT)
            else:
                producer.abort_transaction(WAIT)
            committed_after.append(group_offsets(bootstrap, group, topic))
    finally:
        member.close()
    return {"committed_after": committed_after,
            "read_committed": confluent_read(bootstrap, topic, "read_committed",
                                             2 * PER_TXN * PARTITIONS),
            "read_uncommitted": confluent_read(bootstrap, topic, "read_uncommitted",
                                               3 * PER_TXN * PARTITIONS)}


def test_confluent_commit_abort(broker):
    with broker_log_on_failure(broker):
        assert_commit_abort(confluent_commit_abort(broker.bootstrap))


def confluent_consume_transform_produce(bootstrap: str, records_in: int) -> dict:
    """librdkafka's exactly-once loop: a group member (read_committed) polls at most 7 records,
    a transactional producer copies them as "out-VALUE" and sends the member's offsets with
    its group metadata (generation and member id); every third transaction aborts and the
    member seeks back to the committed offsets."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    source, sink, group = unique("txn-ck-in"), unique("txn-ck-out"), unique("txn-ck-ctp")
    create_topic(bootstrap, source, PARTITIONS)
    create_topic(bootstrap, sink, PARTITIONS)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(records_in):
        plain.produce(source, value=f"in-{i}".encode(), partition=i % PARTITIONS)
    assert plain.flush(WAIT) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn-ck-ctp"),
                         "linger.ms": 5})
    inputs = [TopicPartition(source, p) for p in range(PARTITIONS)]
    steps = []
    try:
        producer.init_transactions(WAIT)
        consumer.subscribe([source])
        deadline = time.monotonic() + 60
        total = 0
        while total < records_in and time.monotonic() < deadline:
            polled = consumer.consume(7, 0.2)
            if not polled:
                continue
            for m in polled:
                if m.error():
                    raise AssertionError(f"consume: {m.error()}")
            abort = len(steps) % 3 == 1
            producer.begin_transaction()
            following = {}
            for m in polled:
                producer.produce(sink, value=b"out-" + m.value(), partition=m.partition())
                following[m.partition()] = m.offset() + 1
            producer.send_offsets_to_transaction(
                [TopicPartition(source, p, o) for p, o in following.items()],
                consumer.consumer_group_metadata(), WAIT)
            assert producer.flush(WAIT) == 0     # the copies are in the log, even if aborted
            if abort:
                producer.abort_transaction(WAIT)
            else:
                producer.commit_transaction(WAIT)
            committed = {tp.partition: (tp.offset if tp.offset >= 0 else None)
                         for tp in consumer.committed(inputs, timeout=WAIT)}
            if abort:
                for p in following:
                    consumer.seek(TopicPartition(source, p, committed[p] if committed[p]
                                                 is not None else OFFSET_BEGINNING))
            steps.append({"action": "abort" if abort else "commit",
                          "read": [(m.partition(), m.offset()) for m in polled],
                          "next": following, "committed": committed})
            total = sum(o or 0 for o in committed.values())
    finally:
        consumer.close()
    return {"steps": steps,
            "read_committed": confluent_read(bootstrap, sink, "read_committed", records_in),
            "read_uncommitted": confluent_read(
                bootstrap, sink, "read_uncommitted",
                records_in + sum(len(s["read"]) for s in steps if s["action"] == "abort"))}


def test_confluent_consume_transform_produce(broker):
    records_in = 40
    with broker_log_on_failure(broker):
        outcome = confluent_consume_transform_produce(broker.bootstrap, records_in)
        assert_consume_transform_produce(outcome["steps"], outcome["read_committed"],
                                         outcome["read_uncommitted"], records_in)


# ---------------------------------------------------------------- aiokafka

def aiokafka_commit_abort(bootstrap: str) -> dict:
    """The PLAN with aiokafka: committed transactions in `async with producer.transaction()`,
    the aborted one with begin_transaction/abort_transaction, offsets with
    send_offsets_to_transaction; read back with aiokafka consumers of both isolation levels."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic, group = unique("txn-aio"), unique("txn-aio-group")
    create_topic(bootstrap, topic, PARTITIONS)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]

    async def write(producer, tag: str, offset: int) -> None:
        sent = [await producer.send(topic, value=value(tag, p, i).encode(), partition=p)
                for i in range(PER_TXN) for p in range(PARTITIONS)]
        await asyncio.gather(*sent)
        await producer.send_offsets_to_transaction({tp: offset for tp in tps}, group)

    async def read(isolation: str, want: int) -> list:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            got: list = []
            for until in (time.monotonic() + 30, None):
                deadline = until or time.monotonic() + 1.0   # then one more second
                while (until is None or len(got) < want) and time.monotonic() < deadline:
                    batch = await consumer.getmany(timeout_ms=200)
                    got.extend((m.partition, m.offset, m.value.decode())
                               for msgs in batch.values() for m in msgs)
            return got
        finally:
            await consumer.stop()

    async def scenario() -> dict:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap,
                                    transactional_id=unique("txn-aio-id"), linger_ms=5)
        await asyncio.wait_for(producer.start(), WAIT)
        committed_after = []
        try:
            for tag, how, offset in PLAN:
                if how == "commit":
                    async with producer.transaction():
                        await asyncio.wait_for(write(producer, tag, offset), WAIT)
                else:
                    await asyncio.wait_for(producer.begin_transaction(), WAIT)
                    await asyncio.wait_for(write(producer, tag, offset), WAIT)
                    await asyncio.wait_for(producer.abort_transaction(), WAIT)
                committed_after.append(
                    await asyncio.to_thread(group_offsets, bootstrap, group, topic))
        finally:
            await producer.stop()
        return {"committed_after": committed_after,
                "read_committed": await read("read_committed", 2 * PER_TXN * PARTITIONS),
                "read_uncommitted": await read("read_uncommitted", 3 * PER_TXN * PARTITIONS)}

    return asyncio.run(scenario())


def test_aiokafka_commit_abort(broker):
    with broker_log_on_failure(broker):
        assert_commit_abort(aiokafka_commit_abort(broker.bootstrap))


# ---------------------------------------------------------------- kafka-python

def kafka_python_commit_abort(bootstrap: str) -> dict:
    """The PLAN with kafka-python's transactional producer (init_transactions, begin, commit,
    abort, send_offsets_to_transaction with the group id) and its consumers with
    isolation_level read_committed and read_uncommitted."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    topic, group = unique("txn-kp"), unique("txn-kp-group")
    create_topic(bootstrap, topic, PARTITIONS)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("txn-kp-id"),
                             linger_ms=5, max_block_ms=int(WAIT * 1000))
    committed_after = []
    try:
        producer.init_transactions()
        for tag, how, offset in PLAN:
            producer.begin_transaction()
            for i in range(PER_TXN):
                for p in range(PARTITIONS):
                    producer.send(topic, value=value(tag, p, i).encode(), partition=p)
            producer.send_offsets_to_transaction(
                {tp: OffsetAndMetadata(offset, "", -1) for tp in tps}, group)
            producer.flush()                     # in the log before the end
            if how == "commit":
                producer.commit_transaction()
            else:
                producer.abort_transaction()
            committed_after.append(group_offsets(bootstrap, group, topic))
    finally:
        producer.close(timeout=5)

    def read(isolation: str, want: int) -> list:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                 enable_auto_commit=False)
        consumer.assign(tps)
        consumer.seek_to_beginning()
        try:
            return poll_until(lambda: [(m.partition, m.offset, m.value.decode())
                                       for msgs in consumer.poll(200).values() for m in msgs],
                              want)
        finally:
            consumer.close()

    return {"committed_after": committed_after,
            "read_committed": read("read_committed", 2 * PER_TXN * PARTITIONS),
            "read_uncommitted": read("read_uncommitted", 3 * PER_TXN * PARTITIONS)}


def test_kafka_python_commit_abort(broker):
    with broker_log_on_failure(broker):
        assert_commit_abort(kafka_python_commit_abort(broker.bootstrap))


# ---------------------------------------------------------------- PySpark

def spark_read_committed(spark_session, bootstrap: str) -> None:
    """confluent-kafka writes the PLAN and then leaves a fourth transaction open; Spark's batch
    read with kafka.isolation.level=read_committed returns only the committed records (it stops
    at the last stable offset, before the open transaction), the default read_uncommitted
    returns every record, the open transaction's too."""
    from confluent_kafka import Producer
    topic = unique("txn-spark")
    create_topic(bootstrap, topic, PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn-spark"),
                         "linger.ms": 5})
    producer.init_transactions(WAIT)
    for tag, how, _ in PLAN + [("o4", "open", 0)]:
        producer.begin_transaction()
        confluent_produce(producer, topic, tag)
        if how == "commit":
            producer.commit_transaction(WAIT)
        elif how == "abort":
            producer.abort_transaction(WAIT)
    where = types.SimpleNamespace(bootstrap=bootstrap)
    try:
        rows = {isolation: sorted((r.partition, r.offset, bytes(r.value).decode()) for r in
                                  read_kafka(spark_session, where, topic,
                                             startingOffsets="earliest",
                                             **{"kafka.isolation.level": isolation}).collect())
                for isolation in ("read_committed", "read_uncommitted")}
    finally:
        producer.abort_transaction(WAIT)
    assert rows["read_committed"] == expected_commit_abort("read_committed")
    opened = [(p, 3 * (PER_TXN + 1) + i, value("o4", p, i))
              for p in range(PARTITIONS) for i in range(PER_TXN)]
    assert rows["read_uncommitted"] == sorted(expected_commit_abort("read_uncommitted") + opened)


def test_pyspark_read_committed(broker, spark):
    with broker_log_on_failure(broker):
        spark_read_committed(spark, broker.bootstrap)


# ---------------------------------------------------------------- kill -9 in the middle

OPEN_TIMEOUT_MS = 4000


def durability_scenario(bootstrap: str, crash_and_restart) -> dict:
    """Four confluent-kafka transactions on a 2-partition topic, in this order in the log: one
    committed, one left open (transaction.timeout.ms=4000), one aborted, one whose commit was
    acknowledged just before `crash_and_restart()` kills the broker with SIGKILL and starts it
    again on the same data. After the restart a read_committed consumer must see the two
    committed transactions, the acknowledged one only once the open one was aborted for its
    timeout (it precedes it in the log), and never a record of the open or the aborted one."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer
    from confluent_kafka import TopicPartition

    topic = unique("txn-durable")
    create_topic(bootstrap, topic, PARTITIONS)

    def producer(**extra) -> Producer:
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("txn-durable"),
                      "linger.ms": 5, **extra})
        p.init_transactions(WAIT)
        return p

    def write(p: Producer, tag: str) -> None:
        p.begin_transaction()
        confluent_produce(p, topic, tag)

    committed = producer()
    write(committed, "committed")
    committed.commit_transaction(WAIT)
    opened = producer(**{"transaction.timeout.ms": OPEN_TIMEOUT_MS})
    opened_at = time.monotonic()
    write(opened, "open")
    aborted = producer()
    write(aborted, "aborted")
    aborted.abort_transaction(WAIT)
    acked = producer()
    write(acked, "acked")
    acked.commit_transaction(WAIT)
    crash_and_restart()
    restarted_at = time.monotonic()

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("txn-reader"),
                       "isolation.level": "read_committed", "enable.auto.commit": False})
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    first_seen: dict[str, float] = {}

    def fetch() -> list:
        out = []
        for m in reader.consume(100, 0.2):
            if m.error():
                raise AssertionError(f"consume: {m.error()}")
            tag = m.value().decode().split("-")[0]
            first_seen.setdefault(tag, time.monotonic())
            out.append((m.partition(), m.offset(), m.value().decode()))
        return out

    want = {(p, v) for tag in ("committed", "acked") for p in range(PARTITIONS)
            for v in [value(tag, p, i) for i in range(PER_TXN)]}
    try:
        seen = poll_until(fetch, len(want), timeout=OPEN_TIMEOUT_MS / 1000 + 25)
        assert {(p, v) for p, _, v in seen} == want and len(seen) == len(want), sorted(seen)
        # the acknowledged commit became readable only once the open transaction before it was
        # aborted, and that only after its timeout
        assert first_seen["acked"] - opened_at >= OPEN_TIMEOUT_MS / 1000, first_seen

        # the timed-out producer's commit fails
        try:
            opened.commit_transaction(WAIT)
            late_commit = "committed"
        except KafkaException as e:
            late_commit = (e.args[0].name(), "fatal" if e.args[0].fatal() else "not fatal")
        # transactions go on after the restart
        write(committed, "after")
        committed.commit_transaction(WAIT)
        after = poll_until(fetch, 2 * PER_TXN)
        assert sorted(v for _, _, v in after) == sorted(
            value("after", p, i) for p in range(PARTITIONS) for i in range(PER_TXN)), after
    finally:
        reader.close()
    everything = confluent_read(bootstrap, topic, "read_uncommitted", 5 * PER_TXN * PARTITIONS)
    assert sorted({v.split("-")[0] for _, _, v in everything}) == [
        "aborted", "acked", "after", "committed", "open"]
    assert len(everything) == 5 * PER_TXN * PARTITIONS
    return {"late_commit": late_commit,
            "acked_visible_after_restart_s": round(first_seen["acked"] - restarted_at, 2),
            "acked_visible_after_open_s": round(first_seen["acked"] - opened_at, 2)}


class RestartableKafka(KafkaServer):
    """Kafka 4.3.1 that can be killed with SIGKILL and started again on its data: the
    durability scenario's reference run (KBROKER_TXN_TESTS_ON=kafka).

    It passes when Kafka's restart goes well, not always: the restarted controller fences the
    killed broker's registration only when that session expires, and when the restarted
    transaction coordinator sends the markers of the transactions it loaded while the
    partitions are leaderless in that window, Kafka drops them ("Couldn't find leader endpoint
    ... likely deleted already") and those transactions hang: their last stable offset never
    moves. A broker must not copy that."""

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def restart(self, timeout: float = 90.0) -> None:
        self.proc = subprocess.Popen(
            self._java("kafka.Kafka", os.path.join(self.workdir, "server.properties"),
                       heap=self.heap),
            cwd=self.workdir, stdout=self.log_file, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = time.monotonic() + timeout
        while not api_versions_ok(self.port):
            assert self.proc.poll() is None and time.monotonic() < deadline, self.logs()[-6000:]
            time.sleep(0.2)
        wait_for_group_coordinator(self.port, deadline)


def test_kill_9_in_the_middle_of_transactions(tmp_path):
    """kbroker with --data-dir killed with SIGKILL while one transaction is open and right after
    another's commit was acknowledged (durability_scenario)."""
    if ON_KAFKA:
        servers = [RestartableKafka(overrides=ABORT_CHECK)]
        servers[0].start()

        def restart() -> None:
            servers[0].kill()
            servers[0].restart()
    else:
        data_dir = str(tmp_path / "data")
        servers = [BrokerProcess(data_dir=data_dir, overrides=ABORT_CHECK)]
        servers[0].start()

        def restart() -> None:
            servers[-1].kill()
            servers.append(BrokerProcess(data_dir=data_dir, overrides=ABORT_CHECK,
                                         port=servers[0].port))
            servers[-1].start()
    try:
        with broker_log_on_failure(servers[-1]):
            outcome = durability_scenario(servers[0].bootstrap, restart)
            # Kafka 4.3.1: the coordinator bumped the epoch when it aborted the timed-out
            # transaction, so the producer's EndTxn carries an old one: librdkafka's fatal
            # "fenced" error
            assert outcome["late_commit"] == ("_FENCED", "fatal"), outcome
        print("kill -9:", outcome)
    finally:
        for s in servers:
            s.stop()


# ---------------------------------------------------------------- the same answers as Kafka

def test_java_commit_abort_agrees_with_kafka(broker, kafka, jar):
    """The Java commit/abort scenario, with the same names, on kbroker and on Kafka 4.3.1: the
    same records seen by every consumer at the same offsets, the same last stable offsets and
    high watermarks, the same transaction states and epochs, the same committed offsets.
    Prints each broker's time from commitTransaction() to the records' arrival at a
    read_committed consumer that polls throughout."""
    names = (unique("txn-cmp"), unique("txn-cmp-id"), unique("txn-cmp-group"))
    with broker_log_on_failure(kafka):
        on_kafka = java_commit_abort(jar, kafka.bootstrap, names)
        assert_java_commit_abort(on_kafka, names[0])
    # the same group (its __consumer_offsets partition is in the descriptions); a topic and a
    # transactional id of its own when `broker` is that same Kafka (KBROKER_TXN_TESTS_ON=kafka)
    again = names if broker is not kafka else (unique("txn-cmp"), unique("txn-cmp-id"),
                                               names[2])
    with broker_log_on_failure(broker):
        on_kbroker = java_commit_abort(jar, broker.bootstrap, again)
    for name, outcome in (("Kafka 4.3.1", on_kafka), ("kbroker", on_kbroker)):
        print(f"{name}: init {outcome['timings']['init_ms']} ms; commit -> visible (ms):",
              {tag: (t["end_ms"], t.get("first_visible_ms"), t.get("all_visible_ms"))
               for tag, t in outcome["timings"].items() if tag != "init_ms"})
    assert comparable(on_kbroker, again[0]) == comparable(on_kafka, names[0]), (
        f"kbroker:\n{on_kbroker['context']}\nKafka:\n{on_kafka['context']}")


def test_java_admin_aborts_a_hanging_transaction(broker, jar):
    """kafka-transactions.sh abort, as Admin.abortTransaction: a Java producer leaves a
    transaction of 3 records open; DescribeProducers finds it (open from offset 0, the last
    stable offset held there) and WriteTxnMarkers aborts it from outside: the last stable offset
    moves past its ABORT marker, no transaction stays open and read_committed reads nothing."""
    topic = unique("txn-hanging")
    with broker_log_on_failure(broker):
        run = JavaRun(jar, "txn-abort-hanging", broker.bootstrap, topic,
                      unique("txn-hanging-id")).check()
        context = run.context()
        opened = run.line("step", step="open")["state"]
        assert (opened["hw"], opened["lso"], opened["start_offset"]) == (
            {"0": 3}, {"0": 0}, 0), context
        aborted = run.line("step", step="aborted")
        assert (aborted["hw"], aborted["lso"], aborted["open_transactions"]) == (
            {"0": 4}, {"0": 4}, 0), context
        read = run.line("step", step="read_committed")
        assert (read["values"], read["position"]) == ([], 4), context
