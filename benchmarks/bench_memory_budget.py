"""In-memory storage under a runaway producer (issue 14, defect 9): RSS and produce throughput
with log.memory.max.bytes at several values.

    python benchmarks/bench_memory_budget.py                  # 2 GiB; budgets -1, 256 MiB, 1 GiB
    python benchmarks/bench_memory_budget.py --mib 512 --budgets -1,268435456
    python benchmarks/bench_memory_budget.py --root /tmp/other-checkout --budgets none

For each budget a fresh in-memory broker from ``--root`` (``none``: the setting is not passed,
for a tree that does not know it) gets a 6-partition topic and ``--mib`` MiB of 1 KiB values
from one confluent-kafka producer (acks=1, linger.ms=5), nobody consuming. Reported: RSS of the
broker process (VmRSS) after start, its peak while producing (sampled every 0.2 s) and 3 s after
the producer finished, in MiB, and the produce rate in MB/s.

Results are printed and written as JSON to benchmarks/results/memory_budget.json (or --output).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from tests.support import free_port, rss_mib  # noqa: E402


def run(args, budget: str) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    port = free_port()
    cmd = [sys.executable, "-m", "broker", "--port", str(port), "--metrics-port", "0",
           "--log-format", "json"]
    if budget != "none":
        cmd += ["--override", f"log.memory.max.bytes={budget}"]
    log = tempfile.TemporaryFile(prefix="bench-memory-")
    proc = subprocess.Popen(cmd, cwd=args.root, env=dict(os.environ, PYTHONPATH=args.root),
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("broker did not start")
                time.sleep(0.05)
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for future in admin.create_topics([NewTopic("runaway", 6, 1)]).values():
            future.result(10)
        time.sleep(1)
        start_rss = rss_mib(proc.pid)
        peak = [start_rss]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], rss_mib(proc.pid))
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1,
                             "queue.buffering.max.kbytes": 65536})
        value = b"v" * 1024
        count = args.mib * 1024
        t0 = time.monotonic()
        for i in range(count):
            while True:
                try:
                    producer.produce("runaway", value=value, partition=i % 6)
                    break
                except BufferError:
                    producer.poll(0.01)
        assert producer.flush(120) == 0
        seconds = time.monotonic() - t0
        del producer
        done.set()
        sampler.join()
        time.sleep(3)
        return {"budget": budget, "produced_mib": args.mib,
                "rss_start_mib": round(start_rss, 1), "rss_peak_mib": round(peak[0], 1),
                "rss_after_mib": round(rss_mib(proc.pid), 1),
                "produce_mb_s": round(count * 1024 / seconds / 1e6, 1)}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=2048)
    parser.add_argument("--budgets", default="-1,268435456,1073741824")
    parser.add_argument("--root", default=ROOT)
    parser.add_argument("--output", default=os.path.join(HERE, "results", "memory_budget.json"))
    args = parser.parse_args()
    results = []
    for budget in args.budgets.split(","):
        result = run(args, budget)
        results.append(result)
        print(json.dumps(result), flush=True)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump({"root": args.root, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
