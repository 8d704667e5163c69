"""The share coordinator's state (Kafka's ShareCoordinatorShard): per share partition
(group, topic id, partition) the start offset, state epoch, leader epoch, delivery-complete count
and state batches, as stored in ``__share_group_state``.

A plain state machine, no I/O, the clock passed in. Each operation checks one share partition,
returns ``(records, answer)``: the records (key, value) to append to ``__share_group_state``
(already applied here: the caller answers once they are stored), and ``answer`` either an
:class:`Outcome` error or the operation's result. :meth:`replay` rebuilds the state from the
records at start; the records are Kafka's ShareSnapshot (type 0) and ShareUpdate (type 1).

Kafka's rules, in its order of checks:

* a negative partition: INVALID_REQUEST; a topic or partition the cluster does not have:
  UNKNOWN_TOPIC_OR_PARTITION;
* Initialize: a state epoch below the stored one (other than -1) is FENCED_STATE_EPOCH; else a
  fresh snapshot: nothing in flight, the given state epoch and start offset, leader epoch 0;
* Write: on a share partition never initialized, INVALID_REQUEST; a leader epoch or state
  epoch below the stored one (other than -1) is fenced; the batches combine with the stored
  ones (batches.py), a start offset of -1 keeps the stored one; the stored leader epoch stays
  (only a read moves it);
* Read: on one never initialized, INVALID_REQUEST; a leader epoch below the stored one is
  FENCED_LEADER_EPOCH; a higher one is stored (a record) and the state answered;
* Summary: the start offset, epochs and delivery-complete count; -1/0/0 for one never
  initialized;
* Delete: a tombstone; nothing for one never initialized.

Every write is stored as a whole ShareSnapshot (Kafka writes ShareUpdates between snapshots,
``share.coordinator.snapshot.update.records.per.snapshot``): the answers are the same, and the
compacted topic keeps one record per share partition.
"""
from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import dataclass, field
from typing import Callable

from protocol import messages as m
from protocol.errors import ErrorCode as E

from . import batches as combiner

_INT16 = struct.Struct(">h")
SNAPSHOT, UPDATE = 0, 1

NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
#: Kafka's messages for errors answered without one of their own (Errors.message())
MESSAGES = {
    E.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    E.FENCED_LEADER_EPOCH: "The leader epoch in the request is older than the epoch on the "
                           "broker.",
    E.FENCED_STATE_EPOCH: "The share coordinator rejected the request because the share-group "
                          "state epoch did not match.",
    E.NOT_COORDINATOR: "This is not the correct coordinator.",
    E.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    E.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
}


@dataclass
class ShareGroupOffset:
    """One share partition's stored state (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = -1
    state_batches: list = field(default_factory=list)   # [(first, last, state, count)]
    create_timestamp: int = 0
    write_timestamp: int = 0


@dataclass(frozen=True)
class Outcome:
    """An operation's error for one share partition."""

    error: int
    message: str | None = None


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey, FindCoordinator's SHARE key."""
    return f"{group_id}:{topic_id_string(topic_id)}:{partition}"


def parse_coordinator_key(key: str) -> tuple[str, uuid.UUID, int]:
    """``group:topic id:partition`` -> its parts; ValueError as Kafka's SharePartitionKey
    .validate refuses a key (empty, not three parts, blank group, bad id or partition)."""
    if not key:
        raise ValueError("Share partition key cannot be empty")
    tokens = key.split(":")
    if len(tokens) != 3:
        raise ValueError(f"Invalid key format: expected - groupId:topicId:partition, found -  "
                         f"{key}")
    if not tokens[0].strip():
        raise ValueError("GroupId must be alphanumeric string")
    try:
        raw = base64.urlsafe_b64decode(tokens[1] + "==")
        if len(raw) != 16 or len(tokens[1]) != 22:
            raise ValueError
        topic_id = uuid.UUID(bytes=raw)
    except ValueError:
        raise ValueError(f"Invalid topic ID: {tokens[1]}") from None
    try:
        text = tokens[2]
        if not text or not text.lstrip("+-").isdigit() or not -2**31 <= int(text) < 2**31:
            raise ValueError
        partition = int(text)
    except ValueError:
        raise ValueError(f"Invalid partition: {tokens[2]}") from None
    return tokens[0].strip(), topic_id, partition


def snapshot_key(group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return _INT16.pack(SNAPSHOT) + m.ShareSnapshotKey(
        group_id=group_id, topic_id=topic_id, partition=partition).encode(0)


def snapshot_value(state: ShareGroupOffset) -> bytes:
    batch = m.ShareSnapshotValue.StateBatch
    return _INT16.pack(0) + m.ShareSnapshotValue(
        snapshot_epoch=state.snapshot_epoch, state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch, start_offset=state.start_offset,
        delivery_complete_count=state.delivery_complete_count,
        create_timestamp=state.create_timestamp, write_timestamp=state.write_timestamp,
        state_batches=[batch(first_offset=f, last_offset=last, delivery_state=s,
                             delivery_count=c) for f, last, s, c in state.state_batches]
    ).encode(0)


def _batches(value) -> list:
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in value.state_batches]


