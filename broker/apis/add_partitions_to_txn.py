"""AddPartitionsToTxn: a producer adds partitions to its transaction before writing to them
(transaction version 1 clients use v0-3; v4+ is the brokers' batched form with VerifyOnly)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import AddPartitionsToTxnResponse as Response

from ..security.authorizer import AclOperation, ResourceType
from ..topics import INTERNAL_TOPICS

NAME = "AddPartitionsToTxn"

E = ErrorCode
TopicResult = Response.AddPartitionsToTxnTopicResult
PartitionResult = Response.AddPartitionsToTxnPartitionResult
Result = Response.AddPartitionsToTxnResult


def _topic_results(errors: dict) -> list:
    by_topic: dict[str, list] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(
            PartitionResult(partition_index=partition, partition_error_code=int(error)))
    return [TopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()]


def handle(broker, ctx, request, respond) -> None:
    version = ctx.api_version
    if version < 4:
        transactions = [(request.v3_and_below_transactional_id,
                         request.v3_and_below_producer_id, request.v3_and_below_producer_epoch,
                         False, request.v3_and_below_topics)]
    else:
        transactions = [(t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only,
                         t.topics) for t in request.transactions]
    results: list = []

    def add_result(transactional_id: str, errors: dict) -> None:
        results.append((transactional_id, errors))
        if len(results) < len(transactions):
            return
        if version < 4:
            respond(Response(results_by_topic_v3_and_below=_topic_results(results[0][1])))
        else:
            respond(Response(error_code=0, results_by_transaction=[
                Result(transactional_id=tid, topic_results=_topic_results(errs))
                for tid, errs in results]))

    auth = broker.authorizer
    if auth is not None and version >= 4 and not auth.cluster(ctx, AclOperation.CLUSTER_ACTION):
        # the batched form is for brokers only
        respond(Response(error_code=E.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[]))
        return
    if not transactions:
        respond(Response(error_code=0, results_by_transaction=[]))
        return
    coordinator = broker.transactions
    may_write = auth.predicate(ctx, AclOperation.WRITE, ResourceType.TOPIC) \
        if auth is not None and version < 4 else None
    for transactional_id, producer_id, producer_epoch, verify_only, topics in transactions:
        partitions = [(t.name, p) for t in topics for p in t.partitions]
        if may_write is not None:
            if not auth.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                transactional_id):
                add_result(transactional_id, dict.fromkeys(
                    partitions, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
                continue
            # internal topics are never writable by clients
            denied = {tp for tp in partitions if tp[0] in INTERNAL_TOPICS or not may_write(tp[0])}
        else:
            denied = set()
        unknown = {tp for tp in partitions
                   if tp not in denied and not coordinator.partition_exists(*tp)}
        if denied:
            add_result(transactional_id, {
                tp: E.TOPIC_AUTHORIZATION_FAILED if tp in denied else
                E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else E.OPERATION_NOT_ATTEMPTED
                for tp in partitions})
            continue
        if unknown:
            add_result(transactional_id, {tp: E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                                          else E.OPERATION_NOT_ATTEMPTED for tp in partitions})
            continue
        if verify_only:
            add_result(transactional_id, coordinator.verify_partitions(
                transactional_id, producer_id, producer_epoch, partitions))
            continue

        def answer(error, transactional_id=transactional_id, partitions=partitions) -> None:
            if version < 2 and error == E.PRODUCER_FENCED:
                error = E.INVALID_PRODUCER_EPOCH
            add_result(transactional_id, {tp: error for tp in partitions})

        coordinator.add_partitions(transactional_id, producer_id, producer_epoch,
                                   dict.fromkeys(partitions), 2 if version > 3 else 0, answer)
