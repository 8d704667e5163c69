"""ShareFetch: a share consumer acquires records of its share group's partitions (KIP-932), with
acknowledgements of earlier records riding on the same request.

The share session (broker/coordinator/group/share/sessions.py) comes first: epoch 0 opens one
(and may carry no acknowledgements), -1 closes it once answered (fetching nothing), any other epoch
must be the session's next. Acknowledgements are applied next (share_acknowledge.acknowledge),
then every partition of the session is read at its share partition's fetch offset
(broker/coordinator/group/share/partition.py acquires what is available or new; whole batches go
back with the acquired ranges and their delivery counts). Nothing acquired: the request waits in
the fetch purgatory like a long-poll Fetch, woken by appends and by records released for
redelivery, until ``max_wait_ms``.

A read_committed group (``share.isolation.level``) reads below the last stable offset; batches
of aborted transactions are archived, never delivered (transaction markers are acquired, as
Kafka does, and acknowledged by the consumer as gaps).
"""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode
from protocol.records import iter_batches

from ..coordinator.group.share.partition import LogBatch
from ..coordinator.group.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSessionError
from ..log import OffsetOutOfRange
from ..purgatory import DelayedOperation
from ..security.authorization import group_denied
from ..security.authorizer import AclOperation, ResourceType
from ..partitions.replicas import leader_error
from .share_acknowledge import RENEW_VERSION, acknowledge
from .share_group_heartbeat import valid_member_id

NAME = "ShareFetch"

E = ErrorCode
Response = m.ShareFetchResponse
PartitionData = Response.PartitionData
LeaderIdAndEpoch = Response.LeaderIdAndEpoch
AcquiredRecords = Response.AcquiredRecords

#: ShareAcquireMode 1: stop at MaxRecords exactly (0, batch-optimized, finishes a batch)
RECORD_LIMIT = 1
#: the most bytes read from one partition for one ShareFetch: bounds the records a fetch walks
PARTITION_READ_BYTES = 1 << 20
NO_LEADER = LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)


def _error(code: ErrorCode):
    """A refused ShareFetch: as Kafka's getErrorResponse, the code and nothing else."""
    return Response(error_code=code, responses=[], node_endpoints=[])


class ShareFetchWork:
    """One ShareFetch once its session and acknowledgements are done: what to read and how the
    answer is made."""

    __slots__ = ("ctx", "group_id", "member_id", "keys", "max_records", "record_limit",
                 "max_bytes", "acks", "version", "watch", "session")

    def __init__(self, ctx, request, keys: list, acks: dict, version: int, session) -> None:
        self.ctx = ctx
        self.group_id = request.group_id
        self.member_id = request.member_id
        self.keys = keys
        self.max_records = request.max_records if request.max_records > 0 else 2**31 - 1
        self.record_limit = version >= 2 and request.share_acquire_mode == RECORD_LIMIT
        self.max_bytes = request.max_bytes
        self.acks = acks
        self.version = version
        self.watch: list = []
        #: the share session the fetch belongs to: once it has ended (its connection closed,
        #: its member left), a parked fetch acquires nothing more for it
        self.session = session


def _batches(log, data, offset: int, read_committed: bool) -> list[LogBatch]:
    """The batches read, each marked skip when no share consumer may see its records: under
    read_committed, the batches of transactions that aborted. Control batches are acquired like
    records, as Kafka acquires them (the consumer acknowledges their offsets as gaps)."""
    aborted = log.aborted_transactions(offset, len(data)) if read_committed else ()
    out = []
    for batch in iter_batches(data):
        skip = False
        if aborted and batch.is_transactional and not batch.is_control:
            pid = batch.producer_id
            skip = any(t.producer_id == pid and t.first_offset <= batch.base_offset <= t.last_offset
                       for t in aborted)
        out.append(LogBatch(batch.base_offset, batch.last_offset, skip))
    return out


def _slice(data, acquired: list, batches: list[LogBatch]):
    """The bytes of the batches from the first to the last that hold an acquired offset."""
    first, last = acquired[0][0], acquired[-1][1]
    start = end = None
    position = 0
    for batch, raw in zip(batches, iter_batches(data)):
        size = raw.size
        if batch.last_offset >= first and start is None:
            start = position
        if batch.base_offset <= last:
            end = position + size
        position += size
    return bytes(data[start:end])


def _may_initialize(broker, group_id: str, topic: str) -> bool:
    """A new share partition is initialized only for a share group subscribed to its topic."""
    shard = broker.coordinator.shard_for(group_id)
    group = None if shard.loading else shard.groups.get(group_id)
    return getattr(group, "group_type", None) == "share" and topic in group.subscribed_names


