"""Broker start-up order: nothing is answered from a coordinator shard before it is loaded."""
from __future__ import annotations

import asyncio

from broker.broker import Broker
from broker.config import BrokerConfig


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
