"""UpdateFeatures: finalize feature levels (kafka-features.sh upgrade/downgrade,
Admin.updateFeatures), as Kafka's controller answers it: every update is checked first
(broker/features.py: the upgrade type, the level against the supported range, downgrades
only when asked for, never of kraft.version or, in Kafka 4.3, metadata.version), and one
refused update refuses them all with INVALID_UPDATE_VERSION and Kafka's message. A feature
named twice counts once, with its last level. validate_only (v1+) changes nothing. v0's
allow_downgrade is a safe downgrade. v0-1 list each feature's result; v2 only the top level.
With an authorizer it needs ALTER on the cluster."""
from __future__ import annotations

import structlog

from broker.features import SAFE_DOWNGRADE, UPGRADE, FeatureError
from broker.security.authorizer import AclOperation
from protocol.errors import ErrorCode
from protocol.messages import UpdateFeaturesResponse

from ..security.acl_apis import cluster_denied_message

NAME = "UpdateFeatures"

log = structlog.get_logger("broker.apis.update_features")

Result = UpdateFeaturesResponse.UpdatableFeatureResult

FAILED_FOR_ALL = "The update failed for all features since the following feature had an error: "


def handle(broker, ctx, request, respond) -> None:
    version = ctx.api_version
    auth = broker.authorizer
    if auth is not None and not auth.cluster(ctx, AclOperation.ALTER):
        respond(_answer(version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                        cluster_denied_message(NAME, AclOperation.ALTER), []))
        return
    updates: dict[str, tuple[int, int]] = {}
    for u in request.feature_updates:
        kind = (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE) if version == 0 \
            else u.upgrade_type
        updates[u.feature] = (u.max_version_level, kind)
    features = broker.features
    try:
        for name, (level, kind) in updates.items():
            features.check(name, level, kind)
    except FeatureError as exc:
        respond(_answer(version, ErrorCode.INVALID_UPDATE_VERSION,
                        FAILED_FOR_ALL + str(exc), []))
        return
    if not (version >= 1 and request.validate_only):
        if features.apply({name: level for name, (level, _kind) in updates.items()}):
            log.info("features updated", principal=str(ctx.conn.principal),
                     levels={name: level for name, (level, _k) in updates.items()},
                     epoch=features.epoch)
    # v0-1: a result per feature as the request names them, a feature named twice twice
    names = [u.feature for u in request.feature_updates]
    respond(_answer(version, ErrorCode.NONE, None, names))


def _answer(version: int, code: int, message: str | None, names: list[str]):
    response = UpdateFeaturesResponse(throttle_time_ms=0, error_code=code,
                                      error_message=message)
    if version < 2:
        # Kafka's per-feature results carry Errors.NONE's name as their message
        response.results = [Result(feature=n, error_code=ErrorCode.NONE, error_message="NONE")
                            for n in names]
    return response
