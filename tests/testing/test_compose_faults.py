"""docker-compose.faults.yml: faults armed over HTTP by a service of the compose stack. The file is
checked with ``docker-compose config``, and the faults service's own script posts its faults to an
embedded broker that the compose test suite then runs against (the same suite and environment
variables as the tests service). tests/containers/ runs the stack itself."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request

import yaml

from broker.testing import EmbeddedBroker
from tests.support import ROOT


def compose_config() -> dict:
    compose = shutil.which("docker-compose")
    assert compose, "docker-compose not found: run tools/install-test-deps.sh"
    result = subprocess.run([compose, "-f", "docker-compose.yml", "-f",
                             "docker-compose.faults.yml", "config"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_compose_faults_service_arms_the_faults_and_the_suite_runs_through_them():
    services = compose_config()["services"]
    faults, broker, tests = services["faults"], services["broker"], services["tests"]
    assert faults["depends_on"]["broker"]["condition"] == "service_healthy"
    assert tests["depends_on"]["faults"]["condition"] == "service_completed_successfully"
    assert faults["image"] == broker["image"], "the broker's own image, nothing to pull"
    url = faults["environment"]["FAULTS_URL"]
    port = broker["environment"]["KAFKA_METRICS_PORT"]
    assert url == f"http://broker:{port}/faults"
    assert tests["environment"]["METRICS_URL"] == f"http://broker:{port}"
    body = faults["environment"]["FAULTS"]
    specs = json.loads(body)
    script = faults["entrypoint"]
    assert script[:2] == ["python", "-c"] and "application/json" in script[2]

    # the broker binds 0.0.0.0, where fault requests are off unless the overlay turns them on
    # and names the Host the faults service sends
    assert broker["environment"]["KAFKA_METRICS_HOST"] == "0.0.0.0"
    assert broker["environment"]["KAFKA_METRICS_WRITE_ENABLE"] == "true"

    settings = {name.removeprefix("KAFKA_").lower().replace("_", "."): value
                for name, value in broker["environment"].items()
                if name in ("KAFKA_NUM_PARTITIONS", "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS",
                            "KAFKA_METRICS_WRITE_ENABLE", "KAFKA_METRICS_ALLOWED_HOSTS")}
    assert settings["metrics.allowed.hosts"] == "broker"
    with EmbeddedBroker(settings) as kb:
        # the faults service's own script, its URL mapped to this broker
        posted = subprocess.run([sys.executable, *script[1:]], capture_output=True, text=True,
                                env=dict(os.environ, FAULTS=body,
                                         FAULTS_URL=kb.metrics_url + "/faults"), timeout=60)
        assert posted.returncode == 0, posted.stderr
        status, _, listed = posted.stdout.partition(" ")
        assert status == "201"
        assert [f["api"] for f in json.loads(listed)] == [s["api"] for s in specs]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
        env.update(BOOTSTRAP_SERVERS=kb.bootstrap_servers, METRICS_URL=kb.metrics_url,
                   PYTHONPATH=ROOT)
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                 "tests/compose"], cwd=ROOT, env=env, capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        with urllib.request.urlopen(kb.metrics_url + "/faults", timeout=10) as response:
            fired = {f["api"]: f["fired"] for f in json.loads(response.read())}
    # every fault met the clients of the suite, as many times as it was armed for
    assert fired == {s["api"]: s["count"] for s in specs}
