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
* ``"rebalance"``: ``match.group`` starts a rebalance now.

Where an error goes is derived from the response's schema: the levels that carry an error code
(top level, per group, per topic, per partition) are paired with the request's arrays of the same
kind (groups, transactional ids, topics, partitions). A fault that names a topic or partition puts
its error on those entries only, and the rest of the request is handled as usual; otherwise a
partition-level error (NOT_LEADER_OR_FOLLOWER, ...) goes on every partition the request names and
any other error at the first level that carries one (the top level, or each group).

Everything here runs on the broker's event loop; broker.testing.EmbeddedBroker calls it from
other threads through the loop.
"""
from __future__ import annotations

import itertools

import structlog

from protocol.errors import ErrorCode

from ..topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

log = structlog.get_logger("broker.faults")

ACTIONS = ("coordinator_load", "expire_member", "rebalance")
MATCH_KEYS = ("client_id", "group", "transactional_id", "topic", "partition", "node")
FIELDS = ("api", "error", "count", "after", "duration_ms", "delay_ms", "action", "match",
          "member_id")

#: errors Kafka reports per partition: without a topic in the fault's match they go on every
#: partition the request names (a NOT_LEADER_OR_FOLLOWER at the top of a Fetch would be read as
#: a fetch-session error)
PARTITION_ERRORS = frozenset(ErrorCode[name] for name in (
    "OFFSET_OUT_OF_RANGE", "CORRUPT_MESSAGE", "UNKNOWN_TOPIC_OR_PARTITION", "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT", "REPLICA_NOT_AVAILABLE", "MESSAGE_TOO_LARGE",
    "RECORD_LIST_TOO_LARGE", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "INVALID_TIMESTAMP", "KAFKA_STORAGE_ERROR", "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "DUPLICATE_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID", "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH", "OFFSET_NOT_AVAILABLE", "INVALID_RECORD", "UNKNOWN_TOPIC_ID",
    "INCONSISTENT_TOPIC_ID", "TOPIC_AUTHORIZATION_FAILED", "INVALID_TOPIC_EXCEPTION"))

GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types


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
            if self.action in ("expire_member", "rebalance") and "group" not in match:
                raise FaultError(f"{self.action} needs match.group")
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


# ---------------------------------------------------------------------------- request shapes
#
# A request's entries are the elements of its arrays that name something: groups, transactional
# ids, FindCoordinator keys, topics, partitions. Response arrays are classified the same way; a
# response level that carries an error code is reachable when each array on its path pairs with
# a request array of the same kind.

TOPIC_KEYS = ("name", "topic", "topic_name", "topic_id")
PARTITION_KEYS = ("partition_index", "partition", "index")
ERROR_ATTRS = ("error_code", "partition_error_code")
#: arrays of plain values that list entries
SCALAR_KINDS = {"partitions": "partition", "partition_indexes": "partition",
                "groups": "group", "groups_names": "group", "group_ids": "group",
                "transactional_ids": "transaction", "coordinator_keys": "key",
                "topic_names": "topic"}


def _present(sdef, version: int) -> list:
    return [f for f in sdef.fields if version in f.versions]


def _struct_kind(attr: str, sdef, version: int) -> tuple[str | None, tuple]:
    """(kind, key attributes) of an array of structs named ``attr``."""
    names = {f.attr for f in _present(sdef, version)}
    if "transactional_id" in names:
        return "transaction", ("transactional_id",)
    if "group_id" in names:
        return "group", ("group_id",)
    if "key" in names:
        return "key", ("key",)
    topic = tuple(k for k in TOPIC_KEYS if k in names)
    if topic and ("topic" in attr or attr in ("responses", "results")):
        return "topic", topic
    partition = tuple(k for k in PARTITION_KEYS if k in names)
    if partition and not topic:
        return "partition", partition[:1]
    return None, ()


class ArrayShape:
    """An array that lists entries: its attribute, kind, key attributes and (for arrays of
    structs) the struct definition, with the arrays inside it."""

    __slots__ = ("attr", "kind", "keys", "sdef", "children", "error_attr")

    def __init__(self, attr, kind, keys, sdef, version) -> None:
        self.attr = attr
        self.kind = kind
        self.keys = keys
        self.sdef = sdef
        self.children = entry_arrays(sdef, version) if sdef is not None else []
        present = {f.attr for f in _present(sdef, version)} if sdef is not None else set()
        self.error_attr = next((a for a in ERROR_ATTRS if a in present), None)


def entry_arrays(sdef, version: int) -> list[ArrayShape]:
    out = []
    for f in _present(sdef, version):
        if not f.is_array or f.attr.startswith("forgotten"):
            continue
        if f.struct is None:
            kind = SCALAR_KINDS.get(f.attr)
            if kind is not None:
                out.append(ArrayShape(f.attr, kind, (), None, version))
            continue
        kind, keys = _struct_kind(f.attr, f.struct, version)
        if kind is not None:
            out.append(ArrayShape(f.attr, kind, keys, f.struct, version))
    return out


class Step:
    """One level of a response reachable from the request: the request array it mirrors and
    the response array it fills."""

    __slots__ = ("request", "response", "kind")

    def __init__(self, request: ArrayShape, response: ArrayShape) -> None:
        self.request = request
        self.response = response
        self.kind = response.kind


class Shape:
    """How errors fit one API version: the top-level error attribute, and each chain of
    request/response arrays whose last response level carries an error code."""

    def __init__(self, handler, version: int) -> None:
        self.name = handler.name
        request_root = handler.request._def.root
        response_root = handler.response._def.root
        self.request_arrays = entry_arrays(request_root, version)
        present = {f.attr: f for f in _present(response_root, version)}
        self.top_error = "error_code" if "error_code" in present else None
        self.response_cls = handler.response
        self.version = version
        #: every chain of steps from the top, each level with an error code a candidate
        self.chains: list[list[Step]] = []
        self._pair(self.request_arrays, entry_arrays(response_root, version), [])
        chained = {chain[0].response.attr for chain in self.chains}
        #: the response describes more than the entries asked about (Metadata's brokers): an
        #: answer for nothing but failed entries still comes from the handler
        self.needs_handler = any(
            f.is_array and f.attr not in chained for f in present.values()) and bool(self.chains)

    def _pair(self, requests: list[ArrayShape], responses: list[ArrayShape], prefix) -> None:
        for response in responses:
            request = next((r for r in requests if r.kind == response.kind), None)
            if request is None:
                continue
            chain = prefix + [Step(request, response)]
            if response.error_attr is not None:
                self.chains.append(chain)
            if request.children and response.children:
                self._pair(request.children, response.children, chain)

    def levels(self) -> list[list[Step]]:
        """Error-carrying chains, shallowest first."""
        return sorted(self.chains, key=len)


_SHAPES: dict[tuple[str, int], Shape] = {}


def shape_of(handler, version: int) -> Shape:
    shape = _SHAPES.get((handler.name, version))
    if shape is None:
        shape = _SHAPES[(handler.name, version)] = Shape(handler, version)
    return shape


# ---------------------------------------------------------------------------- matching

class Names:
    """What one request names: groups, transactional ids and (topic, partition) pairs."""

    __slots__ = ("groups", "transactions", "topics", "partitions")

    def __init__(self) -> None:
        self.groups: set[str] = set()
        self.transactions: set[str] = set()
        self.topics: set[str] = set()
        self.partitions: set[tuple[str, int]] = set()


def topic_name(entry, keys, topics) -> str | None:
    for k in keys:
        value = getattr(entry, k, None)
        if k == "topic_id":
            if value is not None and topics is not None:
                topic = topics.by_id.get(value)
                if topic is not None:
                    return topic.name
        elif value:
            return value
    return None


def names_of(request, arrays: list[ArrayShape], topics) -> Names:
    out = Names()
    key_type = getattr(request, "key_type", None)
    for attr, into in (("group_id", out.groups), ("transactional_id", out.transactions)):
        value = getattr(request, attr, None)
        if value:
            into.add(value)
    key = getattr(request, "key", None)
    if isinstance(key, str) and key:
        (out.transactions if key_type == TRANSACTION_KEY else out.groups).add(key)

    def walk(obj, shapes, topic):
        for shape in shapes:
            items = getattr(obj, shape.attr, None) or ()
            for item in items:
                current = topic
                if shape.kind == "group":
                    out.groups.add(item if shape.sdef is None else item.group_id)
                elif shape.kind == "transaction":
                    out.transactions.add(item if shape.sdef is None else item.transactional_id)
                elif shape.kind == "key":
                    value = item if shape.sdef is None else item.key
                    (out.transactions if key_type == TRANSACTION_KEY else out.groups).add(value)
                elif shape.kind == "topic":
                    current = item if shape.sdef is None else topic_name(item, shape.keys, topics)
                    if current:
                        out.topics.add(current)
                elif shape.kind == "partition" and topic:
                    index = item if shape.sdef is None else getattr(item, shape.keys[0])
                    out.partitions.add((topic, index))
                if shape.children:
                    walk(item, shape.children, current)

    walk(request, arrays, None)
    return out


def _covers(fault: Fault, kind: str, item, shape: ArrayShape, key_type, topics) -> bool:
    """Whether the fault's match takes in one entry of a request array."""
    match = fault.match
    if kind == "topic":
        want = match.get("topic")
        return want is None or (item if shape.sdef is None else
                                topic_name(item, shape.keys, topics)) == want
    if kind == "partition":
        want = match.get("partition")
        return want is None or (item if shape.sdef is None else
                                getattr(item, shape.keys[0])) == want
    if kind in ("group", "transaction", "key"):
        value = item if shape.sdef is None else getattr(item, shape.keys[0])
        if kind == "key":
            kind = "transaction" if key_type == TRANSACTION_KEY else "group"
        want = match.get("group" if kind == "group" else "transactional_id")
        return want is None or value == want
    return True


