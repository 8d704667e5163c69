"""StreamsGroupHeartbeat and StreamsGroupDescribe for the streams groups of one shard (the
streams half of Kafka's GroupMetadataManager).

A heartbeat goes as a consumer-group heartbeat does, on the same shard, write path and keyed
timer: the member is created or updated; the first member's topology is stored; the topology
is configured against the topics (topology.py) whenever the topics change, which tells the
members a status (missing source topics, internal topics to create, ...); a changed member,
topology, topic metadata or assignment config bumps the group epoch; a group epoch ahead of
the target assignment computes a new one with the sticky task assignor (assignor.py); the
member then moves towards its target through consumer/reconciliation.py, revoking before
another member gets a task. The handler returns the records of what changes, the answer and
the internal topics to create; the shard stores the records, replays them (:meth:`replay`,
also the load path) and then answers.

Kafka 4.3.1 serves no static members, warm-up tasks, task offsets or source topic regexes in
streams groups yet; they are refused as it refuses them.
"""
from __future__ import annotations

import structlog

from protocol import messages as m
from protocol.errors import ErrorCode

from ..consumer.group import MemberState, metadata_hash
from ..group import GroupError
from ..consumer.reconciliation import FencedMemberEpoch, reconcile
from ...common.result import CoordinatorResult
from ...common.timer import CoordinatorTimer
from ..group import DEAD, EMPTY, STABLE
from . import records as srec
from .assignor import MemberSpec, assign
from .group import (ACTIVE, KINDS, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                    MEMBER_STATES_BY_VALUE, STANDBY, WARMUP, StreamsGroup, StreamsGroupMember,
                    tasks_of)
from .topology import (Status, StreamsTopology, TopologyError, configure,
                       validate_request_topology)

log = structlog.get_logger("broker.coordinator")

E = ErrorCode
_Response = m.StreamsGroupHeartbeatResponse


#: the detail of a status a fault forces on a group
FORCED_DETAILS = {
    Status.STALE_TOPOLOGY: "The member's topology epoch is behind the group's topology epoch.",
    Status.MISSING_SOURCE_TOPICS: "Source topics are missing.",
    Status.INCORRECTLY_PARTITIONED_TOPICS: "Topics are incorrectly partitioned.",
    Status.MISSING_INTERNAL_TOPICS: "Internal topics are missing.",
    Status.SHUTDOWN_APPLICATION: "A member requested a shutdown for the entire application.",
    Status.ASSIGNMENT_DELAYED: "Assignment delayed.",
}


def _invalid(message: str) -> GroupError:
    return GroupError(E.INVALID_REQUEST, message)


def _blank(value: str | None) -> bool:
    return value is not None and value.strip() == ""


def _tasks_in(task_ids) -> dict:
    return {t.subtopology_id: frozenset(t.partitions) for t in task_ids or () if t.partitions}


def _status(code: int, detail: str):
    return _Response.Status(status_code=code, status_detail=detail)


