"""How long requests wait while the transaction coordinator aborts transactions past their
timeout: N Ongoing transactions (1 ms timeout) in an EmbeddedBroker, a client asking ApiVersions
back to back on one connection, and the sweep started; the client's longest and 99th-percentile
wait while the sweep runs, and how long the sweep takes. ``--slice`` sets how many transactions
a slice aborts (``--slice N`` is the one pass of before).

    python benchmarks/bench_txn_sweep.py                       # 10,000 transactions, slice 100
    python benchmarks/bench_txn_sweep.py --slice 10000         # one pass, for comparison

Prints the numbers and writes benchmarks/results/txn_sweep.json.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import gc
import json
import logging
import pathlib
import platform
import socket
import statistics
import struct
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"


def quiet() -> None:
    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def open_transactions(kb, topic: str, n: int) -> None:
    coordinator = kb.broker.transactions
    done: concurrent.futures.Future = concurrent.futures.Future()
    left = [n]

    def added(error) -> None:
        left[0] -= 1
        if not left[0]:
            done.set_result(None)

    def start() -> None:
        for i in range(n):
            tid = f"bench-{i}"
            coordinator.init_producer_id(
                tid, 1, None, lambda e, pid, epoch, tid=tid, i=i: coordinator.add_partitions(
                    tid, pid, epoch, [(topic, i % 3)], 0, added))

    kb.call(start)
    done.result(timeout=300)


def ongoing(kb) -> int:
    from broker.coordinator.transaction.metadata import TransactionState

    def count() -> int:
        return sum(md.state is TransactionState.ONGOING for shard in kb.broker.transactions.shards
                   for md in shard.transactions.values())
    return kb.call(count)


def run(n: int, slice_size: int) -> dict:
    from broker.coordinator.transaction import coordinator as txn
    from broker.testing import EmbeddedBroker
    txn.SWEEP_SLICE = slice_size
    settings = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 3_600_000}
    with EmbeddedBroker(settings) as kb:
        topic = kb.create_topic(partitions=3)
        open_transactions(kb, topic, n)
        waits: list[float] = []
        stop = threading.Event()

        def probe() -> None:
            with socket.create_connection(("127.0.0.1", kb.port), timeout=60) as sock:
                frame = struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0
                while not stop.is_set():
                    started = time.perf_counter()
                    sock.sendall(frame)
                    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
                    sock.recv(size, socket.MSG_WAITALL)
                    waits.append(time.perf_counter() - started)

        pauses: list[float] = []

        def collection(phase: str, info: dict) -> None:
            if phase == "start":
                collection.started = time.perf_counter()
            elif info["generation"] == 2:
                pauses.append(time.perf_counter() - collection.started)

        prober = threading.Thread(target=probe)
        prober.start()
        time.sleep(0.2)
        before = len(waits)
        gc.callbacks.append(collection)
        started = time.perf_counter()
        kb.loop.call_soon_threadsafe(kb.broker.transactions.abort_timed_out_transactions)
        while ongoing(kb):
            time.sleep(0.05)
        took = time.perf_counter() - started
        gc.callbacks.remove(collection)
        stop.set()
        prober.join()
        during = sorted(waits[before:]) or [0.0]
    return {"transactions": n, "slice": slice_size, "sweep_s": round(took, 3),
            "requests_during": len(during),
            "max_wait_ms": round(during[-1] * 1000, 2),
            "p99_wait_ms": round(during[int(len(during) * 0.99) - 1 if len(during) > 1 else 0]
                                 * 1000, 2),
            "median_wait_ms": round(statistics.median(during) * 1000, 3),
            # full collections of the garbage collector meanwhile: the process's pause, with
            # or without a sweep, grows with the objects alive (10,000 transactions: ~60,000)
            "gen2_collections": len(pauses),
            "longest_gen2_ms": round(max(pauses, default=0.0) * 1000, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=10_000)
    parser.add_argument("--slice", type=int, nargs="+", default=[100])
    args = parser.parse_args()
    quiet()
    results = []
    for slice_size in args.slice:
        result = run(args.transactions, slice_size)
        results.append(result)
        print(f"{result['transactions']} transactions, slice {result['slice']}: sweep "
              f"{result['sweep_s']} s; {result['requests_during']} ApiVersions meanwhile, "
              f"longest wait {result['max_wait_ms']} ms, p99 {result['p99_wait_ms']} ms, "
              f"median {result['median_wait_ms']} ms; {result['gen2_collections']} full "
              f"collections meanwhile, longest {result['longest_gen2_ms']} ms")
    out = ROOT / "benchmarks" / "results" / "txn_sweep.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.machine(), "python": platform.python_version(),
                               "results": results}, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
