"""InitProducerId: ids for idempotent producers, and for transactional ones the transaction
coordinator's answer (a new epoch that fences older producers of the same transactional id)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import InitProducerIdResponse

from ..security.authorizer import AclOperation, ResourceType

NAME = "InitProducerId"

E = ErrorCode


def handle(broker, ctx, request, respond) -> None:
    version = ctx.api_version
    producer_id = request.producer_id if version >= 3 else -1
    producer_epoch = request.producer_epoch if version >= 3 else -1
    auth = broker.authorizer
    if auth is not None:
        denied = _denied(auth, ctx, request)
        if denied:
            respond(InitProducerIdResponse(error_code=denied, producer_id=-1, producer_epoch=-1))
            return
    if (producer_id == -1) != (producer_epoch == -1):
        respond(InitProducerIdResponse(error_code=E.INVALID_REQUEST, producer_id=-1,
                                       producer_epoch=-1))
        return
    if request.transactional_id is not None:
        def answer(error, pid, epoch) -> None:
            if version < 4 and error == E.PRODUCER_FENCED:
                error = E.INVALID_PRODUCER_EPOCH  # older clients do not know PRODUCER_FENCED
            respond(InitProducerIdResponse(error_code=error, producer_id=pid,
                                           producer_epoch=epoch))

        broker.transactions.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms,
            None if producer_id == -1 else (producer_id, producer_epoch), answer)
        return
    if producer_id >= 0:
        # an idempotent producer bumping its epoch after an error (KIP-360)
        if producer_epoch >= 32766:
            respond(InitProducerIdResponse(error_code=E.NONE,
                                           producer_id=broker.allocate_producer_id(),
                                           producer_epoch=0))
        else:
            respond(InitProducerIdResponse(error_code=E.NONE, producer_id=producer_id,
                                           producer_epoch=producer_epoch + 1))
        return
    respond(InitProducerIdResponse(error_code=E.NONE,
                                   producer_id=broker.allocate_producer_id(), producer_epoch=0))


def _denied(auth, ctx, request) -> int:
    """Kafka's checks: WRITE on the transactional id; without one, IDEMPOTENT_WRITE on the
    cluster or WRITE on some topic."""
    if request.transactional_id is not None:
        if auth.allowed(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                        request.transactional_id):
            return E.NONE
        return E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if auth.cluster(ctx, AclOperation.IDEMPOTENT_WRITE) or \
            auth.by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC):
        return E.NONE
    return E.CLUSTER_AUTHORIZATION_FAILED
