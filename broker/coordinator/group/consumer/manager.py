"""ConsumerGroupHeartbeat and ConsumerGroupDescribe for the consumer groups of one shard (the
consumer-group half of Kafka's GroupMetadataManager).

A heartbeat is handled in three steps, as in Kafka:

1. the member is created or updated; a changed subscription, a new member or changed topic
   metadata bumps the group epoch;
2. when the group epoch is ahead of the target assignment, the assignor computes a new target
   for every member (only the members whose target changed get a record);
3. the member is reconciled towards its target (reconciliation.py).

The handler reads the group and returns the records of what changed and the response; the
shard stores the records, replays them into the group (:meth:`replay`, the same code that
rebuilds the group at load) and only then answers. Session and revocation timeouts are keyed
timers (common/timer.py) that fence a member through the same write path.
"""
from __future__ import annotations

from functools import lru_cache, partial


import structlog

from protocol import messages as m
from protocol.errors import ErrorCode

from ...common.result import CoordinatorResult, append_error
from ...common.timer import CoordinatorTimer
from .. import records as rec
from ..context import GroupContext
from ..group import DEAD, EMPTY, STABLE, GroupMetadata
from . import records as crec
from .assignors import (ASSIGNORS, HETEROGENEOUS, HOMOGENEOUS, GroupSpec,
                        MemberSubscription, TopicDescriber)
from .group import (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroup,
                    ConsumerGroupMember, GroupError, MemberState, metadata_hash,
                    new_member_id)
from .migration import ClassicMembers
from .reconciliation import FencedMemberEpoch, reconcile


log = structlog.get_logger("broker.coordinator")

E = ErrorCode


_Response = m.ConsumerGroupHeartbeatResponse
_STABLE = MemberState.STABLE


def _invalid(message: str) -> GroupError:
    return GroupError(E.INVALID_REQUEST, message)


def _empty(value: str | None) -> bool:
    return value is not None and value.strip() == ""


