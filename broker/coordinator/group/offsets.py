"""Committed offsets of one coordinator shard's groups: OffsetCommit, OffsetFetch,
OffsetDelete and retention, and the replay of their records (Kafka's OffsetMetadataManager).

Offsets live on each group's GroupMetadata (``offsets``, ``pending_offset_commits``); the shard
(shard.py) owns the group table and the write path, and checks that a committing member belongs
to the current generation.
"""
from __future__ import annotations

from functools import partial
from typing import Callable

import structlog

from protocol.errors import ErrorCode

from ..common.result import CoordinatorResult, append_error
from . import records as rec
from .context import GroupContext
from .group import (COMPLETING_REBALANCE, CONSUMER_PROTOCOL_TYPE, DEAD, EMPTY, STABLE,
                    UNKNOWN_MEMBER_ID, GroupMetadata, OffsetAndMetadata)
from .records import java_length


log = structlog.get_logger("broker.coordinator")

E = ErrorCode


class OffsetMetadataManager:
    """The offsets half of one shard; every change goes through the shard's write path."""

    def __init__(self, context: GroupContext) -> None:
        self.context = context
        #: transactional commits waiting for their marker: producer id -> group -> tp -> offset
        self.pending_transactions: dict[int, dict[str, dict[tuple[str, int],
                                                             OffsetAndMetadata]]] = {}
        #: group -> tp -> producer ids with a transactional commit pending there
        self.open_transactions: dict[str, dict[tuple[str, int], set[int]]] = {}
        self._records = 0  # offset records applied, in order (OffsetAndMetadata.record_offset)

    def unload(self) -> None:
        self.pending_transactions.clear()
        self.open_transactions.clear()

    def replay(self, group_id: str, tp: tuple[str, int], offset: OffsetAndMetadata | None,
               replay: bool) -> None:
        """Apply an offset commit record (None: a tombstone), live or replayed at load."""
        group = self.context.groups.get(group_id)
        if offset is None:
            if group is not None:
                group.offsets.pop(tp, None)
            self._forget_pending(group_id, tp)
            return
        if group is None:
            if not replay:
                return  # the group was deleted while its commit was being written
            group = self.context.groups[group_id] = GroupMetadata(group_id, self.context.clock())
        elif group.state is DEAD and not replay:
            return
        self._records += 1
        offset.record_offset = self._records
        group.offsets[tp] = offset

    # ================================================================== transactions
    def replay_transactional(self, producer_id: int, group_id: str, tp: tuple[str, int],
                             offset: OffsetAndMetadata | None, replay: bool) -> None:
        """A TxnOffsetCommit record: invisible until the transaction's COMMIT marker."""
        if offset is None:
            return
        if group_id not in self.context.groups:
            self.context.groups[group_id] = GroupMetadata(group_id, self.context.clock())
        self._records += 1
        offset.record_offset = self._records
        self.pending_transactions.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = offset
        self.open_transactions.setdefault(group_id, {}).setdefault(tp, set()).add(producer_id)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        """The marker of ``producer_id``'s transaction: its offsets become committed (unless a
        later plain commit superseded them) or are dropped."""
        pending = self.pending_transactions.pop(producer_id, None)
        if pending is None:
            return
        for group_id, offsets in pending.items():
            by_tp = self.open_transactions.get(group_id)
            for tp in offsets:
                if by_tp is not None and tp in by_tp:
                    by_tp[tp].discard(producer_id)
                    if not by_tp[tp]:
                        del by_tp[tp]
            if by_tp is not None and not by_tp:
                del self.open_transactions[group_id]
            if not commit:
                continue
            group = self.context.groups.get(group_id)
            if group is None or group.state is DEAD:
                continue
            for tp, offset in offsets.items():
                existing = group.offsets.get(tp)
                if existing is None or offset.record_offset > existing.record_offset:
                    group.offsets[tp] = offset

    def has_pending_transactional_offsets(self, group_id: str, tp: tuple[str, int]) -> bool:
        by_tp = self.open_transactions.get(group_id)
        return by_tp is not None and tp in by_tp

    def _needs_tombstone(self, group, tp: tuple[str, int]) -> bool:
        """Whether deleting ``tp``'s offset writes a tombstone: one is committed, being written,
        or waiting in an open transaction."""
        return (tp in group.offsets or group.has_pending_offset_commit(tp)
                or self.has_pending_transactional_offsets(group.group_id, tp))

    def _forget_pending(self, group_id: str, tp: tuple[str, int]) -> None:
        """A tombstone also deletes what open transactions would commit there."""
        by_tp = self.open_transactions.get(group_id)
        if by_tp is None or tp not in by_tp:
            return
        for producer_id in by_tp.pop(tp):
            self.pending_transactions.get(producer_id, {}).get(group_id, {}).pop(tp, None)
        if not by_tp:
            del self.open_transactions[group_id]

    def txn_commit(self, request, version: int, partitions: list, respond: Callable) -> None:
        """TxnOffsetCommit (after the transaction coordinator verified the partition is in the
        transaction). ``partitions``: [(topic, partition, offset, leader_epoch, metadata, error
        or None)]; ``respond`` gets {(topic, partition): error}. The records are written as part
        of the producer's transaction."""
        group_id = request.group_id
        results: dict[tuple[str, int], ErrorCode] = {
            (t, p): err for t, p, _o, _e, _md, err in partitions if err is not None}
        todo = [entry for entry in partitions if entry[5] is None]
        if not todo:
            respond(results)
            return
        error, group = self._validate_txn_commit(request, version)
        partition_check = None
        if callable(error):
            # an older member epoch: each partition must have been the member's since then
            partition_check, error = partial(_txn_partition_check, error), None
        if error is not None:
            for t, p, *_ in todo:
                results[(t, p)] = error
            respond(results)
            return
        records, written = self._offset_records(group_id, todo, results, version >= 2,
                                                self.context.clock(), None, partition_check)
        for tp in written:
            results[tp] = E.NONE
        self.context.append(CoordinatorResult(records, results,
                                              (request.producer_id, request.producer_epoch)),
                            respond, offset_commit_error)

    def _validate_txn_commit(self, request, version: int):
        """(error, a per-partition check (older member epoch) or None; group): Kafka's
        validateTransactionalOffsetCommit. Unlike a plain
        commit, an empty member id is fine in a group with members and a rebalance in progress
        does not matter; a stale member epoch is ILLEGAL_GENERATION."""
        group_id = request.group_id
        generation = request.generation_id if version >= 3 else -1
        member_id = (request.member_id if version >= 3 else "") or ""
        instance_id = request.group_instance_id if version >= 3 else None
        group = self.context.groups.get(group_id)
        if getattr(group, "group_type", None) == "share":
            return E.GROUP_ID_NOT_FOUND, None
        if group is None or group.state is DEAD:
            if generation >= 0:
                return E.ILLEGAL_GENERATION, None
            group = self.context.groups[group_id] = GroupMetadata(group_id, self.context.clock())
            return None, group
        if group.group_type in ("consumer", "streams"):
            if generation < 0 and not group.members:
                return None, group
            error = group.validate_offset_commit(member_id, instance_id, generation, 9,
                                                 transactional=True)
            if error == E.STALE_MEMBER_EPOCH:
                error = E.ILLEGAL_GENERATION
            return error, group
        if generation < 0 and group.state is EMPTY:
            return None, group
        if generation >= 0 or member_id or instance_id is not None:
            error = self.context.classic.validate_current_member(
                group, member_id or UNKNOWN_MEMBER_ID, instance_id)
            if error is not None:
                return error, group
            if generation != group.generation_id:
                return E.ILLEGAL_GENERATION, group
        return None, group

    def commit(self, request, version: int, partitions: list, respond: Callable) -> None:
        """``partitions``: [(topic, partition, offset, leader_epoch, metadata, error or None)],
        errors already set for unknown topics. ``respond`` gets {(topic, partition): error}."""
        group_id = request.group_id
        generation = request.generation_id_or_member_epoch
        member_id = request.member_id or UNKNOWN_MEMBER_ID
        instance_id = request.group_instance_id if version >= 7 else None
        results: dict[tuple[str, int], ErrorCode] = {
            (t, p): err for t, p, _o, _e, _md, err in partitions if err is not None}
        todo = [entry for entry in partitions if entry[5] is None]
        if not todo:
            respond(results)
            return

        def fail(error) -> None:
            for t, p, *_ in todo:
                results[(t, p)] = error
            respond(results)

        group = self.context.groups.get(group_id)
        if getattr(group, "group_type", None) == "share":
            fail(E.GROUP_ID_NOT_FOUND)   # a share group keeps no committed offsets
            return
        if group is None:
            if generation >= 0:
                # v9+ knows GROUP_ID_NOT_FOUND; older clients get ILLEGAL_GENERATION
                fail(E.GROUP_ID_NOT_FOUND if version >= 9 else E.ILLEGAL_GENERATION)
                return
            # a simple group: offsets committed without group management
            group = self.context.groups[group_id] = GroupMetadata(group_id, self.context.clock())
        if group.group_type in ("consumer", "streams"):
            error = (E.COORDINATOR_NOT_AVAILABLE if group.state is DEAD else
                     group.validate_offset_commit(request.member_id or "", instance_id,
                                                  generation, version))
        else:
            error = self._validate_commit(group, generation, member_id, instance_id)
        partition_check = None
        if callable(error):
            partition_check, error = error, None
        if error is not None:
            fail(error)
            self.context.maybe_drop_transient_group(group)
            return
        now = self.context.clock()
        expire = None
        if 2 <= version <= 4 and request.retention_time_ms not in (None, -1):
            expire = now + request.retention_time_ms
        records, written = self._offset_records(group_id, todo, results, version >= 6, now,
                                                expire, partition_check)
        if not records:
            respond(results)
            self.context.maybe_drop_transient_group(group)
            return
        pending = group.pending_offset_commits
        for tp in written:
            pending[tp] = pending.get(tp, 0) + 1
            results[tp] = E.NONE
        self.context.append(CoordinatorResult(
            records, results, append_future=partial(_commit_written, pending, written)),
            respond, offset_commit_error)

    def _offset_records(self, group_id: str, todo: list, results: dict,
                        with_leader_epoch: bool, now: int, expire: int | None,
                        partition_check) -> tuple[list, list]:
        """The OffsetCommit records of ``todo``, and the partitions they are for; a refused
        partition (its member may not commit it, or its metadata is too large) gets its error in
        ``results``."""
        records = []
        written = []
        max_metadata = self.context.config.offset_metadata_max_bytes
        for topic, partition, offset, leader_epoch, metadata, _ in todo:
            if partition_check is not None:
                found = self.context.topics.get(topic)
                refused = partition_check(found[0] if found else None, partition)
                if refused is not None:
                    results[(topic, partition)] = refused
                    continue
            if java_length(metadata) > max_metadata:
                results[(topic, partition)] = E.OFFSET_METADATA_TOO_LARGE
                continue
            value = OffsetAndMetadata(offset, leader_epoch if with_leader_epoch else -1,
                                      metadata or "", now, expire)
            records.append(rec.offset_commit_record(group_id, topic, partition, value))
            written.append((topic, partition))
        return records, written

    def _validate_commit(self, group: GroupMetadata, generation: int, member_id: str,
                                instance_id: str | None):
        if group.state is DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and group.state is EMPTY:
            return None  # a simple (non-group-managed) commit, or the admin client
        if generation >= 0 or member_id != UNKNOWN_MEMBER_ID or instance_id is not None:
            error = self.context.classic.validate_current_member(group, member_id, instance_id)
            if error is not None:
                return error
            if generation != group.generation_id:
                return E.ILLEGAL_GENERATION
        elif group.state is not EMPTY:
            return E.UNKNOWN_MEMBER_ID  # only members commit to a group that has members
        if group.state is COMPLETING_REBALANCE:
            # the member knows the new generation but not its assignment yet; commits from the
            # current generation during PreparingRebalance are accepted
            return E.REBALANCE_IN_PROGRESS
        return None

    # ================================================================== OffsetFetch
    def fetch(self, group_id: str, topics: list | None, require_stable: bool):
        """-> [(topic, [(partition, offset, leader_epoch, metadata, error)])].

        ``topics`` is [(topic, [partitions])] or None for every committed offset of the group.
        """
        group = self.context.groups.get(group_id)
        if group is not None and group.state is DEAD:
            group = None
        if topics is None:
            if group is None:
                return []
            by_topic: dict[str, list] = {}
            for (topic, partition) in sorted(group.offsets):
                by_topic.setdefault(topic, []).append(partition)
            topics = list(by_topic.items())
        out = []
        for topic, partitions in topics:
            rows = []
            for partition in partitions:
                tp = (topic, partition)
                if group is None:
                    rows.append((partition, -1, -1, "", E.NONE))
                    continue
                if require_stable and (group.has_pending_offset_commit(tp)
                                       or self.has_pending_transactional_offsets(group_id, tp)):
                    rows.append((partition, -1, -1, "", E.UNSTABLE_OFFSET_COMMIT))
                    continue
                offset = group.offsets.get(tp)
                if offset is None:
                    rows.append((partition, -1, -1, "", E.NONE))
                else:
                    rows.append((partition, offset.offset, offset.leader_epoch,
                                 offset.metadata, E.NONE))
            out.append((topic, rows))
        return out

    # ================================================================== OffsetDelete
    def delete(self, group_id: str, topics: list, done: Callable) -> None:
        """``topics``: [(topic, [(partition, error or None)])]. ``done((group_error, topics))`` with
        topics [(topic, [(partition, error)])] once the tombstones are stored.

        As Kafka 4's OffsetMetadataManager.deleteOffsets: every requested partition of a known
        topic is answered (NONE even without a committed offset); a tombstone is written only
        where an offset is committed or a commit is being written. A failed write fails the
        whole request (group-level error, no partitions)."""
        group = self.context.groups.get(group_id)
        if group is None or group.state is DEAD:
            done((E.GROUP_ID_NOT_FOUND, []))
            return
        if group.state is not EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE and \
                group.group_type != "streams":   # Kafka's validateOffsetDelete
            done((E.NON_EMPTY_GROUP, []))
            return
        out = []
        records = []
        for topic, partitions in topics:
            rows = []
            subscribed = group.state is not EMPTY and group.is_subscribed_to_topic(topic)
            for partition, error in partitions:
                if error is not None:
                    rows.append((partition, error))
                elif subscribed:
                    rows.append((partition, E.GROUP_SUBSCRIBED_TO_TOPIC))
                else:
                    rows.append((partition, E.NONE))
                    if self._needs_tombstone(group, (topic, partition)):
                        records.append(rec.offset_commit_tombstone(group_id, topic, partition))
            out.append((topic, rows))
        self.context.append(CoordinatorResult(records, (E.NONE, out)),
                            done, offset_delete_error)

    # ================================================================== deleted topics
    def on_partitions_deleted(self, topic: str, partitions) -> int:
        """A deleted topic's committed offsets go from every group, as Kafka's
        OffsetMetadataManager.onPartitionsDeleted: a tombstone for each committed offset and
        each offset an open transaction would commit (a commit being written is deleted after
        it, as its tombstone is written later). A topic created again with the same name starts
        with no committed offsets, so a group resets by ``auto.offset.reset`` instead of
        resuming at the old topic's position. Returns the number of tombstones written."""
        records = []
        for group_id, group in self.context.groups.items():
            if group.state is DEAD:
                continue
            for partition in partitions:
                if self._needs_tombstone(group, (topic, partition)):
                    records.append(rec.offset_commit_tombstone(group_id, topic, partition))
        if not records:
            return 0

        # a failed write is logged by the shard (Kafka logs it too and goes on)
        log.info("deleting the offsets of a deleted topic", topic=topic, offsets=len(records),
                 partition=self.context.partition)
        self.context.append(CoordinatorResult(records))
        return len(records)

    # ================================================================== retention
    def expire(self, now: int) -> int:
        """Delete offsets past ``offsets.retention.minutes`` and then Empty groups that have no
        offsets left (Kafka's cleanupGroupMetadata). Returns the number of offsets expired."""
        retention_ms = self.context.config.offsets_retention_ms
        records = []
        deleted_groups = []
        expired_total = 0
        for group in list(self.context.groups.values()):
            if group.state is DEAD:
                continue
            base = None
            skip_subscribed = False
            if group.group_type in ("consumer", "streams"):
                # Kafka's ConsumerGroup: by commit time, never a topic the group subscribes to
                base = lambda om: om.commit_timestamp  # noqa: E731
                skip_subscribed = True
            elif group.protocol_type is not None:
                if group.state is EMPTY:
                    state_ts = group.state_timestamp
                    base = (lambda om, ts=state_ts: ts) if state_ts is not None else (
                        lambda om: om.commit_timestamp)
                elif (group.protocol_type == CONSUMER_PROTOCOL_TYPE
                      and group.subscribed_topics is not None and group.state is STABLE):
                    base = lambda om: om.commit_timestamp  # noqa: E731
                    skip_subscribed = True
            else:
                base = lambda om: om.commit_timestamp  # noqa: E731 (simple groups)
            expired = []
            if base is not None:
                for tp, om in group.offsets.items():
                    if (tp in group.pending_offset_commits
                            or self.has_pending_transactional_offsets(group.group_id, tp)):
                        continue
                    if skip_subscribed and group.is_subscribed_to_topic(tp[0]):
                        continue
                    if om.expire_timestamp is not None:
                        if now >= om.expire_timestamp:
                            expired.append(tp)
                    elif now - base(om) >= retention_ms:
                        expired.append(tp)
            for topic, partition in expired:
                records.append(rec.offset_commit_tombstone(group.group_id, topic, partition))
            expired_total += len(expired)
            if expired:
                log.info("offsets expired", group=group.group_id, offsets=len(expired),
                         partition=self.context.partition)
            all_gone = len(expired) == len(group.offsets) and not group.pending_offset_commits
            if (all_gone and group.state is EMPTY and not group.members
                    and not group.pending_members):
                if group.group_type in ("consumer", "streams"):
                    manager = (self.context.streams if group.group_type == "streams"
                               else self.context.consumer)
                    records.extend(manager.group_tombstones(group))
                    group.state = DEAD
                    deleted_groups.append(group)
                elif group.persisted:
                    records.append(rec.group_metadata_tombstone(group.group_id))
                    group.transition_to(DEAD, now)
                    deleted_groups.append(group)
                elif not group.offsets:
                    del self.context.groups[group.group_id]
        if not records:
            return 0
        self.context.append(CoordinatorResult(records, append_future=partial(
            self._expired, deleted_groups, expired_total)))
        return expired_total

    def _expired(self, deleted_groups: list, expired_total: int, exc) -> None:
        """After the write of expire's tombstones: count and drop what went, or, when the write
        failed, bring back the groups marked Dead ahead of it."""
        if exc is not None:
            revive(self.context.groups, deleted_groups)
            return
        self.context.stats.offsets_expired_total += expired_total
        for group in deleted_groups:
            log.info("group deleted after its offsets expired", group=group.group_id)
        # simple groups whose last offsets expired are not persisted: drop them from memory
        for group in list(self.context.groups.values()):
            if group.protocol_type is None and not group.persisted:
                self.context.maybe_drop_transient_group(group)


