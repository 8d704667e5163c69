"""A real Apache Kafka 4.x broker for the differential conformance tests.

One node in KRaft combined mode (``process.roles=broker,controller``) on loopback ports, its jars
resolved from Maven Central by ``tests/conformance/pom.xml`` into ``~/.cache/kbroker/kafka-<ver>/``,
its storage formatted by Kafka's own ``kafka.tools.StorageTool`` (``format --standalone``, the 4.x
way of starting a single-controller dynamic quorum), started with ``java -cp ... kafka.Kafka`` and
considered up once it answers ApiVersions and its group coordinator has loaded every partition of
``__consumer_offsets``.

Nothing here skips: without Java, Maven or the jars the fixture fails with a message that says
what is missing and how to get it (``tools/install-test-deps.sh``).
"""
from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

from tests.support import api_versions_ok, free_port

# Kafka 4.4.0's kafka_2.13 pom names a kafka-tools-api 4.4.0 that Maven Central does not have
# (checked when this was written), so the newest 4.x whose dependencies all resolve.
KAFKA_VERSION = os.environ.get("KBROKER_KAFKA_VERSION", "4.3.1")
HERE = os.path.dirname(os.path.abspath(__file__))
POM = os.path.join(HERE, "pom.xml")


class KafkaUnavailable(RuntimeError):
    """Java, Maven or the Kafka jars are missing; the message says how to fix it."""


def cache_dir(version: str = KAFKA_VERSION) -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kbroker", f"kafka-{version}")


def libs_dir(version: str = KAFKA_VERSION) -> str:
    return os.path.join(cache_dir(version), "libs")


def _libs_complete(path: str, version: str) -> bool:
    return (os.path.isfile(os.path.join(path, ".complete"))
            and os.path.isfile(os.path.join(path, f"kafka_2.13-{version}.jar")))


def resolve_kafka_jars(version: str = KAFKA_VERSION) -> str:
    """The directory holding kafka_2.13 and all its runtime jars, downloaded by Maven if needed.

    Maven copies into a fresh temporary directory that is renamed into place only when complete,
    so an interrupted download never leaves a half-filled cache that later runs would trust.
    """
    target = libs_dir(version)
    if _libs_complete(target, version):
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaUnavailable(
            f"the Kafka {version} jars are not in {target} and Maven (mvn) is not installed to "
            "fetch them; run tools/install-test-deps.sh (it needs Java 17 and Maven)")
    os.makedirs(cache_dir(version), exist_ok=True)
    staging = tempfile.mkdtemp(prefix="libs-", dir=cache_dir(version))
    cmd = [mvn, "-q", "-B", "-f", POM, f"-Dkafka.version={version}",
           "dependency:copy-dependencies", "-DincludeScope=runtime",
           f"-DoutputDirectory={staging}"]
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0 or not os.path.isfile(os.path.join(staging, f"kafka_2.13-{version}.jar")):
        shutil.rmtree(staging, ignore_errors=True)
        raise KafkaUnavailable(
            f"Maven could not resolve org.apache.kafka:kafka_2.13:{version} from Maven Central "
            f"({' '.join(cmd)} exited with {result.returncode}):\n{result.stdout[-4000:]}")
    with open(os.path.join(staging, ".complete"), "w") as f:
        f.write(version + "\n")
    if os.path.isdir(target):  # an incomplete earlier attempt
        shutil.rmtree(target, ignore_errors=True)
    try:
        os.rename(staging, target)
    except OSError:  # another process won the race with a complete copy
        shutil.rmtree(staging, ignore_errors=True)
        if not _libs_complete(target, version):
            raise
    return target


