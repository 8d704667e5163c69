"""How fast two Kafka Streams 4.3 instances share and hand over their tasks, on kbroker and on
Apache Kafka 4.3.1 in the same run, with the streams rebalance protocol (KIP-1071) and the
classic one.

    python benchmarks/bench_streams.py                  # 3 trials per cell (~10 minutes)
    python benchmarks/bench_streams.py --trials 5 --protocols streams

A trial is kbroker.StreamsGroupScenarios ``wordcount`` (tests/java; build the jar first with
``mvn -B -q -f tests/java/pom.xml package``): an exactly_once_v2 word count over a 3-partition
input (6 tasks), instance "a" started and owning every task, then instance "b" started
(``join``: until both process records, 3 tasks each), then "b" closed (``handover``: until "a"
owns all 6 again, including b's own close). Each broker runs with its defaults (here the
group.streams.* stand-ins of docs/streams-groups.md, on Kafka its 5 s heartbeat and 3 s initial
rebalance delay). Prints the median and range of each cell, with the median time "b" took to
close (part of the handover), and writes benchmarks/results/streams.json.

The Streams client's own fetch long-polls bound both times: b's close waits for its main
consumer's parked Fetch (``fetch.max.wait.ms``, 500 ms by default) before closing its fetch
session, and a's restore consumer picks up the changelogs of the tasks it takes over only after
its parked Fetch returns. ``--client-config consumer.fetch.max.wait.ms=100`` (on both brokers)
shows the times without that floor.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conformance.kafka_server import KafkaServer  # noqa: E402
from tests.support import BrokerProcess, unique  # noqa: E402

JAR = ROOT / "tests" / "java" / "target" / "client-scenarios.jar"


def trial(port: int, protocol: str, client_config: list[str] = ()) -> dict:
    app = unique(f"bench-{protocol}")
    with tempfile.TemporaryDirectory() as state:
        out = subprocess.run(
            ["java", *[f"-Dstreams.{c}" for c in client_config],
             "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", str(JAR),
             "kbroker.StreamsGroupScenarios", "wordcount", f"127.0.0.1:{port}", f"{app}-in",
             f"{app}-out", app, state, "30", protocol],
            capture_output=True, text=True, timeout=300).stdout
    lines = [json.loads(raw) for raw in out.splitlines() if raw.startswith("{")]
    join = next(line for line in lines if "both_processing" in line)
    handover = next(line for line in lines if "a_owns_all_after_b_left" in line)
    if not (join["both_processing"] and handover["a_owns_all_after_b_left"]):
        raise RuntimeError(f"trial failed: {lines}")
    return {"join_ms": join["ms"], "handover_ms": handover["ms"],
            "close_ms": handover["close_ms"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--protocols", default="streams,classic")
    parser.add_argument("--targets", default="kbroker,kafka")
    parser.add_argument("--client-config", action="append", default=[], metavar="NAME=VALUE",
                        help="a Streams config for both instances on every broker (repeatable), "
                             "e.g. consumer.fetch.max.wait.ms=100")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "streams.json"))
    args = parser.parse_args()
    results: dict = {"client_config": args.client_config, "cells": []}
    servers = {}
    if "kbroker" in args.targets:
        servers["kbroker"] = BrokerProcess()
    if "kafka" in args.targets:
        servers["kafka"] = KafkaServer()
    try:
        for server in servers.values():
            server.start()
        print(f"{'broker':8} {'protocol':8} {'join ms (median, range)':>28} "
              f"{'handover ms (median, range)':>30} {'of it b closing':>16}")
        for protocol in args.protocols.split(","):
            for name, server in servers.items():
                trials = [trial(server.port, protocol, args.client_config)
                          for _ in range(args.trials)]
                joins = [t["join_ms"] for t in trials]
                handovers = [t["handover_ms"] for t in trials]
                closes = [t["close_ms"] for t in trials]
                results["cells"].append({"broker": name, "protocol": protocol,
                                         "trials": trials})
                print(f"{name:8} {protocol:8} "
                      f"{statistics.median(joins):>10.0f} ({min(joins):.0f}-{max(joins):.0f})"
                      f"{'':>6}{statistics.median(handovers):>10.0f} "
                      f"({min(handovers):.0f}-{max(handovers):.0f})"
                      f"{statistics.median(closes):>12.0f}", flush=True)
    finally:
        for server in servers.values():
            server.stop()
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    pathlib.Path(args.out).write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
