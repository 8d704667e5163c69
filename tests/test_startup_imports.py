"""Start-up loads only what the configuration uses (issue 27): ``kbroker`` started with default
settings in memory, in a fresh interpreter, up to its first ApiVersions answer, has not imported
the modules of what it was not configured for or not asked — TLS, SASL, SCRAM, the console,
prometheus-client, fault injection, the classic, consumer, share and streams group managers,
the API handlers other than ApiVersions. An import of one of them put back on the start path fails here, naming it."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: runs broker.cli.main as ``python -m broker`` does; once the broker has started and answered
#: one ApiVersions on its listener, prints the names of the modules loaded and of the message
#: classes built (protocol/messages.py), and exits
_SCRIPT = """
import asyncio, json, os, struct, sys
import broker.broker

started = broker.broker.Broker.start

async def start_then_report(self):
    await started(self)
    host, port = self.advertised("PLAINTEXT")
    reader, writer = await asyncio.open_connection(host, port)
    request = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    writer.write(struct.pack(">i", len(request)) + request)
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    assert struct.unpack_from(">ih", await reader.readexactly(size)) == (1, 0)
    writer.close()
    from protocol.messages import MESSAGES
    print(json.dumps({"modules": sorted(sys.modules), "messages": sorted(MESSAGES._built)}),
          flush=True)
    os._exit(0)

broker.broker.Broker.start = start_then_report
from broker.cli import main
sys.exit(main(sys.argv[1:]))
"""

#: loaded only when configured or used: what each stands for
NOT_AT_START = {
    "broker.security.tls": "TLS: only with an SSL or SASL_SSL listener",
    "broker.network.tls_handshake": "TLS: only with an SSL or SASL_SSL listener",
    "broker.security.sasl": "SASL: only with a SASL listener",
    "broker.security.plain": "SASL: only with a SASL listener",
    "broker.security.oauthbearer": "SASL: only with a SASL listener",
    "broker.security.jaas": "SASL: only with a SASL listener",
    "broker.console": "the console: at the first console request",
    "broker.metrics_export": "Prometheus series: at the first scrape",
    "prometheus_client": "Prometheus series: at the first scrape",
    "broker.coordinator.group.classic": "classic groups: at the first one (or its commit)",
    "broker.faults": "fault injection: at the first use of broker.faults",
    "broker.security.scram": "SCRAM: with a SASL listener, a credentials file or at first use",
    "broker.coordinator.group.consumer": "consumer groups (KIP-848): at the first one",
    "broker.coordinator.group.share": "share groups: at the first one",
    "broker.coordinator.group.streams": "streams groups: at the first one",
    "broker.coordinator.group.consumer.manager": "consumer groups (KIP-848): at the first one",
    "broker.coordinator.group.consumer.assignors": "consumer groups (KIP-848): at the first one",
    "broker.coordinator.group.consumer.migration": "consumer groups (KIP-848): at the first one",
    "broker.coordinator.group.share.manager": "share groups: at the first one",
    "broker.coordinator.group.share.assignor": "share groups: at the first one",
    "broker.coordinator.group.share.leader": "share groups: at the first one",
    "broker.coordinator.group.share.partition": "share groups: at the first one",
    "broker.coordinator.share_state": "share groups: at the first one (or its stored state)",
    "broker.coordinator.group.streams.manager": "streams groups: at the first one",
    "broker.coordinator.group.streams.topology": "streams groups: at the first one",
    "broker.coordinator.group.streams.assignor": "streams groups: at the first one",
    "broker.security.authorizer": "the authorizer: only with authorizer.class.name",
    "broker.security.authorization": "the authorizer: only with authorizer.class.name",
    "broker.security.delegation_tokens": "delegation tokens: a SASL listener or a token API",
    "broker.network.error_placement": "request faults: at the first one armed",
    "broker.cli.commands": "client commands: only `kbroker topic ...` and the like",
    "protocol.compression": "compression codecs: at the first compressed batch",
    "cramjam": "compression codecs: at the first compressed batch",
    "broker.partitions.fetch_sessions": "fetch sessions (KIP-227): at the first Fetch",
    "broker.coordinator.group.history": "rebalance history: at the first rebalance",
    "ctypes.util": "its find_library runs ldconfig in a new process: glibc is opened by name",
    "hashlib": "SCRAM, the HTTP port's logins, consumer groups: only when used",
    "tomllib": "a .toml config file",
}


def _first_answer(*args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", _SCRIPT, "--port", "0", *args], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


def _loaded_but_not_needed(modules: set[str]) -> dict[str, str]:
    return {name: why for name, why in NOT_AT_START.items()
            if any(m == name or m.startswith(name + ".") for m in modules)}


def test_a_default_start_without_the_http_port_loads_only_what_it_uses():
    seen = _first_answer("--metrics-port", "0")
    modules = set(seen["modules"])
    assert _loaded_but_not_needed(modules) == {}
    # message classes (and their codecs) are built for the APIs and records used, here one
    assert seen["messages"] == ["ApiVersionsRequest", "ApiVersionsResponse"]
    assert {m for m in modules if m.startswith("broker.apis.")} == {"broker.apis.api_versions"}
    # the listener's ASCII host goes to getaddrinfo as bytes (socket_server._listening_sockets);
    # the HTTP port's asyncio.start_server still loads the idna codec
    assert "encodings.idna" not in modules
    assert "broker.http.server" in modules  # the HTTP port's object exists, not serving


def test_a_default_start_with_the_http_port_loads_neither_console_nor_prometheus():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert _loaded_but_not_needed(set(_first_answer("--metrics-port", str(port))["modules"])) == {}


def test_the_check_sees_a_module_that_is_loaded():
    """The same check, given a start that loaded TLS and a share manager, names them."""
    assert _loaded_but_not_needed({"broker", "broker.security.tls", "prometheus_client.core",
                                   "broker.coordinator.group.share.manager"}) == {
        "broker.security.tls": NOT_AT_START["broker.security.tls"],
        "prometheus_client": NOT_AT_START["prometheus_client"],
        "broker.coordinator.group.share": NOT_AT_START["broker.coordinator.group.share"],
        "broker.coordinator.group.share.manager":
            NOT_AT_START["broker.coordinator.group.share.manager"]}
