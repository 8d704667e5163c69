"""The container tests: the project's images built and docker-compose.yml's stacks run with a
real container engine (Docker where one answers, podman otherwise: tests/containers/engine.py).
Without an engine they fail: tools/install-test-deps.sh installs podman."""
from __future__ import annotations

import time

import pytest

from tests.containers.engine import BROKER_IMAGE, TESTS_IMAGE, Engine, detect


@pytest.fixture(scope="session")
def engine() -> Engine:
    return detect()


@pytest.fixture(scope="session")
def images(engine) -> dict:
    """Both images of the Dockerfile, built once per session: the broker (kbroker:dev) and the
    compose tests service (kbroker-compose-tests:dev); seconds taken and the broker's size."""
    started = time.monotonic()
    base = engine.base_image()
    based = time.monotonic()
    engine.build("broker", BROKER_IMAGE, base)
    engine.build("compose-tests", TESTS_IMAGE, base)
    built = time.monotonic()
    # what earlier builds left untagged (the layers of older sources) goes after a day; a layer
    # still in use is made again then
    engine("image", "prune", "-f", "--filter", "label=io.kbroker.project=kbroker",
           "--filter", "until=24h", check=False)
    info = {"base": base, "base_s": based - started, "build_s": built - based,
            "broker_bytes": engine.image_size(BROKER_IMAGE),
            "base_bytes": engine.image_size(base) if base else None}
    print(f"\ncontainers: {engine.name}; base {base} in {info['base_s']:.1f} s, both images "
          f"built in {info['build_s']:.1f} s; {BROKER_IMAGE} {info['broker_bytes'] / 1e6:.0f} MB"
          + (f" (base {info['base_bytes'] / 1e6:.0f} MB)" if base else ""))
    return info
