"""How fast a new consumer group settles with real clients, on kbroker and on Apache Kafka 4.3.1
in the same run, quiet and beside CPU-bound neighbours.

    python benchmarks/bench_settle.py                       # the full table (~40 minutes)
    python benchmarks/bench_settle.py --quick               # kafka-python and aiokafka, 3 members
    python benchmarks/bench_settle.py --targets kbroker:0,kbroker:100,kbroker:300 \\
        --starts together --trials 4                        # sweep the initial rebalance delay
    python benchmarks/bench_settle.py --consumer            # KIP-848 members (~15 minutes)

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

``--assignor consumer[:uniform|:range]`` runs consumer-protocol members (group.protocol=consumer,
KIP-848; confluent-kafka and the Java client only), each broker at its own consumer-group
defaults (heartbeat interval 250 ms here, 5000 ms on Kafka; the initial rebalance delay does not
apply to them); a stall is then a phase that did not settle within 25 s. ``--churn 3`` adds to
the cells of 3 members started together the churn phases: member 0 leaves (after-leave), then a
new member joins (after-join); the after-join phase of a group of 3 is the third member's
subscribe() until all three hold disjoint covering assignments (``third_member_join`` in the
output). ``--consumer`` is the preset for that: ``--assignor consumer:uniform --clients
confluent-kafka,java --targets kbroker:default,kafka:default --loads quiet --churn 3 --out
benchmarks/results/settle-consumer.json`` (each can still be given).
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


PHASES = ("formed", "after-leave", "after-join")


def stats(times: list) -> tuple:
    done = [t for t in times if t is not None]
    return (round(statistics.median(done), 3) if done else None,
            round(max(done), 3) if done else None)


def phase_summary(trials: list[dict], name: str) -> dict:
    """One phase over the trials: a trial that never reached the phase counts as a stall."""
    found = [next((p for p in t["phases"] if p["phase"] == name), None) for t in trials]
    times = [p["settle_s"] if p and not p["stalled"] else None for p in found]
    median, top = stats(times)
    cell = {"median_s": median, "max_s": top,
            "stalls": sum(1 for p in found if p is None or p["stalled"]),
            "settle_s": [p["settle_s"] if p else None for p in found]}
    if name == "after-join":
        subscribed = [p.get("subscribe_s") if p and not p["stalled"] else None for p in found]
        cell["subscribe_median_s"], cell["subscribe_max_s"] = stats(subscribed)
        cell["subscribe_s"] = [p.get("subscribe_s") if p else None for p in found]
    return cell


def summary(trials: list[dict]) -> dict:
    """The cell: its formed phase at the top (the whole trial without --churn), and with the
    churn phases each phase under "phases"."""
    formed = phase_summary(trials, "formed")
    cell = {"median_s": formed["median_s"], "max_s": formed["max_s"],
            "stalls": sum(1 for t in trials if t["stalled"]),
            "trials": len(trials),
            "settle_s": formed["settle_s"],
            # assignment changes seen over all members: one per member means one rebalance
            "assignment_changes": [t["assignment_changes"] for t in trials]}
    if any(t["churn"] for t in trials):
        cell["phases"] = {name: phase_summary(trials, name) for name in PHASES}
    return cell


def show(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def neighbours(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", help="default kbroker:default,kbroker:0,kafka:default,"
                                              "kafka:0 (--consumer: kbroker:default,kafka:default)")
    parser.add_argument("--clients", help="default kafka-python,aiokafka,confluent-kafka,java "
                                              "(--consumer: confluent-kafka,java)")
    parser.add_argument("--sizes", default="1,3,10")
    parser.add_argument("--starts", default="together,one-by-one")
    parser.add_argument("--loads", help="default quiet,busy (--consumer: quiet)")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--assignor", help="range (default), roundrobin, sticky, "
                                               "cooperative-sticky, or consumer[:uniform|:range]: "
                                               "the consumer protocol (KIP-848)")
    parser.add_argument("--churn", default=None,
                        help="group sizes (e.g. 3,10) whose cells started together also run "
                             "the churn phases: a member leaves, then a new one joins")
    parser.add_argument("--consumer", action="store_true",
                        help="the KIP-848 preset: consumer:uniform members of confluent-kafka "
                             "and Java, kbroker and Kafka at their defaults, churn at 3")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.consumer:
        preset = {"targets": "kbroker:default,kafka:default", "clients": "confluent-kafka,java",
                  "loads": "quiet", "assignor": "consumer:uniform", "churn": "3",
                  "out": str(HERE / "results" / "settle-consumer.json")}
    else:
        preset = {"targets": "kbroker:default,kbroker:0,kafka:default,kafka:0",
                  "clients": "kafka-python,aiokafka,confluent-kafka,java", "loads": "quiet,busy",
                  "assignor": "range", "churn": "", "out": str(HERE / "results" / "settle.json")}
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.quick:
        args.clients, args.sizes, args.trials = "kafka-python,aiokafka", "3", 2
    clients = args.clients.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    starts = args.starts.split(",")
    loads = args.loads.split(",")
    churn = {int(s) for s in args.churn.split(",") if s}
    consumer = settle.consumer_protocol(args.assignor)
    if consumer and set(clients) - set(settle.CONSUMER_PROTOCOL_CLIENTS):
        parser.error(f"--assignor {args.assignor} (the consumer protocol) needs --clients among "
                     f"{','.join(settle.CONSUMER_PROTOCOL_CLIENTS)}")
    if 1 in churn:
        parser.error("--churn needs groups of 2 or more: a group of 1 is empty after the leave")

    targets = [Target(spec) for spec in args.targets.split(",")]
    started = time.perf_counter()
    results: dict = {t.name: {} for t in targets}
    join: dict = {t.name: {} for t in targets}   # the after-join phase of groups of 3
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
                            with_churn = start == "together" and size in churn
                            line = [f"{load:5} {client:15} {size:2} {start:10}"]
                            lines = {name: [f"{'':5} {'':15} {'':2} {name:10}"]
                                     for name in PHASES[1:]} if with_churn else {}
                            for t in targets:
                                partitions = max(6, size)
                                trials = settle.run(
                                    sys.executable, client=client,
                                    bootstrap=t.server.bootstrap, topic=t.topic(partitions),
                                    partitions=partitions, records=10 * partitions,
                                    members=size, start=start, trials=args.trials,
                                    assignor=args.assignor, churn=with_churn)
                                cell = summary(trials)
                                results[t.name].setdefault(load, {}).setdefault(
                                    client, {}).setdefault(str(size), {})[start] = cell
                                phases = cell.get("phases", {})
                                formed = phases.get("formed", cell)
                                line.append(f"{t.name}: {show(cell['median_s'])}/"
                                            f"{show(cell['max_s'])} s, {formed['stalls']} stalls")
                                for name, out in lines.items():
                                    p = phases[name]
                                    text = (f"{t.name}: {show(p['median_s'])}/"
                                            f"{show(p['max_s'])} s, {p['stalls']} stalls")
                                    if name == "after-join":
                                        text += (f" (from subscribe {show(p['subscribe_median_s'])}"
                                                 f"/{show(p['subscribe_max_s'])})")
                                    out.append(text)
                                if with_churn and size == 3:
                                    join[t.name].setdefault(load, {})[client] = \
                                        phases["after-join"]
                            print(" | ".join(line), flush=True)
                            for out in lines.values():
                                print(" | ".join(out), flush=True)
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
                       "assignor": args.assignor,
                       "protocol": "consumer" if consumer else "classic",
                       "churn_sizes": sorted(churn),
                       "session_timeout_ms": 45000 if consumer else 10000, "poll_ms": 100,
                       "cell": "median_s / max_s of the settled trials, stalls of all"},
        "results": results,
        # kbroker's JSON logs (a temporary file each, left in place); Kafka's go with its directory
        "logs": {t.name: t.server.log_path for t in targets
                 if isinstance(t.server, BrokerProcess)},
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    if any(join.values()):
        # the third member's subscribe() until all three hold disjoint covering assignments
        doc["third_member_join"] = join
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out} in {doc['wall_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
