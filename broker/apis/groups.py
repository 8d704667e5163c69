"""The classic consumer-group APIs: each is answered by the group coordinator (broker/coordinator),
which takes the decoded request, the version and the context, and calls ``respond`` exactly once,
at once or later (delayed operations). This module routes, and with an authorizer checks first
what Kafka's KafkaApis checks before it asks its group coordinator: the group (READ to take
part or commit, DESCRIBE to read, DELETE to delete) and the topics named in the request.

OffsetCommit and OffsetFetch v10 name topics by id (KIP-848); the coordinator keeps offsets by
topic name, so the ids are resolved to names here and back in the answer. As on Kafka, an id this
broker does not know (a topic never created, or deleted, even if re-created under the same name)
is UNKNOWN_TOPIC_ID for each of its partitions, decided after the group's authorization and
before the topics'; a topic the coordinator lists (all topics) that no longer exists has no id
and is left out."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType
from .coordinator_routing import hosted_groups

# (Kafka API name, versions we advertise, GroupCoordinator method)
ENTRIES = [
    ("OffsetCommit", (2, 10), "offset_commit"),
    ("OffsetFetch", (1, 10), "offset_fetch"),
    ("JoinGroup", (0, 9), "join_group"),
    ("Heartbeat", (0, 4), "heartbeat"),
    ("LeaveGroup", (0, 5), "leave_group"),
    ("SyncGroup", (0, 5), "sync_group"),
    ("DescribeGroups", (0, 6), "describe_groups"),
    ("ListGroups", (0, 5), "list_groups"),
    ("DeleteGroups", (0, 2), "delete_groups"),
    ("OffsetDelete", (0, 0), "offset_delete"),
    ("ConsumerGroupHeartbeat", (0, 1), "consumer_group_heartbeat"),
    ("ConsumerGroupDescribe", (0, 1), "consumer_group_describe"),
]

#: the APIs of the consumer protocol (KIP-848), served when group.coordinator.rebalance.protocols
#: names "consumer"
CONSUMER_PROTOCOL_APIS = ("ConsumerGroupHeartbeat", "ConsumerGroupDescribe")

E = ErrorCode
READ, DELETE, DESCRIBE = AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC
GROUP_DENIED, TOPIC_DENIED = E.GROUP_AUTHORIZATION_FAILED, E.TOPIC_AUTHORIZATION_FAILED
OMITTED = -2147483648
#: from this version OffsetCommit and OffsetFetch name topics by id
FIRST_TOPIC_ID_VERSION = 10


def route(method: str):
    check = CHECKS.get(method)
    by_topic_id = TOPIC_ID_STAGES.get(method)

    def handle(broker, ctx, request, respond) -> None:
        by_id = by_topic_id is not None and ctx.api_version >= FIRST_TOPIC_ID_VERSION
        if by_id:
            _name_topics(broker, method, request)
        if broker.authorizer is not None and check is not None:
            respond = check(broker.authorizer, ctx, request, respond)
            if respond is None:
                return
        if by_id:
            respond = by_topic_id(broker, request, respond)
            if respond is None:
                return
        if method == "list_groups":
            respond = hosted_groups(broker, ctx, respond)
        getattr(broker.coordinator, method)(request, ctx.api_version, ctx, respond)
    handle.__name__ = method
    return handle


# Each check takes (authorization, ctx, request, respond) and returns the ``respond`` the
# coordinator is to call (wrapped to add what was refused), or None once it answered.

def _join_group(auth, ctx, request, respond):
    if auth.allowed(ctx, READ, GROUP, request.group_id):
        return respond
    respond(m.JoinGroupResponse(error_code=GROUP_DENIED, generation_id=-1,
                                protocol_name=None if ctx.api_version >= 7 else "",
                                leader="", member_id="", members=[]))
    return None


def _sync_group(auth, ctx, request, respond):
    if ctx.api_version >= 5 and (request.protocol_type is None or request.protocol_name is None):
        return respond  # INCONSISTENT_GROUP_PROTOCOL comes first
    if auth.allowed(ctx, READ, GROUP, request.group_id):
        return respond
    respond(m.SyncGroupResponse(error_code=GROUP_DENIED, assignment=b""))
    return None


def _heartbeat(auth, ctx, request, respond):
    if auth.allowed(ctx, READ, GROUP, request.group_id):
        return respond
    respond(m.HeartbeatResponse(error_code=GROUP_DENIED))
    return None


def _leave_group(auth, ctx, request, respond):
    if auth.allowed(ctx, READ, GROUP, request.group_id):
        return respond
    respond(m.LeaveGroupResponse(error_code=GROUP_DENIED, members=[]))
    return None


def _offset_commit(auth, ctx, request, respond):
    Topic_ = m.OffsetCommitResponse.OffsetCommitResponseTopic
    Partition_ = m.OffsetCommitResponse.OffsetCommitResponsePartition

    def failed(topics, code):
        return [Topic_(name=t.name, topic_id=t.topic_id, partitions=[
            Partition_(partition_index=p.partition_index, error_code=code) for p in t.partitions])
            for t in topics]
    if not auth.allowed(ctx, READ, GROUP, request.group_id):
        respond(m.OffsetCommitResponse(topics=failed(request.topics, GROUP_DENIED)))
        return None
    denied = _take_unreadable_topics(auth, ctx, request)
    if not denied:
        return respond

    def respond_with_denied(response) -> None:
        response.topics.extend(failed(denied, TOPIC_DENIED))
        respond(response)
    return respond_with_denied


def _take_unreadable_topics(auth, ctx, request) -> list:
    """The request's topics the principal may not READ, taken out of the request (Kafka answers
    them TOPIC_AUTHORIZATION_FAILED beside the coordinator's answer for the others). A topic
    whose id is unknown (no name) is left for UNKNOWN_TOPIC_ID, which Kafka decides first."""
    may_read = auth.predicate(ctx, READ, TOPIC)
    denied = [t for t in request.topics if t.name is not None and not may_read(t.name)]
    if denied:
        request.topics = [t for t in request.topics if t.name is None or may_read(t.name)]
    return denied


def _offset_delete(auth, ctx, request, respond):
    Topic_ = m.OffsetDeleteResponse.OffsetDeleteResponseTopic
    Partition_ = m.OffsetDeleteResponse.OffsetDeleteResponsePartition
    if not auth.allowed(ctx, DELETE, GROUP, request.group_id):
        respond(m.OffsetDeleteResponse(error_code=GROUP_DENIED, topics=[]))
        return None
    denied = _take_unreadable_topics(auth, ctx, request)
    if not denied:
        return respond

    def respond_with_denied(response) -> None:
        if response.error_code == E.NONE:
            response.topics.extend(Topic_(name=t.name, partitions=[
                Partition_(partition_index=p.partition_index, error_code=TOPIC_DENIED)
                for p in t.partitions]) for t in denied)
        respond(response)
    return respond_with_denied


def _offset_fetch(auth, ctx, request, respond):
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
        if answer.error_code != E.NONE:
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


def _describe_groups(auth, ctx, request, respond):
    may_describe = auth.predicate(ctx, DESCRIBE, GROUP)
    denied = [m.DescribeGroupsResponse.DescribedGroup(
        group_id=g, error_code=GROUP_DENIED, group_state="", protocol_type="", protocol_data="",
        members=[], authorized_operations=OMITTED) for g in request.groups if not may_describe(g)]
    request.groups = [g for g in request.groups if may_describe(g)]
    include_ops = ctx.api_version >= 3 and request.include_authorized_operations

    def respond_described(response) -> None:
        if include_ops:
            for group in response.groups:
                if group.error_code == E.NONE:
                    group.authorized_operations = auth.operations(ctx, GROUP, group.group_id)
        response.groups[:0] = denied
        respond(response)
    return respond_described


def _list_groups(auth, ctx, request, respond):
    """All groups with DESCRIBE on the cluster, else those the principal may DESCRIBE."""
    if auth.cluster(ctx, DESCRIBE):
        return respond
    may_describe = auth.predicate(ctx, DESCRIBE, GROUP)

    def respond_listed(response) -> None:
        response.groups = [g for g in response.groups if may_describe(g.group_id)]
        respond(response)
    return respond_listed


def _delete_groups(auth, ctx, request, respond):
    may_delete = auth.predicate(ctx, DELETE, GROUP)
    names = list(dict.fromkeys(request.groups_names))
    denied = [n for n in names if not may_delete(n)]
    if not denied:
        return respond
    Result = m.DeleteGroupsResponse.DeletableGroupResult
    request.groups_names = [n for n in names if may_delete(n)]

    def respond_with_denied(response) -> None:
        response.results.extend(Result(group_id=n, error_code=GROUP_DENIED) for n in denied)
        respond(response)
    return respond_with_denied


def _consumer_group_heartbeat(auth, ctx, request, respond):
    if not auth.allowed(ctx, READ, GROUP, request.group_id):
        respond(m.ConsumerGroupHeartbeatResponse(error_code=GROUP_DENIED))
        return None
    subscribed = request.subscribed_topic_names
    if subscribed and len(auth.allowed_names(ctx, DESCRIBE, TOPIC, subscribed)) < \
            len(set(subscribed)):
        respond(m.ConsumerGroupHeartbeatResponse(error_code=TOPIC_DENIED))
        return None
    return respond


def _consumer_group_describe(auth, ctx, request, respond):
    Group_ = m.ConsumerGroupDescribeResponse.DescribedGroup
    may_describe = auth.predicate(ctx, DESCRIBE, GROUP)
    denied = [Group_(group_id=g, error_code=GROUP_DENIED) for g in request.group_ids
              if not may_describe(g)]
    request.group_ids = [g for g in request.group_ids if may_describe(g)]
    include_ops = request.include_authorized_operations
    may_topic = auth.predicate(ctx, DESCRIBE, TOPIC)

    def hides_topic(group) -> bool:
        return any(not may_topic(tp.topic_name) for member in group.members
                   for assignment in (member.assignment, member.target_assignment)
                   for tp in assignment.topic_partitions)

    def respond_described(response) -> None:
        out = list(denied)
        for group in response.groups:
            if include_ops and group.error_code == E.NONE:
                group.authorized_operations = auth.operations(ctx, GROUP, group.group_id)
            if hides_topic(group):
                group = Group_(group_id=group.group_id, error_code=TOPIC_DENIED, members=[],
                               error_message="The group has described topic(s) that the "
                                             "client is not authorized to describe.")
            out.append(group)
        response.groups = out
        respond(response)
    return respond_described


# Topic ids (v10+): _name_topics names each topic of the request before the checks; the stage of
# the API then takes out the unknown ids and returns the ``respond`` the coordinator is to call
# (which puts the ids in its answer), or None once it answered.

def _name_topics(broker, method: str, request) -> None:
    """Give each topic of the request the name of its id; None where the id is unknown."""
    by_id = broker.topics.by_id
    if method == "offset_commit":
        topics = request.topics
    else:
        topics = [t for g in request.groups for t in g.topics or ()]
    for t in topics:
        topic = by_id.get(t.topic_id)
        t.name = topic.name if topic is not None else None


def _offset_commit_by_topic_id(broker, request, respond):
    Topic_ = m.OffsetCommitResponse.OffsetCommitResponseTopic
    Partition_ = m.OffsetCommitResponse.OffsetCommitResponsePartition
    unknown = [t for t in request.topics if t.name is None]
    if unknown:
        request.topics = [t for t in request.topics if t.name is not None]
    ids = {t.name: t.topic_id for t in request.topics}

    def respond_with_ids(response) -> None:
        for t in response.topics:
            t.topic_id = ids[t.name]
        response.topics.extend(Topic_(name=None, topic_id=t.topic_id, partitions=[
            Partition_(partition_index=p.partition_index, error_code=E.UNKNOWN_TOPIC_ID)
            for p in t.partitions]) for t in unknown)
        respond(response)
    if unknown and not request.topics:  # nothing left for the coordinator, as on Kafka
        respond_with_ids(m.OffsetCommitResponse(topics=[]))
        return None
    return respond_with_ids


def _offset_fetch_by_topic_id(broker, request, respond):
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
            if g.error_code != E.NONE:
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
                           metadata="", error_code=E.UNKNOWN_TOPIC_ID)
                for p in t.partition_indexes]) for t in missing)
        respond(response)
    return respond_with_ids


TOPIC_ID_STAGES = {"offset_commit": _offset_commit_by_topic_id,
                   "offset_fetch": _offset_fetch_by_topic_id}


CHECKS = {
    "join_group": _join_group, "sync_group": _sync_group, "heartbeat": _heartbeat,
    "leave_group": _leave_group, "offset_commit": _offset_commit,
    "offset_delete": _offset_delete, "offset_fetch": _offset_fetch,
    "describe_groups": _describe_groups, "list_groups": _list_groups,
    "delete_groups": _delete_groups, "consumer_group_heartbeat": _consumer_group_heartbeat,
    "consumer_group_describe": _consumer_group_describe,
}
