"""TLS benchmark: produce and fetch MB/s over an SSL listener against PLAINTEXT, and new TLS
connections per second, on kbroker and on Apache Kafka 4.3.1 with the same settings and the
same certificates (``kbroker certs``, EC P-256), in the same run. Kafka runs with the JVM's
full JIT (the conformance tests' C1-only flag would leave its TLS without AES intrinsics).

    python benchmarks/bench_tls.py                  # ~2-3 minutes (Kafka's JVM start included)
    python benchmarks/bench_tls.py --records 20000 --connect-seconds 2
    python benchmarks/bench_tls.py --brokers kbroker   # without Kafka

Throughput is confluent-kafka (librdkafka) producing ``--records`` 1 KiB values (no keys, no
compression, acks=all, linger.ms=5) into a fresh one-partition topic, then one consumer reading
them all back from offset 0; MB means 10^6 bytes of record values. New connections: one client
thread opens a TCP connection, finishes the TLS handshake (TLS 1.3, server certificate checked),
sends ApiVersions v0, reads the answer and closes, for ``--connect-seconds``; the same loop on
the PLAINTEXT listener for comparison. Each measurement runs ``--repeat`` times after a warm-up
and the best is kept (every run is in the JSON). Both brokers run with their defaults otherwise; the
machine is shared, so numbers vary from run to run: compare the two brokers within one run.

Results are printed and written to benchmarks/results/tls.json (or --output).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import ssl
import struct
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from broker.security.certs import make_certs  # noqa: E402
from tests.support import BrokerProcess, free_port  # noqa: E402

RECORD_SIZE = 1024
PASSWORD = "bench-tls"


def ssl_settings(certs: dict, port: int, ssl_port: int) -> dict:
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": certs["paths"]["broker.p12"],
        "ssl.keystore.password": certs["password"]}


def start_kbroker(certs: dict):
    port, ssl_port = free_port(), free_port()
    broker = BrokerProcess(port=port, overrides=ssl_settings(certs, port, ssl_port))
    broker.start()
    return broker, port, ssl_port


def start_kafka(certs: dict):
    from tests.conformance.kafka_server import KafkaServer

    class FullJitKafka(KafkaServer):
        """The conformance tests start Kafka with C1 only (-XX:TieredStopAtLevel=1: faster to
        start); TLS needs C2, whose AES-GCM intrinsics C1 lacks (with C1 only Kafka's TLS
        throughput measured about a tenth of its plaintext one)."""

        def _java(self, main, *args, heap=None):
            cmd = super()._java(main, *args, heap=heap)
            return [c for c in cmd if c != "-XX:TieredStopAtLevel=1"] \
                if main == "kafka.Kafka" else cmd

    server = FullJitKafka(heap="1g")
    ssl_port = free_port()
    settings = ssl_settings(certs, server.port, ssl_port)
    controller = f"CONTROLLER://127.0.0.1:{server.controller_port}"
    settings["listeners"] += "," + controller
    settings["advertised.listeners"] += "," + controller
    settings["listener.security.protocol.map"] += ",CONTROLLER:PLAINTEXT"
    server.overrides.update(settings)
    server.start()
    return server, server.port, ssl_port


def client_config(certs: dict, port: int, secure: bool) -> dict:
    config = {"bootstrap.servers": f"127.0.0.1:{port}"}
    if secure:
        config.update({"security.protocol": "ssl", "ssl.ca.location": certs["paths"]["ca.crt"]})
    return config


def produce_fetch(certs: dict, port: int, secure: bool, records: int) -> dict:
    """MB/s of producing ``records`` 1 KiB values, then of fetching them all back."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    config = client_config(certs, port, secure)
    topic = f"bench-tls-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    value = os.urandom(RECORD_SIZE)
    producer = Producer({**config, "linger.ms": 5, "acks": "all",
                         "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576})
    failed = []
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda e, m: e and failed.append(e))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    produce_s = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"{len(failed)} deliveries failed: {failed[0]}")
    consumer = Consumer({**config, "group.id": topic, "enable.auto.commit": False,
                         "fetch.max.bytes": 52428800})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        for msg in consumer.consume(10000, 1.0):
            if msg.error() is None:
                got += 1
    fetch_s = time.perf_counter() - started
    consumer.close()
    mb = records * RECORD_SIZE / 1e6
    return {"records": records, "produce_mb_s": round(mb / produce_s, 1),
            "fetch_mb_s": round(mb / fetch_s, 1) if got == records else None,
            "fetched": got}


def connections_per_second(certs: dict, port: int, secure: bool, seconds: float) -> dict:
    """New connections per second, each with ApiVersions v0, one client thread."""
    context = ssl.create_default_context(cafile=certs["paths"]["ca.crt"]) if secure else None
    request = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
    frame = struct.pack(">i", len(request)) + request
    done = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock = context.wrap_socket(raw, server_hostname="localhost") if secure else raw
        try:
            sock.sendall(frame)
            head = b""
            while len(head) < 4:
                chunk = sock.recv(4 - len(head))
                if not chunk:
                    raise ConnectionError("closed")
                head += chunk
            size = struct.unpack(">i", head)[0]
            body = b""
            while len(body) < size:
                body += sock.recv(size - len(body))
        finally:
            sock.close()
        done += 1
    elapsed = time.perf_counter() - started
    return {"connections": done, "per_second": round(done / elapsed, 1),
            "ms_each": round(elapsed * 1000 / done, 2)}


def measure(name: str, certs: dict, port: int, ssl_port: int, args) -> dict:
    out = {}
    for label, p, secure in (("plaintext", port, False), ("ssl", ssl_port, True)):
        # a warm-up first (Kafka's JIT, the first topic), then the best of --repeat runs
        produce_fetch(certs, p, secure, min(5000, args.records))
        connections_per_second(certs, p, secure, 0.5)
        runs = [produce_fetch(certs, p, secure, args.records) for _ in range(args.repeat)]
        out[label] = {"records": args.records,
                      "produce_mb_s": max(r["produce_mb_s"] for r in runs),
                      "fetch_mb_s": max((r["fetch_mb_s"] or 0) for r in runs) or None,
                      "runs": runs}
        connects = [connections_per_second(certs, p, secure, args.connect_seconds)
                    for _ in range(args.repeat)]
        out[label]["new_connections"] = max(connects, key=lambda c: c["per_second"])
        print(f"{name:8} {label:9} produce {out[label]['produce_mb_s']:7.1f} MB/s  fetch "
              f"{out[label]['fetch_mb_s']} MB/s  new connections "
              f"{out[label]['new_connections']['per_second']}/s", flush=True)
    for key in ("produce_mb_s", "fetch_mb_s"):
        if out["plaintext"][key] and out["ssl"][key]:
            out[f"ssl_share_of_plaintext_{key}"] = round(out["ssl"][key] / out["plaintext"][key], 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50000)
    parser.add_argument("--connect-seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=2, help="runs of each, best kept")
    parser.add_argument("--brokers", default="kbroker,kafka")
    parser.add_argument("--output", default=os.path.join(HERE, "results", "tls.json"))
    args = parser.parse_args()
    report = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "openssl": ssl.OPENSSL_VERSION},
              "records": args.records, "record_size": RECORD_SIZE,
              "note": "shared machine: compare brokers within one run", "brokers": {}}
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as directory:
        certs = make_certs(directory, password=PASSWORD)
        for name in args.brokers.split(","):
            server, port, ssl_port = (start_kbroker if name == "kbroker" else start_kafka)(certs)
            try:
                report["brokers"][name] = measure(name, certs, port, ssl_port, args)
            finally:
                server.stop()
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report["brokers"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
