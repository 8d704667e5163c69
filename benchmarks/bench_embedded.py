"""How long the test fixture takes: an EmbeddedBroker from construction to its first ApiVersions
answer on a new connection, and its teardown (stop() until the thread has ended and the ports are
closed), in a warm process (the kafka_broker fixture of a session after the first) and in a cold
one (a new Python process: imports included, as the first fixture of a test session pays), with
one node and with three (``EmbeddedBroker(nodes=3)``: ready when every node has answered).

    python benchmarks/bench_embedded.py                  # 30 warm runs, 5 cold, 1 and 3 nodes
    python benchmarks/bench_embedded.py --warm 100 --cold 10 --nodes 1 3 5

Prints the median, 90th percentile and best of each and writes benchmarks/results/embedded.json.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import pathlib
import platform
import socket
import statistics
import struct
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"


def api_versions(port: int) -> None:
    """Connect and ask ApiVersions v0; return once the answer is read."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        body = sock.recv(size, socket.MSG_WAITALL)
        assert struct.unpack_from(">ih", body) == (1, 0), body[:6]


def quiet() -> None:
    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def one_run(nodes: int = 1) -> tuple[float, float]:
    """(start to first answer from every node, teardown) in seconds."""
    from broker.testing import EmbeddedBroker
    started = time.perf_counter()
    kb = EmbeddedBroker(nodes=nodes)
    kb.start()
    for address in kb.bootstrap_servers.split(","):
        api_versions(int(address.rsplit(":", 1)[1]))
    ready = time.perf_counter() - started
    started = time.perf_counter()
    kb.stop()
    return ready, time.perf_counter() - started


COLD = """
import sys, time
started = time.perf_counter()
sys.path.insert(0, {root!r})
sys.path.insert(0, {bench!r})
import bench_embedded
bench_embedded.quiet()
ready, teardown = bench_embedded.one_run({nodes})
print(time.perf_counter() - started - teardown, teardown)
"""


def cold_run(nodes: int = 1) -> tuple[float, float]:
    code = COLD.format(root=str(ROOT), bench=str(ROOT / "benchmarks"), nodes=nodes)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=str(ROOT)).stdout.split()
    return float(out[0]), float(out[1])


def summary(values: list[float]) -> dict:
    ordered = sorted(values)
    return {"median_ms": round(statistics.median(ordered) * 1000, 2),
            "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 2),
            "best_ms": round(ordered[0] * 1000, 2), "runs": len(ordered)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=30)
    parser.add_argument("--cold", type=int, default=5)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "embedded.json"))
    args = parser.parse_args()
    quiet()
    results = {"python": platform.python_version(), "cpus": os.cpu_count(), "by_nodes": {}}
    for nodes in args.nodes:
        one_run(nodes)  # the warm runs come after the imports
        warm = [one_run(nodes) for _ in range(args.warm)]
        cold = [cold_run(nodes) for _ in range(args.cold)]
        results["by_nodes"][str(nodes)] = {
            "warm": {"start_to_first_answer": summary([r for r, _ in warm]),
                     "teardown": summary([t for _, t in warm])},
            "cold": {"start_to_first_answer": summary([r for r, _ in cold]),
                     "teardown": summary([t for _, t in cold])}}
        for kind in ("warm", "cold"):
            for what in ("start_to_first_answer", "teardown"):
                s = results["by_nodes"][str(nodes)][kind][what]
                print(f"nodes {nodes} {kind:5} {what:22} median {s['median_ms']:8.2f} ms  p90 "
                      f"{s['p90_ms']:8.2f} ms  best {s['best_ms']:8.2f} ms  ({s['runs']} runs)")
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
