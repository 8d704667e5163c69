"""OffsetForLeaderEpoch: the end offset of a leader epoch in a partition's log. Consumers ask it
after a leader change (or a seek carrying an epoch) to check that their position was not
truncated away: the answer is the start of the first later epoch, or the log end offset for
the current one. The request's current_leader_epoch fences a caller with stale metadata."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import OffsetForLeaderEpochResponse

from ..security.authorizer import AclOperation, ResourceType

from ..partitions.replicas import leader_epochs, leader_error

NAME = "OffsetForLeaderEpoch"

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset

UNDEFINED_EPOCH = UNDEFINED_OFFSET = -1


def end_offset_for(entries: list[tuple[int, int]], requested: int,
                   log_end_offset: int) -> tuple[int, int]:
    """(epoch, end offset) for a requested epoch, by Kafka's leader epoch cache rules over
    ``entries`` [(epoch, start offset)] in epoch order: the latest epoch ends at the log end;
    an older one at the start of the next known epoch, reported as the largest known epoch at or
    below it (or itself when none is known below it); an epoch above every known one is
    undefined."""
    if requested == UNDEFINED_EPOCH:
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET
    if entries and entries[-1][0] == requested:
        return requested, log_end_offset
    floor = None
    for epoch, start in entries:
        if epoch > requested:
            return (requested if floor is None else floor), start
        floor = epoch
    return UNDEFINED_EPOCH, UNDEFINED_OFFSET


def _answer(broker, conn, topic_name: str, p) -> EpochEndOffset:
    partition = broker.topics.partition(topic_name, p.partition)
    if partition is None:
        return EpochEndOffset(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              partition=p.partition)
    # the caller's metadata may be older (FENCED) or newer (UNKNOWN) than this leader's; Kafka
    # serves it from the leader only, even to followers
    error = leader_error(broker, conn, partition, p.current_leader_epoch)
    if error != ErrorCode.NONE:
        return EpochEndOffset(error_code=error, partition=p.partition)
    epoch, end = end_offset_for(leader_epochs(broker, partition), p.leader_epoch,
                                partition.log.log_end_offset)
    return EpochEndOffset(error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=epoch,
                          end_offset=end)


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    may_describe = None
    if auth is not None and not auth.cluster(ctx, AclOperation.CLUSTER_ACTION):
        # consumers check for truncation (KIP-320) with DESCRIBE on the topic
        may_describe = auth.predicate(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC)
    answered, denied = [], []
    for t in request.topics:
        if may_describe is not None and not may_describe(t.topic):
            denied.append(TopicResult(topic=t.topic, partitions=[
                EpochEndOffset(partition=p.partition,
                               error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                               leader_epoch=UNDEFINED_EPOCH, end_offset=UNDEFINED_OFFSET)
                for p in t.partitions]))
        else:
            answered.append(TopicResult(topic=t.topic, partitions=[
                _answer(broker, ctx.conn, t.topic, p) for p in t.partitions]))
    respond(OffsetForLeaderEpochResponse(topics=answered + denied))
