"""The broker: wires config, topics, the group coordinator, the timer and the server together."""
from __future__ import annotations

import asyncio
import os
import time

import structlog

from . import apis
from .config import BrokerConfig
from .coordinator.common.storage import begin_loading_all
from .partitions.fetch_purgatory import FetchPurgatory
from .coordinator.group.storage import OFFSETS_TOPIC_CONFIGS, build_coordinator, load_all
from .coordinator.transaction.producer_ids import ProducerIdManager
from .security import SASL_PROTOCOLS, SCRAM_CREDENTIALS_FILE
from .http.server import HttpServer
from .metrics import Metrics
from .network.socket_server import Server
from .coordinator.group.group_configs import GroupConfigs
from .cluster import Cluster
from .features import Features
from .client_quotas import ClientQuotas
from .timer import AsyncioTimerDriver
from .topics import OFFSETS_TOPIC, SHARE_STATE_TOPIC, TRANSACTION_STATE_TOPIC, TopicManager
from .coordinator.transaction.storage import (TRANSACTION_STATE_CONFIGS,
                                              build_transaction_coordinator,
                                              load_all as load_transactions)

log = structlog.get_logger("broker")


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.node_id = config["node.id"]
        #: the node ids this process serves and where partitions live on them
        self.cluster = Cluster(self.node_id, config["nodes"])
        self.cluster_id = config["cluster.id"]
        self.debug = config["log.level"] == "debug"
        self.clock = wall_clock_ms
        self.metrics = Metrics(self)
        #: None without authorizer.class.name: every request is allowed (one attribute check)
        self.authorizer = authorization(config)
        self.timer_driver = AsyncioTimerDriver(self.clock)
        self.timer = self.timer_driver.timer
        self.topics = TopicManager(config, config["log.dirs"], self.cluster)
        self.topics.logs.set_memory_budget(config["log.memory.max.bytes"])
        #: the request faults armed (broker/faults.py): all a request looks at, so that module
        #: is loaded at the first use of ``faults`` (the HTTP port's /faults, the test clients)
        self.armed_faults: list = []
        self._faults = None
        #: SCRAM users (AlterUserScramCredentials), and what every SASL listener serves: read
        #: at start when there is something to read (a credentials file, bootstrap credentials)
        #: so a bad one stops the start, else made at first use (broker/security/scram.py)
        self._scram_credentials = None
        data_dir = config["log.dirs"]
        if config["sasl.scram.bootstrap.credentials"] or (
                data_dir and os.path.exists(os.path.join(data_dir, SCRAM_CREDENTIALS_FILE))):
            self._scram_credentials = self._read_scram_credentials()
        self._delegation_tokens = None
        self.sasl = sasl_servers(self)
        #: cluster features (UpdateFeatures, ApiVersions)
        self.features = Features(config, config["log.dirs"], self.node_id, apis.HANDLERS)
        #: quotas of users, client ids and IPs (AlterClientQuotas) and their rates
        self.client_quotas = ClientQuotas(config["log.dirs"], config["quota.window.num"],
                                          config["quota.window.size.seconds"])
        self.server = Server(self)
        self.producer_ids = ProducerIdManager(config["log.dirs"])
        self.ready = False
        self.fetches = FetchPurgatory(self)
        #: fetch sessions (KIP-227), None until the first Fetch that may open one
        #: (``fetch_sessions``)
        self.fetch_session_cache = None
        self.coordinator = build_coordinator(self)
        if self.authorizer is not None:
            self.coordinator.topic_filter = self.authorizer.describable_topics
        self.coordinator.stats.on_group_stable = self.metrics.group_stable
        self.group_configs = GroupConfigs(config, config["log.dirs"])
        self.coordinator.set_share_listener(None, self.group_configs.get)
        #: the share partitions this broker leads and their share sessions (KIP-932,
        #: share/leader.py), None until made with the share coordinator (``shares``)
        self.share_leader = None
        self._share_coordinator = None
        self.server.add_disconnect_listener(self._share_connection_closed)
        self.transactions = build_transaction_coordinator(self)
        #: the HTTP port: /metrics, /health, /ready, the console, /faults and /nodes
        self.http = HttpServer(self)

    # -- share groups (KIP-932): the leader of their share partitions and the share coordinator
    # (share-partition state in __share_group_state) are made together at start when that topic
    # exists, else at their first use, so a broker without share groups never loads them

    @property
    def shares(self):
        """The share partitions this broker leads and their share sessions (share/leader.py)."""
        if self.share_leader is None:
            self._make_share_groups()
        return self.share_leader

    @property
    def share_coordinator(self):
        """The share coordinator (broker/coordinator/share_state/)."""
        if self._share_coordinator is None:
            self._make_share_groups()
        return self._share_coordinator

    def _make_share_groups(self) -> None:
        from .coordinator.group.share.leader import ShareLeader
        from .coordinator.share_state import storage as share_state_topic
        leader = self.share_leader = ShareLeader(self.config, self.clock, self.timer)
        leader.on_available = self._share_records_available
        leader.group_config = self.group_configs.get
        # the share groups' managers tell it of members leaving and groups deleted: before it
        # existed, no member held a record of it
        self.coordinator.set_share_listener(leader, self.group_configs.get)
        self._share_coordinator = share_state_topic.build(self)
        share_state_topic.load(self)

    def _share_connection_closed(self, conn) -> None:
        if self.share_leader is not None:
            self.share_leader.connection_closed(conn)

    @property
    def scram_credentials(self):
        """The SCRAM credential store, read at start or at its first use (see __init__)."""
        if self._scram_credentials is None:
            self._scram_credentials = self._read_scram_credentials()
        return self._scram_credentials

    def _read_scram_credentials(self):
        from .security.scram import ScramCredentialStore
        store = ScramCredentialStore(self.config["log.dirs"])
        added = store.bootstrap(self.config["sasl.scram.bootstrap.credentials"])
        if added:
            log.info("SCRAM credentials added from sasl.scram.bootstrap.credentials", count=added)
        return store

    @property
    def fetch_sessions(self):
        """The fetch session cache (broker/partitions/fetch_sessions.py), on the broker's clock
        in milliseconds, made at its first use."""
        if self.fetch_session_cache is None:
            from .partitions.fetch_sessions import MIN_FETCH_PARTITION_BYTES, FetchSessionCache
            config = self.config
            self.fetch_session_cache = FetchSessionCache(
                config["max.incremental.fetch.session.cache.slots"], clock=self.clock,
                max_partitions=config["socket.request.max.bytes"] // MIN_FETCH_PARTITION_BYTES)
        return self.fetch_session_cache

    @property
    def faults(self):
        """Fault injection (broker/faults.py), made at its first use."""
        if self._faults is None:
            from .faults import Faults
            self._faults = Faults(self)
        return self._faults

    @property
    def delegation_tokens(self):
        """Delegation tokens (KIP-48, on with delegation.token.secret.key), made at first use:
        at start with a SASL listener (a token login), else at the first token API, so a broker
        without either never loads broker/security/delegation_tokens.py."""
        if self._delegation_tokens is None:
            from .security.delegation_tokens import DelegationTokens
            self._delegation_tokens = DelegationTokens(self.config, self.clock)
        return self._delegation_tokens

    def advertised(self, listener: str, node: int | None = None) -> tuple[str, int]:
        """(host, port) clients should use for a node (this one by default) when connected via
        listener: the advertised port plus the node's index, or what it bound to port 0."""
        host, port = self.config.advertised[listener]
        index = 0 if node is None else node - self.node_id
        if port == 0:  # bound to an ephemeral port: advertise what we got
            return host, self.server.node_bound[(listener, self.node_id + index)][1]
        return host, port + index

    def _internal_replicas(self, setting: str) -> int:
        """An internal topic's replication factor: the setting, at most the nodes served."""
        return max(1, min(self.config[setting], len(self.cluster.node_ids)))

    async def start(self) -> None:
        self.timer_driver.start(asyncio.get_running_loop())
        self.topics.load()
        if self.topics.get(OFFSETS_TOPIC) is None:
            self.topics.create(OFFSETS_TOPIC, self.config["offsets.topic.num.partitions"],
                               dict(OFFSETS_TOPIC_CONFIGS, **{
                                   "segment.bytes": str(self.config["offsets.topic.segment.bytes"])}),
                               internal=True, replication_factor=self._internal_replicas(
                                   "offsets.topic.replication.factor"))
        if self.topics.get(TRANSACTION_STATE_TOPIC) is None:
            replicas = self._internal_replicas("transaction.state.log.replication.factor")
            self.topics.create(TRANSACTION_STATE_TOPIC,
                               self.config["transaction.state.log.num.partitions"],
                               dict(TRANSACTION_STATE_CONFIGS, **{
                                   "segment.bytes": str(
                                       self.config["transaction.state.log.segment.bytes"]),
                                   "min.insync.replicas": str(min(
                                       self.config["transaction.state.log.min.isr"], replicas))}),
                               internal=True, replication_factor=replicas)
        if self.topics.get(SHARE_STATE_TOPIC) is not None:  # created at its first write
            self._make_share_groups()
        self.producer_ids.at_least(self._max_producer_id() + 1)
        # every coordinator shard answers COORDINATOR_LOAD_IN_PROGRESS from the first request on,
        # until its partition is replayed
        begin_loading_all(self, self.coordinator.runtime, OFFSETS_TOPIC)
        begin_loading_all(self, self.transactions.runtime, TRANSACTION_STATE_TOPIC)
        await self.server.start()
        await self.http.serve()
        await load_all(self)
        await load_transactions(self)
        self._schedule_log_maintenance()
        self.ready = True
        log.info("broker started", node_id=self.node_id,
                 listeners={n: f"{h}:{p}" for n, (h, p) in self.server.bound.items()},
                 data_dir=self.config["log.dirs"] or "(in-memory)")
        unused = sorted(set(self.config.kafka_only) - self.config.kafka_applied)
        if unused:  # as Kafka warns of configs supplied but not used
            log.warning("Kafka settings accepted that have no effect on this broker",
                        settings=unused)

    def _schedule_log_maintenance(self) -> None:
        """Kafka's periodic log tasks: retention (log.retention.check.interval.ms), the log
        cleaner (log.cleaner.backoff.ms) and the flusher for flush.ms, run from the shared
        timer."""
        logs = self.topics.logs

        def retention() -> None:
            deleted = logs.apply_retention(self.clock())
            if deleted:
                log.info("retention deleted old log data", bytes=deleted)

        self._every(self.config["log.retention.check.interval.ms"], retention)
        if self.config["log.cleaner.enable"]:
            logs.start_cleaner(backoff_ms=self.config["log.cleaner.backoff.ms"],
                               dedupe_buffer_size=self.config["log.cleaner.dedupe.buffer.size"])
        flush_every = self.config["log.flush.interval.ms"]
        if flush_every > 0 and self.config["log.dirs"]:
            self._every(flush_every, lambda: logs.maybe_flush(self.clock()))

    def _every(self, interval_ms: int, task) -> None:
        """Run ``task`` every ``interval_ms`` on the shared timer."""
        def run() -> None:
            task()
            self.timer.call_later(interval_ms, run)
        self.timer.call_later(interval_ms, run)

    # -- nodes going down and up (several nodes in one process, broker/cluster.py)

    def node_down(self, node: int) -> dict:
        """Take ``node`` down as if its broker died: its listeners and connections close, the
        partitions it led move to other in-sync replicas at the next leader epoch, and with
        them the coordinators of their groups and transactional ids. Raises ValueError for a
        node that is not served, already down, or the last one up."""
        cluster = self._served(node)
        if node in cluster.down:
            raise ValueError(f"node {node} is already down")
        if len(cluster.alive()) == 1:
            raise ValueError(f"node {node} is the last node up")
        moved = cluster.node_down(node, self.topics.partitions())
        closed = self.server.node_down(node)
        if moved:
            self.topics.save()  # the leader epoch caches
        log.warning("node down", node=node, leaders_moved=moved, connections_closed=closed)
        return {"node": node, "state": "down", "leaders_moved": moved,
                "connections_closed": closed}

    def node_up(self, node: int) -> dict:
        """Bring ``node`` back: it listens on its ports again, rejoins the ISRs and leads the
        partitions that were left without a leader."""
        cluster = self._served(node)
        if node not in cluster.down:
            raise ValueError(f"node {node} is already up")
        self.server.node_up(node)
        moved = cluster.node_up(node, self.topics.partitions())
        if moved:
            self.topics.save()
        log.warning("node up", node=node, leaders_moved=moved)
        return {"node": node, "state": "up", "leaders_moved": moved}

    def _served(self, node: int):
        """The cluster, once ``node`` is known to be one of its nodes (else ValueError)."""
        if node not in self.cluster.node_ids:
            raise ValueError(f"node {node} is not one of the nodes served: "
                             f"{self.cluster.node_ids}")
        return self.cluster

    def nodes_state(self) -> list[dict]:
        """Each node with its state and how many partitions it leads."""
        leading: dict[int, int] = {}
        for p in self.topics.partitions():
            leading[p.leader] = leading.get(p.leader, 0) + 1
        return [{"node": n, "state": "down" if n in self.cluster.down else "up",
                 "leaders": leading.get(n, 0)} for n in self.cluster.node_ids]

    def _share_records_available(self, topic_id, partition: int) -> None:
        """Records of a share partition may be acquired again: parked ShareFetches retry."""
        name = self.topics.name_of(topic_id)
        if name is not None:
            self.fetches.partition_appended(name, partition)

    def on_topic_created(self, topic, reason: str) -> None:
        log.info("topic created", topic=topic.name, partitions=len(topic.partitions),
                 reason=reason)

    def delete_topic(self, name: str) -> None:
        topic = self.topics.get(name)
        partitions = range(len(topic.partitions)) if topic is not None else range(0)
        self.topics.delete(name)    # (empties topic.partitions)
        if topic is not None:   # groups' offsets and share groups' state of it go, as on Kafka
            self.coordinator.on_partitions_deleted(name, partitions)
            if self.share_leader is not None:
                self.share_leader.drop_topic_everywhere(topic.topic_id)
                self.share_coordinator.topic_deleted(topic.topic_id)
        log.info("topic deleted", topic=name)

    def _max_producer_id(self) -> int:
        highest = -1
        for topic in self.topics.topics.values():
            for partition in topic.partitions:
                if partition.producers.producers:
                    highest = max(highest, max(partition.producers.producers))
        return highest

    def allocate_producer_id(self) -> int:
        return self.producer_ids.generate()

    async def stop(self) -> None:
        self.ready = False
        self.server.stop_accepting()
        # answer what waits (long-poll fetches, joins and syncs) so in-flight requests finish
        self.fetches.complete_all()
        self.coordinator.close()
        self.transactions.close()
        await self.server.stop()
        await self.topics.logs.stop_cleaner()
        self.timer_driver.stop()
        self.http.stop()
        self.topics.close()
        log.info("broker stopped")


class NoSaslListeners:
    """What a broker without SASL listeners has instead of SaslServers (which loads the SASL
    mechanisms)."""

    listeners: dict = {}

    def authenticator(self, conn) -> None:
        return None


def authorization(config):
    """Authorization (broker/security/authorization.py) with authorizer.class.name, else None:
    a broker without an authorizer never loads it."""
    if not config["authorizer.class.name"].strip():
        return None
    from .security.authorization import Authorization
    return Authorization.from_config(config)


def sasl_servers(broker):
    config = broker.config
    if not any(p in SASL_PROTOCOLS for p in config.security_protocols.values()):
        return NoSaslListeners()
    from .security.sasl import SaslServers
    return SaslServers(config, broker.scram_credentials, broker.clock, broker.delegation_tokens)
