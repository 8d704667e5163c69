"""Prometheus metrics for the broker, on a registry of its own (several brokers per process in
tests), scraped at /metrics of the broker's HTTP port (broker/http/server.py).

Two kinds of series:

* counters and histograms updated by cheap hooks on the request path (requests, latency, errors,
  connections, bytes, records; label children are cached so a hook is a dict lookup and an add);
* state read at scrape time by :class:`BrokerStateCollector` — groups by state, members,
  rebalances, expired members, delayed operations, log end offsets and consumer lag — so keeping
  them costs nothing between scrapes. Scrapes run on the event loop, so they see a consistent state.
"""
from __future__ import annotations

import struct
from bisect import bisect_left

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)

from protocol.errors import ErrorCode

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                   10, 30)
REBALANCE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
#: delayed-operation kinds always reported (0 when none wait), so dashboards see the series
DELAYED_KINDS = ("heartbeat", "join", "sync", "fetch")

_BATCH_HEADER = struct.Struct(">qi")      # base offset, batch length (bytes after this field)
_RECORDS_COUNT = struct.Struct(">i")      # at byte 57 of a v2 record batch
_RECORDS_COUNT_AT = 57
_BATCH_OVERHEAD = 12                      # base offset + length fields


def _error_paths(response_cls) -> tuple[tuple[str, ...], ...]:
    """Attribute paths from a response message to each of its ``error_code`` fields: the
    top-level one and those in arrays of structs (topics, partitions), up to three levels deep."""
    paths: set[tuple[str, ...]] = set()

    def walk(sdef, prefix: tuple[str, ...], depth: int) -> None:
        for f in sdef.fields:
            if f.attr == "error_code" and not f.is_array and f.struct is None:
                paths.add(prefix + ("error_code",))
            elif f.is_array and f.struct is not None and not isinstance(f.struct, str) \
                    and depth < 3:
                walk(f.struct, prefix + (f.attr,), depth + 1)

    definition = getattr(response_cls, "_def", None)
    if definition is not None:
        walk(definition.root, (), 0)
    return tuple(sorted(paths, key=len))


def _collect_codes(obj, path: tuple[str, ...], i: int, out: list) -> None:
    name = path[i]
    if i == len(path) - 1:
        code = getattr(obj, name, 0)
        if code:
            out.append(code)
        return
    children = getattr(obj, name, None)
    if children:
        for child in children:
            _collect_codes(child, path, i + 1, out)


def count_records(data) -> int:
    """Records in a run of v2 record batches (the header's count; a trailing partial batch, as
    Fetch may return, is not counted)."""
    n = 0
    pos = 0
    end = len(data)
    while pos + _RECORDS_COUNT_AT + 4 <= end:
        _base, length = _BATCH_HEADER.unpack_from(data, pos)
        if length <= 0 or pos + _BATCH_OVERHEAD + length > end:
            break
        n += _RECORDS_COUNT.unpack_from(data, pos + _RECORDS_COUNT_AT)[0]
        pos += _BATCH_OVERHEAD + length
    return n


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


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
        yield from self._shares(getattr(self.broker, "shares", None))

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
        if shares is not None:
            for ack_type, n in sorted(shares.acknowledged.items()):
                acks.add_metric([ack_type], n)
            counts = {"available": 0, "acquired": 0, "acknowledged": 0, "archived": 0}
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


