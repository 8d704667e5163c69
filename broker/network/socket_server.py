"""The listeners (Kafka's SocketServer and its Acceptors): one acceptor per listening socket,
connections counted for the limits (connection_quotas.py), idle ones closed
(``connections.max.idle.ms``), the broker's memory budgets (memory_pool.py), and the listeners
told when a client connection closes.
"""
from __future__ import annotations

import asyncio
import errno
import socket
import time
from typing import Callable

import structlog

from broker.security import TLS_PROTOCOLS

from . import process_tuning
from .connection import KafkaConnection
from .connection_quotas import ConnectionQuotas, LimitLog, resolve_ip_overrides
from .memory_pool import AnswerBudget, MemoryPool

log = structlog.get_logger("broker.server")

#: the idle check runs at most this often
IDLE_CHECK_MIN_MS = 100
LISTEN_BACKLOG = 1024


def _listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for every address of ``host`` (all interfaces
    when empty), as loop.create_server makes them."""
    # an ASCII host as bytes: a str one goes through the idna codec, whose modules (stringprep,
    # unicodedata) a start would load for nothing
    name = (host.encode() if host.isascii() else host) if host else None
    infos = socket.getaddrinfo(name, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0,
                               socket.AI_PASSIVE)
    socks: list[socket.socket] = []
    try:
        for family, type_, proto, _, address in dict.fromkeys(infos):
            try:
                sock = socket.socket(family, type_, proto)
            except OSError:
                continue  # a family this host cannot open (IPv6 turned off)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                raise OSError(exc.errno, f"error while attempting to bind on address "
                                         f"{address!r}: {(exc.strerror or '').lower()}") from None
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    if not socks:
        raise OSError(f"no address to listen on for {host or '*'}:{port}")
    return socks


class Server:
    """Listeners for every configured address, each with its acceptor; counts connections for
    the limits, closes idle ones, holds the memory budgets and the disconnect listeners."""

    def __init__(self, broker) -> None:
        self.broker = broker
        config = broker.config
        self.clock = broker.clock
        #: each node's acceptor tasks, one per listening socket
        self.node_acceptors: dict[int, list[asyncio.Task]] = {}
        #: accepted sockets being handed to the loop (Server._connect): each its own task, the
        #: acceptor never waits for one
        self.connecting: set[asyncio.Task] = set()
        #: sockets over their address's connection_creation_rate, held unread until closed
        self.throttled_sockets: set[socket.socket] = set()
        self.connections: set[KafkaConnection] = set()
        self.bound: dict[str, tuple[str, int]] = {}  # the first node's, by listener
        #: every node's (listener, node id) -> bound (host, port)
        self.node_bound: dict[tuple[str, int], tuple[str, int]] = {}
        self.quotas = ConnectionQuotas(config["max.connections"],
                                       config["max.connections.per.ip"], {})
        self.slot_freed: asyncio.Future | None = None
        self.max_idle_ms = config["connections.max.idle.ms"]
        self.idle_check = None
        self.trim = None
        self.limit_log = LimitLog(broker.timer)
        #: queued.max.request.bytes: request bytes read and not yet answered, over all
        #: connections; at the limit no connection starts a new request
        self.memory_pool = MemoryPool(config["queued.max.request.bytes"])
        #: queued.max.response.bytes: answers made and not yet taken by the sockets; a Fetch
        #: reads at most what is left (AnswerBudget.fetch_budget)
        self.answer_budget = AnswerBudget(config["queued.max.response.bytes"], broker.metrics,
                                          self.limit_log)
        #: SSL and SASL_SSL listeners' TLS (broker/security/tls.py ListenerTls), by listener
        #: name; set by start_tls
        self.tls: dict = {}
        #: TLS connections whose handshake is not over (tls_handshake.PendingTls)
        self.handshaking: set = set()
        #: what every TLS connection reads its socket into (tls.ServerTlsProtocol)
        self.tls_read_buffer: memoryview | None = None
        self.handshake_timeout_s = 0.0
        self.loop = None
        #: told of each client connection that closed, with its KafkaConnection, however it
        #: closed (Kafka's ConnectionDisconnectListener: share sessions end with theirs)
        self.disconnect_listeners: list[Callable[[KafkaConnection], None]] = []

    def add_disconnect_listener(self, listener: Callable[[KafkaConnection], None]) -> None:
        self.disconnect_listeners.append(listener)

    def disconnected(self, conn: KafkaConnection) -> None:
        """``conn`` closed: every listener is told; one that fails is logged and the others
        are still told, as Kafka swallows a listener's exception."""
        for listener in self.disconnect_listeners:
            try:
                listener(conn)
            except Exception:  # noqa: BLE001 - one listener must not stop the others
                log.exception("disconnect listener failed", peer=conn.peer)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        process_tuning.raise_open_files_limit()
        self.quotas.overrides = resolve_ip_overrides(
            self.broker.config["max.connections.per.ip.overrides"])
        self.start_tls()
        self.loop = loop
        cluster = self.broker.cluster
        for index, node in enumerate(cluster.node_ids):
            self._listen(loop, node, index)
        self.schedule_idle_check()

    def start_tls(self) -> None:
        """The TLS of the SSL and SASL_SSL listeners. The only place the network layer loads
        broker/security/tls.py, so a broker without TLS listeners never imports it."""
        config = self.broker.config
        if not any(p in TLS_PROTOCOLS for p in config.security_protocols.values()):
            return
        from broker.security import tls
        self.tls = tls.listener_contexts(config)
        self.tls_read_buffer = memoryview(bytearray(tls.ServerTlsProtocol.max_size))
        self.handshake_timeout_s = tls.handshake_timeout_s(config)

    def _listen(self, loop, node: int, index: int) -> None:
        """Open ``node``'s listeners: port + index of each configured port (an ephemeral port
        when 0), or the very ports it had when it comes back up."""
        single = self.broker.cluster.single
        for name, host, port in self.broker.config.listeners:
            bound = self.node_bound.get((name, node))
            socks = _listening_sockets(host, bound[1] if bound else
                                       (port + index if port else 0))
            sockname = socks[0].getsockname()
            self.node_bound[(name, node)] = (sockname[0], sockname[1])
            if index == 0:
                self.bound[name] = (sockname[0], sockname[1])
            for sock in socks:
                self.node_acceptors.setdefault(node, []).append(
                    loop.create_task(self._accept(name, sock, node)))
            if single:
                log.info("listening", listener=name, host=sockname[0], port=sockname[1])
            else:
                log.info("listening", listener=name, host=sockname[0], port=sockname[1],
                         node=node)

    def acceptors(self) -> list[asyncio.Task]:
        return [task for tasks in self.node_acceptors.values() for task in tasks]

    def node_down(self, node: int) -> int:
        """``node`` stops: its listeners close and so does every connection it accepted, as
        when a Kafka broker goes away. Returns how many connections were closed."""
        for task in self.node_acceptors.pop(node, []):
            task.cancel()  # it closes its listening socket as it ends
        closed = 0
        for conn in list(self.connections):
            if conn.node_id == node and not conn.closed:
                conn.drop(f"node {node} is down")
                closed += 1
        for pending in list(self.handshaking):
            if pending.node == node:
                log.info("closing connection", peer=pending.peer, listener=pending.listener,
                         reason=f"node {node} is down")
                pending.abandon()
                closed += 1
        return closed

    def node_up(self, node: int) -> None:
        """``node`` listens again, on the ports it had."""
        if node in self.node_acceptors:
            return
        index = self.broker.cluster.node_ids.index(node)
        self._listen(asyncio.get_running_loop(), node, index)

    async def _accept(self, listener: str, sock: socket.socket, node: int) -> None:
        """Kafka's acceptor: at max.connections it waits for a slot before it accepts (the
        connection waits in the listen backlog, unread); a connection from an address that has
        its max.connections.per.ip already is closed right after it is accepted."""
        try:
            await self._accept_connections(listener, sock, node)
        finally:
            sock.close()

    async def _accept_connections(self, listener: str, sock: socket.socket, node: int) -> None:
        loop = asyncio.get_running_loop()
        quotas = self.quotas
        while True:
            if not quotas.slot_available():
                self.limit_log.note("warning", "max.connections reached: new connections wait "
                                    "until one closes", limit=quotas.max_connections)
                if self.slot_freed is None:
                    self.slot_freed = loop.create_future()
                await asyncio.shield(self.slot_freed)
                continue
            try:
                conn, address = sock.accept()
            except (BlockingIOError, InterruptedError):
                await self._acceptable(loop, sock)
                continue
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    raise
                # out of file descriptors: the connection waits in the backlog
                self.limit_log.note("warning", "cannot accept connections", error=exc.strerror)
                await asyncio.sleep(1)
                continue
            conn.setblocking(False)
            host = address[0]
            rates = self.broker.client_quotas.connections
            if rates.enabled:
                throttle_ms = rates.record(host, self.broker.clock())
                if throttle_ms:
                    self._hold_then_close(loop, conn, host, throttle_ms)
                    continue
            if not quotas.inc(host):
                conn.close()
                self.broker.metrics.connection_rejected("max.connections.per.ip")
                self.limit_log.note("warning", "connections refused: address has "
                                    "max.connections.per.ip", host=host,
                                    limit=quotas.limit(host))
                continue
            listener_tls = self.tls.get(listener)
            if listener_tls is not None:
                from .tls_handshake import PendingTls  # TLS listeners only
                protocol = PendingTls(self, listener, node, listener_tls, address,
                                      loop.time() + self.handshake_timeout_s)
                self.handshaking.add(protocol)
                protocol.start(loop)
            else:
                protocol = KafkaConnection(self.broker, listener, node)
                protocol.quota_host = host
            handover = self._connect(loop, protocol, conn, host)
            task = loop.create_task(handover)
            self.connecting.add(task)
            task.add_done_callback(self.connecting.discard)

    def _hold_then_close(self, loop, conn: socket.socket, host: str, throttle_ms: int) -> None:
        """A connection over its address's connection_creation_rate (Kafka's
        ConnectionThrottledException): not read, not counted, closed when the throttle time is
        over, as Kafka's acceptor closes it."""
        self.broker.metrics.connection_rejected("connection_creation_rate")
        self.limit_log.note("warning", "connections throttled: address over its "
                            "connection_creation_rate", host=host)
        self.throttled_sockets.add(conn)

        def close() -> None:
            self.throttled_sockets.discard(conn)
            conn.close()
        loop.call_later(throttle_ms / 1000.0, close)

    async def _connect(self, loop, protocol, conn: socket.socket, host: str) -> None:
        """Hand an accepted socket to the loop as a transport for its connection. A task of
        its own, not awaited by the acceptor: under a thousand connects at once, an acceptor
        awaiting each hand-over was seen waiting forever on one whose connection was made."""
        try:
            await loop.connect_accepted_socket(lambda: protocol, conn)
        except Exception as exc:  # noqa: BLE001 - one bad socket must not stop accepting
            log.warning("accepting a connection failed", peer=host, error=str(exc))
            if isinstance(protocol, KafkaConnection):
                self.uncount(protocol)
            else:  # a TLS handshake (tls_handshake.PendingTls)
                protocol.abandon()
            conn.close()

    @staticmethod
    async def _acceptable(loop, sock: socket.socket) -> None:
        """Wait until the listening socket has a connection to accept. The reader is
        level-triggered and the backlog is then drained with accept() until it would block, so
        no wakeup is lost however connections come and go (loop.sock_accept left hundreds of
        connections in the backlog after many rounds of a thousand connects and closes)."""
        ready = loop.create_future()
        fd = sock.fileno()
        loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
        try:
            await ready
        finally:
            loop.remove_reader(fd)

    def uncount(self, conn: KafkaConnection) -> None:
        """Give back a closed connection's slot; an acceptor waiting for one goes on."""
        host = conn.quota_host
        if host is None:
            return
        conn.quota_host = None
        self.quotas.dec(host)
        waiter = self.slot_freed
        if waiter is not None and self.quotas.slot_available():
            self.slot_freed = None
            if not waiter.done():
                waiter.set_result(None)

    def schedule_trim(self) -> None:
        """Give freed memory back to the system a moment after connections that held much
        closed (once for a whole flood of them)."""
        if self.trim is None:
            self.trim = self.broker.timer.call_later(process_tuning.TRIM_DELAY_MS, self._trim)

    def _trim(self) -> None:
        self.trim = None
        process_tuning.trim_malloc()

    # -- connections.max.idle.ms

    def schedule_idle_check(self) -> None:
        if self.max_idle_ms >= 0:
            self.idle_check = self.broker.timer.call_later(
                max(self.max_idle_ms, IDLE_CHECK_MIN_MS), self.expire_idle)

    def expire_idle(self) -> None:
        """Close the connections without a read or a write for longer than
        connections.max.idle.ms (a write buffer that shrank since the last look counts as a
        write), then look again when the next one could be due."""
        now = self.clock()
        max_idle = self.max_idle_ms
        next_check = now + max_idle + 1
        expired = 0
        for conn in list(self.connections):
            if conn.closed:
                continue
            transport = conn.transport
            if transport is not None:
                buffered = transport.get_write_buffer_size()
                if buffered < conn.write_buffer_seen:  # the socket took some: a write
                    conn.last_active = max(conn.last_active, now)
                conn.write_buffer_seen = buffered
                if conn.answers_held:
                    conn._answers_sent(buffered)
            if now - conn.last_active > max_idle:
                conn.expire()
                expired += 1
            else:
                next_check = min(next_check, conn.last_active + max_idle + 1)
        if expired:
            self.broker.metrics.connection_rejected("connections.max.idle.ms", expired)
            self.limit_log.note("info", "closed idle connections", n=expired,
                                max_idle_ms=max_idle)
        self.idle_check = self.broker.timer.add(max(next_check, now + IDLE_CHECK_MIN_MS),
                                                self.expire_idle)

    # -- shutdown

    def stop_accepting(self) -> None:
        for task in self.acceptors():
            task.cancel()  # each closes its listening socket as it ends
        for sock in list(self.throttled_sockets):
            sock.close()
        self.throttled_sockets.clear()
        for task in list(self.connecting):
            task.cancel()
        for pending in list(self.handshaking):
            pending.abandon()
        for handle in (self.idle_check, self.trim):
            if handle is not None:
                handle.cancel()
        self.idle_check = self.trim = None

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish (up to grace seconds), close."""
        self.stop_accepting()
        deadline = time.monotonic() + grace
        while any(c.pending for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        acceptors = self.acceptors()
        if acceptors:
            await asyncio.gather(*acceptors, return_exceptions=True)
            self.node_acceptors.clear()