# ---------------------------------------------------------------------------- answers

def _fill_error(obj, sdef, version: int, attr: str, error: int, message: str) -> None:
    """An error entry carries the error and no values: offsets, node ids and ports are -1 in
    Kafka's error answers, and a records field is empty."""
    setattr(obj, attr, error)
    for f in _present(sdef, version):
        if f.is_array or f.struct is not None:
            continue
        if f.type == "int64" or f.attr in ("node_id", "port", "leader_id", "leader_epoch"):
            if f.attr not in PARTITION_KEYS:
                setattr(obj, f.attr, -1)
        elif f.type == "records":
            setattr(obj, f.attr, b"")
        elif f.attr == "error_message":
            setattr(obj, f.attr, message)


def _entry(shape: ArrayShape, item, request_shape: ArrayShape, topics):
    """A response entry that names the same thing as a request entry."""
    obj = shape.sdef.cls()
    if shape.kind == "topic":
        name = item if request_shape.sdef is None else topic_name(item, request_shape.keys,
                                                                 topics)
        topic = topics.get(name) if (topics is not None and name) else None
        for k in shape.keys:
            if k == "topic_id":
                value = getattr(item, "topic_id", None) if request_shape.sdef is not None \
                    else None
                if value is None and topic is not None:
                    value = topic.topic_id
                if value is not None:
                    obj.topic_id = value
            else:
                setattr(obj, k, name)
    else:
        value = item if request_shape.sdef is None else getattr(item, request_shape.keys[0])
        setattr(obj, shape.keys[0], value)
    return obj


