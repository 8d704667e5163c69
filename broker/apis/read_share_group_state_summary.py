"""ReadShareGroupStateSummary: a share partition's start offset, state and leader epochs and
(v1, KIP-1226) delivery-complete count, without its batches; Kafka's group coordinator reads it
for DescribeShareGroupOffsets. A share partition never initialized has start offset -1. The
rules are the share coordinator's (broker/coordinator/share_state/store.py and service.py):
CLUSTER_ACTION, NOT_COORDINATOR, UNKNOWN_TOPIC_OR_PARTITION."""
from __future__ import annotations

from protocol.messages import ReadShareGroupStateSummaryResponse as Response

from ..coordinator.share_state.store import Outcome

NAME = "ReadShareGroupStateSummary"


def handle(broker, ctx, request, respond) -> None:
    service = broker.share_coordinator
    group_id = request.group_id

    def operate(topic_id, p):
        return service.store.summary(group_id, topic_id, p.partition)

    def result(p, found):
        if isinstance(found, Outcome):
            return Response.PartitionResult(partition=p.partition, error_code=found.error,
                                            error_message=found.message)
        return Response.PartitionResult(
            partition=p.partition, state_epoch=found.state_epoch,
            leader_epoch=found.leader_epoch, start_offset=found.start_offset,
            delivery_complete_count=found.delivery_complete_count)

    def answer(results) -> None:
        respond(Response(results=[Response.ReadStateSummaryResult(topic_id=tid, partitions=[
            result(p, found) for p, found in parts]) for tid, parts in results]))

    service.serve(ctx, group_id, [(t.topic_id, t.partitions) for t in request.topics],
                  operate, "read share group state summary", answer)
