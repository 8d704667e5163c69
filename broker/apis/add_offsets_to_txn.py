"""AddOffsetsToTxn: a transaction version 1 producer adds its group's __consumer_offsets
partition to the transaction before TxnOffsetCommit."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import AddOffsetsToTxnResponse

from ..security.authorizer import AclOperation, ResourceType
from ..topics import OFFSETS_TOPIC

NAME = "AddOffsetsToTxn"

E = ErrorCode


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is not None:
        if not auth.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                            request.transactional_id):
            respond(AddOffsetsToTxnResponse(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            return
        if not auth.allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
            respond(AddOffsetsToTxnResponse(error_code=E.GROUP_AUTHORIZATION_FAILED))
            return

    def answer(error) -> None:
        if ctx.api_version < 2 and error == E.PRODUCER_FENCED:
            error = E.INVALID_PRODUCER_EPOCH
        respond(AddOffsetsToTxnResponse(error_code=int(error)))

    partition = broker.coordinator.partition_for(request.group_id)
    broker.transactions.add_partitions(request.transactional_id, request.producer_id,
                                       request.producer_epoch, [(OFFSETS_TOPIC, partition)], 0,
                                       answer)
