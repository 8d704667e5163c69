"""Group configs (broker/coordinator/group/group_configs.py): validation against the group's other
configs and the broker's bounds, and storage under the data directory."""
from __future__ import annotations

import pytest

from protocol.errors import ErrorCode

from broker.config import SETTINGS
from broker.coordinator.group.group_configs import (
    GroupConfigError, GroupConfigs, reset_duration_ms, valid_reset)

E = ErrorCode


class Defaults(dict):
    def __getitem__(self, name):
        if name in self:
            return dict.__getitem__(self, name)
        return SETTINGS[name].default


def test_validated_together_and_stored(tmp_path):
    configs = GroupConfigs(Defaults({"group.share.min.session.timeout.ms": 1000}),
                           str(tmp_path))
    configs.alter("g", {"share.session.timeout.ms": "50000",
                        "share.heartbeat.interval.ms": "6000"})
    with pytest.raises(GroupConfigError) as err:     # against the heartbeat interval it has
        configs.alter("g", {"share.session.timeout.ms": "6000"})
    assert err.value.message == ("share.session.timeout.ms must be greater than "
                                 "share.heartbeat.interval.ms")
    assert configs.get("g") == {"share.session.timeout.ms": "50000",
                                "share.heartbeat.interval.ms": "6000"}
    again = GroupConfigs(Defaults(), str(tmp_path))
    assert again.get("g") == configs.get("g")
    again.alter("g", {"share.session.timeout.ms": None, "share.heartbeat.interval.ms": None})
    assert GroupConfigs(Defaults(), str(tmp_path)).get("g") == {}


def test_broker_bounds_follow_the_broker_settings():
    configs = GroupConfigs(Defaults({"group.share.min.record.lock.duration.ms": 1000}))
    configs.alter("g", {"share.record.lock.duration.ms": "1000"})
    assert configs.value("g", "share.record.lock.duration.ms") == "1000"
    assert configs.value("h", "share.record.lock.duration.ms") == "30000"
    described = {name: (value, source) for name, value, source, _t, _s in
                 GroupConfigs(Defaults({"group.share.delivery.count.limit": 3})).describe("g")}
    assert described["share.delivery.count.limit"] == ("3", 4)   # a broker setting given


def test_reset_strategies():
    assert all(valid_reset(v) for v in ("earliest", "LATEST", "by_duration:PT1H",
                                        "by_duration:P1DT2H30M", "by_duration:PT0.5S"))
    assert not any(valid_reset(v) for v in ("none", "by_duration:", "by_duration:1h",
                                            "by_duration:PT", "by_duration:P"))
    assert reset_duration_ms("by_duration:P1DT2H30M0.5S") == ((24 + 2) * 60 + 30) * 60_000 + 500
    assert reset_duration_ms("latest") is None
