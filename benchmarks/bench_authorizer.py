"""What authorization costs the hot paths: the Produce and Fetch handlers called in-process (no
sockets, no codec) on one partition, with no authorizer, with the StandardAuthorizer and a few
ACLs, and with it and 10,000 ACLs (prefixed ones included). One op = one request handled.

    python benchmarks/bench_authorizer.py            # ~1 s per timed loop, best of 5
    python benchmarks/bench_authorizer.py --quick

Prints ops/s per variant and writes benchmarks/results/authorizer.json. A tree without the
authorizer (an older checkout) runs the "none" variant only, for a before/after comparison.
"""
from __future__ import annotations

import argparse
import json
import logging
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOPIC = "bench"


class Conn:
    principal = "User:ANONYMOUS"
    client_host = "127.0.0.1"
    listener = "PLAINTEXT"
    closed = False


class Ctx:
    def __init__(self, version: int) -> None:
        self.conn = Conn()
        self.api_version = version
        self.listener = "PLAINTEXT"
        self.client_id = "bench"
        self.client_host = "127.0.0.1"


def make_broker(variant: str):
    import structlog
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    from broker.broker import Broker
    from broker.config import BrokerConfig
    settings = {"log.retention.check.interval.ms": 3600000, "metrics.port": 0}
    if variant != "none":
        settings.update({"authorizer.class.name":
                         "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                         "allow.everyone.if.no.acl.found": "true"})
    broker = Broker(BrokerConfig(settings))
    broker.topics.create(TOPIC, 1)
    if variant != "none":
        from broker.security.authorizer import (AclBinding, AclOperation, AclPermissionType,
                                                PatternType, ResourceType)
        count = 5 if variant == "few-acls" else 10_000
        acls = []
        for i in range(count):
            pattern = PatternType.PREFIXED if i % 2 else PatternType.LITERAL
            acls.append(AclBinding(ResourceType.TOPIC, f"{TOPIC}-{i}-", pattern, f"User:u{i}",
                                   "*", AclOperation.WRITE, AclPermissionType.DENY))
        acls.append(AclBinding(ResourceType.TOPIC, TOPIC, PatternType.LITERAL,
                               "User:ANONYMOUS", "*", AclOperation.ALL, AclPermissionType.ALLOW))
        broker.authorizer.create(acls)
    return broker


def produce_loop(broker, seconds: float) -> float:
    from broker.apis import produce
    from protocol.messages import ProduceRequest as P
    from protocol.records import SimpleRecord, build_batch
    batch = build_batch([SimpleRecord(key=None, value=b"x" * 100) for _ in range(10)])
    ctx = Ctx(9)
    answers = []
    n = 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        for _ in range(200):
            request = P(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
                P.TopicProduceData(name=TOPIC, partition_data=[
                    P.PartitionProduceData(index=0, records=batch)])])
            produce.handle(broker, ctx, request, answers.append)
        n += 200
        answers.clear()
    return n / (time.perf_counter() - started)


def fetch_loop(broker, seconds: float) -> float:
    from broker.apis import fetch
    from protocol.messages import FetchRequest as F
    ctx = Ctx(12)
    answers = []
    n = 0
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    while time.perf_counter() < deadline:
        for _ in range(200):
            request = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            F.FetchTopic(topic=TOPIC, partitions=[F.FetchPartition(
                                partition=0, current_leader_epoch=-1, fetch_offset=0,
                                last_fetched_epoch=-1, log_start_offset=-1,
                                partition_max_bytes=1 << 16)])],
                        forgotten_topics_data=[], rack_id="")
            fetch.handle(broker, ctx, request, answers.append)
        n += 200
        answers.clear()
    return n / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "authorizer.json"))
    args = parser.parse_args()
    seconds, repeats = (0.2, 2) if args.quick else (1.0, 5)
    from broker.config import SETTINGS
    variants = ["none", "few-acls", "10k-acls"] if "authorizer.class.name" in SETTINGS \
        else ["none"]
    brokers = {v: make_broker(v) for v in variants}
    # fill the partition once so every fetch reads the same bytes
    produce_loop(brokers[variants[0]], 0.05)
    for v in variants[1:]:
        produce_loop(brokers[v], 0.05)
    results = {v: {"produce": 0.0, "fetch": 0.0} for v in variants}
    for _ in range(repeats):   # interleaved, best of the repeats
        for v in variants:
            results[v]["produce"] = max(results[v]["produce"], produce_loop(brokers[v], seconds))
            results[v]["fetch"] = max(results[v]["fetch"], fetch_loop(brokers[v], seconds))
    print(f"{'variant':<10} {'produce ops/s':>14} {'fetch ops/s':>12}")
    for v, r in results.items():
        print(f"{v:<10} {r['produce']:>14,.0f} {r['fetch']:>12,.0f}")
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"seconds": seconds, "repeats": repeats, "results": results},
                              indent=2))


if __name__ == "__main__":
    main()
