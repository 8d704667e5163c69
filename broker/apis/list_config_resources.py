"""ListConfigResources (ListClientMetricsResources until Kafka 4.1): the resources that can
carry configs, by type: topics, brokers and broker loggers (one per node), client metrics
subscriptions and groups with configs of their own. Version 0 knows client metrics only; an
empty type list means every type the version knows, and a type it does not know fails the
request with UNSUPPORTED_VERSION."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import ListConfigResourcesResponse

from ..security.authorizer import AclOperation

from ..partitions.replicas import broker_ids

NAME = "ListConfigResources"

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32

Resource = ListConfigResourcesResponse.ConfigResource


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        respond(ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                            config_resources=[]))
        return
    known = {CLIENT_METRICS} if ctx.api_version == 0 else {TOPIC, BROKER, BROKER_LOGGER,
                                                          CLIENT_METRICS, GROUP}
    wanted = set(request.resource_types) if ctx.api_version >= 1 else set()
    wanted = wanted or known
    if not wanted <= known:
        respond(ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                                            config_resources=[]))
        return
    resources = []
    # no client metrics subscription exists (the broker takes no such config), so that type
    # lists nothing; the rest in Kafka 4.3.1's order: the groups with configs of their own
    # (broker/coordinator/group/group_configs.py), then by type
    if GROUP in wanted:
        resources += [Resource(resource_name=name, resource_type=GROUP)
                      for name in sorted(broker.group_configs.configs)]
    if BROKER_LOGGER in wanted:
        resources += [Resource(resource_name=str(n), resource_type=BROKER_LOGGER)
                      for n in broker_ids(broker)]
    if BROKER in wanted:
        resources += [Resource(resource_name=str(n), resource_type=BROKER)
                      for n in broker_ids(broker)]
    if TOPIC in wanted:
        resources += [Resource(resource_name=name, resource_type=TOPIC)
                      for name in broker.topics.topics]
    respond(ListConfigResourcesResponse(error_code=ErrorCode.NONE, config_resources=resources))
