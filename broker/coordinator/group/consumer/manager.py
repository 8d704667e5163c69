"""ConsumerGroupHeartbeat for the consumer groups of one shard (the consumer-group half of
Kafka's GroupMetadataManager), and what the shard asks of its consumer groups.

A heartbeat is handled in three steps, as in Kafka:

1. the member is created or updated; a changed subscription, a new member or changed topic
   metadata bumps the group epoch (subscriptions.py resolves regexes and reads topics);
2. when the group epoch is ahead of the target assignment, the assignor computes a new target
   for every member (target_assignment.py; only the members whose target changed get a
   record);
3. the member is reconciled towards its target (reconciliation.py).

The handler reads the group and returns the records of what changed and the response; the
shard stores the records, replays them into the group (replay.py, the same code that rebuilds
the group at load) and only then answers. The request's checks and answers are heartbeat.py's;
a burst of first heartbeats waits to be answered together (join_bursts.py). Session and
revocation timeouts are keyed timers (timeouts.py) that fence a member through the same write
path; ConsumerGroupDescribe is describe.py's.
"""
from __future__ import annotations

from functools import partial

import structlog

from protocol import messages as m
from protocol.errors import ErrorCode

from ...common.result import CoordinatorResult
from ...common.timer import CoordinatorTimer
from .. import records as rec
from ..context import GroupContext
from ..group import DEAD, GroupError, GroupMetadata
from . import records as crec, settings
from .describe import describe_group
from .group import (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroup,
                    ConsumerGroupMember, MemberState, metadata_hash, new_member_id)
from .heartbeat import (check_epoch, error_answer, heartbeat_error, is_steady,
                        response_assignment, validate)
from .join_bursts import JoinBursts, Postponed
from .migration import ClassicMembers
from .reconciliation import FencedMemberEpoch, reconcile
from .replay import Replay
from .subscriptions import resolve_regexes, subscribed_names, topic_metadata
from .target_assignment import TargetAssignment
from .timeouts import MemberTimeouts


log = structlog.get_logger("broker.coordinator")

E = ErrorCode


_Response = m.ConsumerGroupHeartbeatResponse
_STABLE = MemberState.STABLE


