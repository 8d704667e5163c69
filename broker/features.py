"""Cluster features (KIP-584): what ApiVersions lists as supported and finalized, and what
UpdateFeatures may change, with the checks and messages of Kafka's FeatureControlManager.

The supported ranges are Kafka 4.3.1's. The finalized levels start at Kafka 4.3.1's for a new
cluster, except ``group.version`` (0 when group.coordinator.rebalance.protocols leaves out
"consumer") and ``share.version`` / ``streams.version`` (1 only once this broker serves the
share and streams group APIs). Levels set by UpdateFeatures are kept in
``<data dir>/features.json``; a level of 0 is not listed as finalized, as on Kafka.
"""
from __future__ import annotations

import json
import os

from .log.files import write_json

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"

#: Kafka 4.3.1's supported ranges, in the order its ApiVersions lists them
SUPPORTED: dict[str, tuple[int, int]] = {
    "group.version": (0, 1),
    KRAFT_VERSION: (0, 1),
    METADATA_VERSION: (7, 30),
    "share.version": (0, 1),
    "streams.version": (0, 1),
    "transaction.version": (0, 2),
    "eligible.leader.replicas.version": (0, 1),
}

#: the finalized levels of a new Kafka 4.3.1 cluster
DEFAULT_LEVELS = {"group.version": 1, KRAFT_VERSION: 1, METADATA_VERSION: 30,
                  "share.version": 1, "streams.version": 1, "transaction.version": 2,
                  "eligible.leader.replicas.version": 1}

#: the group types whose APIs the broker must serve for their feature to be on
_SERVED_BY = {"share.version": 76, "streams.version": 88}  # ShareGroupHeartbeat, StreamsGroupHeartbeat

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3

FEATURES_FILE = "features.json"


class FeatureError(Exception):
    """An update Kafka refuses (INVALID_UPDATE_VERSION) with its message."""


class Features:
    def __init__(self, config, data_dir: str | None, node_id: int, served_api_keys) -> None:
        self.node_id = node_id
        self.path = os.path.join(data_dir, FEATURES_FILE) if data_dir else None
        levels = dict(DEFAULT_LEVELS)
        if "consumer" not in config["group.coordinator.rebalance.protocols"]:
            levels["group.version"] = 0
        for name, key in _SERVED_BY.items():
            if key not in served_api_keys:
                levels[name] = 0
        #: every update applied bumps it (Kafka's is the metadata offset of the last change)
        self.epoch = 1
        if self.path and os.path.exists(self.path):
            with open(self.path) as f:
                saved = json.load(f)
            levels.update({k: int(v) for k, v in saved["levels"].items() if k in SUPPORTED})
            self.epoch = int(saved["epoch"])
        self.levels = levels

    def finalized(self) -> dict[str, int]:
        return {name: level for name, level in self.levels.items() if level > 0}

    def check(self, name: str, level: int, upgrade_type: int) -> None:
        """Raise FeatureError when Kafka's controller refuses setting ``name`` to ``level``."""
        if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            raise FeatureError(_invalid(name, level, "The controller does not support the "
                                                     "given upgrade type."))
        if level < 0:
            raise FeatureError(_invalid(name, level, "A feature version cannot be less than 0."))
        supported = SUPPORTED.get(name)
        if supported is None:
            reason = f"Feature {name} not found." if level == 0 else \
                f"Local controller {self.node_id} does not support this feature."
            raise FeatureError(_invalid(name, level, reason))
        low, high = supported
        if not low <= level <= high:
            raise FeatureError(_invalid(name, level, f"Local controller {self.node_id} only "
                                                     f"supports versions {low}-{high}"))
        current = self.levels.get(name, 0)
        if name == KRAFT_VERSION and level < current:
            raise FeatureError(_invalid(name, level, "Can't downgrade the version of this "
                                                     "feature."))
        if level < current and upgrade_type == UPGRADE:
            raise FeatureError(_invalid(
                name, level, "Can't downgrade the version of this feature without setting the "
                             "upgrade type to either safe or unsafe downgrade."))
        if level > current and upgrade_type != UPGRADE:
            raise FeatureError(_invalid(name, level, "Can't downgrade to a newer version."))
        if name == METADATA_VERSION and level < current:
            why = ("Unsafe metadata downgrade is not supported in this version."
                   if upgrade_type == UNSAFE_DOWNGRADE else
                   "Refusing to perform the requested downgrade because it might delete "
                   "metadata information.")
            raise FeatureError(f"Unsupported metadata.version downgrade from {current} to "
                               f"{level}. {why}")

    def apply(self, updates: dict[str, int]) -> bool:
        """Set the levels (already checked); whether any changed."""
        changed = {n: v for n, v in updates.items() if self.levels.get(n, 0) != v}
        if not changed:
            return False
        self.levels.update(changed)
        self.epoch += 1
        self.save()
        return True

    def save(self) -> None:
        if not self.path:
            return
        write_json(self.path, {"epoch": self.epoch, "levels": self.levels}, indent=1)


def _invalid(name: str, level: int, reason: str) -> str:
    return f"Invalid update version {level} for feature {name}. {reason}"
