"""docker-compose.faults.yml: faults armed over HTTP by a service of the compose stack. No Docker
engine runs here, so the file is checked with ``docker-compose config`` and its faults are posted,
as the faults service posts them, to an embedded broker that the compose test suite then runs
against (the same suite and environment variables as the tests service)."""
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
    command = faults["command"]
    url = command[-1]
    port = broker["environment"]["KAFKA_METRICS_PORT"]
    assert url == f"http://broker:{port}/faults"
    assert tests["environment"]["METRICS_URL"] == f"http://broker:{port}"
    body = command[command.index("--data") + 1]
    specs = json.loads(body)

    # the broker binds 0.0.0.0, where fault requests are off unless the overlay turns them on
    # and names the Host the faults service sends
    assert broker["environment"]["KAFKA_METRICS_HOST"] == "0.0.0.0"
    assert broker["environment"]["KAFKA_METRICS_WRITE_ENABLE"] == "true"
    assert "Content-Type: application/json" in command

    settings = {name.removeprefix("KAFKA_").lower().replace("_", "."): value
                for name, value in broker["environment"].items()
                if name in ("KAFKA_NUM_PARTITIONS", "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS",
                            "KAFKA_METRICS_WRITE_ENABLE", "KAFKA_METRICS_ALLOWED_HOSTS")}
    assert settings["metrics.allowed.hosts"] == "broker"
    with EmbeddedBroker(settings) as kb:
        # as curl sends it: Host broker:<port>
        request = urllib.request.Request(kb.metrics_url + "/faults", data=body.encode(),
                                         method="POST",
                                         headers={"Content-Type": "application/json",
                                                  "Host": f"broker:{kb.broker.http.bound[1]}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 201
            assert [f["api"] for f in json.loads(response.read())] == [s["api"] for s in specs]
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
