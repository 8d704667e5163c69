"""Producer state per partition: idempotent sequences and transactions.

Per producer id the partition remembers its epoch, its last five batches (a retried batch is
recognised as a duplicate and answered with its original offset), the coordinator epoch and
timestamp of its last transaction marker, and the first offset of its ongoing transaction.
Across producers it keeps the ongoing transactions ordered by first offset: the first of them is
the first unstable offset, which bounds what read_committed consumers see (the last stable
offset, see ``PartitionLog.last_stable_offset``).

Checks on a produced batch, in Kafka's order: a duplicate is answered at once; an older epoch is
INVALID_PRODUCER_EPOCH (the producer was fenced); a transactional batch that opens a transaction
here must carry the verification the transaction coordinator gave for it (INVALID_TXN_STATE);
a gap in sequence numbers is OUT_OF_ORDER_SEQUENCE_NUMBER; a non-transactional batch while the
producer's transaction is open is INVALID_TXN_STATE.

Nothing here is stored on its own: the state is rebuilt from the batch headers (and the control
batches' markers) when a partition log is opened, so it survives a restart with a data directory.
"""
from __future__ import annotations

from collections import deque

from protocol.errors import ErrorCode
from protocol.records import TRANSACTIONAL_FLAG

from ..txn_markers import parse_end_marker

CACHED_BATCHES = 5
INT32_MAX = 2**31 - 1
INT16_MAX = 2**15 - 1
NO_EPOCH = -1


class BatchMetadata:
    __slots__ = ("first_seq", "last_seq", "first_offset", "last_offset", "timestamp")

    def __init__(self, first_seq, last_seq, first_offset, last_offset, timestamp):
        self.first_seq = first_seq
        self.last_seq = last_seq
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.timestamp = timestamp


class ProducerStateEntry:
    """One producer id on one partition (Kafka's ProducerStateEntry)."""

    __slots__ = ("epoch", "batches", "coordinator_epoch", "last_timestamp", "txn_first_offset")

    def __init__(self, epoch: int = NO_EPOCH) -> None:
        self.epoch = epoch
        self.batches: deque[BatchMetadata] = deque(maxlen=CACHED_BATCHES)
        self.coordinator_epoch = -1
        self.last_timestamp = -1
        self.txn_first_offset = -1  # the ongoing transaction's first offset; -1: none

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def set_epoch(self, epoch: int) -> None:
        """A new epoch forgets the batches of the old one (their sequences start over)."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()


class Verification:
    """A transactional producer's pending verification on this partition (Kafka's
    VerificationStateEntry). The object itself is the guard: an append must present the same
    object, so a marker written while the coordinator answered (which drops the entry) makes a
    late "verified" answer useless."""

    __slots__ = ("lowest_sequence", "epoch", "supports_epoch_bump")

    def __init__(self, sequence: int, epoch: int, supports_epoch_bump: bool) -> None:
        self.lowest_sequence = sequence
        self.epoch = epoch
        self.supports_epoch_bump = supports_epoch_bump

    def update(self, sequence: int, epoch: int) -> None:
        """Keep the lowest sequence seen for the newest epoch: a retried lower sequence must not
        be blocked by a higher one that got through first."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence


