"""Reading partitions for a Fetch (Kafka's ReplicaManager.readFromLog): each partition of the
fetch read at its offset, within the fetch's byte limits and what is left of the broker's answer
budget, as the partition's Fetch answer. The Fetch handler (broker/apis/fetch.py) resolves the
request and its session first and makes the response; a fetch that found too little waits in
fetch_purgatory.py and reads again here."""
from __future__ import annotations

import uuid

from protocol.errors import ErrorCode
from protocol.messages import FetchResponse

from ..log import OffsetOutOfRange
from .replicas import leader_error

#: the first version whose leader errors carry the new leader (KIP-951)
LEADER_DISCOVERY_VERSION = 16

PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction
LeaderIdAndEpoch = FetchResponse.LeaderIdAndEpoch
EMPTY = b""
ZERO_UUID = uuid.UUID(int=0)


def partition_error(index: int, error: ErrorCode, uncommitted: bool):
    """A partition's error answer: as Kafka's, it carries no offsets (-1)."""
    return PartitionData(partition_index=index, error_code=error, high_watermark=-1,
                         last_stable_offset=-1, log_start_offset=-1,
                         aborted_transactions=None if uncommitted else [],
                         preferred_read_replica=-1, records=EMPTY)


class FetchWork:
    """One Fetch once its session is resolved: the partitions to read (``interesting``: key,
    topic name, topic id, request fields, the Partition as found at ``topics_version``), those
    refused before reading (``erroneous``: key, name, id, answer), the purgatory keys, and the
    context that makes the answer. ``quiet``: an incremental fetch, which skips a partition
    that has nothing new for it (no records at its offset, the high watermark and log start
    offset it was last told) without making an answer the session would drop anyway."""

    __slots__ = ("context", "interesting", "erroneous", "keys", "topics_version", "quiet",
                 "max_bytes", "min_bytes", "isolation_level", "version", "listener", "quota_ctx")

    def __init__(self, context, interesting, erroneous, keys, topics_version: int, request,
                 version: int, listener) -> None:
        self.context = context
        self.interesting = interesting
        self.erroneous = erroneous
        self.keys = keys
        self.topics_version = topics_version
        self.quiet = context.kind == "incremental"
        self.max_bytes = request.max_bytes
        self.min_bytes = request.min_bytes
        self.isolation_level = request.isolation_level
        self.version = version
        self.listener = listener
        #: the request, when a consumer_byte_rate quota is in force (see answer)
        self.quota_ctx = None


def read(broker, work: FetchWork, conn=None) -> tuple[list, int, bool]:
    """Read every partition of ``work``: ((key, name, id, answer) in order, record bytes, any
    read error). With ``conn``, a partition another node leads answers NOT_LEADER_OR_FOLLOWER
    (a parked fetch re-reads without it: leaders do not move while it waits).

    At most the broker's fetch.max.bytes are read, as on Kafka, and at most what is left of
    queued.max.response.bytes (answers not yet taken by the sockets) before anything is read:
    with nothing left, no records (the fetch waits as a long poll, see handle)."""
    topics = broker.topics
    remaining = min(work.max_bytes, broker.config["fetch.max.bytes"])
    budget = broker.server.answer_budget.fetch_budget()
    if budget is not None and budget < remaining:
        remaining = budget
    # Kafka's rule that the first batch goes whole, even past max_bytes, only while any
    # budget is left: one answer passes what is left by at most one batch
    first_whole = remaining > 0
    total = 0
    errors = False
    uncommitted = work.isolation_level == 0
    quiet = work.quiet
    # the partitions found when the fetch came are still the topics' (none deleted since)
    same_topics = topics.version == work.topics_version
    # one node leads everything: only the leader epoch the fetcher names can be wrong
    single = broker.cluster.single
    out = []
    for key, name, topic_id, fp, partition in work.interesting:
        index = fp.partition
        if not same_topics or partition is None:
            topic = topics.get(name)
            if topic is None or not 0 <= index < len(topic.partitions):
                # deleted while the fetch waited
                errors = True
                out.append((key, name, topic_id, partition_error(
                    index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, uncommitted)))
                continue
            if topic_id != ZERO_UUID and topic.topic_id != topic_id:
                # a session's partition whose topic was re-created under its name: Kafka's
                # ReplicaManager finds the log's id differs (a fetch naming the old id
                # afresh is answered UNKNOWN_TOPIC_ID before reading)
                errors = True
                out.append((key, name, topic_id, partition_error(
                    index, ErrorCode.INCONSISTENT_TOPIC_ID, uncommitted)))
                continue
            partition = topic.partitions[index]
        epoch = fp.current_leader_epoch
        if not single or (epoch != -1 and epoch != partition.leader_epoch):
            error = leader_error(broker, conn, partition, epoch)
            if error != ErrorCode.NONE:
                errors = True
                out.append((key, name, topic_id, _leader_moved(partition, index, error,
                                                               uncommitted, work.version)))
                continue
        log = partition.log
        hw = log.log_end_offset
        if (quiet and fp.fetch_offset == hw and fp.high_watermark == hw
                and fp.local_log_start_offset == log.log_start_offset):
            continue  # nothing new for this fetcher: an incremental answer leaves it out
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
            out.append((key, name, topic_id, partition_error(index, ErrorCode.OFFSET_OUT_OF_RANGE,
                                                    uncommitted)))
            continue
        size = len(records)
        total += size
        remaining = max(0, remaining - size)
        out.append((key, name, topic_id, PartitionData(
            partition_index=index, error_code=ErrorCode.NONE, high_watermark=hw,
            last_stable_offset=lso, log_start_offset=log.log_start_offset,
            aborted_transactions=aborted, preferred_read_replica=-1, records=records)))
    return out, total, errors


def _leader_moved(partition, index: int, error: int, uncommitted: bool, version: int):
    """A leader error; from v16 it names the partition's current leader and epoch (KIP-951)."""
    data = partition_error(index, error, uncommitted)
    if version >= LEADER_DISCOVERY_VERSION:
        data.current_leader = LeaderIdAndEpoch(leader_id=partition.leader,
                                               leader_epoch=partition.leader_epoch)
    return data
