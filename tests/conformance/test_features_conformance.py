"""Cluster features against Kafka 4.3.1 and kbroker, raw protocol: ApiVersions' supported and
finalized features, and UpdateFeatures' answers. Changes that would pass are sent with
validate_only, so the session's brokers keep their levels."""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import ApiVersionsRequest, UpdateFeaturesRequest as U
from tests.support import RawClient

FAILED = "The update failed for all features since the following feature had an error: "

SUPPORTED = {"group.version": (0, 1), "kraft.version": (0, 1), "metadata.version": (7, 30),
             "share.version": (0, 1), "streams.version": (0, 1),
             "transaction.version": (0, 2), "eligible.leader.replicas.version": (0, 1)}
FINALIZED = {"group.version": 1, "kraft.version": 1, "metadata.version": 30,
             "share.version": 1, "streams.version": 1, "transaction.version": 2,
             "eligible.leader.replicas.version": 1}
#: kbroker does not serve the share and streams group APIs yet: it finalizes neither
NOT_SERVED_YET = ("share.version", "streams.version")


def update(port: int, updates, version: int = 2, validate_only: bool = True):
    keys = []
    for name, level, kind in updates:
        key = U.FeatureUpdateKey(feature=name, max_version_level=level)
        if version == 0:
            key.allow_downgrade = bool(kind)
        else:
            key.upgrade_type = kind
        keys.append(key)
    request = U(timeout_ms=60000, feature_updates=keys)
    if version >= 1:
        request.validate_only = validate_only
    answer = RawClient.once(port, request, version)
    results = None if version >= 2 else [(r.feature, r.error_code, r.error_message)
                                         for r in answer.results]
    return answer.error_code, answer.error_message, results


def test_api_versions_lists_kafkas_features(target):
    answer = RawClient.once(target.port, ApiVersionsRequest(
        client_software_name="conformance", client_software_version="1"), 4)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert ranges[57] == (0, 2)
    assert {f.name: (f.min_version, f.max_version) for f in answer.supported_features} \
        == SUPPORTED
    finalized = {f.name: (f.min_version_level, f.max_version_level)
                 for f in answer.finalized_features}
    expected = {n: (v, v) for n, v in FINALIZED.items()
                if target.is_kafka or n not in NOT_SERVED_YET}
    assert finalized == expected
    assert answer.finalized_features_epoch > 0


@pytest.mark.parametrize("updates, message", [
    ([("nosuch", 1, 1)], "Invalid update version 1 for feature nosuch. Local controller 1 does "
                         "not support this feature."),
    ([("nosuch", 0, 2)], "Invalid update version 0 for feature nosuch. Feature nosuch not "
                         "found."),
    ([("", 1, 1)], "Invalid update version 1 for feature . Local controller 1 does not support "
                   "this feature."),
    ([("group.version", -1, 1)], "Invalid update version -1 for feature group.version. A "
                                 "feature version cannot be less than 0."),
    ([("group.version", 2, 1)], "Invalid update version 2 for feature group.version. Local "
                                "controller 1 only supports versions 0-1"),
    ([("group.version", 0, 1)], "Invalid update version 0 for feature group.version. Can't "
                                "downgrade the version of this feature without setting the "
                                "upgrade type to either safe or unsafe downgrade."),
    ([("group.version", 1, 0)], "Invalid update version 1 for feature group.version. The "
                                "controller does not support the given upgrade type."),
    ([("group.version", 1, 7)], "Invalid update version 1 for feature group.version. The "
                                "controller does not support the given upgrade type."),
    ([("metadata.version", 29, 2)], "Unsupported metadata.version downgrade from 30 to 29. "
                                    "Refusing to perform the requested downgrade because it "
                                    "might delete metadata information."),
    ([("metadata.version", 29, 3)], "Unsupported metadata.version downgrade from 30 to 29. "
                                    "Unsafe metadata downgrade is not supported in this "
                                    "version."),
    ([("metadata.version", 31, 1)], "Invalid update version 31 for feature metadata.version. "
                                    "Local controller 1 only supports versions 7-30"),
    ([("metadata.version", 6, 2)], "Invalid update version 6 for feature metadata.version. "
                                   "Local controller 1 only supports versions 7-30"),
    ([("kraft.version", 0, 2)], "Invalid update version 0 for feature kraft.version. Can't "
                                "downgrade the version of this feature."),
    # one refused update refuses them all
    ([("group.version", 0, 2), ("transaction.version", 5, 1)],
     "Invalid update version 5 for feature transaction.version. Local controller 1 only "
     "supports versions 0-2"),
])
def test_refused_updates(target, updates, message):
    assert update(target.port, updates) == (E.INVALID_UPDATE_VERSION, FAILED + message, None)
    # v1 lists no per-feature results then
    assert update(target.port, updates, version=1) == (
        E.INVALID_UPDATE_VERSION, FAILED + message, [])


@pytest.mark.parametrize("updates", [
    [("group.version", 0, 2)], [("group.version", 0, 3)], [("group.version", 1, 1)],
    [("kraft.version", 1, 1)], [("transaction.version", 1, 2)], [("transaction.version", 0, 2)],
    [("eligible.leader.replicas.version", 0, 2)],
    # a feature named twice counts once, with its last level
    [("group.version", 0, 2), ("group.version", 1, 1)],
    [],
])
def test_updates_that_pass_validation(target, updates):
    assert update(target.port, updates) == (E.NONE, None, None)
    named = [n for n, _l, _k in updates]  # as the request names them, twice if twice
    assert update(target.port, updates, version=1) == (
        E.NONE, None, [(n, E.NONE, "NONE") for n in named])


def test_v0_allow_downgrade(target):
    assert update(target.port, [("group.version", 0, False)], version=0) == (
        E.INVALID_UPDATE_VERSION, FAILED + "Invalid update version 0 for feature group.version."
        " Can't downgrade the version of this feature without setting the upgrade type to "
        "either safe or unsafe downgrade.", [])
    # the current level again: nothing changes
    assert update(target.port, [("group.version", 1, False)], version=0) == (
        E.NONE, None, [("group.version", E.NONE, "NONE")])
