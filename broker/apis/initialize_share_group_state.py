"""InitializeShareGroupState: a share partition's state starts afresh (state epoch, start
offset, nothing in flight) at the share coordinator. Kafka's group coordinator sends it before
a share partition is first assigned; here the share-partition leader initializes its own in
process (broker/coordinator/share_state/persister.py), so callers of this API are tools and
tests. The rules are the share coordinator's (broker/coordinator/share_state/store.py and
service.py): CLUSTER_ACTION, NOT_COORDINATOR, FENCED_STATE_EPOCH below the stored state epoch,
UNKNOWN_TOPIC_OR_PARTITION."""
from __future__ import annotations

from protocol.messages import InitializeShareGroupStateResponse as Response

NAME = "InitializeShareGroupState"


def handle(broker, ctx, request, respond) -> None:
    service = broker.share_coordinator
    group_id = request.group_id

    def operate(topic_id, p):
        return service.store.initialize(group_id, topic_id, p.partition, p.state_epoch,
                                        p.start_offset)

    def answer(results) -> None:
        respond(Response(results=[Response.InitializeStateResult(topic_id=tid, partitions=[
            Response.PartitionResult(partition=p.partition,
                                     error_code=0 if o is None else o.error,
                                     error_message=None if o is None else o.message)
            for p, o in parts]) for tid, parts in results]))

    # Kafka answers a topic without partitions with nothing for it, not with an empty answer
    service.serve(ctx, group_id, [(t.topic_id, t.partitions) for t in request.topics],
                  operate, "initialize share group state", answer, check_partitions=False)
