"""A share partition at its leader (Kafka's SharePartition): which records of one topic
partition a share group has delivered, to whom, how often, and which are done.

A plain state machine, no I/O, time passed in. The leader reads the log and hands
:meth:`SharePartition.acquire` the batches it read; the share consumers' acknowledgements come
through :meth:`acknowledge`; :meth:`expire_locks` runs when the earliest acquisition lock is due.

Records between the share-partition start offset (SPSO, ``start_offset``) and ``next_offset``
(one past Kafka's SPEO) are in flight, one entry per offset:

* AVAILABLE - may be acquired (again);
* ACQUIRED - delivered to one member, locked until its deadline;
* ACKNOWLEDGED - accepted; ARCHIVED - rejected, a gap, aborted, or past the delivery limit.

The start offset moves past every acknowledged or archived record at the front; the in-flight
span (``next_offset - start_offset``) is at most ``max_in_flight``
(``group.share.partition.max.record.locks``), Kafka's bound on the memory a share partition holds.
"""
from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass
from typing import Iterable

from protocol.errors import ErrorCode

E = ErrorCode


class RecordState(enum.IntEnum):
    """Kafka's RecordState ids."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """The acknowledge types of ShareFetch and ShareAcknowledge (Kafka's AcknowledgeType)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


AVAILABLE = RecordState.AVAILABLE
ACQUIRED = RecordState.ACQUIRED
ACKNOWLEDGED = RecordState.ACKNOWLEDGED
ARCHIVED = RecordState.ARCHIVED


class InFlight:
    __slots__ = ("state", "delivery_count", "member_id", "deadline")

    def __init__(self) -> None:
        self.state = AVAILABLE
        self.delivery_count = 0
        self.member_id: str | None = None
        self.deadline = 0


@dataclass(frozen=True)
class LogBatch:
    """A batch the leader read: its offsets, and whether a share consumer never sees its
    records (a control batch, or a transaction that aborted under read_committed)."""

    base_offset: int
    last_offset: int
    skip: bool = False


class AcknowledgeError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


#: archived records remembered per share partition for the console (why a record stopped)
ARCHIVED_KEPT = 100
#: batches of finished records remembered until the share partition's state is stored
FINISHED_KEPT = 1000


class SharePartition:
    def __init__(self, lock_duration_ms: int = 30000, delivery_count_limit: int = 5,
                 max_in_flight: int = 2000) -> None:
        self.lock_duration_ms = lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_in_flight = max_in_flight
        self.start_offset = -1          # -1: not initialized yet
        self.next_offset = -1
        self.records: dict[int, InFlight] = {}
        self._available = 0             # in-flight records in state AVAILABLE
        #: the start offset as Kafka's share coordinator last stored it: Kafka writes the state
        #: of an acknowledgement (or release) before it moves the start offset, so what
        #: DescribeShareGroupOffsets reports is the start offset from before the last change
        self.stored_start_offset = -1
        #: what became of the records from stored_start_offset to the start offset, as state
        #: batches [first, last, state, delivery count] (the share coordinator stores them,
        #: as Kafka's leader does); None once not known (bounded: FINISHED_KEPT batches)
        self.finished: list | None = []
        #: (offset, delivery count, "rejected" or "delivery limit") of the last archived
        #: records, kept after the start offset moves past them (bounded, not stored)
        self.archived: deque = deque(maxlen=ARCHIVED_KEPT)

    # ------------------------------------------------------------------ offsets
    @property
    def initialized(self) -> bool:
        return self.start_offset >= 0

    def initialize(self, offset: int) -> None:
        """The start offset, from share.auto.offset.reset (or stored state)."""
        self.start_offset = self.next_offset = self.stored_start_offset = offset
        self.finished = []
        self.records.clear()
        self._available = 0

    def restore(self, start_offset: int, batches) -> None:
        """The state a snapshot stored: ``batches`` of (first, last, state, delivery count)
        from the start offset on; nothing is acquired after a restart."""
        self.initialize(start_offset)
        for first, last, state, count in batches:
            for offset in range(max(first, start_offset), last + 1):
                record = self.records[offset] = InFlight()
                record.state = RecordState(state) if state != ACQUIRED else AVAILABLE
                record.delivery_count = count
                if record.state is AVAILABLE:
                    self._available += 1
            self.next_offset = max(self.next_offset, last + 1)
        for offset in range(start_offset, self.next_offset):   # holes: never delivered
            if offset not in self.records:
                self.records[offset] = InFlight()
                self._available += 1
        self._advance_start()

    def fetch_offset(self) -> int:
        """Where the leader reads next: the first record to redeliver, else the end."""
        if self._available:
            for offset in range(self.start_offset, self.next_offset):
                record = self.records.get(offset)
                if record is not None and record.state is AVAILABLE:
                    return offset
        return self.next_offset

    @property
    def available(self) -> int:
        """In-flight records waiting to be delivered again."""
        return self._available

    def can_acquire(self) -> bool:
        return self._available > 0 or self.next_offset - self.start_offset < self.max_in_flight

    def move_start_to(self, offset: int) -> None:
        """The log no longer holds what is below ``offset`` (retention, DeleteRecords)."""
        if offset <= self.start_offset:
            return
        self.finished = None
        for o in range(self.start_offset, min(offset, self.next_offset)):
            record = self.records.pop(o, None)
            if record is not None and record.state is AVAILABLE:
                self._available -= 1
        self.start_offset = offset
        self.next_offset = max(self.next_offset, offset)

    def _finish_at(self, offset: int, record) -> None:
        finished = self.finished
        if finished is None:
            return
        if record is None or len(finished) >= FINISHED_KEPT:
            self.finished = None
            return
        last = finished[-1] if finished else None
        state, count = int(record.state), record.delivery_count
        if last is not None and last[1] == offset - 1 and last[2] == state and last[3] == count:
            last[1] = offset
        else:
            finished.append([offset, offset, state, count])

    def _advance_start(self) -> None:
        records = self.records
        start = self.start_offset
        while start < self.next_offset:
            record = records.get(start)
            if record is not None and record.state not in (ACKNOWLEDGED, ARCHIVED):
                break
            records.pop(start, None)
            self._finish_at(start, record)
            start += 1
        self.start_offset = start

    # ------------------------------------------------------------------ acquire
    def acquire(self, member_id: str, batches: Iterable[LogBatch], now: int,
                max_records: int, record_limit: bool = False) -> list[tuple[int, int, int]]:
        """Acquire for ``member_id`` what ``batches`` (read from the log at
        :meth:`fetch_offset`) hold that is available or new, up to ``max_records`` (passed to
        finish a batch unless ``record_limit``, Kafka's batch-optimized acquire mode) and the
        in-flight limit. -> [(first, last, delivery count)] acquired, in order."""
        records = self.records
        deadline = now + self.lock_duration_ms
        taken: list[int] = []
        limit = self.start_offset + self.max_in_flight
        done = False
        for batch in batches:
            if done or (taken and len(taken) >= max_records):
                break
            for offset in range(max(batch.base_offset, self.start_offset),
                                batch.last_offset + 1):
                if len(taken) >= max_records and (record_limit or offset == batch.base_offset):
                    done = True
                    break
                if offset < self.next_offset:
                    record = records.get(offset)
                    if record is None or record.state is not AVAILABLE:
                        continue
                    self._available -= 1
                else:
                    if offset >= limit:
                        done = True
                        break
                    for gap in range(self.next_offset, offset):   # not in the log: archived
                        filler = records[gap] = InFlight()
                        filler.state = ARCHIVED
                    record = records[offset] = InFlight()
                    self.next_offset = offset + 1
                if batch.skip:
                    record.state = ARCHIVED
                    continue
                record.state = ACQUIRED
                record.delivery_count += 1
                record.member_id = member_id
                record.deadline = deadline
                taken.append(offset)
        self._advance_start()
        return self._ranges(taken)

    def _ranges(self, offsets: list[int]) -> list[tuple[int, int, int]]:
        out: list[list[int]] = []
        records = self.records
        for offset in offsets:
            count = records[offset].delivery_count
            if out and out[-1][1] == offset - 1 and out[-1][2] == count:
                out[-1][1] = offset
            else:
                out.append([offset, offset, count])
        return [tuple(r) for r in out]

    # ------------------------------------------------------------------ acknowledge
    def acknowledge(self, member_id: str, batches: list[tuple[int, int, list[int]]],
                    now: int) -> None:
        """Apply ``(first, last, types)`` acknowledgements of ``member_id``: one type for the
        whole range or one per offset. All or nothing: raises AcknowledgeError (Kafka's
        INVALID_RECORD_STATE or INVALID_REQUEST) without changing anything."""
        records = self.records
        changes = []
        previous_end = -1
        for first, last, types in batches:
            if first > last or first <= previous_end:
                raise AcknowledgeError(E.INVALID_REQUEST, "Acknowledgement batches overlap "
                                       "or are out of order.")
            previous_end = last
            if last >= self.next_offset:
                if not records:
                    raise AcknowledgeError(E.INVALID_RECORD_STATE, "Batch record not found. "
                                           "The request batch offsets are not found in the "
                                           "cache.")
                raise AcknowledgeError(E.INVALID_REQUEST, "Batch record not found. The last "
                                       "offset in request is past acquired records.")
            for offset in range(max(first, self.start_offset), last + 1):
                record = records.get(offset)
                if record is None or record.state is not ACQUIRED:
                    raise AcknowledgeError(E.INVALID_RECORD_STATE, "The offset cannot be "
                                           "acknowledged. The offset is not acquired.")
                if record.member_id != member_id:
                    raise AcknowledgeError(E.INVALID_RECORD_STATE,
                                           "Member is not the owner of offset")
                changes.append((offset, record,
                                types[0] if len(types) == 1 else types[offset - first]))
        self.stored_start_offset = self.start_offset
        self.finished = []
        for offset, record, ack in changes:
            if ack == AcknowledgeType.RENEW:
                record.deadline = now + self.lock_duration_ms
            elif ack == AcknowledgeType.ACCEPT:
                self._finish(record, ACKNOWLEDGED)
            elif ack == AcknowledgeType.RELEASE:
                self._release(offset, record)
            else:   # REJECT, GAP
                self._finish(record, ARCHIVED)
                if ack == AcknowledgeType.REJECT:
                    self.archived.append((offset, record.delivery_count, "rejected"))
        self._advance_start()

    def _finish(self, record: InFlight, state: RecordState) -> None:
        record.state = state
        record.member_id = None

    def _release(self, offset: int, record: InFlight) -> None:
        """Back to AVAILABLE, or ARCHIVED once delivered share.delivery.count.limit times."""
        record.member_id = None
        if record.delivery_count >= self.delivery_count_limit:
            record.state = ARCHIVED
            self.archived.append((offset, record.delivery_count, "delivery limit"))
        else:
            record.state = AVAILABLE
            self._available += 1

    def release_member(self, member_id: str) -> int:
        """A member closed its share session (or its connection did): its acquired records
        are released."""
        released = 0
        self.stored_start_offset = self.start_offset
        self.finished = []
        for offset, record in self.records.items():
            if record.state is ACQUIRED and record.member_id == member_id:
                self._release(offset, record)
                released += 1
        if released:
            self._advance_start()
        return released

    # ------------------------------------------------------------------ acquisition locks
    def next_deadline(self) -> int | None:
        """When the earliest acquisition lock expires (None: none held)."""
        deadlines = [r.deadline for r in self.records.values() if r.state is ACQUIRED]
        return min(deadlines) if deadlines else None

    def expire_locks(self, now: int) -> int:
        """Release every record whose lock is due (Kafka's acquisition lock timeout);
        -> how many became available again."""
        released = 0
        if any(r.state is ACQUIRED and r.deadline <= now for r in self.records.values()):
            self.stored_start_offset = self.start_offset
            self.finished = []
        for offset, record in self.records.items():
            if record.state is ACQUIRED and record.deadline <= now:
                self._release(offset, record)
                released += record.state is AVAILABLE
        self._advance_start()
        return released

    # ------------------------------------------------------------------ reading
    def in_flight(self) -> list[tuple[int, RecordState, int, str | None, int]]:
        """[(offset, state, delivery count, member, lock deadline)] from the start offset."""
        return [(o, r.state, r.delivery_count, r.member_id, r.deadline)
                for o, r in sorted(self.records.items())]

    def stored_offsets(self) -> tuple[int, int]:
        """(start offset, records delivered past it) as Kafka's share coordinator holds them
        (DescribeShareGroupOffsets; its lag is end offset - start - delivered)."""
        done = sum(1 for r in self.records.values() if r.state in (ACKNOWLEDGED, ARCHIVED))
        start = min(self.stored_start_offset, self.start_offset)
        return start, done + self.start_offset - start

    def state_of(self, offset: int) -> RecordState | None:
        """The state of an in-flight record; None below the start offset (done) or past the
        end (not read yet)."""
        record = self.records.get(offset)
        return None if record is None else record.state