class StreamsGroupManager:
    """The streams-group protocol for the streams groups of one shard."""

    def __init__(self, context) -> None:
        self.context = context
        self.groups = context.groups
        self.config = context.config
        self.clock = context.clock
        self.stats = context.stats
        self.timer = CoordinatorTimer(context.timer)
        self._touched: set = set()
        #: group id -> (status code, tag, until ms or None): a status every heartbeat of the
        #: group is told of, set by a fault (broker/faults.py "streams_status")
        self.forced: dict[str, tuple] = {}

    def force_status(self, group_id: str, code: int, tag: str, until: int | None) -> None:
        self.forced[group_id] = (code, tag, until)

    def unforce_status(self, tag: str | None = None) -> None:
        for group_id, (_code, forced_by, _until) in list(self.forced.items()):
            if tag is None or forced_by == tag:
                del self.forced[group_id]

    def _forced_status(self, group_id: str, now: int):
        forced = self.forced.get(group_id)
        if forced is None:
            return None
        code, tag, until = forced
        if until is not None and now >= until:
            del self.forced[group_id]
            return None
        return _status(code, f"{FORCED_DETAILS[code]} ({tag})")

    @property
    def topics(self):
        return self.context.topics

    # ------------------------------------------------------------------ settings
    def session_timeout_ms(self, group_id: str) -> int:
        return self.context.setting(group_id, "streams.session.timeout.ms",
                                    self.config.group_streams_session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.context.setting(group_id, "streams.heartbeat.interval.ms",
                                    self.config.group_streams_heartbeat_interval_ms)

    def num_standby_replicas(self, group_id: str) -> int:
        return self.context.setting(group_id, "streams.num.standby.replicas",
                                    self.config.group_streams_num_standby_replicas)

    def initial_rebalance_delay_ms(self, group_id: str) -> int:
        return self.context.setting(group_id, "streams.initial.rebalance.delay.ms",
                                    self.config.group_streams_initial_rebalance_delay_ms)

    def assignment_interval_ms(self, group_id: str) -> int:
        return self.context.setting(group_id, "streams.assignment.interval.ms",
                                    self.config.group_streams_assignment_interval_ms)

    def assignment_configs(self, group_id: str) -> dict:
        return {"num.standby.replicas": str(self.num_standby_replicas(group_id))}

    # ================================================================== StreamsGroupHeartbeat
    def heartbeat(self, request, client_id: str, client_host: str) -> tuple:
        """-> (records, response, internal topics to create {name: InternalTopic}); nothing
        changes until the shard stores the records."""
        try:
            validate(request)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH,
                                        LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request) + ({},)
            return self._heartbeat(request, client_id, client_host)
        except GroupError as exc:
            return [], _Response(error_code=int(exc.code), error_message=exc.message), {}
        except TopologyError as exc:
            return [], _Response(error_code=int(exc.code), error_message=exc.message), {}
        except FencedMemberEpoch as exc:
            return [], _Response(error_code=int(exc.code), error_message=str(exc)), {}

    def _group(self, group_id: str, create: bool) -> StreamsGroup:
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            if not create:
                raise GroupError(E.GROUP_ID_NOT_FOUND, f"Streams group {group_id} not found.")
            return self._new_group(group_id, None)
        if isinstance(group, StreamsGroup):
            return group
        if create and _is_simple(group):
            return self._new_group(group_id, group)
        raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")

    def _new_group(self, group_id: str, replaced) -> StreamsGroup:
        group = StreamsGroup(group_id, self.clock())
        group.topics = self.topics
        if replaced is not None:    # a group that only held offsets gives way; they stay
            group.offsets = replaced.offsets
            group.pending_offset_commits = replaced.pending_offset_commits
        return group

    def _heartbeat(self, request, client_id: str, client_host: str) -> tuple:
        group_id = request.group_id
        member_id = request.member_id
        epoch = request.member_epoch
        now = self.clock()
        records: list = []
        statuses: list = []
        joining = epoch == 0
        group = self._group(group_id, joining)
        was_empty = not group.members
        member = group.members.get(member_id)
        if member is None:
            if not joining:
                raise GroupError(E.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group_id}.")
            max_size = self.config.group_streams_max_size
            if len(group.members) >= max_size:
                raise GroupError(E.GROUP_MAX_SIZE_REACHED,
                                 "The streams group has reached its maximum capacity of "
                                 f"{max_size} members.")
            member = StreamsGroupMember(member_id)
            log.info("member joins the streams group", group=group_id, member=member_id)
        else:
            _check_epoch(member, epoch, request)

        # 1. the member
        updated = member.replace(
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms
            if request.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
            topology_epoch=request.topology.epoch if request.topology is not None
            else member.topology_epoch,
            client_id=client_id, client_host=client_host,
            process_id=request.process_id if request.process_id is not None
            else member.process_id,
            client_tags=tuple(sorted((kv.key, kv.value) for kv in request.client_tags))
            if request.client_tags is not None else member.client_tags,
            user_endpoint=(request.user_endpoint.host, request.user_endpoint.port)
            if request.user_endpoint is not None else member.user_endpoint)
        bump = False
        if member_id not in group.members or not updated.metadata_equals(member):
            records.append(srec.member_metadata_record(group_id, updated))
            bump = True

        # 2. the topology
        topology = group.topology
        if request.topology is not None:
            sent = StreamsTopology.from_message(request.topology)
            if topology is None:
                log.info("member initialized the streams group's topology", group=group_id,
                         member=member_id, topology_epoch=sent.epoch)
                records.append(srec.topology_record(group_id, sent))
                topology = sent
            elif topology.epoch <= sent.epoch and topology != sent:
                raise _invalid("Topology updates are not supported yet.")
        if topology is None:
            raise GroupError(E.UNKNOWN_SERVER_ERROR,
                             "The topology is null and the group topology is also null.")
        if updated.topology_epoch < topology.epoch:
            statuses.append(_status(
                Status.STALE_TOPOLOGY,
                f"The member's topology epoch {updated.topology_epoch} is behind the group's "
                f"topology epoch {topology.epoch}."))

        # 3. the topology against the topics
        configured = group.configured
        digest = group.metadata_hash
        version = self.topics.version()
        reconfigure = group.topology is None
        if reconfigure or configured is None or group.metadata_version != version:
            digest = self.metadata_hash(topology)
            if digest != group.metadata_hash:
                bump = reconfigure = True
            if reconfigure or configured is None:
                configured = configure(topology, self.partition_count, digest)
                if group.topology is not None:
                    group.configured = configured
            if group.topology is not None:
                group.metadata_version = version
        validated_epoch = -1
        if configured.ready:
            validated_epoch = topology.epoch
            for kind in (request.active_tasks, request.standby_tasks, request.warmup_tasks):
                _check_tasks(configured, kind)
        if validated_epoch != group.validated_topology_epoch:
            bump = True
        configs = self.assignment_configs(group_id)
        if not bump and configs != group.last_assignment_configs:
            bump = True
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(srec.group_epoch_record(group_id, group_epoch, digest,
                                                   validated_epoch, configs))
            self.stats.streams_group_rebalances_total += 1
            log.info("streams group epoch bumped", group=group_id, epoch=group_epoch,
                     validated_topology_epoch=validated_epoch)

        # the first rebalance of an empty group waits for more members
        delay_key = ("streams-initial", group_id)
        if was_empty:
            delay = self.initial_rebalance_delay_ms(group_id)
            if delay > 0 and not self.timer.is_scheduled(delay_key):
                self.timer.schedule(delay_key, delay,
                                    lambda: self._delayed_assignment(group_id))

        # 4. the target assignment
        target_epoch, target, target_records = self._target(
            group, group_epoch, updated, configured, configs, statuses, now)
        records += target_records

        # 5. reconciliation
        reconciled = self._reconcile(group, updated, target_epoch, target, request)
        if not reconciled.assignment_equals(member):
            records.append(srec.current_assignment_record(group_id, reconciled))
        if request.shutdown_application:
            group.shutdown_request_member_id = member_id

        response = _Response(error_code=0, member_id=member_id,
                             member_epoch=reconciled.member_epoch,
                             heartbeat_interval_ms=self.heartbeat_interval_ms(group_id))
        if joining or dict(reconciled.assigned) != dict(member.assigned):
            cls = _Response.TaskIds
            for kind in KINDS:
                setattr(response, f"{kind}_tasks",
                        [cls(subtopology_id=sub, partitions=sorted(ps))
                         for sub, ps in sorted(reconciled.tasks(kind).items())])
            if reconciled.user_endpoint is not None:
                group.endpoint_information_epoch += 1
        if group.endpoint_information_epoch != request.endpoint_information_epoch:
            response.partitions_by_user_endpoint = self._endpoints(group, reconciled, configured)
        if self.groups.get(group_id) is group:
            response.endpoint_information_epoch = group.endpoint_information_epoch
        to_create = {}
        if configured.status is not None:
            to_create = configured.internal_topics_to_create
            statuses.append(_status(*configured.status))
        shutdown_by = group.shutdown_request_member_id
        if shutdown_by is not None:
            statuses.append(_status(
                Status.SHUTDOWN_APPLICATION,
                f"Streams group member {shutdown_by} encountered a fatal error and requested a "
                "shutdown for the entire application."))
        forced = self._forced_status(group_id, now)
        if forced is not None:
            statuses.append(forced)
        response.status = statuses
        return records, response, to_create

    def metadata_hash(self, topology: StreamsTopology) -> int:
        """The hash of the topics the topology needs that exist (Kafka's computeMetadataHash
        over requiredTopics)."""
        metadata = {}
        for name in topology.required_topics():
            found = self.topics.get(name)
            if found is not None:
                metadata[found[0]] = (name, found[1])
        return metadata_hash(metadata)

    def partition_count(self, name: str) -> int | None:
        found = self.topics.get(name)
        return None if found is None else found[1]

    def _target(self, group: StreamsGroup, group_epoch: int, updated: StreamsGroupMember,
                configured, configs: dict, statuses: list, now: int) -> tuple:
        """Kafka's maybeUpdateStreamsTargetAssignment -> (epoch, the member's target, records)."""
        gid = group.group_id
        if self.timer.is_scheduled(("streams-initial", gid)):
            statuses.append(_status(Status.ASSIGNMENT_DELAYED, "Assignment delayed due to the "
                                    "configured initial rebalance delay."))
            return group.assignment_epoch, {}, []
        if group.assignment_epoch >= group_epoch:
            return group.assignment_epoch, group.target.get(updated.member_id, {}), []
        interval = self.assignment_interval_ms(gid)
        if interval > 0 and now < group.assignment_timestamp + interval:
            statuses.append(_status(Status.ASSIGNMENT_DELAYED, "Assignment delayed due to the "
                                    "configured assignment interval."))
            self.timer.schedule(("streams-assign", gid),
                                group.assignment_timestamp + interval - now,
                                lambda: self._delayed_assignment(gid))
            return group.assignment_epoch, group.target.get(updated.member_id, {}), []
        members = dict(group.members)
        members[updated.member_id] = updated
        targets = self.compute_target(group, members, configured, configs)
        records = []
        for mid, tasks in targets.items():
            if tasks != group.target.get(mid) or (mid == updated.member_id and
                                                  mid not in group.target):
                records.append(srec.target_assignment_record(gid, mid, tasks))
        records.append(srec.target_assignment_epoch_record(gid, group_epoch, now))
        return group_epoch, targets.get(updated.member_id, {}), records

    def compute_target(self, group: StreamsGroup, members: dict, configured,
                       configs: dict) -> dict:
        """member id -> tasks by (kind, subtopology): the sticky assignor's answer from each
        member's previous target; nothing while the topology is not ready."""
        if configured is None or not configured.ready:
            return {mid: {} for mid in members}
        specs = {}
        for mid, mm in members.items():
            previous = group.target.get(mid, {})
            specs[mid] = MemberSpec(
                mm.process_id,
                {sub: ps for (k, sub), ps in previous.items() if k == ACTIVE},
                {sub: ps for (k, sub), ps in previous.items() if k == STANDBY})
        subs = {sid: (s.num_tasks, s.stateful) for sid, s in configured.subtopologies.items()}
        result = assign(specs, subs, int(configs.get("num.standby.replicas", "0")))
        return {mid: tasks_of(active, standby) for mid, (active, standby) in result.items()}

    def _reconcile(self, group: StreamsGroup, member: StreamsGroupMember, target_epoch: int,
                   target: dict, request) -> StreamsGroupMember:
        """consumer/reconciliation.py on tasks: an active task is free once no process holds it
        (and this member's process holds it as no standby); a standby once this member's
        process holds it in no other role."""
        if member.is_reconciled_to(target_epoch):
            return member
        active_owner, standby_owners, warmup_owners = group.task_owners()
        process = member.process_id

        def held_elsewhere(key, partition: int) -> int:
            kind, sub = key
            task = (sub, partition)
            in_process = process in standby_owners.get(task, ()) or \
                process in warmup_owners.get(task, ())
            if kind == ACTIVE:
                busy = task in active_owner or in_process
            else:
                busy = active_owner.get(task) == process or in_process
            return 0 if busy else -1

        owned = None
        if request.active_tasks is not None:
            owned = tasks_of(_tasks_in(request.active_tasks), _tasks_in(request.standby_tasks),
                             _tasks_in(request.warmup_tasks))
        keys = frozenset(target) | frozenset(member.assigned) | \
            frozenset(member.pending_revocation)
        return reconcile(member, target_epoch, target, owned, held_elsewhere, keys, False)

    def _endpoints(self, group: StreamsGroup, updated: StreamsGroupMember, configured) -> list:
        """Kafka's buildEndpointToPartitions: each member's endpoint with the partitions of its
        active and standby tasks' input topics."""
        cls = _Response.EndpointToPartitions
        if configured is None or configured.subtopologies is None:
            return []
        members = dict(group.members)
        members[updated.member_id] = updated
        out = []
        for mm in members.values():
            if mm.user_endpoint is None:
                continue
            out.append(cls(user_endpoint=_Response.Endpoint(host=mm.user_endpoint[0],
                                                             port=mm.user_endpoint[1]),
                           active_partitions=self._partitions(mm.tasks(ACTIVE), configured),
                           standby_partitions=self._partitions(mm.tasks(STANDBY), configured)))
        return out

    def _partitions(self, tasks: dict, configured) -> list:
        out = []
        for sub, partitions in sorted(tasks.items()):
            s = configured.subtopologies.get(sub)
            if s is None:
                continue
            for topic in sorted(s.source_topics | set(s.repartition_source_topics)):
                n = self.partition_count(topic)
                if n is None:
                    continue
                out.append(_Response.TopicPartition(topic=topic,
                                                    partitions=sorted(partitions)[:n]))
        return out

    def _delayed_assignment(self, group_id: str) -> None:
        """Kafka's computeDelayedTargetAssignment: the initial delay (or the assignment
        interval) is over; compute the target assignment through the write path."""
        group = self.groups.get(group_id)
        if not isinstance(group, StreamsGroup) or self.context.loading or \
                group.assignment_epoch >= group.group_epoch or not group.members:
            return
        configured = self.configured(group)
        if configured is None:
            return      # as Kafka: no configured topology, no delayed assignment
        configs = self.assignment_configs(group_id)
        targets = self.compute_target(group, dict(group.members), configured, configs)
        records = [srec.target_assignment_record(group_id, mid, tasks)
                   for mid, tasks in targets.items() if tasks != group.target.get(mid)]
        records.append(srec.target_assignment_epoch_record(group_id, group.group_epoch,
                                                           self.clock()))
        self.context.append(CoordinatorResult(records))

    # ------------------------------------------------------------------ leaving
    def _leave(self, request) -> tuple:
        group_id = request.group_id
        member_id = request.member_id
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:   # Kafka's streamsGroup(groupId)
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not isinstance(group, StreamsGroup):
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")
        if request.shutdown_application:
            group.shutdown_request_member_id = member_id
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {group_id}.")
        log.info("member left the streams group", group=group_id, member=member_id)
        self.stats.history.member_left(group_id, member_id, "left")
        return (self.fence_member(group, member),
                _Response(error_code=0, member_id=member_id,
                          member_epoch=request.member_epoch, status=[]))

    def fence_member(self, group: StreamsGroup, member: StreamsGroupMember) -> list:
        """The records that remove a member and bump the group epoch (Kafka's
        streamsGroupFenceMember); the others get its tasks at their next heartbeats."""
        gid = group.group_id
        mid = member.member_id
        self.cancel_timers(gid, mid)
        self.stats.streams_group_rebalances_total += 1
        return [srec.tombstone(srec.CURRENT_MEMBER_ASSIGNMENT, gid, mid),
                srec.tombstone(srec.TARGET_ASSIGNMENT_MEMBER, gid, mid),
                srec.tombstone(srec.MEMBER_METADATA, gid, mid),
                srec.group_epoch_record(gid, group.group_epoch + 1, group.metadata_hash,
                                        group.validated_topology_epoch,
                                        group.last_assignment_configs)]

    # ------------------------------------------------------------------ timeouts
    def after_heartbeat(self, group_id: str, member_id: str) -> None:
        """Once the heartbeat's records are stored: the session starts again, and a member
        that must revoke tasks gets its rebalance timeout."""
        group = self.groups.get(group_id)
        if not isinstance(group, StreamsGroup):
            return
        member = group.members.get(member_id)
        if member is None:
            return
        self.timer.extend(("streams-session", group_id, member_id),
                          self.session_timeout_ms(group_id),
                          lambda: self.expire_member(group_id, member_id, "session"))
        key = ("streams-revocation", group_id, member_id)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if not self.timer.is_scheduled(key):
                epoch = member.member_epoch
                self.timer.schedule(key, max(member.rebalance_timeout_ms, 0),
                                    lambda: self.expire_member(group_id, member_id, "revocation",
                                                               epoch))
        else:
            self.timer.cancel(key)

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        for kind in ("streams-session", "streams-revocation"):
            self.timer.cancel((kind, group_id, member_id))

    def expire_member(self, group_id: str, member_id: str, why: str = "session",
                      epoch: int | None = None) -> None:
        """Fence a member whose session expired, or that did not revoke its tasks within its
        rebalance timeout, through the write path."""
        group = self.groups.get(group_id)
        if not isinstance(group, StreamsGroup) or self.context.loading:
            return
        member = group.members.get(member_id)
        if member is None:
            return
        if why == "revocation" and (member.state is not MemberState.UNREVOKED_PARTITIONS
                                    or member.member_epoch != epoch):
            return
        log.info("streams group member fenced", group=group_id, member=member_id, reason=why)
        self.stats.expired_members_total += 1
        self.stats.history.member_left(group_id, member_id, "expired" if why == "session"
                                       else "did not revoke in time")
        self.context.append(CoordinatorResult(self.fence_member(group, member)))

    # ------------------------------------------------------------------ replay
    def replay(self, key: srec.StreamsKey, value: bytes | None, replay: bool) -> None:
        """Apply one streams group record, live (once stored) or at load."""
        kind = key.type
        group_id = key.group
        group = self.groups.get(group_id)
        if isinstance(group, StreamsGroup) and group.state is DEAD:
            if kind == srec.GROUP_METADATA and value is None:
                self._remove_group(group)
            return
        if not isinstance(group, StreamsGroup):
            if value is None:
                return
            if group is not None and not _is_simple(group):
                log.warning("streams group record for a group of another type ignored",
                            group=group_id)
                return
            group = self.groups[group_id] = self._new_group(group_id, group)
        group.persisted = True
        v = None if value is None else srec.decode_value(kind, value)
        mid = key.member
        if kind == srec.GROUP_METADATA:
            if v is None:
                self._remove_group(group)
                return
            if not replay and v.epoch > group.group_epoch:
                self.stats.history.started(group_id, self.clock(), f"group epoch bumped to "
                                           f"{v.epoch}", None, group.group_epoch, "assign")
            group.group_epoch = v.epoch
            group.metadata_hash = v.metadata_hash
            group.validated_topology_epoch = v.validated_topology_epoch
            group.last_assignment_configs = {c.key: c.value
                                             for c in v.last_assignment_configs or ()}
        elif kind == srec.TOPOLOGY:
            group.topology = None if v is None else StreamsTopology.from_message(v)
            group.configured = None
        elif kind == srec.MEMBER_METADATA:
            if v is None:
                if group.remove_member(mid) is not None and not replay:
                    self.cancel_timers(group_id, mid)
            else:
                old = group.members.get(mid)
                if old is None:
                    old = StreamsGroupMember(mid)
                    if not replay:
                        self.stats.history.member_joined(group_id, mid, v.client_id)
                endpoint = None if v.user_endpoint is None else (v.user_endpoint.host,
                                                                 v.user_endpoint.port)
                group.update_member(old.replace(
                    instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
                    client_host=v.client_host, rebalance_timeout_ms=v.rebalance_timeout_ms,
                    topology_epoch=v.topology_epoch, process_id=v.process_id,
                    user_endpoint=endpoint,
                    client_tags=tuple(sorted((kv.key, kv.value) for kv in v.client_tags or ()))))
        elif kind == srec.TARGET_ASSIGNMENT_MEMBER:
            if v is None:
                group.target.pop(mid, None)
            else:
                group.target[mid] = srec.tasks_from(v)[0]
        elif kind == srec.TARGET_ASSIGNMENT_METADATA:
            if v is not None:
                group.assignment_epoch = v.assignment_epoch
                group.assignment_timestamp = v.assignment_timestamp
                if not replay:
                    self.stats.history.phase(group_id, self.clock(), "reconcile",
                                             v.assignment_epoch)
        elif kind == srec.CURRENT_MEMBER_ASSIGNMENT:
            old = group.members.get(mid)
            if v is None:
                if old is not None:
                    group.update_member(old.replace(
                        member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                        assigned={}, pending_revocation={}, assignment_epochs={}))
            else:
                assigned, epochs = srec.tasks_from(v)
                pending, pending_epochs = srec.tasks_from(v, "_pending_revocation")
                epochs.update(pending_epochs)
                group.update_member((old or StreamsGroupMember(mid)).replace(
                    member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                    state=MEMBER_STATES_BY_VALUE.get(v.state, MemberState.UNKNOWN),
                    assigned=assigned, pending_revocation=pending, assignment_epochs=epochs))
        self._touched.add(group)

    def settle_states(self) -> None:
        """Once a batch of records is applied: each touched group's state; a rebalance in
        the history ends when the group is Stable or Empty."""
        now = self.clock()
        history = self.stats.history
        for group in self._touched:
            group.update_state(now)
            if group.state in (STABLE, EMPTY) and history.in_progress(group.group_id):
                history.ended(group.group_id, now, "stable" if group.state is STABLE
                              else "empty", len(group.members), group.group_epoch)
        self._touched.clear()

    def _remove_group(self, group: StreamsGroup) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        for member_id in list(group.members):
            self.cancel_timers(group.group_id, member_id)
        self.timer.cancel(("streams-initial", group.group_id))
        self.timer.cancel(("streams-assign", group.group_id))

    def group_tombstones(self, group: StreamsGroup) -> list:
        """The records that delete an empty group (Kafka's createGroupTombstoneRecords)."""
        gid = group.group_id
        records = [srec.tombstone(srec.CURRENT_MEMBER_ASSIGNMENT, gid, mid)
                   for mid in group.members]
        records += [srec.tombstone(srec.TARGET_ASSIGNMENT_MEMBER, gid, mid)
                    for mid in group.target]
        records.append(srec.tombstone(srec.TARGET_ASSIGNMENT_METADATA, gid))
        records += [srec.tombstone(srec.MEMBER_METADATA, gid, mid) for mid in group.members]
        records.append(srec.tombstone(srec.TOPOLOGY, gid))
        records.append(srec.tombstone(srec.GROUP_METADATA, gid))
        return records

    # ------------------------------------------------------------------ loading
    def on_loaded(self, group: StreamsGroup) -> None:
        """A loaded group's members get a whole session (and revocation timeout) to come back."""
        group.topics = self.topics
        for member_id in group.members:
            self.after_heartbeat(group.group_id, member_id)

    def configured(self, group: StreamsGroup):
        """The group's topology configured against the topics as they are (derived state,
        kept until the topology or the topics change); None if it cannot be."""
        if group.topology is None:
            return None
        version = self.topics.version()
        if group.configured is None or group.metadata_version != version:
            try:
                group.configured = configure(group.topology, self.partition_count,
                                             group.metadata_hash)
            except TopologyError:
                return None
        return group.configured

    def unload_group(self, group: StreamsGroup) -> None:
        for member_id in list(group.members):
            self.cancel_timers(group.group_id, member_id)

    # ================================================================== StreamsGroupDescribe
    def describe(self, group_id: str):
        r = m.StreamsGroupDescribeResponse
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            return r.DescribedGroup(error_code=int(E.GROUP_ID_NOT_FOUND),
                                    error_message=f"Group {group_id} not found.",
                                    group_id=group_id)
        if not isinstance(group, StreamsGroup):
            return r.DescribedGroup(error_code=int(E.GROUP_ID_NOT_FOUND),
                                    error_message=f"Group {group_id} is not a streams group.",
                                    group_id=group_id)

        def task_ids(tasks: dict) -> list:
            return [r.TaskIds(subtopology_id=sub, partitions=sorted(ps))
                    for sub, ps in sorted(tasks.items())]

        def assignment(tasks: dict) -> object:
            return r.Assignment(**{f"{kind}_tasks": task_ids(
                {sub: ps for (k, sub), ps in tasks.items() if k == kind}) for kind in KINDS})

        members = []
        for mm in group.members.values():
            members.append(r.Member(
                member_id=mm.member_id, member_epoch=mm.member_epoch,
                instance_id=mm.instance_id, rack_id=mm.rack_id, client_id=mm.client_id,
                client_host=mm.client_host, topology_epoch=mm.topology_epoch,
                process_id=mm.process_id,
                user_endpoint=None if mm.user_endpoint is None else r.Endpoint(
                    host=mm.user_endpoint[0], port=mm.user_endpoint[1]),
                client_tags=[r.KeyValue(key=k, value=v) for k, v in mm.client_tags],
                task_offsets=[], task_end_offsets=[],
                assignment=assignment(mm.assigned),
                target_assignment=assignment(group.target.get(mm.member_id, {})),
                is_classic=False))
        topology = None
        if group.topology is not None:
            topology = r.Topology(epoch=group.topology.epoch,
                                  subtopologies=self._describe_subtopologies(group))
        return r.DescribedGroup(error_code=0, group_id=group_id, group_state=group.state.value,
                                group_epoch=group.group_epoch,
                                assignment_epoch=group.assignment_epoch, topology=topology,
                                members=members)

    def _describe_subtopologies(self, group: StreamsGroup) -> list:
        r = m.StreamsGroupDescribeResponse
        configured = self.configured(group)
        if configured is not None and not configured.ready:
            configured = None       # Kafka describes the topology as sent until it is ready
        subs = []

        def info(t, derived) -> object:
            n = t.partitions
            if derived is not None and t.name in derived:
                n = derived[t.name].partitions
            return r.TopicInfo(name=t.name, partitions=n,
                               replication_factor=t.replication_factor,
                               topic_configs=[r.KeyValue(key=k, value=v) for k, v in t.configs])

        for s in sorted(group.topology.subtopologies, key=lambda s: s.subtopology_id):
            cs = configured.subtopologies.get(s.subtopology_id) \
                if configured is not None and configured.subtopologies else None
            subs.append(r.Subtopology(
                subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
                repartition_sink_topics=list(s.repartition_sink_topics),
                state_changelog_topics=[info(t, cs.state_changelog_topics if cs else None)
                                        for t in s.state_changelog_topics],
                repartition_source_topics=[info(t, cs.repartition_source_topics if cs else None)
                                           for t in s.repartition_source_topics]))
        return subs


