"""One produce-and-consume-in-a-group scenario over an SSL listener for each real client
(kafka-python, aiokafka, confluent-kafka, kafkajs, kcat, the Java client), run the same way
against kbroker and against Apache Kafka. Each returns its outcome as a dict:

    {"produced": 20, "consumed": ["v0", ... sorted], "committed": {0: 10, 1: 10}}

or raises when the client cannot connect. ``certs`` are the files of `kbroker certs`
(broker/security/certs.py); ``client_cert`` says whether the client shows its certificate.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import time

from tests.support import ROOT, subscribe_with_metadata

N = 20
PARTITIONS = 2
CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka", "kafkajs", "kcat", "java")
JAR = os.path.join(ROOT, "tests", "java", "target", "client-scenarios.jar")
KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def expected() -> dict:
    return {"produced": N, "consumed": sorted(f"v{i}" for i in range(N)),
            "committed": {p: N // PARTITIONS for p in range(PARTITIONS)}}


def create_topic(bootstrap: str, topic: str) -> None:
    """The topic with 2 partitions, through the PLAINTEXT listener ``bootstrap``."""
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()


def _deadline_loop(step, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if step():
            return


def kafka_python(bootstrap, topic, group, certs, client_cert=True) -> dict:
    paths = certs["paths"]
    ssl = dict(security_protocol="SSL", ssl_cafile=paths["ca.crt"])
    if client_cert:
        ssl.update(ssl_certfile=paths["client.crt"], ssl_keyfile=paths["client.key"])
    return run_kafka_python(bootstrap, topic, group, ssl)


def run_kafka_python(bootstrap, topic, group, ssl: dict) -> dict:
    """kafka-python's scenario with ``ssl`` as its connection settings (keyword arguments)."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    producer = KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10000, **ssl)
    try:
        for i in range(N):
            producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                          partition=i % PARTITIONS).get(20)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             session_timeout_ms=10000, heartbeat_interval_ms=1000, **ssl)
    consumed = []
    try:
        subscribe_with_metadata(consumer, [topic])

        def step():
            for records in consumer.poll(500).values():
                consumed.extend(r.value.decode() for r in records)
            consumer.commit()
            return len(consumed) >= N
        _deadline_loop(step)
        committed = {p: consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        consumer.close()
    return {"produced": N, "consumed": sorted(consumed), "committed": committed}


def aiokafka(bootstrap, topic, group, certs, client_cert=True) -> dict:
    from aiokafka.helpers import create_ssl_context
    paths = certs["paths"]
    context = create_ssl_context(
        cafile=paths["ca.crt"], certfile=paths["client.crt"] if client_cert else None,
        keyfile=paths["client.key"] if client_cert else None)
    return run_aiokafka(bootstrap, topic, group,
                        {"security_protocol": "SSL", "ssl_context": context})


def run_aiokafka(bootstrap, topic, group, ssl: dict) -> dict:
    """aiokafka's scenario with ``ssl`` as its connection settings (keyword arguments)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def scenario():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10000, **ssl)
        await producer.start()
        try:
            for i in range(N):
                await producer.send_and_wait(topic, f"v{i}".encode(), key=f"k{i}".encode(),
                                             partition=i % PARTITIONS)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    session_timeout_ms=10000, heartbeat_interval_ms=1000, **ssl)
        await consumer.start()
        consumed = []
        try:
            deadline = time.monotonic() + 30
            while len(consumed) < N and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for records in batches.values():
                    consumed.extend(r.value.decode() for r in records)
                if batches:
                    await consumer.commit()
            committed = {p: await consumer.committed(TopicPartition(topic, p))
                         for p in range(PARTITIONS)}
        finally:
            await consumer.stop()
        return {"produced": N, "consumed": sorted(consumed), "committed": committed}
    return asyncio.run(scenario())


def confluent_kafka(bootstrap, topic, group, certs, client_cert=True) -> dict:
    paths = certs["paths"]
    ssl = {"bootstrap.servers": bootstrap, "security.protocol": "ssl",
           "ssl.ca.location": paths["ca.crt"]}
    if client_cert:
        ssl.update({"ssl.certificate.location": paths["client.crt"],
                    "ssl.key.location": paths["client.key"]})
    return run_confluent_kafka(topic, group, ssl)


def run_confluent_kafka(topic, group, ssl: dict) -> dict:
    """confluent-kafka's scenario with ``ssl`` as its configuration (bootstrap included)."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
    errors = []
    producer = Producer({**ssl, "message.timeout.ms": 20000,
                         "error_cb": lambda e: errors.append(str(e))})
    delivered = []
    for i in range(N):
        producer.produce(topic, key=f"k{i}", value=f"v{i}", partition=i % PARTITIONS,
                         on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(30)
    if len(delivered) != N or any(delivered):
        raise KafkaException(f"delivery failed: {delivered[:3]} {errors[:3]}")
    consumer = Consumer({**ssl, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 10000})
    consumed = []
    try:
        consumer.subscribe([topic])

        def step():
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                consumed.append(msg.value().decode())
                consumer.commit(message=msg, asynchronous=False)
            return len(consumed) >= N
        _deadline_loop(step)
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
        committed = {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()
    return {"produced": N, "consumed": sorted(consumed), "committed": committed}


def kafkajs(bootstrap, topic, group, certs, client_cert=True) -> dict:
    node = shutil.which("node")
    assert node, "node is not installed"
    assert os.path.isdir(os.path.join(ROOT, "tests", "js", "node_modules", "kafkajs")), \
        "kafkajs is not installed: run tools/install-test-deps.sh"
    paths = certs["paths"]
    args = [node, os.path.join(ROOT, "tests", "js", "ssl_scenario.js"), bootstrap, topic, group,
            paths["ca.crt"]]
    if client_cert:
        args += [paths["client.crt"], paths["client.key"]]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    out = json.loads(result.stdout.strip().splitlines()[-1])
    if "error" in out:
        raise RuntimeError(f"kafkajs: {out['error']}")
    return {"produced": out["produced"], "consumed": out["consumed"],
            "committed": {p: o for p, o in out["committed"]}}


def kcat(bootstrap, topic, group, certs, client_cert=True) -> dict:
    assert KCAT, "kcat is not installed: run tools/install-test-deps.sh"
    paths = certs["paths"]
    ssl = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={paths['ca.crt']}"]
    if client_cert:
        ssl += ["-X", f"ssl.certificate.location={paths['client.crt']}",
                "-X", f"ssl.key.location={paths['client.key']}"]

    def run(*args, stdin=None):
        result = subprocess.run([KCAT, "-b", bootstrap, *ssl, *args], input=stdin,
                                capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(f"kcat {' '.join(args)}: {result.stderr.strip()[-500:]}")
        return result.stdout
    for p in range(PARTITIONS):
        run("-P", "-t", topic, "-p", str(p), "-K:",
            stdin="".join(f"k{i}:v{i}\n" for i in range(N) if i % PARTITIONS == p))
    consumed = run("-G", group, "-o", "beginning", "-e", "-X", "enable.auto.commit=true",
                   "-X", "auto.commit.interval.ms=100", topic).split()
    # the group's committed offsets, as kcat's -Q cannot show them: kcat commits on exit
    from confluent_kafka import Consumer, TopicPartition
    config = {"bootstrap.servers": bootstrap, "security.protocol": "ssl",
              "ssl.ca.location": paths["ca.crt"], "group.id": group}
    if client_cert:
        config.update({"ssl.certificate.location": paths["client.crt"],
                       "ssl.key.location": paths["client.key"]})
    reader = Consumer(config)
    try:
        found = reader.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
    finally:
        reader.close()
    return {"produced": N, "consumed": sorted(consumed),
            "committed": {tp.partition: tp.offset for tp in found}}


def java(bootstrap, topic, group, certs, client_cert=True) -> dict:
    paths = certs["paths"]
    props = {"security.protocol": "SSL", "ssl.truststore.type": "PKCS12",
             "ssl.truststore.location": paths["truststore.p12"],
             "ssl.truststore.password": certs["password"]}
    if client_cert:
        props.update({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": paths["client.p12"],
                      "ssl.keystore.password": certs["password"]})
    else:
        # refused at every handshake, the admin client retries until its API timeout: fail fast
        props.update({"default.api.timeout.ms": 5000, "request.timeout.ms": 5000})
    return run_java(bootstrap, topic, group, props)


def run_java(bootstrap, topic, group, props: dict, n: int = N) -> dict:
    """The Java client's produce-and-consume-in-a-group scenario (it creates the topic) with
    ``props`` as its connection settings; raises when the client fails."""
    assert shutil.which("java"), "`java` is not on PATH: Java 17 is needed"
    assert os.path.exists(JAR), f"{JAR} is missing: run tools/install-test-deps.sh"
    with tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False) as f:
        f.write("".join(f"{k}={v}\n" for k, v in props.items()))
    try:
        result = subprocess.run(
            ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-jar", JAR,
             "secure-produce-consume", bootstrap, topic, group, f.name, str(n)],
            capture_output=True, text=True, timeout=120)
    finally:
        os.unlink(f.name)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines or "error" in lines[-1]:
        raise RuntimeError(f"java client: {lines[-1] if lines else result.stderr[-1500:]}")
    out = lines[-1]
    return {"produced": out["produced"], "consumed": out["consumed"],
            "committed": {int(p): o for p, o in out["committed"].items()}}


SCENARIOS = {"kafka-python": kafka_python, "aiokafka": aiokafka,
             "confluent-kafka": confluent_kafka, "kafkajs": kafkajs, "kcat": kcat,
             "java": java}
