"""Where an error goes in an API's answer, derived from the request and response schemas: the
levels that carry an error code (top level, per group, per transactional id, per topic, per
partition) are paired with the request's arrays of the same kind. Fault injection
(broker/faults.py) answers its errors through this, and so does a node asked about a
group or transaction it does not coordinate (broker/network/coordinator_routing.py).

An error aimed at some entries (``match``: a group, transactional id, topic or partition, or a
set of them) goes on those entries only, and the rest of the request is handled as usual;
otherwise a partition-level error (NOT_LEADER_OR_FOLLOWER, ...) goes on every partition the
request names and any other error at the first level that carries one (the top level, or each
group).
"""
from __future__ import annotations

from protocol.errors import ErrorCode

#: errors Kafka reports per partition: without a topic in the match they go on every
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


def _is(want, value) -> bool:
    """A match value: one name, or a set of them."""
    return value in want if isinstance(want, (set, frozenset)) else value == want


def _covers(match: dict, kind: str, item, shape: ArrayShape, key_type, topics) -> bool:
    """Whether ``match`` takes in one entry of a request array."""
    if kind == "topic":
        want = match.get("topic")
        return want is None or _is(want, item if shape.sdef is None else
                                   topic_name(item, shape.keys, topics))
    if kind == "partition":
        want = match.get("partition")
        return want is None or (item if shape.sdef is None else
                                getattr(item, shape.keys[0])) == want
    if kind in ("group", "transaction", "key"):
        value = item if shape.sdef is None else getattr(item, shape.keys[0])
        if kind == "key":
            kind = "transaction" if key_type == TRANSACTION_KEY else "group"
        want = match.get("group" if kind == "group" else "transactional_id")
        return want is None or _is(want, value)
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
    """Takes the entries ``match`` covers out of a request and makes their error entries."""

    def __init__(self, match: dict, error: int, chain: list[Step], version: int, topics,
                 key_type, message: str) -> None:
        self.match = match
        self.error = error
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
            if not _covers(self.match, step.kind, item, rq, self.key_type, self.topics):
                kept.append(item)
                continue
            entry = _entry(rs, item, rq, self.topics)
            if last:
                _fill_error(entry, rs.sdef, self.version, rs.error_attr, self.error,
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


def carries_error(shape: Shape, request) -> bool:
    return shape.top_error is not None or any(_has_entries(request, c) for c in shape.chains)


def names_match(match: dict, names: Names) -> bool:
    """Whether a request that names ``names`` has anything ``match`` takes in."""
    group = match.get("group")
    if group is not None and not any(_is(group, g) for g in names.groups):
        return False
    txn = match.get("transactional_id")
    if txn is not None and not any(_is(txn, t) for t in names.transactions):
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


def answer_error(broker, conn, req, request, respond, error: int, match: dict,
                 message: str, dropped: str) -> None:
    """Answer ``request`` with ``error`` where its API carries it, on the entries ``match``
    takes in (the handler answers the others and the two answers are merged). A request that
    gets no answer (Produce acks=0) has its connection closed instead, as Kafka closes it;
    ``dropped`` is the reason logged."""
    handler = req.handler
    shape = shape_of(handler, req.api_version)
    chain = _level(match, error, shape, request)
    no_answer = getattr(request, "acks", None) == 0
    if chain is None:
        if no_answer:
            conn.drop(dropped)
            return
        response = shape.response_cls()
        if shape.top_error is not None:
            _fill_error(response, handler.response._def.root, req.api_version,
                        shape.top_error, error, message)
        respond(response)
        return
    topics = broker.topics
    errors = Split(match, error, chain, req.api_version, topics,
                   getattr(request, "key_type", None), message).run(request)
    first = chain[0]
    left = bool(getattr(request, first.request.attr, None))
    if no_answer:
        if left:
            handler.handle(broker, req, request, lambda _none: None)
        conn.drop(dropped)
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

    handler.handle(broker, req, request, merged)


def _level(match: dict, error: int, shape: Shape, request) -> list[Step] | None:
    """The chain whose last level gets the error, or None for the top level."""
    levels = [c for c in shape.levels() if _has_entries(request, c)]
    if "partition" in match:
        wanted = [c for c in levels if c[-1].kind == "partition"]
        return wanted[-1] if wanted else (levels[-1] if levels else None)
    if "topic" in match:
        for kind in ("topic", "partition"):
            wanted = [c for c in levels if c[-1].kind == kind]
            if wanted:
                return wanted[0]
        return levels[-1] if levels else None
    if error in PARTITION_ERRORS:
        return levels[-1] if levels else None
    if shape.top_error is not None or not levels:
        return None
    return levels[0]
