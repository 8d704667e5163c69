"""Records of ``__transaction_state`` in Kafka's format (TransactionLogKey/Value), so Kafka's
tools read the topic and a restart replays it.

The key is int16 version 0 followed by TransactionLogKey; the value is an int16 version
followed by TransactionLogValue: version 1 (flexible, with the previous and next producer ids
and the client's transaction version as tagged fields) as Kafka 4.3 writes it at transaction
version 2; version 0 is read too. A tombstone (None) removes an expired transactional id.
"""
from __future__ import annotations

import struct

from protocol import messages as m

from .metadata import TransactionState, TxnTransit

KEY_VERSION = 0
VALUE_VERSION = 1
_INT16 = struct.Struct(">h")


class TransactionRecordError(ValueError):
    """Not a readable __transaction_state record."""


def key(transactional_id: str) -> bytes:
    return _INT16.pack(KEY_VERSION) + m.TransactionLogKey(
        transactional_id=transactional_id).encode(0)


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key version this broker does not know."""
    if data is None or len(data) < 2:
        raise TransactionRecordError("record key shorter than its version")
    if _INT16.unpack_from(data)[0] != KEY_VERSION:
        return None
    try:
        return m.TransactionLogKey.decode(data, 0, 2).transactional_id
    except Exception as exc:
        raise TransactionRecordError(f"bad transaction log key: {exc}") from exc


def value(transit: TxnTransit) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(transit.partitions):
        by_topic.setdefault(topic, []).append(partition)
    schema = m.TransactionLogValue.PartitionsSchema
    partitions = None if transit.state is TransactionState.EMPTY else [
        schema(topic=t, partition_ids=ps) for t, ps in by_topic.items()]
    body = m.TransactionLogValue(
        producer_id=transit.producer_id, previous_producer_id=transit.prev_producer_id,
        next_producer_id=transit.next_producer_id, producer_epoch=transit.producer_epoch,
        next_producer_epoch=-1, transaction_timeout_ms=transit.txn_timeout_ms,
        transaction_status=transit.state.id, transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=transit.txn_last_update_timestamp,
        transaction_start_timestamp_ms=transit.txn_start_timestamp,
        client_transaction_version=transit.client_transaction_version)
    return _INT16.pack(VALUE_VERSION) + body.encode(VALUE_VERSION)


def decode_value(data: bytes) -> TxnTransit:
    if len(data) < 2:
        raise TransactionRecordError("record value shorter than its version")
    version = _INT16.unpack_from(data)[0]
    if version not in (0, 1):
        raise TransactionRecordError(f"unknown transaction log value version {version}")
    try:
        v = m.TransactionLogValue.decode(data, version, 2)
        state = TransactionState.from_id(v.transaction_status)
    except Exception as exc:
        raise TransactionRecordError(f"bad transaction log value: {exc}") from exc
    partitions = frozenset((p.topic, i) for p in v.transaction_partitions or ()
                           for i in p.partition_ids)
    return TxnTransit(
        producer_id=v.producer_id,
        prev_producer_id=v.previous_producer_id if version >= 1 else -1,
        next_producer_id=v.next_producer_id if version >= 1 else -1,
        producer_epoch=v.producer_epoch, last_producer_epoch=-1,
        txn_timeout_ms=v.transaction_timeout_ms, state=state, partitions=partitions,
        txn_start_timestamp=v.transaction_start_timestamp_ms,
        txn_last_update_timestamp=v.transaction_last_update_timestamp_ms,
        client_transaction_version=v.client_transaction_version if version >= 1 else 0)
