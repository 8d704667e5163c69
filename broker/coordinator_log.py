"""A coordinator's internal topic as its storage (Kafka's CoordinatorPartitionWriter and
CoordinatorLoaderImpl): records are appended to partition N of the topic as ordinary record
batches, transactional writes as transactional batches, markers as control batches; at start
every partition is replayed into its shard, one partition per event-loop turn, while the shard
answers COORDINATOR_LOAD_IN_PROGRESS."""
from __future__ import annotations

import asyncio
import time

import structlog

from protocol.records import SimpleRecord, build_batch

from .coordinator.runtime import EndMarker

log = structlog.get_logger("broker.coordinator")

NO_SEQUENCE = -1


def partition_writer(broker, topic: str):
    """``persist(partition, records, on_done, producer=None)`` appending to ``topic``."""
    def persist(partition: int, records, on_done, producer=None) -> None:
        target = broker.topics.partition(topic, partition)
        try:
            now = broker.clock()
            batch_records = [SimpleRecord(key, value, timestamp=now) for key, value in records]
            if producer is None:
                target.log.append(build_batch(batch_records))
            else:
                # the partition's producer state opens the transaction, so that its last
                # stable offset and aborted index cover it until the marker
                target.append_from_coordinator(build_batch(
                    batch_records, producer_id=producer[0], producer_epoch=producer[1],
                    base_sequence=NO_SEQUENCE, is_transactional=True))
        except Exception as exc:  # noqa: BLE001 - answered as Kafka answers a failed append
            log.error("coordinator log append failed", topic=topic, partition=partition,
                      error=str(exc))
            on_done(exc)
            return
        broker.fetches.partition_appended(topic, partition)
        on_done(None)

    return persist


def marker_writer(broker, topic: str):
    """``persist_marker(partition, producer_id, producer_epoch, commit, coordinator_epoch,
    on_done)``: a transaction marker into a partition of ``topic``."""
    def persist_marker(partition: int, producer_id: int, producer_epoch: int, commit: bool,
                       coordinator_epoch: int, on_done, transaction_version: int = 2) -> None:
        from .txn_markers import write_txn_markers
        errors = write_txn_markers(broker, producer_id, producer_epoch, commit,
                                   coordinator_epoch, [(topic, partition)],
                                   transaction_version=transaction_version)
        error = errors.get((topic, partition), 0)
        on_done(None if not error else RuntimeError(f"marker not written: error {error}"))

    return persist_marker


def read_entries(partition_log):
    """The records of a partition log in offset order: ``(key, value, producer_id)`` (producer
    id -1 outside transactions) and an EndMarker per control batch."""
    start = partition_log.log_start_offset
    for batch in partition_log.batches():
        if batch.is_control:
            for record in batch.records():
                key = record.key
                if key is not None and len(key) >= 4:
                    yield EndMarker(batch.producer_id, batch.producer_epoch,
                                    int.from_bytes(key[2:4], "big") == 1)
            continue
        producer_id = batch.producer_id if batch.is_transactional else -1
        for record in batch.records():
            if record.offset >= start and record.key is not None:
                yield record.key, record.value, producer_id


def begin_loading_all(broker, runtime, topic: str) -> None:
    """Mark every shard as loading: called before the listeners accept, so that no request is
    answered from a shard that has not replayed its partition yet."""
    for partition in broker.topics.get(topic).partitions:
        runtime.begin_loading(partition.index)


async def load_all(broker, runtime, topic: str) -> tuple[int, float]:
    """Replay every partition of ``topic`` into ``runtime``'s shards (already loading):
    (records replayed, seconds)."""
    partitions = broker.topics.get(topic).partitions
    started = time.monotonic()
    total = 0
    for partition in partitions:
        total += runtime.load(partition.index, read_entries(partition.log))
        runtime.finish_loading(partition.index)
        await asyncio.sleep(0)
    return total, round(time.monotonic() - started, 3)
