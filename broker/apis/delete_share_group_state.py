"""DeleteShareGroupState: a share partition's state is gone from the share coordinator (a
tombstone in ``__share_group_state``); one never initialized is answered without an error. The
rules are the share coordinator's (broker/coordinator/share_state/store.py and service.py):
CLUSTER_ACTION, NOT_COORDINATOR, UNKNOWN_TOPIC_OR_PARTITION."""
from __future__ import annotations

from protocol.messages import DeleteShareGroupStateResponse as Response

NAME = "DeleteShareGroupState"


def handle(broker, ctx, request, respond) -> None:
    service = broker.share_coordinator
    group_id = request.group_id

    def operate(topic_id, p):
        return service.store.delete(group_id, topic_id, p.partition)

    def answer(results) -> None:
        respond(Response(results=[Response.DeleteStateResult(topic_id=tid, partitions=[
            Response.PartitionResult(partition=p.partition,
                                     error_code=0 if o is None else o.error,
                                     error_message=None if o is None else o.message)
            for p, o in parts]) for tid, parts in results]))

    service.serve(ctx, group_id, [(t.topic_id, t.partitions) for t in request.topics],
                  operate, "delete share group state", answer)
