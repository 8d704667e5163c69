"""ShareAcknowledge: a share consumer accepts, releases, rejects (or, from v2, renews the locks
of) records it acquired, outside a ShareFetch. The session must exist and the epoch match (an
epoch of 0 is INVALID_SHARE_SESSION_EPOCH: a session is opened by ShareFetch only); epoch -1
closes the session after the acknowledgements, releasing what the member still holds.

:func:`acknowledge` is also what ShareFetch does with the acknowledgements that ride on it.
"""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ..coordinator.group.share.partition import AcknowledgeError
from ..coordinator.group.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSessionError
from ..security.authorization import group_denied
from ..security.authorizer import AclOperation, ResourceType
from .share_group_heartbeat import valid_member_id

NAME = "ShareAcknowledge"

E = ErrorCode
#: the first version that knows the RENEW acknowledgement (KIP-1222)
RENEW_VERSION = 2


def _valid_batches(batches, max_type: int, is_renew: bool) -> bool:
    """Kafka's validateAcknowledgementBatches for one partition."""
    previous_last = -1
    for batch in batches:
        types = batch.acknowledge_types
        if batch.first_offset > batch.last_offset or batch.first_offset <= previous_last:
            return False
        if not types or (len(types) > 1 and
                         batch.last_offset - batch.first_offset + 1 != len(types)):
            return False
        if any(t < 0 or t > max_type for t in types) or (4 in types and not is_renew):
            return False
        previous_last = batch.last_offset
    return True


def acknowledge(broker, ctx, group_id: str, member_id: str, topics, version: int,
                is_renew: bool) -> dict:
    """Apply the acknowledgements of ``topics`` (request topics whose partitions carry
    ``acknowledgement_batches``) -> {(topic id, partition): (error code, message)} for every
    partition that carried some."""
    shares = broker.shares
    out: dict = {}
    may_read = None
    if broker.authorizer is not None:
        may_read = broker.authorizer.predicate(ctx, AclOperation.READ, ResourceType.TOPIC)
    max_type = 4 if version >= RENEW_VERSION else 3
    renew_enabled = broker.group_configs.value(
        group_id, "share.renew.acknowledge.enable").lower() == "true"
    now = broker.clock()
    touched = []
    for topic in topics:
        name = broker.topics.name_of(topic.topic_id)
        for p in topic.partitions:
            batches = p.acknowledgement_batches
            if not batches:
                continue
            key = (topic.topic_id, p.partition_index)
            if name is None:
                out[key] = (E.UNKNOWN_TOPIC_ID, None)
            elif not _valid_batches(batches, max_type, is_renew):
                out[key] = (E.INVALID_REQUEST, None)
            elif may_read is not None and not may_read(name):
                out[key] = (E.TOPIC_AUTHORIZATION_FAILED, None)
            else:
                sp = shares.get(group_id, key)
                if sp is None:
                    out[key] = (E.UNKNOWN_TOPIC_OR_PARTITION, None)
                    continue
                if not renew_enabled and any(4 in b.acknowledge_types for b in batches):
                    out[key] = (E.INVALID_RECORD_STATE, "Renewing acquisition locks is not "
                                "enabled for the group.")
                    continue
                try:
                    sp.acknowledge(member_id, [(b.first_offset, b.last_offset,
                                                list(b.acknowledge_types)) for b in batches],
                                   now)
                    out[key] = (E.NONE, None)
                    _count(shares.acknowledged, batches)
                except AcknowledgeError as exc:
                    out[key] = (exc.code, exc.message)
                touched.append(key)
    for key in touched:
        shares.changed(group_id, key)
    return out


_TYPE_NAMES = {0: "gap", 1: "accept", 2: "release", 3: "reject", 4: "renew"}


def _count(counts: dict, batches) -> None:
    """Records acknowledged by type, for kafka_share_group_record_acknowledgements."""
    for b in batches:
        types = b.acknowledge_types
        if len(types) == 1:
            name = _TYPE_NAMES[types[0]]
            counts[name] = counts.get(name, 0) + b.last_offset - b.first_offset + 1
        else:
            for t in types:
                counts[_TYPE_NAMES[t]] = counts.get(_TYPE_NAMES[t], 0) + 1


def _error(code: ErrorCode, message: str | None = None):
    return m.ShareAcknowledgeResponse(error_code=code, error_message=message, responses=[],
                                      node_endpoints=[])


def handle(broker, ctx, request, respond) -> None:
    group_id = request.group_id
    if group_id is None:
        respond(_error(E.INVALID_REQUEST))
        return
    if group_denied(broker.authorizer, ctx, group_id):
        respond(_error(E.GROUP_AUTHORIZATION_FAILED))
        return
    member_id = request.member_id
    if not valid_member_id(member_id):
        respond(_error(E.INVALID_REQUEST))
        return
    epoch = request.share_session_epoch
    sessions = broker.shares.sessions
    try:
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(E.INVALID_SHARE_SESSION_EPOCH)
        if epoch == FINAL_EPOCH:
            sessions.final(group_id, member_id)
        else:
            sessions.advance(group_id, member_id, epoch)
    except ShareSessionError as exc:
        respond(_error(exc.code))
        return
    version = ctx.api_version
    is_renew = version >= RENEW_VERSION and bool(request.is_renew_ack)
    results = acknowledge(broker, ctx, group_id, member_id, request.topics, version, is_renew)
    topic_cls = m.ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
    part_cls = m.ShareAcknowledgeResponse.PartitionData
    leader_cls = m.ShareAcknowledgeResponse.LeaderIdAndEpoch
    responses = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            code, message = results.get((topic.topic_id, p.partition_index), (E.NONE, None))
            parts.append(part_cls(partition_index=p.partition_index, error_code=code,
                                  error_message=message,
                                  current_leader=leader_cls(leader_id=-1, leader_epoch=-1)))
        responses.append(topic_cls(topic_id=topic.topic_id, partitions=parts))
    response = m.ShareAcknowledgeResponse(error_code=E.NONE, responses=responses,
                                          node_endpoints=[])
    if version >= RENEW_VERSION:
        response.acquisition_lock_timeout_ms = broker.shares.lock_duration_ms(group_id)
    respond(response)
    if epoch == FINAL_EPOCH:
        broker.shares.close_session(group_id, member_id)
