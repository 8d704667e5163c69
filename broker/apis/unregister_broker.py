"""UnregisterBroker (Admin.unregisterBroker, kafka-cluster.sh unregister): a node id this
broker does not serve is BROKER_ID_NOT_REGISTERED with Kafka's message. One it serves is
answered NONE, as Kafka answers it; Kafka then lists no such broker (with a single node: no
brokers at all, every partition LEADER_NOT_AVAILABLE) until the broker registers again, while
here the node stays registered and serving. With an authorizer it needs ALTER on the
cluster."""
from __future__ import annotations

import structlog

from protocol.errors import ErrorCode
from protocol.messages import UnregisterBrokerResponse

from ..security.authorizer import AclOperation

from ..security.acl_apis import cluster_denied_message

from ..partitions.replicas import broker_ids

NAME = "UnregisterBroker"

log = structlog.get_logger("broker.apis.unregister_broker")


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.ALTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        message = cluster_denied_message(NAME, AclOperation.ALTER)
    elif request.broker_id not in broker_ids(broker):
        code = ErrorCode.BROKER_ID_NOT_REGISTERED
        message = f"Broker ID {request.broker_id} is not currently registered"
    else:
        code, message = ErrorCode.NONE, ""
        log.warning("UnregisterBroker of a node this broker serves: it stays registered",
                    node=request.broker_id, principal=str(ctx.conn.principal))
    respond(UnregisterBrokerResponse(throttle_time_ms=0, error_code=code,
                                     error_message=message))
