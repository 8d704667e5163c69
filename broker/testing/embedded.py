"""The broker inside a test process: real listeners on free loopback ports, in-memory storage,
its own event loop in a background thread, so that any client library (blocking or asyncio) talks
to it over TCP as to a Kafka broker.

    with EmbeddedBroker(**{"num.partitions": 3}) as kafka:
        producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers)

Stopping closes the listeners and connections, ends the thread and closes its loop, and drops
every reference to the broker, so that a test suite can start and stop brokers as it likes.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
import types
import uuid

#: what an embedded broker changes from the CLI's defaults: a free loopback port, the metrics
#: endpoint on a free port too unless metrics.port is given, and its write requests (faults and
#: nodes over HTTP, which test code of other languages uses) on wherever it binds
EMBEDDED_DEFAULTS = {"listeners": "PLAINTEXT://127.0.0.1:0", "metrics.write.enable": True}
START_TIMEOUT_S = 30


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed, as the CLI runs the broker."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def kafka_name(name: str) -> str:
    """Settings by Kafka's name; a Python name (num_partitions) is the same with dots."""
    return name.replace("_", ".")


class EmbeddedBroker:
    """A real kbroker Broker in a background thread. ``EmbeddedBroker(**{"num.partitions": 6})``
    takes any setting by its Kafka name."""

    def __init__(self, settings: dict | None = None, **more) -> None:
        from ..config import BrokerConfig
        values = dict(EMBEDDED_DEFAULTS)
        given = {kafka_name(k): v for k, v in {**(settings or {}), **more}.items()}
        self.serve_metrics = "metrics.port" not in given
        if self.serve_metrics:
            given["metrics.port"] = 0  # served by start() on a free port instead
        values.update(given)
        self.config = BrokerConfig(values)  # a bad setting fails here, in the caller's thread
        self.broker = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.faults = FaultsClient(self)
        self.start_seconds = None

    # -- lifecycle

    def start(self) -> "EmbeddedBroker":
        """Start the broker and return once it answers requests (listeners bound, coordinators
        loaded)."""
        if self.thread is not None:
            raise RuntimeError("already started")
        started = time.monotonic()
        ready: concurrent.futures.Future = concurrent.futures.Future()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True,
                                       name=f"kbroker-node-{self.config['node.id']}")
        self.thread.start()
        try:
            ready.result(timeout=START_TIMEOUT_S)
        except BaseException:
            self._join()
            raise
        self.start_seconds = time.monotonic() - started
        return self

    def _run(self, ready: concurrent.futures.Future) -> None:
        from ..broker import Broker
        loop = self.loop = _new_loop()
        asyncio.set_event_loop(loop)
        try:
            broker = Broker(self.config)
            loop.run_until_complete(broker.start())
            if self.serve_metrics:
                loop.run_until_complete(broker.http.serve(port=0))
            self.broker = broker
        except BaseException as exc:  # noqa: BLE001 - handed to the thread that started it
            self.broker = None
            self._close_loop(loop)
            ready.set_exception(exc)
            return
        ready.set_result(None)
        try:
            loop.run_forever()
        finally:
            self._close_loop(loop)

    @staticmethod
    def _close_loop(loop) -> None:
        tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        asyncio.set_event_loop(None)
        loop.close()

    def stop(self) -> None:
        """Stop the broker, end its thread and let go of it (ports, sockets, memory)."""
        if self.thread is None:
            return
        broker, loop = self.broker, self.loop
        try:
            if broker is not None and loop is not None and loop.is_running():
                asyncio.run_coroutine_threadsafe(self._stop(broker), loop).result(
                    timeout=START_TIMEOUT_S)
        finally:
            if loop is not None and not loop.is_closed():
                loop.call_soon_threadsafe(loop.stop)
            self._join()

    @staticmethod
    async def _stop(broker) -> None:
        await broker.stop()
        server = broker.http.server
        broker.http.stop()
        if server is not None:
            await server.wait_closed()

    def _join(self) -> None:
        if self.thread is not None:
            self.thread.join(timeout=START_TIMEOUT_S)
        self.thread = None
        self.broker = None
        self.loop = None

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- where it is

    @property
    def running(self) -> bool:
        return self.broker is not None

    def _require(self):
        if self.broker is None:
            raise RuntimeError("the embedded broker is not running: start() it first")
        return self.broker

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of every listener of every node, as clients take it."""
        broker = self._require()
        return ",".join(f"{h}:{p}" for h, p in
                        (broker.advertised(name, node) for node in broker.cluster.node_ids
                         for name in broker.server.bound))

    @property
    def port(self) -> int:
        return self._require().advertised(next(iter(self._require().server.bound)))[1]

    @property
    def metrics_url(self) -> str | None:
        """``http://host:port`` of /metrics, /ready and /faults (None when turned off)."""
        bound = self._require().http.bound
        return f"http://{bound[0]}:{bound[1]}" if bound else None

    @property
    def node_id(self) -> int:
        return self.config["node.id"]

    # -- acting inside the broker

    def call(self, fn, *args, **kwargs):
        """Run ``fn(*args, **kwargs)`` on the broker's event loop and return what it returns
        (the broker's state belongs to that loop)."""
        self._require()
        loop = self.loop
        if threading.current_thread() is self.thread:
            return fn(*args, **kwargs)
        future: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread
                future.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return future.result(timeout=START_TIMEOUT_S)

    def _admin(self, api: str, request, version: int):
        """Answer one request through its API handler, as a client's would be answered."""
        from .. import apis
        handler = next(h for h in apis.HANDLERS.values() if h.name == api)
        answer: concurrent.futures.Future = concurrent.futures.Future()
        ctx = types.SimpleNamespace(client_id="kbroker-testing", client_host="127.0.0.1",
                                    api_version=version, listener=next(iter(
                                        self._require().server.bound)))

        def run() -> None:
            handler.handle(self.broker, ctx, request, answer.set_result)

        self.call(run)
        return answer.result(timeout=START_TIMEOUT_S)

    def create_topic(self, name: str | None = None, partitions: int = 1,
                     config: dict | None = None, replication_factor: int = -1) -> str:
        """Create a topic as CreateTopics does (same checks); returns its name (a unique one
        when ``name`` is None). ``replication_factor`` -1: default.replication.factor."""
        from protocol.errors import ErrorCode
        from protocol.messages import CreateTopicsRequest
        name = name or f"topic-{uuid.uuid4().hex[:12]}"
        Topic = CreateTopicsRequest.CreatableTopic
        Config = CreateTopicsRequest.CreatableTopicConfig
        request = CreateTopicsRequest(topics=[Topic(
            name=name, num_partitions=partitions, replication_factor=replication_factor,
            assignments=[],
            configs=[Config(name=k, value=str(v)) for k, v in (config or {}).items()])],
            timeout_ms=30000)
        result = self._admin("CreateTopics", request, 7).topics[0]
        if result.error_code:
            raise ValueError(f"cannot create topic {name!r}: "
                             f"{ErrorCode(result.error_code).name}: {result.error_message}")
        return name

    # -- nodes (``nodes=N``)

    def node_down(self, node: int) -> dict:
        """Take a node down as if its broker died: its listeners and connections close, and
        the partitions and coordinators it led move to other in-sync replicas at the next
        leader epoch (as ``POST /nodes/<id>/down``)."""
        return self.call(self.broker.node_down, node)

    def node_up(self, node: int) -> dict:
        """Bring a node back on its ports (as ``POST /nodes/<id>/up``)."""
        return self.call(self.broker.node_up, node)

    def nodes(self) -> list[dict]:
        """Each node with its state (up or down) and how many partitions it leads."""
        return self.call(self.broker.nodes_state)

    def delete_topic(self, name: str) -> None:
        from protocol.messages import DeleteTopicsRequest
        request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name)],
                                      timeout_ms=30000)
        self._admin("DeleteTopics", request, 6)

    def __repr__(self) -> str:
        where = self.bootstrap_servers if self.running else "stopped"
        return f"<EmbeddedBroker node {self.node_id} {where}>"


