"""Prometheus series of the broker's metrics (broker/metrics.py): the plain counters of
:class:`~broker.metrics.Metrics` and :class:`~broker.metrics.Traffic`, and state read at scrape
time by :class:`BrokerStateCollector` — groups by state, members, rebalances, expired members,
delayed operations, log end offsets and consumer lag — so keeping them costs nothing between
scrapes. Scrapes run on the event loop, so they see a consistent state. Imported at the first
scrape (Metrics.registry), so prometheus-client is loaded only by a broker that is scraped.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

#: delayed-operation kinds always reported (0 when none wait), so dashboards see the series
DELAYED_KINDS = ("heartbeat", "join", "sync", "fetch")


def registry(metrics) -> CollectorRegistry:
    """A registry of every series of ``metrics`` (a broker's Metrics) and its broker's state."""
    r = CollectorRegistry()
    for collector in (MetricsCollector(metrics), BrokerStateCollector(metrics.broker),
                      TrafficCollector(metrics.traffic)):
        r.register(collector)
    return r


def exposition(r: CollectorRegistry) -> tuple[str, bytes]:
    return CONTENT_TYPE_LATEST, generate_latest(r)


def counter_family(counts, name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
    """A labelled counter from a Counts, each series with its ``_created`` time."""
    family = CounterMetricFamily(name, doc, labels=labels)
    for key, n in list(counts.values.items()):
        family.add_metric(list(key), n, created=counts.created[key])
    return family


def histogram_buckets(bounds, counts) -> list[tuple[str, float]]:
    """Cumulative (le, count) pairs from counts per bound (+Inf last)."""
    cumulative, running = [], 0
    for bound, n in zip([*bounds, float("inf")], counts):
        running += n
        cumulative.append((floatToGoString(bound), running))
    return cumulative


def _sessions(broker, what: str) -> int:
    cache = getattr(broker, "fetch_session_cache", None)   # None before the first Fetch
    return 0 if cache is None else getattr(cache, what)


def _value(obj, name: str, default=0):
    """A stats value that may be a property or a method on the coordinator."""
    v = getattr(obj, name, default)
    return v() if callable(v) else v


def _answer_bytes_held(broker) -> int:
    """The network layer's answers not yet taken by the sockets (broker/network/memory_pool.py)."""
    server = getattr(broker, "server", None)
    return 0 if server is None else server.answer_budget.used


class BrokerStateCollector:
    """Series computed from the broker's state when /metrics is scraped."""

    def __init__(self, broker) -> None:
        self.broker = broker

    def describe(self):
        return []  # names are fixed; nothing to check at registration

    def collect(self):
        broker = self.broker
        coordinator = getattr(broker, "coordinator", None)
        yield from self._coordinator(coordinator)
        yield self._delayed(coordinator)
        yield from self._logs_and_lag(coordinator)
        quotas = getattr(broker, "client_quotas", None)
        if quotas is not None:
            yield from self._quotas(quotas)

    #: Kafka's quota sensors (kafka.server:type=Produce|Fetch|Request, user, client-id): the
    #: measured rate of each quota entity that has one
    _QUOTA_RATES = (("Produce", "kafka_server_produce_byte_rate",
                     "Bytes per second produced under a producer_byte_rate quota."),
                    ("Fetch", "kafka_server_fetch_byte_rate",
                     "Bytes per second fetched under a consumer_byte_rate quota."),
                    ("Request", "kafka_server_request_time",
                     "Percentage of a request thread's time used under a request_percentage "
                     "quota."))

    def _quotas(self, quotas):
        now = self.broker.clock()
        throttle = CounterMetricFamily(
            "kafka_server_throttle_time_ms",
            "Throttle time owed by clients over a quota, by quota type (Kafka's throttle-time).",
            labels=["type", "user", "client_id"])
        for manager, (kind, name, doc) in zip(quotas.managers(), self._QUOTA_RATES):
            rates = GaugeMetricFamily(name, doc, labels=["user", "client_id"])
            for (user, client_id), sensor in list(manager.sensors.items()):
                rates.add_metric([user, client_id], sensor.rate.rate(now))
                throttle.add_metric([kind, user, client_id], sensor.throttle_ms_total)
            yield rates
        for (user, client_id), sensor in list(quotas.mutation.sensors.items()):
            throttle.add_metric(["ControllerMutation", user, client_id], sensor.throttle_ms_total)
        yield throttle

    def _coordinator(self, coordinator):
        groups = GaugeMetricFamily("kafka_coordinator_groups",
                                   "Consumer groups known to the coordinator, by state.",
                                   labels=["state"])
        members = GaugeMetricFamily("kafka_coordinator_members",
                                    "Members of all groups known to the coordinator.")
        group_members = GaugeMetricFamily("kafka_group_members", "Members of each group.",
                                          labels=["group"])
        generation = GaugeMetricFamily(
            "kafka_group_generation",
            "Current generation id of each group (a consumer group's group epoch).",
            labels=["group"])
        rebalances = CounterMetricFamily(
            "kafka_coordinator_rebalances",
            "Rebalances completed with members (each one is a new generation).")
        started = CounterMetricFamily("kafka_coordinator_rebalances_started",
                                      "Rebalances started (groups moved to PreparingRebalance).")
        expired = CounterMetricFamily(
            "kafka_coordinator_expired_members",
            "Members removed because their session timed out (no heartbeat).")
        epochs = CounterMetricFamily(
            "kafka_coordinator_consumer_group_rebalances",
            "Group epoch bumps of consumer groups (KIP-848): each one is a new target "
            "assignment.")
        share_epochs = CounterMetricFamily(
            "kafka_coordinator_share_group_rebalances",
            "Group epoch bumps of share groups (KIP-932; Kafka's share-group-rebalance-count).")
        streams_epochs = CounterMetricFamily(
            "kafka_coordinator_streams_group_rebalances",
            "Group epoch bumps of streams groups (KIP-1071; Kafka's "
            "streams-group-rebalance-count).")
        loading = GaugeMetricFamily("kafka_coordinator_shards_loading",
                                    "Coordinator shards (offsets partitions) still loading.")
        if coordinator is not None:
            for state, n in sorted(coordinator.groups_by_state().items()):
                groups.add_metric([state], n)
            members.add_metric([], coordinator.member_count())
            for gid, group in self._groups(coordinator):
                group_members.add_metric([gid], len(group.members))
                generation.add_metric([gid], getattr(group, "generation_id", None)
                                      or getattr(group, "group_epoch", 0))
            rebalances.add_metric([], _value(coordinator, "rebalances_total"))
            stats = getattr(coordinator, "stats", None)
            started.add_metric([], getattr(stats, "rebalances_started_total", 0))
            expired.add_metric([], _value(coordinator, "expired_members_total"))
            epochs.add_metric([], getattr(stats, "consumer_group_rebalances_total", 0))
            share_epochs.add_metric([], getattr(stats, "share_group_rebalances_total", 0))
            streams_epochs.add_metric([], getattr(stats, "streams_group_rebalances_total", 0))
            loading.add_metric([], len(coordinator.shards_loading))
        yield from (groups, members, group_members, generation, rebalances, started, expired,
                    epochs, share_epochs, streams_epochs, loading)
        # None until the first share group (Broker.shares): nothing acknowledged, none in flight
        yield from self._shares(getattr(self.broker, "share_leader", None))

    @staticmethod
    def _shares(shares):
        """Share partitions at this leader (KIP-932): records acknowledged by type (Kafka's
        share-group-metrics record-acknowledgement-count, ack-type tag) and in flight by
        state."""
        acks = CounterMetricFamily(
            "kafka_share_group_record_acknowledgements",
            "Records acknowledged by share consumers, by acknowledgement type.",
            labels=["ack_type"])
        in_flight = GaugeMetricFamily(
            "kafka_share_partition_records_in_flight",
            "In-flight records of the share partitions this broker leads, by state.",
            labels=["state"])
        counts = {"available": 0, "acquired": 0, "acknowledged": 0, "archived": 0}
        if shares is not None:
            for ack_type, n in sorted(shares.acknowledged.items()):
                acks.add_metric([ack_type], n)
            for partitions in shares.groups.values():
                for sp in partitions.values():
                    for record in sp.records.values():
                        counts[record.state.name.lower()] += 1
        for state, n in counts.items():
            in_flight.add_metric([state], n)
        yield from (acks, in_flight)

    @staticmethod
    def _groups(coordinator):
        for shard in coordinator.shards:
            yield from shard.groups.items()

    def _delayed(self, coordinator):
        family = GaugeMetricFamily("kafka_delayed_operations",
                                   "Delayed operations waiting in purgatory, by kind.",
                                   labels=["kind"])
        waiting = dict.fromkeys(DELAYED_KINDS, 0)
        if coordinator is not None:
            for kind, n in coordinator.waiting_operations().items():
                waiting[kind] = waiting.get(kind, 0) + n
        fetches = getattr(self.broker, "fetches", None)
        if fetches is not None:
            for kind, n in fetches.purgatory.waiting_by_kind().items():
                waiting[kind] = waiting.get(kind, 0) + n
        for kind, n in sorted(waiting.items()):
            family.add_metric([kind], n)
        return family

    def _logs_and_lag(self, coordinator):
        end = GaugeMetricFamily("kafka_log_end_offset",
                                "Offset the next record appended to a partition gets (the high "
                                "watermark on this single-replica broker).",
                                labels=["topic", "partition"])
        start = GaugeMetricFamily("kafka_log_start_offset",
                                  "First offset a consumer may read from a partition.",
                                  labels=["topic", "partition"])
        size = GaugeMetricFamily("kafka_log_size_bytes", "Bytes held by a partition's log.",
                                 labels=["topic", "partition"])
        committed = GaugeMetricFamily("kafka_consumer_group_committed_offset",
                                      "Offset committed by a group for a partition.",
                                      labels=["group", "topic", "partition"])
        lag = GaugeMetricFamily("kafka_consumer_group_lag",
                                "Log end offset minus the group's committed offset (0 at least).",
                                labels=["group", "topic", "partition"])
        topics = getattr(self.broker, "topics", None)
        ends: dict[tuple[str, int], int] = {}
        if topics is not None:
            for name, topic in list(topics.topics.items()):
                for partition in topic.partitions:
                    plog = partition.log
                    leo = plog.log_end_offset
                    ends[(name, partition.index)] = leo
                    label = [name, str(partition.index)]
                    end.add_metric(label, leo)
                    start.add_metric(label, plog.log_start_offset)
                    size.add_metric(label, plog.size_bytes)
        if coordinator is not None:
            for gid, group in self._groups(coordinator):
                for (topic, partition), om in group.offsets.items():
                    label = [gid, topic, str(partition)]
                    committed.add_metric(label, om.offset)
                    leo = ends.get((topic, partition))
                    if leo is not None:
                        lag.add_metric(label, max(leo - om.offset, 0))
        yield from (end, start, size, committed, lag)
        budget = getattr(getattr(topics, "logs", None), "memory_budget", None)
        if budget is not None:  # in-memory storage
            held = GaugeMetricFamily("kafka_log_memory_bytes",
                                     "Record bytes in-memory storage holds, all partitions.")
            held.add_metric([], budget.used)
            dropped = CounterMetricFamily(
                "kafka_log_memory_dropped_bytes",
                "Record bytes dropped to keep in-memory storage within log.memory.max.bytes.")
            dropped.add_metric([], budget.dropped_bytes)
            yield from (held, dropped)


class MetricsCollector:
    """The counters and gauges of a broker's Metrics."""

    def __init__(self, metrics) -> None:
        self.metrics = metrics

    def describe(self):
        return []

    def collect(self):
        metrics = self.metrics
        broker = metrics.broker
        yield counter_family(metrics.errors, "kafka_errors_total",
                             "Error codes returned (top level and per topic/partition), by API "
                             "and error.", ["api", "error_code", "error"])
        yield GaugeMetricFamily("kafka_connections", "Open client connections.",
                                value=metrics.connections)
        yield counter_family(metrics.rejected, "kafka_connections_rejected_total",
                             "Connections refused or closed for bad input or limits, by reason "
                             "(the setting, for limits).", ["reason"])
        yield counter_family(metrics.produced_records, "kafka_produced_records_total",
                             "Records appended by Produce, by topic.", ["topic"])
        yield counter_family(metrics.fetched_bytes, "kafka_fetched_bytes_total",
                             "Record bytes returned by Fetch, by topic.", ["topic"])
        yield counter_family(metrics.fetched_records, "kafka_fetched_records_total",
                             "Records returned by Fetch (whole batches), by topic.", ["topic"])
        rebalance = HistogramMetricFamily(
            "kafka_group_rebalance_duration_seconds",
            "Time from a rebalance's start (PreparingRebalance) until its group is Stable "
            "(assignment stored), once per generation.", labels=[])
        rebalance.add_metric([], histogram_buckets(metrics.rebalance_buckets,
                                                   metrics.rebalance_counts),
                             metrics.rebalance_sum)
        rebalance.samples.append(Sample(rebalance.name + "_created", {}, metrics.started))
        yield rebalance
        yield counter_family(metrics.faults, "kafka_faults_fired_total",
                             "Injected faults that fired (broker/faults.py), by API, action and "
                             "error.", ["api", "action", "error"])
        yield GaugeMetricFamily("kafka_server_answer_bytes_held",
                                "Bytes of answers made and not yet taken by the clients' "
                                "sockets (bounded by queued.max.response.bytes).",
                                value=_answer_bytes_held(broker))
        yield CounterMetricFamily("kafka_server_fetches_held_back_total",
                                  "Fetches that found queued.max.response.bytes full and waited "
                                  "(answered without records if it was still full).",
                                  value=metrics.fetches_held_back, created=metrics.started)
        # Kafka's FetchSessionCache gauges (NumIncrementalFetchSessions, ...PartitionsCached,
        # IncrementalFetchSessionEvictionsPerSec), and what kind of context each Fetch had
        yield GaugeMetricFamily("kafka_incremental_fetch_sessions",
                                "Fetch sessions in the cache (KIP-227).",
                                value=_sessions(broker, "size"))
        yield GaugeMetricFamily("kafka_incremental_fetch_partitions_cached",
                                "Partitions held by all fetch sessions.",
                                value=_sessions(broker, "partitions_cached"))
        yield GaugeMetricFamily("kafka_incremental_fetch_session_evictions",
                                "Fetch sessions evicted for new ones since the broker started.",
                                value=_sessions(broker, "evictions"))
        yield counter_family(metrics.fetch_kinds, "kafka_fetch_requests_by_session_total",
                             "Fetch requests by what their session made of them: full (creating "
                             "a session), incremental, sessionless, error.", ["kind"])


class TrafficCollector:
    """The per-request counters of a broker's Traffic (broker/metrics.py)."""

    def __init__(self, traffic) -> None:
        self.traffic = traffic

    def describe(self):
        return []

    def collect(self):
        traffic = self.traffic
        requests = CounterMetricFamily("kafka_requests", "Requests handled, by API and version.",
                                       labels=["api", "version"])
        for (api, version), n in sorted(traffic.requests.items()):
            requests.add_metric([api, str(version)], n)
        yield requests
        latency = HistogramMetricFamily(
            "kafka_request_latency_seconds",
            "Time from request received to response ready, by API.", labels=["api"])
        bounds = [str(float(b)) for b in traffic.latency_buckets] + ["+Inf"]
        for api, counts in sorted(traffic.latency.items()):
            cumulative, running = [], 0
            for bound, n in zip(bounds, counts):
                running += n
                cumulative.append((bound, running))
            latency.add_metric([api], cumulative, sum_value=traffic.latency_sum[api])
        yield latency
        yield CounterMetricFamily("kafka_network_received_bytes", "Bytes received from clients.",
                                  value=traffic.received)
        yield CounterMetricFamily("kafka_network_sent_bytes", "Bytes sent to clients.",
                                  value=traffic.sent)
