"""The classic group protocol of one shard: JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
DescribeGroups, member liveness and the rebalance, with the delayed operations of delayed.py
(Kafka's classic-group half of GroupMetadataManager).

The shard (shard.py) owns the group table, the write path and loading; this class keeps the
rebalance in progress (who is waiting to join or sync, pending members, heartbeat deadlines) in
memory, as Kafka does, and changes durable state only through its context's ``append`` (a
CoordinatorResult).
"""
from __future__ import annotations

from sys import intern
from typing import Callable

import structlog

from protocol import messages as m
from protocol.errors import ErrorCode

from ...common.result import CoordinatorResult, append_error
from .. import records as rec
from ..context import GroupContext
from ..group import (COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE,
                     UNKNOWN_MEMBER_ID, GroupMetadata, MemberMetadata)
from ..history import classic_cause
from .delayed import (DelayedHeartbeat, DelayedJoin, DelayedSync, InitialDelayedJoin, join_key,
                      sync_key)


log = structlog.get_logger("broker.coordinator")

E = ErrorCode

#: Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a member that joined but was never answered
#: is dropped after this, so clients that gave up on a long rebalance do not pile up.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


def _code(error) -> int:
    return int(error)


_SHARED: dict = {}


def _shared(value):
    """One object for equal values that many members keep (ints past 256 are not cached)."""
    if len(_SHARED) >= 1024:
        _SHARED.clear()
    return _SHARED.setdefault(value, value)


def _protocol_inconsistent(requested: str | None, current: str | None) -> bool:
    """Kafka's isProtocolInconsistent: both known and different."""
    return requested is not None and current is not None and requested != current


def make_join_callback(respond: Callable, version: int) -> Callable:
    def callback(error=E.NONE, member_id: str = "", generation_id: int = -1,
                 protocol_type: str | None = None, protocol_name: str | None = None,
                 leader: str | None = "", skip_assignment: bool = False, members=()) -> None:
        if protocol_name is None and version < 7:
            protocol_name = ""
        _send(respond, m.JoinGroupResponse(
            error_code=_code(error), generation_id=generation_id, protocol_type=protocol_type,
            protocol_name=protocol_name, leader=leader or "", skip_assignment=skip_assignment,
            member_id=member_id or "", members=list(members)))
    return callback


def make_sync_callback(respond: Callable, version: int) -> Callable:
    def callback(error=E.NONE, protocol_type: str | None = None,
                 protocol_name: str | None = None, assignment: bytes = b"") -> None:
        _send(respond, m.SyncGroupResponse(
            error_code=_code(error), protocol_type=protocol_type, protocol_name=protocol_name,
            assignment=assignment or b""))
    return callback


def _send(respond: Callable, response) -> None:
    """Answer through the API layer; a failure there must not leave a group half-updated."""
    try:
        respond(response)
    except Exception:
        log.exception("responding failed", response=type(response).__name__)


