"""Bursts of consumer-group joins answered together.

A first heartbeat (member epoch 0) waits until the burst of joins it came in is over: the
event-loop turns until one brings no more joins of its group (at most MAX_BATCH_TURNS). Then
each join goes through step 1 of a heartbeat (its member and the group epoch), and once all
are stored one target assignment is computed for every member and each join is reconciled
against it (steps 2 and 3, see manager.py).

Kafka computes a target at every join, and a group that starts with a burst of first
heartbeats gives its first member everything, so every other member waits a heartbeat interval
for partitions that member must revoke first. Here the burst's members get their share of the
free partitions in their first answer, the answer Kafka would give them at their next
heartbeat. Anything else for the group (another heartbeat, a commit, a describe) answers the
waiting joins first (coordinator.py).
"""
from __future__ import annotations

from typing import Callable, Protocol

import structlog

from protocol.errors import ErrorCode

from ..group import DEAD
from ..group import GroupError
from .group import ConsumerGroup, ConsumerGroupMember
from .heartbeat import error_answer, failed
from .subscriptions import topic_metadata
from .target_assignment import TargetAssignment

log = structlog.get_logger("broker.coordinator")

E = ErrorCode

#: the most event-loop turns a burst of joins waits before it is answered (JoinBursts.flush)
MAX_BATCH_TURNS = 16


class Heartbeats(Protocol):
    """What the bursts use of the consumer-group manager (manager.py), which holds them."""

    groups: dict
    clock: Callable[[], int]
    topics: object
    target: TargetAssignment

    def heartbeat(self, request, version: int, client_id: str, client_host: str,
                  postponed: list | None = None, topic_filter=None) -> tuple: ...
    def write(self, group_id: str, records: list, response, respond,
              error_response=None) -> None: ...
    def reconcile_member(self, group: ConsumerGroup, member: ConsumerGroupMember,
                         updated: ConsumerGroupMember, owned, target, target_epoch: int,
                         subscription_changed: bool, resolved, was_member: bool,
                         records: list) -> ConsumerGroupMember: ...
    def answer(self, group_id: str, member: ConsumerGroupMember,
               reconciled: ConsumerGroupMember, full: bool): ...


