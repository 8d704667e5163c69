"""benchmarks/bench_coordinator.py's verdicts: with Kafka in the same run, this broker is judged
against Kafka's figures (issue targets: half its join time at every size, 0.45 of its CPU per
heartbeat, no more memory per idle member); without Kafka, only its absolute goals are judged."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_coordinator as bench  # noqa: E402


def result(joins: dict, per_cpu: float, rss: int, per_second: float = 60_000) -> dict:
    return {"join_to_stable": {size: {"ms_from_last_join": {"median": ms}}
                               for size, ms in joins.items()},
            "heartbeats": {"heartbeat_flood": {"ok_per_second": per_second,
                                               "ok_per_broker_cpu_second": per_cpu},
                           "rss": {"bytes_per_idle_member": rss}}}


def test_judged_against_kafka_in_the_same_run():
    ours = result({"1": 1.0, "100": 6.0, "1000": 60.0}, per_cpu=80_000, rss=10_000)
    kafka = result({"1": 4.0, "100": 15.0, "1000": 100.0}, per_cpu=32_000, rss=17_000)
    v = bench.verdicts(ours, kafka)
    assert v["join_1_members_ratio_to_kafka"] == {"value": 0.25, "target": 0.5, "met": True}
    assert v["join_100_members_ratio_to_kafka"]["met"] is True
    assert v["join_1000_members_ratio_to_kafka"] == {"value": 0.6, "target": 0.5, "met": False}
    assert v["cpu_per_heartbeat_ratio_to_kafka"] == {"value": 0.4, "target": 0.45, "met": True}
    assert v["rss_bytes_per_idle_member"]["met"] is True
    assert v["rss_bytes_per_idle_member"]["target"] == 17_000
    assert v["join_100_members_ms"]["met"] is True


def test_without_kafka_no_ratio_and_no_memory_verdict():
    v = bench.verdicts(result({"100": 120.0}, per_cpu=80_000, rss=10_000, per_second=40_000))
    assert not [name for name in v if "kafka" in name]
    assert "rss_bytes_per_idle_member" not in v
    assert v["join_100_members_ms"]["met"] is False
    assert v["heartbeats_per_second"]["met"] is False
