"""SASL cost: logins per second and produce throughput, SASL_PLAINTEXT against PLAINTEXT, on this
broker and on a real Kafka 4.3.1 with the same listeners, in the same run.

    python benchmarks/bench_sasl.py            # ~2 minutes
    python benchmarks/bench_sasl.py --quick    # smoke run

- logins/s: one client, sequential new connections, each ApiVersions + SaslHandshake +
  SaslAuthenticate (PLAIN: one round trip; SCRAM: two) + one Metadata request, for a fixed time
  after a warm-up; PLAINTEXT does ApiVersions + Metadata only.
- produce MB/s: confluent-kafka (librdkafka) producer, 100-byte records, acks=1, linger 5 ms,
  to a one-partition topic, on the PLAINTEXT listener and on the SASL listener (SCRAM-SHA-512).

Writes benchmarks/results/sasl.json. The machine is shared: quote numbers with that caveat.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from protocol.framing import encode_request, read_response_header  # noqa: E402
from protocol.messages import (APIS, ApiVersionsRequest, MetadataRequest,  # noqa: E402
                               SaslAuthenticateRequest, SaslHandshakeRequest)
from tests.conformance.test_sasl_conformance import SHA512, _upsert  # noqa: E402
from tests.conformance.kafka_server import KafkaServer  # noqa: E402
from tests.security.sasl_support import (ALICE_PASSWORD, ScramClient,  # noqa: E402
                                         listener_settings, plain_token)
from tests.support import BrokerProcess, RawClient, free_port  # noqa: E402


def _call(sock, request, version: int, correlation_id: int):
    api = APIS[type(request).api_key]
    sock.sendall(encode_request(api.key, version, correlation_id, "bench", request))
    size = int.from_bytes(_read(sock, 4), "big")
    frame = _read(sock, size)
    _, offset = read_response_header(frame, api.response_header_version(version))
    return api.response.decode(frame, version, offset)


def _read(sock, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def login_once(port: int, mechanism: str | None) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        _call(sock, ApiVersionsRequest(client_software_name="bench",
                                       client_software_version="1"), 3, 1)
        if mechanism == "PLAIN":
            _call(sock, SaslHandshakeRequest(mechanism="PLAIN"), 1, 2)
            r = _call(sock, SaslAuthenticateRequest(
                auth_bytes=plain_token("alice", ALICE_PASSWORD)), 2, 3)
            assert r.error_code == 0, r
        elif mechanism:
            _call(sock, SaslHandshakeRequest(mechanism=mechanism), 1, 2)
            scram = ScramClient(mechanism, "alice", ALICE_PASSWORD)
            first = _call(sock, SaslAuthenticateRequest(auth_bytes=scram.first()), 2, 3)
            r = _call(sock, SaslAuthenticateRequest(auth_bytes=scram.final(first.auth_bytes)),
                      2, 4)
            assert r.error_code == 0, r
        _call(sock, MetadataRequest(topics=[], allow_auto_topic_creation=False), 12, 5)


def logins_per_second(port: int, mechanism: str | None, seconds: float) -> float:
    for _ in range(20):  # warm-up (the JVM's JIT, our caches)
        login_once(port, mechanism)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        login_once(port, mechanism)
        n += 1
    return n / (time.perf_counter() - start)


def produce_mb_per_s(bootstrap: str, sasl: bool, records: int) -> float:
    from confluent_kafka import Producer
    config = {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
              "queue.buffering.max.messages": records + 1}
    if sasl:
        config.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                       "sasl.username": "alice", "sasl.password": ALICE_PASSWORD})
    topic = f"bench-sasl-{'sasl' if sasl else 'plain'}-{time.monotonic_ns()}"
    producer = Producer(config)
    value = b"x" * 100
    producer.produce(topic, value)
    assert producer.flush(30) == 0  # topic created, connection up
    start = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    elapsed = time.perf_counter() - start
    return records * len(value) / elapsed / 1e6


def add_alice(plain_port: int) -> None:
    from protocol.messages import AlterUserScramCredentialsRequest
    client = RawClient(plain_port)
    try:
        for mech in (1, SHA512):
            r = client.call(AlterUserScramCredentialsRequest(
                deletions=[], upsertions=[_upsert(mech, "alice", ALICE_PASSWORD)]), 0)
            assert r.results[0].error_code == 0
    finally:
        client.close()


def start_kafka():
    server = KafkaServer()
    sasl_port = free_port()
    server.overrides.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{server.port},CONTROLLER://127.0.0.1:"
                     f"{server.controller_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{server.port},"
                                f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT",
        **listener_settings()})
    server.start()
    return server, server.port, sasl_port


def start_kbroker():
    port, sasl_port = free_port(), free_port()
    server = BrokerProcess(port=port, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        **listener_settings()})
    server.start()
    return server, port, sasl_port


def wait_for_scram(sasl_port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            login_once(sasl_port, "SCRAM-SHA-512")
            login_once(sasl_port, "SCRAM-SHA-256")
            return
        except (AssertionError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "sasl.json"))
    args = parser.parse_args()
    seconds = 2.0 if args.quick else 8.0
    records = 50_000 if args.quick else 300_000
    results: dict = {"seconds_per_login_run": seconds, "records": records, "targets": {}}
    for name, start in (("kbroker", start_kbroker), ("kafka", start_kafka)):
        server, plain_port, sasl_port = start()
        try:
            add_alice(plain_port)
            wait_for_scram(sasl_port)
            row: dict = {}
            row["logins_per_s"] = {
                "PLAINTEXT": logins_per_second(plain_port, None, seconds),
                "PLAIN": logins_per_second(sasl_port, "PLAIN", seconds),
                "SCRAM-SHA-256": logins_per_second(sasl_port, "SCRAM-SHA-256", seconds),
                "SCRAM-SHA-512": logins_per_second(sasl_port, "SCRAM-SHA-512", seconds),
            }
            row["produce_mb_per_s"] = {
                "PLAINTEXT": produce_mb_per_s(f"127.0.0.1:{plain_port}", False, records),
                "SASL_PLAINTEXT (SCRAM-SHA-512)": produce_mb_per_s(f"127.0.0.1:{sasl_port}",
                                                                   True, records),
            }
            results["targets"][name] = row
        finally:
            server.stop()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"{'':34}" + "".join(f"{t:>12}" for t in results["targets"]))
    for metric in ("logins_per_s", "produce_mb_per_s"):
        keys = next(iter(results["targets"].values()))[metric]
        for key in keys:
            cells = "".join(f"{row[metric][key]:12.1f}" for row in results["targets"].values())
            print(f"{metric + ' ' + key:34}{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
