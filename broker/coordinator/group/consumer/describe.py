"""ConsumerGroupDescribe: a consumer group as its members and the coordinator see it, each
member's current and target assignment by topic id and name."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..context import GroupContext
from ..group import DEAD
from .group import ConsumerGroup

E = ErrorCode


def describe_group(context: GroupContext, group_id: str):
    """The DescribedGroup of ``group_id`` (GROUP_ID_NOT_FOUND unless a consumer group)."""
    cls = m.ConsumerGroupDescribeResponse.DescribedGroup
    group = context.groups.get(group_id)
    if group is None or group.state is DEAD:
        return cls(error_code=E.GROUP_ID_NOT_FOUND,
                   error_message=f"Group {group_id} not found.", group_id=group_id)
    if not isinstance(group, ConsumerGroup):
        return cls(error_code=E.GROUP_ID_NOT_FOUND,
                   error_message=f"Group {group_id} is not a consumer group.",
                   group_id=group_id)
    topics = context.topics
    member_cls = m.ConsumerGroupDescribeResponse.Member
    members = []
    for member in group.members.values():
        members.append(member_cls(
            member_id=member.member_id, instance_id=member.instance_id,
            rack_id=member.rack_id, member_epoch=member.member_epoch,
            client_id=member.client_id, client_host=member.client_host,
            subscribed_topic_names=sorted(member.subscribed_topic_names),
            subscribed_topic_regex=member.subscribed_topic_regex,
            assignment=_assignment(topics, member.assigned),
            target_assignment=_assignment(topics, group.target.get(member.member_id, {})),
            member_type=1 if member.classic_metadata is None else 0))
    return cls(error_code=0, group_id=group_id, group_state=group.state.value,
               group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
               assignor_name=group.preferred_assignor(
                   context.config.group_consumer_assignors[0]),
               members=members)


def _assignment(topics, assignment):
    cls = m.ConsumerGroupDescribeResponse.Assignment
    tp_cls = m.ConsumerGroupDescribeResponse.TopicPartitions
    out = []
    for topic_id, partitions in sorted(assignment.items(), key=lambda kv: kv[0].bytes):
        found = topics.by_id(topic_id)
        out.append(tp_cls(topic_id=topic_id, topic_name=found[0] if found else "",
                          partitions=sorted(partitions)))
    return cls(topic_partitions=out)
