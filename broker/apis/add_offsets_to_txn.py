"""AddOffsetsToTxn: a transaction version 1 producer adds its group's __consumer_offsets
partition to the transaction before TxnOffsetCommit."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import AddOffsetsToTxnResponse

from ..topics import OFFSETS_TOPIC

NAME = "AddOffsetsToTxn"
VERSIONS = (0, 4)

E = ErrorCode


def handle(broker, ctx, request, respond) -> None:
    def answer(error) -> None:
        if ctx.api_version < 2 and error == E.PRODUCER_FENCED:
            error = E.INVALID_PRODUCER_EPOCH
        respond(AddOffsetsToTxnResponse(error_code=int(error)))

    partition = broker.coordinator.partition_for(request.group_id)
    broker.transactions.add_partitions(request.transactional_id, request.producer_id,
                                       request.producer_epoch, [(OFFSETS_TOPIC, partition)], 0,
                                       answer)
