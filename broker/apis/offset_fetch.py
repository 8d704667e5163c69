"""OffsetFetch: a group's committed offsets, or several groups' from v8 (broker/coordinator/
group/offsets.py). With an authorizer each group needs DESCRIBE; of its topics, those the principal
may not DESCRIBE are answered TOPIC_AUTHORIZATION_FAILED when named and left out of "all topics",
as Kafka's KafkaApis does.

v10 names topics by id (KIP-848): they are resolved to names here and back in the answer; an
id this broker does not know is UNKNOWN_TOPIC_ID for each of its partitions."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType

NAME = "OffsetFetch"
#: from this version topics go by id
FIRST_TOPIC_ID_VERSION = 10

DESCRIBE = AclOperation.DESCRIBE
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def handle(broker, ctx, request, respond) -> None:
    by_id = ctx.api_version >= FIRST_TOPIC_ID_VERSION
    if by_id:
        for g in request.groups:
            for t in g.topics or ():
                t.name = broker.topics.name_of(t.topic_id)
    if broker.authorizer is not None:
        respond = _authorized(broker.authorizer, ctx, request, respond)
        if respond is None:
            return
    if by_id:
        respond = _by_topic_id(broker, request, respond)
    broker.coordinator.offset_fetch(request, ctx.api_version, ctx, respond)


def _authorized(auth, ctx, request, respond):
    """A group needs DESCRIBE; of its topics, those the principal may not DESCRIBE are answered
    TOPIC_AUTHORIZATION_FAILED when named, and left out of "all topics"."""
    version = ctx.api_version
    may_group = auth.predicate(ctx, DESCRIBE, GROUP)
    may_topic = auth.predicate(ctx, DESCRIBE, TOPIC)
    if version >= 8:
        Group_ = m.OffsetFetchResponse.OffsetFetchResponseGroup
        Topic_ = m.OffsetFetchResponse.OffsetFetchResponseTopics
        Partition_ = m.OffsetFetchResponse.OffsetFetchResponsePartitions
        groups = request.groups
    else:
        Topic_ = m.OffsetFetchResponse.OffsetFetchResponseTopic
        Partition_ = m.OffsetFetchResponse.OffsetFetchResponsePartition
        groups = [request]

    def ids(t) -> dict:
        return {"topic_id": t.topic_id} if version >= 8 else {}  # before v8 topics have no id

    def failed(topics, code):
        return [Topic_(name=t.name, **ids(t), partitions=[
            Partition_(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                       metadata="", error_code=code) for p in t.partition_indexes])
            for t in topics]
    denied_topics = {}
    allowed = []
    for g in groups:
        if not may_group(g.group_id):
            continue
        allowed.append(g)
        if g.topics is not None:  # a topic whose id is unknown (no name) is left for later
            denied_topics[g.group_id] = failed(
                [t for t in g.topics if t.name is not None and not may_topic(t.name)],
                TOPIC_DENIED)
            g.topics = [t for t in g.topics if t.name is None or may_topic(t.name)]

    def settle(group_id, answer) -> None:
        """Add the refused topics to an answer the coordinator gave without error."""
        if answer.error_code != ErrorCode.NONE:
            return
        if group_id in denied_topics:
            answer.topics.extend(denied_topics[group_id])
        else:
            answer.topics = [t for t in answer.topics if may_topic(t.name)]

    if version < 8:
        if allowed:
            def respond_single(response) -> None:
                settle(request.group_id, response)
                respond(response)
            return respond_single
        topics = failed(request.topics or (), GROUP_DENIED) if version < 2 else []
        respond(m.OffsetFetchResponse(error_code=GROUP_DENIED, topics=topics))
        return None
    request.groups = allowed

    def respond_groups(response) -> None:
        answered = {g.group_id: g for g in response.groups}
        out = []
        for g in groups:
            answer = answered.get(g.group_id)
            if answer is None:
                out.append(Group_(group_id=g.group_id, error_code=GROUP_DENIED, topics=[]))
            else:
                settle(g.group_id, answer)
                out.append(answer)
        response.groups = out
        respond(response)
    if not allowed:
        respond_groups(m.OffsetFetchResponse(groups=[]))
        return None
    return respond_groups


def _by_topic_id(broker, request, respond):
    """v10 names topics by id: each is named before the checks (None where the id is unknown);
    here the unknown ones are taken out, and the answer gets the ids back, with the unknown ones
    answered UNKNOWN_TOPIC_ID (a topic the coordinator lists that no longer exists has no id to
    answer with and is left out, as on Kafka)."""
    Topic_ = m.OffsetFetchResponse.OffsetFetchResponseTopics
    Partition_ = m.OffsetFetchResponse.OffsetFetchResponsePartitions
    unknown = []  # per group, in order: its topics whose id is unknown
    for g in request.groups:
        unknown.append([t for t in g.topics or () if t.name is None])
        if g.topics is not None:
            g.topics = [t for t in g.topics if t.name is not None]
    topics = broker.topics

    def respond_with_ids(response) -> None:
        # the coordinator answers the groups in the request's order
        for g, missing in zip(response.groups, unknown):
            if g.error_code != ErrorCode.NONE:
                continue  # a group-level error answers no topics
            named = []
            for t in g.topics:
                topic = topics.get(t.name)
                if topic is not None:  # else it has no id to answer with: Kafka leaves it out
                    t.topic_id = topic.topic_id
                    named.append(t)
            g.topics = named
            g.topics.extend(Topic_(name=None, topic_id=t.topic_id, partitions=[
                Partition_(partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                           metadata="", error_code=ErrorCode.UNKNOWN_TOPIC_ID)
                for p in t.partition_indexes]) for t in missing)
        respond(response)
    return respond_with_ids
