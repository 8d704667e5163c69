"""Connections that never finish their TLS handshake: the broker's RSS per pending connection,
plaintext against TLS (issue 5), and how long the broker holds one.

    python benchmarks/bench_tls_pending.py                          # every workload, ~1 minute
    python benchmarks/bench_tls_pending.py --connections 1000 --workloads tls_silent
    python benchmarks/bench_tls_pending.py --root /tmp/other-checkout   # measure another tree
    python benchmarks/bench_tls_pending.py --workloads bound        # + time until closed

Each workload starts a fresh broker process (PLAINTEXT and SSL listeners, the certificates of
``kbroker certs``, metrics off) from ``--root`` (default: this checkout), so the same script
measures a tree before and after a change. RSS is VmRSS of the broker process, read until it
has not grown for 2 s; KiB per connection is its growth over ``--connections``.

- ``plaintext``: connections to the PLAINTEXT listener that send nothing.
- ``tls_silent``: connections to the SSL listener that send nothing (no ClientHello).
- ``tls_half_hello``: each sends the first half of a real ClientHello, then nothing.
- ``tls_full_hello``: each sends a whole ClientHello (the broker answers with its ServerHello
  and certificate and waits for the client's Finished), then nothing.
- ``bound`` (not in the default set): one silent connection to the SSL listener with the
  broker's default settings, and the seconds until the broker closes it (``--bound-limit``).

The broker's handshake bound is raised for the memory workloads (``ssl.handshake.timeout.ms``,
where the tree has it; older trees bound a handshake by min(connections.max.idle.ms, 60 s)), so
that no connection is closed while RSS is read.

Results are printed and written as JSON to benchmarks/results/tls_pending.json (or --output).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from broker.security.certs import make_certs  # noqa: E402
from tests.support import api_versions_ok, free_port, rss_mib  # noqa: E402

PASSWORD = "bench-tls-pending"


class Broker:
    """``python -m broker`` of ``root`` with a PLAINTEXT and an SSL listener."""

    def __init__(self, root: str, certs: dict, overrides: dict) -> None:
        self.port, self.ssl_port = free_port(), free_port()
        while self.ssl_port == self.port:
            self.ssl_port = free_port()
        self.data_dir = tempfile.mkdtemp(prefix="bench-tls-pending-")
        listeners = f"PLAINTEXT://127.0.0.1:{self.port},SSL://127.0.0.1:{self.ssl_port}"
        settings = {"listeners": listeners, "advertised.listeners": listeners,
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
                    "ssl.keystore.type": "PKCS12",
                    "ssl.keystore.location": certs["paths"]["broker.p12"],
                    "ssl.keystore.password": certs["password"], **overrides}
        cmd = [sys.executable, "-m", "broker", "--metrics-port", "0", "--log-format", "json",
               "--data-dir", self.data_dir]
        for k, v in settings.items():
            cmd += ["--override", f"{k}={v}"]
        self.log = tempfile.TemporaryFile(prefix="bench-tls-pending-log-")
        self.proc = subprocess.Popen(cmd, cwd=root, env=dict(os.environ, PYTHONPATH=root),
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not api_versions_ok(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"broker did not start:\n{self.output()}")
            time.sleep(0.05)

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-3000:]

    def rss(self) -> float:
        return rss_mib(self.proc.pid)

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


def client_hello(certs: dict) -> bytes:
    """The first flight of a real TLS client (its ClientHello)."""
    ctx = ssl.create_default_context(cafile=certs["paths"]["ca.crt"])
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def settle(broker: Broker, limit_s: float) -> float:
    """Wait until RSS has not grown for 2 s (or limit_s passed); the peak RSS seen."""
    peak = broker.rss()
    stable_since = time.monotonic()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and time.monotonic() - stable_since < 2.0:
        time.sleep(0.25)
        now = broker.rss()
        if now > peak + 0.5:
            peak = now
            stable_since = time.monotonic()
    return max(peak, broker.rss())


def knows(root: str, setting: str) -> bool:
    with open(os.path.join(root, "broker", "config.py")) as f:
        return f'"{setting}"' in f.read()


def pending(args, certs: dict, tls: bool, first_bytes: bytes) -> dict:
    overrides = {"connections.max.idle.ms": 600000}
    if knows(args.root, "ssl.handshake.timeout.ms"):
        overrides["ssl.handshake.timeout.ms"] = 600000
    broker = Broker(args.root, certs, overrides)
    try:
        time.sleep(1)
        before = broker.rss()
        port = broker.ssl_port if tls else broker.port
        socks = []
        started = time.monotonic()
        for _ in range(args.connections):
            sock = socket.create_connection(("127.0.0.1", port))
            if first_bytes:
                sock.sendall(first_bytes)
            socks.append(sock)
        opened_s = time.monotonic() - started
        peak = settle(broker, args.settle_limit)
        # none was closed by the broker while RSS was read
        closed = 0
        for sock in socks:
            sock.setblocking(False)
            try:
                while True:
                    if sock.recv(65536) == b"":
                        closed += 1
                        break
            except BlockingIOError:
                pass
            except ConnectionError:
                closed += 1
        for sock in socks:
            sock.close()
        return {"connections": args.connections, "sent_bytes_each": len(first_bytes),
                "rss_before_mib": round(before, 1), "rss_mib": round(peak, 1),
                "kib_per_connection": round((peak - before) * 1024 / args.connections, 1),
                "closed_by_broker_meanwhile": closed, "seconds_to_open": round(opened_s, 1)}
    finally:
        broker.stop()


def bound(args, certs: dict) -> dict:
    """Seconds until the broker closes a silent connection to its SSL listener, by default."""
    broker = Broker(args.root, certs, {})
    try:
        sock = socket.create_connection(("127.0.0.1", broker.ssl_port))
        started = time.monotonic()
        sock.settimeout(args.bound_limit)
        try:
            closed = sock.recv(1) == b""
        except socket.timeout:
            closed = False
        except ConnectionError:
            closed = True
        waited = time.monotonic() - started
        sock.close()
        return {"closed": closed, "seconds": round(waited, 1), "limit_s": args.bound_limit}
    finally:
        broker.stop()


WORKLOADS = ("plaintext", "tls_silent", "tls_half_hello", "tls_full_hello")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=ROOT, help="checkout whose broker is measured")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--connections", type=int, default=2000)
    ap.add_argument("--settle-limit", type=float, default=60.0,
                    help="most seconds to wait for RSS to stop growing")
    ap.add_argument("--bound-limit", type=float, default=700.0,
                    help="most seconds the bound workload waits for the close")
    ap.add_argument("--output", default=os.path.join(HERE, "results", "tls_pending.json"))
    args = ap.parse_args()
    args.root = os.path.abspath(args.root)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    results = {"root": args.root, "commit": subprocess.run(
        ["git", "-C", args.root, "rev-parse", "--short", "HEAD"], capture_output=True,
        text=True).stdout.strip(), "openssl": ssl.OPENSSL_VERSION, "workloads": {}}
    with tempfile.TemporaryDirectory(prefix="bench-tls-pending-") as directory:
        certs = make_certs(directory, password=PASSWORD)
        hello = client_hello(certs)
        sends = {"plaintext": (False, b""), "tls_silent": (True, b""),
                 "tls_half_hello": (True, hello[:len(hello) // 2]),
                 "tls_full_hello": (True, hello)}
        for name in args.workloads.split(","):
            if name == "bound":
                result = bound(args, certs)
            else:
                result = pending(args, certs, *sends[name])
            results["workloads"][name] = result
            print(f"{name:15s} " + "  ".join(f"{k}={v}" for k, v in result.items()), flush=True)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
