"""The same real-client group scenario, run a few times against Apache Kafka 4.3.1 and against
kbroker on this machine in the same session, compared by outcome and settle time.

Raw-protocol scenarios (test_group_conformance.py) show that both brokers give the same answers;
only real clients show what their order and timing do to an application: how many rebalances a
group goes through, whether a client's race leaves a member waiting for a session timeout, how
long until every member consumes. The runner is tests/clients/settle.py; see its docstring for
what "settled" and "stalled" mean.

Kafka runs with ``group.initial.rebalance.delay.ms=0`` (Kafka's own dev config and its docker
examples), kbroker with its defaults: what a developer compares when they move from one to the
other. kbroker passes a scenario when, over the same number of trials:

- it stalls no more often than Kafka (as a share of its trials), and
- the median settle time of every phase is at most 1.5x Kafka's plus 0.3 s (loopback timings on a
  shared 2-core machine vary by a few hundred ms from trial to trial; a real regression, such as
  an extra rebalance or a heartbeat interval lost, costs about a second), and
- members get their assignments as close together as on Kafka (median spread at most Kafka's
  plus 0.5 s).

kafka-python 3.0.12 sometimes throws away a join it has finished and joins again (a race
between ``poll()``'s timeout and the SyncGroup answer on its I/O loop, described in
tests/clients/settle.py's ``KafkaPythonJoinRace``). That extra rebalance costs the group a
heartbeat interval on either broker; it comes from how loaded the client's process is, not from
the broker (CI saw it in 2 of 3 trials on one broker and none on the other in the same run, a
loaded machine here in 4 of 20). The runner sees it in the client's own log; such a phase is
reported and left out of the medians, and the scenario runs up to three more trials so that
every median still stands on three clean ones. Stalls are counted whatever the client did.

Every member fetches with a 100 ms longest wait (``fetch.wait.max.ms``/``fetch_max_wait_ms``)
on both brokers. With the clients' 500 ms default, a partition whose starting offset arrives
while the member's previous fetch is already parked on the broker waits out that whole fetch:
librdkafka keeps one fetch in flight per broker and builds the next one only when it returns. The
debug log (``debug=fetch``) shows it on both brokers in the same run (Kafka 4.3.1: one partition
polled at 2.64 s while its five siblings were polled at 2.13 s). It adds 0.5 s to a trial at
random; kbroker answers ListOffsets and Fetch sooner, so the race is lost there more often (3 of
11 confluent trials), and a median over 3 trials measured the race instead of the group. At
100 ms the race costs what a poll interval costs.
"""
from __future__ import annotations

import statistics
import sys

import pytest

from tests.clients import settle
from tests.support import BrokerProcess

# runs alone, after the parallel part (tools/run-tests.sh): settle times compared with Kafka's
pytestmark = pytest.mark.serial

TRIALS = 3
EXTRA_TRIALS = 3
MARGIN_FACTOR = 1.5
MARGIN_S = 0.3
SKEW_MARGIN_S = 0.5
PARTITIONS = 6
RECORDS = 60
FETCH_WAIT_MS = 100

SCENARIOS = {
    # kafka-python and aiokafka: groups of 3, dynamic and static, together and one by one; the
    # churn scenario forms the group together, then a member leaves and a new one joins.
    "kafka-python-together-churn": dict(client="kafka-python", start="together", churn=True),
    "kafka-python-together-static": dict(client="kafka-python", start="together", static=True),
    "kafka-python-one-by-one": dict(client="kafka-python", start="one-by-one"),
    "kafka-python-one-by-one-static": dict(client="kafka-python", start="one-by-one",
                                           static=True),
    "aiokafka-together-churn": dict(client="aiokafka", start="together", churn=True),
    "aiokafka-together-static": dict(client="aiokafka", start="together", static=True),
    "aiokafka-one-by-one": dict(client="aiokafka", start="one-by-one"),
    "aiokafka-one-by-one-static": dict(client="aiokafka", start="one-by-one", static=True),
    "confluent-cooperative-sticky-churn": dict(client="confluent-kafka", start="together",
                                               assignor="cooperative-sticky", churn=True),
}


