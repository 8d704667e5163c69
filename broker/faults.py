"""Fault injection: the broker misbehaves on purpose, the way Kafka brokers do in production.

A fault is plain data, the same from Python and over HTTP::

    {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 2,
     "match": {"topic": "orders", "partition": 0}}

Request faults act on the requests they match, in place of the broker's normal answer:

* ``"error"``: answer with this error code, put where the API carries it (see below);
* ``"delay_ms"``: answer this much later (with or without an error);
* ``"action": "disconnect"``: close the connection instead of answering.

They fire for ``count`` matching requests (every one without it), after letting ``after`` of them
through, for at most ``duration_ms`` after being added. ``match`` narrows them by ``client_id``,
``group``, ``transactional_id``, ``topic``, ``partition`` and ``node`` (the node id the request
reached); ``api`` may be omitted (every API) or a list.

Actions fire once, when added, on the coordinators' real state:

* ``"coordinator_load"``: the coordinator shard of ``match.group`` or ``match.transactional_id``
  (every shard without them) unloads, answers COORDINATOR_LOAD_IN_PROGRESS for ``duration_ms``,
  then replays its partition of the internal topic, as after a coordinator moved to this node;
* ``"expire_member"``: a member of ``match.group`` (``member_id``, or the first one) is removed as
  if its session had timed out;
* ``"rebalance"``: ``match.group`` starts a rebalance now;
* ``"expire_share_locks"``: every acquisition lock of the share group ``match.group`` expires
  now, so its acquired records are delivered again (without waiting for the lock duration);
* ``"streams_status"``: the streams group ``match.group`` answers every StreamsGroupHeartbeat
  with the status ``status`` (MISSING_SOURCE_TOPICS, SHUTDOWN_APPLICATION, ... or its code) for
  ``duration_ms`` (until cleared without it), so a Kafka Streams application can be tested
  with each status the broker may give it;
* ``"move_leader"`` (several nodes): the leadership of ``match.topic``/``match.partition``, or of
  the internal partition coordinating ``match.group`` or ``match.transactional_id``, moves to the
  next in-sync replica at the next leader epoch: the old node answers NOT_LEADER_OR_FOLLOWER or
  NOT_COORDINATOR and FindCoordinator names the new one, as after a leader election on Kafka.

Where an error goes is derived from the response's schema (broker/network/error_placement.py): a
fault that names a topic or partition puts its error on those entries only, and the rest of the
request is handled as usual; otherwise a partition-level error (NOT_LEADER_OR_FOLLOWER, ...) goes
on every partition the request names and any other error at the first level that carries one
(the top level, or each group).

Everything here runs on the broker's event loop; broker.testing.EmbeddedBroker calls it from
other threads through the loop.
"""
from __future__ import annotations

import itertools

import structlog

from protocol.errors import ErrorCode

from .topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

log = structlog.get_logger("broker.faults")

ACTIONS = ("coordinator_load", "expire_member", "rebalance", "move_leader",
           "expire_share_locks", "streams_status")
MATCH_KEYS = ("client_id", "group", "transactional_id", "topic", "partition", "node")
FIELDS = ("api", "error", "count", "after", "duration_ms", "delay_ms", "action", "match",
          "member_id", "status")


def _placement():
    """broker/network/error_placement.py, where a fault's error goes in an answer: loaded when
    a request fault first looks at a request, not by a broker that never has one."""
    from .network import error_placement
    return error_placement


class FaultError(ValueError):
    """A fault that cannot be added: an unknown API, error, field or group."""


# ---------------------------------------------------------------------------- the fault

