"""Client quotas: what AlterClientQuotas stores and how the broker enforces it, as Kafka's
ClientQuotaManager does.

* :class:`ClientQuotaStore` holds the quota of each entity (a user, a client id, a user and a
  client id, or an IP, each possibly the default one: name None), persisted in
  ``<data dir>/client-quotas.json`` like the SCRAM credentials.
* :class:`SampledRate` is Kafka's ``Rate`` over a ``SampledStat``: ``quota.window.num`` samples
  of ``quota.window.size.seconds`` each; the rate is the sum of the retained samples over the
  elapsed window, never less than ``(quota.window.num - 1)`` full windows.
* :class:`QuotaManager` is one quota type (Produce, Fetch, Request): it resolves which entity's
  quota applies to a (user, client id) with Kafka's precedence, keeps one rate per resolved
  entity (its metric tags), and turns a violation into Kafka's throttle time
  ``(rate - bound) / bound * window``.

No I/O here but the store's file; the clock is passed in (milliseconds), so tests drive it.
"""
from __future__ import annotations

import ipaddress
import json
import os
import time

from .log.files import write_json

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

#: Kafka's QuotaConfig: the keys of user and client-id entities and of IP entities, with their
#: ConfigDef types (which decide the validation of a value)
CLIENT_KEYS = {PRODUCER_BYTE_RATE: "long", CONSUMER_BYTE_RATE: "long",
               REQUEST_PERCENTAGE: "double", CONTROLLER_MUTATION_RATE: "double"}
IP_KEYS = {CONNECTION_CREATION_RATE: "int"}

QUOTAS_FILE = "client-quotas.json"

#: a (user, client id, ip) entity: which types it names and with what (None: the default)
Entity = tuple  # tuple[tuple[str, str | None], ...], sorted by type


def entity_key(entries: dict) -> Entity:
    return tuple(sorted(entries.items()))


class ClientQuotaStore:
    """Every entity's quotas (key -> value), the way Kafka's metadata image holds them: an entity
    whose last quota is removed is gone."""

    def __init__(self, data_dir: str | None) -> None:
        self.path = os.path.join(data_dir, QUOTAS_FILE) if data_dir else None
        self.entities: dict[Entity, dict[str, float]] = {}
        #: called with no arguments after each change, so the managers look again
        self.listeners: list = []
        if self.path and os.path.exists(self.path):
            with open(self.path) as f:
                for item in json.load(f):
                    entity = entity_key({t: n for t, n in item["entity"]})
                    self.entities[entity] = {k: float(v) for k, v in item["quotas"].items()}

    def get(self, entity: Entity) -> dict[str, float]:
        return self.entities.get(entity, {})

    def apply(self, entity: Entity, changes: dict) -> bool:
        """Set (a float) or remove (None) each key; whether anything changed."""
        quotas = dict(self.entities.get(entity, {}))
        for key, value in changes.items():
            if value is None:
                quotas.pop(key, None)
            else:
                quotas[key] = value
        if quotas == self.entities.get(entity, {}):
            return False
        if quotas:
            self.entities[entity] = quotas
        else:
            self.entities.pop(entity, None)
        return True

    def changed(self) -> None:
        self.save()
        for listener in self.listeners:
            listener()

    def save(self) -> None:
        if not self.path:
            return
        data = [{"entity": list(map(list, entity)), "quotas": quotas}
                for entity, quotas in self.entities.items()]
        write_json(self.path, data, indent=1)

    def quota(self, key: str, user, client_id) -> float | None:
        """The value of ``key`` for exactly this entity (a user and/or client id; a name of
        None is the default entity, absent the type is not part of it)."""
        entries = {}
        if user is not _ABSENT:
            entries[USER] = user
        if client_id is not _ABSENT:
            entries[CLIENT_ID] = client_id
        return self.entities.get(entity_key(entries), {}).get(key)


_ABSENT = object()


class Sample:
    __slots__ = ("start_ms", "value", "events")

    def __init__(self, now: int) -> None:
        self.start_ms = now
        self.value = 0.0
        self.events = 0


