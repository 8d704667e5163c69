"""Feeds examples/pyspark/orders_pipeline.py: JSON order events to a Kafka topic.

    python examples/pyspark/produce_orders.py --bootstrap-servers 127.0.0.1:9092 --count 1000

Each event is ``{"order_id", "customer", "amount", "event_time"}``, keyed by customer, with
event times spread over the last few minutes. Needs kafka-python (``pip install kafka-python``).
"""
from __future__ import annotations

import argparse
import datetime
import json
import random
import time

CUSTOMERS = ("alice", "bob", "carol", "dave", "erin")


def iso(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def make_orders(count: int, start_ms: int, span_ms: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    return [{"order_id": f"o-{seed}-{i}", "customer": rng.choice(CUSTOMERS),
             "amount": round(rng.uniform(1, 100), 2),
             "event_time": iso(start_ms + rng.randrange(span_ms))} for i in range(count)]


def send(bootstrap_servers: str, topic: str, orders: list[dict]) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, acks="all")
    try:
        for order in orders:
            producer.send(topic, key=order["customer"].encode(),
                          value=json.dumps(order).encode())
        producer.flush()
    finally:
        producer.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--minutes", type=int, default=5,
                        help="event times spread over this many minutes before now")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    args = parser.parse_args(argv)
    now = int(time.time() * 1000)
    span = args.minutes * 60_000
    send(args.bootstrap_servers, args.topic, make_orders(args.count, now - span, span, args.seed))
    print(f"sent {args.count} orders to {args.topic}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