Key = tuple   # (group id, topic id, partition)


class ShareStateStore:
    def __init__(self, clock: Callable[[], int],
                 partition_count: Callable[[uuid.UUID], int | None]) -> None:
        self.clock = clock
        #: ``partition_count(topic_id)`` -> the topic's partitions, None for no such topic
        self.partition_count = partition_count
        self.states: dict[Key, ShareGroupOffset] = {}
        #: the highest epochs seen per share partition (kept apart from the state, as Kafka)
        self.leader_epochs: dict[Key, int] = {}
        self.state_epochs: dict[Key, int] = {}

    # ------------------------------------------------------------------ checks
    def _unknown(self, topic_id: uuid.UUID, partition: int) -> Outcome | None:
        count = self.partition_count(topic_id)
        if count is None or count <= partition:
            return Outcome(E.UNKNOWN_TOPIC_OR_PARTITION, MESSAGES[E.UNKNOWN_TOPIC_OR_PARTITION])
        return None

    @staticmethod
    def _negative(partition: int) -> Outcome | None:
        return Outcome(E.INVALID_REQUEST, NEGATIVE_PARTITION_ID) if partition < 0 else None

    def _stored(self, key: Key, state: ShareGroupOffset | None) -> list:
        """Apply ``state`` (None: a tombstone) and -> its record."""
        self._apply(key, state)
        return [(snapshot_key(*key), None if state is None else snapshot_value(state))]

    def _apply(self, key: Key, state: ShareGroupOffset | None) -> None:
        if state is None:
            self.states.pop(key, None)
            self.leader_epochs.pop(key, None)
            self.state_epochs.pop(key, None)
            return
        self.states[key] = state
        if self.leader_epochs.get(key, -2**31) < state.leader_epoch:
            self.leader_epochs[key] = state.leader_epoch
        if self.state_epochs.get(key, -2**31) < state.state_epoch:
            self.state_epochs[key] = state.state_epoch

    # ------------------------------------------------------------------ operations
    def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                   start_offset: int):
        key = (group_id, topic_id, partition)
        error = self._negative(partition)
        if error is None and state_epoch != -1 and \
                self.state_epochs.get(key, -2**31) > state_epoch:
            error = Outcome(E.FENCED_STATE_EPOCH, MESSAGES[E.FENCED_STATE_EPOCH])
        error = error or self._unknown(topic_id, partition)
        if error is not None:
            return [], error
        current = self.states.get(key)
        now = self.clock()
        state = ShareGroupOffset(
            snapshot_epoch=0 if current is None else current.snapshot_epoch + 1,
            state_epoch=state_epoch, leader_epoch=0, start_offset=start_offset,
            delivery_complete_count=-1 if start_offset == -1 else 0, state_batches=[],
            create_timestamp=now, write_timestamp=now)
        return self._stored(key, state), None

    def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
              leader_epoch: int, start_offset: int, state_batches,
              delivery_complete_count: int = -1):
        key = (group_id, topic_id, partition)
        error = self._negative(partition)
        if error is None and key not in self.states:
            error = Outcome(E.INVALID_REQUEST, WRITE_UNINITIALIZED)
        if error is None and leader_epoch != -1 and \
                self.leader_epochs.get(key, -2**31) > leader_epoch:
            error = Outcome(E.FENCED_LEADER_EPOCH, MESSAGES[E.FENCED_LEADER_EPOCH])
        if error is None and state_epoch != -1 and \
                self.state_epochs.get(key, -2**31) > state_epoch:
            error = Outcome(E.FENCED_STATE_EPOCH, MESSAGES[E.FENCED_STATE_EPOCH])
        error = error or self._unknown(topic_id, partition)
        if error is not None:
            return [], error
        current = self.states[key]
        start = current.start_offset if start_offset == -1 else start_offset
        now = self.clock()
        state = ShareGroupOffset(
            snapshot_epoch=current.snapshot_epoch + 1, state_epoch=current.state_epoch,
            leader_epoch=current.leader_epoch, start_offset=start,
            delivery_complete_count=delivery_complete_count,
            state_batches=combiner.combine(current.state_batches, state_batches, start),
            create_timestamp=now, write_timestamp=now)
        return self._stored(key, state), None

    def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int):
        """-> (records, Outcome or the stored ShareGroupOffset)."""
        key = (group_id, topic_id, partition)
        error = self._negative(partition)
        if error is None and key not in self.states:
            error = Outcome(E.INVALID_REQUEST, READ_UNINITIALIZED)
        if error is None and leader_epoch != -1 and \
                self.leader_epochs.get(key, -2**31) > leader_epoch:
            error = Outcome(E.FENCED_LEADER_EPOCH, MESSAGES[E.FENCED_LEADER_EPOCH])
        error = error or self._unknown(topic_id, partition)
        if error is not None:
            return [], error
        current = self.states[key]
        if leader_epoch == -1 or self.leader_epochs.get(key) == leader_epoch:
            return [], current
        # a new leader: its epoch is stored, the rest as it was
        now = self.clock()
        state = ShareGroupOffset(
            snapshot_epoch=current.snapshot_epoch + 1, state_epoch=current.state_epoch,
            leader_epoch=leader_epoch, start_offset=current.start_offset,
            delivery_complete_count=current.delivery_complete_count,
            state_batches=list(current.state_batches), create_timestamp=now,
            write_timestamp=now)
        return self._stored(key, state), current

    def summary(self, group_id: str, topic_id: uuid.UUID, partition: int):
        """-> ([], Outcome or the stored ShareGroupOffset; an uninitialized one: start -1,
        epochs 0, delivery-complete count -1)."""
        error = self._negative(partition) or self._unknown(topic_id, partition)
        if error is not None:
            return [], error
        state = self.states.get((group_id, topic_id, partition))
        if state is None:
            state = ShareGroupOffset(snapshot_epoch=0, state_epoch=0, leader_epoch=0,
                                     start_offset=-1)
        return [], state

    def delete(self, group_id: str, topic_id: uuid.UUID, partition: int):
        key = (group_id, topic_id, partition)
        error = self._negative(partition) or self._unknown(topic_id, partition)
        if error is not None:
            return [], error
        if key not in self.states:
            return [], None
        return self._stored(key, None), None

    # ------------------------------------------------------------------ the leader's side
    def replace(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int,
                start_offset: int, state_batches, delivery_complete_count: int) -> list:
        """The share-partition leader's whole state (persister.py): its start offset and
        batches as they are now (new: state epoch 0), the leader epoch raised to its own.
        -> the records."""
        key = (group_id, topic_id, partition)
        current = self.states.get(key)
        now = self.clock()
        state = ShareGroupOffset(
            snapshot_epoch=0 if current is None else current.snapshot_epoch + 1,
            state_epoch=0 if current is None else current.state_epoch,
            leader_epoch=max(leader_epoch, self.leader_epochs.get(key, 0)),
            start_offset=start_offset, delivery_complete_count=delivery_complete_count,
            state_batches=list(state_batches),
            create_timestamp=now if current is None else current.create_timestamp,
            write_timestamp=now)
        return self._stored(key, state)

    def forget(self, group_id: str, topic_id: uuid.UUID, partition: int) -> list:
        """The leader's share partition is gone (its group or topic deleted): a tombstone,
        if anything is stored. -> the records."""
        key = (group_id, topic_id, partition)
        return self._stored(key, None) if key in self.states else []

    def keys_of_topic(self, topic_id: uuid.UUID) -> list[Key]:
        """The share partitions stored for a topic (a deleted topic's go: Kafka's
        maybeCleanupShareState, with :meth:`forget`)."""
        return [k for k in self.states if k[1] == topic_id]

    # ------------------------------------------------------------------ replay
    def replay(self, key: bytes, value: bytes | None) -> None:
        """One record of ``__share_group_state``; ValueError for one that cannot be read."""
        if key is None or len(key) < 2:
            raise ValueError("share state key shorter than its type")
        record_type = _INT16.unpack_from(key)[0]
        if record_type == SNAPSHOT:
            k = m.ShareSnapshotKey.decode(key, 0, 2)
            skey = (k.group_id, k.topic_id, k.partition)
            if value is None:
                self._apply(skey, None)
                return
            v = m.ShareSnapshotValue.decode(value, 0, 2, exact=False)
            self._apply(skey, ShareGroupOffset(
                v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset,
                v.delivery_complete_count, _batches(v), v.create_timestamp,
                v.write_timestamp))
        elif record_type == UPDATE:
            if value is None:
                return
            k = m.ShareUpdateKey.decode(key, 0, 2)
            skey = (k.group_id, k.topic_id, k.partition)
            v = m.ShareUpdateValue.decode(value, 0, 2, exact=False)
            current = self.states.get(skey)
            if current is None:
                state = ShareGroupOffset(v.snapshot_epoch, 0, v.leader_epoch, v.start_offset,
                                         v.delivery_complete_count, _batches(v))
            else:   # applied over the last snapshot, as Kafka's merge
                start = current.start_offset if v.start_offset == -1 else v.start_offset
                state = ShareGroupOffset(
                    current.snapshot_epoch, current.state_epoch,
                    current.leader_epoch if v.leader_epoch == -1 else v.leader_epoch, start,
                    v.delivery_complete_count,
                    combiner.combine(current.state_batches, _batches(v), start),
                    current.create_timestamp, current.write_timestamp)
            self._apply(skey, state)
