"""The transaction coordinator (Kafka's TransactionCoordinator): InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, the verification of transactional
Produce and TxnOffsetCommit, DescribeTransactions, ListTransactions, and the abort of
transactions that outlive their timeout.

Sans-I/O on the coordinator runtime (common/runtime.py). The broker supplies, besides the clock,
timer and ``persist`` for ``__transaction_state``:

* ``write_markers(producer_id, producer_epoch, commit, coordinator_epoch, partitions,
  transaction_version=)`` - append a COMMIT/ABORT marker to each data partition, synchronously,
  returning an error per partition;
* ``write_group_marker(partition, producer_id, producer_epoch, commit, coordinator_epoch,
  on_done, transaction_version=)`` - the same for a partition of ``__consumer_offsets`` (the
  group coordinator writes and applies it);
* ``allocate_producer_id()`` and ``partition_exists(topic, partition)``.

Markers are written in-process: one broker leads every partition, so there is no
WriteTxnMarkers hop. As on Kafka, EndTxn is answered once PrepareCommit/PrepareAbort is stored,
then the markers go out and CompleteCommit/CompleteAbort is written; a request that arrives in
between gets CONCURRENT_TRANSACTIONS.

Transaction version 2 (KIP-890) is chosen per request as Kafka does: EndTxn v5+, AddPartitionsToTxn
v4+ (broker requests), Produce v12+ and TxnOffsetCommit v5+ are version 2 clients, which add
partitions implicitly and get a new epoch at every EndTxn.
"""
from __future__ import annotations

import re
from functools import partial
from typing import Callable

import structlog

from protocol import messages as m
from protocol.errors import ErrorCode

from ...purgatory import Timer
from ..common.result import CoordinatorResult
from ..common.runtime import CoordinatorRuntime
from ..common.settings import settings
from ..common.timer import CoordinatorTimer
from . import records
from .metadata import (NO_PRODUCER_EPOCH, NO_PRODUCER_ID, SHORT_MAX, IllegalTransition,
                       ProducerFenced, TransactionMetadata, TransactionState, TxnTransit)
from .shard import TransactionStateShard

log = structlog.get_logger("broker.transactions")

E = ErrorCode
S = TransactionState
OFFSETS_TOPIC = "__consumer_offsets"

#: transactions the periodic sweeps (timed-out aborts, expired ids) take per turn; the rest wait
#: one timer tick, so requests that arrived meanwhile are answered between slices (10,000
#: aborts in one pass held every request of the broker for 2-3 s)
SWEEP_SLICE = 100

#: how a Produce / TxnOffsetCommit version treats verification (Kafka's
#: TransactionSupportedOperation): version 2 clients add partitions implicitly
DEFAULT_ERROR, GENERIC_ERROR_SUPPORTED, ADD_PARTITION = 0, 1, 2


def produce_operation(version: int) -> int:
    return ADD_PARTITION if version > 11 else GENERIC_ERROR_SUPPORTED if version > 10 \
        else DEFAULT_ERROR


def txn_offset_commit_operation(version: int) -> int:
    return ADD_PARTITION if version > 4 else GENERIC_ERROR_SUPPORTED if version > 3 \
        else DEFAULT_ERROR


@settings("transaction.state.log.num.partitions", "transaction.max.timeout.ms",
          "transaction.abort.timed.out.transaction.cleanup.interval.ms",
          "transactional.id.expiration.ms",
          "transaction.remove.expired.transaction.cleanup.interval.ms",
          "transaction.partition.verification.enable")
class TransactionConfig:
    """The transaction coordinator's settings (common/settings.py), declared with their
    defaults in broker/config.py."""


