"""kafkajs (Node.js): create a topic, produce uncompressed and gzip, consume in a group,
commit, and resume from the committed offsets with a new consumer."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

from tests.support import ROOT, unique

SCENARIO = os.path.join(ROOT, "tests", "js", "scenario.js")


def test_kafkajs_group_consume_commit_resume(broker):
    node = shutil.which("node")
    assert node, "node is not installed"
    assert os.path.isdir(os.path.join(ROOT, "tests", "js", "node_modules", "kafkajs")), \
        "kafkajs is not installed: run tools/install-test-deps.sh"
    result = subprocess.run([node, SCENARIO, broker.bootstrap, unique("kjs"), unique("kjs-g")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["partitions"] == 3
    before = sorted(v for _p, _o, v in out["before"])
    assert before == sorted(f"a{i}" for i in range(30))
    for p in range(3):  # in order within each partition
        offsets = [o for q, o, _v in out["before"] if q == p]
        assert offsets == list(range(10))
    after = sorted(v for _p, _o, v in out["after"])
    assert after == sorted(f"b{i}" for i in range(9))  # nothing consumed twice
    assert out["committed"] == [[0, 13], [1, 13], [2, 13]]
    assert out["state"] == "Empty"
