"""The __consumer_offsets records of consumer groups (KIP-848), in Kafka's formats.

Each key is an int16 record type (Kafka's coordinator-key apiKey) followed by the key struct at
version 0; each value is an int16 version 0 followed by the flexible value struct, or None for a
tombstone.

====  =========================================  ===============================================
type  key (group, and member or regex)            value
====  =========================================  ===============================================
3     ConsumerGroupMetadataKey                    group epoch, metadata hash
4     ConsumerGroupPartitionMetadataKey           (Kafka before 4.1; read and ignored)
5     ConsumerGroupMemberMetadataKey              a member's subscription
6     ConsumerGroupTargetAssignmentMetadataKey    target assignment epoch
7     ConsumerGroupTargetAssignmentMemberKey      a member's target assignment
8     ConsumerGroupCurrentMemberAssignmentKey     a member's epochs, state and assignment
16    ConsumerGroupRegularExpressionKey           the topics a regex resolved to
====  =========================================  ===============================================
"""
from __future__ import annotations

from typing import NamedTuple

from protocol import messages as m

from ..records import Record, RecordFormats
from .group import ConsumerGroup, ConsumerGroupMember, MemberState

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16

_KEYS = {
    GROUP_METADATA: "ConsumerGroupMetadataKey",
    PARTITION_METADATA: "ConsumerGroupPartitionMetadataKey",
    MEMBER_METADATA: "ConsumerGroupMemberMetadataKey",
    TARGET_ASSIGNMENT_METADATA: "ConsumerGroupTargetAssignmentMetadataKey",
    TARGET_ASSIGNMENT_MEMBER: "ConsumerGroupTargetAssignmentMemberKey",
    CURRENT_MEMBER_ASSIGNMENT: "ConsumerGroupCurrentMemberAssignmentKey",
    REGULAR_EXPRESSION: "ConsumerGroupRegularExpressionKey",
}
_VALUES = {
    GROUP_METADATA: "ConsumerGroupMetadataValue",
    PARTITION_METADATA: "ConsumerGroupPartitionMetadataValue",
    MEMBER_METADATA: "ConsumerGroupMemberMetadataValue",
    TARGET_ASSIGNMENT_METADATA: "ConsumerGroupTargetAssignmentMetadataValue",
    TARGET_ASSIGNMENT_MEMBER: "ConsumerGroupTargetAssignmentMemberValue",
    CURRENT_MEMBER_ASSIGNMENT: "ConsumerGroupCurrentMemberAssignmentValue",
    REGULAR_EXPRESSION: "ConsumerGroupRegularExpressionValue",
}
_FORMATS = RecordFormats("consumer group", _KEYS, _VALUES)
RECORD_TYPES = _FORMATS.types
decode_value = _FORMATS.decode_value
_key = _FORMATS.key
_value = _FORMATS.value


class ConsumerKey(NamedTuple):
    """A decoded key: the record type, the group, and the member id or regex (else None)."""

    type: int
    group: str
    sub: str | None = None


def decode_key(record_type: int, key: bytes) -> ConsumerKey:
    k = _FORMATS.decode_key(record_type, key)
    sub = getattr(k, "member_id", None)
    if record_type == REGULAR_EXPRESSION:
        sub = k.regular_expression
    return ConsumerKey(record_type, k.group_id, sub)


def topic_partitions_value(cls, assignment, epochs=None) -> list:
    """An assignment ``{topic_id: partitions}`` as the records' list of ``cls``: topics in id
    order, partitions sorted, empty topics left out; with ``epochs``, each partition's
    assignment epoch. The share group records use it too."""
    out = []
    for topic_id, partitions in sorted(assignment.items(), key=lambda kv: kv[0].bytes):
        if not partitions:
            continue
        ordered = sorted(partitions)
        tp = cls(topic_id=topic_id, partitions=ordered)
        if epochs is not None:
            tp.assignment_epochs = [epochs[(topic_id, p)] for p in ordered]
        out.append(tp)
    return out


def assignment_epochs_of(topic_partitions, default: int) -> dict:
    """{(topic_id, partition): epoch} of a stored current assignment (``default`` for records
    written before Kafka kept them)."""
    out = {}
    for tp in topic_partitions or ():
        epochs = tp.assignment_epochs or ()
        for i, p in enumerate(tp.partitions):
            out[(tp.topic_id, p)] = epochs[i] if i < len(epochs) else default
    return out


def assignment_of(topic_partitions) -> dict:
    """{topic_id: frozenset(partitions)} from a stored or requested list of TopicPartitions."""
    out = {}
    for tp in topic_partitions or ():
        if tp.partitions:
            out[tp.topic_id] = frozenset(tp.partitions) | out.get(tp.topic_id, frozenset())
    return out


# --------------------------------------------------------------------------- records

