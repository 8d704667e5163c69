"""Helpers for tests that run the broker as a real process and talk to it over TCP."""
from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int) -> float:
    """The resident memory of process ``pid`` (VmRSS), in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError(f"no VmRSS for process {pid}")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class BrokerProcess:
    """``python -m broker`` as a child process, with JSON logs captured to a file.

    Every started process is remembered so the session can kill any a failed test left running.
    """

    started: list["BrokerProcess"] = []

    def __init__(self, data_dir: str | None = None, overrides: dict | None = None,
                 env: dict | None = None, port: int | None = None) -> None:
        self.port = port or free_port()
        self.data_dir = data_dir
        self.overrides = dict(overrides or {})
        self.env = dict(env or {})
        self.proc = None
        self.log_path = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "broker", "--metrics-port", "0", "--log-format", "json"]
        if "listeners" not in self.overrides:  # else self.port must be one of the listeners
            cmd += ["--port", str(self.port)]
        if self.data_dir:
            cmd += ["--data-dir", self.data_dir]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def start(self, timeout: float = 20.0) -> None:
        import tempfile
        fd, self.log_path = tempfile.mkstemp(prefix="kbroker-", suffix=".log")
        self.log_file = os.fdopen(fd, "w")
        env = dict(os.environ, **self.env)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(self.command(), cwd=ROOT, env=env, stdout=self.log_file,
                                     stderr=subprocess.STDOUT)
        BrokerProcess.started.append(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.logs()}")
            if api_versions_ok(self.port):
                return
            time.sleep(0.05)
        raise RuntimeError(f"broker did not answer ApiVersions within {timeout}s:\n{self.logs()}")

    def logs(self) -> str:
        with open(self.log_path) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    @classmethod
    def kill_leftovers(cls) -> None:
        for broker in cls.started:
            if broker.proc is not None and broker.proc.poll() is None:
                broker.proc.kill()
                broker.proc.wait()
        cls.started.clear()


def api_versions_ok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            request = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
            sock.sendall(struct.pack(">i", len(request)) + request)
            size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
            body = sock.recv(size, socket.MSG_WAITALL)
            return struct.unpack_from(">ih", body) == (1, 0)
    except (OSError, struct.error):
        return False


class RawClient:
    """A blocking protocol-level client: send one request, read its response."""

    def __init__(self, port: int, client_id: str = "raw-client") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.client_id = client_id
        self.correlation_id = 0

    def send(self, request, version: int) -> int:
        from protocol.framing import encode_request
        self.correlation_id += 1
        api_key = type(request).api_key
        self.sock.sendall(encode_request(api_key, version, self.correlation_id, self.client_id,
                                         request))
        return self.correlation_id

    def receive(self, response_cls, version: int, api_key: int):
        from protocol.framing import read_response_header
        from protocol.messages import APIS
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        correlation_id, offset = read_response_header(
            frame, APIS[api_key].response_header_version(version))
        return correlation_id, response_cls.decode(frame, version, offset)

    def call(self, request, version: int):
        from protocol.messages import APIS
        api = APIS[type(request).api_key]
        sent = self.send(request, version)
        correlation_id, response = self.receive(api.response, version, api.key)
        assert correlation_id == sent
        return response

    @classmethod
    def once(cls, port: int, request, version: int):
        """One request on a connection of its own, closed after the answer."""
        client = cls(port)
        try:
            return client.call(request, version)
        finally:
            client.close()

    def _read(self, n: int) -> bytes:
        """Exactly ``n`` bytes: a socket with a timeout is non-blocking underneath, so one
        recv(MSG_WAITALL) returns only what has arrived (Kafka writes a Fetch answer's records
        apart from its header)."""
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(data)} of {n} bytes")
            data += chunk
        return bytes(data)

    def __enter__(self) -> "RawClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()


class GroupMember:
    """A consumer-group member in its own process (tests/clients/group_consumer.py or the Java
    client), whose JSON event lines are collected by a reader thread."""

    def __init__(self, command: list[str]) -> None:
        import threading
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.events: list[dict] = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    @classmethod
    def python(cls, client: str, bootstrap: str, topic: str, group: str, assignor: str,
               client_id: str = "group-test", instance_id: str | None = None,
               session_timeout_ms: int = 10000) -> "GroupMember":
        cmd = [sys.executable, "-m", "tests.clients.group_consumer", "--client", client,
               "--bootstrap", bootstrap, "--topic", topic, "--group", group, "--assignor",
               assignor, "--client-id", client_id,
               "--session-timeout-ms", str(session_timeout_ms)]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        return cls(cmd)

    def _read(self) -> None:
        import json
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.events.append(event)

    def snapshot(self) -> list[dict]:
        with self.lock:
            return list(self.events)

    def records(self) -> list[tuple[int, int, str]]:
        return [(e["p"], e["o"], e["v"]) for e in self.snapshot() if e["event"] == "record"]

    def assignment(self) -> set[int]:
        """Partitions currently assigned, from the assigned/revoked events."""
        current: set[int] = set()
        for e in self.snapshot():
            if e["event"] == "assigned":  # every client runner reports the full assignment
                current = set(e["partitions"])
            elif e["event"] == "revoked":
                current -= set(e["partitions"])
        return current

    def stop(self, sig=signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self.reader.join(5)
        return code


def wait_until(condition, timeout: float, interval: float = 0.1, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


def subscribe_with_metadata(consumer, topics: list[str], timeout: float = 30.0, **kwargs) -> None:
    """Subscribe a kafka-python consumer and load the topics' metadata before its first join.

    kafka-python 3.0.12 can lose a rejoin: a leader that assigned before its metadata listener
    saw the topics rejoins when the metadata arrives; if poll()'s timeout ends while that
    JoinGroup/SyncGroup is in flight, need_rejoin() turns false (its assignment snapshot now
    matches) and the finished join is never collected, so the member stays REBALANCING with
    heartbeats off until the coordinator expires it. A metadata update after subscribe() and
    before the first poll() makes the first assignment the final one.
    """
    consumer.subscribe(topics, **kwargs)
    wait_until(lambda: set(topics) <= consumer.topics(), timeout,
               message=f"metadata of {topics}")


def confluent_read(bootstrap: str, topic: str, count: int, timeout: float = 30.0,
                   group: str | None = None) -> list[str]:
    """Up to ``count`` values of ``topic`` (decoded), read from the start by a confluent-kafka
    consumer in a new group (or ``group``, whose offsets it commits)."""
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or unique("read"),
                         "auto.offset.reset": "earliest"})
    got: list[str] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value().decode())
        if group is not None:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got
