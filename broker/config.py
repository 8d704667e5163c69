"""Broker settings by Kafka's names, with Kafka's defaults unless a dev stand-in needs otherwise.

Sources, later ones winning: built-in defaults, a properties or TOML file (``--config``),
environment variables (``KBROKER_LOG_RETENTION_MS`` or Kafka-image style ``KAFKA_LOG_RETENTION_MS``),
then the command line (``--port``, ``--data-dir``, ``--override name=value``, ...).
Unknown names and bad values are refused with a message naming them.
"""
from __future__ import annotations

import os
import pathlib
import re
from urllib.parse import urlsplit

from broker.errors import ConfigError
from broker.security import SASL_PROTOCOLS, SECURITY_PROTOCOLS, STANDARD_AUTHORIZER, TLS_PROTOCOLS


def _bool(value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _str(value) -> str:
    return str(value)


def _opt_str(value):
    return None if value is None or str(value) == "" else str(value)


def _ip_overrides(value) -> tuple:
    """max.connections.per.ip.overrides as Kafka reads it, ``host:count,host:count`` (the last
    colon ends the host, so IPv6 addresses need no brackets) -> ((host, count), ...)."""
    if isinstance(value, (tuple, list)):
        return tuple((str(h), int(c)) for h, c in value)
    out = []
    for item in (x.strip() for x in str(value).split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep:
            raise ValueError(f"{item!r} is not host:count")
        host = host.strip()
        if not re.fullmatch(r"[0-9a-zA-Z\-%._:]*", host):
            raise ValueError(f"invalid address {host!r}")
        out.append((host, int(count)))
    return tuple(out)


def _bool_or_auto(value):
    """true, false or auto (a setting whose default depends on another one)."""
    if str(value).strip().lower() == "auto":
        return "auto"
    return _bool(value)


def _list(value) -> tuple:
    if isinstance(value, (list, tuple)):
        return tuple(str(v).strip() for v in value)
    return tuple(v.strip() for v in str(value).split(",") if v.strip())


#: Kafka's class names of the built-in server assignors, accepted for their short names
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


def _assignors(value) -> tuple:
    names = tuple(_ASSIGNOR_CLASSES.get(v, v) for v in _list(value))
    unknown = [n for n in names if n not in ("uniform", "range")]
    if unknown or not names:
        raise ValueError(f"unknown assignor(s) {unknown}: only uniform and range are built in")
    return names


class Setting:
    """One broker setting: its Kafka name, parser, default and doc (a plain class: a dataclass
    exec()s its methods' source at every start)."""

    __slots__ = ("name", "parse", "default", "doc")

    def __init__(self, name: str, parse, default, doc: str) -> None:
        self.name = name
        self.parse = parse
        self.default = default
        self.doc = doc

    def __repr__(self) -> str:
        return f"Setting({self.name!r}, default={self.default!r})"


SETTINGS: dict[str, Setting] = {s.name: s for s in [
    Setting("node.id", int, 1, "This broker's node id, reported in Metadata and FindCoordinator."),
    Setting("nodes", int, 1, "Nodes this process serves as one cluster (node.id, node.id+1, ...), "
            "each with every listener: on port + i, or an ephemeral port for port 0; partition "
            "leaders spread over them (not a Kafka setting: kbroker --nodes N)."),
    Setting("cluster.id", _str, "kbroker-cluster-0001", "Cluster id reported to clients."),
    Setting("listeners", _str, "PLAINTEXT://127.0.0.1:9092",
            "Comma-separated NAME://host:port listeners to bind (host empty or 0.0.0.0 = all)."),
    Setting("advertised.listeners", _opt_str, None,
            "NAME://host:port per listener as clients should reach it (default: listeners)."),
    Setting("listener.security.protocol.map", _str,
            "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "LISTENER_NAME:SECURITY_PROTOCOL pairs; every listener's name must be mapped."),
    # TLS of SSL and SASL_SSL listeners (broker/security/tls.py); each may also be given for one
    # listener as listener.name.<listener lowercased>.<name>, which wins over this one
    Setting("ssl.keystore.type", _str, "JKS",
            "Keystore format: PKCS12 or PEM (JKS, Kafka's default, is read only when the file "
            "is really PKCS12, as Java does)."),
    Setting("ssl.keystore.location", _opt_str, None, "Keystore file (PKCS12, or PEM with the "
            "private key and certificate chain)."),
    Setting("ssl.keystore.password", _opt_str, None, "Password of a PKCS12 keystore."),
    Setting("ssl.key.password", _opt_str, None, "Password of the private key (PEM: of an "
            "encrypted PKCS#8 key)."),
    Setting("ssl.keystore.key", _opt_str, None,
            "Private key as inline PEM (ssl.keystore.type=PEM)."),
    Setting("ssl.keystore.certificate.chain", _opt_str, None,
            "Certificate chain as inline PEM (ssl.keystore.type=PEM)."),
    Setting("ssl.truststore.type", _str, "JKS", "Truststore format: PKCS12 or PEM."),
    Setting("ssl.truststore.location", _opt_str, None,
            "Certificates trusted for client certificates (PKCS12 or PEM file)."),
    Setting("ssl.truststore.password", _opt_str, None, "Password of a PKCS12 truststore."),
    Setting("ssl.truststore.certificates", _opt_str, None,
            "Trusted certificates as inline PEM (ssl.truststore.type=PEM)."),
    Setting("ssl.client.auth", _str, "none",
            "Client certificates: none, requested or required."),
    Setting("ssl.protocol", _str, "TLSv1.3",
            "Highest TLS version when ssl.enabled.protocols is empty."),
    Setting("ssl.enabled.protocols", _list, ("TLSv1.2", "TLSv1.3"), "TLS versions accepted."),
    Setting("ssl.cipher.suites", _list, (), "Cipher suites of TLS 1.2 and older (Java/IANA or "
            "OpenSSL names; empty = OpenSSL's defaults); TLS 1.3 suites use OpenSSL's defaults."),
    Setting("ssl.principal.mapping.rules", _str, "DEFAULT",
            "RULE:pattern/replacement/[LU] and DEFAULT rules mapping a client certificate's "
            "distinguished name to the User: principal."),
    Setting("ssl.handshake.timeout.ms", int, 10000,
            "A connection of an SSL or SASL_SSL listener whose TLS handshake has not finished "
            "this long after it was accepted is closed, or after connections.max.idle.ms when "
            "that is shorter (not a Kafka setting: Kafka bounds a handshake only by "
            "connections.max.idle.ms)."),
    Setting("ssl.endpoint.identification.algorithm", _str, "https",
            "Clients' server host name check; accepted as Kafka does, a broker does not use it."),
    Setting("authorizer.class.name", _str, "",
            "The ACL authorizer: org.apache.kafka.metadata.authorizer.StandardAuthorizer, or "
            "empty for none (the ACL APIs answer SECURITY_DISABLED and every request is allowed)."),
    Setting("super.users", _str, "",
            "Principals the authorizer allows everything, separated by semicolons "
            "(User:admin;User:ops)."),
    Setting("allow.everyone.if.no.acl.found", _bool, False,
            "With the authorizer: allow a request on a resource that has no ACL at all."),
    Setting("sasl.enabled.mechanisms", _list, ("GSSAPI",),
            "SASL mechanisms served on SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
            "OAUTHBEARER (per listener: listener.name.<l>.sasl.enabled.mechanisms)."),
    Setting("sasl.jaas.config", _opt_str, None,
            "JAAS login module of every SASL listener and mechanism that has no "
            "listener.name.<l>.<mechanism>.sasl.jaas.config (Kafka brokers ignore this "
            "unprefixed form; see docs/security.md)."),
    Setting("java.security.auth.login.config", _opt_str, None,
            "A JAAS file with KafkaServer or <listener>.KafkaServer sections, used where no "
            "sasl.jaas.config applies (also read from KAFKA_OPTS=-Djava.security.auth.login."
            "config=FILE, as Kafka's scripts pass it)."),
    Setting("sasl.server.max.receive.size", int, 524288,
            "Largest frame a client may send before it has authenticated."),
    Setting("connection.failed.authentication.delay.ms", int, 100,
            "A connection whose authentication failed is closed this long after the failure "
            "answer."),
    Setting("connections.max.reauth.ms", int, 0,
            "SASL session lifetime: after it a connection must re-authenticate (KIP-368) or is "
            "closed (0 = never; per mechanism: listener.name.<l>.<mechanism>.connections."
            "max.reauth.ms)."),
    Setting("sasl.scram.bootstrap.credentials", _opt_str, None,
            "SCRAM users added at first start, as kafka-storage format --add-scram takes them: "
            "SCRAM-SHA-256=[name=alice,password=alice-secret] SCRAM-SHA-512=[...]."),
    Setting("delegation.token.secret.key", _opt_str, None,
            "Secret that signs delegation tokens (KIP-48); unset = token authentication off "
            "(the token APIs answer DELEGATION_TOKEN_AUTH_DISABLED, as Kafka does)."),
    Setting("delegation.token.max.lifetime.ms", int, 604800000,
            "Longest a delegation token lives, renewals included."),
    Setting("delegation.token.expiry.time.ms", int, 86400000,
            "A delegation token's lifetime until renewed, and a renewal's default."),
    Setting("delegation.token.expiry.check.interval.ms", int, 3600000,
            "How often expired delegation tokens are removed."),
    Setting("log.dirs", _opt_str, None,
            "Data directory; unset = in-memory storage (nothing on disk)."),
    Setting("num.partitions", int, 1, "Partitions of an auto-created topic."),
    Setting("default.replication.factor", int, 1,
            "Replicas of a topic created without a replication factor (at most the nodes up)."),
    Setting("auto.create.topics.enable", _bool, True, "Create topics on Metadata requests."),
    Setting("delete.topic.enable", _bool, True, "Allow DeleteTopics."),
    Setting("message.max.bytes", int, 1048588, "Largest record batch accepted (per topic: max.message.bytes)."),
    Setting("socket.request.max.bytes", int, 104857600, "Largest request frame; larger closes the connection."),
    Setting("max.connections", int, 2147483647,
            "Connections open at once; at the limit new ones wait, not accepted, until one "
            "closes."),
    Setting("max.connections.per.ip", int, 2147483647,
            "Connections from one address; more are closed as soon as they are accepted."),
    Setting("max.connections.per.ip.overrides", _ip_overrides, (),
            "Per-address limits instead of max.connections.per.ip: host:count,host:count."),
    Setting("connections.max.idle.ms", int, 600000,
            "Close a connection that has read and written nothing for this long (-1 = never)."),
    Setting("quota.window.num", int, 11,
            "Samples kept of each client's rate under a client quota (Kafka's ClientQuotaManager)."),
    Setting("quota.window.size.seconds", int, 1,
            "Time span of each sample of a client's rate under a client quota."),
    Setting("queued.max.requests", int, 500,
            "Requests in flight per connection before the broker stops reading from it."),
    Setting("queued.max.request.bytes", int, -1,
            "Request bytes read and not yet answered, over all connections, before no more "
            "requests are read (-1 = unlimited)."),
    Setting("queued.max.response.bytes", int, 268435456,
            "kbroker's own (Kafka sends records from the page cache): bytes of answers not yet "
            "taken by the clients' sockets, over all connections; a Fetch reads at most what "
            "is left, and waits when nothing is (-1 = unlimited)."),
    Setting("fetch.max.bytes", int, 57671680,
            "The most record bytes the broker returns for one Fetch, whatever its max_bytes "
            "(at least 1024)."),
    Setting("max.incremental.fetch.session.cache.slots", int, 1000,
            "Fetch sessions (KIP-227) kept, over 8 shards of equal share; 0: none, every "
            "fetch is a full fetch."),
    Setting("log.retention.ms", int, 604800000, "Default retention.ms of topics (-1 = forever)."),
    Setting("log.retention.bytes", int, -1, "Default retention.bytes per partition (-1 = unlimited)."),
    Setting("log.segment.bytes", int, 1073741824, "Segment file size before rolling (with log.dirs)."),
    Setting("log.roll.ms", int, 604800000, "Segment age before rolling (with log.dirs)."),
    Setting("log.flush.interval.messages", int, 9223372036854775807,
            "fsync after this many messages (Kafka's default: never, rely on the OS page cache)."),
    Setting("log.flush.interval.ms", int, -1, "fsync at most this long after a write (-1 = never)."),
    Setting("log.retention.check.interval.ms", int, 300000, "How often retention runs."),
    Setting("log.memory.max.bytes", int, 1073741824,
            "In-memory storage (no log.dirs): the most record bytes all partitions hold "
            "together; appends past it drop the oldest records of topics with "
            "cleanup.policy=delete, as retention would (-1 = no bound; see docs/operations.md)."),
    Setting("log.cleaner.enable", _bool, True,
            "Compact logs with cleanup.policy=compact (in memory and segment files)."),
    Setting("log.cleaner.backoff.ms", int, 15000,
            "How long the log cleaner waits when no log needs cleaning."),
    Setting("log.cleaner.dedupe.buffer.size", int, 134217728,
            "Memory one cleaning pass may use for its map of keys (a larger dirty part is "
            "cleaned over several passes)."),
    Setting("log.cleaner.min.cleanable.ratio", float, 0.5,
            "Default min.cleanable.dirty.ratio of topics: clean a log once its dirty part is "
            "more than this share of it."),
    Setting("log.cleaner.min.compaction.lag.ms", int, 0,
            "Default min.compaction.lag.ms of topics: records younger than this are not "
            "compacted."),
    Setting("log.cleaner.max.compaction.lag.ms", int, 9223372036854775807,
            "Default max.compaction.lag.ms of topics: dirty records older than this are "
            "compacted whatever the ratio."),
    Setting("log.cleaner.delete.retention.ms", int, 86400000,
            "Default delete.retention.ms of topics: how long tombstones and transaction "
            "markers stay once compaction may remove them."),
    Setting("log.message.timestamp.type", _str, "CreateTime", "CreateTime or LogAppendTime."),
    Setting("offsets.topic.num.partitions", int, 50, "Partitions of __consumer_offsets = coordinator shards."),
    Setting("offsets.topic.replication.factor", int, 3,
            "Replicas of each __consumer_offsets partition, at most the nodes served (Kafka "
            "refuses to create the topic until that many brokers are up; here one node is "
            "the default)."),
    Setting("transaction.state.log.replication.factor", int, 3,
            "Replicas of each __transaction_state partition, at most the nodes served."),
    Setting("transaction.state.log.min.isr", int, 2,
            "min.insync.replicas of __transaction_state when it is created, at most its "
            "replication factor."),
    Setting("offsets.topic.segment.bytes", int, 262144,
            "segment.bytes of __consumer_offsets when it is created (Kafka: 100 MiB): the log "
            "cleaner never touches the active segment, so this bounds what a restart replays "
            "beyond the live state (see docs/operations.md)."),
    Setting("offsets.retention.minutes", int, 10080, "Committed offsets of empty groups expire after this."),
    Setting("offsets.retention.check.interval.ms", int, 600000, "How often offset expiry runs."),
    Setting("offset.metadata.max.bytes", int, 4096, "Largest commit metadata string."),
    Setting("group.min.session.timeout.ms", int, 6000, "Smallest session timeout a member may ask for."),
    Setting("group.max.session.timeout.ms", int, 1800000, "Largest session timeout a member may ask for."),
    Setting("group.initial.rebalance.delay.ms", int, 100,
            "Wait before the first rebalance of an empty group (Kafka: 3000; chosen by "
            "measurement with real clients, see README and docs/consumer-groups.md)."),
    Setting("group.max.size", int, 2147483647, "Most members in one group."),
    Setting("group.coordinator.rebalance.protocols", _list,
            ("classic", "consumer", "streams"),
            "Group protocols served: classic (JoinGroup), consumer (KIP-848) and streams "
            "(KIP-1071)."),
    Setting("group.consumer.heartbeat.interval.ms", int, 250,
            "Heartbeat interval the broker gives consumer-protocol members (Kafka: 5000; shorter "
            "so that a local group settles within a second, see docs/consumer-groups.md)."),
    Setting("group.consumer.min.heartbeat.interval.ms", int, 250,
            "Smallest group.consumer.heartbeat.interval.ms allowed (Kafka: 5000)."),
    Setting("group.consumer.max.heartbeat.interval.ms", int, 15000,
            "Largest group.consumer.heartbeat.interval.ms allowed."),
    Setting("group.consumer.session.timeout.ms", int, 45000,
            "A consumer-protocol member that does not heartbeat for this long is fenced."),
    Setting("group.consumer.min.session.timeout.ms", int, 45000,
            "Smallest group.consumer.session.timeout.ms allowed."),
    Setting("group.consumer.max.session.timeout.ms", int, 60000,
            "Largest group.consumer.session.timeout.ms allowed."),
    Setting("group.consumer.max.size", int, 2147483647, "Most members in one consumer group."),
    Setting("group.consumer.migration.policy", _str, "bidirectional",
            "Online migration between the classic and consumer protocols: bidirectional, "
            "upgrade, downgrade or disabled."),
    Setting("group.consumer.assignment.interval.ms", int, 0,
            "Least time between two target assignments of a consumer group (Kafka: 1000; 0 "
            "here: a joining member's partitions are computed at once; a few ms batch the "
            "joins of groups of hundreds, see docs/consumer-groups.md)."),
    Setting("group.consumer.min.assignment.interval.ms", int, 0,
            "Smallest group.consumer.assignment.interval.ms allowed."),
    Setting("group.consumer.max.assignment.interval.ms", int, 15000,
            "Largest group.consumer.assignment.interval.ms allowed."),
    Setting("group.consumer.assignors", _assignors, ("uniform", "range"),
            "Server-side assignors of consumer groups; the first is the default."),
    Setting("group.streams.heartbeat.interval.ms", int, 250,
            "Heartbeat interval the broker gives streams-group members (Kafka: 5000; shorter "
            "so that a local Kafka Streams application settles within a second, see "
            "docs/streams-groups.md)."),
    Setting("group.streams.min.heartbeat.interval.ms", int, 250,
            "Smallest streams.heartbeat.interval.ms a streams group may set (Kafka: 5000)."),
    Setting("group.streams.max.heartbeat.interval.ms", int, 15000,
            "Largest streams.heartbeat.interval.ms a streams group may set."),
    Setting("group.streams.session.timeout.ms", int, 45000,
            "A streams-group member that does not heartbeat for this long is fenced."),
    Setting("group.streams.min.session.timeout.ms", int, 45000,
            "Smallest streams.session.timeout.ms a streams group may set."),
    Setting("group.streams.max.session.timeout.ms", int, 60000,
            "Largest streams.session.timeout.ms a streams group may set."),
    Setting("group.streams.max.size", int, 2147483647, "Most members in one streams group."),
    Setting("group.streams.num.standby.replicas", int, 0,
            "Standby replicas of each stateful task of a streams group."),
    Setting("group.streams.max.standby.replicas", int, 2,
            "Largest streams.num.standby.replicas a streams group may set."),
    Setting("group.streams.initial.rebalance.delay.ms", int, 100,
            "Wait before the first task assignment of an empty streams group, so that "
            "instances starting together share one (Kafka: 3000; shorter for a local "
            "application, see docs/streams-groups.md)."),
    Setting("group.streams.assignment.interval.ms", int, 0,
            "Least time between two target assignments of a streams group (Kafka: 1000; 0 "
            "here: a joining member's tasks are computed at once)."),
    Setting("group.streams.min.assignment.interval.ms", int, 0,
            "Smallest streams.assignment.interval.ms a streams group may set."),
    Setting("group.streams.max.assignment.interval.ms", int, 15000,
            "Largest streams.assignment.interval.ms a streams group may set."),
    Setting("group.share.assignment.interval.ms", int, 0,
            "Least time between two target assignments of a share group (Kafka: 1000; 0 "
            "here: a joining member's partitions are computed at once); within it a member "
            "keeps the last target until a heartbeat after the interval."),
    Setting("group.share.min.assignment.interval.ms", int, 0,
            "Smallest share.assignment.interval.ms a share group may set."),
    Setting("group.share.max.assignment.interval.ms", int, 15000,
            "Largest share.assignment.interval.ms a share group may set."),
    Setting("group.share.heartbeat.interval.ms", int, 5000,
            "Heartbeat interval the broker gives share-group members."),
    Setting("group.share.min.heartbeat.interval.ms", int, 5000,
            "Smallest share.heartbeat.interval.ms a share group may set."),
    Setting("group.share.max.heartbeat.interval.ms", int, 15000,
            "Largest share.heartbeat.interval.ms a share group may set."),
    Setting("group.share.session.timeout.ms", int, 45000,
            "A share-group member that does not heartbeat for this long is fenced."),
    Setting("group.share.min.session.timeout.ms", int, 45000,
            "Smallest share.session.timeout.ms a share group may set."),
    Setting("group.share.max.session.timeout.ms", int, 60000,
            "Largest share.session.timeout.ms a share group may set."),
    Setting("group.share.max.size", int, 200, "Most members in one share group."),
    Setting("group.share.record.lock.duration.ms", int, 30000,
            "How long a share consumer holds the records it acquired before they are "
            "delivered to another."),
    Setting("group.share.min.record.lock.duration.ms", int, 15000,
            "Smallest share.record.lock.duration.ms a share group may set."),
    Setting("group.share.max.record.lock.duration.ms", int, 60000,
            "Largest share.record.lock.duration.ms a share group may set."),
    Setting("group.share.delivery.count.limit", int, 5,
            "Deliveries of a record to share consumers before it is archived."),
    Setting("group.share.min.delivery.count.limit", int, 2,
            "Smallest share.delivery.count.limit a share group may set."),
    Setting("group.share.max.delivery.count.limit", int, 10,
            "Largest share.delivery.count.limit a share group may set."),
    Setting("group.share.partition.max.record.locks", int, 2000,
            "Most in-flight records (acquired or waiting for redelivery) per share partition."),
    Setting("group.share.min.partition.max.record.locks", int, 100,
            "Smallest share.partition.max.record.locks a share group may set."),
    Setting("group.share.max.partition.max.record.locks", int, 4000,
            "Largest share.partition.max.record.locks a share group may set."),
    Setting("group.share.max.share.sessions", int, 2000,
            "Most share sessions (one per share consumer) the broker keeps."),
    Setting("share.coordinator.state.topic.num.partitions", int, 50,
            "Partitions of __share_group_state, where share-partition state is stored."),
    Setting("share.coordinator.state.topic.replication.factor", int, 3,
            "Replication factor of __share_group_state (at most the nodes served)."),
    Setting("transaction.state.log.num.partitions", int, 50,
            "Partitions of __transaction_state = transaction coordinator shards."),
    Setting("transaction.state.log.segment.bytes", int, 262144,
            "segment.bytes of __transaction_state when it is created (Kafka: 100 MiB), for "
            "the same reason as offsets.topic.segment.bytes."),
    Setting("transaction.max.timeout.ms", int, 900000,
            "Largest transaction.timeout.ms a producer may ask for."),
    Setting("transaction.abort.timed.out.transaction.cleanup.interval.ms", int, 10000,
            "How often transactions past their timeout are looked for and aborted."),
    Setting("transactional.id.expiration.ms", int, 604800000,
            "A transactional id without a transaction for this long is forgotten."),
    Setting("transaction.remove.expired.transaction.cleanup.interval.ms", int, 3600000,
            "How often expired transactional ids are removed."),
    Setting("transaction.partition.verification.enable", _bool, True,
            "Check with the transaction coordinator that a partition is part of the "
            "transaction before appending transactional batches (KIP-890)."),
    Setting("metrics.port", int, 9404, "HTTP port for /metrics, /health and /ready (0 = off)."),
    Setting("metrics.host", _str, "127.0.0.1", "Address the metrics endpoint binds."),
    Setting("metrics.write.enable", _bool_or_auto, "auto",
            "Serve the metrics endpoint's write requests, POST/DELETE /faults and POST "
            "/nodes/<id>/down|up: true, false, or auto = only when metrics.host is a loopback "
            "address (the embedded broker and the pytest plugin set true)."),
    Setting("metrics.allowed.hosts", _list, (),
            "Host names, besides addresses, localhost, metrics.host and the advertised "
            "listeners' hosts, by which the console, its API, /faults and /nodes may be reached "
            "(a proxy's or container's name); others are refused against DNS rebinding."),
    Setting("console.enable", _bool, True,
            "Serve the web console (broker/console) at / on the metrics endpoint."),
    Setting("console.actions.enable", _bool, False,
            "Let the console act (produce a test message, reset a group's offsets, delete a "
            "group, create or delete a topic); read-only when false."),
    Setting("log.format", _str, "auto", "auto (console on a terminal, JSON otherwise), console or json."),
    Setting("log.level", _str, "info", "debug, info, warning or error."),
]}


#: settings whose values are secrets: never repeated in an error message or a log line
SECRET_SETTINGS = {"sasl.jaas.config", "sasl.scram.bootstrap.credentials",
                   "delegation.token.secret.key"}
#: settings a listener may override as listener.name.<listener>.<name>; those in
#: MECHANISM_SETTINGS only per mechanism, as listener.name.<listener>.<mechanism>.<name>
LISTENER_SETTINGS = {*(name for name in SETTINGS if name.startswith("ssl.")),
                     "sasl.enabled.mechanisms", "sasl.server.max.receive.size",
                     "connections.max.reauth.ms"}
MECHANISM_SETTINGS = {"sasl.jaas.config", "connections.max.reauth.ms"}
_LISTENER_NAME = re.compile(r"listener\.name\.([^.]+)\.(.+)")
_MECHANISM_PREFIX = re.compile(r"(gssapi|plain|scram-sha-256|scram-sha-512|oauthbearer)\.(.+)")


#: Kafka 4.3.1's broker configs with their types and defaults (tools/gen_broker_configs.py
#: writes it from a real Kafka; broker_configs.py describes them)
KAFKA_CATALOGUE = pathlib.Path(__file__).with_name("kafka_broker_configs.json")
_kafka_configs: dict[str, list] | None = None


#: Kafka's settings in coarser units, in its order of precedence after the millisecond one
COARSER_UNITS = {
    "log.retention.ms": (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "log.roll.ms": (("log.roll.hours", 3_600_000),),
}


def kafka_configs() -> dict[str, list]:
    """Kafka's broker configs, name -> [type, read only, sensitive, default], read once, the
    first time they are needed: a name that is not one of ours, DescribeConfigs, and at start
    the cluster-wide min.insync.replicas Kafka's controller writes (broker_configs.py; about
    0.5 ms)."""
    global _kafka_configs
    if _kafka_configs is None:
        import json  # noqa: PLC0415 - only when Kafka's catalogue is needed
        _kafka_configs = json.loads(KAFKA_CATALOGUE.read_text())["configs"]
    return _kafka_configs


#: Kafka settings its broker-config catalogue does not list: its authorizer's own (the
#: StandardAuthorizer reads them from server.properties), with the same defaults as here
KAFKA_AUTHORIZER_SETTINGS = {"super.users", "allow.everyone.if.no.acl.found"}


def kafka_default(name: str):
    """Kafka's default of this broker's setting ``name``, from Kafka's catalogue, parsed as the
    setting parses values; this broker's own where Kafka's is derived (null in the catalogue,
    as log.retention.ms from log.retention.hours). KeyError: Kafka has no such setting
    (metrics.port, console.enable, ...)."""
    setting = SETTINGS[name]
    if name in KAFKA_AUTHORIZER_SETTINGS:
        return setting.default
    literal = kafka_configs()[name][3]
    if literal is None:
        return setting.default
    try:
        return setting.parse(literal)
    except (TypeError, ValueError):
        return literal


def listener_setting_key(name: str):
    """'listener.name.sasl_plaintext.plain.sasl.jaas.config' -> ('SASL_PLAINTEXT', 'PLAIN',
    'sasl.jaas.config'); None for a name that is no per-listener setting."""
    match = _LISTENER_NAME.fullmatch(name)
    if match is None:
        return None
    listener, rest = match[1].upper(), match[2]
    if rest in LISTENER_SETTINGS:
        return listener, None, rest
    mech = _MECHANISM_PREFIX.fullmatch(rest)
    if mech is not None and mech[2] in MECHANISM_SETTINGS:
        return listener, mech[1].upper(), mech[2]
    return None


# environment names that Kafka's container images use for a different setting name
ENV_ALIASES = {"KAFKA_LOG_DIR": "log.dirs", "KAFKA_DATA_DIR": "log.dirs"}


def parse_listeners(text: str) -> list[tuple[str, str, int]]:
    """'NAME://host:port,...' -> [(name, host, port)]."""
    out = []
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, address = item.partition("://")
        if not sep:
            name, address = "PLAINTEXT", item
        # the name is parsed apart: urlsplit takes no "_" in a scheme (SASL_PLAINTEXT://...)
        parts = urlsplit("listener://" + address)
        try:
            port = parts.port
        except ValueError:
            port = None
        if port is None:
            raise ConfigError(f"listener {item!r} has no port")
        out.append((name.strip().upper(), parts.hostname or "", port))
    if not out:
        raise ConfigError("no listeners configured")
    names = [n for n, _, _ in out]
    if len(set(names)) != len(names):
        raise ConfigError(f"listener names must be unique: {text!r}")
    return out


def parse_security_protocol_map(text: str) -> dict[str, str]:
    """'INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL' -> {listener name: security protocol}."""
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"listener.security.protocol.map entry {item!r} is not NAME:PROTOCOL")
        protocol = protocol.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"No enum constant for security protocol {protocol!r} in "
                              f"listener.security.protocol.map (one of {', '.join(SECURITY_PROTOCOLS)})")
        out[name.strip().upper()] = protocol
    return out


#: nodes one process may serve (each binds every listener)
MAX_NODES = 64


class BrokerConfig:
    """Resolved settings; read with ``config["log.retention.ms"]``."""

    def __init__(self, values: dict[str, object] | None = None) -> None:
        self.values = {name: s.default for name, s in SETTINGS.items()}
        #: (listener, mechanism or None, setting) -> value, from listener.name.<l>.[<mech>.]<name>
        self.listener_values: dict[tuple, object] = {}
        #: Kafka's own broker configs this broker has no use for (num.network.threads, ...):
        #: accepted, so a Kafka server.properties starts it, and described as set, as on Kafka;
        #: name -> value as given
        self.kafka_only: dict[str, str] = {}
        #: those of them that give one of ours in other units (COARSER_UNITS)
        self.kafka_applied: set[str] = set()
        for name, value in (values or {}).items():
            self.set(name, value)
        self._apply_coarser_units(values or {})
        self.validate()

    def _apply_coarser_units(self, given: dict) -> None:
        """Kafka's log.retention.minutes/hours and log.roll.hours give the millisecond setting
        when it is not given itself (a negative retention is unlimited), as in KafkaConfig."""
        for target, fallbacks in COARSER_UNITS.items():
            if target in given:
                continue
            for name, factor in fallbacks:
                if name in self.kafka_only:
                    try:
                        amount = int(self.kafka_only[name])
                    except ValueError:
                        raise ConfigError(f"bad value {self.kafka_only[name]!r} for {name}: "
                                          "not an integer") from None
                    self.values[target] = -1 if amount < 0 else amount * factor
                    self.kafka_applied.add(name)
                    break

    def set(self, name: str, value) -> None:
        setting = SETTINGS.get(name)
        key = None
        if setting is None:
            key = listener_setting_key(name)
            if key is None:
                if name in kafka_configs():
                    self.kafka_only[name] = "" if value is None else str(value)
                    return
                raise ConfigError(f"unknown setting {name!r} (see --help for the list)")
            setting = SETTINGS[key[2]]
        try:
            parsed = setting.parse(value)
        except (TypeError, ValueError) as exc:
            if setting.name in SECRET_SETTINGS:
                raise ConfigError(f"bad value for {name}") from None
            raise ConfigError(f"bad value {value!r} for {name}: {exc}") from None
        if key is None:
            self.values[name] = parsed
        else:
            self.listener_values[key] = parsed

    def listener_get(self, listener: str, name: str, mechanism: str | None = None):
        """A setting as a listener (and mechanism) sees it: its listener.name.<l>.<mech>.
        override, else its listener.name.<l>. one, else the broker-wide value."""
        value = self.listener_values.get((listener, mechanism, name))
        if value is None and mechanism is not None:
            value = self.listener_values.get((listener, None, name))
        return self.values[name] if value is None else value

    def __getitem__(self, name: str):
        return self.values[name]

    def validate(self) -> None:
        self.listeners = parse_listeners(self["listeners"])
        advertised = self["advertised.listeners"]
        self.advertised = {n: (h, p) for n, h, p in parse_listeners(advertised)} if advertised \
            else {}
        for name, host, port in self.listeners:
            if name not in self.advertised:
                self.advertised[name] = (host if host not in ("", "0.0.0.0", "::") else
                                         "localhost", port)
        unknown = set(self.advertised) - {n for n, _, _ in self.listeners}
        if unknown:
            raise ConfigError(f"advertised.listeners names no listener: {sorted(unknown)}")
        protocols = parse_security_protocol_map(self["listener.security.protocol.map"])
        #: listener name -> its security protocol, as Kafka's listener.security.protocol.map
        self.security_protocols = {}
        for name, _host, _port in self.listeners:
            if name not in protocols:
                raise ConfigError(f"No security protocol defined for listener {name} "
                                  "(add it to listener.security.protocol.map)")
            self.security_protocols[name] = protocols[name]
        self._validate_listener_settings()
        authorizer = self["authorizer.class.name"].strip()
        if authorizer and authorizer != STANDARD_AUTHORIZER:
            raise ConfigError(f"authorizer.class.name {authorizer!r} is not supported: the only "
                              f"authorizer is {STANDARD_AUTHORIZER} (or empty for none)")
        if self["sasl.scram.bootstrap.credentials"] or any(
                p in SASL_PROTOCOLS for p in self.security_protocols.values()):
            # the SASL mechanisms are loaded only where they are used
            from broker.security.sasl import validate_sasl_config  # noqa: PLC0415
            validate_sasl_config(self)
        if self["log.message.timestamp.type"] not in ("CreateTime", "LogAppendTime"):
            raise ConfigError("log.message.timestamp.type must be CreateTime or LogAppendTime")
        if self["group.min.session.timeout.ms"] > self["group.max.session.timeout.ms"]:
            raise ConfigError("group.min.session.timeout.ms exceeds group.max.session.timeout.ms")
        for what in ("heartbeat.interval", "session.timeout", "assignment.interval"):
            low, value, high = (self[f"group.consumer.{x}{what}.ms"] for x in ("min.", "", "max."))
            if not low <= value <= high:
                raise ConfigError(f"group.consumer.{what}.ms must be between "
                                  f"group.consumer.min.{what}.ms and group.consumer.max.{what}.ms")
        if self["group.consumer.heartbeat.interval.ms"] >= \
                self["group.consumer.session.timeout.ms"]:
            raise ConfigError("group.consumer.heartbeat.interval.ms must be less than "
                              "group.consumer.session.timeout.ms")
        self._validate_streams_group_settings()
        if self["group.consumer.migration.policy"].lower() not in (
                "bidirectional", "upgrade", "downgrade", "disabled"):
            raise ConfigError("group.consumer.migration.policy must be bidirectional, upgrade, "
                              "downgrade or disabled")
        unknown = set(self["group.coordinator.rebalance.protocols"]) - {
            "classic", "consumer", "streams"}
        if unknown or "classic" not in self["group.coordinator.rebalance.protocols"]:
            raise ConfigError("group.coordinator.rebalance.protocols must include classic and "
                              f"may add consumer and streams; unknown: {sorted(unknown)}")
        for name in ("offsets.topic.segment.bytes", "transaction.state.log.segment.bytes"):
            if self[name] < 14:  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0
                raise ConfigError(f"{name} must be at least 14, got {self[name]}")
        if not 1 <= self["nodes"] <= MAX_NODES:
            raise ConfigError(f"nodes must be between 1 and {MAX_NODES}, got {self['nodes']}")
        for name in ("num.partitions", "offsets.topic.num.partitions",
                     "transaction.state.log.num.partitions", "transaction.max.timeout.ms",
                     "socket.request.max.bytes",
                     "message.max.bytes", "queued.max.requests", "ssl.handshake.timeout.ms",
                     "quota.window.num", "quota.window.size.seconds"):
            if self[name] < 1:
                raise ConfigError(f"{name} must be at least 1, got {self[name]}")
        for name in ("max.connections", "max.connections.per.ip",
                     "max.incremental.fetch.session.cache.slots"):
            if self[name] < 0:
                raise ConfigError(f"{name} must be at least 0, got {self[name]}")
        if self["max.connections.per.ip"] == 0 and not self["max.connections.per.ip.overrides"]:
            raise ConfigError("max.connections.per.ip can be set to zero only if "
                              "max.connections.per.ip.overrides is set")
        queued = self["queued.max.request.bytes"]
        if 0 < queued < self["socket.request.max.bytes"]:
            raise ConfigError("queued.max.request.bytes must be larger or equal to "
                              "socket.request.max.bytes")
        if self["fetch.max.bytes"] < 1024:  # Kafka's atLeast(1024)
            raise ConfigError(f"fetch.max.bytes must be at least 1024, got "
                              f"{self['fetch.max.bytes']}")
        if self["queued.max.response.bytes"] == 0:
            raise ConfigError("queued.max.response.bytes must be positive, or -1 for unlimited")


    def _validate_streams_group_settings(self) -> None:
        """Kafka's GroupCoordinatorConfig checks of the group.streams.* settings."""
        for what in ("heartbeat.interval.ms", "session.timeout.ms", "assignment.interval.ms"):
            low, high = self[f"group.streams.min.{what}"], self[f"group.streams.max.{what}"]
            value = self[f"group.streams.{what}"]
            if high < low:
                raise ConfigError(f"group.streams.max.{what} must be greater than or equal to "
                                  f"group.streams.min.{what}")
            if value < low:
                raise ConfigError(f"group.streams.{what} must be greater than or equal to "
                                  f"group.streams.min.{what}")
            if value > high:
                raise ConfigError(f"group.streams.{what} must be less than or equal to "
                                  f"group.streams.max.{what}")
        if self["group.streams.heartbeat.interval.ms"] >= \
                self["group.streams.session.timeout.ms"]:
            raise ConfigError("group.streams.heartbeat.interval.ms must be less than "
                              "group.streams.session.timeout.ms")
        if self["group.streams.num.standby.replicas"] > \
                self["group.streams.max.standby.replicas"]:
            raise ConfigError("group.streams.num.standby.replicas must be less than or equal to "
                              "group.streams.max.standby.replicas")

    def _validate_listener_settings(self) -> None:
        """listener.name.<l>.* names a configured listener; the ssl.* settings of every TLS
        listener are sound (files are read when the listener starts)."""
        names = {n for n, _, _ in self.listeners}
        for listener, mechanism, setting in self.listener_values:
            if listener not in names:
                given = f"{mechanism.lower()}.{setting}" if mechanism else setting
                raise ConfigError(f"listener.name.{listener.lower()}.{given} names no listener "
                                  f"(listeners: {', '.join(sorted(n.lower() for n in names))})")
        for name, protocol in self.security_protocols.items():
            if protocol in TLS_PROTOCOLS:
                from broker.security import tls  # only with a TLS listener
                try:
                    tls.check_settings(tls.listener_ssl_settings(self, name))
                except ConfigError as exc:
                    raise ConfigError(f"listener {name}: {exc}") from None


def read_config_file(path: str) -> dict[str, object]:
    """A Kafka-style .properties file or a TOML file (flat keys or one [broker] table)."""
    text = pathlib.Path(path).read_text()
    if path.endswith(".toml"):
        import tomllib  # only for a .toml file
        data = tomllib.loads(text)
        data = data.get("broker", data)
        return {k: v for k, v in data.items()}
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise ConfigError(f"{path}: line {line!r} is not name=value")
        out[key.strip()] = value.strip()
    return out


def _image_config_name(rest: str) -> str:
    """A config name from what follows KAFKA_ in a Kafka-image variable, as the image reads it:
    "_" is ".", "__" is "_" and "___" is "-" (NUM_NETWORK_THREADS -> num.network.threads)."""
    return rest.lower().replace("___", "\0").replace("__", "\1").replace("_", ".").replace(
        "\0", "-").replace("\1", "_")


def _read_kafka_only(environ, out: dict) -> None:
    """Kafka's own configs that this broker has no setting for, from Kafka-image variables
    (KAFKA_NUM_NETWORK_THREADS, KAFKA_LOG_RETENTION_HOURS): taken as a server.properties line
    would be (accepted, described as set, log.retention.hours applied). Other KAFKA_ variables
    (KAFKA_HEAP_OPTS, KAFKA_JMX_OPTS) name no config and are not read as one. Kafka's catalogue
    is read only when such a variable is there."""
    candidates = {}
    for env_name, value in environ.items():
        if not env_name.startswith("KAFKA_") or env_name in ENV_ALIASES \
                or env_name.startswith("KAFKA_LISTENER_NAME_"):
            continue
        name = _image_config_name(env_name[6:])
        if name not in SETTINGS:
            candidates[name] = value
    if candidates:
        catalogue = kafka_configs()
        out.update((name, value) for name, value in candidates.items() if name in catalogue)


def read_environment(environ=os.environ) -> dict[str, object]:
    """KBROKER_X_Y / KAFKA_X_Y -> x.y for every known setting (and a few image aliases).

    Kafka-image names come first so that a KBROKER_ name always wins over its KAFKA_ twin.
    """
    out = {}
    for env_name, name in ENV_ALIASES.items():
        if env_name in environ:
            out[name] = environ[env_name]
    # the JVM option Kafka's start scripts pass on: the JAAS file of the SASL listeners
    match = re.search(r"-Djava\.security\.auth\.login\.config=(\"[^\"]*\"|\S+)",
                      environ.get("KAFKA_OPTS", ""))
    if match:
        out["java.security.auth.login.config"] = match[1].strip('"')
    _read_kafka_only(environ, out)
    for prefix in ("KAFKA_", "KBROKER_"):
        for name in SETTINGS:
            value = environ.get(prefix + name.upper().replace(".", "_"))
            if value is not None:
                out[name] = value
        # per-listener settings, named as Kafka's container images name them
        # (_image_config_name: KAFKA_LISTENER_NAME_SASL__PLAINTEXT_PLAIN_SASL_JAAS_CONFIG);
        # else a listener name with single underscores, the setting matched at the end
        # (KAFKA_LISTENER_NAME_SSL_INTERNAL_SSL_KEYSTORE_LOCATION)
        start = prefix + "LISTENER_NAME_"
        for env_name, value in environ.items():
            if not env_name.startswith(start):
                continue
            name = _image_config_name(env_name[len(prefix):])
            if listener_setting_key(name) is not None:
                out[name] = value
                continue
            rest = env_name[len(start):]
            for setting in sorted(LISTENER_SETTINGS, key=len, reverse=True):
                suffix = "_" + setting.upper().replace(".", "_")
                if rest.endswith(suffix) and len(rest) > len(suffix):
                    out[f"listener.name.{rest[:-len(suffix)].lower()}.{setting}"] = value
                    break
    return out
