"""A request in flight (Kafka's RequestChannel.Request): what a handler knows of it, its place
in its connection's response order, and the ``respond`` that encodes its answer."""
from __future__ import annotations

from protocol.framing import response_header


class Request:
    """One request in flight on a connection (Kafka's RequestChannel.Request): what a handler
    knows of it beyond its body (it is the handler's ``ctx``), its place in the connection's
    response order, and ``respond``, which the handler calls exactly once."""

    __slots__ = ("conn", "handler", "codec", "header", "api_version", "client_id",
                 "client_host", "listener", "started", "done", "chunks", "answer_bytes",
                 "reserved", "size", "handled", "throttle_ms")

    def __init__(self, conn, handler, codec, header, started: float) -> None:
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