class ConsumerGroupManager:
    """The KIP-848 protocol for the consumer groups of one shard."""

    def __init__(self, context: GroupContext) -> None:
        self.context = context
        self.groups = context.groups
        self.config = context.config
        self.clock = context.clock
        self.stats = context.stats
        self.timer = CoordinatorTimer(context.timer)
        self.classic_members = ClassicMembers(self)
        #: group id -> the classic record of a downgrade being written (migration.py)
        self._downgrading: dict[str, bytes] = {}
        self._touched: set = set()          # groups whose records were applied, see below
        #: (topic names, regex) -> the ids of the existing topics they name, at a topics version
        self._topic_ids: dict = {}
        self._topic_ids_version = -1
        #: ``defer(fn)`` runs ``fn`` at the next event-loop turn (the broker's loop.call_soon);
        #: None answers every heartbeat at once. Needs a ``persist`` that stores at once.
        self.defer = None
        #: group id -> the joins waiting for the end of their burst (queue_join)
        self.joins: dict[str, _JoinBatch] = {}
        self._turn_scheduled = False

    @property
    def topics(self):
        return self.context.topics

    # ================================================================== ConsumerGroupHeartbeat
    def heartbeat(self, request, version: int, client_id: str, client_host: str,
                  postponed: list | None = None, topic_filter=None) -> tuple:
        """-> (records, response). Nothing is changed until the shard stores the records.
        With ``postponed`` (see flush_joins) the response may be None: its target assignment
        and reconciliation were added to ``postponed``. ``topic_filter`` (name -> bool), when
        given, limits what the member's regular expression resolves to (its authorization)."""
        try:
            self._validate(request, version)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            return self._heartbeat(request, client_id, client_host, postponed, topic_filter)
        except FencedMemberEpoch as exc:
            return [], self._error(E.FENCED_MEMBER_EPOCH, str(exc))
        except GroupError as exc:
            return [], self._error(exc.code, exc.message)

    @staticmethod
    def _error(code: ErrorCode, message: str | None):
        return m.ConsumerGroupHeartbeatResponse(error_code=int(code), error_message=message,
                                                member_epoch=0, heartbeat_interval_ms=0)

    # ------------------------------------------------------------------ bursts of joins
    def queue_join(self, request, version: int, client_id: str, client_host: str,
                   respond, topic_filter=None) -> None:
        """A first heartbeat (member epoch 0) waits until the burst of joins it came in is over:
        the event-loop turns until one brings no more joins of its group (at most
        MAX_BATCH_TURNS), then flush_joins answers them together."""
        group_id = request.group_id or ""
        member_id = request.member_id
        batch = self.joins.get(group_id)
        if batch is not None and member_id and member_id in batch.member_ids:
            self.flush_joins(group_id)      # the member's earlier heartbeat comes first
            batch = None
        if batch is None:
            batch = self.joins[group_id] = _JoinBatch()
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
        for group_id, batch in list(self.joins.items()):
            size = len(batch.entries)
            if size == batch.seen or batch.turns >= MAX_BATCH_TURNS:
                try:
                    self.flush_joins(group_id)
                except Exception:   # noqa: BLE001 - the other groups' joins still go out
                    log.exception("answering a burst of joins failed", group=group_id)
            else:
                batch.seen = size
                batch.turns += 1
        if self.joins and not self._turn_scheduled:
            self._turn_scheduled = True
            self.defer(self._next_turn)

    def flush_joins(self, group_id: str) -> None:
        """Answer the joins waiting for ``group_id``, in their order: each member and the group
        epoch as its heartbeat says (step 1 of update_member), then, once all are stored, one
        target assignment for every member and each join's reconciliation against it.

        Kafka computes a target at every join, and a group that starts with a burst of
        first heartbeats gives its first member everything, so every other member waits a
        heartbeat interval for partitions that member must revoke first. Here the burst's
        members get their share of the free partitions in their first answer, the answer
        Kafka would give them at their next heartbeat. Anything else for the group (another
        heartbeat, a commit, a describe) answers the waiting joins first."""
        batch = self.joins.pop(group_id, None)
        if batch is None:
            return
        postponed: list[_Postponed] = []
        for request, version, client_id, client_host, respond, topic_filter in batch.entries:
            try:
                records, response = self.heartbeat(request, version, client_id, client_host,
                                                   postponed, topic_filter)
            except Exception:   # noqa: BLE001 - one bad join must not strand the others
                log.exception("consumer group heartbeat failed", group=group_id)
                respond(self._error(E.UNKNOWN_SERVER_ERROR, None))
                continue
            try:
                if response is None:
                    pending = postponed[-1]
                    pending.respond = respond
                    self.write(group_id, records, None, pending.written)
                else:
                    self.write(group_id, records, response, respond)
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
                        pending.answer(self._error(E.UNKNOWN_SERVER_ERROR, None))

    def _finish_postponed(self, group_id: str, waiting: list) -> None:
        """Steps 2 and 3 of the postponed joins: one target assignment, then each member's
        reconciliation, each stored before the next (as separate heartbeats would be)."""
        group = self.groups.get(group_id)
        for pending in waiting:
            if pending.state is not _STORED:   # a persist that did not store at once
                pending.answer(self._error(E.COORDINATOR_NOT_AVAILABLE, None))
        waiting = [p for p in waiting if p.respond is not None]
        if not waiting:
            return
        if not isinstance(group, ConsumerGroup) or group.state is DEAD:
            for pending in waiting:
                pending.answer(self._error(E.UNKNOWN_MEMBER_ID, None))
            return
        target_epoch = group.group_epoch
        targets = group.target
        if target_epoch > group.assignment_epoch:
            now = self.clock()
            records: list = []
            try:
                targets = self._compute_target(
                    group, None, None, self.topic_metadata(group.subscribed_topic_names()),
                    None, target_epoch, records, now)
            except GroupError as exc:
                for pending in waiting:
                    pending.answer(self._error(exc.code, exc.message))
                return
            result: list = []
            self.write(group_id, records, None, result.append)
            error = E.COORDINATOR_NOT_AVAILABLE if not result else (   # not stored at once
                E.NONE if result[0] is None else E(result[0].error_code))
            if error != E.NONE:
                for pending in waiting:
                    pending.answer(_failed(error))
                return
        for pending in waiting:
            current = group.members.get(pending.member_id)
            if current is None:
                pending.answer(self._error(
                    E.UNKNOWN_MEMBER_ID, f"Member {pending.member_id} is not a member of group "
                                         f"{group_id}."))
                continue
            records = []
            reconciled = self._reconcile(
                group, pending.member, current, pending.owned,
                targets.get(pending.member_id, {}), target_epoch, pending.subscription_changed,
                pending.resolved, pending.was_member, records)
            response = self._answer(group_id, pending.member, reconciled, pending.full)
            self.write(group_id, records, response, pending.answer)

    def abandon_joins(self, error: ErrorCode) -> None:
        """The shard is unloaded: the waiting joins are answered with ``error``."""
        batches, self.joins = self.joins, {}
        for batch in batches.values():
            for entry in batch.entries:
                entry[4](_failed(error))   # its respond

    def write(self, group_id: str, records: list, response, respond,
              error_response=None) -> None:
        """Store and apply ``records`` of ``group_id``, then ``respond(response)``; a failed
        write answers ``error_response(exc, response)`` (a heartbeat's by default)."""
        self.context.append(CoordinatorResult(records, response,
                                              append_future=partial(self.written, group_id)),
                            respond, error_response or heartbeat_error)

    def _validate(self, request, version: int) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        epoch = request.member_epoch
        if (version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and \
                _empty(request.member_id):
            raise _invalid("MemberId can't be empty.")
        if _empty(request.group_id):
            raise _invalid("GroupId can't be empty.")
        if _empty(request.instance_id):
            raise _invalid("InstanceId can't be empty.")
        if _empty(request.rack_id):
            raise _invalid("RackId can't be empty.")
        if epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise _invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.topic_partitions is None or request.topic_partitions:
                raise _invalid("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be "
                               "non-null when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if request.instance_id is None:
                raise _invalid("InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise _invalid("MemberEpoch is invalid.")
        assignor = request.server_assignor
        if assignor is not None and assignor not in self.config.group_consumer_assignors:
            raise GroupError(E.UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {assignor} is not supported. Supported assignors: "
                             f"{', '.join(self.config.group_consumer_assignors)}.")
        regex = request.subscribed_topic_regex
        if regex:
            try:
                _compile(regex)
            except _re2().error as exc:
                reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) \
                    else str(exc)
                raise GroupError(E.INVALID_REGULAR_EXPRESSION,
                                 f"SubscribedTopicRegex `{regex}` is not a valid regular "
                                 f"expression: {reason}.") from None

    def _group_for_heartbeat(self, group_id: str, create: bool, records: list):
        """Kafka's getOrMaybeCreateConsumerGroup. A new group is not in the table yet: the
        records create it when they are replayed."""
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and group.state is not DEAD:
            return group
        if group is None or group.state is DEAD:
            if not create:
                raise GroupError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id, self.clock())
        # a classic group: an empty one gives way to the consumer group, keeping its offsets;
        # a running one is upgraded (migration.py)
        if create and isinstance(group, GroupMetadata) and not group.members \
                and not group.pending_members:
            if group.persisted:
                records.append(rec.group_metadata_tombstone(group_id))
            return ConsumerGroup(group_id, self.clock())
        if create and isinstance(group, GroupMetadata):
            return self.classic_members.upgrade(group, records)
        raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def steady_heartbeat(self, request, client_id: str, client_host: str):
        """The answer to the common heartbeat, or None when it needs the full path: a member
        stable at the group's epoch sends its epoch (and maybe what it owns) and nothing else,
        while the group's target assignment and topics are current. The full path would write
        nothing and give the same answer; this one only extends the member's session.
        The coordinator tries it before :meth:`heartbeat`."""
        epoch = request.member_epoch
        if (epoch <= 0 or request.rebalance_timeout_ms != -1
                or request.subscribed_topic_names is not None
                or request.subscribed_topic_regex is not None
                or request.server_assignor is not None or request.instance_id is not None
                or request.rack_id is not None):
            return None
        group = self.groups.get(request.group_id)
        if (group.__class__ is not ConsumerGroup or group.group_epoch != epoch
                or group.assignment_epoch != epoch or group.state is DEAD):
            return None
        member = group.members.get(request.member_id)
        if (member is None or member.member_epoch != epoch or member.state is not _STABLE
                or member.classic_metadata is not None
                or member.client_id != client_id or member.client_host != client_host):
            return None
        version = self.context.topics.version()
        if group.metadata_version != version or (group.regex_members
                                                 and group.regex_version != version):
            return None
        config = self.config
        if not self.timer.extend_to(("session", group.group_id, member.member_id),
                                    config.group_consumer_session_timeout_ms):
            self.schedule_session(group.group_id, member)
        return _Response(error_code=0, member_id=member.member_id, member_epoch=epoch,
                         heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms)

    def _heartbeat(self, request, client_id: str, client_host: str,
                   postponed: list | None = None, topic_filter=None) -> tuple:
        now = self.clock()
        records: list = []
        group_id = request.group_id
        member_id = request.member_id or ""
        epoch = request.member_epoch
        instance_id = request.instance_id
        owned = (crec.assignment_of(request.topic_partitions)
                 if request.topic_partitions is not None else None)
        create = epoch == 0
        group = self._group_for_heartbeat(group_id, create, records)
        if (len(group.members) >= self.config.group_consumer_max_size
                and (not member_id or member_id not in group.members)):
            raise GroupError(E.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of "
                             f"{self.config.group_consumer_max_size} members.")
        if not member_id:
            member_id = new_member_id(self.context.new_uuid())  # v0: the coordinator gives it
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not create:
                    raise GroupError(E.UNKNOWN_MEMBER_ID,
                                     f"Member {member_id} is not a member of group {group_id}.")
                member = ConsumerGroupMember(member_id)
                log.info("member joins the consumer group", group=group_id, member=member_id,
                         client_id=client_id, protocol="consumer")
            self._check_epoch(member, epoch, owned)
        else:
            member = self.static_member(group, member_id, epoch, instance_id, owned, create,
                                        records)

        if self._steady(group, member, request, client_id, client_host):
            # the common heartbeat of a member that has nothing to change: no records
            self.schedule_session(group_id, member)
            response = m.ConsumerGroupHeartbeatResponse(
                error_code=0, member_id=member_id, member_epoch=epoch,
                heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms)
            if (request.rebalance_timeout_ms != -1 and request.subscribed_topic_names is not None
                    and request.topic_partitions is not None):
                response.assignment = _response_assignment(member.assigned)
            return [], response
        updated = member.replace(
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(request.rebalance_timeout_ms
                                  if request.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=(request.server_assignor if request.server_assignor is not None
                             else member.server_assignor),
            subscribed_topic_names=(frozenset(request.subscribed_topic_names)
                                    if request.subscribed_topic_names is not None
                                    else member.subscribed_topic_names),
            subscribed_topic_regex=(request.subscribed_topic_regex
                                    if request.subscribed_topic_regex is not None
                                    else member.subscribed_topic_regex) or None,
            client_id=client_id, client_host=client_host, classic_metadata=None)
        full = epoch == 0 or (request.rebalance_timeout_ms != -1
                              and request.subscribed_topic_names is not None
                              and request.topic_partitions is not None)
        reconciled = self.update_member(group, member, updated, owned, records, now,
                                        postponed, topic_filter)
        if reconciled is None:
            postponed[-1].member_id = updated.member_id
            postponed[-1].full = full
            return records, None
        return records, self._answer(group_id, member, reconciled, full)

    def _answer(self, group_id: str, member: ConsumerGroupMember,
                reconciled: ConsumerGroupMember, full: bool):
        """The heartbeat's answer once ``member`` became ``reconciled``; its timeouts start."""
        self._schedule_timeouts(group_id, reconciled, member)
        response = m.ConsumerGroupHeartbeatResponse(
            error_code=0, member_id=reconciled.member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms)
        if full or reconciled.assigned != member.assigned:
            response.assignment = _response_assignment(reconciled.assigned)
        return response

    def update_member(self, group: ConsumerGroup, member: ConsumerGroupMember,
                      updated: ConsumerGroupMember, owned, records: list,
                      now: int, postponed: list | None = None,
                      topic_filter=None) -> ConsumerGroupMember | None:
        """Kafka's three steps for a member that became ``updated`` (from a heartbeat, or a
        JoinGroup of a classic member): its records, the group epoch, the target assignment and
        its reconciliation. -> the reconciled member (its records are in ``records``).

        With ``postponed`` (a batch of joins, see flush_joins), a due target assignment is left
        to the end of the batch: steps 2 and 3 go into ``postponed`` and None is returned."""
        was_member = member.member_id in group.members
        group_epoch, metadata, resolved, changed = self._update_subscription(
            group, member, updated, records, now, topic_filter)
        # 2. the target assignment
        if self._target_due(group, group_epoch, now):
            if postponed is not None:
                postponed.append(_Postponed(member, owned, changed, resolved, was_member))
                return None
            if metadata is None:
                metadata = self.topic_metadata(
                    self._subscribed_names(group, member, updated, resolved))
            targets = self._compute_target(group, member, updated, metadata, resolved,
                                           group_epoch, records, now)
            target = targets.get(updated.member_id, {})
            target_epoch = group_epoch
        else:
            if group_epoch > group.assignment_epoch:
                # within group.consumer.assignment.interval.ms of the last target: the next one
                # is computed when the interval is over
                interval = self.config.group_consumer_assignment_interval_ms
                self._schedule_assignment(group, group.assignment_timestamp + interval - now)
            target = group.target.get(updated.member_id)
            if target is None:
                # a static member's new id inherits its instance's target (replaced above)
                previous = group.static_member(updated.instance_id)
                target = group.target.get(previous.member_id, {}) if previous else {}
            target_epoch = group.assignment_epoch
        return self._reconcile(group, member, updated, owned, target, target_epoch, changed,
                               resolved, was_member, records)

    def _update_subscription(self, group: ConsumerGroup, member: ConsumerGroupMember,
                             updated: ConsumerGroupMember, records: list, now: int,
                             topic_filter=None) -> tuple:
        """Step 1: the member's record and the group epoch. -> (group epoch, the subscribed
        topics' metadata when it was looked at, regexes resolved anew, whether the
        subscription changed)."""
        group_id = group.group_id
        bump = False
        if not updated.subscription_equals(member) or member.member_id not in group.members:
            records.append(crec.member_subscription_record(group_id, updated))
            if (updated.subscribed_topic_names != member.subscribed_topic_names
                    or updated.subscribed_topic_regex != member.subscribed_topic_regex):
                bump = True
        subscription_changed = bump
        resolved = self._resolve_regexes(group, member, updated, records, now, topic_filter)
        bump = bump or resolved is not None
        group_epoch = group.group_epoch
        metadata = None
        topics_version = self.topics.version()
        if bump or group.metadata_version != topics_version:
            subscribed = self._subscribed_names(group, member, updated, resolved)
            metadata = self.topic_metadata(subscribed)
            new_hash = metadata_hash(metadata)
            if new_hash != group.metadata_hash:
                bump = True
            elif not bump:
                group.metadata_version = topics_version  # a cache: unchanged until replay
        if bump:
            group_epoch += 1
            records.append(crec.group_epoch_record(group_id, group_epoch, new_hash))
            self.stats.consumer_group_rebalances_total += 1
            log.info("group epoch bumped", group=group_id, epoch=group_epoch,
                     member=updated.member_id, partition=self.context.partition)
        return group_epoch, metadata, resolved, subscription_changed

    def _target_due(self, group: ConsumerGroup, group_epoch: int, now: int) -> bool:
        """Whether a new target assignment is computed now: the group epoch is ahead of it and
        group.consumer.assignment.interval.ms has passed since the last one."""
        interval = self.config.group_consumer_assignment_interval_ms
        return group_epoch > group.assignment_epoch and (
            not group.assignment_timestamp or not interval
            or now >= group.assignment_timestamp + interval)

    def _reconcile(self, group: ConsumerGroup, member: ConsumerGroupMember,
                   updated: ConsumerGroupMember, owned, target, target_epoch: int,
                   subscription_changed: bool, resolved, was_member: bool,
                   records: list) -> ConsumerGroupMember:
        """Step 3: ``updated`` moves towards its target; a record when its assignment or
        epochs changed from ``member``'s (always for a member new to the group)."""
        reconciled = updated
        if subscription_changed or not updated.is_reconciled_to(target_epoch):
            subscribed = frozenset(
                found[0] for found in map(self.topics.get,
                                          group.subscribed_topics_of(updated)
                                          | set((resolved or {}).get(
                                              updated.subscribed_topic_regex or "", ())))
                if found is not None)
            reconciled = reconcile(updated, target_epoch, target, owned,
                                   group.current_partition_epoch, subscribed,
                                   subscription_changed)
        if not reconciled.assignment_equals(member) or not was_member:
            records.append(crec.current_assignment_record(group.group_id, reconciled))
            if not reconciled.assignment_equals(updated):
                log.info("member reconciled", group=group.group_id, member=updated.member_id,
                         epoch=reconciled.member_epoch, state=reconciled.state.name,
                         assigned=_count(reconciled.assigned),
                         revoking=_count(reconciled.pending_revocation))
        return reconciled

    def _steady(self, group: ConsumerGroup, member: ConsumerGroupMember, request,
                client_id: str, client_host: str) -> bool:
        """Whether the heartbeat changes nothing: the member is stable at the group's epoch,
        the target and the topics are current, and every field it sent is what it had. The
        full path would then write no record and answer the same."""
        epoch = request.member_epoch
        if (epoch <= 0 or epoch != member.member_epoch or member.state is not MemberState.STABLE
                or group.members.get(member.member_id) is not member
                or group.group_epoch != epoch or group.assignment_epoch != epoch
                or member.classic_metadata is not None
                or group.metadata_version != self.topics.version()
                or member.client_id != client_id or member.client_host != client_host):
            return False
        if group.regex_members and group.regex_version != self.topics.version():
            return False
        names = request.subscribed_topic_names
        return ((names is None or frozenset(names) == member.subscribed_topic_names)
                and request.subscribed_topic_regex in (None, member.subscribed_topic_regex)
                and request.rebalance_timeout_ms in (-1, member.rebalance_timeout_ms)
                and request.server_assignor in (None, member.server_assignor)
                and request.instance_id in (None, member.instance_id)
                and request.rack_id in (None, member.rack_id))

    def _check_epoch(self, member: ConsumerGroupMember, epoch: int, owned) -> None:
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a member one epoch behind whose
        owned partitions are part of its assignment only lost the response that moved it on."""
        if epoch > member.member_epoch:
            raise FencedMemberEpoch(
                f"The consumer group member has a greater member epoch ({epoch}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must "
                f"abandon all its partitions and rejoin.")
        if epoch < member.member_epoch:
            if epoch != member.previous_member_epoch or not _is_subset(owned, member.assigned):
                raise FencedMemberEpoch(
                    f"The consumer group member has a smaller member epoch ({epoch}) than the "
                    f"one known by the group coordinator ({member.member_epoch}). The member "
                    f"must abandon all its partitions and rejoin.")

    def static_member(self, group: ConsumerGroup, member_id: str, epoch: int,
                      instance_id: str, owned, create: bool, records: list,
                      classic: bool = False):
        """Kafka's getOrMaybeSubscribeStaticConsumerGroupMember (``classic``: for a JoinGroup,
        which neither waits for the old instance to leave nor checks epochs)."""
        existing = group.static_member(instance_id)
        if create:
            if existing is None:
                member = group.members.get(member_id) or ConsumerGroupMember(member_id)
                log.info("static member joins the consumer group", group=group.group_id,
                         member=member_id, group_instance_id=instance_id)
                return member
            if not classic and existing.classic_metadata is None and \
                    existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(
                    E.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance_id} cannot join the "
                    f"group because the instance id is owned by {existing.member_id} member.")
            # the new member id takes the old member's place, its assignment and its target
            member = existing.replace(member_id=member_id, member_epoch=0,
                                      previous_member_epoch=0)
            gid = group.group_id
            records.append(crec.current_assignment_tombstone(gid, existing.member_id))
            records.append(crec.target_assignment_tombstone(gid, existing.member_id))
            records.append(crec.member_subscription_tombstone(gid, existing.member_id))
            records.append(crec.member_subscription_record(gid, member))
            records.append(crec.target_assignment_record(
                gid, member_id, group.target.get(existing.member_id, {})))
            records.append(crec.current_assignment_record(gid, member))
            self.cancel_timers(gid, existing.member_id)
            log.info("static member rejoins the consumer group", group=gid,
                     group_instance_id=instance_id, member=member_id,
                     replaced=existing.member_id)
            return member
        if existing is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            log.info("static member fenced", group=group.group_id, member=member_id,
                     group_instance_id=instance_id, current_member=existing.member_id)
            raise GroupError(E.FENCED_INSTANCE_ID,
                             f"Static member {member_id} with instance id {instance_id} was "
                             f"fenced by member {existing.member_id}.")
        if not classic:
            self._check_epoch(existing, epoch, owned)
        return existing

    # ------------------------------------------------------------------ subscriptions, metadata
    def _resolve_regexes(self, group: ConsumerGroup, member, updated, records: list,
                         now: int, topic_filter=None) -> dict | None:
        """Resolve the regexes the group uses against the topics as they are now (those
        ``topic_filter`` lets the heartbeating member see, as Kafka's TopicRegexResolver keeps
        the topics its principal may describe); a record for each one whose topics changed.
        -> {regex: topics} of what changed, or None."""
        regexes = set(group.regex_members)
        if member.subscribed_topic_regex and group.regex_members.get(
                member.subscribed_topic_regex, 0) <= 1 and \
                member.subscribed_topic_regex != updated.subscribed_topic_regex:
            regexes.discard(member.subscribed_topic_regex)
            if member.member_id in group.members:
                records.append(crec.regex_tombstone(group.group_id,
                                                    member.subscribed_topic_regex))
        if updated.subscribed_topic_regex:
            regexes.add(updated.subscribed_topic_regex)
        if not regexes:
            return None
        version = self.topics.version()
        names = None
        changed = {}
        for regex in sorted(regexes):
            known = group.resolved_regexes.get(regex)
            if known is not None and group.regex_version == version:
                continue
            if names is None:
                names = [n for n in self.topics.names()
                         if topic_filter is None or topic_filter(n)]
            pattern = _compile(regex)
            topics = frozenset(n for n in names if pattern.fullmatch(n))
            if topics != known:
                changed[regex] = topics
                records.append(crec.regex_record(group.group_id, regex, topics, version, now))
        if not changed and names is not None:
            group.regex_version = version  # a cache: every regex still matches the same topics
        return changed or None

    def _subscribed_names(self, group: ConsumerGroup, member, updated, resolved) -> set:
        """Every topic the group subscribes to once ``member`` became ``updated``."""
        counts = dict(group.subscribed_names)
        if member.member_id in group.members:
            for name in member.subscribed_topic_names:
                counts[name] -= 1
        for name in updated.subscribed_topic_names:
            counts[name] = counts.get(name, 0) + 1
        names = {name for name, n in counts.items() if n > 0}
        regex_counts = dict(group.regex_members)
        if member.member_id in group.members and member.subscribed_topic_regex:
            regex_counts[member.subscribed_topic_regex] -= 1
        if updated.subscribed_topic_regex:
            regex_counts[updated.subscribed_topic_regex] = \
                regex_counts.get(updated.subscribed_topic_regex, 0) + 1
        for regex, n in regex_counts.items():
            if n > 0:
                topics = (resolved or {}).get(regex)
                names.update(topics if topics is not None
                             else group.resolved_regexes.get(regex, ()))
        return names

    def topic_metadata(self, names) -> dict:
        """{topic_id: (name, partitions)} of the subscribed topics that exist."""
        out = {}
        for name in names:
            found = self.topics.get(name)
            if found is not None:
                topic_id, partitions = found
                out[topic_id] = (name, partitions)
        return out

    def _member_topic_ids(self, names: frozenset, matched, metadata_by_name: dict) -> frozenset:
        """The ids of the existing topics a member names or its regex matched."""
        key = (names, frozenset(matched or ()))
        ids = self._topic_ids.get(key)
        if ids is None:
            ids = frozenset(metadata_by_name[n] for n in names.union(key[1])
                            if n in metadata_by_name)
            if len(self._topic_ids) < 4096:
                self._topic_ids[key] = ids
        return ids

    # ------------------------------------------------------------------ target assignment
    def _compute_target(self, group: ConsumerGroup, member, updated, metadata: dict, resolved,
                        group_epoch: int, records: list, now: int) -> dict:
        """Kafka's TargetAssignmentBuilder: run the assignor over every member (``member``
        replaced by ``updated``, or removed when ``updated`` is None) and write a record for
        each member whose target changed, then the new assignment epoch."""
        by_name = {name: topic_id for topic_id, (name, _n) in metadata.items()}
        version = self.topics.version()
        if version != self._topic_ids_version:   # the cache below holds for one version
            self._topic_ids.clear()
            self._topic_ids_version = version
        skip = member.member_id if member is not None else None
        replaces = updated.instance_id if updated is not None else None
        targets = group.target
        cache = group.assignment_specs
        fresh = {}
        specs = {}
        assignors: dict[str, int] = {}
        # Kafka's subscription type: homogeneous when every member names the same topics (or
        # all the same regex and no names), found while walking the members
        first = None
        homogeneous = True
        for mid, mm in _assigned_members(group, skip, updated, replaces, assignors):
            names = mm.subscribed_topic_names
            regex = mm.subscribed_topic_regex
            if first is None:
                first = (names, regex)
            elif homogeneous and (regex != first[1] or (names is not first[0]
                                                        and names != first[0])):
                homogeneous = False
            target = targets.get(mid)
            if target is None and updated is not None and mid == updated.member_id \
                    and skip != mid:
                target = targets.get(member.member_id)
            matched = None
            if regex:
                matched = (resolved or {}).get(regex)
                if matched is None:
                    matched = group.resolved_regexes.get(regex, ())
            # a member's spec is reused while the member, its target and its topics are
            cached = cache.get(mid)
            if cached is not None and cached[0] is mm and cached[1] is target \
                    and cached[2] is matched and cached[3] == version:
                spec = cached[4]
            else:
                spec = MemberSubscription(
                    subscribed_topic_ids=self._member_topic_ids(names, matched, by_name),
                    rack_id=mm.rack_id, instance_id=mm.instance_id,
                    assigned_partitions=target or {})
            fresh[mid] = (mm, target, matched, version, spec)
            specs[mid] = spec
        group.assignment_specs = fresh
        if updated is not None and updated.server_assignor:
            assignors[updated.server_assignor] = assignors.get(updated.server_assignor, 0) + 1
        assignor_name = max(assignors, key=assignors.__getitem__) if assignors \
            else self.config.group_consumer_assignors[0]
        if first is not None and first[1] and first[0]:
            homogeneous = False       # a regex and names: Kafka calls that heterogeneous
        assignor = ASSIGNORS[assignor_name]()
        describer = TopicDescriber(metadata)
        try:
            result = assignor.assign(
                GroupSpec(specs, HOMOGENEOUS if homogeneous else HETEROGENEOUS), describer)
        except Exception as exc:  # an assignor bug must not take the group down
            log.error("assignor failed", group=group.group_id, assignor=assignor_name,
                      error=str(exc))
            raise GroupError(E.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target "
                             f"assignment for epoch {group_epoch}: {exc}.") from exc
        for mid in specs:
            new = result.get(mid)
            old = targets.get(mid)
            if new is not None and new is old:
                continue                    # the assignor handed the member's target back
            new = {t: frozenset(p) for t, p in (new or {}).items() if p}
            if new != (old or {}):
                records.append(crec.target_assignment_record(group.group_id, mid, new))
            result[mid] = new
        records.append(crec.target_assignment_epoch_record(group.group_id, group_epoch, now))
        log.info("target assignment computed", group=group.group_id, epoch=group_epoch,
                 assignor=assignor_name, members=len(specs), topics=len(metadata))
        return result

    def _schedule_assignment(self, group: ConsumerGroup, delay_ms: int) -> None:
        key = ("assign", group.group_id)
        if not self.timer.is_scheduled(key):
            gid = group.group_id
            self.timer.schedule(key, max(delay_ms, 0), lambda: self._on_assignment_due(gid))

    def _on_assignment_due(self, group_id: str) -> None:
        """The deferred target assignment of a group whose epoch moved on within the interval:
        Kafka computes it at the next heartbeat after the interval; here the timer does, so
        the members find it at their next heartbeats."""
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or self.context.loading \
                or group.group_epoch <= group.assignment_epoch or not group.members:
            return
        now = self.clock()
        records: list = []
        metadata = self.topic_metadata(group.subscribed_topic_names())
        try:
            self._compute_target(group, None, None, metadata, None, group.group_epoch,
                                 records, now)
        except GroupError:
            return

        self.context.append(CoordinatorResult(records))

    # ------------------------------------------------------------------ leaving and fencing
    def _leave(self, request) -> tuple:
        group_id = request.group_id
        member_id = request.member_id
        instance_id = request.instance_id
        epoch = request.member_epoch
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or group.state is DEAD:
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found."
                             if group is None else f"Group {group_id} is not a consumer group.")
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise GroupError(E.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group_id}.")
            log.info("member left the consumer group", group=group_id, member=member_id)
            self.stats.history.member_left(group_id, member_id, "left")
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise GroupError(E.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
            if member.member_id != member_id:
                raise GroupError(E.FENCED_INSTANCE_ID,
                                 f"Static member {member_id} with instance id {instance_id} "
                                 f"was fenced by member {member.member_id}.")
            if epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # a static member leaves for a while: it keeps its assignment until its session
                # times out, and a new member id may take its place meanwhile
                log.info("static member left the consumer group temporarily", group=group_id,
                         member=member_id, group_instance_id=instance_id)
                leaving = member.replace(
                    member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={},
                    assignment_epochs={k: e for k, e in member.assignment_epochs.items()
                                       if k[1] in member.assigned.get(k[0], ())})
                self.timer.cancel(("revocation", group_id, member_id))
                return ([crec.current_assignment_record(group_id, leaving)],
                        m.ConsumerGroupHeartbeatResponse(
                            member_id=member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH))
            log.info("static member left the consumer group", group=group_id, member=member_id,
                     group_instance_id=instance_id)
            self.stats.history.member_left(group_id, member_id, "left")
        records = self.fence_member(group, member)
        return records, m.ConsumerGroupHeartbeatResponse(member_id=member_id,
                                                         member_epoch=epoch)

    def fence_member(self, group: ConsumerGroup, *members: ConsumerGroupMember) -> list:
        """The records that remove members and bump the group epoch once (Kafka's
        consumerGroupFenceMembers); their partitions go to others at their next heartbeats.
        When only classic members would remain, the group becomes a classic group instead."""
        gid = group.group_id
        leaving = {mm.member_id for mm in members}
        downgrade = self.classic_members.downgrade(group, leaving)
        if downgrade is not None:
            self._downgrading[gid] = downgrade[-1][1]
            return downgrade
        records = []
        for member in members:
            records += [crec.current_assignment_tombstone(gid, member.member_id),
                        crec.target_assignment_tombstone(gid, member.member_id),
                        crec.member_subscription_tombstone(gid, member.member_id)]
        regexes = {}
        for mid, mm in group.members.items():
            if mid not in leaving and mm.subscribed_topic_regex:
                regexes[mm.subscribed_topic_regex] = True
        for regex in {mm.subscribed_topic_regex for mm in members} - set(regexes) - {None}:
            records.append(crec.regex_tombstone(gid, regex))
        names = set()
        for mid, mm in group.members.items():
            if mid not in leaving:
                names |= group.subscribed_topics_of(mm)
        new_hash = metadata_hash(self.topic_metadata(names))
        records.append(crec.group_epoch_record(gid, group.group_epoch + 1, new_hash))
        self.stats.consumer_group_rebalances_total += 1
        for member_id in leaving:
            self.cancel_timers(gid, member_id)
        return records

    # ------------------------------------------------------------------ timeouts
    def _schedule_timeouts(self, group_id: str, member: ConsumerGroupMember,
                           previous: ConsumerGroupMember) -> None:
        member_id = member.member_id
        self.schedule_session(group_id, member)
        if member.classic_metadata:
            return  # a classic member has join and sync timeouts instead (migration.py)
        key = ("revocation", group_id, member_id)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if previous.state is not MemberState.UNREVOKED_PARTITIONS or \
                    previous.member_epoch != member.member_epoch or \
                    not self.timer.is_scheduled(key):
                epoch = member.member_epoch
                self.timer.schedule(key, max(member.rebalance_timeout_ms, 0),
                                    lambda: self._on_revocation_timeout(group_id, member_id,
                                                                        epoch))
        else:
            self.timer.cancel(key)

    def schedule_session(self, group_id: str, member: ConsumerGroupMember) -> None:
        """The member's session timeout starts again (a classic member's own timeout)."""
        member_id = member.member_id
        classic = member.classic_metadata
        self.timer.extend(("session", group_id, member_id),
                          classic[0] if classic else
                          self.config.group_consumer_session_timeout_ms,
                          lambda: self.expire_member(group_id, member_id))

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("session", "revocation", "join", "sync"):
            self.timer.cancel((kind, group_id, member_id))

    def expire_member(self, group_id: str, member_id: str) -> None:
        """Fence a member as its session timeout does (the timer's path, also for injected
        faults)."""
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or self.context.loading:
            return
        member = group.members.get(member_id)
        if member is None:
            return
        log.info("member fenced: its session expired", group=group_id, member=member_id,
                 session_timeout_ms=(member.classic_metadata[0] if member.classic_metadata
                                     else self.config.group_consumer_session_timeout_ms))
        self.stats.expired_members_total += 1
        self.stats.history.member_left(group_id, member_id, "expired")
        self.write_fence(group, member)

    def _on_revocation_timeout(self, group_id: str, member_id: str, epoch: int) -> None:
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or self.context.loading:
            return
        member = group.members.get(member_id)
        if member is None or member.state is not MemberState.UNREVOKED_PARTITIONS \
                or member.member_epoch != epoch:
            return
        log.info("member fenced: it did not revoke its partitions within its rebalance timeout",
                 group=group_id, member=member_id, rebalance_timeout_ms=member.rebalance_timeout_ms)
        self.stats.expired_members_total += 1
        self.stats.history.member_left(group_id, member_id, "did not revoke in time")
        self.write_fence(group, member)

    def written(self, group_id: str, exc) -> None:
        """After a write of this group's records: a failed one forgets a downgrade they
        carried."""
        if exc is not None:
            self._downgrading.pop(group_id, None)

    def write_fence(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        self.write(group.group_id, self.fence_member(group, member), None, None)

    # ------------------------------------------------------------------ replay
    def replay(self, key: crec.ConsumerKey, value: bytes | None, replay: bool) -> None:
        """Apply one consumer group record, live (once stored) or at load."""
        kind = key.type
        if kind == crec.PARTITION_METADATA:
            return  # written by Kafka before 4.1; the metadata hash replaced it
        group_id = key.group
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and group.state is DEAD:
            # being deleted (DeleteGroups): its epoch's tombstone, the last record, drops it
            if kind == crec.GROUP_METADATA and value is None:
                self._remove_group(group, replay)
            return
        if not isinstance(group, ConsumerGroup):
            if value is None:
                return  # a tombstone for a group that is not (or no longer) a consumer group
            fresh = ConsumerGroup(group_id, self.clock())
            if group is not None:   # an empty classic group gives way; its offsets stay
                fresh.offsets = group.offsets
                fresh.pending_offset_commits = group.pending_offset_commits
            group = self.groups[group_id] = fresh
        group.persisted = True
        v = None if value is None else crec.decode_value(kind, value)
        if kind == crec.GROUP_METADATA:
            if v is None:
                self._remove_group(group, replay)
                return
            if not replay and v.epoch > group.group_epoch:
                self.stats.history.started(group_id, self.clock(), f"group epoch bumped to "
                                           f"{v.epoch}", None, group.group_epoch, "assign")
            group.group_epoch = v.epoch
            group.metadata_hash = v.metadata_hash
            group.metadata_version = None
        elif kind == crec.MEMBER_METADATA:
            group.metadata_version = None
            if v is None:
                group.remove_member(key.sub)
            else:
                current = group.members.get(key.sub)
                if current is None:
                    current = ConsumerGroupMember(key.sub)
                    if not replay:
                        self.stats.history.member_joined(group_id, key.sub, v.client_id,
                                                         v.instance_id)
                classic = None
                if v.classic_member_metadata is not None:
                    cm = v.classic_member_metadata
                    classic = (cm.session_timeout_ms,
                               tuple((p.name, p.metadata) for p in cm.supported_protocols))
                group.update_member(current.replace(
                    instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
                    client_host=v.client_host,
                    subscribed_topic_names=frozenset(v.subscribed_topic_names),
                    subscribed_topic_regex=v.subscribed_topic_regex or None,
                    rebalance_timeout_ms=v.rebalance_timeout_ms,
                    server_assignor=v.server_assignor, classic_metadata=classic))
        elif kind == crec.TARGET_ASSIGNMENT_MEMBER:
            if v is None:
                group.target.pop(key.sub, None)
            else:
                group.target[key.sub] = crec.assignment_of(v.topic_partitions)
        elif kind == crec.TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = v.assignment_epoch if v is not None else 0
            group.assignment_timestamp = v.assignment_timestamp if v is not None else 0
            if v is not None and not replay:
                self.stats.history.phase(group_id, self.clock(), "reconcile",
                                         v.assignment_epoch)
        elif kind == crec.CURRENT_MEMBER_ASSIGNMENT:
            current = group.members.get(key.sub)
            if v is None:
                if current is not None:  # its partitions are free from now on
                    group.update_member(current.replace(
                        member_epoch=LEAVE_GROUP_MEMBER_EPOCH, assigned={},
                        pending_revocation={}, assignment_epochs={}))
            else:
                epochs = crec.assignment_epochs_of(v.assigned_partitions, v.member_epoch)
                epochs.update(crec.assignment_epochs_of(v.partitions_pending_revocation,
                                                        v.member_epoch))
                group.update_member((current or ConsumerGroupMember(key.sub)).replace(
                    member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                    state=crec.member_state(v.state),
                    assigned=crec.assignment_of(v.assigned_partitions),
                    pending_revocation=crec.assignment_of(v.partitions_pending_revocation),
                    assignment_epochs=epochs))
        elif kind == crec.REGULAR_EXPRESSION:
            if v is None:
                group.resolved_regexes.pop(key.sub, None)
            else:
                group.resolved_regexes[key.sub] = frozenset(v.topics)
                group.regex_version = v.version
        self._touched.add(group)

    def settle_states(self) -> None:
        """Once a batch of records is applied: the state of each group they touched (Kafka's
        maybeUpdateGroupState), computed once per batch rather than once per record."""
        now = self.clock()
        history = self.stats.history
        for group in self._touched:
            group.update_state(now)
            if group.state in (STABLE, EMPTY) and history.in_progress(group.group_id):
                history.ended(group.group_id, now, "stable" if group.state is STABLE
                              else "empty", len(group.members), group.group_epoch)
        self._touched.clear()

    def _remove_group(self, group: ConsumerGroup, replay: bool) -> None:
        """The group epoch's tombstone: the group is deleted (its offsets were tombstoned
        before) or converted into a classic group."""
        if self.groups.get(group.group_id) is not group:
            return
        if group.offsets:  # converted to a classic group: the offsets stay
            fresh = GroupMetadata(group.group_id, self.clock())
            fresh.offsets = group.offsets
            self.groups[group.group_id] = fresh
        else:
            del self.groups[group.group_id]
        for member_id in list(group.members):
            self.cancel_timers(group.group_id, member_id)
        classic_value = self._downgrading.pop(group.group_id, None)
        if classic_value is not None and not replay:
            self.classic_members.finish_downgrade(group.group_id, classic_value)

    def group_tombstones(self, group: ConsumerGroup) -> list:
        """The records that delete an empty group (Kafka's createGroupTombstoneRecords)."""
        gid = group.group_id
        records = []
        for member_id in group.members:
            records.append(crec.current_assignment_tombstone(gid, member_id))
        for member_id in group.target:
            records.append(crec.target_assignment_tombstone(gid, member_id))
        records.append(crec.target_assignment_epoch_tombstone(gid))
        for member_id in group.members:
            records.append(crec.member_subscription_tombstone(gid, member_id))
        for regex in group.resolved_regexes:
            records.append(crec.regex_tombstone(gid, regex))
        records.append(crec.group_epoch_tombstone(gid))
        return records

    def convert_to_classic(self, group: ConsumerGroup) -> None:
        """An empty consumer group gives way to a classic group that a JoinGroup creates (its
        offsets stay), as Kafka's maybeDeleteEmptyConsumerGroup does."""
        log.info("empty consumer group converted to a classic group", group=group.group_id)
        self.context.append(CoordinatorResult(self.group_tombstones(group)))

    # ------------------------------------------------------------------ loading
    def on_loaded(self, group: ConsumerGroup) -> None:
        """After replay: every member gets a session to heartbeat before it is fenced, and a
        member still revoking gets its rebalance timeout again."""
        for member in group.members.values():
            self._schedule_timeouts(group.group_id, member, ConsumerGroupMember(""))

    def unload_group(self, group: ConsumerGroup) -> None:
        for member_id in list(group.members):
            self.cancel_timers(group.group_id, member_id)

    # ================================================================== ConsumerGroupDescribe
    def describe(self, group_id: str, include_authorized_operations: bool):
        cls = m.ConsumerGroupDescribeResponse.DescribedGroup
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            return cls(error_code=E.GROUP_ID_NOT_FOUND,
                       error_message=f"Group {group_id} not found.", group_id=group_id)
        if not isinstance(group, ConsumerGroup):
            return cls(error_code=E.GROUP_ID_NOT_FOUND,
                       error_message=f"Group {group_id} is not a consumer group.",
                       group_id=group_id)
        member_cls = m.ConsumerGroupDescribeResponse.Member
        members = []
        for member in group.members.values():
            members.append(member_cls(
                member_id=member.member_id, instance_id=member.instance_id,
                rack_id=member.rack_id, member_epoch=member.member_epoch,
                client_id=member.client_id, client_host=member.client_host,
                subscribed_topic_names=sorted(member.subscribed_topic_names),
                subscribed_topic_regex=member.subscribed_topic_regex,
                assignment=self._describe_assignment(member.assigned),
                target_assignment=self._describe_assignment(group.target.get(member.member_id,
                                                                              {})),
                member_type=1 if member.classic_metadata is None else 0))
        return cls(error_code=0, group_id=group_id, group_state=group.state.value,
                   group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                   assignor_name=group.preferred_assignor(self.config.group_consumer_assignors[0]),
                   members=members)

    def _describe_assignment(self, assignment):
        cls = m.ConsumerGroupDescribeResponse.Assignment
        tp_cls = m.ConsumerGroupDescribeResponse.TopicPartitions
        out = []
        for topic_id, partitions in sorted(assignment.items(), key=lambda kv: kv[0].bytes):
            found = self.topics.by_id(topic_id)
            out.append(tp_cls(topic_id=topic_id, topic_name=found[0] if found else "",
                              partitions=sorted(partitions)))
        return cls(topic_partitions=out)


def _assigned_members(group: ConsumerGroup, skip, updated, replaces, assignors: dict):
    """The members the assignor sees, in the group's order: ``updated`` in the place of the
    member ``skip`` (or last when new), without a static member it replaces (same instance id
    ``replaces``). Counts each member's server assignor into ``assignors``, as Kafka's
    computePreferredServerAssignor does: every member but ``skip`` (``updated`` is the
    caller's to add)."""
    seen_updated = False
    for mid, mm in group.members.items():
        if mid == skip:
            if updated is not None and updated.member_id == mid:
                seen_updated = True
                yield mid, updated          # keeps its place in the group's order
            continue
        if mm.server_assignor:
            assignors[mm.server_assignor] = assignors.get(mm.server_assignor, 0) + 1
        if replaces is not None and mm.instance_id == replaces:
            continue                        # a static member replaced by ``updated``
        if updated is not None and mid == updated.member_id:
            seen_updated = True
        yield mid, mm
    if updated is not None and not seen_updated:
        yield updated.member_id, updated


@lru_cache(maxsize=1)
def _re2():
    """The RE2 binding, loaded by the first regex subscription (not at every start)."""
    import re2
    return re2


@lru_cache(maxsize=1)
def _re2_options():
    options = _re2().Options()
    options.log_errors = False   # a bad regex is answered, not logged to stderr
    return options


@lru_cache(maxsize=1024)
def _compile(regex: str):
    """The regex as Kafka's RE2J reads it: RE2 syntax, matched against the whole topic name."""
    return _re2().compile(regex, _re2_options())


#: the most event-loop turns a burst of joins waits before it is answered (flush_joins)
MAX_BATCH_TURNS = 16

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


class _Postponed:
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


def _failed(error: ErrorCode):
    """The answer to a heartbeat whose records could not be stored."""
    return m.ConsumerGroupHeartbeatResponse(error_code=int(error), member_epoch=0)


def heartbeat_error(exc: BaseException, response):
    """ConsumerGroupHeartbeat's answer to a failed write."""
    return _failed(append_error(exc))


def _is_subset(owned, assigned) -> bool:
    if owned is None:
        return False
    for topic_id, partitions in owned.items():
        held = assigned.get(topic_id)
        if held is None or not partitions <= held:
            return False
    return True


def _count(assignment) -> int:
    return sum(len(p) for p in assignment.values())


def _response_assignment(assignment):
    cls = m.ConsumerGroupHeartbeatResponse.Assignment
    tp_cls = m.ConsumerGroupHeartbeatResponse.TopicPartitions
    return cls(topic_partitions=[
        tp_cls(topic_id=topic_id, partitions=sorted(partitions))
        for topic_id, partitions in sorted(assignment.items(), key=lambda kv: kv[0].bytes)])
