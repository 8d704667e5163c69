"""TxnOffsetCommit: offsets committed as part of a transaction (sendOffsetsToTransaction). The
transaction coordinator checks that the group's __consumer_offsets partition is in the
transaction (version 2 clients, v5, add it here), then the group coordinator writes the offsets
as transactional records that become visible with the COMMIT marker."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import TxnOffsetCommitResponse

from ..security.authorizer import AclOperation, ResourceType

NAME = "TxnOffsetCommit"

E = ErrorCode
TopicResponse = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
PartitionResponse = TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition


def handle(broker, ctx, request, respond) -> None:
    version = ctx.api_version
    topics = broker.topics

    def answer(results: dict) -> None:
        out = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                error = results.get((t.name, p.partition_index), E.NONE)
                if version < 2 and error == E.COORDINATOR_LOAD_IN_PROGRESS:
                    error = E.COORDINATOR_NOT_AVAILABLE
                parts.append(PartitionResponse(partition_index=p.partition_index,
                                               error_code=int(error)))
            out.append(TopicResponse(name=t.name, partitions=parts))
        respond(TxnOffsetCommitResponse(topics=out))

    auth = broker.authorizer
    denied = set()
    if auth is not None:
        # WRITE on the transactional id, READ on the group, READ on each topic
        error = E.NONE
        if not auth.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                            request.transactional_id):
            error = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not auth.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
            error = E.GROUP_AUTHORIZATION_FAILED
        if error:
            answer({(t.name, p.partition_index): error for t in request.topics
                    for p in t.partitions})
            return
        may_read = auth.predicate(ctx, AclOperation.READ, ResourceType.TOPIC)
        denied = {t.name for t in request.topics if not may_read(t.name)}
    partitions = []
    for t in request.topics:
        if t.name in denied:
            partitions.extend((t.name, p.partition_index, p.committed_offset,
                               p.committed_leader_epoch, p.committed_metadata,
                               E.TOPIC_AUTHORIZATION_FAILED) for p in t.partitions)
            continue
        known = topics.get(t.name) is not None
        for p in t.partitions:
            error = None if known and topics.partition(t.name, p.partition_index) is not None \
                else E.UNKNOWN_TOPIC_OR_PARTITION
            partitions.append((t.name, p.partition_index, p.committed_offset,
                               p.committed_leader_epoch, p.committed_metadata, error))
    if not any(entry[5] is None for entry in partitions):
        answer({(t, p): err for t, p, _o, _e, _md, err in partitions})
        return
    if not request.group_id:
        answer({(t, p): E.INVALID_GROUP_ID for t, p, *_ in partitions})
        return

    def verified(error) -> None:
        if error != E.NONE:
            answer({(t, p): err or error for t, p, _o, _e, _md, err in partitions})
            return
        broker.coordinator.txn_offset_commit(request, version, partitions, answer)

    broker.transactions.verify_txn_offset_commit(
        request.transactional_id, request.producer_id, request.producer_epoch,
        request.group_id, version, verified)
