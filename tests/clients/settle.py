"""How fast a new consumer group settles, with a real client: the scenario runner shared by the
differential client tests (tests/conformance/test_client_differential.py) and the settle
benchmark (benchmarks/bench_settle.py).

One process runs the trials of one scenario against one broker and prints one JSON line per
trial:

    python -m tests.clients.settle --client kafka-python --bootstrap HOST:PORT --topic T \\
        --partitions 6 --records 60 --members 3 --start together [--static] [--churn] \\
        [--assignor range] [--trials 3]

``--assignor consumer`` (or ``consumer:uniform``, ``consumer:range``: the broker-side assignor
named in group.remote.assignor) runs consumer-protocol members (group.protocol=consumer, KIP-848)
of confluent-kafka or the Java client; they set neither partition.assignment.strategy nor
session.timeout.ms nor heartbeat.interval.ms, which the broker owns with that protocol. Their
rebalance callbacks are incremental (only the partitions added or revoked), as with
cooperative-sticky; the tracker keeps each member's whole assignment from them.

A *host* runs the members of one client library (threads for kafka-python and confluent-kafka,
tasks on one event loop for aiokafka, threads of one JVM for the Java client, driven over its
stdin and stdout) and reports what each member sees: its assignment after every change and the
records it polled. A :class:`Tracker` turns those events into the outcome:

- the group is *settled* when every live member holds partitions, the assignments are disjoint
  and cover the topic, and the members together have polled every record (or, after a leave or
  a join in the churn scenario, only the assignment part);
- the settle time is the time from the reference moment (the start of the members, or of the last
  member when they start one by one, or the leave/join of the churn scenario) to the moment from
  which the group stayed settled for ``--quiet`` seconds;
- a trial *stalls* when it took at least 90% of the session timeout or did not settle at all:
  a member waited for the coordinator to expire another one. With the consumer protocol the
  session timeout is the broker's group.consumer.session.timeout.ms (45 s on both brokers, the
  default of ``--session-timeout-ms`` then), so a stall is a phase that did not settle within
  ``--timeout``;
- the after-join phase also reports ``subscribe_s``: from the moment the new member subscribed
  (rather than from the command that creates it) until the group settled: with 3 members, the
  third member's subscribe() until all three hold disjoint covering assignments.

Each member polls with a 100 ms timeout in a loop, as the applications do that these numbers
stand for; nothing calls ``topics()`` first.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JAVA_JAR = os.path.join(ROOT, "tests", "java", "target", "client-scenarios.jar")
CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka", "java")
CONSUMER_PROTOCOL_CLIENTS = ("confluent-kafka", "java")
POLL_S = 0.1


def consumer_protocol(assignor: str) -> bool:
    """Whether ``assignor`` ("consumer", "consumer:uniform", "consumer:range") selects the
    consumer group protocol (KIP-848) rather than a classic client-side assignor."""
    return assignor == "consumer" or assignor.startswith("consumer:")


def remote_assignor(assignor: str) -> str | None:
    """The server-side assignor a consumer-protocol ``assignor`` names, None for the broker's
    default."""
    return assignor.split(":", 1)[1] or None if ":" in assignor else None


# ============================================================================ outcome

class Tracker:
    """What every member holds and has polled, fed by a host's events from any thread."""

    def __init__(self, partitions: int, records: int) -> None:
        self.partitions = partitions
        self.records = records
        self.lock = threading.Condition()
        self.assignment: dict[int, frozenset] = {}
        self.live: set[int] = set()
        self.seen: set[tuple[int, int]] = set()
        self.need_records = True
        self.settled_since: float | None = None
        self.assignments = 0   # assignment changes seen, over all members
        self.assigned_at: dict[int, float] = {}   # each member's last assignment change
        self.started_at: dict[int, float] = {}    # when each member subscribed
        self.client_races = 0  # kafka-python rejoins that dropped a finished join (see below)

    def client_race(self) -> None:
        with self.lock:
            self.client_races += 1

    def started(self, member: int) -> None:
        with self.lock:
            self.started_at[member] = time.monotonic()
            self.live.add(member)
            self.assignment[member] = frozenset()
            self._update()

    def closed(self, member: int) -> None:
        with self.lock:
            self.live.discard(member)
            self.assignment.pop(member, None)
            self._update()

    def assigned(self, member: int, partitions) -> None:
        with self.lock:
            if member not in self.live:
                return
            new = frozenset(partitions)
            if new != self.assignment.get(member):
                self.assignments += 1
                self.assigned_at[member] = time.monotonic()
            self.assignment[member] = new
            self._update()

    def gained(self, member: int, partitions) -> None:
        """An incremental assignment (cooperative-sticky, the consumer protocol): ``partitions``
        are added to what the member holds."""
        with self.lock:  # an RLock: assigned() takes it again
            self.assigned(member, self.assignment.get(member, frozenset()) | set(partitions))

    def revoked(self, member: int, partitions) -> None:
        """An incremental revocation (or loss): ``partitions`` leave what the member holds."""
        with self.lock:
            self.assigned(member, self.assignment.get(member, frozenset()) - set(partitions))

    def polled(self, member: int, offsets) -> None:
        with self.lock:
            self.seen.update(offsets)
            self._update()

    def is_settled(self) -> bool:
        if not self.live:
            return False
        owned: set = set()
        total = 0
        for member in self.live:
            parts = self.assignment.get(member, frozenset())
            if not parts and len(self.live) <= self.partitions:
                return False
            owned |= parts
            total += len(parts)
        if total != len(owned) or len(owned) != self.partitions:
            return False
        return not self.need_records or len(self.seen) >= self.records

    def _update(self) -> None:
        now = time.monotonic()
        if self.is_settled():
            if self.settled_since is None:
                self.settled_since = now
        else:
            self.settled_since = None
        self.lock.notify_all()

    def wait_settled(self, since: float, timeout: float, quiet: float) -> float | None:
        """Seconds from `since` to the moment from which the group stayed settled for `quiet`
        seconds; None if that did not happen within `timeout`."""
        deadline = since + timeout
        with self.lock:
            while True:
                now = time.monotonic()
                settled = self.settled_since
                if settled is not None and now - settled >= quiet:
                    return max(0.0, settled - since)
                if now >= deadline:
                    return None
                wait = deadline - now
                if settled is not None:
                    wait = min(wait, settled + quiet - now)
                self.lock.wait(max(wait, 0.001))

    def assignment_skew(self) -> float | None:
        """Seconds between the first and the last live member getting its current assignment:
        how long some members consumed while others were still waiting for theirs."""
        with self.lock:
            times = [self.assigned_at[m] for m in self.live if m in self.assigned_at]
            return round(max(times) - min(times), 3) if times else None

    def wait_assigned(self, member: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.lock:
            while not self.assignment.get(member):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(left)
            return True


# ============================================================================ hosts

def fetch_wait(args) -> dict:
    """kafka-python's and aiokafka's ``fetch_max_wait_ms`` when ``--fetch-wait-ms`` is given."""
    return {} if args.fetch_wait_ms is None else {"fetch_max_wait_ms": args.fetch_wait_ms}


def eager_listener(base, tracker: Tracker, member: int):
    """A rebalance listener of kafka-python's or aiokafka's ``base`` class (both eager: revoke
    everything, then get the whole new assignment) that reports to the tracker."""

    class Listener(base):
        def on_partitions_revoked(self, revoked):
            tracker.assigned(member, ())

        def on_partitions_assigned(self, assigned):
            tracker.assigned(member, (tp.partition for tp in assigned))

    return Listener()


class Host:
    """The members of one client library: start(member, group, instance_id), close(member)."""

    def __init__(self, tracker: Tracker, args) -> None:
        self.tracker = tracker
        self.args = args
        self.errors: list[str] = []   # a member that died: the trial fails with it

    def start(self, member: int, group: str, instance_id: str | None) -> None:
        raise NotImplementedError

    def close(self, member: int) -> None:
        raise NotImplementedError

    def close_all(self) -> None:
        raise NotImplementedError


class ThreadHost(Host):
    """One thread per member, polling until told to stop; the member closes its own consumer."""

    def __init__(self, tracker, args) -> None:
        super().__init__(tracker, args)
        self.threads: dict[int, tuple[threading.Thread, threading.Event]] = {}

    def start(self, member, group, instance_id) -> None:
        stop = threading.Event()
        ready = threading.Event()
        thread = threading.Thread(target=self._guarded,
                                  args=(member, group, instance_id, stop, ready),
                                  name=f"member-{member}", daemon=True)
        self.threads[member] = (thread, stop)
        thread.start()
        ready.wait(10)  # the consumer exists and has subscribed

    def close(self, member) -> None:
        thread, stop = self.threads.pop(member)
        stop.set()
        thread.join(20)
        self.tracker.closed(member)

    def close_all(self) -> None:
        for _, stop in self.threads.values():
            stop.set()
        for member, (thread, _) in list(self.threads.items()):
            thread.join(20)
            self.tracker.closed(member)
        self.threads.clear()

    def _guarded(self, member, group, instance_id, stop, ready) -> None:
        try:
            self._run(member, group, instance_id, stop, ready)
        except Exception as exc:  # noqa: BLE001 - reported by the trial
            self.errors.append(f"member {member}: {exc!r}")
            ready.set()

    def _run(self, member, group, instance_id, stop, ready) -> None:
        raise NotImplementedError


class KafkaPythonJoinRace(logging.Handler):
    """Sees kafka-python 3.0.12 drop a join it had finished, and tells the tracker.

    ``consumer.poll(timeout_ms=100)`` runs the join on the client's I/O loop and gives up when
    its timeout passes, leaving the join task in flight for the next poll. When that loop stalls
    past the deadline (a loaded machine: the member threads share one GIL) and the SyncGroup
    answer is read in the same turn, the timeout wins; the task then completes with nobody
    waiting, and the next poll finds the task done but ``rejoin_needed`` still set, so it throws
    the assignment away and sends JoinGroup again. The group goes through one more rebalance,
    and every other member pays a heartbeat interval to hear of it. The broker cannot tell this
    JoinGroup from a deliberate one (Kafka logs "leader ... re-joining group during Stable", as
    kbroker does), so it happens against either broker; the client's own log shows it: a
    successful SyncGroup answer followed by "(Re-)joining group" on the same I/O thread without
    "Setting newly assigned partitions" in between."""

    def __init__(self, tracker: Tracker) -> None:
        super().__init__(logging.DEBUG)
        self.tracker = tracker
        self.synced: set[str] = set()   # I/O threads holding an assignment not yet applied
        for name, level in (("kafka.coordinator", logging.DEBUG),
                            ("kafka.coordinator.consumer", logging.INFO),
                            ("kafka.coordinator.heartbeat", logging.WARNING)):
            logging.getLogger(name).setLevel(level)
        logging.getLogger("kafka.coordinator").addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.msg if isinstance(record.msg, str) else ""
        if msg.startswith("Received SyncGroup response"):
            if getattr(record.args[0], "error_code", None) == 0:
                self.synced.add(record.threadName)
        elif msg.startswith("Setting newly assigned partitions"):
            self.synced.discard(record.threadName)
        elif msg.startswith("(Re-)joining group"):
            if record.threadName in self.synced:
                self.tracker.client_race()
            self.synced.discard(record.threadName)
        elif record.levelno >= logging.WARNING:
            sys.stderr.write(self.format(record) + "\n")

    def close(self) -> None:
        logging.getLogger("kafka.coordinator").removeHandler(self)
        super().close()


class KafkaPythonHost(ThreadHost):
    def __init__(self, tracker, args) -> None:
        super().__init__(tracker, args)
        self.join_race = KafkaPythonJoinRace(tracker)

    def close_all(self) -> None:
        super().close_all()
        self.join_race.close()

    def _run(self, member, group, instance_id, stop, ready) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
        from kafka.errors import CommitFailedError, KafkaError
        assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                    "sticky": StickyPartitionAssignor}[self.args.assignor]
        tracker = self.tracker
        args = self.args

        consumer = KafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=group, client_id=f"settle-{member}",
            group_instance_id=instance_id, enable_auto_commit=False,
            auto_offset_reset="earliest", partition_assignment_strategy=[assignor],
            session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=1000,
            **fetch_wait(args))
        tracker.started(member)
        consumer.subscribe([args.topic],
                           listener=eager_listener(ConsumerRebalanceListener, tracker, member))
        ready.set()
        try:
            while not stop.is_set():
                try:
                    batches = consumer.poll(timeout_ms=int(POLL_S * 1000))
                except (CommitFailedError, KafkaError):
                    continue
                if batches:
                    tracker.polled(member, [(r.partition, r.offset)
                                            for rs in batches.values() for r in rs])
        finally:
            consumer.close()


