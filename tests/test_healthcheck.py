"""``kbroker healthcheck`` (the image's HEALTHCHECK): healthy only once the broker answers
ApiVersions and its coordinators have loaded (/ready on its HTTP port); while a coordinator shard
replays __consumer_offsets, unhealthy, with the reason. The shard's load is held open by a
``coordinator_load`` fault and ended by ``finish_loads()``, so nothing waits for a timeout."""
from __future__ import annotations

import pytest

from broker.cli import healthcheck
from broker.config import BrokerConfig
from broker.testing.embedded import EmbeddedBroker
from tests.support import free_port, unique


@pytest.fixture(scope="module")
def kb():
    with EmbeddedBroker({"metrics.port": free_port()}) as broker:
        yield broker


def probe_config(kb, **more) -> BrokerConfig:
    """The settings `kbroker healthcheck` runs with beside that broker (as in its container)."""
    return BrokerConfig({"listeners": f"PLAINTEXT://0.0.0.0:{kb.port}",
                         "metrics.port": kb.config["metrics.port"], **more})


def test_healthy_when_ready(kb, capsys):
    assert healthcheck(probe_config(kb)) == 0
    assert capsys.readouterr().out.strip() == "healthy"


def test_unhealthy_while_a_coordinator_loads_then_healthy(kb, capsys):
    group = unique("hc-group")
    kb.faults.add(action="coordinator_load", duration_ms=600_000, match={"group": group})
    try:
        assert healthcheck(probe_config(kb)) == 1
        err = capsys.readouterr().err
        assert err.startswith("unhealthy: not ready (503): loading 1 coordinator shards"), err
    finally:
        assert kb.faults.finish_loads() == 1
        kb.faults.clear()
    assert healthcheck(probe_config(kb)) == 0
    assert "healthy" in capsys.readouterr().out


def test_http_port_off_checks_the_listener_only(kb, capsys):
    assert healthcheck(probe_config(kb, **{"metrics.port": 0})) == 0
    capsys.readouterr()


def test_no_broker_is_unhealthy(kb, capsys):
    config = BrokerConfig({"listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
                           "metrics.port": kb.config["metrics.port"]})
    assert healthcheck(config) == 1
    assert capsys.readouterr().err.startswith("unhealthy: ")
