"""The registry (broker/apis/__init__.py) and the handler modules agree: every API in SERVED has
its module, named by the API in snake_case, with that NAME and a handle(); every handler module is
in SERVED; served versions lie within the codec's; no module is imported before its first request."""
from __future__ import annotations

import importlib
import pathlib
import subprocess
import sys

from broker import apis
from protocol.messages import API_BY_NAME

APIS_DIR = pathlib.Path(apis.__file__).parent


def test_every_served_api_has_its_module_with_name_and_handle():
    for name, (low, high) in apis.SERVED.items():
        handler = next(h for h in apis.HANDLERS.values() if h.name == name)
        module = importlib.import_module(handler.module)
        assert module.NAME == name
        assert callable(module.handle)
        assert not hasattr(module, "VERSIONS"), f"{name}: versions live in SERVED only"
        codec = API_BY_NAME[name]
        assert codec.min_version <= low <= high <= codec.max_version, name


def test_every_handler_module_is_served():
    modules = {p.stem for p in APIS_DIR.glob("*.py") if p.stem != "__init__"}
    served = {h.module.rsplit(".", 1)[1] for h in apis.HANDLERS.values()}
    assert modules == served      # handler modules only: helpers live beside what they serve


def test_a_broker_start_imports_no_handler_until_its_first_request():
    code = ("import sys, broker.broker, broker.apis\n"
            "print(sorted(m for m in sys.modules if m.startswith('broker.apis.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    loaded = set(eval(out))  # noqa: S307 - our own child's repr of a list of str
    handlers = {h.module for h in apis.HANDLERS.values()}
    assert not loaded & handlers, loaded & handlers


def test_group_protocols_decide_which_group_apis_are_advertised():
    """group.coordinator.rebalance.protocols: Kafka 4.3's default names streams too; without
    consumer or streams their APIs are not listed; an unknown protocol is refused at start."""
    import pytest
    from broker.config import BrokerConfig, ConfigError

    def listed(protocols=None) -> set[str]:
        settings = {"metrics.port": 0}
        if protocols is not None:
            settings["group.coordinator.rebalance.protocols"] = protocols
        keys = {e.api_key for e in apis.api_version_entries(BrokerConfig(settings))}
        return {h.name for h in apis.HANDLERS.values() if h.key in keys}

    streams = {"StreamsGroupHeartbeat", "StreamsGroupDescribe"}
    consumer = {"ConsumerGroupHeartbeat", "ConsumerGroupDescribe"}
    assert BrokerConfig({"metrics.port": 0})["group.coordinator.rebalance.protocols"] == \
        ("classic", "consumer", "streams")
    assert streams | consumer <= listed()
    assert not streams & listed("classic,consumer") and consumer <= listed("classic,consumer")
    assert streams <= listed("classic,streams") and not consumer & listed("classic,streams")
    with pytest.raises(ConfigError, match="unknown: \\['nope'\\]"):
        BrokerConfig({"metrics.port": 0, "group.coordinator.rebalance.protocols": "classic,nope"})
