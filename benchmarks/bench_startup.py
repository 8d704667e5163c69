"""Start-up: from spawning ``python -m broker`` (in memory, default settings) to the first
ApiVersions answer on its port, cold (a copy of the source tree without bytecode, and none
written) and warm (the same copy with its bytecode cache, as after ``pip install``), with Kafka
4.3.1 in the same run (``kafka.Kafka`` on a formatted log directory, spawn to the first answer).

    python benchmarks/bench_startup.py              # median of 5 of each
    python benchmarks/bench_startup.py --runs 9 --no-kafka

Prints each run and the medians, and writes benchmarks/results/startup.json. ``python_bare``
is ``python -c pass`` on the same machine: the interpreter's own start, with whatever .pth files
its site-packages run at every start (an editable install's finder, a sandbox's certifi patch),
which every kbroker start pays too. With
``--importtime`` it also prints the 25 modules whose own import takes longest in a warm start.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answered(port: int) -> bool:
    """One ApiVersions v0 exchange; False while nothing listens on the port yet."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
            head = sock.recv(4, socket.MSG_WAITALL)
            if len(head) < 4:
                return False
            body = sock.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
            return struct.unpack_from(">ih", body) == (1, 0)
    except OSError:
        return False


def spawn_to_answer(cmd: list[str], port: int, env: dict, cwd: str,
                    timeout: float = 120.0, graceful: bool = False) -> tuple[float, float]:
    """(seconds from spawning ``cmd`` to its first ApiVersions answer on ``port``, CPU seconds
    the process used in all, its stop included); the process is killed after the answer, so
    its CPU time is nearly all start-up (and unlike the wall time, hardly moved by other
    processes on the machine). ``graceful``: stopped with SIGTERM instead (Kafka, whose next
    start on the same log directory would otherwise recover from an unclean shutdown)."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while not answered(port):
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd[:3]} exited with {proc.returncode}")
            if time.perf_counter() - started > timeout:
                raise RuntimeError(f"{cmd[:3]} did not answer within {timeout} s")
            time.sleep(0.002)
        wall = time.perf_counter() - started
    finally:
        if proc.returncode is None:
            # wait4 below reaps it: Kafka exits within seconds of a SIGTERM
            proc.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = -1
    return wall, usage.ru_utime + usage.ru_stime


def source_copy() -> str:
    """The packages ``python -m broker`` imports, copied without any bytecode."""
    where = tempfile.mkdtemp(prefix="kbroker-startup-")
    for package in ("broker", "protocol"):
        shutil.copytree(ROOT / package, os.path.join(where, package),
                        ignore=shutil.ignore_patterns("__pycache__"))
    return where


def kbroker_runs(runs: int, cold: bool) -> list[tuple[float, float]]:
    where = source_copy()
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if cold:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:  # the caller's environment may say not to write bytecode (a CI's often does)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        results = []
        if not cold:  # one start writes the bytecode cache; it is not counted
            port = free_port()
            spawn_to_answer(kbroker_command(port), port, env, where)
        for _ in range(runs):
            port = free_port()
            results.append(spawn_to_answer(kbroker_command(port), port, env, where))
        return results
    finally:
        shutil.rmtree(where, ignore_errors=True)


def bare_python_runs(runs: int) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of ``python -c pass``: the interpreter's own start with this
    machine's site-packages (.pth files run at every start), part of every kbroker start."""
    results = []
    for _ in range(runs):
        before = os.times()
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        wall = time.perf_counter() - started
        after = os.times()
        results.append((wall, (after.children_user - before.children_user)
                        + (after.children_system - before.children_system)))
    return results


def kbroker_command(port: int) -> list[str]:
    return [sys.executable, "-m", "broker", "--port", str(port), "--metrics-port", "0"]


def kafka_runs(runs: int) -> list[tuple[float, float]]:
    from tests.conformance.kafka_server import KafkaServer
    server = KafkaServer(wait_for_coordinator=False)
    server.start()  # formats the log directory; the first start is not counted
    server.halt()
    try:
        results = []
        config = os.path.join(server.workdir, "server.properties")
        for _ in range(runs):
            results.append(spawn_to_answer(server._java("kafka.Kafka", config, heap=server.heap),
                                           server.port, dict(os.environ), server.workdir,
                                           graceful=True))
        return results
    finally:
        server.stop()


def importtime() -> list[tuple[int, str]]:
    """(microseconds, module) of a warm start's imports, longest own time first."""
    where = source_copy()
    port = free_port()
    try:
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        spawn_to_answer(kbroker_command(port), port, env, where)  # writes the cache
        proc = subprocess.Popen([sys.executable, "-X", "importtime", *kbroker_command(port)[1:]],
                                cwd=where, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        started = time.perf_counter()
        while not answered(port) and time.perf_counter() - started < 60:
            time.sleep(0.005)
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    rows = []
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            own, _, name = line[len("import time:"):].split("|")
            rows.append((int(own), name.rstrip()))
    return sorted(rows, reverse=True)


def ms(values: list[float]) -> list[float]:
    return [round(v * 1000, 1) for v in values]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-kafka", action="store_true", help="kbroker only")
    parser.add_argument("--importtime", action="store_true")
    args = parser.parse_args()

    results = {"python": platform.python_version(), "cpus": os.cpu_count(), "runs": args.runs}
    runs = {"python_bare": bare_python_runs(args.runs),
            "kbroker_cold": kbroker_runs(args.runs, cold=True),
            "kbroker_warm": kbroker_runs(args.runs, cold=False)}
    if not args.no_kafka:
        runs["kafka"] = kafka_runs(args.runs)
    for name, values in runs.items():
        wall = [w for w, _ in values]
        cpu = [c for _, c in values]
        results[name] = {"ms": ms(wall), "median_ms": round(statistics.median(wall) * 1000, 1),
                         "cpu_ms": ms(cpu),
                         "median_cpu_ms": round(statistics.median(cpu) * 1000, 1)}
        print(f"{name:14} median {results[name]['median_ms']:8.1f} ms  "
              f"(CPU {results[name]['median_cpu_ms']:7.1f} ms)   runs {results[name]['ms']}")
    if "kafka" in results:
        results["kafka"]["version"] = "4.3.1"
        results["ratio_cold"] = round(results["kbroker_cold"]["median_ms"]
                                      / results["kafka"]["median_ms"], 3)
        print(f"cold / Kafka: {results['ratio_cold']}")
    if args.importtime:
        rows = importtime()
        print(f"\nslowest own imports of a warm start (total {sum(r[0] for r in rows) / 1000:.1f}"
              " ms):")
        for own, name in rows[:25]:
            print(f"  {own / 1000:7.1f} ms  {name}")
        results["importtime_top"] = [[name.strip(), own] for own, name in rows[:25]]
    out = ROOT / "benchmarks" / "results" / "startup.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
