"""Producer ids are never handed out twice, across restarts with a data directory."""
from __future__ import annotations

from broker.coordinator.transaction.producer_ids import BLOCK_SIZE, ProducerIdManager


def test_a_restart_continues_after_the_stored_block(tmp_path):
    first = ProducerIdManager(str(tmp_path))
    given = [first.generate() for _ in range(3)]
    assert given == [1000, 1001, 1002]
    # the log cleaner may since have removed every batch of these producers: nothing in the logs
    # remembers them, the stored block does
    second = ProducerIdManager(str(tmp_path))
    assert second.generate() == 1000 + BLOCK_SIZE
    third = ProducerIdManager(str(tmp_path))
    assert third.generate() == 1000 + 2 * BLOCK_SIZE


def test_ids_found_in_the_logs_are_skipped(tmp_path):
    manager = ProducerIdManager(str(tmp_path))
    manager.at_least(5000)
    assert manager.generate() == 5000
    assert ProducerIdManager(str(tmp_path)).generate() == 5000 + BLOCK_SIZE


def test_in_memory_needs_no_file():
    manager = ProducerIdManager(None)
    assert [manager.generate() for _ in range(BLOCK_SIZE + 2)][-1] == 1000 + BLOCK_SIZE + 1