def read(broker, work: ShareFetchWork) -> tuple[dict, int]:
    """Acquire in every partition of the work -> ({key: PartitionData} of the partitions that
    acquired something or failed, records acquired)."""
    shares = broker.shares
    topics = broker.topics
    group_id = work.group_id
    read_committed = shares.read_committed(group_id)
    may_read = None
    if broker.authorizer is not None:
        may_read = broker.authorizer.predicate(work.ctx, AclOperation.READ, ResourceType.TOPIC)
    remaining_records = work.max_records
    remaining_bytes = min(work.max_bytes, broker.config["fetch.max.bytes"])
    now = broker.clock()
    out = {}
    acquired_total = 0
    watch = []
    for key in work.keys:
        topic_id, index = key
        name = topics.name_of(topic_id)
        if name is None:
            out[key] = PartitionData(partition_index=index, error_code=E.UNKNOWN_TOPIC_ID,
                                     current_leader=NO_LEADER, records=b"", acquired_records=[])
            continue
        if may_read is not None and not may_read(name):
            out[key] = PartitionData(partition_index=index,
                                     error_code=E.TOPIC_AUTHORIZATION_FAILED,
                                     current_leader=NO_LEADER, records=b"", acquired_records=[])
            continue
        topic = topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            out[key] = PartitionData(partition_index=index,
                                     error_code=E.UNKNOWN_TOPIC_OR_PARTITION,
                                     current_leader=NO_LEADER, records=b"", acquired_records=[])
            continue
        partition = topic.partitions[index]
        error = leader_error(broker, work.ctx.conn, partition)
        if error != E.NONE:
            out[key] = PartitionData(partition_index=index, error_code=error,
                                     current_leader=LeaderIdAndEpoch(
                                         leader_id=partition.leader,
                                         leader_epoch=partition.leader_epoch),
                                     records=b"", acquired_records=[])
            continue
        watch.append(("fetch", name, index))
        if remaining_records <= 0 or remaining_bytes <= 0:
            continue
        log = partition.log
        if shares.get(group_id, key) is None and not _may_initialize(broker, group_id, name):
            # as Kafka: a share partition exists only for a share group subscribed to its
            # topic (Kafka's group coordinator initializes it); a ShareFetch naming any other
            # group gets nothing, and the broker keeps no state for it
            out[key] = PartitionData(partition_index=index, error_code=E.UNKNOWN_SERVER_ERROR,
                                     current_leader=NO_LEADER, records=b"",
                                     acquired_records=[])
            continue
        sp = shares.partition(group_id, key, log.log_start_offset, log.log_end_offset,
                              log.offset_for_timestamp)
        sp.move_start_to(log.log_start_offset)
        if not sp.can_acquire():
            continue
        offset = sp.fetch_offset()
        bound = log.last_stable_offset if read_committed else log.high_watermark
        if offset >= bound:
            continue
        try:
            data = log.read(offset, min(remaining_bytes, PARTITION_READ_BYTES),
                            min_one_message=True,
                            max_offset=bound if bound < log.log_end_offset else None)
        except OffsetOutOfRange:
            continue
        if not data:
            continue
        batches = _batches(log, data, offset, read_committed)
        acquired = sp.acquire(work.member_id, batches, now, remaining_records,
                              work.record_limit)
        shares.locks_changed(group_id, key)
        if not acquired:
            continue
        count = sum(last - first + 1 for first, last, _c in acquired)
        records = _slice(data, acquired, batches)
        remaining_records -= count
        remaining_bytes -= len(records)
        acquired_total += count
        out[key] = PartitionData(
            partition_index=index, error_code=E.NONE,
            current_leader=LeaderIdAndEpoch(leader_id=partition.leader,
                                            leader_epoch=partition.leader_epoch),
            records=records, acquired_records=[
                AcquiredRecords(first_offset=first, last_offset=last, delivery_count=count)
                for first, last, count in acquired])
    work.watch = watch
    return out, acquired_total


