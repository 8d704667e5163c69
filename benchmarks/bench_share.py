"""Share groups (KIP-932): records per second delivered and acknowledged by confluent-kafka
ShareConsumers (implicit acknowledgement), 1 KiB records, 6 partitions, 1 and 4 consumers (each
in its own process), and the broker's CPU per acknowledged record; Kafka 4.3.1 in the same run.

    python benchmarks/bench_share.py --records 60000 --consumers 1,4 --targets kbroker,kafka

Each cell: a new topic and group (share.auto.offset.reset=earliest set on the group first), the
records produced before the consumers start, the clock from the consumers' start until every
record was delivered once (a record is acknowledged by the next poll; the last ones at close).
The first-record time of each cell is reported too, and the rate and broker CPU from the first
record on (Kafka assigns share partitions a heartbeat interval after the members join).
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.conformance import topics  # noqa: E402
from tests.conformance.kafka_server import KafkaServer  # noqa: E402
from tests.conformance.test_share_group_conformance import alter_group_configs  # noqa: E402
from tests.support import BrokerProcess, RawClient, unique  # noqa: E402

PARTITIONS = 6


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (and its threads) from /proc."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def consume(bootstrap: str, topic: str, group: str, counter, stop, first) -> None:
    import confluent_kafka as ck
    consumer = ck.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                 "log_level": 3})
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            msgs = [m for m in consumer.poll(0.2) if m.error() is None]
            if msgs:
                with first.get_lock():
                    if first.value == 0:
                        first.value = time.time()
                with counter.get_lock():
                    counter.value += len(msgs)
    finally:
        consumer.close()


def cell(bootstrap: str, pid: int, records: int, consumers: int) -> dict:
    import confluent_kafka as ck
    admin = RawClient(int(bootstrap.rsplit(":", 1)[1]))
    topic = topics.create_topic(admin, unique("bench-share"), PARTITIONS)
    group = unique("bench-share-g")
    alter_group_configs(admin, group, ("share.auto.offset.reset", "earliest", 0))
    admin.close()
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
    counter = multiprocessing.Value("q", 0)
    first = multiprocessing.Value("d", 0.0)
    stop = multiprocessing.Event()
    cpu0 = cpu_seconds(pid)
    started = time.time()
    procs = [multiprocessing.Process(target=consume, args=(bootstrap, topic, group, counter,
                                                           stop, first))
             for _ in range(consumers)]
    for p in procs:
        p.start()
    cpu_first = None
    while counter.value < records and time.time() - started < 300:
        if cpu_first is None and first.value:
            cpu_first = cpu_seconds(pid)
        time.sleep(0.005)
    ended = time.time()
    elapsed = ended - started
    cpu_end = cpu_seconds(pid)
    cpu = cpu_end - cpu0
    stop.set()
    for p in procs:
        p.join(30)
    got = counter.value
    streaming = ended - first.value if first.value else elapsed
    return {"records": got, "seconds": round(elapsed, 2), "per_second": round(got / elapsed),
            "first_record_s": round(first.value - started, 2) if first.value else None,
            "per_second_after_first": round(got / max(streaming, 1e-3)),
            "broker_cpu_us_per_record": round(cpu / max(got, 1) * 1e6, 1),
            "broker_cpu_us_per_record_after_first": round(
                (cpu_end - (cpu_first or cpu0)) / max(got, 1) * 1e6, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=60000)
    parser.add_argument("--consumers", default="1,4")
    parser.add_argument("--targets", default="kbroker,kafka")
    args = parser.parse_args()
    for target in args.targets.split(","):
        server = KafkaServer() if target == "kafka" else BrokerProcess()
        server.start()
        try:
            pid = server.proc.pid
            bootstrap = f"127.0.0.1:{server.port}"
            for n in (int(x) for x in args.consumers.split(",")):
                result = cell(bootstrap, pid, args.records, n)
                print(f"{target:8} consumers={n}: {result}", flush=True)
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
