"""The broker's HTTP port (``metrics.host``:``metrics.port``, default 127.0.0.1:9404; port 0
turns it off): /metrics, /health and /ready for scrapers and healthchecks, the web console
(broker/console) at / and /api/, and the test controls /faults and /nodes (controls.py).

/metrics, /health and /ready answer anyone. Every other path goes through guard.py (Host,
Origin, JSON content type, ``metrics.write.enable``) and, when the broker has an authorizer,
needs an HTTP Basic login (login.py) whose ACLs then decide what it may see and do.
"""
from __future__ import annotations

import asyncio
import errno

import structlog

from ..security import ANONYMOUS
from . import controls
from .auth import CHALLENGE, Caller
from .guard import HostGuard, json_answer, json_refusal, writes_enabled

log = structlog.get_logger("broker.http")

#: most header lines one HTTP request may send
MAX_HEADERS = 100
#: seconds a client has to send a request's line, headers and body, all together
HTTP_READ_TIMEOUT_S = 10
#: HTTP connections served at once (scrapes, the console's polls and actions); more are
#: answered 503 at once
MAX_HTTP_CONNECTIONS = 64
#: the paths anyone may read, by any Host: no record data behind them
OPEN_PATHS = ("/metrics", "/health", "/ready")


class HttpServer:
    """The HTTP endpoint of one broker."""

    def __init__(self, broker) -> None:
        self.broker = broker
        config = broker.config
        self.guard = HostGuard(config)
        #: POST/DELETE /faults and POST /nodes/... (metrics.write.enable, auto resolved)
        self.writes_enabled = writes_enabled(config)
        #: None without an authorizer: no login is asked
        self.login = None
        if getattr(broker, "authorizer", None) is not None:
            from .login import BasicLogin
            self.login = BasicLogin(broker.sasl, broker.scram_credentials)
        self.failed_login_delay_ms = config["connection.failed.authentication.delay.ms"]
        #: how a failed login's answer is held back (tests replace it)
        self.pause = asyncio.sleep
        self.server = None
        self.bound = None
        self.open = 0
        #: the web console, unless console.enable is false; made by _console
        self.console = None

    # -- lifecycle

    async def serve(self, port: int | None = None) -> None:
        """Start the endpoint. It is auxiliary: when its address cannot be bound (a second
        broker or another exporter on the same machine holds the port), one warning says which
        setting to change and the broker runs without it. ``port`` 0 from a caller (the
        embedded broker) binds a free port; metrics.port 0 turns the endpoint off."""
        config = self.broker.config
        if port is None:
            port = config["metrics.port"]
            if not port:
                return
        host = config["metrics.host"]
        try:
            self.server = await asyncio.start_server(self._connection, host or None, port)
        except OSError as exc:
            taken = exc.errno == errno.EADDRINUSE
            log.warning(f"metrics endpoint off: {host or '*'}:{port} is "
                        f"{'already in use' if taken else 'not available'}; set metrics.port "
                        f"(--metrics-port) to a free port, or 0 to turn the endpoint off",
                        host=host, port=port, error=exc.strerror or str(exc))
            return
        sock = self.server.sockets[0].getsockname()
        self.bound = (sock[0], sock[1])
        log.info("metrics listening", host=sock[0], port=sock[1],
                 writes=self.writes_enabled, login=self.login is not None)

    def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None

    # -- readiness

    def readiness(self) -> tuple[bool, str]:
        """(ready, why): listeners bound and every coordinator shard loaded."""
        broker = self.broker
        if not getattr(broker, "ready", False):
            return False, "starting"
        coordinator = getattr(broker, "coordinator", None)
        loading = len(coordinator.shards_loading) if coordinator is not None else 0
        if loading:
            return False, f"loading {loading} coordinator shards"
        server = getattr(broker, "server", None)
        if server is not None and not server.bound:
            return False, "no listener bound"
        return True, "ready"

    # -- requests

    async def _connection(self, reader, writer) -> None:
        if self.open >= MAX_HTTP_CONNECTIONS:
            writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                         b"Content-Length: 5\r\nConnection: close\r\n\r\nbusy\n")
            writer.close()
            return
        self.open += 1
        try:
            await self._request(reader, writer)
        finally:
            self.open -= 1

    async def _request(self, reader, writer) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + HTTP_READ_TIMEOUT_S

        def left() -> float:
            return max(deadline - loop.time(), 0.001)

        async def body(limit: int) -> bytes | None:
            """The request's body; None when it is larger than ``limit``."""
            if length > limit:
                return None
            return await asyncio.wait_for(reader.readexactly(length), left()) if length else b""

        try:
            line = await asyncio.wait_for(reader.readline(), left())
            length = 0
            headers: dict[str, str] = {}
            while True:
                header = await asyncio.wait_for(reader.readline(), left())
                if header in (b"\r\n", b"\n", b""):
                    break
                if len(headers) >= MAX_HEADERS:
                    raise ValueError("too many headers")
                name, _, value = header.decode("latin-1").partition(":")
                name = name.strip().lower()
                headers[name] = value.strip()
                if name == "content-length":
                    length = int(value.strip() or 0)
            parts = line.decode("latin-1").split()
            method = parts[0] if parts else ""
            target = parts[1] if len(parts) >= 2 else ""
            path = target.split("?")[0]
            peer = writer.get_extra_info("peername")
            client = peer[0] if isinstance(peer, tuple) else "127.0.0.1"
            extra = ""
            if path in OPEN_PATHS:
                status, ctype, payload = self._open(path)
            else:
                status, ctype, payload = await self._guarded(method, target, path, headers,
                                                             client, body)
                if status.startswith("401"):
                    extra = f"WWW-Authenticate: {CHALLENGE}\r\n"
            head = (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: "
                    f"{len(payload)}\r\nCache-Control: no-cache\r\n{extra}Connection: close\r\n"
                    f"\r\n").encode()
            writer.write(head if method == "HEAD" else head + payload)
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        except Exception:  # noqa: BLE001 - a scrape must never take the broker down
            log.exception("metrics request failed")
        finally:
            writer.close()

    def _open(self, path: str):
        if path == "/metrics":
            return ("200 OK", *self.broker.metrics.exposition())
        if path == "/health":
            return "200 OK", "text/plain", b"ok\n"
        ready, why = self.readiness()
        return ("200 OK" if ready else "503 Service Unavailable"), "text/plain", \
            why.encode() + b"\n"

    def _console(self):
        """The web console (broker/console), made at the first request that is not /metrics,
        /health or /ready, so a start never loads it; None when console.enable is false."""
        if self.console is None and self.broker.config["console.enable"]:
            from ..console import Console
            self.console = Console(self.broker)
        return self.console

    async def _guarded(self, method, target, path, headers, client, body):
        console = self._console()
        is_console = console is not None and console.serves(path)
        is_faults = path == "/faults" or path.startswith("/faults/")
        is_nodes = path == "/nodes" or path.startswith("/nodes/")
        if not (is_console or is_faults or is_nodes):
            return "404 Not Found", "text/plain", b"not found\n"
        refused = self.guard.refusal(headers)
        if refused is not None:
            return refused
        caller = Caller(ANONYMOUS, client, None)
        if self.login is not None:
            principal = self.login.principal(headers.get("authorization"))
            if principal is None:
                if "authorization" in headers:  # a failed login, held back as Kafka does
                    log.info("HTTP login failed", client=client)
                    await self.pause(self.failed_login_delay_ms / 1000)
                return json_answer("401 Unauthorized", {
                    "error": "SASL_AUTHENTICATION_FAILED",
                    "message": "log in with HTTP Basic as a SASL user of this broker (PLAIN or "
                               "SCRAM): the broker has an authorizer"})
            caller = Caller(principal, client, self.broker.authorizer)
        writing = method in ("POST", "DELETE", "PUT", "PATCH")
        if writing and not is_console and not self.writes_enabled:
            return json_answer("403 Forbidden", {
                "error": "WRITES_DISABLED",
                "message": "the write requests of /faults and /nodes are off: set "
                           "metrics.write.enable=true (auto turns them on only when "
                           "metrics.host is a loopback address)"})
        refused = json_refusal(method, headers)
        if refused is not None:
            return refused
        if is_console:
            from ..console import MAX_BODY
            data = await body(MAX_BODY)
            if data is None:
                return "413 Payload Too Large", "text/plain", b"too large\n"
            return await console.handle(method, target, data, caller)
        if not caller.may_on_cluster(alter=writing):
            return json_answer("403 Forbidden", {
                "error": "CLUSTER_AUTHORIZATION_FAILED",
                "message": f"{caller.principal} may not "
                           f"{'ALTER' if writing else 'DESCRIBE'} the cluster"})
        if is_faults:
            data = await body(controls.MAX_FAULT_BODY)
            if data is None:
                return "413 Payload Too Large", "text/plain", b"too large\n"
            return controls.faults(self.broker, method, path, data)
        return controls.nodes(self.broker, method, path)