def _key(shape: ArrayShape, obj):
    return tuple(getattr(obj, k, None) for k in shape.keys if k != "topic_id") or \
        tuple(getattr(obj, k, None) for k in shape.keys)


class Split:
    """Takes the entries a fault covers out of a request and makes their error entries."""

    def __init__(self, fault: Fault, chain: list[Step], version: int, topics, key_type,
                 message: str) -> None:
        self.fault = fault
        self.chain = chain
        self.version = version
        self.topics = topics
        self.key_type = key_type
        self.message = message

    def run(self, obj, depth: int = 0) -> list:
        """Error entries for ``obj``'s array at ``depth``; covered entries leave the request."""
        step = self.chain[depth]
        rq, rs = step.request, step.response
        items = getattr(obj, rq.attr, None)
        if not items:
            return []
        last = depth == len(self.chain) - 1
        kept, errors = [], []
        for item in items:
            if not _covers(self.fault, step.kind, item, rq, self.key_type, self.topics):
                kept.append(item)
                continue
            entry = _entry(rs, item, rq, self.topics)
            if last:
                _fill_error(entry, rs.sdef, self.version, rs.error_attr, self.fault.error,
                            self.message)
                errors.append(entry)
                continue
            below = self.chain[depth + 1].request.attr
            had = bool(getattr(item, below, None))
            children = self.run(item, depth + 1)
            if children:
                setattr(entry, self.chain[depth + 1].response.attr, children)
                errors.append(entry)
            if not had or getattr(item, below, None):
                kept.append(item)  # some of its entries are not covered: they stay
        setattr(obj, rq.attr, kept)
        return errors


