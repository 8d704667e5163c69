"""One client connection (Kafka's KafkaChannel and the part of a Processor that serves it):
framing, pipelining, limits, ordered responses, and the dispatch of each request to its handler.

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
"""
from __future__ import annotations

import asyncio
import mmap
import re
import struct
import time

import structlog

from broker.security import ANONYMOUS, SASL_PROTOCOLS, TLS_PROTOCOLS
from protocol.framing import read_request_header, response_header
from protocol.messages import ApiVersionsResponse
from protocol.schema import DecodeError

from .. import apis
from .request_channel import Request

log = structlog.get_logger("broker.server")

_SIZE = struct.Struct(">i")
UNSUPPORTED_VERSION = 35
READ_BUFFER_SIZE = 16 * 1024  # per connection; larger frames get their own buffer
#: answers of one connection held in memory because its socket does not take them (the client
#: reads slowly, or not at all): past this, its next request waits. The transport's high-water
#: mark; at most one more answer is made past it.
QUEUED_ANSWER_BYTES = 64 * 1024
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


def _misrouted(broker, conn, req, request) -> bool:
    """Several nodes serve: NOT_COORDINATOR for keys coordinated elsewhere
    (broker/network/coordinator_routing.py, loaded only then)."""
    from .coordinator_routing import misrouted
    return misrouted(broker, conn, req, request)


class KafkaConnection(asyncio.BufferedProtocol):
    """One client connection, as Kafka's Processor serves a KafkaChannel: frames in, each
    request to its handler (handle_frame), answers out in request order. When it closes, the
    server's disconnect listeners are told (Server.disconnected)."""

    def __init__(self, broker, listener: str, node_id: int | None = None) -> None:
        self.broker = broker
        #: the node whose listener accepted it (one of broker.cluster.node_ids)
        self.node_id = broker.node_id if node_id is None else node_id
        self.server = broker.server
        self.armed_faults = broker.armed_faults
        self.quotas = broker.client_quotas
        #: several nodes: group and transaction requests may reach a node that does not
        #: coordinate their key (broker/network/coordinator_routing.py)
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

    def _tls_lost(self, exc) -> None:
        """A TLS connection lost to a TLS error (a record that does not decrypt, an alert from
        the client, ...) is logged and counted; a plain close is not."""
        from broker.security import tls  # loaded with the TLS listeners (Server.start_tls)
        if tls.is_tls_error(exc):
            log.warning("closing connection", peer=self.peer, listener=self.listener,
                        reason=tls.tls_error(exc))
            self.broker.metrics.connection_rejected("TLS error")

    def connection_lost(self, exc) -> None:
        if (exc is not None and not self.closed and self.transport is not None
                and self.security_protocol in TLS_PROTOCOLS):
            self._tls_lost(exc)
        self.closed = True
        server = self.server
        made = self in server.connections
        if made:
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
            server.memory_pool.release(held)
        self.pending.clear()
        self.big = None
        self.out = []
        self.out_bytes = 0
        if self.answers_held:
            server.answer_budget.released(self, self.answers_held)
            self.answers_held = self.answers_waiting = 0
        if self.held_much:
            server.schedule_trim()
        if made and server.disconnect_listeners:
            server.disconnected(self)

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
            self.server.answer_budget.released(self, held - now_held)

    def must_wait(self) -> bool:
        """Whether the next request has to wait before it is handled: its answers would pile up
        (the socket does not take those before it), a request before it is parked, too many
        requests are in flight, or the broker holds queued.max.request.bytes of requests."""
        return (self.writing_paused or self.waiting_for_memory or self.parked is not None
                or len(self.pending) >= self.max_in_flight or self.throttled_until > 0)

    def _parse_frames(self) -> None:
        buf = self.read_buffer
        memory_pool = self.server.memory_pool
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
            if memory_pool.limit and not self.frame_reserved \
                    and not memory_pool.reserve(self, size):
                self.unhandled = True
                break
            if end - start - 4 >= size:
                frame = bytes(memoryview(buf)[start + 4:start + 4 + size])  # one copy
                self.read_start = start + 4 + size
                self.handle_frame(frame)
                if self.frame_reserved:  # the frame made no request
                    memory_pool.release(self.frame_reserved)
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
            self.server.memory_pool.release(self.frame_reserved)
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
            if self.armed_faults and self.broker.faults.intercept(self, req, request):
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
            self.server.memory_pool.release(request.reserved)
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
            self.server.answer_budget.made(self, nbytes)
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
            # + 1: the broker's clock counts whole milliseconds (floored), so a deadline of
            # now + delay_ms can come up to a millisecond early; the answer never may
            self.broker.timer.call_later(delay_ms + 1, self._delay_over)
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
