"""DescribeCluster: the nodes this process serves (broker/cluster.py); the first is the
controller."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import DescribeClusterResponse

from ..security.authorization import cluster_authorized_operations
from ..partitions.replicas import controller_id, nodes

NAME = "DescribeCluster"


def handle(broker, ctx, request, respond) -> None:
    if request.endpoint_type not in (1,):  # 1 = brokers; 2 = controllers (not ours to serve)
        respond(DescribeClusterResponse(error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                                        error_message="only broker endpoints are served",
                                        endpoint_type=request.endpoint_type))
        return
    respond(DescribeClusterResponse(
        error_code=ErrorCode.NONE, endpoint_type=1, cluster_id=broker.cluster_id,
        controller_id=controller_id(broker), cluster_authorized_operations=cluster_authorized_operations(
            broker.authorizer, ctx) if request.include_cluster_authorized_operations
        else -2147483648,
        brokers=[DescribeClusterResponse.DescribeClusterBroker(
            broker_id=node, host=host, port=port, rack=None, is_fenced=False)
            for node, host, port in nodes(broker, ctx.listener)]))
