"""InitProducerId: ids for idempotent producers (the Java client and librdkafka ask first).

Transactional ids are refused: this broker has no transaction coordinator.
"""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import InitProducerIdResponse

NAME = "InitProducerId"
VERSIONS = (0, 5)


def handle(broker, ctx, request, respond) -> None:
    if request.transactional_id is not None:
        respond(InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                       producer_id=-1, producer_epoch=-1))
        return
    if request.producer_id >= 0 and request.producer_epoch >= 0:
        # an idempotent producer bumping its epoch after an error (KIP-360)
        if request.producer_epoch >= 32766:
            respond(InitProducerIdResponse(error_code=ErrorCode.NONE,
                                           producer_id=broker.allocate_producer_id(),
                                           producer_epoch=0))
        else:
            respond(InitProducerIdResponse(error_code=ErrorCode.NONE,
                                           producer_id=request.producer_id,
                                           producer_epoch=request.producer_epoch + 1))
        return
    respond(InitProducerIdResponse(error_code=ErrorCode.NONE,
                                   producer_id=broker.allocate_producer_id(), producer_epoch=0))
