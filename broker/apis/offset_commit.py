"""OffsetCommit: a group's committed offsets (broker/coordinator/group/offsets.py). With an
authorizer the group needs READ, and each topic READ (TOPIC_AUTHORIZATION_FAILED beside the
coordinator's answer for the others), as Kafka's KafkaApis checks before it asks its group
coordinator.

v10 names topics by id (KIP-848); the coordinator keeps offsets by topic name, so the ids are
resolved to names here and back in the answer. As on Kafka, an id this broker does not know (a
topic never created, or deleted, even if re-created under the same name) is UNKNOWN_TOPIC_ID for
each of its partitions, decided after the group's authorization and before the topics'."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorization import take_unreadable_topics
from ..security.authorizer import AclOperation, ResourceType

NAME = "OffsetCommit"
#: from this version topics go by id
FIRST_TOPIC_ID_VERSION = 10

READ = AclOperation.READ
GROUP = ResourceType.GROUP
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def handle(broker, ctx, request, respond) -> None:
    by_id = ctx.api_version >= FIRST_TOPIC_ID_VERSION
    if by_id:
        for t in request.topics:
            t.name = broker.topics.name_of(t.topic_id)
    if broker.authorizer is not None:
        respond = _authorized(broker.authorizer, ctx, request, respond)
        if respond is None:
            return
    if by_id:
        respond = _by_topic_id(broker, request, respond)
        if respond is None:
            return
    broker.coordinator.offset_commit(request, ctx.api_version, ctx, respond)


def _authorized(auth, ctx, request, respond):
    """The ACL checks Kafka makes before it asks its group coordinator: the ``respond`` the
    coordinator is to call (wrapped to add what was refused), or None once it answered."""
    Topic_ = m.OffsetCommitResponse.OffsetCommitResponseTopic
    Partition_ = m.OffsetCommitResponse.OffsetCommitResponsePartition

    def failed(topics, code):
        return [Topic_(name=t.name, topic_id=t.topic_id, partitions=[
            Partition_(partition_index=p.partition_index, error_code=code) for p in t.partitions])
            for t in topics]
    if not auth.allowed(ctx, READ, GROUP, request.group_id):
        respond(m.OffsetCommitResponse(topics=failed(request.topics, GROUP_DENIED)))
        return None
    denied = take_unreadable_topics(auth, ctx, request)
    if not denied:
        return respond

    def respond_with_denied(response) -> None:
        response.topics.extend(failed(denied, TOPIC_DENIED))
        respond(response)
    return respond_with_denied


def _by_topic_id(broker, request, respond):
    """v10 names topics by id: each is named before the checks (None where the id is unknown);
    here the unknown ones are taken out and answered UNKNOWN_TOPIC_ID, and the answer gets the
    ids back. None once it answered (only unknown ids: the group is never asked, as on Kafka)."""
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
            Partition_(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_ID)
            for p in t.partitions]) for t in unknown)
        respond(response)
    if unknown and not request.topics:  # nothing left for the coordinator, as on Kafka
        respond_with_ids(m.OffsetCommitResponse(topics=[]))
        return None
    return respond_with_ids
