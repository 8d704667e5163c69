"""The transaction coordinator's storage: partition N of ``__transaction_state`` belongs to
shard N, and markers go straight into the partitions of each transaction (broker/txn_markers.py)."""
from __future__ import annotations

import structlog

from ...topics import TRANSACTION_STATE_TOPIC
from ..common import storage as coordinator_log
from .coordinator import TransactionCoordinator

log = structlog.get_logger("broker.transactions")

#: the configs Kafka creates __transaction_state with; segment.bytes comes from
#: transaction.state.log.segment.bytes and min.insync.replicas from transaction.state.log.min.isr
TRANSACTION_STATE_CONFIGS = {"cleanup.policy": "compact", "compression.type": "uncompressed",
                             "unclean.leader.election.enable": "false"}


def build_transaction_coordinator(broker) -> TransactionCoordinator:
    def write_markers(producer_id, producer_epoch, commit, coordinator_epoch, partitions,
                      transaction_version=2):
        from ...txn_markers import write_txn_markers
        return write_txn_markers(broker, producer_id, producer_epoch, commit,
                                 coordinator_epoch, partitions,
                                 transaction_version=transaction_version)

    def partition_exists(topic: str, partition: int) -> bool:
        return broker.topics.partition(topic, partition) is not None

    return TransactionCoordinator(
        broker.config, broker.clock, broker.timer,
        coordinator_log.partition_writer(broker, TRANSACTION_STATE_TOPIC),
        write_markers=write_markers,
        write_group_marker=broker.coordinator.complete_transaction,
        allocate_producer_id=broker.allocate_producer_id,
        partition_exists=partition_exists,
        group_partition_for=broker.coordinator.partition_for)


async def load_all(broker) -> None:
    records, seconds = await coordinator_log.load_all(broker, broker.transactions.runtime,
                                                      TRANSACTION_STATE_TOPIC)
    if records:
        log.info("transactions loaded", records=records, seconds=seconds,
                 transactional_ids=sum(len(s.transactions) for s in broker.transactions.shards))
    broker.producer_ids.at_least(broker.transactions.max_producer_id() + 1)

