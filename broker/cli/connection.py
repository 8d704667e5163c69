"""How the client commands reach a cluster: the bootstrap servers (``-b``, KBROKER_BOOTSTRAP,
else localhost:9092) and the security settings of a Kafka client properties file, as Kafka's own
tools read them from ``--command-config``, turned into kafka-python's keyword arguments (and
librdkafka's names for the few commands that use confluent-kafka)."""
from __future__ import annotations

import os
import re
import socket

from .errors import CliError

DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_TIMEOUT_S = 10.0

#: client properties this file understands; anything else in the file is an error, so a typo
#: in a security setting never silently connects in plain text
KNOWN_PROPERTIES = (
    "bootstrap.servers", "client.id", "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "sasl.username", "sasl.password", "ssl.truststore.location", "ssl.truststore.type",
    "ssl.truststore.certificates", "ssl.keystore.location", "ssl.keystore.type",
    "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
    "ssl.endpoint.identification.algorithm", "ssl.ca.location", "ssl.certificate.location",
    "ssl.key.location", "ssl.key.location.password", "request.timeout.ms",
)
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


def read_properties(path: str) -> dict[str, str]:
    """A Java .properties file of ``name=value`` (or ``name: value``) lines; ``#`` and ``!``
    start comments, a trailing backslash continues a line."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise CliError(f"cannot read --command-config {path}: {exc.strerror}") from None
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        match = re.match(r"([^=:\s]+)\s*[=:]?\s*(.*)$", line)
        if match:
            props[match.group(1)] = match.group(2)
    return props


def _jaas_credentials(jaas: str) -> tuple[str | None, str | None]:
    """username and password of a PlainLoginModule or ScramLoginModule sasl.jaas.config."""
    options = dict(re.findall(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"', jaas))
    return options.get("username"), options.get("password")


class Connection:
    """Where and how to connect: what every client command is given."""

    def __init__(self, bootstrap: str, props: dict[str, str], timeout_s: float) -> None:
        self.bootstrap = bootstrap
        self.props = props
        self.timeout_s = timeout_s
        unknown = sorted(set(props) - set(KNOWN_PROPERTIES))
        if unknown:
            raise CliError(f"unknown client properties in --command-config: {', '.join(unknown)}")
        self.protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if self.protocol not in PROTOCOLS:
            raise CliError(f"security.protocol must be one of {', '.join(PROTOCOLS)}, "
                           f"not {props['security.protocol']!r}")
        self.mechanism = props.get("sasl.mechanism", "GSSAPI" if "SASL" in self.protocol
                                   else None)
        user, password = _jaas_credentials(props.get("sasl.jaas.config", ""))
        self.username = props.get("sasl.username", user)
        self.password = props.get("sasl.password", password)
        if "SASL" in self.protocol:
            if self.mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
                raise CliError(f"sasl.mechanism {self.mechanism} is not supported by kbroker's "
                               "client commands (use PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
            if self.username is None or self.password is None:
                raise CliError("SASL needs a username and password: sasl.jaas.config with "
                               'username="..." password="...", or sasl.username/sasl.password')
        self.cafile = self._pem("ssl.truststore.location", "ssl.truststore.type",
                                props.get("ssl.ca.location"))
        keystore = self._pem("ssl.keystore.location", "ssl.keystore.type",
                             props.get("ssl.certificate.location"))
        self.certfile = keystore
        self.keyfile = props.get("ssl.key.location")
        self.key_password = props.get("ssl.key.password", props.get("ssl.key.location.password"))
        self.check_hostname = props.get("ssl.endpoint.identification.algorithm",
                                        "https").lower() == "https"

    def _pem(self, location: str, store_type: str, fallback: str | None) -> str | None:
        path = self.props.get(location, fallback)
        if path is None:
            return None
        kind = self.props.get(store_type, "PEM").upper()
        if kind != "PEM":
            raise CliError(f"{store_type}={kind} is not supported; kbroker's client commands "
                           f"read PEM files ({store_type}=PEM); `kbroker certs` writes PEM too")
        if not os.path.isfile(path):
            raise CliError(f"{location} {path}: no such file")
        return path

    @property
    def servers(self) -> list[tuple[str, int]]:
        out = []
        for item in self.bootstrap.split(","):
            item = item.strip()
            if not item:
                continue
            host, sep, port = item.rpartition(":")
            if not sep:
                host, port = item, "9092"
            try:
                out.append((host.strip("[]") or "localhost", int(port)))
            except ValueError:
                raise CliError(f"bad bootstrap server {item!r}: expected host:port") from None
        if not out:
            raise CliError("no bootstrap server given (-b host:port)")
        return out

    def check_reachable(self) -> None:
        """A plain TCP connection to each bootstrap server in turn, so an address where nothing
        listens is reported at once and by name, not after the client's bootstrap timeout."""
        reasons = []
        for host, port in self.servers:
            try:
                with socket.create_connection((host, port), timeout=min(self.timeout_s, 5.0)):
                    return
            except socket.gaierror as exc:
                reasons.append(f"{host}:{port} ({exc.strerror or exc})")
            except socket.timeout:
                reasons.append(f"{host}:{port} (timed out)")
            except OSError as exc:
                reasons.append(f"{host}:{port} ({(exc.strerror or str(exc)).lower()})")
        raise CliError(f"no broker at {', '.join(reasons)}")

    def kafka_python(self) -> dict:
        """Keyword arguments common to kafka-python's admin, producer and consumer."""
        timeout_ms = int(self.timeout_s * 1000)
        kw = {"bootstrap_servers": [f"{h}:{p}" for h, p in self.servers],
              "client_id": self.props.get("client.id", "kbroker-cli"),
              "security_protocol": self.protocol,
              "request_timeout_ms": int(self.props.get("request.timeout.ms", max(timeout_ms,
                                                                                   30000))),
              "reconnect_backoff_max_ms": 1000}
        if "SASL" in self.protocol:
            kw.update(sasl_mechanism=self.mechanism, sasl_plain_username=self.username,
                      sasl_plain_password=self.password)
        if "SSL" in self.protocol:
            kw.update(ssl_cafile=self.cafile, ssl_certfile=self.certfile,
                      ssl_keyfile=self.keyfile, ssl_password=self.key_password,
                      ssl_check_hostname=self.check_hostname)
        return kw

    def librdkafka(self) -> dict:
        """The same settings by librdkafka's names, for confluent-kafka."""
        conf = {"bootstrap.servers": ",".join(f"{h}:{p}" for h, p in self.servers),
                "client.id": self.props.get("client.id", "kbroker-cli"),
                "security.protocol": self.protocol}
        if "SASL" in self.protocol:
            conf.update({"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                         "sasl.password": self.password})
        if "SSL" in self.protocol:
            for name, value in (("ssl.ca.location", self.cafile),
                                ("ssl.certificate.location", self.certfile),
                                ("ssl.key.location", self.keyfile),
                                ("ssl.key.password", self.key_password)):
                if value is not None:
                    conf[name] = value
            conf["ssl.endpoint.identification.algorithm"] = \
                "https" if self.check_hostname else "none"
        return conf


def connection_from(args) -> Connection:
    bootstrap = args.bootstrap or os.environ.get("KBROKER_BOOTSTRAP") or DEFAULT_BOOTSTRAP
    path = args.command_config or os.environ.get("KBROKER_COMMAND_CONFIG")
    props = read_properties(path) if path else {}
    if not args.bootstrap and "bootstrap.servers" in props and \
            not os.environ.get("KBROKER_BOOTSTRAP"):
        bootstrap = props["bootstrap.servers"]
    props.pop("bootstrap.servers", None)
    conn = Connection(bootstrap, props, args.timeout)
    MADE.append(conn)
    return conn


#: the connection settings of this run, for the error message of a failed bootstrap
MADE: list[Connection] = []


def _watched_client(**configs):
    """kafka-python's network client, its connection manager handed to the kept client log
    so a failed authentication ends the bootstrap at once (broker/cli/errors.py)."""
    from kafka.net.compat import KafkaNetClient

    from .errors import CLIENT_LOG
    client = KafkaNetClient(**configs)
    CLIENT_LOG.managers.append(client._manager)
    return client


def admin(conn: Connection):
    """A kafka-python KafkaAdminClient that has bootstrapped."""
    conn.check_reachable()
    from kafka import KafkaAdminClient
    return KafkaAdminClient(bootstrap_timeout_ms=int(conn.timeout_s * 1000),
                            kafka_client=_watched_client, **conn.kafka_python())


def producer(conn: Connection, **settings):
    conn.check_reachable()
    from kafka import KafkaProducer
    return KafkaProducer(max_block_ms=int(conn.timeout_s * 1000), kafka_client=_watched_client,
                         **conn.kafka_python(), **settings)


def consumer(conn: Connection, **settings):
    conn.check_reachable()
    from kafka import KafkaConsumer
    return KafkaConsumer(kafka_client=_watched_client, **conn.kafka_python(), **settings)
