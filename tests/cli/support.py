"""Runs the real ``kbroker`` command line (``python -m broker``, the entry point's module) as a
child process, as a user would from a shell."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.support import ROOT


def kbroker(*args: str, input: str | bytes | None = None, env: dict | None = None,
            timeout: float = 60.0) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    full_env.pop("KBROKER_BOOTSTRAP", None)
    full_env.update(env or {})
    data = input.encode() if isinstance(input, str) else input
    result = subprocess.run([sys.executable, "-m", "broker", *args], input=data,
                            capture_output=True, env=full_env, cwd=ROOT, timeout=timeout)
    result.out = result.stdout.decode()
    result.err = result.stderr.decode()
    return result


def ok(result) -> str:
    assert result.returncode == 0, \
        f"exit {result.returncode}\nstdout:\n{result.out}\nstderr:\n{result.err}"
    assert "Traceback" not in result.err
    return result.out


def json_lines(result) -> list[dict]:
    return [json.loads(line) for line in ok(result).splitlines() if line.strip()]


def one_line_error(result, *fragments: str) -> str:
    """A failure: a non-zero exit, stderr one line 'kbroker: ...' holding every fragment, and
    no traceback."""
    assert result.returncode != 0, f"expected a failure, got exit 0:\n{result.out}"
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{result.err}"
    assert lines[0].startswith("kbroker: "), lines[0]
    assert "Traceback" not in result.err and "Traceback" not in result.out
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    return lines[0]
