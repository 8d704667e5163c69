"""The broker's start path loads no Kafka client library: the client commands live in
broker/cli/ beside the broker-start command (broker/cli/__init__.py) and are imported only
when a client subcommand is given. Checked on the source (no module outside the client
commands imports kafka or confluent_kafka) and in a fresh interpreter (importing the broker
and parsing its start options leaves both out of sys.modules)."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

from tests.cli.support import kbroker
from tests.support import ROOT

CLIENT_LIBRARIES = ("kafka", "confluent_kafka")
#: the client commands: the only modules of broker/ allowed to import a client library
CLIENT_COMMANDS = ("broker/cli/commands.py", "broker/cli/connection.py", "broker/cli/errors.py",
                   "broker/cli/output.py", "broker/cli/topics.py", "broker/cli/produce.py",
                   "broker/cli/consume.py", "broker/cli/groups.py", "broker/cli/admin.py",
                   "broker/cli/kafka_messages.py")


def _client_imports(path: str) -> list[str]:
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    found = []
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level
                 else [])
        found.extend(n for n in names if n.split(".")[0] in CLIENT_LIBRARIES)
    return found


def test_only_the_client_commands_import_a_client_library():
    offenders = {}
    for package in ("broker", "protocol"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                if rel in CLIENT_COMMANDS:
                    continue
                imports = _client_imports(path)
                if imports:
                    offenders[rel] = imports
    assert offenders == {}
    assert _client_imports(os.path.join(ROOT, "broker/cli/topics.py"))  # the check sees them


def test_the_broker_start_path_loads_no_client_library():
    code = ("import sys\n"
            "from broker.cli import build_parser, resolve_config, CLIENT_COMMANDS\n"
            "from broker.broker import Broker\n"
            "resolve_config(build_parser().parse_args(['--port', '1']))\n"
            "print(sorted({m.split('.')[0] for m in sys.modules}\n"
            "             & {'kafka', 'confluent_kafka'}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), check=True).stdout
    assert out.strip() == "[]"


def test_client_help_loads_no_client_library():
    result = kbroker("topic", "create", "--help")
    assert result.returncode == 0 and "--partitions" in result.out
    code = ("import sys\nfrom broker.cli.commands import build_parser\nbuild_parser()\n"
            "print(sorted({m.split('.')[0] for m in sys.modules}\n"
            "             & {'kafka', 'confluent_kafka'}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), check=True).stdout
    assert out.strip() == "[]"


def test_plain_kbroker_help_names_the_client_commands():
    result = kbroker("--help")
    assert result.returncode == 0 and "--listeners" in result.out
    assert "topic, produce, consume, group" in " ".join(result.out.split())


def test_a_misspelt_or_misplaced_command_is_named():
    result = kbroker("topics")
    assert result.returncode == 2 and "invalid choice: 'topics'" in result.err
    assert "'topic'" in result.err and "Traceback" not in result.err
    result = kbroker("--port", "1", "topic", "list")
    assert result.returncode == 2
    assert result.err.strip() == ("kbroker: a client command comes first, its options after "
                                  "it: kbroker topic ... -b HOST:PORT")
