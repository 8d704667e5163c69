"""WriteTxnMarkers: write a COMMIT or ABORT marker into partitions. Kafka's transaction
coordinator sends it to the leaders of a transaction's partitions; here the coordinator writes
its markers in-process (broker/txn_markers.py), so the clients of this API are administrators:
``Admin.abortTransaction`` and ``kafka-transactions.sh abort`` end a hanging transaction with it,
which frees the partition's last stable offset for read_committed consumers.

As on Kafka: the principal needs CLUSTER_ACTION on the cluster; a partition that does not exist
gets UNKNOWN_TOPIC_OR_PARTITION and one led by another node NOT_LEADER_OR_FOLLOWER; the producer
epoch and coordinator epoch are checked as the coordinator's own markers are
(INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED); a partition of ``__consumer_offsets``
goes to the group coordinator, which commits or drops the transaction's offsets, and its
coordinator errors (loading, moved) are answered NOT_LEADER_OR_FOLLOWER, as Kafka translates
them for the transaction coordinator. The answer comes once every marker is written."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import WriteTxnMarkersResponse

from ..coordinator.common.result import append_error
from ..security.authorizer import AclOperation
from ..topics import OFFSETS_TOPIC
from ..txn_markers import write_txn_markers
from ..partitions.replicas import leader_error

NAME = "WriteTxnMarkers"

MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = WriteTxnMarkersResponse.WritableTxnMarkerTopicResult
PartitionResult = WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult

#: the group coordinator's errors the transaction coordinator does not expect: Kafka answers
#: them as a partition that is not ready yet
_NOT_READY = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
              ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.CLUSTER_ACTION):
        respond(_answer([(m, {(t.name, p): ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                              for t in m.topics for p in t.partition_indexes})
                         for m in request.markers]))
        return
    conn = getattr(ctx, "conn", None)
    version = ctx.api_version
    results = [(marker, {}) for marker in request.markers]
    waiting = [1]   # the markers of __consumer_offsets still being written, plus this pass

    def one_done() -> None:
        waiting[0] -= 1
        if not waiting[0]:
            respond(_answer(results))

    for marker, errors in results:
        commit = bool(marker.transaction_result)
        transaction_version = marker.transaction_version if version >= 2 else 0
        data = []
        for t in marker.topics:
            for index in t.partition_indexes:
                key = (t.name, index)
                partition = broker.topics.partition(t.name, index)
                if partition is None:
                    errors[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                error = leader_error(broker, conn, partition)
                if error:
                    errors[key] = error
                elif marker.producer_epoch < 0:
                    # no epoch: Kafka 4.3.1 fails the append (tests/conformance runs it)
                    errors[key] = ErrorCode.UNKNOWN_SERVER_ERROR
                elif t.name == OFFSETS_TOPIC:
                    waiting[0] += 1
                    broker.coordinator.complete_transaction(
                        index, marker.producer_id, marker.producer_epoch, commit,
                        marker.coordinator_epoch,
                        lambda exc, errors=errors, key=key: _group_done(errors, key, exc,
                                                                          one_done),
                        transaction_version)
                else:
                    data.append(key)
        if data:
            errors.update(write_txn_markers(broker, marker.producer_id, marker.producer_epoch,
                                            commit, marker.coordinator_epoch, data,
                                            transaction_version=transaction_version))
    one_done()


def _group_done(errors: dict, key, exc, one_done) -> None:
    error = ErrorCode.NONE if exc is None else append_error(exc)
    errors[key] = ErrorCode.NOT_LEADER_OR_FOLLOWER if error in _NOT_READY else error
    one_done()


def _answer(results) -> WriteTxnMarkersResponse:
    """One result per marker, in the request's order; its partitions grouped by topic."""
    markers = []
    for marker, errors in results:
        topics: dict[str, list] = {}
        for (topic, index), error in errors.items():
            topics.setdefault(topic, []).append(PartitionResult(partition_index=index,
                                                                error_code=error))
        markers.append(MarkerResult(producer_id=marker.producer_id, topics=[
            TopicResult(name=name, partitions=parts) for name, parts in topics.items()]))
    return WriteTxnMarkersResponse(markers=markers)