def java_executable() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.isfile(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    java = shutil.which("java")
    if java is None:
        raise KafkaUnavailable("java is not installed (Kafka 4.x needs Java 17+); "
                               "run tools/install-test-deps.sh or install openjdk-17-jre")
    return java


def new_cluster_id() -> str:
    """A Kafka cluster id: a random UUID in URL-safe base64 without padding (22 characters).
    It may start with "-", so pass it as ``--cluster-id=<id>``, never as a separate argument."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class KafkaServer:
    """One real Kafka process with its own temporary directory: broker and controller, or
    (``controller`` given) a broker that joins that node's controller quorum, for a cluster of
    several nodes (``KafkaCluster``)."""

    def __init__(self, overrides: dict | None = None, version: str = KAFKA_VERSION,
                 heap: str = "512m", node_id: int = 1, controller: "KafkaServer | None" = None,
                 cluster_id: str | None = None, wait_for_coordinator: bool = True) -> None:
        self.version = version
        #: a lone node waits for its group coordinator at start; a cluster's first node cannot
        #: create __consumer_offsets (replicated on every node) until the others have joined
        self.wait_for_coordinator = wait_for_coordinator and controller is None
        self.heap = heap
        self.node_id = node_id
        self.controller = controller
        self.cluster_id = cluster_id or new_cluster_id()
        self.port = free_port()
        if controller is None:
            self.controller_port = free_port()
            while self.controller_port == self.port:
                self.controller_port = free_port()
        else:
            self.controller_port = controller.controller_port
        self.overrides = dict(overrides or {})
        self.workdir: str | None = None
        self.proc: subprocess.Popen | None = None
        self.log_path: str | None = None
        self.classpath: str | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self, log_dir: str) -> dict:
        if self.controller is None:
            roles = "broker,controller"
            listeners = (f"PLAINTEXT://127.0.0.1:{self.port},"
                         f"CONTROLLER://127.0.0.1:{self.controller_port}")
        else:
            roles, listeners = "broker", f"PLAINTEXT://127.0.0.1:{self.port}"
        props = {
            "process.roles": roles,
            "node.id": str(self.node_id),
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "listeners": listeners,
            "advertised.listeners": listeners,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": log_dir,
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "6000",
            "group.max.session.timeout.ms": "1800000",
        }
        props.update({k: str(v) for k, v in self.overrides.items()})
        return props

    def _java(self, main: str, *args: str, heap: str | None = None) -> list[str]:
        cmd = [java_executable()]
        if heap:
            cmd += [f"-Xmx{heap}", "-Xms128m"]
        cmd += ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-cp", self.classpath, main]
        return cmd + list(args)

    def start(self, timeout: float = 90.0) -> None:
        """Formats and starts the broker; on any failure stops it and removes its directory."""
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, timeout: float) -> None:
        java_executable()  # fail early and clearly without Java
        libs = resolve_kafka_jars(self.version)
        jars = sorted(os.path.join(libs, n) for n in os.listdir(libs) if n.endswith(".jar"))
        self.classpath = os.pathsep.join(jars)
        self.workdir = tempfile.mkdtemp(prefix="kafka-conformance-")
        log_dir = os.path.join(self.workdir, "data")
        config = os.path.join(self.workdir, "server.properties")
        with open(config, "w") as f:
            for key, value in self.properties(log_dir).items():
                f.write(f"{key}={value}\n")
        self.log_path = os.path.join(self.workdir, "kafka.log")

        quorum = ("--standalone",) if self.controller is None else ()
        fmt = subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "--config", config,
                       f"--cluster-id={self.cluster_id}", *quorum, heap="256m"),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed ({fmt.returncode}):\n{fmt.stdout}")
        self._launch(timeout, wait_for_coordinator=self.wait_for_coordinator)

    def _launch(self, timeout: float, wait_for_coordinator: bool = True) -> None:
        config = os.path.join(self.workdir, "server.properties")
        self.log_file = open(self.log_path, "a")
        self.proc = subprocess.Popen(self._java("kafka.Kafka", config, heap=self.heap),
                                     cwd=self.workdir, stdout=self.log_file,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not api_versions_ok(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.proc.returncode}:\n{self.logs()[-6000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kafka did not answer ApiVersions within {timeout}s:\n"
                                   f"{self.logs()[-6000:]}")
            time.sleep(0.2)
        if not wait_for_coordinator:
            return
        try:
            wait_for_group_coordinator(self.port, deadline)
        except Exception as e:
            raise RuntimeError(f"Kafka's group coordinator did not become ready ({e}):\n"
                               f"{self.logs()[-6000:]}") from e

    def logs(self) -> str:
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def halt(self, timeout: float = 30.0) -> None:
        """Stop the process (SIGTERM: a controlled shutdown) and keep its data for restart()."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log_file", None):
            self.log_file.close()
            self.log_file = None

    def restart(self, timeout: float = 90.0) -> None:
        """Start a halted node again on its data and ports."""
        self._launch(timeout, wait_for_coordinator=False)

    def stop(self, timeout: float = 30.0) -> None:
        self.halt(timeout)
        if self.workdir and not os.environ.get("KBROKER_KEEP_KAFKA_DIR"):
            shutil.rmtree(self.workdir, ignore_errors=True)


