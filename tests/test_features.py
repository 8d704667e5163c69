"""Cluster features (broker/features.py): Kafka 4.3.1's levels, the checks of UpdateFeatures,
and the levels kept in the data directory."""
from __future__ import annotations

import pytest

from broker.config import BrokerConfig
from broker.features import (SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE, FeatureError,
                             Features)

SERVED = {18, 76, 88}  # as if the share and streams group APIs were served


def features(data_dir=None, served=SERVED, **settings):
    return Features(BrokerConfig({"metrics.port": 0, **settings}), data_dir, 1, served)


def test_a_new_cluster_has_kafka_4_3_1s_levels():
    assert features().finalized() == {
        "group.version": 1, "kraft.version": 1, "metadata.version": 30, "share.version": 1,
        "streams.version": 1, "transaction.version": 2, "eligible.leader.replicas.version": 1}
    # a group type whose APIs are not served, or a protocol turned off, is not finalized
    assert "share.version" not in features(served={18}).finalized()
    assert "group.version" not in features(
        **{"group.coordinator.rebalance.protocols": "classic"}).finalized()


@pytest.mark.parametrize("name, level, kind, message", [
    ("group.version", 1, 0, "Invalid update version 1 for feature group.version. The "
                            "controller does not support the given upgrade type."),
    ("group.version", -1, UPGRADE, "Invalid update version -1 for feature group.version. A "
                                   "feature version cannot be less than 0."),
    ("nosuch", 0, SAFE_DOWNGRADE, "Invalid update version 0 for feature nosuch. Feature nosuch "
                                  "not found."),
    ("nosuch", 1, UPGRADE, "Invalid update version 1 for feature nosuch. Local controller 1 "
                           "does not support this feature."),
    ("metadata.version", 31, UPGRADE, "Invalid update version 31 for feature metadata.version. "
                                      "Local controller 1 only supports versions 7-30"),
    ("kraft.version", 0, SAFE_DOWNGRADE, "Invalid update version 0 for feature kraft.version. "
                                         "Can't downgrade the version of this feature."),
    ("group.version", 0, UPGRADE, "Invalid update version 0 for feature group.version. Can't "
                                  "downgrade the version of this feature without setting the "
                                  "upgrade type to either safe or unsafe downgrade."),
    ("metadata.version", 29, SAFE_DOWNGRADE, "Unsupported metadata.version downgrade from 30 "
                                             "to 29. Refusing to perform the requested "
                                             "downgrade because it might delete metadata "
                                             "information."),
    ("metadata.version", 29, UNSAFE_DOWNGRADE, "Unsupported metadata.version downgrade from 30 "
                                               "to 29. Unsafe metadata downgrade is not "
                                               "supported in this version."),
])
def test_refused_updates_have_kafkas_messages(name, level, kind, message):
    with pytest.raises(FeatureError) as refused:
        features().check(name, level, kind)
    assert str(refused.value) == message


def test_an_upgrade_asked_as_a_downgrade_is_refused():
    f = features(served={18})
    with pytest.raises(FeatureError, match="Can't downgrade to a newer version."):
        f.check("share.version", 1, SAFE_DOWNGRADE)
    f.check("share.version", 1, UPGRADE)


def test_levels_persist_and_bump_the_epoch(tmp_path):
    f = features(str(tmp_path))
    assert f.epoch == 1
    f.check("transaction.version", 1, SAFE_DOWNGRADE)
    assert f.apply({"transaction.version": 1, "group.version": 1})
    assert not f.apply({"transaction.version": 1})  # nothing changed: same epoch
    again = features(str(tmp_path))
    assert again.epoch == 2 and again.finalized()["transaction.version"] == 1
    assert again.apply({"group.version": 0})
    assert "group.version" not in features(str(tmp_path)).finalized()
