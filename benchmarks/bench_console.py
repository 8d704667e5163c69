"""Web console benchmark (broker/console): page load and JSON endpoint response times with
1,000 topics and 1,000 groups, and the broker's heartbeats/s with and without a console open.

    python benchmarks/bench_console.py [--topics 1000] [--groups 1000] [--flood-seconds 8]
                                       [--out benchmarks/results/console.json]

About a minute and a half on 2 cores. One broker process (metrics.port on a free port):

1. 1,000 topics (one partition each, ten records in each of the first 50) are created with
   CreateTopics; 1,000 classic groups of one member each are formed by simulated members
   (benchmarks/loadgen.py, one connection each while joining) and commit an offset each, so
   every group has members, an assignment, offsets and lag; the members then move onto shared
   connections (25 each) and heartbeat every 3 s, as idle consumers do.
2. Page load: the requests the page makes before it shows the topic list (/, console.js,
   console.css, /api/overview, /api/topics first page), timed over HTTP, 20 times; and, when
   Debian's Chromium and chromedriver are installed, the time a headless Chromium takes from
   navigation until the topic table is drawn, 5 times.
3. Each JSON endpoint the page uses, 20 times: median and 95th percentile.
4. Heartbeats/s: loadgen.heartbeat_flood (4096 Heartbeats in flight over the shared
   connections) for --flood-seconds, alternately without a console and with one open (a
   poller requesting what the groups page and the broker page request, every 2 s as the page
   does), twice each; and once with a poller at 10 requests/s to show the cost per request.

The machine is shared; numbers are noisy, and the with/without runs alternate to spread that.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import shutil
import statistics
import sys
import time

ROOT = str(pathlib.Path(__file__).resolve().parent.parent)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import loadgen as lg  # noqa: E402
from protocol.messages import (CreateTopicsRequest, OffsetCommitRequest,  # noqa: E402
                               ProduceRequest)
from protocol.records import build_batch  # noqa: E402
from tests.support import BrokerProcess, free_port  # noqa: E402

HOST = "127.0.0.1"
POLL_S = 2.0           # the page's polling interval (console.js POLL_MS)
API_PRODUCE, API_OFFSET_COMMIT = 0, 8


async def http_get(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\n\r\n".encode())
        await writer.drain()
        data = await reader.read()  # the endpoint closes after each answer
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def summary(samples: list[float]) -> dict:
    ordered = sorted(samples)
    return {"median_ms": round(statistics.median(ordered), 2),
            "p95_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 2),
            "max_ms": round(ordered[-1], 2), "n": len(ordered)}


async def timed(port: int, paths: list[str], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for path in paths:
            status, _ = await http_get(port, path)
            if status != 200:
                raise RuntimeError(f"GET {path}: {status}")
        out.append((time.perf_counter() - t) * 1000)
    return out


async def setup(broker: BrokerProcess, topics: int, groups: int) -> tuple[list, list, dict]:
    versions = await lg.negotiate(HOST, broker.port)
    admin = await lg.Connection(HOST, broker.port, "bench-console-admin").open()
    names = [f"bench-t-{i:04d}" for i in range(topics)]
    for start in range(0, topics, 250):
        resp = await admin.call(CreateTopicsRequest(topics=[
            CreateTopicsRequest.CreatableTopic(name=n, num_partitions=1, replication_factor=1,
                                               assignments=[], configs=[])
            for n in names[start:start + 250]], timeout_ms=30000),
            versions[lg.API_CREATE_TOPICS], timeout=60)
        bad = [t for t in resp.topics if t.error_code]
        if bad:
            raise RuntimeError(f"CreateTopics: {bad[:3]}")
    batch = build_batch([(b"k", b'{"n": 1}')] * 10)
    for n in names[:50]:
        resp = await admin.call(ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000,
                                               topic_data=[ProduceRequest.TopicProduceData(
                                                   name=n, partition_data=[
                                                       ProduceRequest.PartitionProduceData(
                                                           index=0, records=batch)])]),
                                9, timeout=30)
    pool = await lg.open_connections(HOST, broker.port, min(groups, 500), "console-form")
    members: list = []
    group_ids = [f"bench-g-{i:04d}" for i in range(groups)]
    for start in range(0, groups, len(pool)):
        wave = lg.place_members(pool, group_ids[start:start + len(pool)], 1)
        for m in wave:
            m.index += start + 10_000_000
        await lg.form_groups(wave, versions, 120, 30000, 30000, 1, 0.5)
        # each member commits offset 5 of "its" topic: lag 5 where the topic has 10 records
        await asyncio.gather(*(m.conn.call(OffsetCommitRequest(
            group_id=m.group_id, generation_id_or_member_epoch=m.generation,
            member_id=m.member_id, group_instance_id=None, retention_time_ms=-1,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                name=names[i % topics], partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                        committed_metadata="")])]), 8, timeout=30)
            for i, m in enumerate(wave, start)))
        members += wave
    shared = await lg.open_connections(HOST, broker.port, -(-len(members) // 25), "console-hb")
    for i, m in enumerate(members):
        m.conn = shared[i // 25]
    await asyncio.gather(*(c.close() for c in pool))
    await admin.close()
    return members, shared, versions


class Poller:
    """A console open on the groups page and the broker page: what they request, every
    ``interval`` seconds."""

    def __init__(self, port: int, interval: float, paths: list[str]) -> None:
        self.port = port
        self.interval = interval
        self.paths = paths
        self.requests = 0
        self.latencies: list[float] = []
        self.task = None

    async def _run(self) -> None:
        while True:
            t = time.perf_counter()
            for path in self.paths:
                started = time.perf_counter()
                await http_get(self.port, path)
                self.latencies.append((time.perf_counter() - started) * 1000)
                self.requests += 1
            await asyncio.sleep(max(0.0, self.interval - (time.perf_counter() - t)))

    def start(self) -> None:
        self.task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass


def browser_load_ms(url: str, repeats: int) -> list[float] | str:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        return "skipped: Debian's chromium and chromium-driver are not installed"
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return "skipped: selenium is not installed"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    out = []
    try:
        for _ in range(repeats):
            browser.get("about:blank")
            t = time.perf_counter()
            browser.get(url)
            deadline = t + 30
            while not browser.find_elements("css selector", "#topics-table tbody tr"):
                if time.perf_counter() > deadline:
                    raise RuntimeError("the topic table did not appear")
                time.sleep(0.005)
            out.append((time.perf_counter() - t) * 1000)
    finally:
        browser.quit()
    return out


async def run(args) -> dict:
    mport = free_port()
    broker = BrokerProcess(overrides={"metrics.port": mport, "max.connections": 20000,
                                      "group.initial.rebalance.delay.ms": 0})
    broker.start()
    result: dict = {"topics": args.topics, "groups": args.groups}
    try:
        t = time.perf_counter()
        members, shared, versions = await setup(broker, args.topics, args.groups)
        result["setup_seconds"] = round(time.perf_counter() - t, 1)
        idle = lg.IdleHeartbeats(members, versions, 3.0)
        idle.start()
        try:
            page = ["/", "/console.js", "/console.css", "/api/overview",
                    "/api/topics?filter=&internal=false&offset=0&limit=50"]
            await timed(mport, page, 3)  # warm up
            result["page_load_http"] = summary(await timed(mport, page, 20))
            endpoints = {
                "topics first page": "/api/topics?offset=0&limit=50",
                "topics filtered": "/api/topics?filter=bench-t-099&limit=50",
                "topics last page": f"/api/topics?offset={args.topics - 50}&limit=50",
                "topic detail": "/api/topics/bench-t-0001",
                "messages from end": "/api/topics/bench-t-0001/messages?from=end&limit=50",
                "groups first page": "/api/groups?offset=0&limit=50",
                "groups filtered": "/api/groups?filter=bench-g-099&limit=50",
                "group detail": "/api/groups/bench-g-0001",
                "broker": "/api/broker?offset=0&limit=50",
            }
            result["endpoints"] = {name: summary(await timed(mport, [path], 20))
                                   for name, path in endpoints.items()}
            loop = asyncio.get_running_loop()
            browser = await loop.run_in_executor(
                None, browser_load_ms, f"http://{HOST}:{mport}/#/topics", 5)
            result["page_load_browser"] = summary(browser) if isinstance(browser, list) \
                else browser
        finally:
            await idle.stop()
        console_paths = ["/api/groups?filter=&state=&type=&offset=0&limit=50",
                         "/api/broker?offset=0&limit=50"]
        runs = []
        for label, interval in (("without console", None), ("console open", POLL_S),
                                ("without console", None), ("console open", POLL_S),
                                ("poller at 10 requests/s", 0.2)):
            poller = Poller(mport, interval, console_paths) if interval else None
            if poller:
                poller.start()
            flood = await lg.heartbeat_flood(shared, members, versions, args.flood_seconds,
                                             max(4, 4096 // len(shared)),
                                             broker_pid=broker.proc.pid)
            if poller:
                await poller.stop()
            runs.append({"run": label, "ok_per_second": flood["ok_per_second"],
                         "broker_cpu_percent": flood["broker_cpu_percent"],
                         "errors": flood["errors"],
                         "console_requests": poller.requests if poller else 0,
                         "console_latency": summary(poller.latencies)
                         if poller and poller.latencies else None})
        result["heartbeats"] = runs
        without = [r["ok_per_second"] for r in runs if r["run"] == "without console"]
        with_console = [r["ok_per_second"] for r in runs if r["run"] == "console open"]
        result["heartbeats_per_second"] = {
            "without_console": round(statistics.mean(without)),
            "console_open": round(statistics.mean(with_console)),
            "change_percent": round(100 * (statistics.mean(with_console)
                                           / statistics.mean(without) - 1), 1)}
        await asyncio.gather(*(c.close() for c in shared))
    finally:
        broker.stop(timeout=60)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--flood-seconds", type=float, default=8.0)
    parser.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results",
                                                      "console.json"))
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print(f"{args.topics} topics, {args.groups} groups (setup {result['setup_seconds']} s)")
    p = result["page_load_http"]
    print(f"page load over HTTP (5 requests): median {p['median_ms']} ms, p95 {p['p95_ms']} ms")
    b = result["page_load_browser"]
    print("page load in headless Chromium (navigation to topic table): " + (
        f"median {b['median_ms']} ms, p95 {b['p95_ms']} ms" if isinstance(b, dict) else b))
    for name, s in result["endpoints"].items():
        print(f"  {name:20s} median {s['median_ms']:7.2f} ms   p95 {s['p95_ms']:7.2f} ms")
    for r in result["heartbeats"]:
        latency = r["console_latency"]
        print(f"heartbeats/s {r['run']:24s} {r['ok_per_second']:7d}  broker CPU "
              f"{r['broker_cpu_percent']}%  console requests {r['console_requests']}" + (
                  f" (median {latency['median_ms']} ms during the flood)" if latency else ""))
    h = result["heartbeats_per_second"]
    print(f"heartbeats/s without a console {h['without_console']}, with one open "
          f"{h['console_open']} ({h['change_percent']:+}%)")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
