"""One transactional id's state and its legal transitions (Kafka's TransactionMetadata).

A change is prepared as a :class:`TxnTransit` (the state to write to ``__transaction_state``)
while the metadata remembers it as ``pending_state``; the shard applies the transit when its
record is stored (the same code replays it at load). Requests that arrive while a transition is
pending get CONCURRENT_TRANSACTIONS.
"""
from __future__ import annotations

import enum

from ...values import Values

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = 32767


class TransactionState(enum.Enum):
    """Kafka's states: the id written in TransactionLogValue and the name admin clients see."""

    EMPTY = (0, "Empty", True)
    ONGOING = (1, "Ongoing", False)
    PREPARE_COMMIT = (2, "PrepareCommit", False)
    PREPARE_ABORT = (3, "PrepareAbort", False)
    COMPLETE_COMMIT = (4, "CompleteCommit", True)
    COMPLETE_ABORT = (5, "CompleteAbort", True)
    DEAD = (6, "Dead", False)
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence", False)

    def __init__(self, id_: int, state_name: str, expiration_allowed: bool) -> None:
        self.id = id_
        self.state_name = state_name
        self.expiration_allowed = expiration_allowed

    @classmethod
    def from_id(cls, id_: int) -> "TransactionState":
        for state in cls:
            if state.id == id_:
                return state
        raise ValueError(f"unknown transaction state id {id_}")

    @classmethod
    def from_name(cls, name: str) -> "TransactionState | None":
        for state in cls:
            if state.state_name == name:
                return state
        return None


S = TransactionState
VALID_PREVIOUS_STATES = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT,
                      S.COMPLETE_ABORT},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= SHORT_MAX - 1


class TxnTransit(Values):
    """The values a transition writes (TransactionLogValue) and applies once stored."""

    def __init__(self, producer_id: int, prev_producer_id: int, next_producer_id: int,
                 producer_epoch: int, last_producer_epoch: int, txn_timeout_ms: int,
                 state: TransactionState, partitions: frozenset = frozenset(),
                 txn_start_timestamp: int = -1, txn_last_update_timestamp: int = -1,
                 client_transaction_version: int = 0) -> None:
        self.producer_id = producer_id
        self.prev_producer_id = prev_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.partitions = partitions
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.client_transaction_version = client_transaction_version


class IllegalTransition(Exception):
    pass


class TransactionMetadata(Values):
    def __init__(self, transactional_id: str, producer_id: int,
                 prev_producer_id: int = NO_PRODUCER_ID, next_producer_id: int = NO_PRODUCER_ID,
                 producer_epoch: int = NO_PRODUCER_EPOCH,
                 last_producer_epoch: int = NO_PRODUCER_EPOCH, txn_timeout_ms: int = 60000,
                 state: TransactionState = TransactionState.EMPTY, partitions: set | None = None,
                 txn_start_timestamp: int = -1, txn_last_update_timestamp: int = -1,
                 client_transaction_version: int = 0,
                 pending_state: TransactionState | None = None,
                 has_failed_epoch_fence: bool = False) -> None:
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.prev_producer_id = prev_producer_id
        self.next_producer_id = next_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.partitions: set = set() if partitions is None else partitions  # {(topic, partition)}
        self.txn_start_timestamp = txn_start_timestamp
        self.txn_last_update_timestamp = txn_last_update_timestamp
        self.client_transaction_version = client_transaction_version
        self.pending_state = pending_state
        self.has_failed_epoch_fence = has_failed_epoch_fence

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def _transit(self, state: TransactionState, **changes) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: preparing {state.name} while {self.pending_state.name}"
                " is pending")
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.name} cannot go to {state.name}")
        values = dict(
            producer_id=self.producer_id, prev_producer_id=self.producer_id,
            next_producer_id=self.next_producer_id, producer_epoch=self.producer_epoch,
            last_producer_epoch=self.last_producer_epoch, txn_timeout_ms=self.txn_timeout_ms,
            state=state, partitions=frozenset(self.partitions),
            txn_start_timestamp=self.txn_start_timestamp,
            txn_last_update_timestamp=self.txn_last_update_timestamp,
            client_transaction_version=self.client_transaction_version)
        values.update(changes)
        transit = TxnTransit(**values)
        self.pending_state = state
        return transit

    # ------------------------------------------------------------------ transitions
    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """A new producer took over (or the transaction timed out): bump the epoch so the old
        one is fenced, then abort. Not written as such: the abort that follows carries it."""
        bumped = self.producer_epoch if (self.has_failed_epoch_fence
                                         or self.producer_epoch == SHORT_MAX) \
            else self.producer_epoch + 1
        return self._transit(S.PREPARE_EPOCH_FENCE, producer_epoch=bumped)

    def prepare_increment_producer_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                         now: int) -> TxnTransit:
        """InitProducerId: the next epoch (or the current one again for a retried request)."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFenced()
        return self._transit(S.EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                             txn_timeout_ms=timeout_ms, partitions=frozenset(),
                             txn_start_timestamp=-1, txn_last_update_timestamp=now)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now: int,
                                     record_last_epoch: bool) -> TxnTransit:
        return self._transit(S.EMPTY, producer_id=new_producer_id, producer_epoch=0,
                             last_producer_epoch=self.producer_epoch if record_last_epoch
                             else NO_PRODUCER_EPOCH,
                             txn_timeout_ms=timeout_ms, partitions=frozenset(),
                             txn_start_timestamp=-1, txn_last_update_timestamp=now)

    def prepare_add_partitions(self, added, now: int, client_version: int) -> TxnTransit:
        start = now if self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT) \
            else self.txn_start_timestamp
        return self._transit(S.ONGOING, partitions=frozenset(self.partitions | set(added)),
                             txn_start_timestamp=start, txn_last_update_timestamp=now,
                             client_transaction_version=client_version)

    def prepare_abort_or_commit(self, state: TransactionState, client_version: int,
                                next_producer_id: int, now: int,
                                no_partition_added: bool) -> TxnTransit:
        if client_version >= 2:   # transaction version 2 bumps the epoch at every end
            epoch = self.producer_epoch if self.producer_epoch == SHORT_MAX \
                else self.producer_epoch + 1
            last = self.producer_epoch
        else:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        return self._transit(state, producer_epoch=epoch, last_producer_epoch=last,
                             txn_start_timestamp=now if no_partition_added
                             else self.txn_start_timestamp,
                             next_producer_id=next_producer_id, txn_last_update_timestamp=now,
                             client_transaction_version=client_version)

    def prepare_complete(self, now: int) -> TxnTransit:
        self.has_failed_epoch_fence = False
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        if self.client_transaction_version >= 2 and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0
        else:
            producer_id, epoch = self.producer_id, self.producer_epoch
        return self._transit(state, producer_id=producer_id, producer_epoch=epoch,
                             next_producer_id=NO_PRODUCER_ID, partitions=frozenset(),
                             txn_last_update_timestamp=now)

    def prepare_dead(self) -> TxnTransit:
        return self._transit(S.DEAD, partitions=frozenset())

    def complete_transition(self, transit: TxnTransit) -> None:
        """The transit's record is stored: take its values."""
        self.producer_id = transit.producer_id
        self.prev_producer_id = transit.prev_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.partitions = set(transit.partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.client_transaction_version = transit.client_transaction_version
        self.state = transit.state
        self.pending_state = None


class ProducerFenced(Exception):
    """InitProducerId with an epoch that is neither the current nor the previous one."""
