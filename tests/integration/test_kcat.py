"""kcat (Debian's package, librdkafka inside): metadata, produce and consume, consumer group."""
from __future__ import annotations

import shutil
import subprocess

from tests.support import unique

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def kcat(*args: str, stdin: str | None = None, timeout: float = 30) -> str:
    assert KCAT, "kcat is not installed: run tools/install-test-deps.sh"
    result = subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_kcat_produce_consume_and_metadata(broker):
    topic = unique("kcat")
    lines = [f"key{i}:value{i}" for i in range(20)]
    # auto-creation through Metadata with num.partitions=1
    kcat("-b", broker.bootstrap, "-P", "-t", topic, "-K:", "-z", "snappy",
         stdin="\n".join(lines) + "\n")
    out = kcat("-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-f",
               "%k:%s@%o\\n")
    assert out.splitlines() == [f"{line}@{i}" for i, line in enumerate(lines)]
    metadata = kcat("-b", broker.bootstrap, "-L", "-t", topic)
    assert f'topic "{topic}" with 1 partitions' in metadata
    assert "leader 1" in metadata


def test_kcat_consumer_group_commits(broker):
    topic, group = unique("kcat-group"), unique("kcat-g")
    kcat("-b", broker.bootstrap, "-P", "-t", topic, stdin="a\nb\nc\n")
    first = kcat("-b", broker.bootstrap, "-G", group, "-o", "beginning", "-e",
                 "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100", topic)
    assert first.split() == ["a", "b", "c"]
    kcat("-b", broker.bootstrap, "-P", "-t", topic, stdin="d\n")
    second = kcat("-b", broker.bootstrap, "-G", group, "-e", topic)
    assert second.split() == ["d"]
