"""DescribeCluster: this broker is the whole cluster and its controller."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import DescribeClusterResponse

from ..security.authorization import cluster_authorized_operations

NAME = "DescribeCluster"
VERSIONS = (0, 2)


def handle(broker, ctx, request, respond) -> None:
    host, port = broker.advertised(ctx.listener)
    if request.endpoint_type not in (1,):  # 1 = brokers; 2 = controllers (not ours to serve)
        respond(DescribeClusterResponse(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                        error_message="only broker endpoints are served",
                                        endpoint_type=request.endpoint_type))
        return
    respond(DescribeClusterResponse(
        error_code=ErrorCode.NONE, endpoint_type=1, cluster_id=broker.cluster_id,
        controller_id=broker.node_id, cluster_authorized_operations=cluster_authorized_operations(
            broker.authorizer, ctx) if request.include_cluster_authorized_operations
        else -2147483648,
        brokers=[DescribeClusterResponse.DescribeClusterBroker(
            broker_id=broker.node_id, host=host, port=port, rack=None, is_fenced=False)]))