def answer(broker, work: ShareFetchWork, fetched: dict):
    """The response: fetched partitions, then acknowledgement results merged in (a partition
    that was only acknowledged gets a partition entry of its own)."""
    by_topic: dict = {}
    for (topic_id, index), data in fetched.items():
        by_topic.setdefault(topic_id, {})[index] = data
    for (topic_id, index), (code, message) in work.acks.items():
        data = by_topic.setdefault(topic_id, {}).get(index)
        if data is None:
            data = by_topic[topic_id][index] = PartitionData(
                partition_index=index, error_code=E.NONE, current_leader=NO_LEADER,
                records=b"", acquired_records=[])
        data.acknowledge_error_code = code
        data.acknowledge_error_message = message
    responses = [Response.ShareFetchableTopicResponse(
        topic_id=topic_id, partitions=list(parts.values()))
        for topic_id, parts in by_topic.items()]
    return Response(error_code=E.NONE,
                    acquisition_lock_timeout_ms=broker.shares.lock_duration_ms(work.group_id),
                    responses=responses, node_endpoints=[])


class DelayedShareFetch(DelayedOperation):
    """A ShareFetch that acquired nothing, watched by its partitions' appends and releases."""

    kind = "share_fetch"

    def __init__(self, broker, work: ShareFetchWork, max_wait_ms: int, respond) -> None:
        super().__init__(max_wait_ms)
        self.broker = broker
        self.work = work
        self.respond = respond
        self.result: dict | None = None
        self.fresh = True

    def try_complete(self) -> bool:
        if self.fresh:      # the handler has just tried
            self.fresh = False
            return False
        work = self.work
        if self.broker.shares.sessions.get(work.group_id, work.member_id) is not work.session:
            # the session ended while the fetch waited: records released for others (by that
            # very end, say) must not be acquired again for a member nobody answers
            self.result = {}
            return True
        fetched, acquired = read(self.broker, work)
        if acquired or any(d.error_code for d in fetched.values()):
            self.result = fetched
            return True
        return False

    def on_complete(self) -> None:
        self.respond(answer(self.broker, self.work, self.result or {}))


def handle(broker, ctx, request, respond) -> None:
    version = ctx.api_version
    group_id = request.group_id
    if group_id is None:
        respond(_error(E.INVALID_REQUEST))
        return
    if group_denied(broker.authorizer, ctx, group_id):
        respond(_error(E.GROUP_AUTHORIZATION_FAILED))
        return
    member_id = request.member_id
    if not valid_member_id(member_id):
        respond(_error(E.INVALID_REQUEST))
        return
    is_renew = version >= RENEW_VERSION and bool(request.is_renew_ack)
    if is_renew and (request.max_bytes or request.min_bytes or request.max_records
                     or request.max_wait_ms):
        # KIP-1222: a fetch carrying renewals fetches nothing (Kafka's answer has no message)
        respond(_error(E.INVALID_REQUEST))
        return
    keys = []
    has_acks = False
    for topic in request.topics:
        for p in topic.partitions:
            keys.append((topic.topic_id, p.partition_index))
            has_acks = has_acks or bool(p.acknowledgement_batches)
    keys = list(dict.fromkeys(keys))
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    epoch = request.share_session_epoch
    sessions = broker.shares.sessions
    try:
        if epoch == INITIAL_EPOCH:
            if has_acks:
                respond(_error(E.INVALID_REQUEST))
                return
            session = sessions.open(group_id, member_id, keys, ctx.conn)
        elif epoch == FINAL_EPOCH:
            session = sessions.final(group_id, member_id)
        else:
            session = sessions.advance(group_id, member_id, epoch, keys, forgotten)
    except ShareSessionError as exc:
        code = exc.code     # ``exc`` is unbound once the except clause ends: the timer keeps this
        if code == E.SHARE_SESSION_LIMIT_REACHED and request.max_wait_ms > 0:
            # as Kafka: the refusal waits MaxWaitMs, so a consumer retrying it does not spin
            ctx.park()
            broker.timer.call_later(request.max_wait_ms, lambda: respond(_error(code)))
            return
        respond(_error(code))
        return
    acks = acknowledge(broker, ctx, group_id, member_id, request.topics, version,
                       is_renew) if has_acks else {}
    fetch_keys = [] if epoch == FINAL_EPOCH or is_renew else list(session.partitions)
    work = ShareFetchWork(ctx, request, fetch_keys, acks, version, session)
    fetched, acquired = read(broker, work) if fetch_keys else ({}, 0)
    if acquired or not fetch_keys or request.max_wait_ms <= 0 or \
            any(d.error_code for d in fetched.values()) or not work.watch:
        respond(answer(broker, work, fetched))
        if epoch == FINAL_EPOCH:
            broker.shares.close_session(group_id, member_id)
        return
    ctx.park()
    broker.fetches.purgatory.try_complete_else_watch(
        DelayedShareFetch(broker, work, request.max_wait_ms, respond), work.watch)
