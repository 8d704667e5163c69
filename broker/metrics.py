"""Prometheus metrics for the broker, on a registry of its own (several brokers per process in
tests), served over HTTP with /metrics, /health and /ready."""
from __future__ import annotations

import asyncio

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

log = structlog.get_logger("broker.metrics")

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                   10, 30)


class Metrics:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.registry = r = CollectorRegistry()
        self.requests = Counter("kafka_requests_total", "Requests handled, by API and version.",
                                ["api", "version"], registry=r)
        self.latency = Histogram("kafka_request_latency_seconds",
                                 "Time from request received to response ready, by API.",
                                 ["api"], buckets=LATENCY_BUCKETS, registry=r)
        self.errors = Counter("kafka_errors_total", "Error codes returned, by API and error.",
                              ["api", "error"], registry=r)
        self.connections = Gauge("kafka_connections", "Open client connections.", registry=r)
        self.rejected = Counter("kafka_connections_rejected_total",
                                "Connections closed for bad input or limits, by reason.",
                                ["reason"], registry=r)
        self.bytes_in_total = Counter("kafka_network_received_bytes_total",
                                      "Bytes received from clients.", registry=r)
        self.bytes_out_total = Counter("kafka_network_sent_bytes_total",
                                       "Bytes sent to clients.", registry=r)
        self.produced_records = Counter("kafka_produced_records_total",
                                        "Records appended by Produce, by topic.", ["topic"],
                                        registry=r)
        self.fetched_bytes = Counter("kafka_fetched_bytes_total",
                                     "Record bytes returned by Fetch, by topic.", ["topic"],
                                     registry=r)
        self._latency_children: dict = {}
        self._request_children: dict = {}
        self.http_server = None

    # -- hot-path hooks (cheap: cached label children)

    def request_done(self, api: str, version: int, seconds: float) -> None:
        key = (api, version)
        child = self._request_children.get(key)
        if child is None:
            child = self._request_children[key] = self.requests.labels(api, str(version))
        child.inc()
        lat = self._latency_children.get(api)
        if lat is None:
            lat = self._latency_children[api] = self.latency.labels(api)
        lat.observe(seconds)

    def error(self, api: str, error_code: int) -> None:
        self.errors.labels(api, str(error_code)).inc()

    def connection_opened(self) -> None:
        self.connections.inc()

    def connection_closed(self) -> None:
        self.connections.dec()

    def connection_rejected(self, reason: str) -> None:
        self.rejected.labels(reason).inc()

    def bytes_in(self, n: int) -> None:
        self.bytes_in_total.inc(n)

    def bytes_out(self, n: int) -> None:
        self.bytes_out_total.inc(n)

    def produced(self, topic: str, records: int) -> None:
        self.produced_records.labels(topic).inc(records)

    def fetched(self, responses) -> None:
        for t in responses:
            n = 0
            for p in t.partitions:
                n += len(p.records)
            if n:
                self.fetched_bytes.labels(t.topic).inc(n)

    # -- HTTP endpoint

    async def serve(self) -> None:
        port = self.broker.config["metrics.port"]
        if not port:
            return
        host = self.broker.config["metrics.host"]
        self.http_server = await asyncio.start_server(self._http, host or None, port)
        sock = self.http_server.sockets[0].getsockname()
        self.bound = (sock[0], sock[1])
        log.info("metrics listening", host=sock[0], port=sock[1])

    def stop(self) -> None:
        if self.http_server is not None:
            self.http_server.close()
            self.http_server = None

    async def _http(self, reader, writer) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass
            parts = line.decode("latin-1").split()
            path = parts[1].split("?")[0] if len(parts) >= 2 else ""
            if path == "/metrics":
                status, ctype, body = "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.registry)
            elif path == "/health":
                status, ctype, body = "200 OK", "text/plain", b"ok\n"
            elif path == "/ready":
                ready = self.broker.ready
                status = "200 OK" if ready else "503 Service Unavailable"
                ctype, body = "text/plain", b"ready\n" if ready else b"loading\n"
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"not found\n"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: "
                         f"{len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()
