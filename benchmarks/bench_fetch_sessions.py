"""A consumer of 1,000 partitions (10 topics x 100) at steady state, nothing new to read: what
the broker spends on it with full fetches and with fetch sessions (KIP-227), on kbroker and on
Apache Kafka 4.3.1 in the same run.

    python benchmarks/bench_fetch_sessions.py                 # both brokers, ~5 minutes
    python benchmarks/bench_fetch_sessions.py --brokers kbroker --seconds 5

The consumer is a raw-protocol client sending Fetch v18 for every partition at its end offset,
one request at a time, as a caught-up consumer does:

- ``full``: every fetch is a full one without a session (session epoch -1, all 1,000
  partitions in every request and every answer);
- ``session``: one full fetch at epoch 0 creates a session, then incremental fetches name no
  partition and get an empty answer.

Each mode runs twice: ``long-poll`` (max_wait_ms 500, min_bytes 1: the consumer's defaults, so
about two fetches a second) for ``--long-poll-seconds``, and ``tight`` (max_wait_ms 0) for
``--seconds``, which gives the broker's CPU per fetch. Broker CPU is the run time of its
threads (/proc/<pid>/task/*/schedstat, in ns) over the run, less what the idle broker spends
in as long (measured first). Bytes are the request and response frames on the wire.

Prints the numbers and writes benchmarks/results/fetch_sessions.json (or --output).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from protocol import messages as m  # noqa: E402
from protocol.framing import encode_request  # noqa: E402
from tests.support import BrokerProcess, RawClient  # noqa: E402

TOPICS, PARTITIONS = 10, 100
VERSION = 18
F = m.FetchRequest


def cpu_seconds(pid: int) -> float:
    """The process's CPU time: its threads' run time in ns (/proc/<pid>/task/*/schedstat), plus
    what its exited threads spent (utime+stime of children are not counted: there are none)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass  # the thread ended between the listing and the read
    return total / 1e9


def setup(port: int, prefix: str) -> list:
    """The topics, created and readable; returns their ids."""
    client = RawClient(port, "bench-admin")
    names = [f"{prefix}-{i}" for i in range(TOPICS)]
    C = m.CreateTopicsRequest
    client.call(C(topics=[C.CreatableTopic(name=n, num_partitions=PARTITIONS,
                                           replication_factor=1, assignments=[], configs=[])
                          for n in names], timeout_ms=60000), 5)
    deadline = time.monotonic() + 120
    while True:
        meta = client.call(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(
            name=n) for n in names], allow_auto_topic_creation=False), 12)
        if all(t.error_code == 0 and len(t.partitions) == PARTITIONS
               and all(p.leader_id >= 0 for p in t.partitions) for t in meta.topics):
            ids = [t.topic_id for t in meta.topics]
            answer = client.call(request(ids, 0, -1, 0), VERSION)
            if all(p.error_code == 0 for t in answer.responses for p in t.partitions):
                client.close()
                return ids
        if time.monotonic() > deadline:
            raise SystemExit(f"topics not ready: {meta}")
        time.sleep(0.5)


def request(ids, session_id: int, epoch: int, max_wait_ms: int, partitions: bool = True):
    return F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=50 << 20,
             isolation_level=0, session_id=session_id, session_epoch=epoch,
             topics=[F.FetchTopic(topic_id=t, partitions=[
                 F.FetchPartition(partition=p, fetch_offset=0, log_start_offset=-1,
                                  partition_max_bytes=1 << 20) for p in range(PARTITIONS)])
                     for t in ids] if partitions else [],
             forgotten_topics_data=[], rack_id="")


class Wire:
    """Sends prepared frames and reads raw answers, counting bytes."""

    def __init__(self, port: int) -> None:
        self.client = RawClient(port, "bench-consumer")
        self.correlation = 0

    def call(self, req, decode: bool = False):
        self.correlation += 1
        frame = encode_request(F.api_key, VERSION, self.correlation, "bench-consumer", req)
        self.client.sock.sendall(frame)
        size = struct.unpack(">i", self.client._read(4))[0]
        body = self.client._read(size)
        answer = None
        if decode:
            from protocol.framing import read_response_header
            _cid, offset = read_response_header(body, 1)
            answer = m.FetchResponse.decode(body, VERSION, offset)
        return len(frame), size + 4, answer


def run_mode(port: int, pid: int, ids, mode: str, max_wait_ms: int, seconds: float) -> dict:
    wire = Wire(port)
    session_id, epoch = 0, -1
    if mode == "session":
        _s, _r, answer = wire.call(request(ids, 0, 0, 0), decode=True)
        session_id, epoch = answer.session_id, 1
        assert session_id > 0 and answer.error_code == 0, answer.error_code
    fetches, sent, received = 0, 0, 0
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    while time.monotonic() - t0 < seconds:
        if mode == "session":
            req = request(ids, session_id, epoch, max_wait_ms, partitions=False)
            epoch += 1
        else:
            req = request(ids, 0, -1, max_wait_ms)
        s, r, _ = wire.call(req)
        fetches += 1
        sent += s
        received += r
    elapsed = time.monotonic() - t0
    cpu = cpu_seconds(pid) - cpu0
    wire.client.close()
    return {"fetches": fetches, "seconds": round(elapsed, 2), "cpu_s": round(cpu, 3),
            "request_bytes": sent // fetches, "response_bytes": received // fetches}


def measure(name: str, port: int, pid: int, seconds: float, long_poll_seconds: float) -> dict:
    ids = setup(port, f"bench-fs-{int(time.time())}")
    time.sleep(2)
    c0 = cpu_seconds(pid)
    time.sleep(long_poll_seconds)
    idle = (cpu_seconds(pid) - c0) / long_poll_seconds
    out = {"idle_cpu_per_s": round(idle, 4)}
    for mode in ("full", "session"):
        for how, wait in (("long-poll", 500), ("tight", 0)):
            r = run_mode(port, pid, ids, mode, wait, long_poll_seconds if wait else seconds)
            busy = max(r["cpu_s"] / r["seconds"] - idle, 0.0)
            r["cpu_per_s"] = round(busy, 4)
            r["cpu_ms_per_fetch"] = round(1000 * busy * r["seconds"] / r["fetches"], 3)
            out[f"{mode} {how}"] = r
            print(f"{name:8} {mode:8} {how:9} fetches={r['fetches']:6} "
                  f"cpu/s={busy:.4f} cpu/fetch={r['cpu_ms_per_fetch']:.3f}ms "
                  f"req={r['request_bytes']}B resp={r['response_bytes']}B", flush=True)
    for how in ("long-poll", "tight"):
        full, sess = out[f"full {how}"], out[f"session {how}"]
        out[f"cpu_ratio {how}"] = round(full["cpu_ms_per_fetch"]
                                        / max(sess["cpu_ms_per_fetch"], 1e-6), 1)
        print(f"{name:8} {how:9} full/session CPU per fetch: {out[f'cpu_ratio {how}']}x",
              flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--brokers", default="kbroker,kafka")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--long-poll-seconds", type=float, default=30.0)
    ap.add_argument("--output", default=os.path.join(HERE, "results", "fetch_sessions.json"))
    args = ap.parse_args()
    results = {"machine": platform.machine(), "python": platform.python_version(),
               "partitions": TOPICS * PARTITIONS, "fetch_version": VERSION}
    for name in args.brokers.split(","):
        if name == "kbroker":
            server = BrokerProcess()
            server.start()
            try:
                results[name] = measure(name, server.port, server.proc.pid, args.seconds,
                                        args.long_poll_seconds)
            finally:
                server.stop()
        else:
            from tests.conformance.kafka_server import KafkaServer
            server = KafkaServer()
            server.start()
            try:
                results[name] = measure(name, server.port, server.proc.pid, args.seconds,
                                        args.long_poll_seconds)
            finally:
                server.stop()
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
