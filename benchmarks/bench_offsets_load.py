"""Start-up after many offset commits: how long a restarted broker takes to load its consumer
groups, and whether it answers other requests meanwhile (issue 14, defect 6).

    python benchmarks/bench_offsets_load.py                        # 200k and 1M commits
    python benchmarks/bench_offsets_load.py --commits 200000 --root /tmp/before   # another tree

For each commit count a fresh broker process (``--data-dir`` in a temp dir) from ``--root``
(default: this checkout) gets ``--groups`` simple-consumer groups that commit ``--partitions``
partitions each, round after round, pipelined, until that many offsets are committed: the live
state is groups x partitions keys (20k by default) whatever the count. Then the broker runs
``--settle`` seconds (its log cleaner, if it has one, every ``log.cleaner.backoff.ms``, 1 s
here), is stopped with SIGTERM and started again on the same directory. Measured on the restart:

- ``first_answer_s``: spawn to the first ApiVersions answer;
- ``ready_s``: spawn to the first 200 from /ready (every coordinator shard loaded);
- ``replay_s`` and ``records``: the broker's own "offsets loaded" log line;
- ``api_versions_max_ms``: the slowest ApiVersions round trip on a fresh connection, sent every
  20 ms from the first answer to ready (how long the loading holds the event loop);
- ``offsets_topic_bytes``: the size of the ``__consumer_offsets-*`` directories before the restart;
- ``committed_ok``: an OffsetFetch after the restart returns the last committed offsets.

With ``--in-memory`` there is no restart: the broker runs without a data directory, and after
the commits and ``--settle`` seconds the result is its RSS (``rss_mib``, VmRSS) and the bytes
``__consumer_offsets`` holds (``offsets_topic_bytes``, from kafka_log_size_bytes), which the
in-memory log cleaner keeps near the live state.

Results are printed and written as JSON to benchmarks/results/offsets_load.json (or --output).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from tests.support import free_port, rss_mib  # noqa: E402

from protocol import messages as m  # noqa: E402
from protocol.framing import encode_request, read_response_header  # noqa: E402

TOPIC = "bench-load"


def api_versions_ms(port: int, timeout: float = 30.0) -> float:
    """An ApiVersions v0 round trip on a new connection, in ms (inf when none came back)."""
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            request = struct.pack(">hhih", 18, 0, 7, 5) + b"bench"
            sock.sendall(struct.pack(">i", len(request)) + request)
            size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
            sock.recv(size, socket.MSG_WAITALL)
    except (OSError, struct.error):
        return float("inf")
    return (time.monotonic() - t0) * 1000.0


def ready(metrics_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/ready", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


class Connection:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.correlation_id = 0

    def send(self, request, version: int) -> None:
        self.correlation_id += 1
        self.sock.sendall(encode_request(type(request).api_key, version, self.correlation_id,
                                         "bench", request))

    def receive(self, request_cls, version: int):
        api = m.APIS[request_cls.api_key]
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        _, offset = read_response_header(frame, api.response_header_version(version))
        return api.response.decode(frame, version, offset)

    def call(self, request, version: int):
        self.send(request, version)
        return self.receive(type(request), version)

    def _read(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        self.sock.close()


class Broker:
    def __init__(self, root: str, data_dir: str | None, overrides: dict) -> None:
        self.port = free_port()
        self.metrics_port = free_port()
        cmd = [sys.executable, "-m", "broker", "--port", str(self.port), "--metrics-port",
               str(self.metrics_port), "--log-format", "json"]
        if data_dir:
            cmd += ["--data-dir", data_dir]
        for k, v in overrides.items():
            cmd += ["--override", f"{k}={v}"]
        env = dict(os.environ, PYTHONPATH=root)
        self.log = tempfile.TemporaryFile(prefix="bench-load-log-")
        self.spawned = time.monotonic()
        self.proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_first_answer(self, limit: float = 120) -> float:
        deadline = time.monotonic() + limit
        while api_versions_ms(self.port, 1) == float("inf"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"broker did not start:\n{self.output()}")
            time.sleep(0.01)
        return time.monotonic() - self.spawned

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def events(self) -> list[dict]:
        out = []
        for line in self.output().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def commit(port: int, groups: list[str], partitions: int, commits: int) -> int:
    """Pipelined OffsetCommit v8 rounds until ``commits`` offsets are committed."""
    C = m.OffsetCommitRequest
    conn = Connection(port)
    done, round_no = 0, 0
    try:
        T = m.CreateTopicsRequest
        conn.call(T(topics=[T.CreatableTopic(name=TOPIC, num_partitions=partitions,
                                             replication_factor=1)], timeout_ms=5000), 7)
        while done < commits:
            sent = 0
            for group in groups:
                if done >= commits:
                    break
                conn.send(C(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                            topics=[C.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                                C.OffsetCommitRequestPartition(
                                    partition_index=p, committed_offset=round_no * 1000 + p,
                                    committed_metadata="") for p in range(partitions)])]), 8)
                sent += 1
                done += partitions
            for _ in range(sent):
                response = conn.receive(C, 8)
                codes = {p.error_code for t in response.topics for p in t.partitions}
                assert codes == {0}, codes
            round_no += 1
    finally:
        conn.close()
    return round_no


def fetch_ok(port: int, groups: list[str], partitions: int, last_round: int) -> bool:
    """Every group's committed offsets are those of its last round (retrying while loading)."""
    F = m.OffsetFetchRequest
    conn = Connection(port)
    try:
        for group in groups[:: max(1, len(groups) // 20)]:
            for _ in range(200):
                response = conn.call(F(group_id=group, topics=[F.OffsetFetchRequestTopic(
                    name=TOPIC, partition_indexes=list(range(partitions)))]), 5)
                if response.error_code != 14:  # COORDINATOR_LOAD_IN_PROGRESS
                    break
                time.sleep(0.05)
            got = {p.partition_index: p.committed_offset
                   for t in response.topics for p in t.partitions}
            # the last round may have stopped part way through the groups
            if not all(got[p] in (last_round * 1000 + p, (last_round - 1) * 1000 + p)
                       for p in range(partitions)):
                return False
        return True
    finally:
        conn.close()


def dir_bytes(data_dir: str, prefix: str) -> int:
    total = 0
    for name in os.listdir(data_dir):
        if name.startswith(prefix):
            path = os.path.join(data_dir, name)
            total += sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    return total


def offsets_topic_size(metrics_port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return int(sum(float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith('kafka_log_size_bytes{') and "__consumer_offsets" in line))


def run_in_memory(args, commits: int) -> dict:
    overrides = {"log.cleaner.backoff.ms": 1000}
    overrides.update(dict(o.split("=", 1) for o in args.override))
    groups = [f"bench-load-group-{i}" for i in range(args.groups)]
    broker = Broker(args.root, None, overrides)
    try:
        broker.wait_first_answer()
        start_rss = rss_mib(broker.proc.pid)
        t0 = time.monotonic()
        commit(broker.port, groups, args.partitions, commits)
        commit_s = time.monotonic() - t0
        time.sleep(args.settle)
        return {"commits": commits, "live_keys": args.groups * args.partitions,
                "commit_s": round(commit_s, 1), "rss_start_mib": round(start_rss, 1),
                "rss_mib": round(rss_mib(broker.proc.pid), 1),
                "offsets_topic_bytes": offsets_topic_size(broker.metrics_port)}
    finally:
        broker.stop()


def run(args, commits: int) -> dict:
    if args.in_memory:
        return run_in_memory(args, commits)
    data_dir = tempfile.mkdtemp(prefix="bench-load-")
    overrides = {"log.cleaner.backoff.ms": 1000}
    overrides.update(dict(o.split("=", 1) for o in args.override))
    groups = [f"bench-load-group-{i}" for i in range(args.groups)]
    try:
        first = Broker(args.root, data_dir, overrides)
        try:
            first.wait_first_answer()
            t0 = time.monotonic()
            rounds = commit(first.port, groups, args.partitions, commits)
            commit_s = time.monotonic() - t0
            time.sleep(args.settle)
        finally:
            first.stop()
        on_disk = dir_bytes(data_dir, "__consumer_offsets-")
        second = Broker(args.root, data_dir, overrides)
        try:
            first_answer = second.wait_first_answer()
            worst = 0.0
            while not ready(second.metrics_port):
                if second.proc.poll() is not None or time.monotonic() - second.spawned > 300:
                    raise RuntimeError(f"never ready:\n{second.output()[-3000:]}")
                worst = max(worst, api_versions_ms(second.port))
                time.sleep(0.02)
            ready_s = time.monotonic() - second.spawned
            ok = fetch_ok(second.port, groups, args.partitions, rounds - 1)
            loaded = [e for e in second.events()
                      if e.get("event") == "offsets loaded" and "partition" not in e]
        finally:
            second.stop()
        return {"commits": commits, "live_keys": args.groups * args.partitions,
                "commit_s": round(commit_s, 1), "offsets_topic_bytes": on_disk,
                "first_answer_s": round(first_answer, 3), "ready_s": round(ready_s, 3),
                "replay_s": loaded[0].get("seconds") if loaded else None,
                "records": loaded[0].get("records") if loaded else None,
                "api_versions_max_ms": round(worst, 1), "committed_ok": ok}
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", default="200000,1000000")
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--settle", type=float, default=20.0,
                        help="seconds the first broker runs after the commits")
    parser.add_argument("--in-memory", action="store_true",
                        help="no data directory: RSS and __consumer_offsets bytes after the "
                             "commits instead of a restart")
    parser.add_argument("--root", default=ROOT)
    parser.add_argument("--override", action="append", default=[], help="name=value")
    parser.add_argument("--output", default=os.path.join(HERE, "results", "offsets_load.json"))
    args = parser.parse_args()
    results = []
    for count in (int(c) for c in args.commits.split(",")):
        result = run(args, count)
        results.append(result)
        print(json.dumps(result), flush=True)
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump({"root": args.root, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
