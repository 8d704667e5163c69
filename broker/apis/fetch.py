"""Fetch: read whole batches from each partition; long-poll through the fetch purgatory.

isolation_level 1 (read_committed) reads only below the last stable offset and gets the aborted
transactions overlapping what it read, so the consumer can drop their records; every fetch
reports the last stable offset. A read_committed long-poll is woken by transaction markers
(they move the last stable offset) as by appends.

Versions 13+ name topics by id: an id the broker does not know is answered UNKNOWN_TOPIC_ID
(a topic deleted and re-created has a new id). Fetch sessions (KIP-227,
broker/partitions/fetch_sessions.py) let a consumer send only what changed and get only the
partitions that changed. From v16 a partition answered NOT_LEADER_OR_FOLLOWER or
FENCED_LEADER_EPOCH carries its current leader, and the answer that leader's endpoint (KIP-951),
so the client need not ask Metadata first.

As KafkaApis orders them, the partitions read come first and those refused before reading
(unknown topic id, not authorized, unknown topic or partition) after; only an error from the
read itself (not the leader, fenced epoch, offset out of range) ends a long poll early.
"""
from __future__ import annotations

import copy

from protocol.errors import ErrorCode
from protocol.messages import FetchResponse

from ..partitions.delayed_fetch import DelayedFetch
from ..partitions.read import EMPTY, ZERO_UUID, FetchWork, partition_error, read
from ..security.authorizer import AclOperation, ResourceType

NAME = "Fetch"

#: the first version that names topics by id
TOPIC_ID_VERSION = 13

TopicData = FetchResponse.FetchableTopicResponse
NodeEndpoint = FetchResponse.NodeEndpoint


def answer(broker, work: FetchWork, reads: list) -> FetchResponse:
    """The response to ``work`` given what was read: the session keeps only what changed (an
    incremental fetch) or is created now (a full fetch asking for one).

    Under a consumer_byte_rate quota the bytes read count toward the client's rate; a client
    over it, or over its request_percentage, gets, as from Kafka, an empty answer carrying the
    throttle time (the bytes are not counted then, and no session is created or moved on)."""
    ctx = work.quota_ctx
    if ctx is not None and work.context.kind != "error":
        throttled = _throttled(broker, ctx, work, reads)
        if throttled is not None:
            return throttled
    names = {}
    updates = []
    for key, name, topic_id, data in reads:
        names[key] = (name, topic_id)
        updates.append((key, data))
    for key, name, topic_id, data in work.erroneous:
        names[key] = (name, topic_id)
        updates.append((key, data))
    error, session_id, kept = work.context.answer(updates)
    responses = []
    last = None
    leaders = set()
    for key, data in kept:
        name, topic_id = names[key]
        if last is None or (last.topic, last.topic_id) != (name or "", topic_id):
            last = TopicData(topic=name or "", topic_id=topic_id, partitions=[])
            responses.append(last)
        last.partitions.append(data)
        if data.current_leader is not None and data.current_leader.leader_id >= 0:
            leaders.add(data.current_leader.leader_id)
    endpoints = []
    if leaders and work.listener is not None:
        alive = set(broker.cluster.alive())
        for node in sorted(leaders):
            if node in alive:
                host, port = broker.advertised(work.listener, node)
                endpoints.append(NodeEndpoint(node_id=node, host=host, port=port, rack=None))
    broker.metrics.fetched(responses)
    return FetchResponse(throttle_time_ms=0, error_code=error, session_id=session_id,
                         responses=responses, node_endpoints=endpoints)


def _throttled(broker, ctx, work: FetchWork, reads: list) -> FetchResponse | None:
    """Kafka's order: the request's time and the answer's bytes both count first; over either
    quota the answer is empty and its bytes are taken back."""
    quotas = broker.client_quotas
    if quotas.request.enabled:
        quotas.record_request(ctx)
        ctx.handled = 0.0  # counted here: the look when it is answered adds nothing
    size = None
    if quotas.fetch.enabled:
        size = _response_size(ctx, work, reads)
        quotas.record_bytes(quotas.fetch, ctx, size)
    if not ctx.throttle_ms:
        return None
    if size is not None:
        conn = ctx.conn
        quotas.fetch.unrecord(conn.principal.name, ctx.client_id, size, conn.clock())
    context = work.context
    session_id = context.session.id if context.kind == "incremental" else 0
    return FetchResponse(throttle_time_ms=ctx.throttle_ms, error_code=ErrorCode.NONE,
                         session_id=session_id, responses=[], node_endpoints=[])


def _uvarint_size(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def _response_size(ctx, work: FetchWork, reads: list) -> int:
    """What a fetch counts toward consumer_byte_rate, as Kafka's FetchResponse.sizeOf counts
    it: the size field, the response header and the body with every partition read. The body
    is encoded without its records (their sizes are added), so nothing large is copied."""
    version = work.version
    flexible = version >= 12
    topics = []
    last = None
    records_size = 0
    for _key, name, topic_id, data in reads + work.erroneous:
        if last is None or (last.topic, last.topic_id) != (name or "", topic_id):
            last = TopicData(topic=name or "", topic_id=topic_id, partitions=[])
            topics.append(last)
        records = data.records
        if records:
            data = copy.copy(data)
            data.records = EMPTY
            records_size += len(records)
            if flexible:  # a compact length: its varint grows with the records
                records_size += _uvarint_size(len(records) + 1) - 1
        last.partitions.append(data)
    body = FetchResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0,
                         responses=topics, node_endpoints=[]).encode(version)
    header = 4 if ctx.codec[2] == 0 else 5
    return 4 + header + len(body) + records_size