def _merge(chain: list[Step], depth: int, into: list, errors: list) -> None:
    """Put error entries into a handler's answer, next to what it answered."""
    rs = chain[depth].response
    last = depth == len(chain) - 1
    for entry in errors:
        key = _key(rs, entry)
        same = next((i for i, e in enumerate(into) if _key(rs, e) == key), None)
        if same is None:
            into.append(entry)
        elif last:
            into[same] = entry
        else:
            child = chain[depth + 1].response.attr
            existing = getattr(into[same], child, None)
            if existing is None:
                setattr(into[same], child, getattr(entry, child))
            else:
                _merge(chain, depth + 1, existing, getattr(entry, child))


# ---------------------------------------------------------------------------- the injector

class Faults:
    """The broker's faults. ``armed`` is the one thing the request path looks at: empty, no
    request pays more than that look."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.armed: list[Fault] = []
        self.history: list[Fault] = []
        self.ids = itertools.count(1)
        #: coordinator loads under way: (topic, partition) -> (timer handle, runtime)
        self.loads: dict[tuple[str, int], tuple] = {}

    # -- adding, listing, clearing

    def add(self, spec: dict | None = None, **fields) -> Fault:
        """Add a fault (a dict as over HTTP, or keyword arguments); an action fires now."""
        from .. import apis
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
        return True

    def clear(self) -> int:
        """Forget every fault (a coordinator reload under way still finishes)."""
        n = len(self.history)
        self.armed.clear()
        self.history.clear()
        return n

    # -- the request path

    def intercept(self, conn, req, request) -> bool:
        """Called for each request while faults are armed: True when a fault took the request
        (answered it, will answer it, or closed the connection)."""
        handler = req.handler
        now = self.broker.clock()
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
                        names = names_of(request, shape_of(handler, req.api_version)
                                         .request_arrays, self.broker.topics)
                    if not _names_match(match, names):
                        continue
            if fault.error is not None and not _carries_error(
                    shape_of(handler, req.api_version), request):
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
        handler = req.handler
        shape = shape_of(handler, req.api_version)
        message = f"fault {fault.id}: {fault.error.name}"
        chain = self._level(fault, shape, request)
        no_answer = getattr(request, "acks", None) == 0  # Produce acks=0: Kafka closes instead
        if chain is None:
            if no_answer:
                conn.drop(f"fault {fault.id}: {fault.error.name} on a request without answer")
                return
            response = shape.response_cls()
            if shape.top_error is not None:
                _fill_error(response, handler.response._def.root, req.api_version,
                            shape.top_error, fault.error, message)
            respond(response)
            return
        topics = self.broker.topics
        errors = Split(fault, chain, req.api_version, topics, getattr(request, "key_type", None),
                       message).run(request)
        first = chain[0]
        left = bool(getattr(request, first.request.attr, None))
        if no_answer:
            if left:
                handler.handle(self.broker, req, request, lambda _none: None)
            conn.drop(f"fault {fault.id}: {fault.error.name} on a request without answer")
            return
        if not left and not shape.needs_handler:
            response = shape.response_cls()
            setattr(response, first.response.attr, errors)
            respond(response)
            return
        if hasattr(request, "max_wait_ms"):
            request.max_wait_ms = 0  # an answer with an error goes at once, as on Kafka

        def merged(response):
            if response is not None:
                existing = getattr(response, first.response.attr, None)
                if existing is None:
                    setattr(response, first.response.attr, errors)
                else:
                    _merge(chain, 0, existing, errors)
            respond(response)

        handler.handle(self.broker, req, request, merged)

    def _level(self, fault: Fault, shape: Shape, request) -> list[Step] | None:
        """The chain whose last level gets the error, or None for the top level."""
        levels = [c for c in shape.levels() if _has_entries(request, c)]
        match = fault.match
        if "partition" in match:
            wanted = [c for c in levels if c[-1].kind == "partition"]
            return wanted[-1] if wanted else (levels[-1] if levels else None)
        if "topic" in match:
            for kind in ("topic", "partition"):
                wanted = [c for c in levels if c[-1].kind == kind]
                if wanted:
                    return wanted[0]
            return levels[-1] if levels else None
        if fault.error in PARTITION_ERRORS:
            return levels[-1] if levels else None
        if shape.top_error is not None or not levels:
            return None
        return levels[0]

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
        group_id = fault.match["group"]
        coordinator = self.broker.coordinator
        shard = coordinator.shard_for(group_id)
        group = shard.groups.get(group_id)
        if group is None or not group.members:
            raise FaultError(f"group {group_id!r} has no members here")
        from ..coordinator.consumer.group import ConsumerGroup
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

    def _coordinator_load(self, fault: Fault) -> dict:
        broker = self.broker
        targets = []
        group = fault.match.get("group")
        txn = fault.match.get("transactional_id")
        if group is not None:
            targets.append(("group", broker.coordinator, OFFSETS_TOPIC,
                            broker.coordinator.partition_for(group)))
        if txn is not None:
            targets.append(("transaction", broker.transactions, TRANSACTION_STATE_TOPIC,
                            broker.transactions.partition_for(txn)))
        if not targets:
            for kind, runtime, topic in (("group", broker.coordinator, OFFSETS_TOPIC),
                                         ("transaction", broker.transactions,
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
        from ..coordinator_log import read_entries
        self.loads.pop((topic, partition), None)
        log_ = self.broker.topics.partition(topic, partition).log
        runtime.load(partition, read_entries(log_))
        runtime.finish_loading(partition)
        log.info("coordinator loaded after fault", topic=topic, partition=partition)


def _carries_error(shape: Shape, request) -> bool:
    return shape.top_error is not None or any(_has_entries(request, c) for c in shape.chains)


def _names_match(match: dict, names: Names) -> bool:
    group = match.get("group")
    if group is not None and group not in names.groups:
        return False
    txn = match.get("transactional_id")
    if txn is not None and txn not in names.transactions:
        return False
    topic = match.get("topic")
    partition = match.get("partition")
    if partition is not None:
        if topic is not None:
            return (topic, partition) in names.partitions
        return any(p == partition for _t, p in names.partitions)
    if topic is not None and topic not in names.topics:
        return False
    return True


def _has_entries(request, chain: list[Step]) -> bool:
    """Whether the request names anything at the chain's last level."""
    def walk(obj, depth):
        items = getattr(obj, chain[depth].request.attr, None)
        if not items:
            return False
        if depth == len(chain) - 1:
            return True
        return any(walk(item, depth + 1) for item in items)
    return walk(request, 0)
