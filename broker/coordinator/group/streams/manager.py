"""StreamsGroupHeartbeat for the streams groups of one shard (the streams half of Kafka's
GroupMetadataManager), and what the shard asks of its streams groups.

A heartbeat goes as a consumer-group heartbeat does (consumer/manager.py), on the same shard,
write path and keyed timer:

1. the member is created or updated;
2. the first member's topology is stored;
3. the topology is configured against the topics whenever they change (topology.py,
   configured_topology.py), which tells the members a status (missing source topics, internal
   topics to create, ...); a changed member, topology, topic metadata or assignment config
   bumps the group epoch;
4. a group epoch ahead of the target assignment computes a new one with the sticky task
   assignor (target_assignment.py, assignor.py);
5. the member moves towards its target through consumer/reconciliation.py, revoking before
   another member gets a task.

The handler returns the records of what changes, the answer and the internal topics to create;
the shard stores the records, replays them into the group (replay.py, the same code that
rebuilds the group at load) and only then answers. The request's checks and answers are
heartbeat.py's; session and revocation timeouts are keyed timers (timeouts.py) that fence a
member through the same write path; StreamsGroupDescribe is describe.py's.

Kafka 4.3.1 serves no static members, warm-up tasks, task offsets or source topic regexes in
streams groups yet; they are refused as it refuses them.
"""
from __future__ import annotations

import structlog

from protocol import messages as m
from protocol.errors import ErrorCode

from ...common.result import CoordinatorResult
from ...common.timer import CoordinatorTimer
from ..consumer.reconciliation import FencedMemberEpoch
from ..context import GroupContext
from ..group import DEAD, GroupError
from . import records as srec, settings
from .configured_topology import configure_against, topology_metadata_hash
from .group import (KINDS, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                    StreamsGroup, StreamsGroupMember, is_simple, new_group)
from .describe import describe_group
from .heartbeat import (check_epoch, check_tasks, endpoints_to_partitions, error_answer, status,
                        validate)
from .replay import Replay
from .target_assignment import TargetAssignment, reconcile_member
from .timeouts import MemberTimeouts
from .topology import Status, StreamsTopology, TopologyError

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


