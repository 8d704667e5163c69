"""Share groups (KIP-932) with the Java client: records per second delivered and acknowledged
by KafkaShareConsumers (kafka-clients 4.3.1, implicit acknowledgement, the client's defaults;
each consumer its own JVM, tests/java/src/main/java/kbroker/ShareBench.java), 1 KiB records,
6 partitions, 1 and 4 consumers, and the broker's CPU per acknowledged record; Kafka 4.3.1 in
the same run.

    mvn -B -q -f tests/java/pom.xml package
    python benchmarks/bench_share_java.py --records 200000 --consumers 1,4 --targets kbroker,kafka

Each cell as in bench_share.py: a new topic and group (share.auto.offset.reset=earliest), the
records produced first, the clock from the consumers' start until every record was delivered
once (each poll acknowledges the previous one's records; the last at close). The first-record
time is reported, and the rate and broker CPU from the first record on. Results also go to
``--out`` (JSON).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.bench_share import PARTITIONS, cpu_seconds  # noqa: E402
from tests.conformance import topics  # noqa: E402
from tests.conformance.kafka_server import KafkaServer  # noqa: E402
from tests.conformance.test_share_group_conformance import alter_group_configs  # noqa: E402
from tests.support import BrokerProcess, RawClient, unique  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JAR = os.path.join(ROOT, "tests", "java", "target", "client-scenarios.jar")


def produce(bootstrap: str, topic: str, records: int) -> None:
    import confluent_kafka as ck
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    value = b"x" * 1024
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(60)


class Consumer:
    """One ShareBench JVM; its counts read from its stdout on a thread."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.count = 0
        self.first = 0.0
        self.proc = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", JAR, "kbroker.ShareBench", "share-bench", bootstrap,
             topic, group], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            kind, _, value = line.strip().partition(" ")
            if kind == "count":
                self.count = int(value)
            elif kind == "first":
                self.first = int(value) / 1000

    def stop(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(30)
        except (subprocess.TimeoutExpired, OSError):
            self.proc.kill()
            self.proc.wait()


def cell(bootstrap: str, pid: int, records: int, consumers: int) -> dict:
    admin = RawClient(int(bootstrap.rsplit(":", 1)[1]))
    topic = topics.create_topic(admin, unique("bench-share-java"), PARTITIONS)
    group = unique("bench-share-java-g")
    alter_group_configs(admin, group, ("share.auto.offset.reset", "earliest", 0))
    admin.close()
    produce(bootstrap, topic, records)
    cpu0 = cpu_seconds(pid)
    started = time.time()
    running = [Consumer(bootstrap, topic, group) for _ in range(consumers)]
    cpu_first = None
    first = 0.0
    try:
        while sum(c.count for c in running) < records and time.time() - started < 600:
            if cpu_first is None and any(c.first for c in running):
                cpu_first = cpu_seconds(pid)
            time.sleep(0.005)
        ended = time.time()
        cpu_end = cpu_seconds(pid)
        got = sum(c.count for c in running)
        first = min((c.first for c in running if c.first), default=0.0)
    finally:
        for c in running:
            c.stop()
    elapsed = ended - started
    streaming = ended - first if first else elapsed
    return {"records": got, "seconds": round(elapsed, 2), "per_second": round(got / elapsed),
            "first_record_s": round(first - started, 2) if first else None,
            "per_second_after_first": round(got / max(streaming, 1e-3)),
            "broker_cpu_us_per_record": round((cpu_end - cpu0) / max(got, 1) * 1e6, 1),
            "broker_cpu_us_per_record_after_first": round(
                (cpu_end - (cpu_first or cpu0)) / max(got, 1) * 1e6, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200000)
    parser.add_argument("--consumers", default="1,4")
    parser.add_argument("--targets", default="kbroker,kafka")
    parser.add_argument("--out", default="bench_share_java.json")
    args = parser.parse_args()
    if not os.path.exists(JAR):
        sys.exit(f"{JAR} is missing: mvn -B -q -f tests/java/pom.xml package")
    results = []
    for target in args.targets.split(","):
        server = KafkaServer() if target == "kafka" else BrokerProcess()
        server.start()
        try:
            pid = server.proc.pid
            bootstrap = f"127.0.0.1:{server.port}"
            for n in (int(x) for x in args.consumers.split(",")):
                result = cell(bootstrap, pid, args.records, n)
                results.append({"target": target, "consumers": n, **result})
                print(f"{target:8} consumers={n}: {result}", flush=True)
        finally:
            server.stop()
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
