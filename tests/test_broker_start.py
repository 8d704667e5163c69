"""Broker start-up: nothing is answered from a coordinator shard before it is loaded, and what
the configuration gives to read (a SCRAM credentials file) is read at start."""
from __future__ import annotations

import asyncio

import pytest

from broker.broker import Broker
from broker.config import BrokerConfig
from broker.errors import ConfigError
from broker.security import SCRAM_CREDENTIALS_FILE


def test_listeners_open_only_after_every_shard_is_marked_loading(tmp_path):
    """A consumer that connects while the broker restarts must get
    COORDINATOR_LOAD_IN_PROGRESS, never an empty OffsetFetch answer (issue 14, defect 11)."""
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "metrics.port": 0,
                           "log.dirs": str(tmp_path)})
    broker = Broker(config)
    seen = {}
    start = broker.server.start

    async def start_listeners():
        seen["groups"] = len(broker.coordinator.shards_loading)
        seen["transactions"] = len(broker.transactions.shards_loading)
        await start()

    broker.server.start = start_listeners

    async def run():
        await broker.start()
        try:
            assert not broker.coordinator.shards_loading
            assert not broker.transactions.shards_loading
        finally:
            await broker.stop()

    asyncio.run(run())
    assert seen == {"groups": 50, "transactions": 50}


def test_the_command_line_broker_freezes_its_start_up_and_collects_garbage_less_often():
    """``kbroker`` (broker/cli) hands what start-up made to gc.freeze and raises the collector's
    thresholds once its listeners are open (broker/network/process_tuning.py); the embedded
    broker leaves the host process's collector alone."""
    import gc
    import subprocess
    import sys

    from broker.network.process_tuning import GC_THRESHOLDS
    from tests.support import ROOT
    script = """
import asyncio, gc, os, signal, time
from broker.cli import _run
from broker.config import BrokerConfig
seen = {}
async def main():
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + 20
    def look():
        if gc.get_freeze_count() == 0 and time.monotonic() < deadline:
            loop.call_later(0.05, look)
            return
        seen["threshold"] = gc.get_threshold()
        seen["frozen"] = gc.get_freeze_count()
        os.kill(os.getpid(), signal.SIGTERM)
    print("before", gc.get_threshold(), gc.get_freeze_count(), flush=True)
    loop.call_soon(look)
    code = await _run(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "metrics.port": 0}))
    print("after", seen["threshold"], seen["frozen"], code, flush=True)
asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    before, frozen_before = lines["before"].rsplit(" ", 1)
    assert before == str(gc.get_threshold()) and frozen_before == "0"  # the interpreter's own
    threshold, frozen, code = lines["after"].rsplit(" ", 2)
    assert threshold == str(GC_THRESHOLDS)
    assert int(frozen) > 10_000                       # modules, codecs, shards: out of its sight
    assert code == "0"
    assert "Traceback" not in done.stderr


def test_an_unreadable_scram_credentials_file_stops_the_start(tmp_path):
    """The SCRAM store is made at its first use, except when there is something to read: a
    credentials file that cannot be read is still an error at start, without a SASL listener."""
    (tmp_path / SCRAM_CREDENTIALS_FILE).write_text("{not json")
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", "metrics.port": 0,
                           "log.dirs": str(tmp_path)})
    with pytest.raises(ConfigError, match="cannot read the SCRAM credentials"):
        Broker(config)


def test_scram_credentials_are_read_at_start_when_given_and_at_first_use_otherwise(tmp_path):
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "metrics.port": 0,
                "log.dirs": str(tmp_path)}
    first = Broker(BrokerConfig(dict(settings, **{
        "sasl.scram.bootstrap.credentials": "SCRAM-SHA-256=[name=alice,password=secret]"})))
    assert first._scram_credentials is not None       # bootstrapped (and saved) at start
    assert first.scram_credentials.users() == ["alice"]
    again = Broker(BrokerConfig(settings))
    assert again._scram_credentials is not None       # the file is read at start
    assert again.scram_credentials.users() == ["alice"]
    in_memory = Broker(BrokerConfig(dict(settings, **{"log.dirs": ""})))
    assert in_memory._scram_credentials is None
    assert in_memory.scram_credentials.users() == []  # made when asked
    assert in_memory.scram_credentials is in_memory.scram_credentials