class FaultsClient:
    """``broker.faults`` from any thread: each call runs on the broker's loop (see
    broker/faults.py for what a fault is)."""

    def __init__(self, embedded: EmbeddedBroker) -> None:
        self._embedded = embedded

    def _faults(self):
        return self._embedded._require().faults

    def add(self, spec: dict | None = None, **fields):
        """Add a fault; returns it (its ``fired`` and ``seen`` counts follow what it does)."""
        return self._embedded.call(lambda: self._faults().add(spec, **fields))

    def list(self) -> list[dict]:
        return self._embedded.call(lambda: self._faults().list())

    def remove(self, fault_id: int) -> bool:
        return self._embedded.call(lambda: self._faults().remove(fault_id))

    def clear(self) -> int:
        return self._embedded.call(lambda: self._faults().clear())

    # the actions by name
    def coordinator_load(self, duration_ms: int, group: str | None = None,
                         transactional_id: str | None = None):
        match = {k: v for k, v in (("group", group), ("transactional_id", transactional_id))
                 if v is not None}
        return self.add(action="coordinator_load", duration_ms=duration_ms, match=match)

    def finish_loads(self) -> int:
        """End the coordinator loads under way now."""
        return self._embedded.call(lambda: self._faults().finish_loads())

    def expire_member(self, group: str, member_id: str | None = None):
        spec = {"action": "expire_member", "match": {"group": group}}
        if member_id is not None:
            spec["member_id"] = member_id
        return self.add(spec)

    def rebalance(self, group: str):
        return self.add(action="rebalance", match={"group": group})