class SampledRate:
    """Kafka's Rate over a WindowedSum: ``samples`` windows of ``window_ms``, recycled in turn.
    ``rate(now)`` is per second."""

    __slots__ = ("samples", "window_ms", "list", "current")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.list: list[Sample] = []
        self.current = 0

    def _current(self, now: int) -> Sample:
        if not self.list:
            self.list.append(Sample(now))
        return self.list[self.current]

    def record(self, value: float, now: int) -> None:
        sample = self._current(now)
        if now - sample.start_ms >= self.window_ms:
            self.current = (self.current + 1) % self.samples
            if self.current >= len(self.list):
                sample = Sample(now)
                self.list.append(sample)
            else:
                sample = self.list[self.current]
                sample.start_ms, sample.value, sample.events = now, 0.0, 0
        sample.value += value
        sample.events += 1

    def _purge(self, now: int) -> None:
        expire = self.samples * self.window_ms
        for sample in self.list:
            if now - sample.start_ms >= expire:
                sample.start_ms, sample.value, sample.events = now, 0.0, 0

    def window_size(self, now: int) -> int:
        """The elapsed time the rate divides by (ms): from the oldest retained sample, at least
        ``samples - 1`` full windows, at least 1."""
        self._purge(now)
        if not self.list:
            self.list.append(Sample(now))
        oldest = min(s.start_ms for s in self.list)
        elapsed = now - oldest
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def rate(self, now: int) -> float:
        self._purge(now)
        total = sum(s.value for s in self.list)
        return total / (self.window_size(now) / 1000.0)


#: a sensor idle this long is dropped (Kafka's inactive sensor expiration: one hour)
SENSOR_IDLE_MS = 3600 * 1000
#: at most this many rates per quota type; past it the least recently used go first
MAX_SENSORS = 10000


class TokenBucket:
    """Kafka's TokenBucket (KIP-599), for controller_mutation_rate: it holds up to ``quota.window.num
    x quota.window.size.seconds x quota`` tokens, refills at the quota per second, starts full,
    and each mutation (a partition created or deleted) takes one; below zero the client is over
    its quota."""

    __slots__ = ("tokens", "last_ms")

    def __init__(self) -> None:
        self.tokens = 0.0
        self.last_ms = 0  # refilled from the epoch at first use: full

    def refill(self, quota: float, burst: float, now: int) -> float:
        self.tokens = min(burst, self.tokens + quota * (now - self.last_ms) / 1000.0)
        self.last_ms = now
        return self.tokens


class Sensor:
    __slots__ = ("rate", "last_ms", "throttle_ms_total")

    def __init__(self, rate, now: int) -> None:
        self.rate = rate  # a SampledRate, or a TokenBucket for controller mutations
        self.last_ms = now
        self.throttle_ms_total = 0


