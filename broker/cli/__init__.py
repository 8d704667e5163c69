"""Command line: ``kbroker [options]`` starts the broker; ``kbroker healthcheck`` asks a running
broker a real Kafka question (ApiVersions) and exits 0 if it answers and its coordinators have
loaded; ``kbroker certs`` makes development certificates for TLS listeners
(broker/security/certs.py).

``kbroker topic|produce|consume|group|acl|user|txn|cluster ...`` are client commands against
this broker or any Kafka (broker/cli/commands.py). They use a Kafka client library, so they are
imported only when one of them is asked for: starting the broker never loads a client."""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import struct
import sys

from ..config import SETTINGS, BrokerConfig, ConfigError, read_config_file, read_environment


#: subcommands that talk to a cluster as a client (broker/cli/commands.py)
CLIENT_COMMANDS = ("topic", "produce", "consume", "group", "acl", "user", "txn", "cluster")


def _settings_help() -> str:
    lines = ["settings (use --override name=value, a --config file, or KBROKER_NAME env vars):"]
    for s in SETTINGS.values():
        lines.append(f"  {s.name} (default {s.default!r}): {s.doc}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kbroker", description="A Kafka-compatible broker for local development and tests.",
        epilog=_settings_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="a .properties or .toml file of settings")
    p.add_argument("--host", help="bind host of the PLAINTEXT listener (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port of the PLAINTEXT listener (default 9092)")
    p.add_argument("--listeners", help="NAME://host:port,... (listeners)")
    p.add_argument("--advertised-listeners", help="NAME://host:port,... (advertised.listeners)")
    p.add_argument("--data-dir", help="store logs here (log.dirs); default: in memory")
    p.add_argument("--node-id", type=int, help="node.id (default 1)")
    p.add_argument("--nodes", type=int,
                   help="nodes served as one cluster: node.id and up, each listener on port + i "
                        "(default 1)")
    p.add_argument("--metrics-port", type=int, help="metrics.port (0 turns it off)")
    p.add_argument("--log-format", choices=["auto", "console", "json"], help="log.format")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"],
                   help="log.level")
    p.add_argument("--override", action="append", default=[], metavar="NAME=VALUE",
                   help="any setting by Kafka's name; repeatable")
    p.add_argument("command", nargs="?",
                   choices=["start", "healthcheck", "certs", *CLIENT_COMMANDS],
                   default="start",
                   help="start (default), healthcheck, or certs (kbroker certs --help); client "
                        f"commands: {', '.join(CLIENT_COMMANDS)} (kbroker topic --help)")
    return p


def resolve_config(args, environ=os.environ) -> BrokerConfig:
    values: dict[str, object] = {}
    if args.config:
        values.update(read_config_file(args.config))
    values.update(read_environment(environ))
    if args.host is not None or args.port is not None:
        host = args.host if args.host is not None else "127.0.0.1"
        port = args.port if args.port is not None else 9092
        values["listeners"] = f"PLAINTEXT://{host}:{port}"
    flags = {"listeners": args.listeners, "advertised.listeners": args.advertised_listeners,
             "log.dirs": args.data_dir, "node.id": args.node_id, "nodes": args.nodes,
             "metrics.port": args.metrics_port, "log.format": args.log_format,
             "log.level": args.log_level}
    values.update({k: v for k, v in flags.items() if v is not None})
    for item in args.override:
        name, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--override expects name=value, got {item!r}")
        values[name.strip()] = value.strip()
    return BrokerConfig(values)


async def _run(config: BrokerConfig) -> int:
    from ..broker import Broker
    broker = Broker(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await broker.start()
    from ..network.process_tuning import tune_gc
    tune_gc()
    await stop.wait()
    await broker.stop()
    return 0


def healthcheck(config: BrokerConfig) -> int:
    """Send ApiVersions v0 to the first PLAINTEXT listener (else the first listener, over TLS
    without checking the broker's certificate when it is an SSL one) and check the answer, then
    that the broker is ready (_not_ready)."""
    plaintext = [entry for entry in config.listeners
                 if config.security_protocols[entry[0]] == "PLAINTEXT"]
    name, host, port = (plaintext or config.listeners)[0]
    host = host if host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    request = struct.pack(">hhih", 18, 0, 1, 11) + b"healthcheck"
    try:
        with _connect(host, port, config.security_protocols[name]) as sock:
            sock.sendall(struct.pack(">i", len(request)) + request)
            (size,) = struct.unpack(">i", _read_exactly(sock, 4))
            correlation_id, error = struct.unpack_from(">ih", _read_exactly(sock, size))
    except (OSError, struct.error) as exc:
        print(f"unhealthy: {exc}", file=sys.stderr)
        return 1
    if correlation_id != 1 or error != 0:
        print(f"unhealthy: ApiVersions answered error {error}", file=sys.stderr)
        return 1
    not_ready = _not_ready(config)
    if not_ready:
        print(f"unhealthy: {not_ready}", file=sys.stderr)
        return 1
    print("healthy")
    return 0


def _not_ready(config: BrokerConfig) -> str | None:
    """Why the broker is not ready yet, from /ready on its HTTP port: the listeners answer while
    the coordinators still replay __consumer_offsets (every group API answers
    COORDINATOR_LOAD_IN_PROGRESS), so a container is healthy only once they have loaded. None when
    ready, or when the HTTP port is off (metrics.port=0)."""
    port = config["metrics.port"]
    if not port:
        return None
    import urllib.error
    import urllib.request
    host = config["metrics.host"]
    host = host if host not in ("", "0.0.0.0", "::") else "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
    try:
        with opener.open(f"http://{host}:{port}/ready", timeout=5):
            return None
    except urllib.error.HTTPError as exc:
        return f"not ready ({exc.code}): {exc.read().decode(errors='replace').strip()}"
    except OSError as exc:
        return f"/ready on port {port}: {exc}"


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def _connect(host: str, port: int, security_protocol: str) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=5)
    if security_protocol not in ("SSL", "SASL_SSL"):
        return sock
    import ssl
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # a liveness probe of this host's broker
    return context.wrap_socket(sock)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] and argv[0] in CLIENT_COMMANDS:
        from .commands import main as client_main
        return client_main(argv)
    if argv[:1] == ["certs"]:
        from ..security.certs import main as certs_main
        return certs_main(argv[1:])
    parser = build_parser()
    placed, _ = parser.parse_known_args(argv)
    if placed.command in CLIENT_COMMANDS:  # broker options before a client command
        print(f"kbroker: a client command comes first, its options after it: "
              f"kbroker {placed.command} ... -b HOST:PORT", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        config = resolve_config(args)
    except ConfigError as exc:
        print(f"kbroker: {exc}", file=sys.stderr)
        return 2
    if args.command == "healthcheck":
        return healthcheck(config)
    from ..logging import configure_logging
    from ..network.process_tuning import tune_malloc
    configure_logging(config["log.format"], config["log.level"])
    tune_malloc()
    try:
        import uvloop
    except ImportError:
        uvloop = None
    try:
        if uvloop is not None:
            return uvloop.run(_run(config))
        return asyncio.run(_run(config))
    except ConfigError as exc:  # a setting found wrong only at start (a host name)
        print(f"kbroker: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
