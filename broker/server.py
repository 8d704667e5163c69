"""The asyncio listeners and connections: framing, pipelining, limits, ordered responses.

Each connection reads size-prefixed frames, decodes the header, refuses what it cannot serve and
hands the request to its API handler with a ``respond`` callback. Handlers may answer at once or
later (delayed operations); responses are written strictly in request order. A malformed frame
closes only its own connection, with one log line saying why.

Memory is bounded before it is spent, as Kafka bounds it by muting a channel until its response
is sent: before a request is handled, a connection checks its requests in flight
(``queued.max.requests``), its answers not yet taken by the socket (:data:`QUEUED_ANSWER_BYTES`)
and the broker's request bytes (``queued.max.request.bytes``); if one is over, the request stays
in the read buffer and nothing more is read until it is under again. The answers of all
connections not yet taken by their sockets are counted too (``queued.max.response.bytes``): a
Fetch reads only what is left of that budget, so clients that ask for much and read slowly, or
not at all, cannot make the broker hold more than it.

Connections are counted as Kafka's ``ConnectionQuotas`` counts them: at ``max.connections`` the
acceptor stops accepting (new connections wait in the listen backlog until a slot frees), a
connection over ``max.connections.per.ip`` (or its override) is closed right after it is
accepted, and one idle for ``connections.max.idle.ms`` is closed.
"""
from __future__ import annotations

import asyncio
import collections
import errno
import ipaddress
import mmap
import re
import resource
import socket
import struct
import time

import structlog

from broker.security import ANONYMOUS, SASL_PROTOCOLS, tls
from protocol.framing import read_request_header, response_header
from protocol.messages import ApiVersionsResponse
from protocol.schema import DecodeError

from . import apis
from .config import ConfigError

log = structlog.get_logger("broker.server")

_SIZE = struct.Struct(">i")
UNSUPPORTED_VERSION = 35
READ_BUFFER_SIZE = 16 * 1024  # per connection; larger frames get their own buffer
#: answers of one connection held in memory because its socket does not take them (the client
#: reads slowly, or not at all): past this, its next request waits. The transport's high-water
#: mark; at most one more answer is made past it.
QUEUED_ANSWER_BYTES = 64 * 1024
#: one log line per this interval for connections refused or held by a limit, with the count
LIMIT_LOG_INTERVAL_MS = 10_000
#: the idle check runs at most this often
IDLE_CHECK_MIN_MS = 100
LISTEN_BACKLOG = 1024
#: a failed authentication's answer is written this long before its connection closes
FAILED_ANSWER_LINGER_MS = 100
_NO_BUFFER = bytearray()
#: the first buffer of a large frame holds at least this much (or the whole frame)
BIG_FRAME_FIRST_READ = 64 * 1024
#: frames from this size get an anonymous memory mapping of their whole size: the system gives
#: it pages only as the bytes arrive (a client that declares a huge frame and sends little holds
#: little), with no zero-filling pass and no copies as it grows; smaller ones a growing bytearray,
#: so that logs holding many of them do not hold as many mappings
MAPPED_FRAME_MIN = 256 * 1024


def _frame_buffer(size: int, arrived: int):
    """The buffer a large frame is read into: a mapping of its size, or a bytearray with room
    for twice what arrived (at least BIG_FRAME_FIRST_READ)."""
    if size >= MAPPED_FRAME_MIN:
        return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return bytearray(min(size, max(2 * arrived, BIG_FRAME_FIRST_READ)))


def _grown(buffer: bytearray, filled: int, size: int) -> bytearray:
    """A large frame's bytearray with room for more: twice as large, at most the frame's size.
    The copies over a frame's life add up to less than its size."""
    grown = bytearray(min(size, 2 * len(buffer)))
    grown[:filled] = memoryview(buffer)[:filled]
    return grown


_DIGITS = re.compile(r"\d+")


def reason_label(reason: str) -> str:
    """A close reason as a metric label: its kind without what the client chose (sizes, api
    keys and versions become N; details after ':' or ' (' go), so labels stay few."""
    return _DIGITS.sub("N", reason.split(":", 1)[0].split(" (", 1)[0])


