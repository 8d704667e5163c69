"""Share-partition state in ``__share_group_state``, in Kafka's share coordinator formats, so
that a share group's progress survives a restart.

A key is an int16 record type (0 ShareSnapshot, 1 ShareUpdate) and ShareSnapshotKey (group, topic
id, partition) at version 0; a value an int16 version 0 and the flexible ShareSnapshotValue:
the start offset and the in-flight records as state batches (first, last, state, delivery
count). As on Kafka, an acquisition is not stored: after a restart, acquired records are
delivered again with the delivery count they had before they were acquired. The partition of the topic is Kafka's: the Java hash of
``group:topic id:partition``. Each change (acknowledgement, release, lock expiry, reset) writes
a whole snapshot; the topic is compacted, and replay keeps the last record of each key.
"""
from __future__ import annotations

import base64
import struct
import uuid

from protocol import messages as m

from ....topics import SHARE_STATE_TOPIC
from ...common.hashing import partition_for
from ..records import RecordError
from .partition import ACQUIRED, AVAILABLE, SharePartition

_INT16 = struct.Struct(">h")
SNAPSHOT, UPDATE = 0, 1
TOPIC = SHARE_STATE_TOPIC


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: what picks the state topic's partition."""
    return f"{group_id}:{topic_id_string(topic_id)}:{partition}"


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def state_partition(group_id: str, topic_id: uuid.UUID, partition: int, n: int) -> int:
    return partition_for(coordinator_key(group_id, topic_id, partition), n)


def snapshot_key(group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return _INT16.pack(SNAPSHOT) + m.ShareSnapshotKey(
        group_id=group_id, topic_id=topic_id, partition=partition).encode(0)


def snapshot_value(sp: SharePartition, leader_epoch: int, now: int) -> bytes:
    """The share partition as a ShareSnapshotValue. As Kafka's, an acquisition is not stored:
    the records acquired after the last stored state are read again after a restart, and
    delivered as new."""
    batch = m.ShareSnapshotValue.StateBatch
    batches: list = []
    in_flight = sp.in_flight()
    while in_flight and in_flight[-1][1] is ACQUIRED:   # acquired at the end: not stored
        in_flight.pop()
    for offset, state, count, _member, _deadline in in_flight:
        # acquired between stored records: available again, counted as delivered before
        stored = AVAILABLE if state is ACQUIRED else state
        if state is ACQUIRED:
            count -= 1
        last = batches[-1] if batches else None
        if last is not None and last.last_offset == offset - 1 and \
                last.delivery_state == stored and last.delivery_count == count:
            last.last_offset = offset
        else:
            batches.append(batch(first_offset=offset, last_offset=offset,
                                 delivery_state=int(stored), delivery_count=count))
    _start, delivered = sp.stored_offsets()
    return _INT16.pack(0) + m.ShareSnapshotValue(
        snapshot_epoch=0, state_epoch=0, leader_epoch=leader_epoch, start_offset=sp.start_offset,
        delivery_complete_count=delivered - (sp.start_offset - _start), create_timestamp=now,
        write_timestamp=now, state_batches=batches).encode(0)


def decode(key: bytes, value: bytes | None):
    """-> (group id, topic id, partition, ShareSnapshotValue or None) of a snapshot; None for
    records of another type (updates are not written here)."""
    if key is None or len(key) < 2:
        raise RecordError("share state key shorter than its type")
    record_type = _INT16.unpack_from(key)[0]
    if record_type != SNAPSHOT:
        return None
    k = m.ShareSnapshotKey.decode(key, 0, 2)
    v = None if value is None else m.ShareSnapshotValue.decode(value, 0, 2, exact=False)
    return k.group_id, k.topic_id, k.partition, v