class ConfluentHost(ThreadHost):
    def _run(self, member, group, instance_id, stop, ready) -> None:
        from confluent_kafka import Consumer
        tracker = self.tracker
        args = self.args
        conf = {"bootstrap.servers": args.bootstrap, "group.id": group,
                "client.id": f"settle-{member}", "enable.auto.commit": False,
                "auto.offset.reset": "earliest"}
        if consumer_protocol(args.assignor):
            # KIP-848: the broker assigns and sets the heartbeat interval and session timeout;
            # librdkafka refuses the classic settings with this protocol
            conf["group.protocol"] = "consumer"
            if remote_assignor(args.assignor):
                conf["group.remote.assignor"] = remote_assignor(args.assignor)
        else:
            conf.update({"partition.assignment.strategy": args.assignor,
                         "session.timeout.ms": args.session_timeout_ms,
                         "heartbeat.interval.ms": 1000})
        if instance_id:
            conf["group.instance.id"] = instance_id
        if args.fetch_wait_ms is not None:
            conf["fetch.wait.max.ms"] = args.fetch_wait_ms
        consumer = Consumer(conf)
        # the consumer protocol and cooperative-sticky name only the partitions added or taken
        # away; the eager assignors revoke everything and then name the whole new assignment
        incremental = consumer_protocol(args.assignor) or args.assignor == "cooperative-sticky"

        def on_assign(c, partitions):
            if incremental:
                tracker.gained(member, (p.partition for p in partitions))
            else:
                tracker.assigned(member, (p.partition for p in partitions))

        def on_revoke(c, partitions):
            if incremental:
                tracker.revoked(member, (p.partition for p in partitions))
            else:
                tracker.assigned(member, ())

        tracker.started(member)
        consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke,
                           on_lost=on_revoke)
        ready.set()
        try:
            while not stop.is_set():
                messages = consumer.consume(num_messages=500, timeout=POLL_S)
                offsets = [(msg.partition(), msg.offset()) for msg in messages
                           if msg.error() is None]
                if offsets:
                    tracker.polled(member, offsets)
        finally:
            consumer.close()