def _is_simple(group) -> bool:
    """A classic group that only holds committed offsets (no protocol, no members)."""
    return getattr(group, "group_type", "classic") == "classic" and \
        getattr(group, "protocol_type", None) is None and not group.members and \
        group.state in (EMPTY, DEAD)


def validate(request) -> None:
    """Kafka's throwIfStreamsGroupHeartbeatRequestIsUsingUnsupportedFeatures and
    throwIfStreamsGroupHeartbeatRequestIsInvalid, in its order."""
    if request.instance_id is not None:
        raise _invalid("Static membership is not yet supported.")
    if request.task_offsets is not None:
        raise _invalid("TaskOffsets are not supported yet.")
    if request.task_end_offsets is not None:
        raise _invalid("TaskEndOffsets are not supported yet.")
    if request.warmup_tasks:
        raise _invalid("WarmupTasks are not supported yet.")
    if request.topology is not None:
        for s in request.topology.subtopologies or ():
            if s.source_topic_regex:
                raise _invalid("Regular expressions for source topics are not supported yet.")
    if _blank(request.member_id) or not request.member_id:
        raise _invalid("MemberId can't be empty.")
    if _blank(request.group_id) or not request.group_id:
        raise _invalid("GroupId can't be empty.")
    if _blank(request.instance_id):
        raise _invalid("InstanceId can't be empty.")
    if _blank(request.rack_id):
        raise _invalid("RackId can't be empty.")
    epoch = request.member_epoch
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        # Kafka's throwIfNotEmptyCollection: null is not empty either
        if request.active_tasks is None or request.active_tasks:
            raise _invalid("ActiveTasks must be empty when (re-)joining.")
        if request.standby_tasks is None or request.standby_tasks:
            raise _invalid("StandbyTasks must be empty when (re-)joining.")
        if request.warmup_tasks is None or request.warmup_tasks:
            raise _invalid("WarmupTasks must be empty when (re-)joining.")
        if request.topology is None:
            raise _invalid("Topology must be non-null when (re-)joining.")
        try:
            validate_request_topology(request.topology)
        except TopologyError as exc:
            raise GroupError(exc.code, exc.message) from None
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise _invalid(f"MemberEpoch is {epoch}, but must be greater than or equal to -2.")
    kinds = (request.active_tasks, request.standby_tasks, request.warmup_tasks)
    if any(k is not None for k in kinds) and any(k is None for k in kinds):
        raise _invalid("If one task-type is non-null, all must be non-null.")
    if epoch != 0 and request.topology is not None:
        raise _invalid("Topology can only be provided when (re-)joining.")


