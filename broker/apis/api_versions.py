"""ApiVersions: the one coherent set of version ranges this broker serves."""
from __future__ import annotations

import re

from protocol.errors import ErrorCode
from protocol.messages import ApiVersionsResponse

from ..features import SUPPORTED

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
        features = broker.features
        response.supported_features, response.finalized_features = feature_entries(features)
        response.finalized_features_epoch = features.epoch
    respond(response)


def feature_entries(features) -> tuple[list, list]:
    """(supported, finalized) as ApiVersions lists them (broker/features.py): a finalized
    feature's min and max level are both its level, as on Kafka 4."""
    supported_cls = ApiVersionsResponse.SupportedFeatureKey
    finalized_cls = ApiVersionsResponse.FinalizedFeatureKey
    supported = [supported_cls(name=name, min_version=low, max_version=high)
                 for name, (low, high) in SUPPORTED.items()]
    finalized = [finalized_cls(name=name, min_version_level=level, max_version_level=level)
                 for name, level in features.finalized().items()]
    return supported, finalized
