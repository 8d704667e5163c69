"""Which engine the container tests use, and that none at all is a failure, not a skip."""
from __future__ import annotations

import pytest

from tests.containers import engine as engines

# runs alone, after the parallel part (tools/run-tests.sh): builds the images the stack tests run
pytestmark = pytest.mark.serial


def test_no_engine_fails_with_what_to_run(monkeypatch):
    monkeypatch.setattr(engines.shutil, "which", lambda name: None)
    monkeypatch.delenv("KBROKER_CONTAINER_ENGINE", raising=False)
    with pytest.raises(engines.EngineMissing, match="tools/install-test-deps.sh"):
        engines.detect()


def test_docker_insisted_on_without_an_engine_fails(monkeypatch):
    monkeypatch.setenv("KBROKER_CONTAINER_ENGINE", "docker")
    monkeypatch.setattr(engines.shutil, "which", lambda name: f"/bin/{name}")
    monkeypatch.setattr(engines, "run", lambda argv, **kw: engines.subprocess.CompletedProcess(
        argv, 1, "", "Cannot connect to the Docker daemon"))
    with pytest.raises(engines.EngineMissing, match="docker info"):
        engines.detect()


def test_podman_without_a_docker_engine(monkeypatch):
    monkeypatch.delenv("KBROKER_CONTAINER_ENGINE", raising=False)
    monkeypatch.setattr(engines.shutil, "which", lambda name: f"/bin/{name}")
    monkeypatch.setattr(engines, "run", lambda argv, **kw: engines.subprocess.CompletedProcess(
        argv, 1, "", "Cannot connect to the Docker daemon"))
    found = engines.detect()
    assert (found.name, found.compose) == ("podman", ["/bin/podman-compose"])
    assert found.env["BUILDAH_FORMAT"] == "docker"
    assert found.env["CONTAINERS_CONF"].endswith("tools/containers/containers.conf")