class KafkaCluster:
    """``size`` Kafka nodes in one cluster: node 1 is broker and the (single) controller, the
    others brokers only, each its own process."""

    def __init__(self, size: int = 3, overrides: dict | None = None, heap: str = "384m") -> None:
        overrides = dict(overrides or {})
        self.nodes = [KafkaServer(overrides, heap=heap, wait_for_coordinator=False)]
        first = self.nodes[0]
        for node_id in range(2, size + 1):
            self.nodes.append(KafkaServer(overrides, heap=heap, node_id=node_id,
                                          controller=first, cluster_id=first.cluster_id))

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def node(self, node_id: int) -> KafkaServer:
        return self.nodes[node_id - 1]

    def start(self, timeout: float = 120.0) -> None:
        try:
            for node in self.nodes:
                node.start(timeout)
            deadline = time.monotonic() + timeout
            wait_for_group_coordinator(self.nodes[0].port, deadline)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, 32-bit signed overflow."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def groups_covering_partitions(partitions: int, prefix: str = "warmup") -> list[str]:
    """One group id per partition of __consumer_offsets (Kafka's partitionFor rule)."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < partitions:
        name = f"{prefix}-{i}"
        h = java_string_hashcode(name)
        p = (0 if h == -(1 << 31) else abs(h)) % partitions
        found.setdefault(p, name)
        i += 1
    return [found[p] for p in range(partitions)]


def wait_for_group_coordinator(port: int, deadline: float, partitions: int = 50) -> None:
    """FindCoordinator (which makes Kafka create __consumer_offsets) and DescribeGroups for one
    group in every partition, until none answers COORDINATOR_NOT_AVAILABLE or
    COORDINATOR_LOAD_IN_PROGRESS: then every scenario's first request meets a loaded coordinator."""
    from protocol.errors import ErrorCode
    from protocol.messages import DescribeGroupsRequest, FindCoordinatorRequest
    from tests.support import RawClient

    groups = groups_covering_partitions(partitions)
    last = None
    while time.monotonic() < deadline:
        client = None
        try:
            client = RawClient(port, client_id="conformance-warmup")
            found = client.call(FindCoordinatorRequest(key_type=0, coordinator_keys=groups), 4)
            last = [c.error_code for c in found.coordinators]
            if all(code == ErrorCode.NONE for code in last):
                # each group asked of its coordinator (several nodes: not always this one)
                by_port: dict[int, list[str]] = {}
                for c in found.coordinators:
                    by_port.setdefault(c.port, []).append(c.key)
                last = []
                for coordinator_port, keys in by_port.items():
                    other = RawClient(coordinator_port, client_id="conformance-warmup")
                    try:
                        described = other.call(DescribeGroupsRequest(groups=keys), 5)
                    finally:
                        other.close()
                    last += [g.error_code for g in described.groups]
                if all(code == ErrorCode.NONE for code in last):
                    return
        except (OSError, ConnectionError):
            pass
        finally:
            if client is not None:
                client.close()
        time.sleep(0.25)
    raise RuntimeError(f"group coordinator not ready, last error codes: {last}")