class TransactionCoordinator:
    """The transaction coordinator service: holds the runtime whose shards (shard.py) own the
    transactional ids, and runs the transaction state machine (metadata.py) over them."""

    def __init__(self, config=None, clock: Callable[[], int] | None = None,
                 timer: Timer | None = None, persist: Callable | None = None, *,
                 write_markers: Callable | None = None,
                 write_group_marker: Callable | None = None,
                 allocate_producer_id: Callable[[], int] | None = None,
                 partition_exists: Callable[[str, int], bool] | None = None,
                 group_partition_for: Callable[[str], int] | None = None) -> None:
        self.config = TransactionConfig.from_config(config)
        if clock is None:
            clock = timer.clock if timer is not None else None
        if clock is None:
            raise ValueError("the transaction coordinator needs a clock")
        self.clock = clock
        self.timer = timer if timer is not None else Timer(clock)
        self.keyed_timer = CoordinatorTimer(self.timer)
        persist = persist if persist is not None else (lambda p, r, done, **kw: done(None))
        self.write_markers = write_markers or (
            lambda pid, epoch, commit, ce, partitions, transaction_version: {})
        self.write_group_marker = write_group_marker or (
            lambda p, pid, epoch, commit, ce, done, transaction_version: done(None))
        self._next_id = 0
        self.allocate_producer_id = allocate_producer_id or self._count_producer_ids
        self.partition_exists = partition_exists or (lambda topic, partition: True)
        self.group_partition_for = group_partition_for or (lambda group_id: 0)
        self.runtime = CoordinatorRuntime(self.config.transaction_state_log_num_partitions,
                                          lambda p: TransactionStateShard(p, self.clock, persist))
        #: routing, the runtime's: ``shards[p]`` owns partition p of __transaction_state
        self.shards = self.runtime.shards
        self.partition_for = self.runtime.partition_for
        self.shard_for = self.runtime.shard_for
        for shard in self.shards:
            shard.on_loaded_pending = self._complete_loaded
        self._closed = False
        self._every("abort-timed-out",
                    self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                    self.abort_timed_out_transactions)
        self._every("expire-ids",
                    self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
                    self.expire_transactional_ids)

    def _every(self, key: str, interval_ms: int, task: Callable[[], object]) -> None:
        """Run ``task`` every ``interval_ms`` until close (Kafka's scheduled coordinator tasks)."""
        def run() -> None:
            try:
                task()
            finally:
                if not self._closed:
                    self.keyed_timer.schedule(key, interval_ms, run)

        self.keyed_timer.schedule(key, interval_ms, run)

    def _count_producer_ids(self) -> int:
        self._next_id += 1
        return self._next_id

    def close(self) -> None:
        self._closed = True
        self.keyed_timer.cancel_all()
        self.runtime.unload_all(E.NOT_COORDINATOR)

    @property
    def shards_loading(self) -> set[int]:
        return self.runtime.shards_loading

    def max_producer_id(self) -> int:
        """The highest producer id the loaded transactional ids hold (ids must never repeat)."""
        return max((max(md.producer_id, md.next_producer_id) for shard in self.shards
                    for md in shard.transactions.values()), default=-1)

    def _state(self, transactional_id: str):
        """(error, shard, metadata or None) for a known shard."""
        shard = self.shard_for(transactional_id)
        if shard.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, shard, None
        return E.NONE, shard, shard.transactions.get(transactional_id)

    def _known(self, transactional_id: str):
        """(error, shard, metadata) of a request about an existing transactional id: an empty id
        is INVALID_REQUEST, an unknown one INVALID_PRODUCER_ID_MAPPING."""
        if not transactional_id:
            return E.INVALID_REQUEST, None, None
        error, shard, md = self._state(transactional_id)
        if not error and md is None:
            error = E.INVALID_PRODUCER_ID_MAPPING
        return error, shard, md

    # ================================================================== InitProducerId
    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None,
                         respond: Callable[[int, int, int], None]) -> None:
        """``respond(error, producer_id, producer_epoch)``."""
        def fail(error) -> None:
            respond(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

        if not transactional_id:
            fail(E.INVALID_REQUEST)
            return
        if timeout_ms <= 0 or timeout_ms > self.config.transaction_max_timeout_ms:
            fail(E.INVALID_TRANSACTION_TIMEOUT)
            return
        error, shard, metadata = self._state(transactional_id)
        if error:
            fail(error)
            return
        now = self.clock()
        if metadata is None:
            metadata = shard.transactions[transactional_id] = TransactionMetadata(
                transactional_id, self.allocate_producer_id(), txn_timeout_ms=timeout_ms,
                txn_last_update_timestamp=now)
        try:
            transit = self._prepare_init(metadata, timeout_ms, expected, now)
        except _Refused as exc:
            fail(exc.error)
            return
        if transit.state is S.PREPARE_EPOCH_FENCE:
            # a producer with an open transaction was replaced: abort it first; the new one
            # retries on CONCURRENT_TRANSACTIONS until the abort is complete
            self._end_transaction(transactional_id, transit.producer_id, transit.producer_epoch,
                                  False, False, 2, lambda err, pid, epoch: fail(
                                      err if err else E.CONCURRENT_TRANSACTIONS))
            return
        shard.write_transit(metadata, transit,
                            partial(self._initialized, transactional_id, shard.partition,
                                    transit, respond))

    @staticmethod
    def _initialized(transactional_id: str, partition: int, transit: TxnTransit, respond,
                     error: ErrorCode) -> None:
        if error:
            respond(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return
        log.info("transactional id initialized", transactional_id=transactional_id,
                 producer_id=transit.producer_id, producer_epoch=transit.producer_epoch,
                 partition=partition)
        respond(E.NONE, transit.producer_id, transit.producer_epoch)

    def _prepare_init(self, md: TransactionMetadata, timeout_ms: int,
                      expected: tuple[int, int] | None, now: int) -> TxnTransit:
        if md.pending_transition_in_progress:
            raise _Refused(E.CONCURRENT_TRANSACTIONS)
        if expected is not None:
            pid, epoch = expected
            valid = (md.producer_epoch == NO_PRODUCER_EPOCH or pid == md.producer_id
                     or (pid == md.prev_producer_id and epoch >= SHORT_MAX - 1))
            if not valid:
                raise _Refused(E.PRODUCER_FENCED)
        if md.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise _Refused(E.CONCURRENT_TRANSACTIONS)
        if md.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
            try:
                if md.is_producer_epoch_exhausted and (expected is None
                                                       or expected[1] == md.producer_epoch):
                    return md.prepare_producer_id_rotation(self.allocate_producer_id(),
                                                           timeout_ms, now, expected is not None)
                return md.prepare_increment_producer_epoch(
                    timeout_ms, None if expected is None else expected[1], now)
            except ProducerFenced:
                raise _Refused(E.PRODUCER_FENCED) from None
        if md.state is S.ONGOING:
            return md.prepare_fence_producer_epoch()
        raise _Refused(E.UNKNOWN_SERVER_ERROR)

    # ================================================================== AddPartitionsToTxn
    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions, client_version: int,
                       respond: Callable[[int], None]) -> None:
        """AddPartitionsToTxn, AddOffsetsToTxn and the implicit add of a version 2 Produce:
        ``respond(error)`` once the partitions are part of the transaction."""
        error, shard, md = self._known(transactional_id)
        if error:
            respond(error)
            return
        if md.pending_transition_in_progress:
            respond(E.CONCURRENT_TRANSACTIONS)
            return
        if md.producer_id != producer_id:
            respond(E.INVALID_PRODUCER_ID_MAPPING)
            return
        if md.producer_epoch != producer_epoch:
            respond(E.PRODUCER_FENCED)
            return
        if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            respond(E.CONCURRENT_TRANSACTIONS)
            return
        if md.state is S.ONGOING and md.partitions.issuperset(partitions):
            respond(E.NONE)
            return
        try:
            transit = md.prepare_add_partitions(partitions, self.clock(), client_version)
        except IllegalTransition as exc:
            log.error("illegal transaction transition", error=str(exc))
            respond(E.INVALID_TXN_STATE)
            return
        shard.write_transit(md, transit, respond)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions) -> dict:
        """AddPartitionsToTxn with VerifyOnly: is each partition part of the transaction?"""
        error, _shard, md = self._known(transactional_id)
        if not error:
            if md.producer_id != producer_id:
                error = E.INVALID_PRODUCER_ID_MAPPING
            elif md.producer_epoch != producer_epoch:
                error = E.PRODUCER_FENCED
            elif md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                error = E.CONCURRENT_TRANSACTIONS
        if error:
            return {tp: error for tp in partitions}
        return {tp: E.NONE if tp in md.partitions else E.TRANSACTION_ABORTABLE
                for tp in partitions}

    # ================================================================== verification of writes
    def verify_produce(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: list, produce_version: int, done: Callable) -> None:
        """Before transactional batches are appended: the partitions must be part of the
        transaction (version 2 clients add them here). ``done({tp: error})`` with the errors
        Kafka's AddPartitionsToTxnManager hands the Produce path, which turns the retriable
        ones into Produce errors (apis/produce.py)."""
        self._verify(transactional_id, producer_id, producer_epoch, partitions,
                     produce_operation(produce_version), done)

    def verify_txn_offset_commit(self, transactional_id: str, producer_id: int,
                                 producer_epoch: int, group_id: str, version: int,
                                 done: Callable[[int], None]) -> None:
        tp = (OFFSETS_TOPIC, self.group_partition_for(group_id))
        self._verify(transactional_id, producer_id, producer_epoch, [tp],
                     txn_offset_commit_operation(version),
                     lambda errors: done(errors.get(tp, E.NONE)))

    def _verify(self, transactional_id, producer_id, producer_epoch, partitions, operation,
                done) -> None:
        partitions = list(partitions)
        if not transactional_id or (operation != ADD_PARTITION and
                                    not self.config.transaction_partition_verification_enable):
            done({tp: E.NONE for tp in partitions})
            return

        def mapped(errors: dict) -> None:
            out = {}
            for tp, error in errors.items():
                if error == E.PRODUCER_FENCED:
                    error = E.INVALID_PRODUCER_EPOCH
                elif error == E.TRANSACTION_ABORTABLE and operation == DEFAULT_ERROR:
                    error = E.INVALID_TXN_STATE   # older clients do not know the new error
                out[tp] = error
            done(out)

        if operation == ADD_PARTITION:
            self.add_partitions(transactional_id, producer_id, producer_epoch, partitions, 2,
                                lambda error: mapped({tp: error for tp in partitions}))
        else:
            mapped(self.verify_partitions(transactional_id, producer_id, producer_epoch,
                                          partitions))

    # ================================================================== EndTxn
    def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        commit: bool, client_version: int,
                        respond: Callable[[int, int, int], None]) -> None:
        """``respond(error, producer_id, producer_epoch)``: the new id and epoch for version 2
        clients, -1/-1 otherwise."""
        self._end_transaction(transactional_id, producer_id, producer_epoch, commit, True,
                              client_version, respond)

    def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         commit: bool, from_client: bool, client_version: int,
                         respond: Callable[[int, int, int], None]) -> None:
        def fail(error) -> None:
            respond(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)

        error, shard, md = self._known(transactional_id)
        if error:
            fail(error)
            return
        try:
            if client_version >= 2:
                transit = self._prepare_end_v2(md, producer_id, producer_epoch, commit,
                                               from_client)
            else:
                transit = self._prepare_end_v1(md, producer_id, producer_epoch, commit,
                                               from_client)
        except _Refused as exc:
            if exc.error == E.NONE:
                respond(E.NONE, md.producer_id if client_version >= 2 else NO_PRODUCER_ID,
                        md.producer_epoch if client_version >= 2 else NO_PRODUCER_EPOCH)
            else:
                fail(exc.error)
            return
        shard.write_transit(md, transit,
                            partial(self._prepared, shard, md, client_version, respond))

    def _prepared(self, shard: TransactionStateShard, md: TransactionMetadata,
                  client_version: int, respond, error: ErrorCode) -> None:
        """PrepareCommit/PrepareAbort is written: answer EndTxn, then write the markers (Kafka's
        sendTxnMarkersCallback)."""
        if not error and (md.pending_transition_in_progress
                          or md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT)):
            error = E.CONCURRENT_TRANSACTIONS
        if error:
            respond(error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return
        if client_version >= 2:
            respond(E.NONE, md.next_producer_id if md.next_producer_id != NO_PRODUCER_ID
                    else md.producer_id,
                    0 if md.next_producer_id != NO_PRODUCER_ID else md.producer_epoch)
        else:
            respond(E.NONE, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        self._send_markers(shard, md)

    def _prepare_end_v1(self, md: TransactionMetadata, producer_id: int, producer_epoch: int,
                        commit: bool, from_client: bool) -> TxnTransit:
        if md.producer_id != producer_id:
            raise _Refused(E.INVALID_PRODUCER_ID_MAPPING)
        if (from_client and producer_epoch != md.producer_epoch) or \
                producer_epoch < md.producer_epoch:
            raise _Refused(E.PRODUCER_FENCED)
        # the coordinator's own aborts (fencing, timeouts) take the version 2 path: a pending
        # fence is never seen here
        if md.pending_transition_in_progress:
            raise _Refused(E.CONCURRENT_TRANSACTIONS)
        return self._prepare_end_state(md, commit, False, 0)

    def _prepare_end_v2(self, md: TransactionMetadata, producer_id: int, producer_epoch: int,
                        commit: bool, from_client: bool) -> TxnTransit:
        fencing = md.pending_state is S.PREPARE_EPOCH_FENCE
        retry_on_overflow = (not fencing and md.prev_producer_id == producer_id
                             and producer_epoch == SHORT_MAX - 1 and md.producer_epoch == 0)
        retry_on_bump = not fencing and md.producer_epoch == producer_epoch + 1
        if fencing:
            valid = (not from_client or producer_epoch == md.producer_epoch) and \
                producer_epoch >= md.producer_epoch
        elif md.state in (S.ONGOING, S.EMPTY, S.DEAD, S.PREPARE_EPOCH_FENCE):
            valid = producer_epoch == md.producer_epoch
        elif md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            valid = retry_on_bump
        else:
            valid = retry_on_bump or retry_on_overflow or producer_epoch == md.producer_epoch
        retry = retry_on_bump or retry_on_overflow
        if md.pending_transition_in_progress and not fencing:
            raise _Refused(E.CONCURRENT_TRANSACTIONS)
        if md.producer_id != producer_id and not retry_on_overflow:
            raise _Refused(E.INVALID_PRODUCER_ID_MAPPING)
        if not valid:
            raise _Refused(E.PRODUCER_FENCED)
        state = md.state
        if state is S.COMPLETE_COMMIT:
            if commit:
                raise _Refused(E.NONE if retry else E.INVALID_TXN_STATE)
            if retry:
                raise _Refused(E.INVALID_TXN_STATE)
            return self._prepare_completion(md, S.PREPARE_ABORT, 2, True, fencing)
        if state is S.COMPLETE_ABORT:
            if commit:
                raise _Refused(E.INVALID_TXN_STATE)
            if retry:
                raise _Refused(E.NONE)
            return self._prepare_completion(md, S.PREPARE_ABORT, 2, True, fencing)
        if state is S.EMPTY:
            if commit:
                raise _Refused(E.INVALID_TXN_STATE)
            return self._prepare_completion(md, S.PREPARE_ABORT, 2, True, fencing)
        return self._prepare_end_state(md, commit, fencing, 2)

    def _prepare_end_state(self, md: TransactionMetadata, commit: bool, fencing: bool,
                           client_version: int) -> TxnTransit:
        """The transition of an EndTxn that met a transaction in ``md.state``."""
        state = md.state
        if state is S.ONGOING:
            target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            return self._prepare_completion(md, target, client_version, False, fencing)
        if state is S.COMPLETE_COMMIT:
            raise _Refused(E.NONE if commit else E.INVALID_TXN_STATE)
        if state is S.COMPLETE_ABORT:
            raise _Refused(E.INVALID_TXN_STATE if commit else E.NONE)
        if state is S.PREPARE_COMMIT:
            raise _Refused(E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE)
        if state is S.PREPARE_ABORT:
            raise _Refused(E.INVALID_TXN_STATE if commit else E.CONCURRENT_TRANSACTIONS)
        raise _Refused(E.INVALID_TXN_STATE)

    def _prepare_completion(self, md: TransactionMetadata, target: TransactionState,
                            client_version: int, no_partition_added: bool,
                            fencing: bool) -> TxnTransit:
        next_producer_id = NO_PRODUCER_ID
        if client_version >= 2 and md.is_producer_epoch_exhausted:
            next_producer_id = self.allocate_producer_id()
        if fencing and target is S.PREPARE_ABORT:
            # the abort replaces the fence; in version 2 its epoch bump is the fence's
            md.pending_state = None
        return md.prepare_abort_or_commit(target, client_version, next_producer_id,
                                          self.clock(), no_partition_added)

    # ================================================================== markers
    def _send_markers(self, shard: TransactionStateShard, md: TransactionMetadata) -> None:
        """Write the markers of ``md``'s transaction into each of its partitions, then
        CompleteCommit/CompleteAbort (Kafka's TransactionMarkerChannelManager, in-process)."""
        commit = md.state is S.PREPARE_COMMIT
        data = sorted(tp for tp in md.partitions if tp[0] != OFFSETS_TOPIC)
        groups = sorted(p for t, p in md.partitions if t == OFFSETS_TOPIC)
        epoch = md.producer_epoch
        version = md.client_transaction_version   # version 2 markers carry the bumped epoch
        coordinator_epoch = shard.coordinator_epoch
        if data:
            errors = self.write_markers(md.producer_id, epoch, commit, coordinator_epoch, data,
                                        transaction_version=version)
            for tp, error in errors.items():
                if error not in (E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION):
                    log.warning("transaction marker not written", transactional_id=
                                md.transactional_id, topic=tp[0], partition=tp[1],
                                error=ErrorCode(error).name)
        waiting = {"n": len(groups)}

        def group_done(exc=None) -> None:
            if exc is not None:
                log.warning("transaction marker not written to __consumer_offsets",
                            transactional_id=md.transactional_id, error=str(exc))
            waiting["n"] -= 1
            if waiting["n"] <= 0:
                self._complete(shard, md)

        if not groups:
            self._complete(shard, md)
            return
        for partition in groups:
            self.write_group_marker(partition, md.producer_id, epoch, commit, coordinator_epoch,
                                    group_done, transaction_version=version)

    def _complete(self, shard: TransactionStateShard, md: TransactionMetadata) -> None:
        if shard.transactions.get(md.transactional_id) is not md or \
                md.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return
        shard.write_transit(md, md.prepare_complete(self.clock()))

    def _complete_loaded(self, md: TransactionMetadata) -> None:
        """A transaction found in PrepareCommit/PrepareAbort at load: finish it."""
        shard = self.shard_for(md.transactional_id)
        self.timer.call_later(0, lambda: self._send_markers(shard, md)
                              if shard.transactions.get(md.transactional_id) is md
                              and not shard.loading else None)

    # ================================================================== timeouts, expiration
    def abort_timed_out_transactions(self) -> int:
        """Fence and abort every Ongoing transaction older than its timeout, SWEEP_SLICE per
        timer tick. Returns how many were found (0 while the last sweep is still going)."""
        return self._sweep("abort-timed-out", self._timed_out, self._abort_timed_out,
                           "aborted transactions past their timeout")

    def _timed_out(self, md: TransactionMetadata, now: int) -> bool:
        return not md.pending_transition_in_progress and md.state is S.ONGOING and \
            md.txn_start_timestamp + md.txn_timeout_ms < now

    def _abort_timed_out(self, md: TransactionMetadata) -> None:
        log.debug("aborting a transaction past its timeout",
                  transactional_id=md.transactional_id, producer_id=md.producer_id,
                  timeout_ms=md.txn_timeout_ms)
        transit = md.prepare_fence_producer_epoch()
        self._end_transaction(md.transactional_id, transit.producer_id, transit.producer_epoch,
                              False, False, 2, lambda err, pid, epoch: None)

    def expire_transactional_ids(self) -> int:
        """Remove ids idle for ``transactional.id.expiration.ms`` (tombstones), SWEEP_SLICE per
        timer tick. Returns how many were found (0 while the last sweep is still going)."""
        return self._sweep("expire-ids", self._expirable, self._expire,
                           "expired transactional ids")

    def _expirable(self, md: TransactionMetadata, now: int) -> bool:
        return not md.pending_transition_in_progress and md.state.expiration_allowed and \
            md.txn_last_update_timestamp <= now - self.config.transactional_id_expiration_ms

    def _expire(self, md: TransactionMetadata) -> None:
        md.prepare_dead()
        self.shard_for(md.transactional_id).append(CoordinatorResult(
            [(records.key(md.transactional_id), None)],
            append_future=partial(self._expired, md)))

    @staticmethod
    def _expired(md: TransactionMetadata, exc) -> None:
        """A failed tombstone leaves the transactional id as it was."""
        if exc is not None:
            md.pending_state = None

    def _sweep(self, key: str, due: Callable, act: Callable, summary: str) -> int:
        """Act on every transaction ``due(md, now)``, SWEEP_SLICE per timer tick. Each one is
        looked at again when its slice comes (a client may have ended it, or its shard been
        unloaded, meanwhile); one log line when the sweep is over."""
        slice_key = (key, "slice")
        if slice_key in self.keyed_timer.tasks:
            return 0
        now = self.clock()
        found = [md for shard in self.shards if not shard.loading
                 for md in shard.transactions.values() if due(md, now)]
        done: list[str] = []

        def next_slice(start: int) -> None:
            for md in found[start:start + SWEEP_SLICE]:
                shard = self.shard_for(md.transactional_id)
                if shard.loading or shard.transactions.get(md.transactional_id) is not md or \
                        not due(md, now):
                    continue
                act(md)
                done.append(md.transactional_id)
            start += SWEEP_SLICE
            if start < len(found) and not self._closed:
                self.keyed_timer.schedule(slice_key, 0, lambda: next_slice(start))
            elif done:
                log.info(summary, count=len(done), transactional_ids=done[:5],
                         slices=-(-len(found) // SWEEP_SLICE))

        if found:
            next_slice(0)
        return len(found)

    # ================================================================== describe, list
    def describe(self, transactional_id: str):
        cls = m.DescribeTransactionsResponse.TransactionState
        topic_cls = m.DescribeTransactionsResponse.TopicData
        if not transactional_id:
            return cls(error_code=int(E.INVALID_REQUEST), transactional_id=transactional_id,
                       transaction_state="", topics=[])
        error, _shard, md = self._state(transactional_id)
        if not error and (md is None or md.state is S.DEAD):
            error = E.TRANSACTIONAL_ID_NOT_FOUND
        if error:
            return cls(error_code=int(error), transactional_id=transactional_id,
                       transaction_state="", topics=[])
        by_topic: dict[str, list[int]] = {}
        for topic, partition in md.partitions:
            by_topic.setdefault(topic, []).append(partition)
        return cls(error_code=0, transactional_id=transactional_id,
                   transaction_state=md.state.state_name, transaction_timeout_ms=md.txn_timeout_ms,
                   transaction_start_time_ms=md.txn_start_timestamp, producer_id=md.producer_id,
                   producer_epoch=md.producer_epoch,
                   topics=[topic_cls(topic=t, partitions=ps) for t, ps in by_topic.items()])

    def list_transactions(self, producer_ids, states, duration_ms: int = -1,
                          pattern: str | None = None):
        """-> (error, unknown state filters, [(transactional id, producer id, state name)])."""
        if any(shard.loading for shard in self.shards):
            return E.COORDINATOR_LOAD_IN_PROGRESS, [], []
        wanted = set()
        unknown = []
        for name in states or ():
            state = TransactionState.from_name(name)
            if state is None:
                unknown.append(name)
            else:
                wanted.add(state)
        regex = None
        if pattern:
            try:
                regex = re.compile(pattern)
            except re.error:
                return E.INVALID_REGULAR_EXPRESSION, [], []
        producer_ids = set(producer_ids or ())
        now = self.clock()
        out = []
        for shard in self.shards:
            for md in shard.transactions.values():
                if md.state is S.DEAD:
                    continue
                if producer_ids and md.producer_id not in producer_ids:
                    continue
                if states and md.state not in wanted:
                    continue
                if duration_ms >= 0 and now - md.txn_start_timestamp <= duration_ms:
                    continue
                if regex is not None and not regex.fullmatch(md.transactional_id):
                    continue
                out.append((md.transactional_id, md.producer_id, md.state.state_name))
        return E.NONE, unknown, out


class _Refused(Exception):
    """A request answered without a write: ``error`` (NONE for a retried request that already
    took effect)."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error
