"""examples/pyspark end to end against a broker process: the producer script's orders, the
pipeline run as its README command says (with --available-now so it stops, and the connector
jars tools/install-test-deps.sh resolves into tests/spark/target/jars), then the totals read
back from the output topic. A second run resumes from the checkpoint: it adds only the new
orders to the same windows, and drops an order older than the watermark."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pyspark
from kafka import KafkaConsumer

from tests.support import ROOT, unique

EXAMPLE = pathlib.Path(ROOT) / "examples" / "pyspark"
JARS = pathlib.Path(ROOT) / "tests" / "spark" / "target" / "jars"
sys.path.insert(0, str(EXAMPLE))
from produce_orders import send  # noqa: E402 - the example's own producer


def order(oid: str, customer: str, amount: float, at: str) -> dict:
    return {"order_id": oid, "customer": customer, "amount": amount,
            "event_time": f"2026-01-01T{at}Z"}


def run_pipeline(broker, source: str, sink: str, checkpoint: str) -> str:
    connector = JARS / f"spark-sql-kafka-0-10_2.13-{pyspark.__version__}.jar"
    assert connector.exists(), f"{connector} is missing: run tools/install-test-deps.sh"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "orders_pipeline.py"), "--bootstrap-servers",
         broker.bootstrap, "--input", source, "--output", sink, "--checkpoint", checkpoint,
         "--available-now", "--jars", str(JARS)],
        cwd=ROOT, env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"), capture_output=True,
        text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def latest_totals(broker, topic: str) -> dict:
    """The newest value of each key: the current total of each customer's window."""
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap,
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        return {m.key.decode(): json.loads(m.value) for m in consumer}
    finally:
        consumer.close()


def test_orders_pipeline_totals_per_window_and_resumes_from_its_checkpoint(broker, tmp_path):
    source, sink = unique("orders"), unique("order-totals")
    checkpoint = str(tmp_path / "checkpoint")
    send(broker.bootstrap, source, [
        order("a1", "alice", 10.0, "10:00:05"), order("a2", "alice", 5.5, "10:00:30"),
        order("b1", "bob", 7.0, "10:00:10"), order("a3", "alice", 3.0, "10:01:10"),
        order("b2", "bob", 1.0, "10:02:00")])
    out = run_pipeline(broker, source, sink, checkpoint)
    assert "5 orders read" in out
    first = latest_totals(broker, sink)
    assert first == {
        "alice@2026-01-01T10:00:00Z": {"customer": "alice", "window_start":
                                       "2026-01-01T10:00:00Z", "window_end":
                                       "2026-01-01T10:01:00Z", "orders": 2, "revenue": 15.5},
        "bob@2026-01-01T10:00:00Z": {"customer": "bob", "window_start": "2026-01-01T10:00:00Z",
                                     "window_end": "2026-01-01T10:01:00Z", "orders": 1,
                                     "revenue": 7.0},
        "alice@2026-01-01T10:01:00Z": {"customer": "alice", "window_start":
                                       "2026-01-01T10:01:00Z", "window_end":
                                       "2026-01-01T10:02:00Z", "orders": 1, "revenue": 3.0},
        "bob@2026-01-01T10:02:00Z": {"customer": "bob", "window_start": "2026-01-01T10:02:00Z",
                                     "window_end": "2026-01-01T10:03:00Z", "orders": 1,
                                     "revenue": 1.0}}

    # new orders for open windows, and one for a window the watermark (10:02:00 - 30 s) closed
    send(broker.bootstrap, source, [
        order("a4", "alice", 4.0, "10:01:50"), order("b3", "bob", 2.0, "10:02:20"),
        order("c1", "carol", 100.0, "10:00:40")])
    out = run_pipeline(broker, source, sink, checkpoint)
    assert "3 orders read" in out and "5 orders read" not in out  # resumed, not re-read
    second = latest_totals(broker, sink)
    totals = {k: (v["orders"], v["revenue"]) for k, v in second.items()}
    assert totals == {"alice@2026-01-01T10:00:00Z": (2, 15.5),
                      "bob@2026-01-01T10:00:00Z": (1, 7.0),
                      "alice@2026-01-01T10:01:00Z": (2, 7.0),
                      "bob@2026-01-01T10:02:00Z": (2, 3.0)}
