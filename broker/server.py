"""The asyncio listener and connections: framing, pipelining, limits, ordered responses.

Each connection reads size-prefixed frames, decodes the header, refuses what it cannot serve and
hands the request to its API handler with a ``respond`` callback. Handlers may answer at once or
later (delayed operations); responses are written strictly in request order. A connection with
``queued.max.requests`` requests in flight stops reading until one completes, like Kafka's muted
channels. A malformed frame closes only its own connection, with one log line saying why.
"""
from __future__ import annotations

import asyncio
import struct
import time

import structlog

from protocol.framing import read_request_header, response_header
from protocol.messages import ApiVersionsResponse
from protocol.schema import DecodeError

from . import apis

log = structlog.get_logger("broker.server")

_SIZE = struct.Struct(">i")
UNSUPPORTED_VERSION = 35
READ_BUFFER_SIZE = 16 * 1024  # per connection; larger frames get their own buffer


class Request:
    """One request in flight on a connection (Kafka's RequestChannel.Request): what a handler
    knows of it beyond its body (it is the handler's ``ctx``), its place in the connection's
    response order, and ``respond``, which the handler calls exactly once."""

    __slots__ = ("conn", "handler", "codec", "header", "api_version", "client_id",
                 "client_host", "listener", "started", "done", "chunks")

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

    def respond(self, response) -> None:
        """Encode the response (None: no response at all, e.g. Produce with acks=0) and send it
        once every earlier request on the connection has been answered."""
        if self.done:
            raise RuntimeError(f"{self.handler.name} answered twice")
        if response is None:
            self.conn._complete(self, None, None)
            return
        if type(response) is not self.handler.response:
            raise TypeError(f"{self.handler.name} answered with {type(response).__name__}")
        _, encode, header_version = self.codec
        chunks: list = []
        encode(response, chunks.append)
        size = 0
        for c in chunks:
            size += len(c)
        chunks.insert(0, response_header(self.header.correlation_id, header_version, size))
        self.conn._complete(self, chunks, response)


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, broker, listener: str) -> None:
        self.broker = broker
        self.listener = listener
        self.config = broker.config
        self.max_frame = broker.config["socket.request.max.bytes"]
        self.max_in_flight = broker.config["queued.max.requests"]
        self.transport = None
        self.peer = "?"
        self.client_host = ""
        self.read_buffer = bytearray(READ_BUFFER_SIZE)  # small frames, reused
        self.read_start = 0
        self.read_end = 0
        #: a frame larger than the read buffer: its bytes so far (never more than arrived, so a
        #: client that declares a huge frame and sends little holds little) and its size
        self.big: bytearray | None = None
        self.big_size = 0
        self.out: list = []  # response chunks ready to write, in request order
        self.batching = False  # inside buffer_updated: write once at its end
        self.pending: list[Request] = []
        self.closed = False
        #: a bad frame arrived: nothing more is read, and the connection closes once the
        #: requests before it are answered (close_after_answers)
        self.closing = False
        self.reading_paused = False
        self.writing_paused = False

    # -- asyncio callbacks

    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.client_host = peer[0]
            self.peer = f"{peer[0]}:{peer[1]}"
        server = self.broker.server
        if len(server.connections) >= self.config["max.connections"]:
            log.warning("connection refused", peer=self.peer, reason="max.connections reached",
                        limit=self.config["max.connections"])
            self.closed = True
            transport.abort()
            return
        server.connections.add(self)
        self.broker.metrics.connection_opened()

    def connection_lost(self, exc) -> None:
        self.closed = True
        if self in self.broker.server.connections:
            self.broker.server.connections.discard(self)
            self.broker.metrics.connection_closed()
        self.pending.clear()

    def pause_writing(self) -> None:
        self.writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._update_reading()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.read_end == len(self.read_buffer):
            self._compact()
        return memoryview(self.read_buffer)[self.read_end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed or self.closing:
            return
        self.broker.metrics.bytes_in(nbytes)
        # responses that complete while this read is handled go out in one write, not one
        # send() each (pipelining clients send many requests per read)
        self.batching = True
        try:
            self.read_end += nbytes
            if self.big is not None:
                self._fill_big()
            if self.big is None:
                self._parse_frames()
        finally:
            self.batching = False
            self._flush()
            if self.closing:
                self._finish_closing()

    def _flush(self) -> None:
        out = self.out
        if out and not self.closed:
            self.out = []
            n = 0
            for c in out:
                n += len(c)
            self.broker.metrics.bytes_out(n)
            self.transport.writelines(out)

    def _parse_frames(self) -> None:
        buf = self.read_buffer
        while not self.closed and not self.closing:
            start, end = self.read_start, self.read_end
            if end - start < 4:
                break
            (size,) = _SIZE.unpack_from(buf, start)
            if size < 0 or size > self.max_frame:
                self.close_after_answers(f"frame size {size} outside 0..socket.request.max.bytes "
                                         f"({self.max_frame})")
                return
            if end - start - 4 >= size:
                frame = bytes(memoryview(buf)[start + 4:start + 4 + size])  # one copy
                self.read_start = start + 4 + size
                self.handle_frame(frame)
                continue
            if size > len(buf) - 4:
                # a large frame: gathered as its bytes arrive (never allocated ahead of them)
                self.big = bytearray(buf[start + 4:end])
                self.big_size = size
                self.read_start = self.read_end = 0
            break
        if self.read_start == self.read_end:
            self.read_start = self.read_end = 0

    def _fill_big(self) -> None:
        """Move what the read buffer holds into the large frame; handle it once complete."""
        big = self.big
        start = self.read_start
        take = min(self.big_size - len(big), self.read_end - start)
        big += memoryview(self.read_buffer)[start:start + take]
        self.read_start = start + take
        if self.read_start == self.read_end:
            self.read_start = self.read_end = 0
        if len(big) == self.big_size:
            self.big = None
            self.handle_frame(big)

    def _compact(self) -> None:
        start, end = self.read_start, self.read_end
        self.read_buffer[:end - start] = self.read_buffer[start:end]
        self.read_start, self.read_end = 0, end - start

    # -- requests

    def handle_frame(self, frame) -> None:
        received = time.monotonic()
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
                self._complete(req, [header_bytes, body], None)
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
        pending = self.pending
        pending.append(req)
        if len(pending) >= self.max_in_flight and not self.reading_paused:
            self._update_reading()
        try:
            handler.handle(self.broker, req, request, req.respond)
        except Exception:
            log.exception("handler failed", api=handler.name, version=version, peer=self.peer)
            self.close(f"internal error in {handler.name}")

    def _complete(self, request: Request, chunks, response) -> None:
        request.chunks = chunks
        request.done = True
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
        pending = self.pending
        if pending[0].done:
            out = self.out
            i = 0
            n = len(pending)
            while i < n and pending[i].done:
                chunks = pending[i].chunks
                if chunks is not None:
                    out.extend(chunks)
                i += 1
            del pending[:i]
            if not self.batching:
                self._flush()
                if self.closing:
                    self._finish_closing()
            if self.reading_paused:
                self._update_reading()

    def _update_reading(self) -> None:
        if self.closed or self.closing or self.transport is None:
            return
        should_pause = self.writing_paused or len(self.pending) >= self.max_in_flight
        if should_pause and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()
        elif not should_pause and self.reading_paused:
            self.reading_paused = False
            self.transport.resume_reading()

    def close_after_answers(self, reason: str) -> None:
        """A frame that cannot be served: the requests before it are still answered, in order,
        then the connection closes (Kafka reads one request at a time per connection, so it
        answers them before it even reads the bad frame). Nothing more is read meanwhile."""
        if self.closed or self.closing:
            return
        log.warning("closing connection", peer=self.peer, listener=self.listener,
                    reason=reason)
        self.broker.metrics.connection_rejected(reason.split(":")[0])
        self.closing = True
        if self.transport is not None and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()
        if not self.batching:
            self._finish_closing()

    def _finish_closing(self) -> None:
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
            self.broker.metrics.connection_rejected(reason.split(":")[0])
            self.closed = True
            if self.transport is not None:
                self.transport.close()


class Server:
    """Listeners for every configured address; tracks connections for limits and shutdown."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.servers: list[asyncio.base_events.Server] = []
        self.connections: set[KafkaConnection] = set()
        self.bound: dict[str, tuple[str, int]] = {}

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for name, host, port in self.broker.config.listeners:
            server = await loop.create_server(
                lambda name=name: KafkaConnection(self.broker, name),
                host=host or None, port=port, reuse_address=True, backlog=1024)
            self.servers.append(server)
            sock = server.sockets[0].getsockname()
            self.bound[name] = (sock[0], sock[1])
            log.info("listening", listener=name, host=sock[0], port=sock[1])

    def stop_accepting(self) -> None:
        for server in self.servers:
            server.close()

    async def stop(self, grace: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish (up to grace seconds), close."""
        self.stop_accepting()
        deadline = time.monotonic() + grace
        while any(c.pending for c in self.connections) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for server in self.servers:
            await server.wait_closed()