def _request_partitions(broker, request, version: int):
    """The request's partitions as (key, topic name or None, topic id, fields), one per key
    (a repeated partition counts once, its last fields kept, as Kafka's map keeps it), and its
    forgotten partitions' keys. From v13 the key is the topic id, else the name."""
    by_key = {}
    forgotten = []
    if version >= TOPIC_ID_VERSION:
        name_of = broker.topics.name_of
        for ft in request.topics:
            name = name_of(ft.topic_id)
            for fp in ft.partitions:
                by_key[(ft.topic_id, fp.partition)] = ((ft.topic_id, fp.partition), name,
                                                       ft.topic_id, fp)
        for ft in request.forgotten_topics_data:
            forgotten.extend((ft.topic_id, p) for p in ft.partitions)
    else:
        for ft in request.topics:
            for fp in ft.partitions:
                by_key[(ft.topic, fp.partition)] = ((ft.topic, fp.partition), ft.topic,
                                                    ZERO_UUID, fp)
        for ft in request.forgotten_topics_data or ():
            forgotten.extend((ft.topic, p) for p in ft.partitions)
    return list(by_key.values()), forgotten


def _resolve(broker, ctx, context, uncommitted: bool) -> tuple[list, list, list]:
    """Sort the context's partitions as KafkaApis does before reading: unknown topic id,
    not authorized, unknown topic or partition (``erroneous``, answered as such), or to be
    read (``interesting``, with its Partition); and the purgatory keys of those to read."""
    interesting = []
    erroneous = []
    may_read = None
    if broker.authorizer is not None:
        may_read = broker.authorizer.predicate(ctx, AclOperation.READ, ResourceType.TOPIC)
    topics = broker.topics
    for key, name, topic_id, fp in context.partitions(broker.topics.name_of):
        index = fp.partition
        if name is None:
            erroneous.append((key, name, topic_id,
                              partition_error(index, ErrorCode.UNKNOWN_TOPIC_ID, uncommitted)))
            continue
        if may_read is not None and not may_read(name):
            erroneous.append((key, name, topic_id, partition_error(
                index, ErrorCode.TOPIC_AUTHORIZATION_FAILED, uncommitted)))
            continue
        topic = topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            erroneous.append((key, name, topic_id, partition_error(
                index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, uncommitted)))
            continue
        if topic_id != ZERO_UUID and topic.topic_id != topic_id:
            # read() answers it INCONSISTENT_TOPIC_ID: resolve nothing for it
            interesting.append((key, name, topic_id, fp, None))
            continue
        interesting.append((key, name, topic_id, fp, topic.partitions[index]))
    keys = [("fetch", name, fp.partition) for _k, name, _i, fp, _p in interesting]
    return interesting, erroneous, keys


def handle(broker, ctx, request, respond) -> None:
    version = ctx.api_version
    fetch_data, forgotten = _request_partitions(broker, request, version)
    if version >= 15:  # the replica state is a tagged field: absent, a consumer's (-1)
        state = request.replica_state
        replica_id = -1 if state is None else state.replica_id
    else:
        replica_id = request.replica_id
    context = broker.fetch_sessions.new_context(
        version, request.session_id, request.session_epoch, replica_id >= 0, fetch_data,
        forgotten)
    broker.metrics.fetch_kind(context.kind)
    uncommitted = request.isolation_level == 0
    topics = broker.topics
    topics_version = topics.version
    session = context.session
    if session is not None and broker.authorizer is None:
        # an incremental fetch of unchanged partitions and topics: as the last one sorted them
        stamp = (topics_version, uncommitted)
        resolved = session.resolved
        if resolved is None or resolved[0] != stamp:
            resolved = session.resolved = (stamp, *_resolve(broker, ctx, context, uncommitted))
        _stamp, interesting, erroneous, keys = resolved
    else:
        interesting, erroneous, keys = _resolve(broker, ctx, context, uncommitted)
    work = FetchWork(context, interesting, erroneous, keys, topics_version, request, version,
                     ctx.listener)
    quotas = broker.client_quotas
    if (quotas.fetch.enabled or quotas.request.enabled) and replica_id < 0:
        # at most what the quota allows in one window, as Kafka caps a consumer's fetch
        window = quotas.fetch.max_value_in_window(ctx.conn.principal.name, ctx.client_id)
        if window is not None:
            work.max_bytes = min(work.max_bytes, int(min(window, 2 ** 31 - 1)))
            work.min_bytes = min(work.min_bytes, work.max_bytes)
        work.quota_ctx = ctx
    reads, total, errors = read(broker, work, ctx.conn)
    if (total >= work.min_bytes or errors or request.max_wait_ms <= 0
            or not interesting):
        respond(answer(broker, work, reads))
        return
    ctx.park()
    broker.fetches.wait(DelayedFetch(broker, work, request.max_wait_ms,
                                     lambda reads: respond(answer(broker, work, reads))))
