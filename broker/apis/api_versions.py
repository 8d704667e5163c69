"""ApiVersions: the one coherent set of version ranges this broker serves."""
from __future__ import annotations

import re

from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsResponse

from . import api_version_entries

NAME = "ApiVersions"

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def handle(broker, ctx, request, respond) -> None:
    error = ErrorCode.NONE
    if ctx.api_version >= 3 and not (_SOFTWARE.match(request.client_software_name or "") and
                                     _SOFTWARE.match(request.client_software_version or "")):
        error = ErrorCode.INVALID_REQUEST
    response = ApiVersionsResponse(error_code=error, api_keys=api_version_entries(broker.config))
    if ctx.api_version >= 3:
        response.supported_features, response.finalized_features = features(broker.config)
        response.finalized_features_epoch = FINALIZED_FEATURES_EPOCH
    respond(response)


#: a single broker never changes its finalized features while it runs
FINALIZED_FEATURES_EPOCH = 1


def features(config) -> tuple[list, list]:
    """(supported, finalized) feature levels. ``group.version`` 1 means the consumer group
    protocol (KIP-848) is served; ``transaction.version`` 2 that transactions bump the producer
    epoch at every end and add partitions implicitly (KIP-890), as on Kafka 4.3."""
    supported_cls = ApiVersionsResponse.SupportedFeatureKey
    finalized_cls = ApiVersionsResponse.FinalizedFeatureKey
    group_version = 1 if "consumer" in config["group.coordinator.rebalance.protocols"] else 0
    supported = [supported_cls(name="group.version", min_version=0, max_version=1),
                 supported_cls(name="transaction.version", min_version=0, max_version=2),
                 supported_cls(name="share.version", min_version=0, max_version=1)]
    finalized = [finalized_cls(name="transaction.version", min_version_level=2,
                               max_version_level=2),
                 finalized_cls(name="share.version", min_version_level=1, max_version_level=1)]
    if group_version:
        finalized.append(finalized_cls(name="group.version", min_version_level=group_version,
                                       max_version_level=group_version))
    return supported, finalized
