"""Fetch: read whole batches from each partition; long-poll through the fetch purgatory.

isolation_level 1 (read_committed) reads only below the last stable offset and gets the aborted
transactions overlapping what it read, so the consumer can drop their records; every fetch
reports the last stable offset. A read_committed long-poll is woken by transaction markers
(they move the last stable offset) as by appends.

No fetch sessions: every response carries session id 0, which tells clients to send full
requests (as against a Kafka broker with the session cache disabled).
"""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import FetchResponse

from ..log import OffsetOutOfRange
from .replicas import leader_error
from ..security.authorizer import AclOperation, ResourceType

NAME = "Fetch"
VERSIONS = (4, 12)

TopicData = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction
EMPTY = b""


def _error(index: int, error: ErrorCode, uncommitted: bool):
    """A partition's error answer: as Kafka's, it carries no offsets (-1)."""
    return PartitionData(partition_index=index, error_code=error, high_watermark=-1,
                         last_stable_offset=-1, log_start_offset=-1,
                         aborted_transactions=None if uncommitted else [],
                         preferred_read_replica=-1, records=EMPTY)


def read(broker, request, conn=None) -> tuple[list, int, bool]:
    """Read every requested partition: (topic responses, record bytes, any partition error).
    With ``conn``, a partition another node leads answers NOT_LEADER_OR_FOLLOWER (a parked
    fetch re-reads without it: leaders do not move while it waits).

    At most the broker's fetch.max.bytes are read, as on Kafka, and at most what is left of
    queued.max.response.bytes (answers not yet taken by the sockets) before anything is read:
    with nothing left, no records (the fetch waits as a long poll, see handle)."""
    topics = broker.topics
    remaining = min(request.max_bytes, broker.config["fetch.max.bytes"])
    budget = broker.server.fetch_budget()
    if budget is not None and budget < remaining:
        remaining = budget
    # Kafka's rule that the first batch goes whole, even past max_bytes, only while any
    # budget is left: one answer passes what is left by at most one batch
    first_whole = remaining > 0
    total = 0
    errors = False
    uncommitted = request.isolation_level == 0
    out = []
    for ft in request.topics:
        topic = topics.get(ft.topic)
        parts = []
        for fp in ft.partitions:
            index = fp.partition
            if topic is None or not 0 <= index < len(topic.partitions):
                errors = True
                parts.append(_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, uncommitted))
                continue
            error = leader_error(broker, conn, topic.partitions[index], fp.current_leader_epoch)
            if error != ErrorCode.NONE:
                errors = True
                parts.append(_error(index, error, uncommitted))
                continue
            log = topic.partitions[index].log
            hw = log.log_end_offset
            lso = log.last_stable_offset
            aborted = None
            try:
                limit = min(fp.partition_max_bytes, remaining)
                if uncommitted:
                    records = log.read(fp.fetch_offset, limit,
                                       min_one_message=first_whole and total == 0)
                else:
                    offset = fp.fetch_offset
                    records = log.read(offset, limit, min_one_message=first_whole and total == 0,
                                       max_offset=lso if lso < hw else None)
                    aborted = [] if offset >= lso else [
                        AbortedTransaction(producer_id=txn.producer_id,
                                           first_offset=txn.first_offset)
                        for txn in log.aborted_transactions(offset, len(records))]
            except OffsetOutOfRange:
                # the client resets its position with ListOffsets
                errors = True
                parts.append(_error(index, ErrorCode.OFFSET_OUT_OF_RANGE, uncommitted))
                continue
            size = len(records)
            total += size
            remaining = max(0, remaining - size)
            parts.append(PartitionData(
                partition_index=index, error_code=ErrorCode.NONE, high_watermark=hw,
                last_stable_offset=lso, log_start_offset=log.log_start_offset,
                aborted_transactions=aborted, preferred_read_replica=-1, records=records))
        out.append(TopicData(topic=ft.topic, partitions=parts))
    return out, total, errors


def handle(broker, ctx, request, respond) -> None:
    if request.session_id != 0 or request.session_epoch not in (-1, 0):
        respond(FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                              session_id=0, responses=[]))
        return
    if broker.authorizer is not None:
        respond = _authorize(broker.authorizer, ctx, request, respond)
    responses, total, errors = read(broker, request, ctx.conn)
    if total >= request.min_bytes or errors or request.max_wait_ms <= 0 or not request.topics:
        broker.metrics.fetched(responses)
        respond(FetchResponse(error_code=ErrorCode.NONE, session_id=0, responses=responses))
        return
    ctx.park()
    broker.fetches.wait(request, respond)


def _authorize(auth, ctx, request, respond):
    """Each topic needs READ: the partitions of the others are answered
    TOPIC_AUTHORIZATION_FAILED along with what the fetch reads (now or once it waited)."""
    may_read = auth.predicate(ctx, AclOperation.READ, ResourceType.TOPIC)
    denied = [ft for ft in request.topics if not may_read(ft.topic)]
    if not denied:
        return respond
    request.topics = [ft for ft in request.topics if may_read(ft.topic)]
    uncommitted = request.isolation_level == 0

    def respond_with_denied(response) -> None:
        response.responses.extend(TopicData(topic=ft.topic, partitions=[
            _error(fp.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED, uncommitted)
            for fp in ft.partitions]) for ft in denied)
        respond(response)
    return respond_with_denied
