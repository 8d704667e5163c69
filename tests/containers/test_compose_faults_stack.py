"""docker-compose.yml with docker-compose.faults.yml, with a real engine: the faults service (the
broker's own image, Python's urllib) arms the faults over HTTP, the tests service's suite passes
through them, and every fault met the clients as often as it was armed for. Then the broker's
healthcheck: unhealthy while a coordinator shard loads, healthy again once it has."""
from __future__ import annotations

import json
import time
import urllib.request

import pytest
import yaml

from tests.containers.engine import Stack, assert_suite_passed
from tests.support import ROOT, free_port, unique

# runs alone, after the parallel part (tools/run-tests.sh): the images are built once per session,
# and each xdist worker would build the same tags at once
pytestmark = [pytest.mark.timeout(900), pytest.mark.serial]


@pytest.fixture(scope="module")
def stack(engine, images):
    stack = Stack(engine, ["docker-compose.yml", "docker-compose.faults.yml"],
                  port=free_port(), http_port=free_port())
    try:
        stack.up("broker")
        yield stack
    finally:
        stack.down(volumes=True)


def armed_faults() -> list[dict]:
    with open(f"{ROOT}/docker-compose.faults.yml") as f:
        return json.loads(yaml.safe_load(f)["services"]["faults"]["environment"]["FAULTS"])


def http(stack, method: str, path: str, body=None):
    """A request to the broker's HTTP port from the host (published on 127.0.0.1)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{stack.http_port}{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=30) as response:
        return response.status, json.loads(response.read() or b"null")


def test_faults_armed_by_the_faults_service_and_the_suite_passes_through_them(stack):
    code, output = stack.run_service("faults")
    assert code == 0, output
    assert output.startswith("201 "), output
    assert_suite_passed(*stack.run_service("tests"))
    status, listed = http(stack, "GET", "/faults")
    assert status == 200
    assert {f["api"]: f["fired"] for f in listed} == \
        {f["api"]: f["count"] for f in armed_faults()}


def test_healthcheck_is_unhealthy_while_a_coordinator_loads(engine, stack):
    container = stack.container("broker")
    assert engine.healthcheck(container)[0]
    hold_ms = 5000
    armed = time.monotonic()
    status, _ = http(stack, "POST", "/faults", [
        {"action": "coordinator_load", "duration_ms": hold_ms,
         "match": {"group": unique("loading")}}])
    assert status == 201
    healthy, said = engine.healthcheck(container)
    assert not healthy and "not ready (503): loading 1 coordinator shards" in said, said
    stack.wait_healthy("broker", time.monotonic())
    assert time.monotonic() - armed >= hold_ms / 1000
