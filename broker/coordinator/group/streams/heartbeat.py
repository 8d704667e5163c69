"""StreamsGroupHeartbeat's checks and answers: what a request must hold (Kafka refuses the
features it does not serve yet: static members, warm-up tasks, task offsets, source topic
regexes), the tasks it names, a member's epoch, the response's statuses and the members'
endpoints with their partitions. The steps a heartbeat takes are the manager's (manager.py).
"""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..group import GroupError
from .configured_topology import partition_count
from .group import ACTIVE, LEAVE_GROUP_STATIC_MEMBER_EPOCH, STANDBY, WARMUP, StreamsGroupMember
from .topology import TopologyError, validate_request_topology

E = ErrorCode
_Response = m.StreamsGroupHeartbeatResponse


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


def _invalid(message: str) -> GroupError:
    return GroupError(E.INVALID_REQUEST, message)


def _blank(value: str | None) -> bool:
    return value is not None and value.strip() == ""


def check_tasks(configured, task_ids) -> None:
    """Kafka's throwIfRequestContainsInvalidTasks."""
    for t in task_ids or ():
        s = configured.subtopologies.get(t.subtopology_id)
        if s is None:
            raise _invalid(f"Subtopology {t.subtopology_id} does not exist in the topology.")
        for p in t.partitions:
            if p < 0 or p >= s.num_tasks:
                raise _invalid(f"Task {p} for subtopology {t.subtopology_id} is invalid. "
                               f"Number of tasks for this subtopology: {s.num_tasks}")


def check_epoch(member: StreamsGroupMember, epoch: int, request) -> None:
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
            for sub, ps in tasks_in(sent).items():
                if not ps <= member.assigned.get((kind, sub), frozenset()):
                    owned_ok = False
        if epoch != member.previous_member_epoch or not owned_ok:
            raise GroupError(E.FENCED_MEMBER_EPOCH,
                             f"The streams group member has a smaller member epoch ({epoch}) "
                             "than the one known by the group coordinator "
                             f"({member.member_epoch}). The member must abandon all its "
                             "partitions and rejoin.")


def tasks_in(task_ids) -> dict:
    """A request's TaskIds of one kind: subtopology -> partitions (none when empty)."""
    return {t.subtopology_id: frozenset(t.partitions) for t in task_ids or () if t.partitions}


# ---------------------------------------------------------------------- answers
def error_answer(code: int, message: str | None):
    return _Response(error_code=int(code), error_message=message)


def status(code: int, detail: str):
    """One of the response's statuses (topology.Status)."""
    return _Response.Status(status_code=code, status_detail=detail)


def endpoints_to_partitions(topics, group, updated: StreamsGroupMember, configured) -> list:
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
                       active_partitions=_partitions(topics, mm.tasks(ACTIVE), configured),
                       standby_partitions=_partitions(topics, mm.tasks(STANDBY), configured)))
    return out


def _partitions(topics, tasks: dict, configured) -> list:
    out = []
    for sub, partitions in sorted(tasks.items()):
        s = configured.subtopologies.get(sub)
        if s is None:
            continue
        for topic in sorted(s.source_topics | set(s.repartition_source_topics)):
            n = partition_count(topics, topic)
            if n is None:
                continue
            out.append(_Response.TopicPartition(topic=topic,
                                                partitions=sorted(partitions)[:n]))
    return out