@pytest.fixture(scope="module")
def kbroker_defaults():
    server = BrokerProcess()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def topics(kafka_server, kbroker_defaults):
    for server in (kafka_server, kbroker_defaults):
        settle.prepare_topic(server.bootstrap, "settle", PARTITIONS, RECORDS)
    return {"kafka": kafka_server, "kbroker": kbroker_defaults}


def run(server, scenario: dict) -> list[dict]:
    """TRIALS trials, plus up to EXTRA_TRIALS more while fewer than TRIALS are free of the
    client's own join race (settle.KafkaPythonJoinRace), so each median stands on TRIALS."""
    def trials(n: int) -> list[dict]:
        return settle.run(sys.executable, bootstrap=server.bootstrap, topic="settle",
                          partitions=PARTITIONS, records=RECORDS, members=3, trials=n,
                          timeout=20, fetch_wait_ms=FETCH_WAIT_MS, **scenario)

    results = trials(TRIALS)
    extra = 0
    while sum(not raced(t) for t in results) < TRIALS and extra < EXTRA_TRIALS:
        results += trials(1)
        extra += 1
    return results


def raced(trial: dict) -> bool:
    return any(p.get("client_races") for p in trial["phases"])


def medians(trials: list[dict], key: str) -> list[float | None]:
    """Per phase, the median of `key` over the trials that got that far without a stall."""
    phases = max(len(t["phases"]) for t in trials)
    out = []
    for i in range(phases):
        values = [t["phases"][i][key] for t in trials
                  if len(t["phases"]) > i and not t["phases"][i]["stalled"]
                  and not t["phases"][i].get("client_races")
                  and t["phases"][i][key] is not None]
        out.append(statistics.median(values) if values else None)
    return out


def describe(name: str, trials: list[dict]) -> str:
    rows = [f"  {name}: " + "; ".join(
        f"{p['phase']} {p['settle_s']} s (skew {p['assignment_skew_s']})"
        + (" STALLED" if p["stalled"] else "")
        + (f" CLIENT-RACE x{p['client_races']}" if p.get("client_races") else "")
        for p in t["phases"]) for t in trials]
    return "\n".join(rows)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_real_clients_settle_as_fast_and_as_reliably_as_on_kafka(name, topics):
    scenario = SCENARIOS[name]
    kafka = run(topics["kafka"], scenario)
    ours = run(topics["kbroker"], scenario)
    report = f"{name}\n{describe('kafka  ', kafka)}\n{describe('kbroker', ours)}"
    print(report)

    kafka_stalls = sum(t["stalled"] for t in kafka)
    our_stalls = sum(t["stalled"] for t in ours)
    # as a share of the trials run (a scenario may run extra trials on one broker)
    assert our_stalls * len(kafka) <= kafka_stalls * len(ours), (
        f"kbroker stalled more often than Kafka:\n{report}")
    # every trial that did not stall went through every phase on both brokers
    phases = 3 if scenario.get("churn") else 1
    assert all(len(t["phases"]) == phases for t in ours if not t["stalled"]), report

    for i, (k, o) in enumerate(zip(medians(kafka, "settle_s"), medians(ours, "settle_s"))):
        assert o is not None or k is None, f"phase {i} never settled on kbroker:\n{report}"
        if k is not None and o is not None:
            assert o <= MARGIN_FACTOR * k + MARGIN_S, (
                f"phase {i}: kbroker's median settle {o:.3f} s is slower than Kafka's "
                f"{k:.3f} s beyond the margin:\n{report}")
    for i, (k, o) in enumerate(zip(medians(kafka, "assignment_skew_s"),
                                   medians(ours, "assignment_skew_s"))):
        if k is not None and o is not None:
            assert o <= k + SKEW_MARGIN_S, (
                f"phase {i}: members got their assignments {o:.3f} s apart on kbroker, "
                f"{k:.3f} s on Kafka:\n{report}")
