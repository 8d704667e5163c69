"""One shard of the transaction coordinator: the transactional ids that hash to partition N of
``__transaction_state`` (Kafka's TransactionStateManager, per partition).

Its state changes only by applying TransactionLogKey/Value records: a live write applies the
prepared transit once stored (it keeps what the record does not carry, such as the last producer
epoch), a replay decodes the record.
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import structlog

from protocol.errors import ErrorCode

from ..common.result import CoordinatorResult, append_error
from ..common.runtime import NO_PRODUCER_ID, CoordinatorShard
from . import records as rec
from .metadata import TransactionMetadata, TransactionState, TxnTransit

log = structlog.get_logger("broker.transactions")

E = ErrorCode


class TransactionStateShard(CoordinatorShard):
    def __init__(self, partition: int, clock: Callable[[], int], persist: Callable) -> None:
        super().__init__(partition, clock, persist)
        self.transactions: dict[str, TransactionMetadata] = {}
        #: transits written and not yet applied, by transactional id
        self.transits: dict[str, TxnTransit] = {}
        #: the leader epoch of the partition (always 0 on one broker), written into markers
        self.coordinator_epoch = 0
        #: called with the metadata of a transaction found half-way at load (PrepareCommit or
        #: PrepareAbort): the coordinator finishes writing its markers
        self.on_loaded_pending: Callable[[TransactionMetadata], None] | None = None

    def replay(self, key: bytes, value: bytes | None, replay: bool,
               producer_id: int = NO_PRODUCER_ID) -> None:
        transactional_id = rec.decode_key(key)
        if transactional_id is None:
            return
        if value is None:
            self.transactions.pop(transactional_id, None)
            self.transits.pop(transactional_id, None)
            return
        transit = None if replay else self.transits.pop(transactional_id, None)
        if transit is None:
            transit = rec.decode_value(value)
        metadata = self.transactions.get(transactional_id)
        if metadata is None:
            metadata = self.transactions[transactional_id] = TransactionMetadata(
                transactional_id, transit.producer_id)
        metadata.complete_transition(transit)

    def write_transit(self, metadata: TransactionMetadata, transit: TxnTransit,
                      respond: Callable[[ErrorCode], None] | None = None) -> None:
        """Store ``transit`` for ``metadata`` and apply it, then ``respond(NONE)``; a failed
        write drops the pending state (the metadata stays as it was) and answers the append
        error (Kafka's appendTransactionToLog)."""
        transactional_id = metadata.transactional_id
        self.transits[transactional_id] = transit
        self.append(CoordinatorResult([(rec.key(transactional_id), rec.value(transit))], E.NONE,
                                      append_future=partial(self._transit_written, metadata)),
                    respond, write_error)

    def _transit_written(self, metadata: TransactionMetadata, exc) -> None:
        if exc is not None:
            self.transits.pop(metadata.transactional_id, None)
            if self.transactions.get(metadata.transactional_id) is metadata:
                metadata.pending_state = None

    def on_loaded(self) -> None:
        pending = [md for md in self.transactions.values()
                   if md.state in (TransactionState.PREPARE_COMMIT,
                                   TransactionState.PREPARE_ABORT)]
        if self.transactions:
            log.info("transactions loaded", partition=self.partition,
                     transactional_ids=len(self.transactions), completing=len(pending),
                     records=self._loaded_records, duration_ms=self.load_duration_ms)
        if self.on_loaded_pending is not None:
            for metadata in pending:
                self.on_loaded_pending(metadata)

    def on_unload(self, error: ErrorCode = E.NOT_COORDINATOR) -> None:
        self.transactions.clear()
        self.transits.clear()


def write_error(exc: BaseException, response: ErrorCode) -> ErrorCode:
    """The answer of every transaction API to a failed write: the append error."""
    return append_error(exc)
