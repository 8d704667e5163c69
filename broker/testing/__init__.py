"""kbroker for tests: :class:`EmbeddedBroker` runs the broker in the test process, the pytest
plugin (pytest_plugin.py, registered by the package's ``pytest11`` entry point) gives fixtures,
and broker/faults.py makes the broker misbehave as Kafka does in production."""
from __future__ import annotations

__all__ = ["EmbeddedBroker", "FaultError"]


def __getattr__(name: str):
    # lazily: embedded.py imports the broker, which a plain `import broker.testing` need not
    if name == "EmbeddedBroker":
        from .embedded import EmbeddedBroker
        return EmbeddedBroker
    if name == "FaultError":
        from ..faults import FaultError
        return FaultError
    raise AttributeError(name)