class StreamsGroupManager:
    """The streams-group protocol for the streams groups of one shard."""

    def __init__(self, context: GroupContext) -> None:
        self.context = context
        self.groups = context.groups
        self.config = context.config
        self.clock = context.clock
        self.stats = context.stats
        self.timer = CoordinatorTimer(context.timer)
        self.timeouts = MemberTimeouts(context, self.timer, self.write_fence)
        self.target = TargetAssignment(context, self.timer)
        self.replayer = Replay(context, self.timeouts.cancel, self._group_removed)
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
        return status(code, f"{FORCED_DETAILS[code]} ({tag})")

    @property
    def topics(self):
        return self.context.topics

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
        except (GroupError, TopologyError) as exc:
            return [], error_answer(exc.code, exc.message), {}
        except FencedMemberEpoch as exc:
            return [], error_answer(exc.code, str(exc)), {}

    def _group(self, group_id: str, create: bool) -> StreamsGroup:
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            if not create:
                raise GroupError(E.GROUP_ID_NOT_FOUND, f"Streams group {group_id} not found.")
            return new_group(group_id, self.clock(), self.topics)
        if isinstance(group, StreamsGroup):
            return group
        if create and is_simple(group):
            return new_group(group_id, self.clock(), self.topics, group)
        raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a streams group.")

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
            check_epoch(member, epoch, request)

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
                raise GroupError(E.INVALID_REQUEST, "Topology updates are not supported yet.")
        if topology is None:
            raise GroupError(E.UNKNOWN_SERVER_ERROR,
                             "The topology is null and the group topology is also null.")
        if updated.topology_epoch < topology.epoch:
            statuses.append(status(
                Status.STALE_TOPOLOGY,
                f"The member's topology epoch {updated.topology_epoch} is behind the group's "
                f"topology epoch {topology.epoch}."))

        # 3. the topology against the topics
        configured = group.configured
        digest = group.metadata_hash
        version = self.topics.version()
        reconfigure = group.topology is None
        if reconfigure or configured is None or group.metadata_version != version:
            digest = topology_metadata_hash(self.topics, topology)
            if digest != group.metadata_hash:
                bump = reconfigure = True
            if reconfigure or configured is None:
                configured = configure_against(self.topics, topology, digest)
                if group.topology is not None:
                    group.configured = configured
            if group.topology is not None:
                group.metadata_version = version
        validated_epoch = -1
        if configured.ready:
            validated_epoch = topology.epoch
            for kind in (request.active_tasks, request.standby_tasks, request.warmup_tasks):
                check_tasks(configured, kind)
        if validated_epoch != group.validated_topology_epoch:
            bump = True
        configs = settings.assignment_configs(self.context, group_id)
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

        if was_empty:   # the first rebalance of an empty group waits for more members
            self.target.delay_initial(group_id)

        # 4. the target assignment
        target_epoch, target, target_records = self.target.update(
            group, group_epoch, updated, configured, configs, statuses, now)
        records += target_records

        # 5. reconciliation
        reconciled = reconcile_member(group, updated, target_epoch, target, request)
        if not reconciled.assignment_equals(member):
            records.append(srec.current_assignment_record(group_id, reconciled))
        if request.shutdown_application:
            group.shutdown_request_member_id = member_id

        response = _Response(
            error_code=0, member_id=member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=settings.heartbeat_interval_ms(self.context, group_id))
        if joining or dict(reconciled.assigned) != dict(member.assigned):
            cls = _Response.TaskIds
            for kind in KINDS:
                setattr(response, f"{kind}_tasks",
                        [cls(subtopology_id=sub, partitions=sorted(ps))
                         for sub, ps in sorted(reconciled.tasks(kind).items())])
            if reconciled.user_endpoint is not None:
                group.endpoint_information_epoch += 1
        if group.endpoint_information_epoch != request.endpoint_information_epoch:
            response.partitions_by_user_endpoint = endpoints_to_partitions(
                self.topics, group, reconciled, configured)
        if self.groups.get(group_id) is group:
            response.endpoint_information_epoch = group.endpoint_information_epoch
        to_create = {}
        if configured.status is not None:
            to_create = configured.internal_topics_to_create
            statuses.append(status(*configured.status))
        shutdown_by = group.shutdown_request_member_id
        if shutdown_by is not None:
            statuses.append(status(
                Status.SHUTDOWN_APPLICATION,
                f"Streams group member {shutdown_by} encountered a fatal error and requested a "
                "shutdown for the entire application."))
        forced = self._forced_status(group_id, now)
        if forced is not None:
            statuses.append(forced)
        response.status = statuses
        return records, response, to_create

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
        self.timeouts.cancel(gid, mid)
        self.stats.streams_group_rebalances_total += 1
        return [srec.tombstone(srec.CURRENT_MEMBER_ASSIGNMENT, gid, mid),
                srec.tombstone(srec.TARGET_ASSIGNMENT_MEMBER, gid, mid),
                srec.tombstone(srec.MEMBER_METADATA, gid, mid),
                srec.group_epoch_record(gid, group.group_epoch + 1, group.metadata_hash,
                                        group.validated_topology_epoch,
                                        group.last_assignment_configs)]

    def write_fence(self, group: StreamsGroup, member: StreamsGroupMember) -> None:
        """A member's removal through the write path (its timeouts' ``fence``)."""
        self.context.append(CoordinatorResult(self.fence_member(group, member)))

    # ------------------------------------------------------------------ timeouts (timeouts.py)
    def after_heartbeat(self, group_id: str, member_id: str) -> None:
        self.timeouts.after_heartbeat(group_id, member_id)

    def expire_member(self, group_id: str, member_id: str) -> None:
        self.timeouts.expire_member(group_id, member_id)

    # ------------------------------------------------------------------ replay (replay.py)
    def replay(self, key: srec.StreamsKey, value: bytes | None, replay: bool) -> None:
        self.replayer.replay(key, value, replay)

    def settle_states(self) -> None:
        self.replayer.settle_states()

    def _group_removed(self, group: StreamsGroup) -> None:
        """The group left the table: its members' timers and its assignment's stop."""
        for member_id in list(group.members):
            self.timeouts.cancel(group.group_id, member_id)
        self.target.cancel(group.group_id)

    def group_tombstones(self, group: StreamsGroup) -> list:
        return srec.group_tombstones(group)

    # ------------------------------------------------------------------ loading
    def on_loaded(self, group: StreamsGroup) -> None:
        """A loaded group's members get a whole session (and revocation timeout) to come back."""
        group.topics = self.topics
        for member_id in group.members:
            self.timeouts.after_heartbeat(group.group_id, member_id)

    def unload_group(self, group: StreamsGroup) -> None:
        for member_id in list(group.members):
            self.timeouts.cancel(group.group_id, member_id)

    # ================================================================== StreamsGroupDescribe
    def describe(self, group_id: str):
        return describe_group(self.context, group_id)
