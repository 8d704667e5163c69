"""How fast a new consumer group settles with real clients, on kbroker and on Apache Kafka 4.3.1
in the same run, quiet and beside CPU-bound neighbours.

    python benchmarks/bench_settle.py                       # the full table (~40 minutes)
    python benchmarks/bench_settle.py --quick               # kafka-python and aiokafka, 3 members
    python benchmarks/bench_settle.py --targets kbroker:0,kbroker:100,kbroker:300 \\
        --starts together --trials 4                        # sweep the initial rebalance delay

A target is ``kbroker:<delay>`` or ``kafka:<delay>`` (``group.initial.rebalance.delay.ms``;
``default`` leaves the broker's own default). Every target runs at once, each with a topic of
``max(6, members)`` partitions holding 10 records per partition; each cell (load, client, group
size, start) runs its trials on every target back to back, so a busy moment hits them alike.
A trial is ``tests/clients/settle.py``: a new group, its members started together or one by one,
polling every 100 ms, session timeout 10 s; the settle time runs from the start (of the last
member, one by one) until every member holds partitions, together they cover the topic and have
polled every record, and it stays so for a second. A stall is a trial that took 90% of the session
timeout or more: a member waited for the coordinator to expire another one.

"busy" runs two CPU-bound processes (``while True: pass``) beside the brokers and clients.
Prints one line per cell and writes ``benchmarks/results/settle.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
HERE = pathlib.Path(__file__).resolve().parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.clients import settle  # noqa: E402
from tests.conformance.kafka_server import KAFKA_VERSION, KafkaServer  # noqa: E402
from tests.support import BrokerProcess  # noqa: E402

DELAY = "group.initial.rebalance.delay.ms"


class Target:
    def __init__(self, spec: str) -> None:
        self.name = spec
        kind, _, delay = spec.partition(":")
        if kind not in ("kbroker", "kafka"):
            raise SystemExit(f"unknown target {spec!r}: kbroker:<delay> or kafka:<delay>")
        overrides = {} if delay in ("", "default") else {DELAY: int(delay)}
        self.server = KafkaServer(overrides=overrides) if kind == "kafka" else \
            BrokerProcess(overrides=overrides)
        if kind == "kafka" and DELAY not in overrides:
            # the conformance fixture's 0 is not Kafka's default: put Kafka's back
            self.server.overrides[DELAY] = 3000
        self.topics: dict[int, str] = {}

    def start(self) -> None:
        self.server.start()

    def topic(self, partitions: int) -> str:
        if partitions not in self.topics:
            name = f"settle-{partitions}"
            settle.prepare_topic(self.server.bootstrap, name, partitions, 10 * partitions)
            self.topics[partitions] = name
        return self.topics[partitions]

    def stop(self) -> None:
        self.server.stop()


def summary(trials: list[dict]) -> dict:
    times = [t["settle_s"][-1] for t in trials if not t["stalled"]]
    return {"median_s": round(statistics.median(times), 3) if times else None,
            "max_s": round(max(times), 3) if times else None,
            "stalls": sum(1 for t in trials if t["stalled"]),
            "trials": len(trials),
            "settle_s": [t["settle_s"][-1] for t in trials],
            # assignment changes seen over all members: one per member means one rebalance
            "assignment_changes": [t["assignment_changes"] for t in trials]}


def neighbours(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="kbroker:default,kbroker:0,kafka:default,kafka:0")
    parser.add_argument("--clients", default="kafka-python,aiokafka,confluent-kafka,java")
    parser.add_argument("--sizes", default="1,3,10")
    parser.add_argument("--starts", default="together,one-by-one")
    parser.add_argument("--loads", default="quiet,busy")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(HERE / "results" / "settle.json"))
    args = parser.parse_args()
    if args.quick:
        args.clients, args.sizes, args.trials = "kafka-python,aiokafka", "3", 2
    clients = args.clients.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    starts = args.starts.split(",")
    loads = args.loads.split(",")

    targets = [Target(spec) for spec in args.targets.split(",")]
    started = time.perf_counter()
    results: dict = {t.name: {} for t in targets}
    try:
        for t in targets:
            t.start()
        for load in loads:
            hogs = neighbours(2) if load == "busy" else []
            try:
                for client in clients:
                    for size in sizes:
                        for start in starts:
                            if start == "one-by-one" and size == 1:
                                continue  # the same as together
                            line = [f"{load:5} {client:15} {size:2} {start:10}"]
                            for t in targets:
                                partitions = max(6, size)
                                trials = settle.run(
                                    sys.executable, client=client,
                                    bootstrap=t.server.bootstrap, topic=t.topic(partitions),
                                    partitions=partitions, records=10 * partitions,
                                    members=size, start=start, trials=args.trials)
                                cell = summary(trials)
                                results[t.name].setdefault(load, {}).setdefault(
                                    client, {}).setdefault(str(size), {})[start] = cell
                                med = "-" if cell["median_s"] is None else f"{cell['median_s']:.2f}"
                                mx = "-" if cell["max_s"] is None else f"{cell['max_s']:.2f}"
                                line.append(f"{t.name}: {med}/{mx} s, {cell['stalls']} stalls")
                            print(" | ".join(line), flush=True)
            finally:
                for hog in hogs:
                    hog.kill()
                    hog.wait()
    finally:
        for t in targets:
            try:
                t.stop()
            except Exception:  # noqa: BLE001 - best effort
                pass
    doc = {
        "benchmark": "settle",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "loadavg_at_end": os.getloadavg()},
        "parameters": {"targets": [t.name for t in targets], "clients": clients,
                       "sizes": sizes, "starts": starts, "loads": loads,
                       "trials": args.trials, "kafka_version": KAFKA_VERSION,
                       "session_timeout_ms": 10000, "poll_ms": 100,
                       "cell": "median_s / max_s of the settled trials, stalls of all"},
        "results": results,
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out} in {doc['wall_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