class ClassicGroupManager:
    """The classic protocol for the classic groups of one shard."""

    def __init__(self, context: GroupContext) -> None:
        self.context = context
        self.groups = context.groups  # the shard's table: the same dict, never rebound
        self.partition = context.partition
        self.config = context.config
        self.clock = context.clock
        self.timer = context.timer
        self.heartbeat_purgatory = context.heartbeat_purgatory
        self.rebalance_purgatory = context.rebalance_purgatory
        self.stats = context.stats
        self.new_uuid = context.new_uuid

    # ------------------------------------------------------------------ replay
    def replay_group_metadata(self, group_id: str, value, replay: bool) -> None:
        group = self.groups.get(group_id)
        if value is None:  # tombstone: the group is gone
            if group is None:
                return
            if replay:
                if group.offsets:
                    fresh = GroupMetadata(group_id, self.clock())
                    fresh.offsets = group.offsets
                    self.groups[group_id] = fresh
                else:
                    del self.groups[group_id]
            elif group.state is DEAD:
                group.offsets.clear()
                del self.groups[group_id]
            return
        if replay:
            if group is None:
                group = self.groups[group_id] = GroupMetadata(group_id, self.clock())
            self._rebuild_group(group, value)
            return
        if group is None or group.state is DEAD:
            return
        group.persisted = True
        if group.generation_id != value.generation:
            return  # written for a generation the group has already left behind
        for stored in value.members:
            member = group.members.get(stored.member_id)
            if member is not None:
                member.assignment = stored.assignment

    def _rebuild_group(self, group: GroupMetadata, value) -> None:
        """Replay: the group's persisted view replaces whatever an earlier record said."""
        offsets = group.offsets
        group.__init__(group.group_id, self.clock())
        group.offsets = offsets
        group.persisted = True
        protocol_type = value.protocol_type or None
        protocol = value.protocol or None
        for stored in value.members:
            member = MemberMetadata(
                stored.member_id, stored.group_instance_id, stored.client_id, stored.client_host,
                stored.rebalance_timeout if stored.rebalance_timeout >= 0 else stored.session_timeout,
                stored.session_timeout, protocol_type or "",
                ((protocol, stored.subscription),) if protocol is not None else ())
            member.assignment = stored.assignment
            group.add(member)
        group.generation_id = value.generation
        group.protocol_type = protocol_type
        group.protocol_name = protocol
        group.leader_id = value.leader if value.leader in group.members else (
            next(iter(group.members), None))
        ts = value.current_state_timestamp
        group.state_timestamp = ts if ts is not None and ts >= 0 else None
        group.state = STABLE if group.members else EMPTY
        group.subscribed_topics = group.compute_subscribed_topics()


    # ------------------------------------------------------------------ loading
    def on_loaded(self, group: GroupMetadata) -> None:
        """After replay: every member gets a session's time to heartbeat before it expires."""
        for member in list(group.members.values()):
            self.complete_and_schedule_next_heartbeat(group, member)

    def unload_group(self, group: GroupMetadata, error: ErrorCode) -> None:
        """The shard is unloading: answer whoever waits with ``error``, stop every timer."""
        for op in self.rebalance_purgatory.watched(join_key(group.group_id)):
            op.cancelled = True
            op.force_complete()
        self._cancel_sync_expiration(group)
        for member in list(group.members.values()):
            self._cancel_member_timers(member)
            group.maybe_invoke_join_callback(member, error=error, member_id=member.member_id)
            group.maybe_invoke_sync_callback(member, error=error)
        for handle in group.pending_members.values():
            self.timer.cancel(handle)

    # ------------------------------------------------------------------ heartbeats
    def complete_and_schedule_next_heartbeat(self, group: GroupMetadata,
                                             member: MemberMetadata) -> None:
        """Complete the member's DelayedHeartbeat, then watch a new one due at
        now + session timeout. A member has at most one at any time."""
        now = self.clock()
        member.latest_heartbeat = now
        # the heartbeat just moved latest_heartbeat on, so the old operation's try_complete
        # holds (or it is the same millisecond, and it is replaced all the same)
        op = DelayedHeartbeat(self, group, member, now + member.session_timeout_ms)
        current, member.heartbeat_op = member.heartbeat_op, op
        self.heartbeat_purgatory.replace(current, op, member)

    def on_expire_heartbeat(self, group: GroupMetadata, member: MemberMetadata,
                             op: DelayedHeartbeat) -> None:
        if group.state is DEAD or self.groups.get(group.group_id) is not group:
            return
        if group.members.get(member.member_id) is not member or member.heartbeat_op is not op:
            return
        if member.is_alive(op.deadline_ms):
            log.debug("heartbeat deadline passed, member kept alive", group=group.group_id,
                      member=member.member_id, awaiting_join=member.is_awaiting_join,
                      awaiting_sync=member.is_awaiting_sync)
            return
        self.expire_member(group, member, "session timeout")

    def expire_member(self, group: GroupMetadata, member: MemberMetadata, why: str) -> None:
        """Remove a member as its session timeout does (also for injected faults)."""
        self.stats.expired_members_total += 1
        self.stats.history.member_left(group.group_id, member.member_id, "expired")
        log.info("member expired", group=group.group_id, member=member.member_id,
                 group_instance_id=member.group_instance_id, client_id=member.client_id,
                 session_timeout_ms=member.session_timeout_ms, state=group.state.value,
                 reason=why)
        self._remove_member_and_update_group(
            group, member, f"removing member {member.member_id} on heartbeat expiration")

    def _cancel_member_timers(self, member: MemberMetadata) -> None:
        op = member.heartbeat_op
        if op is not None:
            member.heartbeat_op = None
            op.force_complete()
        if member.new_member_timer is not None:
            self.timer.cancel(member.new_member_timer)
            member.new_member_timer = None

    # ------------------------------------------------------------------ rebalancing
    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.state is COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        self._cancel_sync_expiration(group)
        delay = self.config.group_initial_rebalance_delay_ms
        if group.state is EMPTY:
            op: DelayedJoin = InitialDelayedJoin(self, group, delay, delay,
                                                 max(group.rebalance_timeout_ms() - delay, 0))
        else:
            op = DelayedJoin(self, group, group.rebalance_timeout_ms())
        previous = group.state
        now = self.clock()
        group.transition_to(PREPARING_REBALANCE, now)
        group.rebalance_started_ms = now
        group.rebalance_reason = reason
        self.stats.rebalances_started_total += 1
        self.stats.history.started(group.group_id, now, reason, classic_cause(reason),
                                   group.generation_id, "join")
        log.info("rebalance started", group=group.group_id, reason=reason,
                 previous_state=previous.value, generation=group.generation_id,
                 members=len(group.members), partition=self.partition)
        self.rebalance_purgatory.try_complete_else_watch(op, (join_key(group.group_id),))

    def _check_join(self, group: GroupMetadata) -> None:
        if group.state is PREPARING_REBALANCE:
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    def on_complete_join(self, group: GroupMetadata) -> None:
        if group.state is not PREPARING_REBALANCE or self.groups.get(group.group_id) is not group:
            return
        failed = [mm for mm in group.not_yet_rejoined_members() if not mm.is_static]
        for member in failed:
            self._cancel_member_timers(member)
            group.remove(member.member_id)
            self.stats.history.member_left(group.group_id, member.member_id, "did not rejoin")
        if failed:
            log.info("removed members that did not rejoin", group=group.group_id,
                     members=[mm.member_id for mm in failed])
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group could not complete rebalance because no members rejoined",
                      group=group.group_id)
            self.rebalance_purgatory.try_complete_else_watch(
                DelayedJoin(self, group, group.rebalance_timeout_ms()),
                (join_key(group.group_id),))
            return
        now = self.clock()
        group.init_next_generation(now)
        started = group.rebalance_started_ms
        duration = now - started if started is not None else None
        if group.state is EMPTY:
            self.stats.history.ended(group.group_id, now, "empty", 0, group.generation_id)
            log.info("group is now empty", group=group.group_id, generation=group.generation_id,
                     partition=self.partition)
            self.context.append(CoordinatorResult([rec.group_metadata_record(group, {})]))
            return
        self.stats.rebalances_total += 1
        self.stats.history.phase(group.group_id, now, "sync", group.generation_id)
        log.info("rebalance completed", group=group.group_id, generation=group.generation_id,
                 members=len(group.members), leader=group.leader_id,
                 protocol_type=group.protocol_type, protocol=group.protocol_name,
                 duration_ms=duration, reason=group.rebalance_reason, partition=self.partition)
        leader_members = None
        for member in list(group.members.values()):
            is_leader = group.is_leader(member.member_id)
            if is_leader and leader_members is None:
                leader_members = group.current_member_metadata()
            group.maybe_invoke_join_callback(
                member, error=E.NONE, member_id=member.member_id,
                generation_id=group.generation_id, protocol_type=group.protocol_type,
                protocol_name=group.protocol_name, leader=group.leader_id,
                skip_assignment=False, members=leader_members if is_leader else ())
            self.complete_and_schedule_next_heartbeat(group, member)
            if member.new_member_timer is not None:
                self.timer.cancel(member.new_member_timer)
                member.new_member_timer = None
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self.rebalance_purgatory.complete_all(sync_key(group.group_id))
        self.rebalance_purgatory.try_complete_else_watch(
            DelayedSync(self, group, group.rebalance_timeout_ms()), (sync_key(group.group_id),))

    def _cancel_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self.rebalance_purgatory.complete_all(sync_key(group.group_id))

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        if group.discard_pending_sync(member_id):
            self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        if self.groups.get(group.group_id) is not group or generation_id != group.generation_id:
            return
        if group.state not in (COMPLETING_REBALANCE, STABLE) or not group.pending_sync_members:
            return
        missing = [mid for mid in group.members if mid in group.pending_sync_members]
        for member_id in missing:
            member = group.members[member_id]
            self._cancel_member_timers(member)
            group.maybe_invoke_join_callback(member, error=E.UNKNOWN_MEMBER_ID)
            group.maybe_invoke_sync_callback(member, error=E.UNKNOWN_MEMBER_ID)
            group.remove(member_id)
            self.stats.history.member_left(group.group_id, member_id, "missed SyncGroup")
        group.pending_sync_members.clear()
        log.info("removed members that did not send SyncGroup", group=group.group_id,
                 generation=generation_id, members=missing)
        self.prepare_rebalance(
            group, f"removing {missing} on pending sync request expiration")

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error) -> None:
        ok = error == E.NONE
        protocol_type = group.protocol_type if ok else None
        protocol_name = group.protocol_name if ok else None
        for member in list(group.members.values()):
            if group.maybe_invoke_sync_callback(member, error=error, protocol_type=protocol_type,
                                                protocol_name=protocol_name,
                                                assignment=member.assignment if ok else b""):
                # heartbeat rescheduled after its SyncGroup response is sent
                if group.members.get(member.member_id) is member:
                    self.complete_and_schedule_next_heartbeat(group, member)

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata,
                                        reason: str) -> None:
        self._remove_member(group, member)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.state is PREPARING_REBALANCE:
            self._check_join(group)

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """Remove a current member; a pending JoinGroup/SyncGroup of it is answered
        UNKNOWN_MEMBER_ID so an active client rejoins."""
        self._cancel_member_timers(member)
        group.maybe_invoke_join_callback(member, error=E.UNKNOWN_MEMBER_ID,
                                         member_id=UNKNOWN_MEMBER_ID)
        group.maybe_invoke_sync_callback(member, error=E.UNKNOWN_MEMBER_ID)
        group.remove(member.member_id)

    def _remove_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        handle = group.pending_members.get(member_id)
        if handle is not None:
            self.timer.cancel(handle)
        group.remove(member_id)
        self._check_join(group)
        self.context.maybe_drop_transient_group(group)

    # ================================================================== JoinGroup
    def join_group(self, request, version: int, client_id: str, client_host: str,
                   respond: Callable) -> None:
        callback = make_join_callback(respond, version)
        group_id = request.group_id
        member_id = request.member_id or UNKNOWN_MEMBER_ID
        cfg = self.config
        session_timeout = request.session_timeout_ms
        if (session_timeout < cfg.group_min_session_timeout_ms
                or session_timeout > cfg.group_max_session_timeout_ms):
            callback(error=E.INVALID_SESSION_TIMEOUT, member_id=member_id)
            return
        rebalance_timeout = request.rebalance_timeout_ms
        if version == 0 or rebalance_timeout is None or rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        instance_id = request.group_instance_id if version >= 5 else None
        # timeouts, names and types repeat across members: share one object each
        session_timeout = _shared(session_timeout)
        rebalance_timeout = _shared(rebalance_timeout)
        protocol_type = intern(request.protocol_type or "")
        protocols = tuple((intern(p.name), p.metadata or b"") for p in request.protocols)
        names = {name for name, _ in protocols}
        is_unknown = member_id == UNKNOWN_MEMBER_ID

        group = self.groups.get(group_id)
        created = False
        if group is None:
            if not (protocol_type and names):
                callback(error=E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
                return
            if not is_unknown:
                callback(error=E.UNKNOWN_MEMBER_ID, member_id=member_id)
                return
            group = self.groups[group_id] = GroupMetadata(group_id, self.clock())
            created = True
        try:
            self._join(group, member_id, instance_id, client_id, client_host, version,
                       rebalance_timeout, session_timeout, protocol_type, protocols, names,
                       callback, request.reason if version >= 8 else None)
        finally:
            if created:
                self.context.maybe_drop_transient_group(group)

    def _join(self, group, member_id, instance_id, client_id, client_host, version,
              rebalance_timeout, session_timeout, protocol_type, protocols, names, callback,
              reason) -> None:
        if group.state is DEAD:
            # being deleted or unloaded: the client finds the coordinator again and retries
            callback(error=E.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
            return
        if not group.supports_protocols(protocol_type, names):
            callback(error=E.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
            return
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        is_pending = not is_unknown and group.is_pending_member(member_id)
        if not is_unknown and not is_pending:
            if group.is_static_member_fenced(instance_id, member_id):
                callback(error=E.FENCED_INSTANCE_ID, member_id=member_id)
                return
            if not group.has(member_id) or (instance_id is not None
                                            and not group.has_static_member(instance_id)):
                callback(error=E.UNKNOWN_MEMBER_ID, member_id=member_id)
                return
        if not self._accept_joining_member(group, member_id):
            if is_pending:
                self._remove_pending_member(group, member_id)
            elif group.has(member_id):
                self._remove_member_and_update_group(
                    group, group.get(member_id), f"member {member_id} rejected: group is full")
            callback(error=E.GROUP_MAX_SIZE_REACHED, member_id=UNKNOWN_MEMBER_ID)
            return
        why = f"; client reason: {reason}" if reason else ""
        if is_unknown:
            new_member_id = f"{instance_id or client_id}-{self.new_uuid()}"
            if instance_id is not None:
                old_member_id = group.static_member_id(instance_id)
                if old_member_id is not None:
                    log.info("static member rejoined with a new member id", group=group.group_id,
                             group_instance_id=instance_id, old_member=old_member_id,
                             member=new_member_id, state=group.state.value)
                    self._update_static_member_and_rebalance(
                        group, old_member_id, new_member_id, instance_id, protocols,
                        rebalance_timeout, session_timeout, callback, version, why)
                else:
                    self._add_member_and_rebalance(
                        group, new_member_id, instance_id, client_id, client_host,
                        rebalance_timeout, session_timeout, protocol_type, protocols, callback,
                        f"adding new static member {new_member_id} with group instance id "
                        f"{instance_id}{why}")
            elif version >= 4:
                # MEMBER_ID_REQUIRED: the member is told its id and must join again with it
                handle = self.timer.call_later(
                    session_timeout,
                    lambda: self._on_expire_pending_member(group, new_member_id))
                group.pending_members[new_member_id] = handle
                log.debug("pending member must rejoin with its member id", group=group.group_id,
                          member=new_member_id, client_id=client_id)
                callback(error=E.MEMBER_ID_REQUIRED, member_id=new_member_id)
            else:
                self._add_member_and_rebalance(
                    group, new_member_id, None, client_id, client_host, rebalance_timeout,
                    session_timeout, protocol_type, protocols, callback,
                    f"adding new member {new_member_id}{why}")
            return
        if is_pending:
            self.timer.cancel(group.pending_members.get(member_id))
            self._add_member_and_rebalance(
                group, member_id, None, client_id, client_host, rebalance_timeout,
                session_timeout, protocol_type, protocols, callback,
                f"pending member {member_id} joined{why}")
            return
        member = group.get(member_id)
        state = group.state
        if state is PREPARING_REBALANCE:
            self._update_member_and_rebalance(
                group, member, protocols, rebalance_timeout, session_timeout, callback,
                f"member {member_id} joining group during PreparingRebalance{why}")
        elif state is COMPLETING_REBALANCE:
            if member.matches(protocols):
                # it probably missed the JoinGroup response: send the current generation again
                is_leader = group.is_leader(member_id)
                self._answer_current_generation(
                    group, member, callback,
                    group.current_member_metadata() if is_leader else ())
            else:
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout, session_timeout, callback,
                    f"updating metadata for member {member_id} during CompletingRebalance{why}")
        elif state is STABLE:
            if group.is_leader(member_id):
                # a leader's JoinGroup forces a rebalance (e.g. topic metadata changed)
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout, session_timeout, callback,
                    f"leader {member_id} re-joining group during Stable{why}")
            elif not member.matches(protocols):
                self._update_member_and_rebalance(
                    group, member, protocols, rebalance_timeout, session_timeout, callback,
                    f"updating metadata for member {member_id} during Stable{why}")
            else:
                self._answer_current_generation(group, member, callback, ())
        else:
            callback(error=E.UNKNOWN_MEMBER_ID, member_id=member_id)

    def _answer_current_generation(self, group, member, callback, members) -> None:
        callback(error=E.NONE, member_id=member.member_id, generation_id=group.generation_id,
                 protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                 leader=group.leader_id, skip_assignment=False, members=members)
        # heartbeat rescheduled after a JoinGroup response is sent to the member
        self.complete_and_schedule_next_heartbeat(group, member)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        max_size = self.config.group_max_size
        state = group.state
        if state in (EMPTY, DEAD):
            return True
        if state is PREPARING_REBALANCE:
            # awaiting members are counted: the group may already be over a lowered limit, and
            # the last members to rejoin are the ones turned away
            member = group.members.get(member_id)
            return ((member is not None and member.is_awaiting_join)
                    or group.num_members_awaiting_join < max_size)
        return member_id in group.members or len(group.members) < max_size

    def _add_member_and_rebalance(self, group, member_id, instance_id, client_id, client_host,
                                  rebalance_timeout, session_timeout, protocol_type, protocols,
                                  callback, reason) -> None:
        member = MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                session_timeout, protocol_type, protocols)
        if group.state is PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, callback)
        # A new member that never gets its JoinGroup answered (the client gave up on a long
        # rebalance) is dropped after NEW_MEMBER_JOIN_TIMEOUT_MS; it is not a DelayedHeartbeat.
        member.new_member_timer = self.timer.call_later(
            NEW_MEMBER_JOIN_TIMEOUT_MS, lambda: self._on_expire_new_member(group, member))
        self.stats.history.member_joined(group.group_id, member_id, client_id, instance_id)
        log.info("member joined", group=group.group_id, member=member_id,
                 group_instance_id=instance_id, client_id=client_id, client_host=client_host,
                 protocol_type=protocol_type, protocols=[n for n, _ in protocols],
                 session_timeout_ms=session_timeout, rebalance_timeout_ms=rebalance_timeout)
        self._maybe_prepare_rebalance(group, reason)
        self._check_join(group)

    def _update_member_and_rebalance(self, group, member, protocols, rebalance_timeout,
                                     session_timeout, callback, reason) -> None:
        previous = member.awaiting_join
        group.update_member(member, protocols, rebalance_timeout, session_timeout, callback)
        if previous is not None:
            # a second JoinGroup supersedes the first: answer the first so it is answered once
            previous(error=E.REBALANCE_IN_PROGRESS, member_id=member.member_id)
        self._maybe_prepare_rebalance(group, reason)
        self._check_join(group)

    def _update_static_member_and_rebalance(self, group, old_member_id, new_member_id,
                                            instance_id, protocols, rebalance_timeout,
                                            session_timeout, callback, version, why) -> None:
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        # the old id's heartbeat is replaced by one for the new id
        self.complete_and_schedule_next_heartbeat(group, member)
        old_protocols = member.protocols
        old_rebalance_timeout = member.rebalance_timeout_ms
        old_session_timeout = member.session_timeout_ms
        group.update_member(member, protocols, rebalance_timeout, session_timeout, callback)
        state = group.state
        if state is STABLE:
            # no rebalance if the protocol the group would select is unchanged: persist the new
            # member id and answer at once
            if group.select_protocol() == group.protocol_name:
                log.info("static member replaced without rebalance", group=group.group_id,
                         group_instance_id=instance_id, member=new_member_id)
                generation = group.generation_id

                def append_future(exc) -> None:
                    """The new member id stored: answer the join; not stored: the static
                    member is the old one again (Kafka's appendFuture.whenComplete)."""
                    if exc is not None:
                        error = append_error(exc)
                        log.warning("failed to persist static member replacement",
                                    group=group.group_id, error=error.name)
                        if group.members.get(new_member_id) is member:
                            group.update_member(member, old_protocols, old_rebalance_timeout,
                                                old_session_timeout, None)
                            group.replace_static_member(instance_id, new_member_id,
                                                        old_member_id)
                            self.complete_and_schedule_next_heartbeat(group, member)
                        else:
                            member.awaiting_join = None
                        callback(error=error, member_id=UNKNOWN_MEMBER_ID,
                                 generation_id=generation, protocol_type=group.protocol_type,
                                 protocol_name=group.protocol_name, leader=current_leader)
                        return
                    if group.members.get(new_member_id) is not member:
                        return  # removed or fenced meanwhile; its callback was answered then
                    if version >= 9:
                        # SkipAssignment: the rejoining static leader learns it leads but does not
                        # run the assignor while the group is stable
                        is_leader = group.is_leader(new_member_id)
                        answered = group.maybe_invoke_join_callback(
                            member, error=E.NONE, member_id=new_member_id,
                            generation_id=group.generation_id,
                            protocol_type=group.protocol_type,
                            protocol_name=group.protocol_name, leader=group.leader_id,
                            skip_assignment=is_leader,
                            members=group.current_member_metadata() if is_leader else ())
                    else:
                        # before v9 the static leader is told the old leader id, so it acts as
                        # a follower and no rebalance is forced
                        answered = group.maybe_invoke_join_callback(
                            member, error=E.NONE, member_id=new_member_id,
                            generation_id=group.generation_id,
                            protocol_type=group.protocol_type,
                            protocol_name=group.protocol_name, leader=current_leader,
                            skip_assignment=False, members=())
                    if answered:
                        self.complete_and_schedule_next_heartbeat(group, member)

                self.context.append(CoordinatorResult([rec.group_metadata_record(group)],
                                                      append_future=append_future))
            else:
                self._maybe_prepare_rebalance(
                    group, f"group's selected protocol will change because static member "
                           f"{new_member_id} with instance id {instance_id} joined with a "
                           f"change of protocol{why}")
        elif state is COMPLETING_REBALANCE:
            # the leader may already be assigning for the old member id: rebalance again
            self.prepare_rebalance(
                group, f"updating metadata for static member {new_member_id} with instance id "
                       f"{instance_id}{why}")
        elif state is PREPARING_REBALANCE:
            self._check_join(group)

    def _on_expire_new_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.new_member_timer = None
        if self.groups.get(group.group_id) is not group or group.state is DEAD:
            return
        if group.members.get(member.member_id) is not member:
            return
        log.info("new member expired before its join completed", group=group.group_id,
                 member=member.member_id, client_id=member.client_id)
        self.stats.expired_members_total += 1
        self.stats.history.member_left(group.group_id, member.member_id, "expired")
        self._remove_member_and_update_group(
            group, member, f"removing member {member.member_id} on new member join timeout")

    def _on_expire_pending_member(self, group: GroupMetadata, member_id: str) -> None:
        if self.groups.get(group.group_id) is not group or member_id not in group.pending_members:
            return
        log.info("pending member expired", group=group.group_id, member=member_id)
        self._remove_pending_member(group, member_id)

    # ================================================================== SyncGroup
    def validate_current_member(self, group: GroupMetadata, member_id: str,
                                 instance_id: str | None):
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return E.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("request fenced", group=group.group_id, member=member_id,
                         group_instance_id=instance_id, current_member=current)
                return E.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return E.UNKNOWN_MEMBER_ID
        return None

    def sync_group(self, request, version: int, respond: Callable) -> None:
        callback = make_sync_callback(respond, version)
        group = self.groups.get(request.group_id)
        if group is None:
            callback(error=E.UNKNOWN_MEMBER_ID)
            return
        if group.state is DEAD:
            callback(error=E.COORDINATOR_NOT_AVAILABLE)
            return
        member_id = request.member_id
        instance_id = request.group_instance_id if version >= 3 else None
        error = self.validate_current_member(group, member_id, instance_id)
        if error is None and request.generation_id != group.generation_id:
            error = E.ILLEGAL_GENERATION
        if error is None and version >= 5:
            # null fields from v5 on were answered by the coordinator already; as Kafka's
            # isProtocolInconsistent, a group without a type or protocol yet matches anything
            if _protocol_inconsistent(request.protocol_type, group.protocol_type) or \
                    _protocol_inconsistent(request.protocol_name, group.protocol_name):
                error = E.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            callback(error=error)
            return
        state = group.state
        if state is EMPTY:
            callback(error=E.UNKNOWN_MEMBER_ID)
        elif state is PREPARING_REBALANCE:
            callback(error=E.REBALANCE_IN_PROGRESS)
        elif state is COMPLETING_REBALANCE:
            member = group.get(member_id)
            previous = member.awaiting_sync
            member.awaiting_sync = callback
            if previous is not None:
                previous(error=E.REBALANCE_IN_PROGRESS)
            # heartbeat rescheduled when its SyncGroup request is handled
            self.complete_and_schedule_next_heartbeat(group, member)
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                self._store_leader_assignment(group, member_id, request.assignments)
        elif state is STABLE:
            member = group.get(member_id)
            self._remove_pending_sync_member(group, member_id)
            self.complete_and_schedule_next_heartbeat(group, member)        # point 2
            callback(error=E.NONE, protocol_type=group.protocol_type,
                     protocol_name=group.protocol_name, assignment=member.assignment)
            self.complete_and_schedule_next_heartbeat(group, member)        # point 3

    def _store_leader_assignment(self, group: GroupMetadata, leader_id: str, assignments) -> None:
        given = {a.member_id: a.assignment or b"" for a in assignments}
        assignment = {mid: given.get(mid, b"") for mid in group.members}
        missing = [mid for mid in group.members if mid not in given]
        log.info("assignment received from leader", group=group.group_id, leader=leader_id,
                 generation=group.generation_id, members=len(group.members),
                 static_members=len(group.static_members))
        if missing:
            log.warning("setting empty assignments for members", group=group.group_id,
                        generation=group.generation_id, members=missing)
        generation = group.generation_id

        def append_future(exc) -> None:
            """The assignment stored: the group is Stable and each member gets its assignment;
            not stored: the members get the error and the group rebalances (Kafka's
            appendFuture.whenComplete)."""
            if group.state is not COMPLETING_REBALANCE or group.generation_id != generation:
                return  # moved on while writing (a member joined or left)
            if self.groups.get(group.group_id) is not group:
                return
            if exc is not None:
                error = append_error(exc)
                log.warning("failed to store group assignment", group=group.group_id,
                            generation=generation, error=error.name)
                self._reset_and_propagate_assignment_error(group, error)
                self._maybe_prepare_rebalance(
                    group, f"error when storing group assignment during SyncGroup "
                           f"(member: {leader_id})")
                return
            # the members' assignments were set by applying the stored record
            now = self.clock()
            group.transition_to(STABLE, now)
            self.stats.group_stable(group, now)
            self.stats.history.ended(group.group_id, now, "stable", len(group.members),
                                     generation)
            log.info("group stable", group=group.group_id, generation=generation,
                     members=len(group.members))
            self._propagate_assignment(group, E.NONE)

        self.context.append(CoordinatorResult([rec.group_metadata_record(group, assignment)],
                                              append_future=append_future))

    # ================================================================== Heartbeat
    def heartbeat(self, request, version: int) -> ErrorCode:
        group = self.groups.get(request.group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.state is DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        member_id = request.member_id
        error = self.validate_current_member(
            group, member_id, request.group_instance_id if version >= 3 else None)
        if error is not None:
            return error
        if request.generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        state = group.state
        if state is EMPTY:
            return E.UNKNOWN_MEMBER_ID
        self.complete_and_schedule_next_heartbeat(group, group.get(member_id))  # point 4
        if state is PREPARING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    # ================================================================== LeaveGroup
    def leave_group(self, group_id: str, identities: list) -> tuple[ErrorCode, list]:
        """-> (top-level error, [(member_id, group_instance_id, error)])."""
        group = self.groups.get(group_id)
        if group is None:
            # Kafka: the group is not found -> every member is UNKNOWN_MEMBER_ID, with the ids
            # echoed, under a top-level NONE (LeaveGroup v0-2 carry it as the top-level error)
            return E.NONE, [(member_id, instance_id, E.UNKNOWN_MEMBER_ID)
                            for member_id, instance_id, _reason in identities]
        if group.state is DEAD:
            return E.COORDINATOR_NOT_AVAILABLE, []
        results = []
        left = []
        for member_id, instance_id, reason in identities:
            member_id = member_id or UNKNOWN_MEMBER_ID
            why = reason or "not provided"
            if member_id == UNKNOWN_MEMBER_ID:
                current = group.static_member_id(instance_id)
                if current is not None:
                    member = group.get(current)
                    log.info("member left", group=group_id, member=current,
                             group_instance_id=instance_id, reason=why, by="group instance id")
                    self._remove_member(group, member)
                    results.append((member_id, instance_id, E.NONE))
                    left.append(current)
                else:
                    results.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
            elif group.is_pending_member(member_id):
                log.info("pending member left", group=group_id, member=member_id, reason=why)
                handle = group.pending_members.get(member_id)
                if handle is not None:
                    self.timer.cancel(handle)
                group.remove(member_id)
                results.append((member_id, instance_id, E.NONE))
                left.append(member_id)
            else:
                error = self.validate_current_member(group, member_id, instance_id)
                if error is None:
                    log.info("member left", group=group_id, member=member_id,
                             group_instance_id=instance_id, reason=why)
                    self._remove_member(group, group.get(member_id))
                    results.append((member_id, instance_id, E.NONE))
                    left.append(member_id)
                else:
                    results.append((member_id, instance_id, error))
        for member_id in left:
            self.stats.history.member_left(group_id, member_id, "left")
        if left:
            if group.state in (STABLE, COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance(
                    group, f"explicit LeaveGroup request for ({', '.join(left)}) members")
            elif group.state is PREPARING_REBALANCE:
                self._check_join(group)
            self.context.maybe_drop_transient_group(group)
        return E.NONE, results


    # ================================================================== Describe/List
    def describe_group(self, group_id: str, version: int):
        cls = m.DescribeGroupsResponse.DescribedGroup
        member_cls = m.DescribeGroupsResponse.DescribedGroupMember
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            if version >= 6:
                return cls(error_code=E.GROUP_ID_NOT_FOUND,
                           error_message=f"Group {group_id} not found.", group_id=group_id,
                           group_state=DEAD.value)
            return cls(group_id=group_id, group_state=DEAD.value)
        # Outside Stable, Kafka describes members without metadata but still with the assignment
        # of the last generation each synced (empty for a member that joined since, and for all
        # members once a rebalance interrupted CompletingRebalance): ClassicGroupMember's
        # describeNoMetadata()
        stable = group.state is STABLE
        members = []
        for member in group.members.values():
            members.append(member_cls(
                member_id=member.member_id, group_instance_id=member.group_instance_id,
                client_id=member.client_id, client_host=member.client_host,
                member_metadata=member.metadata(group.protocol_name) if stable else b"",
                member_assignment=member.assignment))
        return cls(group_id=group_id, group_state=group.state.value,
                   protocol_type=group.protocol_type or "",
                   protocol_data=(group.protocol_name or "") if stable else "",
                   members=members)