def _txn_partition_check(check, topic_id, partition):
    """TxnOffsetCommit's clients know ILLEGAL_GENERATION, not STALE_MEMBER_EPOCH."""
    refused = check(topic_id, partition)
    return E.ILLEGAL_GENERATION if refused == E.STALE_MEMBER_EPOCH else refused


def _commit_written(pending: dict, written: list, exc) -> None:
    """An offset commit's write is done (stored or not): its partitions are no longer pending."""
    for tp in written:
        left = pending.get(tp, 0) - 1
        if left > 0:
            pending[tp] = left
        else:
            pending.pop(tp, None)


def revive(groups: dict, deleted: list) -> None:
    """Groups marked Dead ahead of their tombstones stay, Empty, when the write failed."""
    for group in deleted:
        if groups.get(group.group_id) is group and group.state is DEAD:
            group.state = EMPTY


def offset_commit_error(exc: BaseException, response: dict) -> dict:
    """OffsetCommit's and TxnOffsetCommit's answer to a failed write: every partition written
    gets the append error, the refused ones keep theirs."""
    error = append_error(exc, for_offsets=True)
    return {tp: error if code == E.NONE else code for tp, code in response.items()}


def offset_delete_error(exc: BaseException, response) -> tuple:
    """OffsetDelete's answer to a failed write: the group-level error, no partitions."""
    return append_error(exc), []