class Fault:
    """One fault and what it did: ``fired`` (times it acted) and ``seen`` (requests it
    matched, including those ``after`` let through)."""

    __slots__ = ("id", "apis", "error", "count", "after", "duration_ms", "delay_ms", "action",
                 "match", "member_id", "fired", "seen", "added_ms", "expires_ms", "result",
                 "spec")

    def __init__(self, fault_id: int, spec: dict, known_apis, now_ms: int) -> None:
        if not isinstance(spec, dict):
            raise FaultError(f"a fault is a JSON object, not {type(spec).__name__}")
        unknown = set(spec) - set(FIELDS)
        if unknown:
            raise FaultError(f"unknown field(s) {sorted(unknown)}; a fault has {list(FIELDS)}")
        self.id = fault_id
        self.spec = dict(spec)
        self.action = spec.get("action")
        api = spec.get("api")
        if api is None or api == "*":
            self.apis = None
        else:
            names = [api] if isinstance(api, str) else list(api)
            bad = [n for n in names if n not in known_apis]
            if bad:
                raise FaultError(f"unknown API {bad[0]!r}: one of {sorted(known_apis)}")
            self.apis = frozenset(names)
        error = spec.get("error")
        if error is None:
            self.error = None
        else:
            try:
                self.error = ErrorCode[error] if isinstance(error, str) else ErrorCode(error)
            except (KeyError, ValueError):
                raise FaultError(f"unknown error {error!r}: a name of Kafka's error codes, "
                                 f"e.g. NOT_LEADER_OR_FOLLOWER") from None
        self.count = _optional_int(spec, "count", 1)
        self.after = _optional_int(spec, "after", 0) or 0
        self.duration_ms = _optional_int(spec, "duration_ms", 0)
        self.delay_ms = _optional_int(spec, "delay_ms", 0) or 0
        self.member_id = spec.get("member_id")
        match = spec.get("match") or {}
        if not isinstance(match, dict):
            raise FaultError("match is an object")
        unknown = set(match) - set(MATCH_KEYS)
        if unknown:
            raise FaultError(f"unknown match key(s) {sorted(unknown)}; one of {list(MATCH_KEYS)}")
        self.match = dict(match)
        if "partition" in match and not isinstance(match["partition"], int):
            raise FaultError("match.partition is a partition number")
        if "node" in match and not isinstance(match["node"], int):
            raise FaultError("match.node is a node id")
        if self.action is None:
            if self.error is None and not self.delay_ms:
                raise FaultError("a fault needs an error, a delay_ms or an action")
            self.action = "error" if self.error is not None else "delay"
        elif self.action not in ("disconnect",) + ACTIONS:
            raise FaultError(f"unknown action {self.action!r}: one of "
                             f"{['disconnect', *ACTIONS]}")
        if self.action in ACTIONS:
            if self.action == "coordinator_load" and not self.duration_ms:
                raise FaultError("coordinator_load needs duration_ms (how long it loads)")
            if self.action in ("expire_member", "rebalance", "expire_share_locks",
                               "streams_status") and "group" not in match:
                raise FaultError(f"{self.action} needs match.group")
            if self.action == "move_leader" and not (
                    ("topic" in match and "partition" in match) or "group" in match
                    or "transactional_id" in match):
                raise FaultError("move_leader needs match.topic and match.partition, "
                                 "match.group or match.transactional_id")
        self.fired = 0
        self.seen = 0
        self.added_ms = now_ms
        self.expires_ms = now_ms + self.duration_ms if self.duration_ms and \
            self.action not in ACTIONS else None
        self.result = None

    @property
    def exhausted(self) -> bool:
        return self.count is not None and self.fired >= self.count

    def to_dict(self) -> dict:
        out = dict(self.spec)
        out.setdefault("count", self.count)
        out.update(id=self.id, fired=self.fired, seen=self.seen)
        if self.result is not None:
            out["result"] = self.result
        return out

    def __repr__(self) -> str:
        return f"<Fault {self.id} {self.spec} fired={self.fired}>"


def _optional_int(spec: dict, name: str, default):
    value = spec.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FaultError(f"{name} is a whole number of at least 0, not {value!r}")
    return value


# ---------------------------------------------------------------------------- the injector

