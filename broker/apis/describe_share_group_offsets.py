"""DescribeShareGroupOffsets: each share partition's start offset and (v1) lag, Kafka's
``end offset - start offset - records already delivered past it``, as Kafka's share coordinator
stored them (broker/coordinator/share_state/: the start offset from before the last
acknowledgement moved it, and the delivery-complete count). A partition the group never
read has start offset -1; a topic that does not exist is answered by name with a zero topic id.
Without topics, every share partition of the group (none for an unknown group)."""
from __future__ import annotations

import uuid

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType

NAME = "DescribeShareGroupOffsets"

E = ErrorCode
R = m.DescribeShareGroupOffsetsResponse
ZERO_UUID = uuid.UUID(int=0)


def _partition(broker, group_id: str, topic_id, index: int, partitions, share: bool = True):
    # as Kafka's group coordinator: from the share coordinator's summary of the share partition
    # (of a share group only)
    stored = broker.share_coordinator.store.states.get((group_id, topic_id, index)) \
        if share else None
    if stored is None or stored.start_offset < 0 or not 0 <= index < len(partitions):
        return R.DescribeShareGroupOffsetsResponsePartition(
            partition_index=index, start_offset=-1, leader_epoch=-1, lag=-1, error_code=0)
    start, delivered = stored.start_offset, stored.delivery_complete_count
    if delivered < 0:   # not known (written by WriteShareGroupState v0): Kafka's lag is -1
        return R.DescribeShareGroupOffsetsResponsePartition(
            partition_index=index, start_offset=start, leader_epoch=stored.leader_epoch,
            lag=-1, error_code=0)
    lag = partitions[index].log.high_watermark - start - delivered
    return R.DescribeShareGroupOffsetsResponsePartition(
        partition_index=index, start_offset=start, leader_epoch=stored.leader_epoch,
        lag=max(0, lag), error_code=0)


def _group(broker, ctx, g):
    group_id = g.group_id
    auth = broker.authorizer
    if auth is not None and not auth.allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP,
                                             group_id):
        return R.DescribeShareGroupOffsetsResponseGroup(
            group_id=group_id, topics=[], error_code=E.GROUP_AUTHORIZATION_FAILED)
    if not group_id:
        return R.DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=[],
                                                        error_code=E.INVALID_GROUP_ID)
    shard = broker.coordinator.shard_for(group_id)
    if shard.loading:
        return R.DescribeShareGroupOffsetsResponseGroup(
            group_id=group_id, topics=[], error_code=E.COORDINATOR_LOAD_IN_PROGRESS)
    topics = broker.topics
    wanted = []
    group = shard.groups.get(group_id)
    share = getattr(group, "group_type", None) == "share"
    if g.topics is None:
        if group is not None and getattr(group, "group_type", None) != "share":
            return R.DescribeShareGroupOffsetsResponseGroup(
                group_id=group_id, topics=[], error_code=E.GROUP_ID_NOT_FOUND,
                error_message=f"Group {group_id} is not a share group.")
        by_topic: dict = {}
        for topic_id, index in broker.shares.partitions_of(group_id):
            by_topic.setdefault(topic_id, []).append(index)
        for topic_id, indexes in by_topic.items():
            name = topics.name_of(topic_id)
            if name is not None:
                wanted.append((name, sorted(indexes)))
    else:
        wanted = [(t.topic_name, list(t.partitions)) for t in g.topics]
    out = []
    for name, indexes in wanted:
        topic = topics.get(name)
        if topic is None:
            out.append(R.DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=ZERO_UUID, partitions=[
                    R.DescribeShareGroupOffsetsResponsePartition(
                        partition_index=i, start_offset=-1, leader_epoch=0, lag=-1)
                    for i in indexes]))
            continue
        out.append(R.DescribeShareGroupOffsetsResponseTopic(
            topic_name=name, topic_id=topic.topic_id, partitions=[
                _partition(broker, group_id, topic.topic_id, i, topic.partitions, share)
                for i in indexes]))
    return R.DescribeShareGroupOffsetsResponseGroup(group_id=group_id, topics=out, error_code=0)


def handle(broker, ctx, request, respond) -> None:
    respond(R(groups=[_group(broker, ctx, g) for g in request.groups]))
