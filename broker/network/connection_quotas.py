"""Connections counted as Kafka's ``ConnectionQuotas`` counts them: at ``max.connections`` the
acceptor stops accepting (new connections wait in the listen backlog until a slot frees), a
connection over ``max.connections.per.ip`` (or its override) is closed right after it is
accepted; and one log line per interval for what a limit did (LimitLog)."""
from __future__ import annotations

import ipaddress
import socket

import structlog

from ..config import ConfigError

log = structlog.get_logger("broker.server")

#: one log line per this interval for connections refused or held by a limit, with the count
LIMIT_LOG_INTERVAL_MS = 10_000


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