class Request:
    """One request in flight on a connection (Kafka's RequestChannel.Request): what a handler
    knows of it beyond its body (it is the handler's ``ctx``), its place in the connection's
    response order, and ``respond``, which the handler calls exactly once."""

    __slots__ = ("conn", "handler", "codec", "header", "api_version", "client_id",
                 "client_host", "listener", "started", "done", "chunks", "answer_bytes",
                 "reserved", "size", "handled", "throttle_ms")

    def __init__(self, conn: "KafkaConnection", handler, codec, header, started: float) -> None:
        self.conn = conn
        self.handler = handler
        self.codec = codec
        self.header = header
        self.api_version = header.api_version
        self.client_id = header.client_id or ""
        self.client_host = conn.client_host
        self.listener = conn.listener
        self.started = started
        self.done = False
        self.chunks = None
        self.answer_bytes = 0
        #: bytes of queued.max.request.bytes this request holds until it is answered
        self.reserved = conn.frame_reserved
        conn.frame_reserved = 0
        #: the request's bytes (header and body), what Produce counts toward its byte quota
        self.size = 0
        #: seconds its handler ran, once it returned (the request quota counts this)
        self.handled = None
        #: a client quota's throttle (broker/client_quotas.py): the answer carries it as
        #: throttle_time_ms and the connection then reads nothing for it (KIP-219)
        self.throttle_ms = 0

    def park(self) -> None:
        """The handler parks this request as a delayed operation (a long-poll Fetch): the
        connection handles nothing after it until it is answered, as Kafka's network layer
        reads one request at a time per connection, so what a connection's parked answers
        can hold stays bounded (answers go out in request order anyway)."""
        self.conn.parked = self

    def respond(self, response) -> None:
        """Encode the response (None: no response at all, e.g. Produce with acks=0) and send it
        once every earlier request on the connection has been answered."""
        if self.done:
            raise RuntimeError(f"{self.handler.name} answered twice")
        if response is None:
            self.conn._complete(self, None, None, 0)
            return
        if type(response) is not self.handler.response:
            raise TypeError(f"{self.handler.name} answered with {type(response).__name__}")
        quotas = self.conn.quotas
        if quotas.request.enabled:
            quotas.record_request(self)
        if self.throttle_ms and hasattr(response, "throttle_time_ms"):
            response.throttle_time_ms = max(response.throttle_time_ms or 0, self.throttle_ms)
        _, encode, header_version = self.codec
        chunks: list = []
        encode(response, chunks.append)
        size = 0
        for c in chunks:
            size += len(c)
        header = response_header(self.header.correlation_id, header_version, size)
        chunks.insert(0, header)
        self.conn._complete(self, chunks, response, size + len(header))