def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return (_key(GROUP_METADATA, group_id=group_id),
            _value(GROUP_METADATA, epoch=epoch, metadata_hash=metadata_hash))


def group_epoch_tombstone(group_id: str) -> Record:
    return _key(GROUP_METADATA, group_id=group_id), None


def member_subscription_record(group_id: str, member: ConsumerGroupMember) -> Record:
    classic = None
    if member.classic_metadata is not None:
        cls = m.ConsumerGroupMemberMetadataValue.ClassicMemberMetadata
        session_timeout, protocols = member.classic_metadata
        protocol_cls = m.ConsumerGroupMemberMetadataValue.ClassicProtocol
        classic = cls(session_timeout_ms=session_timeout, supported_protocols=[
            protocol_cls(name=name, metadata=metadata) for name, metadata in protocols])
    return (_key(MEMBER_METADATA, group_id=group_id, member_id=member.member_id),
            _value(MEMBER_METADATA, instance_id=member.instance_id, rack_id=member.rack_id,
                   client_id=member.client_id, client_host=member.client_host,
                   subscribed_topic_names=sorted(member.subscribed_topic_names),
                   subscribed_topic_regex=member.subscribed_topic_regex,
                   rebalance_timeout_ms=member.rebalance_timeout_ms,
                   server_assignor=member.server_assignor, classic_member_metadata=classic))


def member_subscription_tombstone(group_id: str, member_id: str) -> Record:
    return _key(MEMBER_METADATA, group_id=group_id, member_id=member_id), None


def target_assignment_record(group_id: str, member_id: str, assignment) -> Record:
    cls = m.ConsumerGroupTargetAssignmentMemberValue.TopicPartition
    return (_key(TARGET_ASSIGNMENT_MEMBER, group_id=group_id, member_id=member_id),
            _value(TARGET_ASSIGNMENT_MEMBER,
                   topic_partitions=topic_partitions_value(cls, assignment)))


def target_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return _key(TARGET_ASSIGNMENT_MEMBER, group_id=group_id, member_id=member_id), None


def target_assignment_epoch_record(group_id: str, epoch: int, timestamp: int) -> Record:
    return (_key(TARGET_ASSIGNMENT_METADATA, group_id=group_id),
            _value(TARGET_ASSIGNMENT_METADATA, assignment_epoch=epoch,
                   assignment_timestamp=timestamp))


def target_assignment_epoch_tombstone(group_id: str) -> Record:
    return _key(TARGET_ASSIGNMENT_METADATA, group_id=group_id), None


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> Record:
    cls = m.ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions
    return (_key(CURRENT_MEMBER_ASSIGNMENT, group_id=group_id, member_id=member.member_id),
            _value(CURRENT_MEMBER_ASSIGNMENT, member_epoch=member.member_epoch,
                   previous_member_epoch=member.previous_member_epoch, state=int(member.state),
                   assigned_partitions=topic_partitions_value(cls, member.assigned,
                                                              _epochs(member)),
                   partitions_pending_revocation=topic_partitions_value(
                       cls, member.pending_revocation, _epochs(member))))


def _epochs(member: ConsumerGroupMember) -> dict:
    epochs = dict(member.assignment_epochs)
    for assignment in (member.assigned, member.pending_revocation):
        for topic_id, partitions in assignment.items():
            for p in partitions:
                epochs.setdefault((topic_id, p), member.member_epoch)
    return epochs


def current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return _key(CURRENT_MEMBER_ASSIGNMENT, group_id=group_id, member_id=member_id), None


def regex_record(group_id: str, regex: str, topics, version: int, timestamp: int) -> Record:
    return (_key(REGULAR_EXPRESSION, group_id=group_id, regular_expression=regex),
            _value(REGULAR_EXPRESSION, topics=sorted(topics), version=version,
                   timestamp=timestamp))


def regex_tombstone(group_id: str, regex: str) -> Record:
    return _key(REGULAR_EXPRESSION, group_id=group_id, regular_expression=regex), None


def group_tombstones(group: ConsumerGroup) -> list:
    """The records that delete an empty group (Kafka's createGroupTombstoneRecords)."""
    gid = group.group_id
    records = []
    for member_id in group.members:
        records.append(current_assignment_tombstone(gid, member_id))
    for member_id in group.target:
        records.append(target_assignment_tombstone(gid, member_id))
    records.append(target_assignment_epoch_tombstone(gid))
    for member_id in group.members:
        records.append(member_subscription_tombstone(gid, member_id))
    for regex in group.resolved_regexes:
        records.append(regex_tombstone(gid, regex))
    records.append(group_epoch_tombstone(gid))
    return records


def member_state(value: int) -> MemberState:
    try:
        return MemberState(value)
    except ValueError:
        return MemberState.UNKNOWN
