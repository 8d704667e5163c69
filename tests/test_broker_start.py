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
