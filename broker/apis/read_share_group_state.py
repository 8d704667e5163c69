"""ReadShareGroupState: a share partition's stored state (state epoch, start offset, state
batches), as its leader reads it when it loads the share partition; a newer leader epoch is
stored. The rules are the share coordinator's (broker/coordinator/share_state/store.py and
service.py): CLUSTER_ACTION, NOT_COORDINATOR, INVALID_REQUEST for a share partition never
initialized, FENCED_LEADER_EPOCH below the stored leader epoch, UNKNOWN_TOPIC_OR_PARTITION."""
from __future__ import annotations

from protocol.messages import ReadShareGroupStateResponse as Response

from ..coordinator.share_state.store import Outcome

NAME = "ReadShareGroupState"


def handle(broker, ctx, request, respond) -> None:
    service = broker.share_coordinator
    group_id = request.group_id

    def operate(topic_id, p):
        return service.store.read(group_id, topic_id, p.partition, p.leader_epoch)

    def result(p, found):
        if isinstance(found, Outcome):
            return Response.PartitionResult(partition=p.partition, error_code=found.error,
                                            error_message=found.message)
        return Response.PartitionResult(
            partition=p.partition, state_epoch=found.state_epoch,
            start_offset=found.start_offset, state_batches=[
                Response.StateBatch(first_offset=f, last_offset=last, delivery_state=s,
                                    delivery_count=c)
                for f, last, s, c in found.state_batches])

    def answer(results) -> None:
        respond(Response(results=[Response.ReadStateResult(topic_id=tid, partitions=[
            result(p, found) for p, found in parts]) for tid, parts in results]))

    service.serve(ctx, group_id, [(t.topic_id, t.partitions) for t in request.topics],
                  operate, "read share group state", answer)