class QuotaManager:
    """One of Kafka's ClientQuotaManagers: the quota of ``key`` for each (user, client id),
    found with Kafka's precedence (user+client-id, user+default client-id, user, default
    user+client-id, default user+default client-id, default user, client-id, default
    client-id), and the rate of the entity it found."""

    def __init__(self, name: str, key: str, store: ClientQuotaStore, samples: int,
                 window_s: int, bounded: bool = False) -> None:
        self.name = name  # Kafka's quota type: Produce, Fetch, Request
        self.key = key
        #: the Request quota's throttle is at most one window (Kafka's
        #: ClientRequestQuotaManager bounds it); the byte rates' are not bounded
        self.max_throttle_ms = window_s * 1000 if bounded else None
        self.store = store
        self.samples = samples
        self.window_ms = window_s * 1000
        self.sensors: dict[tuple[str, str], Sensor] = {}
        self.enabled = False
        self.refresh()
        store.listeners.append(self.refresh)

    def refresh(self) -> None:
        """The store changed: whether any entity has this quota (nothing is measured
        otherwise), and the rates start over under the new bounds where the entity moved."""
        self.enabled = any(self.key in q for q in self.store.entities.values())
        if not self.enabled:
            self.sensors.clear()

    def metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        """Which entity's rate a client's requests count toward (Kafka's quotaMetricTags):
        (user, client id), (user, "") or ("", client id)."""
        q = self.store.quota
        k = self.key
        if q(k, user, client_id) is not None or q(k, user, None) is not None:
            return user, client_id
        if q(k, user, _ABSENT) is not None:
            return user, ""
        if q(k, None, client_id) is not None or q(k, None, None) is not None:
            return user, client_id
        if q(k, None, _ABSENT) is not None:
            return user, ""
        return "", client_id

    def bound(self, tags: tuple[str, str]) -> float | None:
        """The quota of an entity's metric tags (Kafka's quotaLimit); None: unlimited."""
        user, client_id = tags
        q = self.store.quota
        k = self.key
        found = None
        if user and client_id:
            for u, c in ((user, client_id), (user, None), (None, client_id), (None, None)):
                found = q(k, u, c)
                if found is not None:
                    break
        elif user:
            found = q(k, user, _ABSENT)
            if found is None:
                found = q(k, None, _ABSENT)
        elif client_id:
            found = q(k, _ABSENT, client_id)
            if found is None:
                found = q(k, _ABSENT, None)
        return found

    def _new_stat(self):
        return SampledRate(self.samples, self.window_ms)

    def _sensor(self, tags, now: int) -> Sensor:
        sensor = self.sensors.get(tags)
        if sensor is None:
            if len(self.sensors) >= MAX_SENSORS:
                self._expire(now)
            sensor = self.sensors[tags] = Sensor(self._new_stat(), now)
        sensor.last_ms = now
        return sensor

    def _expire(self, now: int) -> None:
        for tags in [t for t, s in self.sensors.items() if now - s.last_ms >= SENSOR_IDLE_MS]:
            del self.sensors[tags]
        if len(self.sensors) >= MAX_SENSORS:
            oldest = sorted(self.sensors, key=lambda t: self.sensors[t].last_ms)
            for tags in oldest[:len(self.sensors) - MAX_SENSORS + 1]:
                del self.sensors[tags]

    def record(self, user: str, client_id: str, value: float, now: int) -> int:
        """Count ``value`` and return the throttle time (ms) the client now owes: 0 while its
        rate is within the quota, else Kafka's ``round((rate - bound) / bound * window)``."""
        if not self.enabled:
            return 0
        tags = self.metric_tags(user, client_id)
        bound = self.bound(tags)
        if bound is None:
            return 0
        sensor = self._sensor(tags, now)
        rate = sensor.rate
        rate.record(value, now)
        measured = rate.rate(now)
        if measured <= bound:
            return 0
        throttle = round((measured - bound) / bound * rate.window_size(now))
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        sensor.throttle_ms_total += throttle
        return int(throttle)

    def unrecord(self, user: str, client_id: str, value: float, now: int) -> None:
        """Take back what ``record`` counted (a throttled Fetch answers empty, as on Kafka)."""
        if not self.enabled:
            return
        sensor = self.sensors.get(self.metric_tags(user, client_id))
        if sensor is not None:
            sensor.rate.record(-value, now)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most a client may take in one quota window (bound x (samples - 1) x window
        seconds): Fetch caps its max bytes by it. None: unlimited."""
        if not self.enabled:
            return None
        bound = self.bound(self.metric_tags(user, client_id))
        if bound is None:
            return None
        return bound * (self.samples - 1) * self.window_ms / 1000.0


class MutationQuotaManager(QuotaManager):
    """Kafka's ControllerMutationQuotaManager: controller_mutation_rate, a token bucket per
    resolved entity (same precedence as the other quotas)."""

    def _new_stat(self):
        return TokenBucket()

    def quota_for(self, user: str, client_id: str, strict: bool, now: int):
        """The quota of one request (None: no quota applies): strict from CreateTopics v6,
        CreatePartitions v3 and DeleteTopics v5 on, as Kafka's newQuotaFor decides."""
        if not self.enabled:
            return None
        tags = self.metric_tags(user, client_id)
        bound = self.bound(tags)
        if bound is None:
            return None
        return MutationQuota(self._sensor(tags, now), bound,
                             self.samples * self.window_ms / 1000.0 * bound, strict, now)


class MutationQuota:
    """One request's controller mutation quota (Kafka's Strict/PermissiveControllerMutationQuota).
    Strict: a mutation while the bucket is already below zero is refused
    (THROTTLING_QUOTA_EXCEEDED) and the request is throttled ``-tokens / quota`` seconds; one
    that takes the bucket below zero still passes. Permissive (older versions): every mutation
    passes and the request is throttled once the bucket is below zero."""

    __slots__ = ("sensor", "bound", "burst", "strict", "now", "throttle_ms")

    def __init__(self, sensor: Sensor, bound: float, burst: float, strict: bool,
                 now: int) -> None:
        self.sensor = sensor
        self.bound = bound
        self.burst = burst
        self.strict = strict
        self.now = now
        self.throttle_ms = 0

    def _owed(self, tokens: float) -> None:
        self.throttle_ms = round(-tokens / self.bound * 1000)
        self.sensor.throttle_ms_total += self.throttle_ms

    def record(self, permits: int) -> bool:
        """Take ``permits`` tokens; False: refused (strict, and already over the quota)."""
        bucket = self.sensor.rate
        tokens = bucket.refill(self.bound, self.burst, self.now)
        if self.strict and tokens < 0:
            self._owed(tokens)
            return False
        bucket.tokens = min(self.burst, tokens - permits)
        if not self.strict and bucket.tokens < 0:
            self._owed(bucket.tokens)
        return True


