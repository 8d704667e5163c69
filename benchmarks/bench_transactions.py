"""Transactional produce throughput with confluent-kafka: transactions of 1000 x 1 KiB records,
each committed, against plain (non-transactional) produce of the same records, on kbroker (in
memory and with --data-dir) and on Apache Kafka 4.3.1, in the same run.

    python benchmarks/bench_transactions.py            # ~1-2 minutes, writes JSON
    python benchmarks/bench_transactions.py --quick    # a smoke run
    python benchmarks/bench_transactions.py --no-kafka # kbroker only

Results go to benchmarks/results/transactions.json (or --output). MB means 10^6 bytes of record
values. Each run also checks the outcome: a read_committed consumer sees every committed record.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from tests.support import BrokerProcess  # noqa: E402

RECORD_SIZE = 1024
TRANSACTION_SIZE = 1000


def _producer(bootstrap: str, transactional: bool):
    from confluent_kafka import Producer
    config = {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1_000_000,
              "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 2_000_000}
    if transactional:
        config["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    return Producer(config)


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce_plain(bootstrap: str, topic: str, records: int) -> dict:
    producer = _producer(bootstrap, False)
    value = b"x" * RECORD_SIZE
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    seconds = time.perf_counter() - started
    assert left == 0, f"{left} records not delivered"
    return {"records": records, "seconds": round(seconds, 3),
            "mb_s": round(records * RECORD_SIZE / seconds / 1e6, 1),
            "records_s": round(records / seconds)}


def produce_transactional(bootstrap: str, topic: str, records: int) -> dict:
    producer = _producer(bootstrap, True)
    value = b"x" * RECORD_SIZE
    started = time.perf_counter()
    producer.init_transactions(30)
    commits = []
    sent = 0
    while sent < records:
        producer.begin_transaction()
        for _ in range(min(TRANSACTION_SIZE, records - sent)):
            while True:
                try:
                    producer.produce(topic, value)
                    break
                except BufferError:
                    producer.poll(0.01)
            sent += 1
        began = time.perf_counter()
        producer.commit_transaction(60)
        commits.append(time.perf_counter() - began)
    seconds = time.perf_counter() - started
    commits.sort()
    return {"records": records, "transactions": len(commits), "seconds": round(seconds, 3),
            "mb_s": round(records * RECORD_SIZE / seconds / 1e6, 1),
            "records_s": round(records / seconds),
            "commit_ms_p50": round(commits[len(commits) // 2] * 1000, 1),
            "commit_ms_p99": round(commits[min(len(commits) - 1,
                                               int(len(commits) * 0.99))] * 1000, 1)}


def count_committed(bootstrap: str, topic: str, expected: int, timeout: float = 60) -> int:
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + timeout
    while seen < expected and time.monotonic() < deadline:
        for message in consumer.consume(10000, 0.5):
            if message.error() is None:
                seen += 1
    consumer.close()
    return seen


def run_target(name: str, bootstrap: str, records: int) -> dict:
    out = {}
    for kind, fn in (("plain", produce_plain), ("transactional", produce_transactional)):
        topic = f"bench-{kind}-{uuid.uuid4().hex[:6]}"
        _create_topic(bootstrap, topic, 1)
        fn(bootstrap, topic, min(records, 20_000))   # warm up the broker and the client
        topic = f"bench-{kind}-{uuid.uuid4().hex[:6]}"
        _create_topic(bootstrap, topic, 1)
        result = fn(bootstrap, topic, records)
        if kind == "transactional":
            result["read_committed_seen"] = count_committed(bootstrap, topic, records)
        out[kind] = result
        print(f"{name:>16} {kind:>13}: {result['mb_s']:7.1f} MB/s "
              f"{result['records_s']:8d} records/s"
              + (f"  commit p50 {result['commit_ms_p50']} ms p99 {result['commit_ms_p99']} ms"
                 f"  read_committed saw {result['read_committed_seen']}"
                 if kind == "transactional" else ""), flush=True)
    out["transactional_vs_plain"] = round(out["transactional"]["mb_s"] / out["plain"]["mb_s"], 2)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-kafka", action="store_true")
    parser.add_argument("--output", default=os.path.join(HERE, "results", "transactions.json"))
    args = parser.parse_args(argv)
    records = 20_000 if args.quick else args.records
    report = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
              "record_size": RECORD_SIZE, "transaction_size": TRANSACTION_SIZE,
              "records": records, "targets": {}}
    with tempfile.TemporaryDirectory() as data_dir:
        for name, overrides in (("kbroker-memory", {}), ("kbroker-disk", {"log.dirs": data_dir})):
            broker = BrokerProcess(overrides=overrides)
            broker.start()
            try:
                report["targets"][name] = run_target(name, f"127.0.0.1:{broker.port}", records)
            finally:
                broker.stop()
    if not args.no_kafka:
        from tests.conformance.kafka_server import KafkaServer
        kafka = KafkaServer()
        kafka.start()
        try:
            report["targets"]["kafka-4.3.1"] = run_target("kafka-4.3.1",
                                                         f"127.0.0.1:{kafka.port}", records)
        finally:
            kafka.stop()
    targets = report["targets"]
    if "kafka-4.3.1" in targets:
        report["kbroker_memory_vs_kafka_transactional"] = round(
            targets["kbroker-memory"]["transactional"]["mb_s"]
            / targets["kafka-4.3.1"]["transactional"]["mb_s"], 2)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: v for k, v in report.items() if k != "targets"}, indent=1))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