def _misrouted(broker, conn, req, request) -> bool:
    """Several nodes serve: NOT_COORDINATOR for keys coordinated elsewhere
    (broker/apis/coordinator_routing.py, loaded only then)."""
    from .apis.coordinator_routing import misrouted
    return misrouted(broker, conn, req, request)


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker, listener: str, node_id: int | None = None) -> None:
        self.broker = broker
        #: the node whose listener accepted it (one of broker.cluster.node_ids)
        self.node_id = broker.node_id if node_id is None else node_id
        self.server = broker.server
        self.faults = broker.faults
        self.quotas = broker.client_quotas
        #: several nodes: group and transaction requests may reach a node that does not
        #: coordinate their key (broker/apis/coordinator_routing.py)
        self.multi_node = not broker.cluster.single
        self.listener = listener
        self.config = broker.config
        #: the listener's protocol (listener.security.protocol.map) and who the client is:
        #: User:ANONYMOUS until it authenticates, as on Kafka
        self.security_protocol = broker.config.security_protocols[listener]
        self.principal = ANONYMOUS
        self.clock = broker.clock
        self.max_frame = broker.config["socket.request.max.bytes"]
        #: the setting max_frame comes from, for the log line of a frame over it
        self.max_frame_setting = "socket.request.max.bytes"
        self.max_in_flight = broker.config["queued.max.requests"]
        self.loop = None
        self.transport = None
        self.peer = "?"
        self.client_host = ""
        #: small frames, reused; made at the first read, so an idle connection costs little
        self.read_buffer = _NO_BUFFER
        self.read_start = 0
        self.read_end = 0
        #: a frame larger than the read buffer, read straight into its own buffer: the buffer,
        #: how many of its bytes arrived, and the frame's size. The buffer grows with what
        #: arrived (at most twice that, or BIG_FRAME_FIRST_READ), so a client that declares a
        #: huge frame and sends little holds little
        self.big: bytearray | mmap.mmap | None = None
        self.big_filled = 0
        self.big_size = 0
        self.out: list = []  # response chunks ready to write, in request order
        self.out_bytes = 0
        self.batching = False  # inside buffer_updated: write once at its end
        self.pending: list[Request] = []
        #: a request parked as a delayed operation (Request.park): nothing after it is handled
        self.parked: Request | None = None
        self.closed = False
        #: a bad frame arrived: nothing more is read, and the connection closes once the
        #: requests before it are answered (close_after_answers)
        self.closing = False
        self.reading_paused = False
        self.writing_paused = False
        #: muted for a client quota's throttle time: nothing more is read until it is over
        self.throttled_until = 0
        #: the read buffer holds a request that had to wait (must_wait); it is handled first
        #: when the wait is over, before anything more is read
        self.unhandled = False
        self.resume_scheduled = False
        #: queued.max.request.bytes held for the frame being read, and whether the connection
        #: waits for the broker's request bytes to fall under it
        self.frame_reserved = 0
        self.waiting_for_memory = False
        #: a failed authentication: its answer is held, and the connection closes, only when
        #: connection.failed.authentication.delay.ms is over
        self.close_delayed = False
        #: last read or write (broker clock, ms), and the transport's write buffer after the last
        #: write or look of the idle check: a buffer that shrank since was being sent
        self.last_active = 0
        self.write_buffer_seen = 0
        #: bytes of its answers counted in the server's queued.max.response.bytes: made and not
        #: yet taken by the socket, as last seen (_answers_sent looks again); of them, those
        #: made but waiting behind an earlier request's answer
        self.answers_held = 0
        self.answers_waiting = 0
        #: it held more than QUEUED_ANSWER_BYTES of answers, or a frame larger than its read
        #: buffer, at some point: when it closes, freed memory is given back to the system
        self.held_much = False
        #: the address whose slot of the server's connection quotas this connection holds (given
        #: back once, when it closes)
        self.quota_host: str | None = None
        #: SASL listeners: the connection's authentication state (broker/security/sasl.py), which
        #: sees every frame first while it has something to say (``screening``)
        self.authenticator = broker.sasl.authenticator(self) \
            if self.security_protocol in SASL_PROTOCOLS else None

    # -- asyncio callbacks

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.loop = asyncio.get_running_loop()
        peer = transport.get_extra_info("peername")
        if peer:
            self.client_host = peer[0]
            self.peer = f"{peer[0]}:{peer[1]}"
        transport.set_write_buffer_limits(high=QUEUED_ANSWER_BYTES)
        self.last_active = self.clock()
        self.server.connections.add(self)
        self.broker.metrics.connection_opened()
        if self.security_protocol == "SSL":  # the handshake is over: who the certificate names
            self.server.tls[self.listener].authenticate(self, transport)

    def connection_lost(self, exc) -> None:
        if not self.closed and self.transport is not None and tls.is_tls_error(exc):
            # a TLS record that does not decrypt, an alert from the client, ...
            log.warning("closing connection", peer=self.peer, listener=self.listener,
                        reason=tls.tls_error(exc))
            self.broker.metrics.connection_rejected("TLS error")
        self.closed = True
        server = self.server
        if self in server.connections:
            server.connections.discard(self)
            self.broker.metrics.connection_closed()
        server.uncount(self)
        # what it held of queued.max.request.bytes goes back at once; answers made later for
        # its requests are dropped
        held = self.frame_reserved
        self.frame_reserved = 0
        for request in self.pending:
            held += request.reserved
            request.reserved = 0
        if held:
            server.release(held)
        self.pending.clear()
        self.big = None
        self.out = []
        self.out_bytes = 0
        if self.answers_held:
            server.answers_released(self, self.answers_held)
            self.answers_held = self.answers_waiting = 0
        if self.held_much:
            server.schedule_trim()

    def pause_writing(self) -> None:
        self.writing_paused = True
        self.held_much = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._answers_sent()
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        big = self.big
        if big is not None:
            filled = self.big_filled
            if filled == len(big):
                big = self.big = _grown(big, filled, self.big_size)
            return memoryview(big)[filled:]
        if self.read_end == len(self.read_buffer):
            if self.read_buffer is _NO_BUFFER:
                self.read_buffer = bytearray(READ_BUFFER_SIZE)
            else:
                self._compact()
        return memoryview(self.read_buffer)[self.read_end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed or self.closing:
            return
        self.broker.metrics.bytes_in(nbytes)
        self.last_active = self.clock()
        # responses that complete while this read is handled go out in one write, not one
        # send() each (pipelining clients send many requests per read)
        self.batching = True
        try:
            if self.big is not None:  # get_buffer gave the large frame's buffer
                self.big_filled += nbytes
                if self.big_filled == self.big_size:
                    self._handle_big()
            else:
                self.read_end += nbytes
            if self.big is None:
                self._parse_frames()
        finally:
            self.batching = False
            self._flush()
            if self.closing:
                self._finish_closing()
        self._update_reading()

    def _flush(self) -> None:
        out = self.out
        if out and not self.closed and not self.close_delayed:
            self.out = []
            self.broker.metrics.bytes_out(self.out_bytes)
            self.out_bytes = 0
            self.last_active = self.clock()
            transport = self.transport
            transport.writelines(out)
            self.write_buffer_seen = transport.get_write_buffer_size()
            if self.answers_held:
                self._answers_sent(self.write_buffer_seen)

    def _answers_sent(self, buffered: int | None = None) -> None:
        """Give back to the broker's answer budget what the socket has taken since the last
        look (``buffered``: the transport's write buffer, when the caller just read it).
        Between looks the count only errs high (a buffer only shrinks while nothing is
        written), so the budget is never passed by a stale count."""
        held = self.answers_held
        if not held:
            return
        if self.closed or self.transport is None:
            buffered = 0
        elif buffered is None:
            buffered = self.transport.get_write_buffer_size()
        now_held = buffered + self.out_bytes + self.answers_waiting
        if now_held < held:
            self.answers_held = now_held
            self.server.answers_released(self, held - now_held)

    def must_wait(self) -> bool:
        """Whether the next request has to wait before it is handled: its answers would pile up
        (the socket does not take those before it), a request before it is parked, too many
        requests are in flight, or the broker holds queued.max.request.bytes of requests."""
        return (self.writing_paused or self.waiting_for_memory or self.parked is not None
                or len(self.pending) >= self.max_in_flight or self.throttled_until > 0)

    def _parse_frames(self) -> None:
        buf = self.read_buffer
        server = self.server
        self.unhandled = False
        while not self.closed and not self.closing:
            start, end = self.read_start, self.read_end
            if end - start < 4:
                break
            if self.out_bytes >= QUEUED_ANSWER_BYTES:
                self._flush()  # the transport pauses writing when the socket does not take it
            if self.must_wait():
                self.unhandled = True
                break
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0 or size > self.max_frame:
                self.close_after_answers(f"frame size {size} outside 0..{self.max_frame_setting} "
                                         f"({self.max_frame})")
                return
            if server.queued_max_request_bytes and not self.frame_reserved \
                    and not server.reserve(self, size):
                self.unhandled = True
                break
            if end - start - 4 >= size:
                frame = bytes(memoryview(buf)[start + 4:start + 4 + size])  # one copy
                self.read_start = start + 4 + size
                self.handle_frame(frame)
                if self.frame_reserved:  # the frame made no request
                    server.release(self.frame_reserved)
                    self.frame_reserved = 0
                continue
            if size > len(buf) - 4:
                # a large frame: what arrived of it moves to its own buffer, and the rest is
                # read straight into that (no copy through the read buffer, fewer reads)
                arrived = end - start - 4
                big = _frame_buffer(size, arrived)
                big[:arrived] = memoryview(buf)[start + 4:end]
                self.big, self.big_filled, self.big_size = big, arrived, size
                self.held_much = True
                self.read_start = self.read_end = 0
            break
        if self.read_start == self.read_end:
            self.read_start = self.read_end = 0

    def _handle_big(self) -> None:
        big = self.big
        self.big = None
        self.handle_frame(big)
        if self.frame_reserved:
            self.server.release(self.frame_reserved)
            self.frame_reserved = 0

    def _compact(self) -> None:
        start, end = self.read_start, self.read_end
        self.read_buffer[:end - start] = self.read_buffer[start:end]
        self.read_start, self.read_end = 0, end - start

    def _resume(self) -> None:
        """The wait is over: handle the requests left in the read buffer, then read again.
        Run from the loop, never inside a handler's respond."""
        self.resume_scheduled = False
        if self.closed or self.closing or not self.unhandled:
            self._update_reading()
            return
        self.batching = True
        try:
            self._parse_frames()
        finally:
            self.batching = False
            self._flush()
            if self.closing:
                self._finish_closing()
        self._update_reading()

    # -- requests

    def handle_frame(self, frame) -> None:
        received = time.monotonic()
        auth = self.authenticator
        if auth is not None and auth.screening and auth.screen(frame):
            return
        try:
            header = read_request_header(frame)
        except DecodeError as exc:
            self.close_after_answers(f"malformed request header: {exc}")
            return
        handler = apis.HANDLERS.get(header.api_key)
        if handler is None:
            self.close_after_answers(f"unknown api key {header.api_key}")
            return
        version = header.api_version
        if not handler.min_version <= version <= handler.max_version:
            if header.api_key == apis.API_VERSIONS_KEY:
                # answer with a v0 body listing our ranges so the client retries with one we have
                body = ApiVersionsResponse(error_code=UNSUPPORTED_VERSION,
                                           api_keys=apis.api_version_entries()).encode(0)
                req = Request(self, handler, None, header, received)
                req.api_version = 0
                self.pending.append(req)
                header_bytes = response_header(header.correlation_id, 0, len(body))
                self._complete(req, [header_bytes, body], None, len(header_bytes) + len(body))
                return
            self.close_after_answers(
                f"unsupported version {version} of {handler.name} (api key {header.api_key}; "
                f"we serve {handler.min_version}-{handler.max_version})")
            return
        codec = handler.codecs.get(version) or handler.codec(version)
        try:
            # trailing bytes after a valid body are ignored, as Kafka does: librdkafka's
            # all-topics Metadata request leaves unused bytes of an array-count placeholder
            request, _ = codec[0](frame, header.body_offset)
        except Exception as exc:
            if not isinstance(exc, DecodeError):
                exc = handler.request._translate(exc, version)
            self.close_after_answers(f"malformed {handler.name} v{version} request: {exc}")
            return
        req = Request(self, handler, codec, header, received)
        req.size = len(frame)
        self.pending.append(req)
        try:
            # the one look at faults (broker/faults.py) a request pays
            if self.faults.armed and self.faults.intercept(self, req, request):
                return
            if self.multi_node and _misrouted(self.broker, self, req, request):
                return  # NOT_COORDINATOR: this node does not coordinate the request's key
            handler.handle(self.broker, req, request, req.respond)
            req.handled = time.monotonic() - received
        except Exception:
            log.exception("handler failed", api=handler.name, version=version, peer=self.peer)
            self.close(f"internal error in {handler.name}")

    def send_raw(self, data: bytes) -> None:
        """Bytes without a Kafka response header: a SASL token of the SaslHandshake v0 flow,
        whose requests have no headers either (and nothing else is in flight then)."""
        if self.pending:
            self.close_after_answers("SASL token while requests are in flight")
            return
        self.out.append(data)
        self.out_bytes += len(data)
        if not self.batching:
            self._flush()

    def answer_error(self, frame, error_code: int) -> bool:
        """Answer a request with only an error code (during SASL authentication, as Kafka's
        getErrorResponse does); False when its response has no top-level error code."""
        from broker.security.sasl import error_response_for  # only during SASL exchanges
        found = error_response_for(frame, error_code)
        if found is None:
            return False
        header, handler, response = found
        codec = handler.codecs.get(header.api_version) or handler.codec(header.api_version)
        req = Request(self, handler, codec, header, time.monotonic())
        self.pending.append(req)
        req.respond(response)
        return True

    def _complete(self, request: Request, chunks, response, nbytes: int) -> None:
        request.chunks = chunks
        request.answer_bytes = nbytes
        request.done = True
        if request is self.parked:
            self.parked = None
        if request.reserved:
            self.server.release(request.reserved)
            request.reserved = 0
        if request.throttle_ms > 0 and not self.closed:
            self.mute(request.throttle_ms)
        latency = time.monotonic() - request.started
        handler = request.handler
        self.broker.metrics.answered(handler.name, request.api_version, latency, response)
        if self.broker.debug:
            log.debug("request", api=handler.name, version=request.api_version,
                      correlation_id=request.header.correlation_id,
                      client_id=request.client_id, peer=self.peer,
                      latency_ms=round(latency * 1000, 3))
        if self.closed:
            return
        if nbytes:
            self.answers_held += nbytes
            self.answers_waiting += nbytes
            self.server.answers_made(self, nbytes)
        pending = self.pending
        if pending[0].done:
            out = self.out
            i = 0
            n = len(pending)
            while i < n and pending[i].done:
                done = pending[i]
                if done.chunks is not None:
                    out.extend(done.chunks)
                    self.out_bytes += done.answer_bytes
                    self.answers_waiting -= done.answer_bytes
                i += 1
            del pending[:i]
            if not self.batching:
                self._flush()
                if self.closing:
                    self._finish_closing()
            if self.reading_paused:
                self._update_reading()

    def _update_reading(self) -> None:
        """Pause reading while the next request must wait; when it need not any more, handle
        what waits in the read buffer (from the loop: this may run inside a handler's respond),
        then read again."""
        if self.closed or self.closing or self.transport is None:
            return
        if self.must_wait():
            if not self.reading_paused:
                self.reading_paused = True
                self.transport.pause_reading()
            return
        if self.unhandled:
            if not self.batching and not self.resume_scheduled:
                self.resume_scheduled = True
                self.loop.call_soon(self._resume)
            return
        if self.reading_paused:
            self.reading_paused = False
            self.transport.resume_reading()

    def mute(self, throttle_ms: int) -> None:
        """A client quota throttles this connection (Kafka's ThrottledChannel): the answer goes
        out at once with throttle_time_ms, then nothing more is read or handled until the
        throttle time is over."""
        until = self.clock() + throttle_ms
        if until <= self.throttled_until:
            return
        first = self.throttled_until == 0
        self.throttled_until = until
        if first:
            self.broker.timer.call_later(throttle_ms, self._throttle_over)
        self._update_reading()

    def _throttle_over(self) -> None:
        left = self.throttled_until - self.clock()
        if left > 0 and not self.closed:  # throttled again meanwhile
            self.broker.timer.call_later(left, self._throttle_over)
            return
        self.throttled_until = 0
        self._update_reading()

    def close_after_answers(self, reason: str) -> None:
        """A frame that cannot be served: the requests before it are still answered, in order,
        then the connection closes (Kafka reads one request at a time per connection, so it
        answers them before it even reads the bad frame). Nothing more is read meanwhile."""
        if self.closed or self.closing:
            return
        log.warning("closing connection", peer=self.peer, listener=self.listener,
                    reason=reason)
        self.broker.metrics.connection_rejected(reason_label(reason))
        self.closing = True
        if self.transport is not None and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()
        if not self.batching:
            self._finish_closing()

    def close_after_delay(self, reason: str, delay_ms: int) -> None:
        """A failed authentication (Kafka's connection.failed.authentication.delay.ms): the
        failure's answer is held ``delay_ms``, then written, then the connection closes. As on
        Kafka, a client learns that its password was wrong only after the delay, so one
        connection cannot try more than one password per delay."""
        if self.closed or self.closing:
            return
        if delay_ms > 0:
            self._flush()  # the answers before the failure go now; the failure's own waits
            self.close_delayed = True
            self.broker.timer.call_later(delay_ms, self._delay_over)
        self.close_after_answers(reason)

    def _delay_over(self) -> None:
        """The failure's answer goes now; the close follows ``FAILED_ANSWER_LINGER_MS`` later
        (or when the client closes first). A FIN arriving with the answer makes clients that
        read until the socket is drained lose it: kafka-python 3 then reports "socket
        disconnected" instead of the broker's reason, against Kafka 4.3.1 too."""
        self.close_delayed = False
        if self.closed:
            return
        self._flush()
        self.close_delayed = True
        self.broker.timer.call_later(FAILED_ANSWER_LINGER_MS, self._linger_over)

    def _linger_over(self) -> None:
        self.close_delayed = False
        if not self.closed:
            self._finish_closing()

    def _finish_closing(self) -> None:
        if self.close_delayed:
            return
        if self.closing and not self.pending and not self.closed:
            self._flush()
            self.closed = True
            if self.transport is not None:
                self.transport.close()  # writes what is buffered first

    def close(self, reason: str) -> None:
        if self.closing:
            self.closing = False
            self.closed = True
            if self.transport is not None:
                self.transport.close()
            return
        if not self.closed:
            log.warning("closing connection", peer=self.peer, listener=self.listener,
                        reason=reason)
            self.broker.metrics.connection_rejected(reason_label(reason))
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    def drop(self, reason: str) -> None:
        """Close at once instead of answering (a fault's disconnect): answers already made are
        written first, the requests still in flight are lost as on a broken connection."""
        if self.closed:
            return
        log.info("closing connection", peer=self.peer, listener=self.listener, reason=reason)
        self._flush()
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def expire(self) -> None:
        """Idle for connections.max.idle.ms: closed (answers the client never took are
        dropped)."""
        if self.closed:
            return
        self.closed = True
        transport = self.transport
        if transport is not None:
            if transport.get_write_buffer_size():
                transport.abort()
            else:
                transport.close()


class PendingTls(asyncio.Protocol):
    """A connection of an SSL or SASL_SSL listener until its TLS handshake is over.

    A client that connects and sends nothing, or part of a ClientHello, costs only this and its
    socket's transport: the bytes that came are kept until its first TLS record is whole, and
    only then are the SSL object, the TLS protocol (tls.ServerTlsProtocol) and the
    KafkaConnection made and given those bytes. One bound, tls.handshake_timeout_s from the
    accept, covers both stages: past it the connection is closed with one line."""

    __slots__ = ("server", "listener", "node", "listener_tls", "peer", "quota_host", "head",
                 "deadline", "timer", "transport", "conn", "finished")

    def __init__(self, server: "Server", listener: str, node: int, listener_tls, address,
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


def resolve_ip_overrides(overrides) -> dict[str, int]:
    """max.connections.per.ip.overrides ((host, count) pairs) by the addresses connections come
    from: host names resolved, as Kafka resolves them once at start."""
    out: dict[str, int] = {}
    for host, count in overrides:
        try:
            out[ipaddress.ip_address(host).compressed] = count
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ConfigError(f"max.connections.per.ip.overrides: cannot resolve {host!r}: "
                              f"{exc.strerror or exc}") from None
        for info in infos:
            out[ipaddress.ip_address(info[4][0]).compressed] = count
    return out


class ConnectionQuotas:
    """Open connections per client address and in all (Kafka's ConnectionQuotas)."""

    def __init__(self, max_connections: int, max_per_ip: int,
                 overrides: dict[str, int]) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = overrides
        self.counts: dict[str, int] = {}
        self.total = 0

    def slot_available(self) -> bool:
        return self.total < self.max_connections

    def limit(self, host: str) -> int:
        return self.overrides.get(host, self.max_per_ip)

    def inc(self, host: str) -> bool:
        """Count a connection just accepted from ``host``; False, and nothing counted, when
        ``host`` already has its maximum."""
        count = self.counts.get(host, 0)
        if count >= self.limit(host):
            return False
        self.counts[host] = count + 1
        self.total += 1
        return True

    def dec(self, host: str) -> None:
        count = self.counts.get(host, 0)
        if count <= 1:
            self.counts.pop(host, None)
        else:
            self.counts[host] = count - 1
        self.total -= 1


class LimitLog:
    """One line per interval for what a connection limit did, with how many times since the
    last line: the first occurrence is logged at once, later ones in the interval together at
    its end. A flood of refused connections must not become a flood of log lines."""

    def __init__(self, timer, interval_ms: int = LIMIT_LOG_INTERVAL_MS) -> None:
        self.timer = timer
        self.interval_ms = interval_ms
        self.counts: dict[tuple, list] = {}
        self.handle = None

    def note(self, level: str, event: str, n: int = 1, **fields) -> None:
        key = (level, event)
        entry = self.counts.get(key)
        if entry is None:
            self.counts[key] = [n, fields]
        else:
            entry[0] += n
            entry[1] = fields
        if self.handle is None:
            self._write()
            self.handle = self.timer.call_later(self.interval_ms, self._interval_over)

    def _interval_over(self) -> None:
        self.handle = None
        if self.counts:
            self._write()
            self.handle = self.timer.call_later(self.interval_ms, self._interval_over)

    def _write(self) -> None:
        seconds = self.interval_ms // 1000
        for (level, event), (n, fields) in self.counts.items():
            getattr(log, level)(event, count=n, interval_s=seconds, **fields)
        self.counts.clear()


def _listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for every address of ``host`` (all interfaces
    when empty), as loop.create_server makes them."""
    infos = socket.getaddrinfo(host or None, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0,
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


def _find_malloc_trim():
    try:
        import ctypes
        import ctypes.util
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None  # not glibc


#: glibc's malloc_trim: glibc keeps memory that was freed (its mmap threshold grows with the
#: largest block freed, so large answers end up in the heap), and a process that once held
#: the answers of hundreds of stalled clients would keep that RSS after they left
_malloc_trim = _find_malloc_trim()
#: memory goes back to the system this long after the last connection that held much closed
TRIM_DELAY_MS = 1000
#: mallopt's parameters (glibc's malloc.h) and what the broker's own process sets them to
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest on 64-bit
TRIM_THRESHOLD = 64 * 1024 * 1024


def tune_malloc() -> None:
    """For a broker that has its process to itself (the command line, not the embedded
    broker): blocks up to 32 MiB come from glibc's heap and up to 64 MiB freed at its top stay
    there, instead of being mapped and unmapped request by request. A 6-partition Fetch from
    --data-dir reads ~1 MB per partition; with glibc's defaults each read got fresh pages, and
    perf showed page faults, page zeroing and TLB shootdowns as ~30% of the broker's CPU; the
    broker's CPU per MB fetched fell by about 45% with these. Memory still goes back to the
    system after clients that held much close (malloc_trim, TRIM_DELAY_MS)."""
    try:
        import ctypes
        import ctypes.util
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return  # not glibc
    mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)


def _raise_open_files_limit() -> None:
    """Let the soft limit of open files reach the hard one, as the JVM does at start: with
    max.connections unlimited (Kafka's default) a default soft limit of 1024 would be the real
    connection limit."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass


class Server:
    """Listeners for every configured address, each with its acceptor; counts connections for
    the limits, closes idle ones, and accounts queued.max.request.bytes."""

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
        #: queued.max.request.bytes (0: unlimited): request bytes read and not yet answered,
        #: over all connections; at the limit no connection starts a new request
        queued = config["queued.max.request.bytes"]
        self.queued_max_request_bytes = queued if queued > 0 else 0
        self.request_bytes = 0
        #: queued.max.response.bytes (0: unlimited): bytes of answers made and not yet taken by
        #: the sockets, over all connections (``holding``: the connections that have some); a
        #: Fetch reads at most what is left (fetch_budget)
        queued = config["queued.max.response.bytes"]
        self.queued_max_response_bytes = queued if queued > 0 else 0
        self.answer_bytes = 0
        self.holding: set[KafkaConnection] = set()
        self.memory_waiters: collections.deque[KafkaConnection] = collections.deque()
        self.wake_scheduled = False
        #: SSL and SASL_SSL listeners' TLS (broker/security/tls.py), by listener name
        self.tls: dict[str, tls.ListenerTls] = {}
        #: TLS connections whose handshake is not over (PendingTls)
        self.handshaking: set[PendingTls] = set()
        #: what every TLS connection reads its socket into (tls.ServerTlsProtocol)
        self.tls_read_buffer: memoryview | None = None
        self.handshake_timeout_s = tls.handshake_timeout_s(config)
        self.loop = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        _raise_open_files_limit()
        self.quotas.overrides = resolve_ip_overrides(
            self.broker.config["max.connections.per.ip.overrides"])
        self.tls = tls.listener_contexts(self.broker.config)
        self.loop = loop
        if self.tls:
            self.tls_read_buffer = memoryview(
                bytearray(tls.ServerTlsProtocol.max_size))
        cluster = self.broker.cluster
        for index, node in enumerate(cluster.node_ids):
            self._listen(loop, node, index)
        self.schedule_idle_check()

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
            if isinstance(protocol, PendingTls):
                protocol.abandon()
            else:
                self.uncount(protocol)
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
        if _malloc_trim is not None and self.trim is None:
            self.trim = self.broker.timer.call_later(TRIM_DELAY_MS, self._trim)

    def _trim(self) -> None:
        self.trim = None
        _malloc_trim(0)

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

    # -- queued.max.response.bytes

    def answers_made(self, conn: KafkaConnection, size: int) -> None:
        self.answer_bytes += size
        self.holding.add(conn)

    def answers_released(self, conn: KafkaConnection, size: int) -> None:
        self.answer_bytes -= size
        if not conn.answers_held:
            self.holding.discard(conn)

    def fetch_budget(self) -> int | None:
        """The record bytes a Fetch may read now: what is left of queued.max.response.bytes
        (None: unlimited). When none seems left, the sockets are looked at first: they may
        have taken answers since. A Fetch with no budget waits as a long poll does, and is
        answered without records if there is still none when it must be answered."""
        limit = self.queued_max_response_bytes
        if not limit:
            return None
        if self.answer_bytes >= limit:
            for conn in list(self.holding):
                conn._answers_sent()
            if self.answer_bytes >= limit:
                self.broker.metrics.fetch_held_back()
                self.limit_log.note("warning", "fetches wait: answers not taken by their "
                                    "sockets fill queued.max.response.bytes",
                                    queued_max_response_bytes=limit,
                                    connections_holding=len(self.holding))
                return 0
        return limit - self.answer_bytes

    # -- queued.max.request.bytes

    def reserve(self, conn: KafkaConnection, size: int) -> bool:
        """Hold ``size`` bytes for the frame ``conn`` starts reading. Like Kafka's memory pool it
        admits a request while any memory is left, so one request can go past the limit; when
        none is left the connection waits until some is released."""
        if self.request_bytes < self.queued_max_request_bytes:
            self.request_bytes += size
            conn.frame_reserved = size
            return True
        if not conn.waiting_for_memory:
            conn.waiting_for_memory = True
            self.memory_waiters.append(conn)
        return False

    def release(self, size: int) -> None:
        self.request_bytes -= size
        if self.memory_waiters and not self.wake_scheduled and \
                self.request_bytes < self.queued_max_request_bytes:
            self.wake_scheduled = True
            asyncio.get_running_loop().call_soon(self._wake_memory_waiters)

    def _wake_memory_waiters(self) -> None:
        self.wake_scheduled = False
        waiters = self.memory_waiters
        while waiters and self.request_bytes < self.queued_max_request_bytes:
            conn = waiters.popleft()
            conn.waiting_for_memory = False
            conn._update_reading()

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
