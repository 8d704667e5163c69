"""WriteShareGroupState: a share-partition leader's new state batches (first and last offset,
delivery state, delivery count) and start offset, combined with what the share coordinator
holds (broker/coordinator/share_state/batches.py). The rules are the share coordinator's
(broker/coordinator/share_state/store.py and service.py): CLUSTER_ACTION, NOT_COORDINATOR,
INVALID_REQUEST for a share partition never initialized, FENCED_LEADER_EPOCH and
FENCED_STATE_EPOCH below the stored epochs, UNKNOWN_TOPIC_OR_PARTITION. v1 carries the
delivery-complete count (KIP-1226)."""
from __future__ import annotations

from protocol.messages import WriteShareGroupStateResponse as Response

NAME = "WriteShareGroupState"


def handle(broker, ctx, request, respond) -> None:
    service = broker.share_coordinator
    group_id = request.group_id
    with_count = ctx.api_version >= 1

    def operate(topic_id, p):
        return service.store.write(
            group_id, topic_id, p.partition, p.state_epoch, p.leader_epoch, p.start_offset,
            [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
             for b in p.state_batches],
            p.delivery_complete_count if with_count else -1)

    def answer(results) -> None:
        respond(Response(results=[Response.WriteStateResult(topic_id=tid, partitions=[
            Response.PartitionResult(partition=p.partition,
                                     error_code=0 if o is None else o.error,
                                     error_message=None if o is None else o.message)
            for p, o in parts]) for tid, parts in results]))

    service.serve(ctx, group_id, [(t.topic_id, t.partitions) for t in request.topics],
                  operate, "write share group state", answer)
