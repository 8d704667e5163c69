"""The broker's metrics: counters and histograms updated by cheap hooks on the request path
(requests, latency, errors, connections, bytes, records), kept as plain ints and dicts so a hook
is a dict lookup and an add. broker/metrics_export.py turns them, with state read at scrape time
(groups, lag, delayed operations), into Prometheus series on a registry of the broker's own
(several brokers per process in tests), scraped at /metrics of the HTTP port
(broker/http/server.py). prometheus-client, which imports the standard library's HTTP and email
modules, is imported there, at the first scrape: a broker whose HTTP port is off never loads it.
"""
from __future__ import annotations

import struct
import time
from bisect import bisect_left

from protocol.errors import ErrorCode

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                   10, 30)
REBALANCE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

_BATCH_HEADER = struct.Struct(">qi")      # base offset, batch length (bytes after this field)
_RECORDS_COUNT = struct.Struct(">i")      # at byte 57 of a v2 record batch
_RECORDS_COUNT_AT = 57
_BATCH_OVERHEAD = 12                      # base offset + length fields


def _export():
    """broker/metrics_export.py, imported (with prometheus-client) at the first scrape."""
    from . import metrics_export
    return metrics_export


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


class Traffic:
    """Per-request counters kept as plain ints and lists (a heartbeat costs a few dict
    operations) and exported at scrape time."""

    def __init__(self) -> None:
        self.latency_buckets = LATENCY_BUCKETS
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


class Counts:
    """A counter's values by label values, each with the time its series began (what
    prometheus-client's Counter exports as ``_created``): a hook is a dict lookup and an add."""

    __slots__ = ("values", "created")

    def __init__(self, keys=()) -> None:
        self.values: dict[tuple, float] = {}
        self.created: dict[tuple, float] = {}
        for key in keys:
            self.add(key, 0)

    def add(self, key: tuple, n: float = 1) -> None:
        values = self.values
        if key in values:
            values[key] += n
        else:
            values[key] = n
            self.created[key] = time.time()


class Metrics:
    """The broker's counters as plain values, the hooks that update them, and the registry that
    exports them (broker/metrics_export.py), made at the first scrape."""

    def __init__(self, broker) -> None:
        self.broker = broker
        #: when the series without labels began (their _created sample)
        self.started = time.time()
        #: (api, error code, error name) -> errors returned
        self.errors = Counts()
        self._error_keys: dict[tuple[str, int], tuple[str, str, str]] = {}
        self.connections = 0
        #: (reason,) -> connections refused or closed
        self.rejected = Counts()
        self.produced_records = Counts()          # (topic,) -> records
        self.fetched_bytes = Counts()             # (topic,) -> bytes
        self.fetched_records = Counts()           # (topic,) -> records
        #: rebalance durations: counts per REBALANCE_BUCKETS bound (+Inf last) and their sum
        self.rebalance_buckets = REBALANCE_BUCKETS
        self.rebalance_counts = [0] * (len(REBALANCE_BUCKETS) + 1)
        self.rebalance_sum = 0.0
        self.faults = Counts()                    # (api, action, error) -> fired
        self.fetches_held_back = 0
        #: Fetch requests by what their session made of them (broker/apis/fetch.py)
        self.fetch_kinds = Counts((k,) for k in ("full", "incremental", "sessionless", "error"))
        self.traffic = Traffic()
        self.request_done = self.traffic.request_done
        self.bytes_in = self.traffic.bytes_in
        self.bytes_out = self.traffic.bytes_out
        self._error_paths: dict = {}
        self._registry = None

    @property
    def registry(self):
        """The prometheus-client registry of every series, made on first use."""
        if self._registry is None:
            self._registry = _export().registry(self)
        return self._registry

    def exposition(self) -> tuple[str, bytes]:
        """(content type, body) of a /metrics answer in Prometheus' text format."""
        return _export().exposition(self.registry)

    # -- hot-path hooks (cheap: a dict lookup and an add)

    def error(self, api: str, error_code: int, n: int = 1) -> None:
        key = self._error_keys.get((api, error_code))
        if key is None:
            key = self._error_keys[(api, error_code)] = (
                api, str(int(error_code)), _error_name(error_code))
        self.errors.add(key, n)

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
        self.faults.add((api, action, error))

    def group_stable(self, rebalance_ms: int) -> None:
        """The coordinator's hook: a rebalance ended with the group Stable."""
        seconds = rebalance_ms / 1000.0
        self.rebalance_counts[bisect_left(REBALANCE_BUCKETS, seconds)] += 1
        self.rebalance_sum += seconds

    def fetch_held_back(self) -> None:
        self.fetches_held_back += 1

    def fetch_kind(self, kind: str) -> None:
        self.fetch_kinds.add((kind,))

    def connection_opened(self) -> None:
        self.connections += 1

    def connection_closed(self) -> None:
        self.connections -= 1

    def connection_rejected(self, reason: str, n: int = 1) -> None:
        self.rejected.add((reason,), n)

    def produced(self, topic: str, records: int) -> None:
        self.produced_records.add((topic,), records)

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
                self.fetched_bytes.add((t.topic,), size)
                if records:
                    self.fetched_records.add((t.topic,), records)