class AiokafkaHost(Host):
    """Every member a task on one event loop, in a thread of its own."""

    def __init__(self, tracker, args) -> None:
        super().__init__(tracker, args)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="aiokafka",
                                       daemon=True)
        self.thread.start()
        self.members: dict[int, tuple[asyncio.Future, asyncio.Event]] = {}

    def start(self, member, group, instance_id) -> None:
        ready = threading.Event()

        async def guarded(stop):
            try:
                await self._run(member, group, instance_id, stop, ready)
            except Exception as exc:  # noqa: BLE001 - reported by the trial
                self.errors.append(f"member {member}: {exc!r}")
                ready.set()

        async def make():
            stop = asyncio.Event()
            return asyncio.ensure_future(guarded(stop)), stop

        self.members[member] = asyncio.run_coroutine_threadsafe(make(), self.loop).result(10)
        ready.wait(10)

    def close(self, member) -> None:
        task, stop = self.members.pop(member)
        self.loop.call_soon_threadsafe(stop.set)
        asyncio.run_coroutine_threadsafe(asyncio.wait([task], timeout=20), self.loop).result(25)
        self.tracker.closed(member)

    def close_all(self) -> None:
        for member in list(self.members):
            task, stop = self.members[member]
            self.loop.call_soon_threadsafe(stop.set)
        tasks = [task for task, _ in self.members.values()]
        if tasks:
            asyncio.run_coroutine_threadsafe(asyncio.wait(tasks, timeout=20),
                                             self.loop).result(25)
        for member in self.members:
            self.tracker.closed(member)
        self.members.clear()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    async def _run(self, member, group, instance_id, stop, ready) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
        from aiokafka.errors import KafkaError
        assignor = {"range": RangePartitionAssignor,
                    "roundrobin": RoundRobinPartitionAssignor}[self.args.assignor]
        tracker = self.tracker
        args = self.args

        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=group, client_id=f"settle-{member}",
            group_instance_id=instance_id, enable_auto_commit=False,
            auto_offset_reset="earliest", partition_assignment_strategy=(assignor,),
            session_timeout_ms=args.session_timeout_ms, heartbeat_interval_ms=1000,
            **fetch_wait(args))
        tracker.started(member)
        consumer.subscribe([args.topic],
                           listener=eager_listener(ConsumerRebalanceListener, tracker, member))
        ready.set()
        await consumer.start()
        try:
            while not stop.is_set():
                try:
                    batches = await consumer.getmany(timeout_ms=int(POLL_S * 1000))
                except KafkaError:
                    continue
                if batches:
                    tracker.polled(member, [(r.partition, r.offset)
                                            for rs in batches.values() for r in rs])
        finally:
            await consumer.stop()


