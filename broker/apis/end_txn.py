"""EndTxn: commit or abort the producer's transaction. From v5 (transaction version 2) the
answer carries the producer's next id and epoch."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import EndTxnResponse

from ..security.authorizer import AclOperation, ResourceType

NAME = "EndTxn"

E = ErrorCode


def handle(broker, ctx, request, respond) -> None:
    version = ctx.api_version
    auth = broker.authorizer
    if auth is not None and not auth.allowed(ctx, AclOperation.WRITE,
                                             ResourceType.TRANSACTIONAL_ID,
                                             request.transactional_id):
        respond(EndTxnResponse(error_code=E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                               producer_id=-1, producer_epoch=-1))
        return

    def answer(error, producer_id, producer_epoch) -> None:
        if version < 2 and error == E.PRODUCER_FENCED:
            error = E.INVALID_PRODUCER_EPOCH
        respond(EndTxnResponse(error_code=int(error), producer_id=producer_id,
                               producer_epoch=producer_epoch))

    broker.transactions.end_transaction(request.transactional_id, request.producer_id,
                                        request.producer_epoch, bool(request.committed),
                                        2 if version > 4 else 0, answer)