def _check_tasks(configured, task_ids) -> None:
    """Kafka's throwIfRequestContainsInvalidTasks."""
    for t in task_ids or ():
        s = configured.subtopologies.get(t.subtopology_id)
        if s is None:
            raise _invalid(f"Subtopology {t.subtopology_id} does not exist in the topology.")
        for p in t.partitions:
            if p < 0 or p >= s.num_tasks:
                raise _invalid(f"Task {p} for subtopology {t.subtopology_id} is invalid. "
                               f"Number of tasks for this subtopology: {s.num_tasks}")


def _check_epoch(member: StreamsGroupMember, epoch: int, request) -> None:
    """Kafka's throwIfStreamsGroupMemberEpochIsInvalid (epoch 0 always rejoins)."""
    if epoch == 0:
        return
    if epoch > member.member_epoch:
        raise GroupError(E.FENCED_MEMBER_EPOCH,
                         f"The streams group member has a greater member epoch ({epoch}) than "
                         f"the one known by the group coordinator ({member.member_epoch}). The "
                         "member must abandon all its partitions and rejoin.")
    if epoch < member.member_epoch:
        owned_ok = True
        for kind, sent in ((ACTIVE, request.active_tasks), (STANDBY, request.standby_tasks),
                           (WARMUP, request.warmup_tasks)):
            if sent is None:
                continue
            for sub, ps in _tasks_in(sent).items():
                if not ps <= member.assigned.get((kind, sub), frozenset()):
                    owned_ok = False
        if epoch != member.previous_member_epoch or not owned_ok:
            raise GroupError(E.FENCED_MEMBER_EPOCH,
                             f"The streams group member has a smaller member epoch ({epoch}) "
                             "than the one known by the group coordinator "
                             f"({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")
