"""Hostile connections: the broker's RSS under clients that never read, idle connections and half
frames (issue 14).

    python benchmarks/bench_connections.py                       # every workload, ~1 minute
    python benchmarks/bench_connections.py --workloads nonreaders --clients 20
    python benchmarks/bench_connections.py --root /tmp/other-checkout   # measure another tree

Each workload starts a fresh broker process (``--data-dir`` in a temp dir, metrics off) from
``--root`` (default: this checkout), so the same script measures a tree before and after a
change. RSS is VmRSS of the broker process from /proc/<pid>/status, in MiB.

- ``nonreaders``: a topic with one partition holding ``--log-mb`` MB; ``--clients`` clients each
  send ``--requests`` pipelined Fetch v12 requests for it (offset 0, ``--partition-max-bytes``
  per partition, 1 MiB by default) and never read an answer. RSS when it stops growing, the time
  an ApiVersions round trip takes on a fresh connection meanwhile, RSS 3 s after the clients
  left, and the MemoryError lines of the broker's log. The attack of issue 21:
  ``--clients 500 --requests 20 --log-mb 100 --partition-max-bytes 52428800
  --address-space-mb 4096`` (the broker under a 4 GB address-space cap).
- ``idle``: ``--idle-connections`` connections that send nothing.
- ``halfframes``: ``--half-frame-clients`` clients that declare a 100 MB frame and send 1 KiB.

Results are printed and written as JSON to benchmarks/results/connections.json (or --output).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from tests.support import free_port, rss_mib  # noqa: E402

from protocol import messages as m  # noqa: E402
from protocol.framing import encode_request  # noqa: E402
from protocol.records import SimpleRecord, build_batch  # noqa: E402

TOPIC = "hostile"


def round_trip_ms(port: int, timeout: float = 30.0) -> float:
    """An ApiVersions v0 round trip on a new connection, in ms (inf when none came back)."""
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            request = struct.pack(">hhih", 18, 0, 7, 5) + b"bench"
            sock.sendall(struct.pack(">i", len(request)) + request)
            head = sock.recv(4, socket.MSG_WAITALL)
            size = struct.unpack(">i", head)[0]
            sock.recv(size, socket.MSG_WAITALL)
    except (OSError, struct.error):
        return float("inf")
    return (time.monotonic() - t0) * 1000.0


class Broker:
    def __init__(self, root: str, overrides: dict, address_space_mb: int = 0) -> None:
        self.root = root
        self.port = free_port()
        self.data_dir = tempfile.mkdtemp(prefix="bench-conn-")
        cmd = [sys.executable, "-m", "broker", "--port", str(self.port), "--metrics-port", "0",
               "--log-format", "json", "--data-dir", self.data_dir]
        for k, v in overrides.items():
            cmd += ["--override", f"{k}={v}"]
        env = dict(os.environ, PYTHONPATH=root)
        self.log = tempfile.TemporaryFile(prefix="bench-conn-log-")

        def cap() -> None:
            if address_space_mb:
                limit = address_space_mb << 20
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        self.proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=cap)
        deadline = time.monotonic() + 30
        while round_trip_ms(self.port, 1) == float("inf"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"broker did not start:\n{self.output()}")
            time.sleep(0.05)

    def output(self, tail: int = 3000) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-tail:]

    def rss(self) -> float:
        return rss_mib(self.proc.pid)

    def call(self, sock, request, version: int):
        from protocol.framing import read_response_header
        sock.sendall(encode_request(type(request).api_key, version, 1, "bench", request))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        frame = sock.recv(size, socket.MSG_WAITALL)
        api = m.APIS[type(request).api_key]
        _, offset = read_response_header(frame, api.response_header_version(version))
        return api.response.decode(frame, version, offset)

    def fill_topic(self, megabytes: int) -> None:
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as sock:
            C = m.CreateTopicsRequest
            self.call(sock, C(topics=[C.CreatableTopic(name=TOPIC, num_partitions=1,
                                                       replication_factor=1)],
                              timeout_ms=5000), 7)
            P = m.ProduceRequest
            value = b"x" * 1024
            for _ in range(megabytes):
                batch = build_batch([SimpleRecord(None, value) for _ in range(1000)])
                response = self.call(sock, P(acks=1, timeout_ms=5000, topic_data=[
                    P.TopicProduceData(name=TOPIC, partition_data=[
                        P.PartitionProduceData(index=0, records=batch)])]), 9)
                assert response.responses[0].partition_responses[0].error_code == 0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def fetch_frame(correlation_id: int, partition_max_bytes: int = 1 << 20) -> bytes:
    F = m.FetchRequest
    request = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=52428800, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[F.FetchTopic(topic=TOPIC, partitions=[
                    F.FetchPartition(partition=0, fetch_offset=0,
                                     partition_max_bytes=partition_max_bytes)])])
    return encode_request(1, 12, correlation_id, "nonreader", request)


def send_what_fits(sock: socket.socket, data: bytes) -> int:
    """Send without blocking; what the broker does not take stays unsent."""
    sock.setblocking(False)
    sent = 0
    try:
        while sent < len(data):
            sent += sock.send(data[sent:])
    except BlockingIOError:
        pass
    return sent


def settle(broker: Broker, limit_s: float) -> float:
    """Wait until RSS has not grown for 2 s (or limit_s passed); the peak RSS seen."""
    peak = broker.rss()
    stable_since = time.monotonic()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and time.monotonic() - stable_since < 2.0:
        time.sleep(0.25)
        now = broker.rss()
        if now > peak + 1:
            peak = now
            stable_since = time.monotonic()
    return max(peak, broker.rss())


def nonreaders(args) -> dict:
    broker = Broker(args.root, dict(o.split("=", 1) for o in args.override),
                    args.address_space_mb)
    try:
        broker.fill_topic(args.log_mb)
        time.sleep(1)
        before = broker.rss()
        frames = b"".join(fetch_frame(i, args.partition_max_bytes) for i in range(args.requests))
        socks, sent = [], 0
        for _ in range(args.clients):
            sock = socket.create_connection(("127.0.0.1", broker.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sent += send_what_fits(sock, frames)
            socks.append(sock)
        peak = settle(broker, args.settle_limit)
        latency = round_trip_ms(broker.port)
        for sock in socks:
            sock.close()
        time.sleep(3)
        after = broker.rss()
        alive = broker.proc.poll() is None
        return {"clients": args.clients, "requests_per_client": args.requests,
                "partition_max_bytes": args.partition_max_bytes,
                "overrides": args.override, "address_space_mb": args.address_space_mb,
                "broker_alive": alive,
                "memory_errors": broker.output(1 << 30).count("MemoryError"),
                "request_bytes_taken": sent, "rss_before_mib": round(before, 1),
                "rss_peak_mib": round(peak, 1), "grown_mib": round(peak - before, 1),
                "grown_per_client_mib": round((peak - before) / args.clients, 1),
                "api_versions_round_trip_ms": round(latency, 1),
                "rss_3s_after_they_left_mib": round(after, 1)}
    finally:
        broker.stop()


def idle(args) -> dict:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    broker = Broker(args.root, {})
    try:
        time.sleep(1)
        before = broker.rss()
        socks = []
        for _ in range(args.idle_connections):
            socks.append(socket.create_connection(("127.0.0.1", broker.port)))
        latency = round_trip_ms(broker.port)  # every connection before it has been accepted
        peak = settle(broker, args.settle_limit)
        for sock in socks:
            sock.close()
        return {"connections": args.idle_connections, "rss_before_mib": round(before, 1),
                "rss_mib": round(peak, 1),
                "kib_per_connection": round((peak - before) * 1024 / args.idle_connections, 1),
                "api_versions_round_trip_ms": round(latency, 1)}
    finally:
        broker.stop()


def halfframes(args) -> dict:
    broker = Broker(args.root, {})
    try:
        time.sleep(1)
        before = broker.rss()
        socks = []
        for _ in range(args.half_frame_clients):
            sock = socket.create_connection(("127.0.0.1", broker.port))
            sock.sendall(struct.pack(">i", 100_000_000) + b"\0" * 1024)
            socks.append(sock)
        latency = round_trip_ms(broker.port)
        peak = settle(broker, args.settle_limit)
        for sock in socks:
            sock.close()
        return {"clients": args.half_frame_clients, "rss_before_mib": round(before, 1),
                "rss_mib": round(peak, 1), "grown_mib": round(peak - before, 1),
                "api_versions_round_trip_ms": round(latency, 1)}
    finally:
        broker.stop()


WORKLOADS = {"nonreaders": nonreaders, "idle": idle, "halfframes": halfframes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=ROOT, help="checkout whose broker is measured")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--clients", type=int, default=10, help="non-reading fetchers")
    ap.add_argument("--requests", type=int, default=500, help="Fetch requests per non-reader")
    ap.add_argument("--log-mb", type=int, default=4, help="MB in the fetched partition")
    ap.add_argument("--partition-max-bytes", type=int, default=1 << 20)
    ap.add_argument("--address-space-mb", type=int, default=0,
                    help="cap the broker's address space (RLIMIT_AS), 0: none")
    ap.add_argument("--override", action="append", default=[], metavar="NAME=VALUE",
                    help="a broker setting for the nonreaders workload")
    ap.add_argument("--idle-connections", type=int, default=5000)
    ap.add_argument("--half-frame-clients", type=int, default=500)
    ap.add_argument("--settle-limit", type=float, default=60.0,
                    help="most seconds to wait for RSS to stop growing")
    ap.add_argument("--output", default=os.path.join(HERE, "results", "connections.json"))
    args = ap.parse_args()
    args.root = os.path.abspath(args.root)
    results = {"root": args.root, "commit": subprocess.run(
        ["git", "-C", args.root, "rev-parse", "--short", "HEAD"], capture_output=True,
        text=True).stdout.strip(), "workloads": {}}
    for name in args.workloads.split(","):
        result = WORKLOADS[name](args)
        results["workloads"][name] = result
        print(f"{name:12s} " + "  ".join(f"{k}={v}" for k, v in result.items()), flush=True)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
