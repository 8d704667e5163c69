"""A connection of an SSL or SASL_SSL listener until its TLS handshake is over (PendingTls)."""
from __future__ import annotations

import asyncio

import structlog

from broker.security import tls

from .connection import KafkaConnection

log = structlog.get_logger("broker.server")


class PendingTls(asyncio.Protocol):
    """A connection of an SSL or SASL_SSL listener until its TLS handshake is over.

    A client that connects and sends nothing, or part of a ClientHello, costs only this and its
    socket's transport: the bytes that came are kept until its first TLS record is whole, and
    only then are the SSL object, the TLS protocol (tls.ServerTlsProtocol) and the
    KafkaConnection made and given those bytes. One bound, tls.handshake_timeout_s from the
    accept, covers both stages: past it the connection is closed with one line."""

    __slots__ = ("server", "listener", "node", "listener_tls", "peer", "quota_host", "head",
                 "deadline", "timer", "transport", "conn", "finished")

    def __init__(self, server, listener: str, node: int, listener_tls, address,
                 deadline: float) -> None:
        self.server = server
        self.listener = listener
        self.node = node
        self.listener_tls = listener_tls
        self.peer = f"{address[0]}:{address[1]}"
        #: the slot of the connection quotas it holds, handed to its KafkaConnection
        self.quota_host: str | None = address[0]
        self.head = bytearray()
        self.deadline = deadline  # loop time
        self.timer = None
        self.transport = None
        self.conn: KafkaConnection | None = None
        #: the handshake is over, or the connection closed: nothing more to do
        self.finished = False

    def start(self, loop) -> None:
        self.timer = loop.call_at(self.deadline, self._expired)

    # -- before the first TLS record

    def connection_made(self, transport) -> None:
        self.transport = transport
        if self.finished:  # expired or abandoned while the transport was being made
            transport.abort()

    def data_received(self, data: bytes) -> None:
        if self.finished or self.conn is not None:
            return
        head = self.head
        head += data
        if tls.first_record_end(head) is not None:
            self._start_tls()

    def eof_received(self) -> None:
        return None  # the transport closes; connection_lost says why

    def connection_lost(self, exc) -> None:
        if self.conn is None and not self.finished:
            self._fail(tls.handshake_failure(exc) if exc is not None else
                       "TLS handshake failed: the client closed the connection")

    def _expired(self) -> None:
        self.timer = None
        if self.conn is None and not self.finished:
            self._fail("TLS handshake did not finish in time")

    # -- the handshake

    def _start_tls(self) -> None:
        """The first record is whole: make the TLS state and the connection, switch the
        transport to them (as loop.start_tls does) and give them what came."""
        server = self.server
        loop = server.loop
        if self.timer is not None:
            self.timer.cancel()  # from here SSLProtocol bounds the handshake, to the same end
            self.timer = None
        conn = KafkaConnection(server.broker, self.listener, self.node)
        waiter = loop.create_future()
        tls_protocol = tls.ServerTlsProtocol(
            loop, conn, self.listener_tls.context, waiter, server_side=True,
            ssl_handshake_timeout=max(self.deadline - loop.time(), 0.001),
            read_buffer=server.tls_read_buffer)
        # made: from here the connection, not this, holds the slot and ends the handshake
        self.conn = conn
        conn.quota_host, self.quota_host = self.quota_host, None
        waiter.add_done_callback(self._handshake_done)
        transport = self.transport
        head, self.head = self.head, None
        transport.pause_reading()
        transport.set_protocol(tls_protocol)
        tls_protocol.connection_made(transport)
        view, offset = memoryview(head), 0
        while offset < len(head) and not transport.is_closing():
            buffer = tls_protocol.get_buffer(len(head) - offset)
            n = min(len(buffer), len(head) - offset)
            buffer[:n] = view[offset:offset + n]
            offset += n
            tls_protocol.buffer_updated(n)
        view.release()
        if not transport.is_closing():
            transport.resume_reading()

    def _handshake_done(self, waiter: asyncio.Future) -> None:
        conn = self.conn
        if self.finished:
            return
        exc = None if waiter.cancelled() else waiter.exception()
        if exc is None and conn.transport is not None:  # connection_made: the handshake is over
            self.finished = True
            self.server.handshaking.discard(self)
            return
        self._fail(tls.handshake_failure(exc) if exc is not None else
                   "TLS handshake failed: the connection closed during the handshake")

    # -- the end of a handshake that did not finish

    def _fail(self, reason: str) -> None:
        log.warning("closing connection", peer=self.peer, listener=self.listener, reason=reason)
        self.server.broker.metrics.connection_rejected("TLS handshake failed")
        self.abandon()

    def abandon(self) -> None:
        """Close without a line (the broker stops, its node goes down, or _fail said why); the
        slot of the connection quotas is given back."""
        if self.finished:
            return
        self.finished = True
        self.head = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        server = self.server
        server.handshaking.discard(self)
        server.uncount(self.conn if self.conn is not None else self)
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.abort()
