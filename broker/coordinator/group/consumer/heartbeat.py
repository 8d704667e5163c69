"""ConsumerGroupHeartbeat's checks and answers: what a request must hold, a member's epoch,
whether a heartbeat changes nothing, and the responses. The steps a heartbeat takes are the
manager's (manager.py).
"""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from ...common.result import append_error
from ..group import GroupError
from .group import (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH, ConsumerGroup,
                    ConsumerGroupMember, MemberState)
from .reconciliation import FencedMemberEpoch
from .subscriptions import validate_regex

E = ErrorCode


def validate(request, version: int, assignors) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (``assignors``: the names of
    group.consumer.assignors)."""
    epoch = request.member_epoch
    if (version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and \
            _empty(request.member_id):
        raise _invalid("MemberId can't be empty.")
    if _empty(request.group_id):
        raise _invalid("GroupId can't be empty.")
    if _empty(request.instance_id):
        raise _invalid("InstanceId can't be empty.")
    if _empty(request.rack_id):
        raise _invalid("RackId can't be empty.")
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.topic_partitions is None or request.topic_partitions:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise _invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be "
                           "non-null when (re-)joining.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise _invalid("MemberEpoch is invalid.")
    assignor = request.server_assignor
    if assignor is not None and assignor not in assignors:
        raise GroupError(E.UNSUPPORTED_ASSIGNOR,
                         f"ServerAssignor {assignor} is not supported. Supported assignors: "
                         f"{', '.join(assignors)}.")
    regex = request.subscribed_topic_regex
    if regex:
        validate_regex(regex)


def _invalid(message: str) -> GroupError:
    return GroupError(E.INVALID_REQUEST, message)


def _empty(value: str | None) -> bool:
    return value is not None and value.strip() == ""


def check_epoch(member: ConsumerGroupMember, epoch: int, owned) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a member one epoch behind whose
    owned partitions are part of its assignment only lost the response that moved it on."""
    if epoch > member.member_epoch:
        raise FencedMemberEpoch(
            f"The consumer group member has a greater member epoch ({epoch}) than the one "
            f"known by the group coordinator ({member.member_epoch}). The member must "
            f"abandon all its partitions and rejoin.")
    if epoch < member.member_epoch:
        if epoch != member.previous_member_epoch or not _is_subset(owned, member.assigned):
            raise FencedMemberEpoch(
                f"The consumer group member has a smaller member epoch ({epoch}) than the "
                f"one known by the group coordinator ({member.member_epoch}). The member "
                f"must abandon all its partitions and rejoin.")


def _is_subset(owned, assigned) -> bool:
    if owned is None:
        return False
    for topic_id, partitions in owned.items():
        held = assigned.get(topic_id)
        if held is None or not partitions <= held:
            return False
    return True


def is_steady(group: ConsumerGroup, member: ConsumerGroupMember, request, client_id: str,
              client_host: str, topics) -> bool:
    """Whether the heartbeat changes nothing: the member is stable at the group's epoch,
    the target and the ``topics`` are current, and every field it sent is
    what it had. The full path would then write no record and answer the same."""
    epoch = request.member_epoch
    if (epoch <= 0 or epoch != member.member_epoch or member.state is not MemberState.STABLE
            or group.members.get(member.member_id) is not member
            or group.group_epoch != epoch or group.assignment_epoch != epoch
            or member.classic_metadata is not None
            or group.metadata_version != topics.version()
            or member.client_id != client_id or member.client_host != client_host):
        return False
    if group.regex_members and group.regex_version != topics.version():
        return False
    names = request.subscribed_topic_names
    return ((names is None or frozenset(names) == member.subscribed_topic_names)
            and request.subscribed_topic_regex in (None, member.subscribed_topic_regex)
            and request.rebalance_timeout_ms in (-1, member.rebalance_timeout_ms)
            and request.server_assignor in (None, member.server_assignor)
            and request.instance_id in (None, member.instance_id)
            and request.rack_id in (None, member.rack_id))


# ---------------------------------------------------------------------- answers
def error_answer(code: ErrorCode, message: str | None):
    return m.ConsumerGroupHeartbeatResponse(error_code=int(code), error_message=message,
                                            member_epoch=0, heartbeat_interval_ms=0)


def failed(error: ErrorCode):
    """The answer to a heartbeat whose records could not be stored."""
    return m.ConsumerGroupHeartbeatResponse(error_code=int(error), member_epoch=0)


def heartbeat_error(exc: BaseException, response):
    """ConsumerGroupHeartbeat's answer to a failed write."""
    return failed(append_error(exc))


def response_assignment(assignment):
    cls = m.ConsumerGroupHeartbeatResponse.Assignment
    tp_cls = m.ConsumerGroupHeartbeatResponse.TopicPartitions
    return cls(topic_partitions=[
        tp_cls(topic_id=topic_id, partitions=sorted(partitions))
        for topic_id, partitions in sorted(assignment.items(), key=lambda kv: kv[0].bytes)])