class TrafficCollector:
    """Per-request counters kept as plain ints and lists (a heartbeat costs a few dict
    operations, not several prometheus-client calls) and exported at scrape time."""

    def __init__(self) -> None:
        self.requests: dict[tuple[str, int], int] = {}
        self.latency: dict[str, list] = {}  # api -> [bucket counts..., +Inf count]
        self.latency_sum: dict[str, float] = {}
        self.received = 0
        self.sent = 0

    def request_done(self, api: str, version: int, seconds: float) -> None:
        key = (api, version)
        requests = self.requests
        requests[key] = requests.get(key, 0) + 1
        buckets = self.latency.get(api)
        if buckets is None:
            buckets = self.latency[api] = [0] * (len(LATENCY_BUCKETS) + 1)
            self.latency_sum[api] = 0.0
        buckets[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.latency_sum[api] += seconds

    def bytes_in(self, n: int) -> None:
        self.received += n

    def bytes_out(self, n: int) -> None:
        self.sent += n

    def describe(self):
        return []

    def collect(self):
        requests = CounterMetricFamily("kafka_requests", "Requests handled, by API and version.",
                                       labels=["api", "version"])
        for (api, version), n in sorted(self.requests.items()):
            requests.add_metric([api, str(version)], n)
        yield requests
        latency = HistogramMetricFamily(
            "kafka_request_latency_seconds",
            "Time from request received to response ready, by API.", labels=["api"])
        bounds = [str(float(b)) for b in LATENCY_BUCKETS] + ["+Inf"]
        for api, counts in sorted(self.latency.items()):
            cumulative, running = [], 0
            for bound, n in zip(bounds, counts):
                running += n
                cumulative.append((bound, running))
            latency.add_metric([api], cumulative, sum_value=self.latency_sum[api])
        yield latency
        yield CounterMetricFamily("kafka_network_received_bytes", "Bytes received from clients.",
                                  value=self.received)
        yield CounterMetricFamily("kafka_network_sent_bytes", "Bytes sent to clients.",
                                  value=self.sent)


def _sessions(broker, what: str) -> int:
    cache = getattr(broker, "fetch_sessions", None)
    return 0 if cache is None else getattr(cache, what)


class Metrics:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.registry = r = CollectorRegistry()
        self.errors = Counter("kafka_errors_total",
                              "Error codes returned (top level and per topic/partition), by API "
                              "and error.", ["api", "error_code", "error"], registry=r)
        self.connections = Gauge("kafka_connections", "Open client connections.", registry=r)
        self.rejected = Counter("kafka_connections_rejected_total",
                                "Connections refused or closed for bad input or limits, by "
                                "reason (the setting, for limits).",
                                ["reason"], registry=r)
        self.produced_records = Counter("kafka_produced_records_total",
                                        "Records appended by Produce, by topic.", ["topic"],
                                        registry=r)
        self.fetched_bytes = Counter("kafka_fetched_bytes_total",
                                     "Record bytes returned by Fetch, by topic.", ["topic"],
                                     registry=r)
        self.fetched_records = Counter("kafka_fetched_records_total",
                                       "Records returned by Fetch (whole batches), by topic.",
                                       ["topic"], registry=r)
        self.rebalance_duration = Histogram(
            "kafka_group_rebalance_duration_seconds",
            "Time from a rebalance's start (PreparingRebalance) until its group is Stable "
            "(assignment stored), once per generation.", buckets=REBALANCE_BUCKETS, registry=r)
        self.faults = Counter("kafka_faults_fired_total",
                              "Injected faults that fired (broker/faults.py), by API, "
                              "action and error.", ["api", "action", "error"], registry=r)
        self.answer_bytes = Gauge("kafka_server_answer_bytes_held",
                                  "Bytes of answers made and not yet taken by the clients' "
                                  "sockets (bounded by queued.max.response.bytes).", registry=r)
        self.answer_bytes.set_function(lambda: _answer_bytes_held(broker))
        self.fetches_held_back = Counter(
            "kafka_server_fetches_held_back_total",
            "Fetches that found queued.max.response.bytes full and waited (answered without "
            "records if it was still full).", registry=r)
        # Kafka's FetchSessionCache gauges (NumIncrementalFetchSessions, ...Partitions Cached,
        # IncrementalFetchSessionEvictionsPerSec), and what kind of context each Fetch had
        self.fetch_sessions = Gauge("kafka_incremental_fetch_sessions",
                                    "Fetch sessions in the cache (KIP-227).", registry=r)
        self.fetch_sessions.set_function(lambda: _sessions(broker, "size"))
        self.fetch_session_partitions = Gauge(
            "kafka_incremental_fetch_partitions_cached",
            "Partitions held by all fetch sessions.", registry=r)
        self.fetch_session_partitions.set_function(
            lambda: _sessions(broker, "partitions_cached"))
        self.fetch_session_evictions = Gauge(
            "kafka_incremental_fetch_session_evictions",
            "Fetch sessions evicted for new ones since the broker started.", registry=r)
        self.fetch_session_evictions.set_function(lambda: _sessions(broker, "evictions"))
        fetch_kinds = Counter("kafka_fetch_requests_by_session_total",
                              "Fetch requests by what their session made of them: full "
                              "(creating a session), incremental, sessionless, error.",
                              ["kind"], registry=r)
        #: kind -> counter child, so counting a fetch is a dict lookup and an add
        self.fetch_kind = {k: fetch_kinds.labels(k) for k in
                           ("full", "incremental", "sessionless", "error")}
        r.register(BrokerStateCollector(broker))
        self.traffic = TrafficCollector()
        r.register(self.traffic)
        self.request_done = self.traffic.request_done
        self.bytes_in = self.traffic.bytes_in
        self.bytes_out = self.traffic.bytes_out
        self._error_children: dict = {}
        self._error_paths: dict = {}

    # -- hot-path hooks (cheap: cached label children)

    def error(self, api: str, error_code: int, n: int = 1) -> None:
        key = (api, error_code)
        child = self._error_children.get(key)
        if child is None:
            child = self._error_children[key] = self.errors.labels(
                api, str(int(error_code)), _error_name(error_code))
        child.inc(n)

    def answered(self, api: str, version: int, seconds: float, response) -> None:
        """Called once per request answered (response None: none is sent): counts it, its
        latency and its non-zero error codes."""
        self.request_done(api, version, seconds)
        if response is None:
            return
        cls = type(response)
        paths = self._error_paths.get(cls)
        if paths is None:
            paths = self._error_paths[cls] = _error_paths(cls)
        for path in paths:
            if len(path) == 1:
                code = getattr(response, path[0], 0)
                if code:
                    self.error(api, code)
                continue
            codes: list = []
            _collect_codes(response, path, 0, codes)
            for code in codes:
                self.error(api, code)

    def fault_fired(self, api: str, action: str, error: str) -> None:
        self.faults.labels(api, action, error).inc()

    def group_stable(self, rebalance_ms: int) -> None:
        """The coordinator's hook: a rebalance ended with the group Stable."""
        self.rebalance_duration.observe(rebalance_ms / 1000.0)

    def fetch_held_back(self) -> None:
        self.fetches_held_back.inc()

    def connection_opened(self) -> None:
        self.connections.inc()

    def connection_closed(self) -> None:
        self.connections.dec()

    def connection_rejected(self, reason: str, n: int = 1) -> None:
        self.rejected.labels(reason).inc(n)

    def produced(self, topic: str, records: int) -> None:
        self.produced_records.labels(topic).inc(records)

    def fetched(self, responses) -> None:
        for t in responses:
            size = 0
            records = 0
            for p in t.partitions:
                data = p.records
                if data:
                    size += len(data)
                    records += count_records(data)
            if size:
                self.fetched_bytes.labels(t.topic).inc(size)
                if records:
                    self.fetched_records.labels(t.topic).inc(records)