class Faults:
    """The broker's faults, made at the first use of ``broker.faults``. ``armed`` is the one
    thing the request path looks at: empty, no request pays more than that look."""

    def __init__(self, broker) -> None:
        self.broker = broker
        #: the broker's list, which each connection looks at (broker.py Broker.armed_faults)
        self.armed: list[Fault] = broker.armed_faults
        self.history: list[Fault] = []
        self.ids = itertools.count(1)
        #: coordinator loads under way: (topic, partition) -> (timer handle, runtime)
        self.loads: dict[tuple[str, int], tuple] = {}

    # -- adding, listing, clearing

    def add(self, spec: dict | None = None, **fields) -> Fault:
        """Add a fault (a dict as over HTTP, or keyword arguments); an action fires now."""
        from . import apis
        if spec is not None and not isinstance(spec, dict):
            raise FaultError(f"a fault is a JSON object, not {type(spec).__name__}")
        spec = dict(spec or {}, **fields)
        known = {h.name for h in apis.HANDLERS.values()}
        fault = Fault(next(self.ids), spec, known, self.broker.clock())
        if fault.action in ACTIONS:
            fault.result = self._act(fault)
            fault.fired = 1
            self.history.append(fault)
            self._fired(fault, None, None, **fault.result)
            return fault
        self.history.append(fault)
        self.armed.append(fault)
        log.info("fault added", fault=fault.id, spec=fault.spec)
        return fault

    def list(self) -> list[dict]:
        """Every fault added since the last clear, with ``fired``, ``seen`` and, for request
        faults, ``armed`` (False once its count or duration is used up)."""
        out = []
        now = self.broker.clock()
        for fault in self.history:
            entry = fault.to_dict()
            if fault.action not in ACTIONS:
                entry["armed"] = fault in self.armed and (fault.expires_ms is None
                                                          or now < fault.expires_ms)
            out.append(entry)
        return out

    def get(self, fault_id: int) -> Fault | None:
        return next((f for f in self.history if f.id == fault_id), None)

    def remove(self, fault_id: int) -> bool:
        fault = self.get(fault_id)
        if fault is None:
            return False
        self.history.remove(fault)
        if fault in self.armed:
            self.armed.remove(fault)
        if fault.action == "streams_status":
            for shard in self.broker.coordinator.shards:
                shard.unforce_streams_status(f"fault {fault.id}")
        return True

    def clear(self) -> int:
        """Forget every fault (a coordinator reload under way still finishes)."""
        n = len(self.history)
        self.armed.clear()
        self.history.clear()
        for shard in self.broker.coordinator.shards:
            shard.unforce_streams_status()
        return n

    # -- the request path

    def intercept(self, conn, req, request) -> bool:
        """Called for each request while faults are armed: True when a fault took the request
        (answered it, will answer it, or closed the connection)."""
        handler = req.handler
        now = self.broker.clock()
        placement = _placement()
        names = None
        for fault in list(self.armed):
            if fault.expires_ms is not None and now >= fault.expires_ms:
                self.armed.remove(fault)
                continue
            if fault.apis is not None and handler.name not in fault.apis:
                continue
            match = fault.match
            if match:
                if "client_id" in match and req.client_id != match["client_id"]:
                    continue
                if "node" in match and self.broker.node_id != match["node"]:
                    continue
                if len(match) > ("client_id" in match) + ("node" in match):
                    if names is None:
                        names = placement.names_of(
                            request, placement.shape_of(handler, req.api_version).request_arrays,
                            self.broker.topics)
                    if not placement.names_match(match, names):
                        continue
            if fault.error is not None and not placement.carries_error(
                    placement.shape_of(handler, req.api_version), request):
                continue  # no place in this answer for the error (Metadata of all topics)
            fault.seen += 1
            if fault.seen <= fault.after:
                continue
            fault.fired += 1
            if fault.exhausted:
                self.armed.remove(fault)
            self._fired(fault, handler.name, conn)
            self._apply(fault, conn, req, request)
            return True
        return False

    def _apply(self, fault: Fault, conn, req, request) -> None:
        if fault.action == "disconnect":
            conn.drop(f"fault {fault.id}: disconnect")
            return
        respond = req.respond
        if fault.delay_ms:
            respond = self._late(req.respond, fault.delay_ms)
        if fault.error is None:
            req.handler.handle(self.broker, req, request, respond)
            return
        self._answer_error(fault, conn, req, request, respond)

    def _late(self, respond, delay_ms: int):
        """``respond`` that sends its answer ``delay_ms`` later."""
        timer = self.broker.timer

        def late(response) -> None:
            timer.call_later(delay_ms, lambda: respond(response))
        return late

    def _answer_error(self, fault: Fault, conn, req, request, respond) -> None:
        name = fault.error.name
        _placement().answer_error(self.broker, conn, req, request, respond, fault.error,
                                  fault.match, f"fault {fault.id}: {name}",
                                  f"fault {fault.id}: {name} on a request without answer")

    # -- logging and counting

    def _fired(self, fault: Fault, api: str | None, conn, **details) -> None:
        error = fault.error.name if fault.error is not None else ""
        fields = {"api": api, "error": error, "delay_ms": fault.delay_ms,
                  "peer": getattr(conn, "peer", None), **details}
        log.info("fault fired", fault=fault.id, action=fault.action, fired=fault.fired,
                 count=fault.count, **{k: v for k, v in fields.items() if v})
        self.broker.metrics.fault_fired(api or "", fault.action, error)

    # -- actions on the coordinators

    def _act(self, fault: Fault) -> dict:
        if fault.action == "coordinator_load":
            return self._coordinator_load(fault)
        if fault.action == "move_leader":
            return self._move_leader(fault)
        group_id = fault.match["group"]
        if fault.action == "expire_share_locks":
            return {"group": group_id,
                    "released": self.broker.shares.expire_all_locks(group_id)}
        if fault.action == "streams_status":
            return self._streams_status(fault, group_id)
        coordinator = self.broker.coordinator
        shard = coordinator.shard_for(group_id)
        group = shard.groups.get(group_id)
        if group is None or not group.members:
            raise FaultError(f"group {group_id!r} has no members here")
        if getattr(group, "group_type", None) == "share":
            if fault.action == "rebalance":
                raise FaultError(f"group {group_id!r} is a share group: the broker assigns, "
                                 "there is no rebalance to start")
            member_id = fault.member_id or next(iter(group.members))
            if member_id not in group.members:
                raise FaultError(f"group {group_id!r} has no member {member_id!r}")
            shard.share.expire_member(group_id, member_id)   # the session timeout's path
            return {"group": group_id, "member_id": member_id}
        if getattr(group, "group_type", None) == "streams":
            if fault.action == "rebalance":
                raise FaultError(f"group {group_id!r} is a streams group: the broker assigns, "
                                 "there is no rebalance to start")
            member_id = fault.member_id or next(iter(group.members))
            if member_id not in group.members:
                raise FaultError(f"group {group_id!r} has no member {member_id!r}")
            shard.streams.expire_member(group_id, member_id)   # the session timeout's path
            return {"group": group_id, "member_id": member_id}
        from .coordinator.group.consumer.group import ConsumerGroup
        consumer = isinstance(group, ConsumerGroup)
        if fault.action == "rebalance":
            if consumer:
                raise FaultError(f"group {group_id!r} uses the consumer protocol: its members "
                                 "rebalance as the broker assigns, there is no rebalance to "
                                 "start")
            if not group.can_rebalance():
                raise FaultError(f"group {group_id!r} cannot rebalance now "
                                 f"({group.state.value})")
            shard.classic.prepare_rebalance(group, f"fault {fault.id}: rebalance")
            return {"group": group_id, "generation": group.generation_id}
        member_id = fault.member_id or next(iter(group.members))
        member = group.members.get(member_id)
        if member is None:
            raise FaultError(f"group {group_id!r} has no member {member_id!r}")
        if consumer:
            # the session timeout's own path
            shard.consumer.expire_member(group_id, member_id)
        else:
            shard.classic.expire_member(group, member, f"fault {fault.id}")
        return {"group": group_id, "member_id": member_id}

    def _streams_status(self, fault: Fault, group_id: str) -> dict:
        from .coordinator.group.streams.topology import Status
        status = fault.spec.get("status")
        names = {n: v for n, v in vars(Status).items() if n.isupper()}
        code = names.get(status) if isinstance(status, str) else status
        if code not in names.values():
            raise FaultError(f"unknown status {status!r}: one of {sorted(names)}")
        until = self.broker.clock() + fault.duration_ms if fault.duration_ms else None
        shard = self.broker.coordinator.shard_for(group_id)
        shard.streams.force_status(group_id, code, f"fault {fault.id}", until)
        return {"group": group_id, "status": code}

    def _move_leader(self, fault: Fault) -> dict:
        broker = self.broker
        match = fault.match
        if "group" in match:
            topic, index = OFFSETS_TOPIC, broker.coordinator.partition_for(match["group"])
        elif "transactional_id" in match:
            topic = TRANSACTION_STATE_TOPIC
            index = broker.transactions.partition_for(match["transactional_id"])
        else:
            topic, index = match["topic"], match["partition"]
        partition = broker.topics.partition(topic, index)
        if partition is None:
            raise FaultError(f"no partition {topic}-{index}")
        before = partition.leader
        if not broker.cluster.move_leader(partition):
            raise FaultError(f"{topic}-{index} has no other in-sync replica to lead it "
                             f"(replicas {partition.replicas}, ISR {partition.isr})")
        broker.topics.save()
        return {"topic": topic, "partition": index, "from": before, "to": partition.leader,
                "leader_epoch": partition.leader_epoch}

    def _coordinator_load(self, fault: Fault) -> dict:
        broker = self.broker
        targets = []
        group = fault.match.get("group")
        txn = fault.match.get("transactional_id")
        if group is not None:
            targets.append(("group", broker.coordinator.runtime, OFFSETS_TOPIC,
                            broker.coordinator.partition_for(group)))
        if txn is not None:
            targets.append(("transaction", broker.transactions.runtime, TRANSACTION_STATE_TOPIC,
                            broker.transactions.partition_for(txn)))
        if not targets:
            for kind, runtime, topic in (("group", broker.coordinator.runtime, OFFSETS_TOPIC),
                                         ("transaction", broker.transactions.runtime,
                                          TRANSACTION_STATE_TOPIC)):
                targets.extend((kind, runtime, topic, s.partition) for s in runtime.shards)
        for kind, runtime, topic, partition in targets:
            key = (topic, partition)
            pending = self.loads.pop(key, None)
            if pending is not None:
                pending[0].cancel()
            # unloading answers whoever waits NOT_COORDINATOR, as when the partition leaves
            runtime.begin_loading(partition)
            handle = broker.timer.call_later(
                fault.duration_ms, lambda r=runtime, t=topic, p=partition: self._loaded(r, t, p))
            self.loads[key] = (handle, runtime)
        return {"shards": sorted({f"{t}-{p}" for _k, _r, t, p in targets})}

    def finish_loads(self) -> int:
        """End every coordinator load under way now (their shards replay their partitions);
        returns how many there were."""
        pending = list(self.loads.items())
        for (topic, partition), (handle, runtime) in pending:
            handle.cancel()
            self._loaded(runtime, topic, partition)
        return len(pending)

    def _loaded(self, runtime, topic: str, partition: int) -> None:
        from .coordinator.common.storage import read_entries
        self.loads.pop((topic, partition), None)
        log_ = self.broker.topics.partition(topic, partition).log
        runtime.load(partition, read_entries(log_))
        runtime.finish_loading(partition)
        log.info("coordinator loaded after fault", topic=topic, partition=partition)
