"""StreamsGroupDescribe: a streams group as its members and the coordinator see it (Kafka's
StreamsGroup.asDescribedGroup): each member's current and target tasks, and the topology,
with the partition counts of its internal topics once it is configured."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..context import GroupContext
from ..group import DEAD
from .configured_topology import configured_topology
from .group import KINDS, StreamsGroup

E = ErrorCode
_R = m.StreamsGroupDescribeResponse


def describe_group(context: GroupContext, group_id: str):
    """The DescribedGroup of ``group_id`` (GROUP_ID_NOT_FOUND unless a streams group)."""
    r = _R
    group = context.groups.get(group_id)
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
                              subtopologies=_subtopologies(context.topics, group))
    return r.DescribedGroup(error_code=0, group_id=group_id, group_state=group.state.value,
                            group_epoch=group.group_epoch,
                            assignment_epoch=group.assignment_epoch, topology=topology,
                            members=members)


def _subtopologies(topics, group: StreamsGroup) -> list:
    r = _R
    configured = configured_topology(topics, group)
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
