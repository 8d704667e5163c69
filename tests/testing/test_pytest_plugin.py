"""The pytest plugin as a user gets it: a fresh virtual environment with only this package (and
pytest, and pytest-xdist for the worker test) installed from the repository's files, and a small
project of its own, run by pytest in a subprocess. Nothing of this repository's tests or
conftest is visible there: the fixtures come from the package's pytest11 entry point alone.

tools/install-test-deps.sh fills a wheelhouse (``~/.cache/kbroker/wheelhouse``, or
``KBROKER_WHEELHOUSE``) with what the environment needs, so the install runs without an index;
without a wheelhouse pip asks the package index."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import venv

import pytest

from tests.support import ROOT

WHEELHOUSE = os.environ.get("KBROKER_WHEELHOUSE",
                            os.path.expanduser("~/.cache/kbroker/wheelhouse"))

#: the example project's own helper: Kafka requests through the installed package's protocol
#: codec (the environment has no Kafka client library)
CLIENT = '''
import socket
import struct

from protocol.framing import encode_request, read_response_header
from protocol.messages import APIS


def call(bootstrap, request, version):
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    api = APIS[type(request).api_key]
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(encode_request(api.key, version, 1, "example-app", request))
        size = struct.unpack(">i", _read(sock, 4))[0]
        frame = _read(sock, size)
    _, offset = read_response_header(frame, api.response_header_version(version))
    return api.response.decode(frame, version, offset)


def _read(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def partitions(bootstrap, topic):
    from protocol.messages import MetadataRequest
    answer = call(bootstrap, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        name=topic)], allow_auto_topic_creation=True), 12)
    return answer.topics[0].error_code, len(answer.topics[0].partitions)
'''

TESTS = '''
import json
import os

from kafka_client import partitions


def record(bootstrap):
    out = os.environ.get("EXAMPLE_OUT")
    if out:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(os.path.join(out, worker + ".jsonl"), "a") as f:
            f.write(json.dumps({"worker": worker, "bootstrap": bootstrap}) + "\\n")


def test_topic_factory(kafka_topic, kafka_bootstrap):
    record(kafka_bootstrap)
    name = kafka_topic(partitions=2, config={"cleanup.policy": "compact"})
    other = kafka_topic()
    assert name != other and name.startswith("test_topic_factory-")
    assert partitions(kafka_bootstrap, name) == (0, 2)
    assert partitions(kafka_bootstrap, other) == (0, 1)


def test_settings_reach_the_broker(kafka_bootstrap, kafka_broker):
    record(kafka_bootstrap)
    assert partitions(kafka_bootstrap, "auto-created") == (0, int(os.environ["EXPECT_PARTITIONS"]))
    assert kafka_broker.bootstrap_servers == kafka_bootstrap


def test_faults_from_python(kafka_faults, kafka_bootstrap, kafka_topic):
    record(kafka_bootstrap)
    name = kafka_topic()
    fault = kafka_faults.add(api="Metadata", error="LEADER_NOT_AVAILABLE", match={"topic": name})
    assert partitions(kafka_bootstrap, name) == (5, 0)
    assert partitions(kafka_bootstrap, name) == (0, 1)
    assert fault.fired == 1


def test_faults_are_cleared_after_each_test(kafka_broker):
    record(kafka_broker.bootstrap_servers)
    assert kafka_broker.faults.list() == []
'''


def _pip_source() -> list[str]:
    if os.path.isdir(WHEELHOUSE) and os.listdir(WHEELHOUSE):
        return ["--no-index", "--find-links", WHEELHOUSE]
    return []


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A virtual environment with the package installed from this repository's files."""
    base = tmp_path_factory.mktemp("plugin")
    src = base / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, name), src / name)
    for package in ("broker", "protocol"):
        shutil.copytree(os.path.join(ROOT, package), src / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    venv.EnvBuilder(with_pip=True).create(base / "venv")
    python = str(base / "venv" / "bin" / "python")
    result = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         *_pip_source(), str(src), "pytest", "pytest-xdist"],
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    installed = subprocess.run([python, "-m", "pip", "list", "--format=json"],
                               capture_output=True, text=True, check=True)
    names = {p["name"].lower() for p in json.loads(installed.stdout)}
    # kafka-python comes with kbroker (its client subcommands use it); confluent-kafka is only
    # the optional "cli" extra, and the plugin itself needs no client library
    assert "kbroker" in names and "kafka-python" in names and "confluent-kafka" not in names
    return base, python


def _project(base, name: str, ini: str = "", conftest: str = "") -> str:
    project = base / name
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n" + ini)
    (project / "kafka_client.py").write_text(CLIENT)
    (project / "test_app.py").write_text(TESTS)
    if conftest:
        (project / "conftest.py").write_text(conftest)
    return str(project)


def _pytest(python, project: str, *args, **env_vars) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHON"))}
    env.update(env_vars)
    return subprocess.run([python, "-m", "pytest", "-q", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)


def test_fixtures_with_settings_from_the_ini_option(env):
    base, python = env
    project = _project(base, "ini", ini="kafka_broker_settings =\n    num.partitions = 3\n")
    result = _pytest(python, project, EXPECT_PARTITIONS="3")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout


def test_settings_fixture_overridden_in_a_conftest(env):
    base, python = env
    project = _project(
        base, "override", ini="kafka_broker_settings =\n    num.partitions = 3\n",
        conftest=textwrap.dedent('''
            import pytest

            @pytest.fixture(scope="session")
            def kafka_broker_settings():
                return {"num.partitions": 5}
        '''))
    result = _pytest(python, project, EXPECT_PARTITIONS="5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout


def test_one_broker_per_xdist_worker(env):
    base, python = env
    project = _project(base, "xdist")
    out = base / "xdist-out"
    out.mkdir()
    result = _pytest(python, project, "-n", "2", "--dist", "each", EXPECT_PARTITIONS="1",
                     EXAMPLE_OUT=str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "8 passed" in result.stdout
    seen: dict[str, set] = {}
    for path in out.iterdir():
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            seen.setdefault(entry["worker"], set()).add(entry["bootstrap"])
    assert sorted(seen) == ["gw0", "gw1"]
    assert all(len(addresses) == 1 for addresses in seen.values())  # one broker per worker
    assert seen["gw0"] != seen["gw1"]


def test_a_bad_ini_setting_is_a_usage_error(env):
    base, python = env
    project = _project(base, "bad", ini="kafka_broker_settings =\n    num.partitions\n")
    result = _pytest(python, project, EXPECT_PARTITIONS="1")
    assert result.returncode != 0
    assert "is not name=value" in result.stdout + result.stderr



def test_console_assets_are_served_from_the_installed_package(env):
    """The web console's page, script and stylesheet are package data (pyproject.toml): an
    installed (not editable) kbroker serves them."""
    _base, python = env
    script = (
        "import urllib.request\n"
        "from broker.testing.embedded import EmbeddedBroker\n"
        "with EmbeddedBroker() as b:\n"
        "    for path in ('/', '/console.js', '/console.css'):\n"
        "        with urllib.request.urlopen(b.metrics_url + path) as r:\n"
        "            print('asset', path, r.status, len(r.read()))\n")
    env_vars = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHON"))}
    result = subprocess.run([python, "-c", script], cwd=str(_base), env=env_vars,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line.split()[1:] for line in result.stdout.splitlines()
             if line.startswith("asset ")]  # the broker logs on stdout too
    assert [(path, status) for path, status, _size in lines] == [
        ("/", "200"), ("/console.js", "200"), ("/console.css", "200")]
    assert all(int(size) > 500 for _path, _status, size in lines)