class ConnectionRateQuotas:
    """connection_creation_rate of IP entities (KIP-612, Kafka's ConnectionQuotas): each
    connection accepted from an address counts toward that address's rate (the address's own
    quota, else the default IP entity's); over it the connection is throttled: held unread,
    closed once the throttle time is over (at most one quota window), and not counted. Entities
    named by a host name count for nobody here (Kafka resolves them to an address)."""

    def __init__(self, store: ClientQuotaStore, samples: int, window_s: int) -> None:
        self.store = store
        self.samples = samples
        self.window_ms = window_s * 1000
        self.bounds: dict[str | None, float] = {}
        self.sensors: dict[str, Sensor] = {}
        self.refresh()
        store.listeners.append(self.refresh)

    @property
    def enabled(self) -> bool:
        return bool(self.bounds)

    def refresh(self) -> None:
        bounds = {}
        for entity, quotas in self.store.entities.items():
            rate = quotas.get(CONNECTION_CREATION_RATE)
            if rate is None or len(entity) != 1 or entity[0][0] != IP:
                continue
            name = entity[0][1]
            if name is not None:
                try:
                    name = ipaddress.ip_address(name).compressed
                except ValueError:
                    continue
            bounds[name] = rate
        self.bounds = bounds
        if not bounds:
            self.sensors.clear()

    def record(self, host: str, now: int) -> int:
        """Count a connection from ``host``; the throttle time (ms) it gets, 0 if none."""
        bound = self.bounds.get(host)
        if bound is None:
            bound = self.bounds.get(None)
            if bound is None:
                return 0
        sensor = self.sensors.get(host)
        if sensor is None:
            if len(self.sensors) >= MAX_SENSORS:
                idle = [h for h, s in self.sensors.items() if now - s.last_ms >= SENSOR_IDLE_MS]
                for h in idle or sorted(self.sensors, key=lambda h: self.sensors[h].last_ms)[:1]:
                    del self.sensors[h]
            sensor = self.sensors[host] = Sensor(SampledRate(self.samples, self.window_ms), now)
        sensor.last_ms = now
        rate = sensor.rate
        rate.record(1.0, now)
        measured = rate.rate(now)
        if measured <= bound:
            return 0
        throttle = min(round((measured - bound) / bound * rate.window_size(now)), self.window_ms)
        rate.record(-1.0, now)  # a connection not accepted does not count, as on Kafka
        sensor.throttle_ms_total += throttle
        return int(throttle)


class ClientQuotas:
    """The broker's quota managers over one store (Kafka's QuotaManagers)."""

    def __init__(self, data_dir: str | None, samples: int = 11, window_s: int = 1) -> None:
        self.store = ClientQuotaStore(data_dir)
        self.produce = QuotaManager("Produce", PRODUCER_BYTE_RATE, self.store, samples, window_s)
        self.fetch = QuotaManager("Fetch", CONSUMER_BYTE_RATE, self.store, samples, window_s)
        self.request = QuotaManager("Request", REQUEST_PERCENTAGE, self.store, samples, window_s,
                                    bounded=True)
        self.mutation = MutationQuotaManager("ControllerMutation", CONTROLLER_MUTATION_RATE,
                                             self.store, samples, window_s)
        self.connections = ConnectionRateQuotas(self.store, samples, window_s)

    def managers(self):
        return (self.produce, self.fetch, self.request)

    def mutation_quota(self, req, strict_from: int):
        """The controller mutation quota of a CreateTopics, CreatePartitions or DeleteTopics
        request, or None; the handler records each topic's partitions and sets
        ``req.throttle_ms`` from it (finish_mutations)."""
        if not self.mutation.enabled:
            return None
        conn = req.conn
        return self.mutation.quota_for(conn.principal.name, req.client_id,
                                       req.api_version >= strict_from, conn.clock())

    @staticmethod
    def finish_mutations(quota, req) -> None:
        if quota is not None and quota.throttle_ms > req.throttle_ms:
            req.throttle_ms = quota.throttle_ms

    def record_request(self, req) -> None:
        """Count a request's handler time toward its client's ``request_percentage`` (Kafka's
        ClientRequestQuotaManager: the percentage of one thread's time per second) and throttle
        it by what it owes. A request parked by its handler counts the time until the handler
        returned, not its wait."""
        spent = req.handled if req.handled is not None else time.monotonic() - req.started
        conn = req.conn
        owed = self.request.record(conn.principal.name, req.client_id, spent * 100.0,
                                   conn.clock())
        if owed > req.throttle_ms:
            req.throttle_ms = owed

    def record_bytes(self, manager: QuotaManager, req, size: int) -> None:
        """Count ``size`` bytes toward the client's byte rate of ``manager`` and throttle the
        request by what it owes (Produce counts the request's size, Fetch its answer's)."""
        conn = req.conn
        owed = manager.record(conn.principal.name, req.client_id, size, conn.clock())
        if owed > req.throttle_ms:
            req.throttle_ms = owed