class JoinBursts:
    """The joins waiting for the end of their burst, per group."""

    def __init__(self, manager: Heartbeats) -> None:
        self.manager = manager
        #: ``defer(fn)`` runs ``fn`` at the next event-loop turn (the broker's loop.call_soon);
        #: None answers every heartbeat at once. Needs a ``persist`` that stores at once.
        self.defer = None
        #: group id -> the joins waiting for the end of their burst
        self.waiting: dict[str, _JoinBatch] = {}
        self._turn_scheduled = False

    def queue(self, request, version: int, client_id: str, client_host: str,
              respond, topic_filter=None) -> None:
        """A first heartbeat waits for the end of its burst; then flush answers it."""
        group_id = request.group_id or ""
        member_id = request.member_id
        batch = self.waiting.get(group_id)
        if batch is not None and member_id and member_id in batch.member_ids:
            self.flush(group_id)      # the member's earlier heartbeat comes first
            batch = None
        if batch is None:
            batch = self.waiting[group_id] = _JoinBatch()
        batch.entries.append((request, version, client_id, client_host, respond, topic_filter))
        if member_id:
            batch.member_ids.add(member_id)
        if not self._turn_scheduled:
            self._turn_scheduled = True
            self.defer(self._next_turn)

    def _next_turn(self) -> None:
        """Runs before the reads of each event-loop turn while joins wait: a batch that the
        last turn's reads did not grow is complete."""
        self._turn_scheduled = False
        for group_id, batch in list(self.waiting.items()):
            size = len(batch.entries)
            if size == batch.seen or batch.turns >= MAX_BATCH_TURNS:
                try:
                    self.flush(group_id)
                except Exception:   # noqa: BLE001 - the other groups' joins still go out
                    log.exception("answering a burst of joins failed", group=group_id)
            else:
                batch.seen = size
                batch.turns += 1
        if self.waiting and not self._turn_scheduled:
            self._turn_scheduled = True
            self.defer(self._next_turn)

    def flush(self, group_id: str) -> None:
        """Answer the joins waiting for ``group_id``, in their order: each member and the group
        epoch as its heartbeat says (step 1 of update_member), then, once all are stored, one
        target assignment for every member and each join's reconciliation against it."""
        batch = self.waiting.pop(group_id, None)
        if batch is None:
            return
        manager = self.manager
        postponed: list[Postponed] = []
        for request, version, client_id, client_host, respond, topic_filter in batch.entries:
            try:
                records, response = manager.heartbeat(request, version, client_id, client_host,
                                                      postponed, topic_filter)
            except Exception:   # noqa: BLE001 - one bad join must not strand the others
                log.exception("consumer group heartbeat failed", group=group_id)
                respond(error_answer(E.UNKNOWN_SERVER_ERROR, None))
                continue
            try:
                if response is None:
                    pending = postponed[-1]
                    pending.respond = respond
                    manager.write(group_id, records, None, pending.written)
                else:
                    manager.write(group_id, records, response, respond)
            except Exception:   # noqa: BLE001 - raised by an answer: the others still go out
                log.exception("consumer group heartbeat failed", group=group_id)
        waiting = [p for p in postponed if p.state is not _FAILED]
        if waiting:
            try:
                self._finish_postponed(group_id, waiting)
            except Exception:   # noqa: BLE001
                log.exception("consumer group heartbeat failed", group=group_id)
                for pending in waiting:
                    if pending.respond is not None:
                        pending.answer(error_answer(E.UNKNOWN_SERVER_ERROR, None))

    def _finish_postponed(self, group_id: str, waiting: list) -> None:
        """Steps 2 and 3 of the postponed joins: one target assignment, then each member's
        reconciliation, each stored before the next (as separate heartbeats would be)."""
        manager = self.manager
        group = manager.groups.get(group_id)
        for pending in waiting:
            if pending.state is not _STORED:   # a persist that did not store at once
                pending.answer(error_answer(E.COORDINATOR_NOT_AVAILABLE, None))
        waiting = [p for p in waiting if p.respond is not None]
        if not waiting:
            return
        if not isinstance(group, ConsumerGroup) or group.state is DEAD:
            for pending in waiting:
                pending.answer(error_answer(E.UNKNOWN_MEMBER_ID, None))
            return
        target_epoch = group.group_epoch
        targets = group.target
        if target_epoch > group.assignment_epoch:
            now = manager.clock()
            records: list = []
            try:
                targets = manager.target.compute(
                    group, None, None,
                    topic_metadata(manager.topics, group.subscribed_topic_names()),
                    None, target_epoch, records, now)
            except GroupError as exc:
                for pending in waiting:
                    pending.answer(error_answer(exc.code, exc.message))
                return
            result: list = []
            manager.write(group_id, records, None, result.append)
            error = E.COORDINATOR_NOT_AVAILABLE if not result else (   # not stored at once
                E.NONE if result[0] is None else E(result[0].error_code))
            if error != E.NONE:
                for pending in waiting:
                    pending.answer(failed(error))
                return
        for pending in waiting:
            current = group.members.get(pending.member_id)
            if current is None:
                pending.answer(error_answer(
                    E.UNKNOWN_MEMBER_ID, f"Member {pending.member_id} is not a member of group "
                                         f"{group_id}."))
                continue
            records = []
            reconciled = manager.reconcile_member(
                group, pending.member, current, pending.owned,
                targets.get(pending.member_id, {}), target_epoch, pending.subscription_changed,
                pending.resolved, pending.was_member, records)
            response = manager.answer(group_id, pending.member, reconciled, pending.full)
            manager.write(group_id, records, response, pending.answer)

    def abandon(self, error: ErrorCode) -> None:
        """The shard is unloaded: the waiting joins are answered with ``error``."""
        batches, self.waiting = self.waiting, {}
        for batch in batches.values():
            for entry in batch.entries:
                entry[4](failed(error))   # its respond


_WRITING, _STORED, _FAILED = "writing", "stored", "failed"


class _JoinBatch:
    """The joins of one group waiting for the end of their burst."""

    __slots__ = ("entries", "member_ids", "seen", "turns")

    def __init__(self) -> None:
        #: (request, version, client id, client host, respond, topic filter)
        self.entries: list[tuple] = []
        self.member_ids: set[str] = set()
        self.seen = 0                   # joins at the previous turn
        self.turns = 0


class Postponed:
    """A join whose target assignment and reconciliation wait for the end of its batch: what
    steps 2 and 3 of update_member need, and how to answer."""

    __slots__ = ("member", "owned", "subscription_changed", "resolved", "was_member",
                 "member_id", "full", "respond", "state")

    def __init__(self, member: ConsumerGroupMember, owned, subscription_changed: bool,
                 resolved, was_member: bool) -> None:
        self.member = member                # as it was before this heartbeat
        self.owned = owned
        self.subscription_changed = subscription_changed
        self.resolved = resolved
        self.was_member = was_member
        self.member_id = member.member_id
        self.full = True
        self.respond = None
        self.state = _WRITING

    def written(self, failure) -> None:
        """Its step-1 records were stored (None), or not: then it is answered with
        ``failure``, the heartbeat's error answer."""
        if failure is None:
            self.state = _STORED
        else:
            self.state = _FAILED
            self.answer(failure)

    def answer(self, response) -> None:
        respond, self.respond = self.respond, None
        if respond is not None:
            respond(response)
