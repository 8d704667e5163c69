"""Transaction markers: how a COMMIT or ABORT reaches a partition (Kafka's WriteTxnMarkers
handling on one broker).

A marker is a control batch of one record: key = version 0 + control type (0 abort, 1 commit),
value = EndTxnMarker version 0 with the coordinator epoch. Writing it ends the producer's
transaction on the partition: the last stable offset moves past it, an aborted transaction
enters the partition's aborted index, and read_committed fetches waiting on the partition wake.
"""
from __future__ import annotations

import struct

from protocol.errors import ErrorCode
from protocol.records import build_batch

ABORT, COMMIT = 0, 1
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0

_KEY = struct.Struct(">hh")  # version, control type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch


def end_marker_batch(producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int, timestamp: int) -> bytes:
    """The control batch Kafka writes for an end-of-transaction marker (base sequence -1)."""
    key = _KEY.pack(CONTROL_KEY_VERSION, COMMIT if commit else ABORT)
    value = _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)
    return build_batch([(key, value, (), timestamp)], producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=-1,
                       is_transactional=True, is_control=True)


def parse_end_marker(batch) -> tuple[bool, int, int] | None:
    """(commit, coordinator epoch, timestamp) of a control batch holding a transaction marker;
    None for an emptied batch or another control type."""
    for record in batch.records():
        key, value = record.key, record.value
        if key is None or len(key) < 4 or value is None or len(value) < 6:
            return None
        _version, kind = _KEY.unpack_from(key)
        if kind not in (ABORT, COMMIT):
            return None
        return kind == COMMIT, _VALUE.unpack_from(value)[1], record.timestamp
    return None


def write_txn_markers(broker, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, partitions: list[tuple[str, int]], *,
                      transaction_version: int = 2) -> dict[tuple[str, int], int]:
    """Append one marker to each partition and return an error code per partition: NONE,
    UNKNOWN_TOPIC_OR_PARTITION (no such partition, e.g. deleted), INVALID_PRODUCER_EPOCH (a
    stale producer epoch: in transaction version 2 the marker must carry the bumped epoch, one
    above the transaction's batches, or repeat a marker already written),
    TRANSACTION_COORDINATOR_FENCED (an older coordinator epoch than the last marker's).
    ``transaction_version`` < 2 checks epochs as before KIP-890 (the marker carries the
    transaction's own epoch). Synchronous."""
    results = {}
    now = broker.clock()
    fetches = broker.fetches
    for key in partitions:
        topic, index = key
        partition = broker.topics.partition(topic, index)
        if partition is None:
            results[key] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        code = partition.write_end_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                          now, transaction_version)
        results[key] = code
        if code == ErrorCode.NONE:
            fetches.partition_appended(topic, index)  # the last stable offset moved
    return results