class JavaHost(Host):
    """The Java client's members in one JVM (``ClientScenarios group-host``): commands on its
    stdin, events on its stdout, stamped here as they arrive."""

    def __init__(self, tracker, args) -> None:
        super().__init__(tracker, args)
        if not os.path.isfile(JAVA_JAR):
            raise RuntimeError(f"{JAVA_JAR} is missing: run tools/install-test-deps.sh")
        self.proc = subprocess.Popen(
            ["java", "-Xss512k", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-jar", JAVA_JAR,
             "group-host", args.bootstrap, args.topic, args.assignor,
             str(args.session_timeout_ms)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            bufsize=1)
        self.acks: queue.Queue = queue.Queue()
        self.reader = threading.Thread(target=self._read, name="java-events", daemon=True)
        self.reader.start()
        self._command("ping")

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event.get("event")
            member = event.get("m")
            if kind == "assigned":
                self.tracker.assigned(member, event["partitions"])
            elif kind == "records":
                self.tracker.polled(member, [tuple(x) for x in event["offsets"]])
            elif kind == "started":
                self.tracker.started(member)
                self.acks.put(event)
            elif kind in ("closed", "pong"):
                self.acks.put(event)
        self.acks.put({"event": "exit"})

    def _command(self, line: str, timeout: float = 30) -> dict:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        event = self.acks.get(timeout=timeout)
        if event.get("event") == "exit":
            raise RuntimeError(f"the Java host exited ({self.proc.wait()})")
        return event

    def start(self, member, group, instance_id) -> None:
        self._command(f"start {member} {group} {instance_id or '-'}")

    def close(self, member) -> None:
        self._command(f"close {member}")
        self.tracker.closed(member)

    def close_all(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


HOSTS = {"kafka-python": KafkaPythonHost, "aiokafka": AiokafkaHost,
         "confluent-kafka": ConfluentHost, "java": JavaHost}


# ============================================================================ scenarios

def prepare_topic(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    """Creates the topic and writes `records` records spread evenly over its partitions."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="settle-setup")
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=30000)
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="settle-setup", acks="all")
    try:
        deadline = time.monotonic() + 30
        while len(producer.partitions_for(topic) or ()) < partitions:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic} has not got {partitions} partitions")
            time.sleep(0.1)
        for i in range(records):
            producer.send(topic, value=f"v{i}".encode(), partition=i % partitions)
        producer.flush(30)
    finally:
        producer.close()



def run_trial(args, trial: int) -> dict:
    """One new group: its members start together or one by one; with --churn, then one member
    leaves and a new one joins. Returns the settle time of each phase and whether it stalled."""
    tracker = Tracker(args.partitions, args.records)
    host = HOSTS[args.client](tracker, args)
    group = f"settle-{args.client}-{uuid.uuid4().hex[:10]}"
    stall_s = 0.9 * args.session_timeout_ms / 1000
    phases: list[dict] = []

    def instance(member: int) -> str | None:
        return f"{group}-{member}" if args.static else None

    races_before = [0]   # the client's own join races (KafkaPythonJoinRace) before this phase

    def phase(name: str, since: float, joined: int | None = None) -> bool:
        settle = tracker.wait_settled(since, args.timeout, args.quiet)
        races = tracker.client_races
        result = {"phase": name, "settle_s": None if settle is None else round(settle, 3),
                  "stalled": settle is None or settle >= stall_s,
                  "assignment_skew_s": tracker.assignment_skew(),
                  "client_races": races - races_before[0]}
        races_before[0] = races
        if joined is not None:
            # from the new member's subscribe(), not from the command that creates it
            subscribed = tracker.started_at.get(joined)
            result["subscribe_s"] = (None if settle is None or subscribed is None
                                     else round(max(0.0, since + settle - subscribed), 3))
        phases.append(result)
        return settle is not None

    started = time.monotonic()
    try:
        if args.start == "together":
            since = time.monotonic()
            for member in range(args.members):
                host.start(member, group, instance(member))
        else:
            for member in range(args.members):
                since = time.monotonic()
                host.start(member, group, instance(member))
                if member < args.members - 1 and not tracker.wait_assigned(member, args.timeout):
                    break
        ok = phase("formed", since)
        if ok and args.churn:
            tracker.need_records = False
            since = time.monotonic()
            host.close(0)
            if phase("after-leave", since):
                since = time.monotonic()
                host.start(args.members, group, instance(args.members))
                phase("after-join", since, joined=args.members)
    finally:
        host.close_all()
    if host.errors:
        raise RuntimeError("; ".join(host.errors))
    return {"trial": trial, "client": args.client, "members": args.members,
            "start": args.start, "static": args.static, "churn": args.churn,
            "assignor": args.assignor,
            "protocol": "consumer" if consumer_protocol(args.assignor) else "classic",
            "phases": phases,
            "settle_s": [p["settle_s"] for p in phases],
            "stalled": any(p["stalled"] for p in phases) or (args.churn and len(phases) < 3),
            "assignment_changes": tracker.assignments,
            "wall_s": round(time.monotonic() - started, 3)}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", choices=CLIENTS, required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, required=True)
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--start", choices=("together", "one-by-one"), default="together")
    parser.add_argument("--static", action="store_true", help="group.instance.id per member")
    parser.add_argument("--churn", action="store_true",
                        help="then member 0 leaves, and then a new member joins")
    parser.add_argument("--assignor", default="range",
                        help="a classic assignor (range, roundrobin, sticky, "
                             "cooperative-sticky), or consumer[:uniform|:range] for the "
                             "consumer protocol (KIP-848) with that broker-side assignor")
    parser.add_argument("--session-timeout-ms", type=int, default=None,
                        help="classic: the members' session timeout (default 10000); consumer "
                             "protocol: the broker's group.consumer.session.timeout.ms, not sent, "
                             "only the stall threshold (default 45000)")
    parser.add_argument("--timeout", type=float, default=25.0, help="seconds per phase")
    parser.add_argument("--quiet", type=float, default=1.0,
                        help="seconds the group must stay settled")
    parser.add_argument("--fetch-wait-ms", type=int, default=None,
                        help="the members' longest fetch wait (fetch.wait.max.ms / "
                             "fetch_max_wait_ms); default: the client's own (500 ms)")
    parser.add_argument("--trials", type=int, default=1)
    args = parser.parse_args(argv)
    if args.fetch_wait_ms is not None and args.client == "java":
        parser.error("--fetch-wait-ms is not passed to the Java group host")
    if consumer_protocol(args.assignor) and args.client not in CONSUMER_PROTOCOL_CLIENTS:
        parser.error(f"{args.client} has no consumer group protocol (KIP-848): --assignor "
                     f"{args.assignor} needs --client {' or '.join(CONSUMER_PROTOCOL_CLIENTS)}")
    if args.session_timeout_ms is None:
        args.session_timeout_ms = 45000 if consumer_protocol(args.assignor) else 10000
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    for trial in range(args.trials):
        print(json.dumps(run_trial(args, trial)), flush=True)
    return 0


def run(python: str, **options) -> list[dict]:
    """Runs the trials in a child process (fresh client state) and returns their results.
    ``options`` are the command-line options by their argparse names."""
    cmd = [python, "-m", "tests.clients.settle"]
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            cmd.append(flag)
        elif value not in (False, None):
            cmd += [flag, str(value)]
    trials = int(options.get("trials", 1))
    per_trial = 4 * float(options.get("timeout", 25.0)) + 30
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=per_trial * trials + 30)
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(results) != trials:
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode} after "
                           f"{len(results)} of {trials} trials:\n{proc.stderr[-4000:]}")
    return results


if __name__ == "__main__":
    sys.exit(main())