class ConsumerGroupManager:
    """The KIP-848 protocol for the consumer groups of one shard."""

    def __init__(self, context: GroupContext) -> None:
        self.context = context
        self.groups = context.groups
        self.config = context.config
        self.clock = context.clock
        self.stats = context.stats
        self.timer = CoordinatorTimer(context.timer)
        self.timeouts = MemberTimeouts(context, self.timer, self.write_fence)
        self.target = TargetAssignment(context, self.timer)
        self.joins = JoinBursts(self)
        self.replayer = Replay(context, self._group_removed)
        self.classic_members = ClassicMembers(self)
        #: group id -> the classic record of a downgrade being written (migration.py)
        self._downgrading: dict[str, bytes] = {}

    @property
    def topics(self):
        return self.context.topics

    def topic_metadata(self, names) -> dict:
        return topic_metadata(self.topics, names)

    # ================================================================== ConsumerGroupHeartbeat
    def heartbeat(self, request, version: int, client_id: str, client_host: str,
                  postponed: list | None = None, topic_filter=None) -> tuple:
        """-> (records, response). Nothing is changed until the shard stores the records.
        With ``postponed`` (a burst of joins, join_bursts.py) the response may be None: its
        target assignment and reconciliation were added to ``postponed``. ``topic_filter``
        (name -> bool), when given, limits what the member's regular expression resolves to
        (its authorization)."""
        try:
            validate(request, version, self.config.group_consumer_assignors)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            return self._heartbeat(request, client_id, client_host, postponed, topic_filter)
        except FencedMemberEpoch as exc:
            return [], error_answer(E.FENCED_MEMBER_EPOCH, str(exc))
        except GroupError as exc:
            return [], error_answer(exc.code, exc.message)

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
        self.timeouts.extend_session(group.group_id, member)
        return _Response(error_code=0, member_id=member.member_id, member_epoch=epoch,
                         heartbeat_interval_ms=settings.heartbeat_interval_ms(self.context,
                                                                              group.group_id))

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
            check_epoch(member, epoch, owned)
        else:
            member = self.static_member(group, member_id, epoch, instance_id, owned, create,
                                        records)

        if is_steady(group, member, request, client_id, client_host, self.topics):
            # the common heartbeat of a member that has nothing to change: no records
            self.timeouts.schedule_session(group_id, member)
            response = m.ConsumerGroupHeartbeatResponse(
                error_code=0, member_id=member_id, member_epoch=epoch,
                heartbeat_interval_ms=settings.heartbeat_interval_ms(self.context, group_id))
            if (request.rebalance_timeout_ms != -1 and request.subscribed_topic_names is not None
                    and request.topic_partitions is not None):
                response.assignment = response_assignment(member.assigned)
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
        return records, self.answer(group_id, member, reconciled, full)

    def answer(self, group_id: str, member: ConsumerGroupMember,
               reconciled: ConsumerGroupMember, full: bool):
        """The heartbeat's answer once ``member`` became ``reconciled``; its timeouts start."""
        self.timeouts.schedule(group_id, reconciled, member)
        response = m.ConsumerGroupHeartbeatResponse(
            error_code=0, member_id=reconciled.member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=settings.heartbeat_interval_ms(self.context, group_id))
        if full or reconciled.assigned != member.assigned:
            response.assignment = response_assignment(reconciled.assigned)
        return response

    def update_member(self, group: ConsumerGroup, member: ConsumerGroupMember,
                      updated: ConsumerGroupMember, owned, records: list,
                      now: int, postponed: list | None = None,
                      topic_filter=None) -> ConsumerGroupMember | None:
        """Kafka's three steps for a member that became ``updated`` (from a heartbeat, or a
        JoinGroup of a classic member): its records, the group epoch, the target assignment and
        its reconciliation. -> the reconciled member (its records are in ``records``).

        With ``postponed`` (a burst of joins, join_bursts.py), a due target assignment is left
        to the end of the batch: steps 2 and 3 go into ``postponed`` and None is returned."""
        was_member = member.member_id in group.members
        group_epoch, metadata, resolved, changed = self._update_subscription(
            group, member, updated, records, now, topic_filter)
        # 2. the target assignment
        if self.target.due(group, group_epoch, now):
            if postponed is not None:
                postponed.append(Postponed(member, owned, changed, resolved, was_member))
                return None
            if metadata is None:
                metadata = self.topic_metadata(
                    subscribed_names(group, member, updated, resolved))
            targets = self.target.compute(group, member, updated, metadata, resolved,
                                         group_epoch, records, now)
            target = targets.get(updated.member_id, {})
            target_epoch = group_epoch
        else:
            if group_epoch > group.assignment_epoch:
                # within group.consumer.assignment.interval.ms of the last target: the next one
                # is computed when the interval is over
                interval = settings.assignment_interval_ms(self.context, group.group_id)
                self.target.schedule(group, group.assignment_timestamp + interval - now)
            target = group.target.get(updated.member_id)
            if target is None:
                # a static member's new id inherits its instance's target (replaced above)
                previous = group.static_member(updated.instance_id)
                target = group.target.get(previous.member_id, {}) if previous else {}
            target_epoch = group.assignment_epoch
        return self.reconcile_member(group, member, updated, owned, target, target_epoch,
                                     changed, resolved, was_member, records)

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
        resolved = resolve_regexes(self.topics, group, member, updated, records, now,
                                   topic_filter)
        bump = bump or resolved is not None
        group_epoch = group.group_epoch
        metadata = None
        topics_version = self.topics.version()
        if bump or group.metadata_version != topics_version:
            subscribed = subscribed_names(group, member, updated, resolved)
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

    def reconcile_member(self, group: ConsumerGroup, member: ConsumerGroupMember,
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
            self.timeouts.cancel(gid, existing.member_id)
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
            check_epoch(existing, epoch, owned)
        return existing

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
                self.timeouts.cancel_revocation(group_id, member_id)
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
            self.timeouts.cancel(gid, member_id)
        return records

    # ------------------------------------------------------------------ the write path
    def write(self, group_id: str, records: list, response, respond,
              error_response=None) -> None:
        """Store and apply ``records`` of ``group_id``, then ``respond(response)``; a failed
        write answers ``error_response(exc, response)`` (a heartbeat's by default)."""
        self.context.append(CoordinatorResult(records, response,
                                              append_future=partial(self.written, group_id)),
                            respond, error_response or heartbeat_error)

    def written(self, group_id: str, exc) -> None:
        """After a write of this group's records: a failed one forgets a downgrade they
        carried."""
        if exc is not None:
            self._downgrading.pop(group_id, None)

    def write_fence(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        self.write(group.group_id, self.fence_member(group, member), None, None)

    # ------------------------------------------------------------------ timeouts (timeouts.py)
    def schedule_session(self, group_id: str, member: ConsumerGroupMember) -> None:
        self.timeouts.schedule_session(group_id, member)

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        self.timeouts.cancel(group_id, member_id)

    def expire_member(self, group_id: str, member_id: str) -> None:
        self.timeouts.expire_member(group_id, member_id)

    # ------------------------------------------------------------------ replay (replay.py)
    def replay(self, key: crec.ConsumerKey, value: bytes | None, replay: bool) -> None:
        self.replayer.replay(key, value, replay)

    def settle_states(self) -> None:
        self.replayer.settle_states()

    def _group_removed(self, group: ConsumerGroup, replay: bool) -> None:
        """The group left the table: its members' timers stop, and a downgrade it was written
        for creates the classic group (migration.py)."""
        for member_id in list(group.members):
            self.timeouts.cancel(group.group_id, member_id)
        classic_value = self._downgrading.pop(group.group_id, None)
        if classic_value is not None and not replay:
            self.classic_members.finish_downgrade(group.group_id, classic_value)

    def group_tombstones(self, group: ConsumerGroup) -> list:
        return crec.group_tombstones(group)

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
            self.timeouts.schedule(group.group_id, member, ConsumerGroupMember(""))

    def unload_group(self, group: ConsumerGroup) -> None:
        for member_id in list(group.members):
            self.timeouts.cancel(group.group_id, member_id)

    # ================================================================== ConsumerGroupDescribe
    def describe(self, group_id: str, include_authorized_operations: bool):
        return describe_group(self.context, group_id)


def _count(assignment) -> int:
    return sum(len(p) for p in assignment.values())
