"""What the HTTP port checks before it answers the console, its API, /faults or /nodes.

* Host: the request must name this endpoint directly: an IP address, ``localhost``,
  ``metrics.host``, an advertised listener's host or one of ``metrics.allowed.hosts``. Any other
  name may be someone's DNS name rebound to this machine (DNS rebinding): a browser then treats
  the port as that site's own origin and lets its page read and write it.
* Origin: when a browser sends one it must be that same host: a page of another site may not
  use a browser that can reach the port.
* Content type: a POST must be ``application/json``, which a page of another site cannot send
  without a CORS preflight, and this port answers none.
* ``metrics.write.enable``: the write requests of /faults and /nodes are served only when true
  (``auto``: when the endpoint binds a loopback address).

/metrics, /health and /ready are not guarded: scrapers and healthchecks reach them by any name,
and they show no record data.
"""
from __future__ import annotations

import ipaddress
import json

Answer = tuple  # (status, content type, body bytes)


def json_answer(status: str, value) -> Answer:
    return status, "application/json", json.dumps(value).encode() + b"\n"


def host_name(host: str) -> str:
    """The name of a Host header (``name:port``, ``[v6]:port``), lower case, without a trailing
    dot."""
    host = host.strip()
    if host.startswith("["):
        name = host[1:].partition("]")[0]
    elif host.count(":") == 1:
        name = host.partition(":")[0]
    else:
        name = host  # a name without port, or a bare IPv6 address
    return name.rstrip(".").lower()


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name.partition("%")[0])
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps a port to this machine (127.0.0.0/8, ::1, localhost)."""
    name = host_name(host)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.partition("%")[0]).is_loopback
    except ValueError:
        return False


def writes_enabled(config) -> bool:
    """metrics.write.enable, its ``auto`` resolved: on only where the port is this machine's."""
    value = config["metrics.write.enable"]
    if value == "auto":
        return is_loopback(config["metrics.host"])
    return bool(value)


class HostGuard:
    """The Host and Origin checks of one endpoint, with the names it trusts."""

    def __init__(self, config) -> None:
        names = {"localhost", *config["metrics.allowed.hosts"], config["metrics.host"]}
        names.update(host for host, _port in config.advertised.values())
        self.names = frozenset(host_name(n) for n in names if n)

    def direct(self, host: str) -> bool:
        """Whether a Host header names this endpoint directly rather than by a name someone
        else's DNS controls."""
        name = host_name(host)
        return bool(name) and (name in self.names or _is_address(name))

    def refusal(self, headers: dict) -> Answer | None:
        """The 403 answer for a request whose Host or Origin is not this endpoint's, else
        None."""
        host = headers.get("host", "")
        if not self.direct(host):
            return json_answer("403 Forbidden", {
                "error": "UNTRUSTED_HOST",
                "message": f"requests for host {host!r} are refused: reach this endpoint by "
                           "its address, localhost, metrics.host or an advertised host, or add "
                           "the name to metrics.allowed.hosts"})
        origin = headers.get("origin")
        if origin is not None and origin.split("://", 1)[-1].rstrip("/").lower() != \
                host.strip().lower():
            return json_answer("403 Forbidden", {
                "error": "CROSS_ORIGIN",
                "message": f"requests from {origin} are refused: only pages of this endpoint "
                           f"({host}) may use it"})
        return None


def json_refusal(method: str, headers: dict) -> Answer | None:
    """415 for a POST whose body is not declared JSON, else None."""
    if method != "POST":
        return None
    ctype = headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype == "application/json":
        return None
    return json_answer("415 Unsupported Media Type", {
        "error": "UNSUPPORTED_MEDIA_TYPE",
        "message": f"send the request as Content-Type: application/json, not {ctype or 'none'}"})
