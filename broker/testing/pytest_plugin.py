"""pytest fixtures for applications that talk to Kafka: installing kbroker is enough (the
package's ``pytest11`` entry point loads this module).

* ``kafka_broker``: an :class:`~broker.testing.EmbeddedBroker` for the whole session (under
  pytest-xdist, one per worker);
* ``kafka_bootstrap``: its ``host:port``;
* ``kafka_topic``: a factory, ``kafka_topic(partitions=3, config={"cleanup.policy":
  "compact"})``, creating a uniquely named topic and returning its name (deleted after the test);
* ``kafka_faults``: ``kafka_broker.faults``, cleared after the test (code in other languages
  posts faults to ``kafka_broker.metrics_url + "/faults"`` as JSON: an embedded broker serves
  those writes, ``metrics.write.enable=true``, on its loopback address);
* ``kafka_broker_settings``: the broker's settings by Kafka name; override the fixture, or set
  the ``kafka_broker_settings`` ini option (``name=value`` lines).

Nothing of the broker is imported until a fixture is used, so the plugin costs nothing to test
suites that do not use it.
"""
from __future__ import annotations

import re

import pytest

INI_OPTION = "kafka_broker_settings"


def pytest_addoption(parser) -> None:
    parser.addini(INI_OPTION, type="linelist", default=[],
                  help="kbroker settings for the kafka_broker fixture, one name=value a line "
                       "(Kafka's names, e.g. num.partitions=3)")


def settings_from_ini(lines) -> dict[str, str]:
    settings = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep:
            raise pytest.UsageError(f"{INI_OPTION}: {line!r} is not name=value")
        settings[name.strip()] = value.strip()
    return settings


@pytest.fixture(scope="session")
def kafka_broker_settings(pytestconfig) -> dict:
    """Settings of the session's broker, by Kafka name: the ini option's, unless overridden."""
    return settings_from_ini(pytestconfig.getini(INI_OPTION))


@pytest.fixture(scope="session")
def kafka_broker(kafka_broker_settings):
    """A kbroker for the session (one per xdist worker), stopped at its end."""
    from .embedded import EmbeddedBroker
    broker = EmbeddedBroker(kafka_broker_settings)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker) -> str:
    """``host:port`` for ``bootstrap.servers``."""
    return kafka_broker.bootstrap_servers


@pytest.fixture
def kafka_faults(kafka_broker):
    """The session broker's faults; whatever the test adds is cleared after it."""
    yield kafka_broker.faults
    if kafka_broker.running:
        kafka_broker.faults.clear()


@pytest.fixture
def kafka_topic(kafka_broker, request):
    """``kafka_topic(partitions=1, config=None, name=None)`` creates a topic named after the
    test (unique) and returns its name; the test's topics are deleted after it."""
    created = []
    stem = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:180].strip("-") or "topic"

    def create(partitions: int = 1, config: dict | None = None, name: str | None = None) -> str:
        import uuid
        name = name or f"{stem}-{uuid.uuid4().hex[:8]}"
        kafka_broker.create_topic(name, partitions, config)
        created.append(name)
        return name

    yield create
    if kafka_broker.running:
        for name in created:
            kafka_broker.delete_topic(name)