class ProducerStateTable:
    __slots__ = ("producers", "ongoing", "verifications")

    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        #: ongoing transactions, first offset -> producer id, in offset order (appends come in
        #: offset order and a dict keeps insertion order)
        self.ongoing: dict[int, int] = {}
        self.verifications: dict[int, Verification] = {}

    # --- the last stable offset ---

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest ongoing transaction, None when none is open."""
        for first in self.ongoing:
            return first
        return None

    def has_ongoing_transaction(self, producer_id: int, epoch: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.txn_first_offset >= 0 and entry.epoch == epoch

    # --- data batches from producers ---

    def start_verification(self, producer_id: int, sequence: int, epoch: int,
                           supports_epoch_bump: bool) -> tuple[int, Verification | None]:
        """Before a transactional Produce asks the coordinator: (error, guard). The guard is None
        when the producer's transaction is already open here (nothing to verify)."""
        entry = self.producers.get(producer_id)
        if entry is not None and epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH, None
        if entry is not None and entry.txn_first_offset >= 0 and entry.epoch == epoch:
            return ErrorCode.NONE, None
        verification = self.verifications.get(producer_id)
        if verification is None:
            verification = self.verifications[producer_id] = Verification(
                sequence, epoch, supports_epoch_bump)
        else:
            verification.update(sequence, epoch)
        return ErrorCode.NONE, verification

    def check(self, batch, verification: Verification | None = None
              ) -> tuple[int, BatchMetadata | None]:
        """Validate one produced batch with a producer id: (NONE, None) to append it, (NONE,
        original) for a duplicate, or (error code, None). ``verification`` is the guard the
        request's verification returned for this partition (transactional batches only)."""
        # (attributes and fields read directly: this runs for every idempotent batch)
        producer_id = batch.producer_id
        entry = self.producers.get(producer_id)
        epoch = batch.producer_epoch
        seq = batch.base_sequence
        transactional = batch.attributes & TRANSACTIONAL_FLAG
        current_epoch = NO_EPOCH
        if entry is not None:
            current_epoch = entry.epoch
            if epoch == current_epoch and entry.batches:
                last_seq = batch.last_sequence
                for cached in entry.batches:
                    if cached.first_seq == seq and cached.last_seq == last_seq:
                        return ErrorCode.NONE, cached
            if epoch < current_epoch:
                return ErrorCode.INVALID_PRODUCER_EPOCH, None
        pending = self.verifications.get(producer_id) if self.verifications else None
        if transactional and not (entry is not None and entry.txn_first_offset >= 0
                                  and current_epoch == epoch):
            # this batch opens the producer's transaction here: the coordinator must have
            # verified the partition for this very request
            if pending is None or verification is not pending:
                return ErrorCode.INVALID_TXN_STATE, None
        if pending is not None:
            if pending.supports_epoch_bump and seq != 0 and (entry is None or not entry.batches):
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None
            if seq > pending.lowest_sequence:
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None
        if epoch != current_epoch:
            if seq != 0 and current_epoch != NO_EPOCH:
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None
        elif current_epoch != NO_EPOCH:
            batches = entry.batches
            last_seq = batches[-1].last_seq if batches else -1
            if seq != last_seq + 1 and not (seq == 0 and last_seq == INT32_MAX):
                return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None
        if not transactional and entry is not None and entry.txn_first_offset >= 0:
            return ErrorCode.INVALID_TXN_STATE, None
        return ErrorCode.NONE, None

    def update(self, batch, first_offset: int, timestamp: int) -> bool:
        """Record an appended data batch (its offsets are final). True when it opened a
        transaction (the first unstable offset may have changed)."""
        producer_id = batch.producer_id
        if producer_id < 0:
            return False
        entry = self.producers.get(producer_id)
        epoch = batch.producer_epoch
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(epoch)
        elif entry.epoch != epoch:
            entry.set_epoch(epoch)
        seq = batch.base_sequence
        delta = batch.last_offset_delta
        entry.batches.append(BatchMetadata(
            seq, -1 if seq < 0 else (seq + delta) & INT32_MAX, first_offset,
            first_offset + delta, timestamp))
        entry.last_timestamp = timestamp
        if batch.attributes & TRANSACTIONAL_FLAG:
            if self.verifications:
                self.verifications.pop(producer_id, None)  # the transaction is open now
            if entry.txn_first_offset < 0:
                entry.txn_first_offset = first_offset
                self.ongoing[first_offset] = producer_id
                return True
        return False

    # --- transaction markers ---

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     transaction_version: int) -> int:
        """May the coordinator end this producer's transaction here? In transaction version 2
        the marker carries the bumped epoch, so an epoch not above the producer's is a late or
        repeated marker (allowed only when no transaction is open: a retry of one that was
        written); before that, markers carry the transaction's own epoch."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return ErrorCode.NONE
        current = entry.epoch
        if transaction_version >= 2:
            if epoch <= current and not (
                    epoch == current and (entry.txn_first_offset < 0 or epoch == INT16_MAX)):
                return ErrorCode.INVALID_PRODUCER_EPOCH
        elif epoch < current:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if entry.coordinator_epoch > coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return ErrorCode.NONE

    def complete(self, producer_id: int, epoch: int, coordinator_epoch: int,
                 marker_offset: int, timestamp: int) -> tuple[int, int] | None:
        """Record a written marker. Returns (first offset, last stable offset) of the transaction
        it ended, None when the producer had none open here (such a marker changes nothing a
        consumer sees). The last stable offset is the first offset of the oldest transaction
        still open, else the offset after the marker: what the aborted index records."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerStateEntry(epoch)
        ended = None
        first = entry.txn_first_offset
        if first >= 0:
            self.ongoing.pop(first, None)
            next_open = self.first_unstable_offset()
            ended = (first, marker_offset + 1 if next_open is None else next_open)
        entry.set_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.txn_first_offset = -1
        entry.last_timestamp = timestamp
        if self.verifications:
            pending = self.verifications.get(producer_id)
            # with epoch bumps the next transaction may already be verifying at this epoch
            if pending is not None and not (pending.supports_epoch_bump and pending.epoch == epoch):
                del self.verifications[producer_id]
        return ended

    # --- reopening a log ---

    def rebuild(self, log) -> None:
        """Replay the batch headers of a reopened log (no checks, as Kafka replays its own log):
        producers, open transactions, the aborted-transaction index and the first unstable
        offset. A transaction whose marker never came stays open: its records stay above the
        last stable offset until the coordinator ends it."""
        self.producers.clear()
        self.ongoing.clear()
        self.verifications.clear()
        index = log.txn_index
        index.clear()
        for batch in log.batches():
            if batch.producer_id < 0:
                continue
            if batch.is_control:
                marker = parse_end_marker(batch)
                if marker is None:
                    continue  # emptied by the cleaner, or not a transaction marker
                commit, coordinator_epoch, timestamp = marker
                ended = self.complete(batch.producer_id, batch.producer_epoch, coordinator_epoch,
                                      batch.base_offset, timestamp)
                if ended is not None and not commit:
                    index.append(batch.producer_id, ended[0], batch.base_offset, ended[1])
            else:
                self.update(batch, batch.base_offset, batch.max_timestamp)
        index.drop_below(log.log_start_offset)
        log.first_unstable_offset = self.first_unstable_offset()
