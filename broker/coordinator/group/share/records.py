"""The __consumer_offsets records of share groups (KIP-932), in Kafka's formats.

As for consumer groups (consumer/records.py): an int16 record type (Kafka's coordinator-key
apiKey) and the key struct at version 0; the value is an int16 version 0 and the flexible value
struct, or None for a tombstone.

====  =========================================  ===============================================
type  key (group, and member)                     value
====  =========================================  ===============================================
10    ShareGroupMemberMetadataKey                 a member's subscription
11    ShareGroupMetadataKey                       group epoch, metadata hash
12    ShareGroupTargetAssignmentMetadataKey       target assignment epoch
13    ShareGroupTargetAssignmentMemberKey         a member's target assignment
14    ShareGroupCurrentMemberAssignmentKey        a member's epochs and assignment
15    ShareGroupStatePartitionMetadataKey         the share partitions initialized (read, kept)
====  =========================================  ===============================================
"""
from __future__ import annotations

from typing import NamedTuple

from protocol import messages as m

from ..consumer.records import topic_partitions_value
from ..records import Record, RecordFormats

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15

_KEYS = {
    MEMBER_METADATA: "ShareGroupMemberMetadataKey",
    GROUP_METADATA: "ShareGroupMetadataKey",
    TARGET_ASSIGNMENT_METADATA: "ShareGroupTargetAssignmentMetadataKey",
    TARGET_ASSIGNMENT_MEMBER: "ShareGroupTargetAssignmentMemberKey",
    CURRENT_MEMBER_ASSIGNMENT: "ShareGroupCurrentMemberAssignmentKey",
    STATE_PARTITION_METADATA: "ShareGroupStatePartitionMetadataKey",
}
_VALUES = {
    MEMBER_METADATA: "ShareGroupMemberMetadataValue",
    GROUP_METADATA: "ShareGroupMetadataValue",
    TARGET_ASSIGNMENT_METADATA: "ShareGroupTargetAssignmentMetadataValue",
    TARGET_ASSIGNMENT_MEMBER: "ShareGroupTargetAssignmentMemberValue",
    CURRENT_MEMBER_ASSIGNMENT: "ShareGroupCurrentMemberAssignmentValue",
    STATE_PARTITION_METADATA: "ShareGroupStatePartitionMetadataValue",
}
_FORMATS = RecordFormats("share group", _KEYS, _VALUES)
RECORD_TYPES = _FORMATS.types
decode_value = _FORMATS.decode_value
_key = _FORMATS.key
_value = _FORMATS.value


class ShareKey(NamedTuple):
    type: int
    group: str
    member: str | None = None


def decode_key(record_type: int, key: bytes) -> ShareKey:
    k = _FORMATS.decode_key(record_type, key)
    return ShareKey(record_type, k.group_id, getattr(k, "member_id", None))


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return (_key(GROUP_METADATA, group_id=group_id),
            _value(GROUP_METADATA, epoch=epoch, metadata_hash=metadata_hash))


def member_subscription_record(group_id: str, member) -> Record:
    return (_key(MEMBER_METADATA, group_id=group_id, member_id=member.member_id),
            _value(MEMBER_METADATA, rack_id=member.rack_id, client_id=member.client_id,
                   client_host=member.client_host,
                   subscribed_topic_names=sorted(member.subscribed_topic_names)))


def target_assignment_record(group_id: str, member_id: str, assignment) -> Record:
    cls = m.ShareGroupTargetAssignmentMemberValue.TopicPartition
    return (_key(TARGET_ASSIGNMENT_MEMBER, group_id=group_id, member_id=member_id),
            _value(TARGET_ASSIGNMENT_MEMBER,
                   topic_partitions=topic_partitions_value(cls, assignment)))


def target_assignment_epoch_record(group_id: str, epoch: int, timestamp: int) -> Record:
    return (_key(TARGET_ASSIGNMENT_METADATA, group_id=group_id),
            _value(TARGET_ASSIGNMENT_METADATA, assignment_epoch=epoch,
                   assignment_timestamp=timestamp))


def current_assignment_record(group_id: str, member) -> Record:
    cls = m.ShareGroupCurrentMemberAssignmentValue.TopicPartitions
    return (_key(CURRENT_MEMBER_ASSIGNMENT, group_id=group_id, member_id=member.member_id),
            _value(CURRENT_MEMBER_ASSIGNMENT, member_epoch=member.member_epoch,
                   previous_member_epoch=member.previous_member_epoch, state=0,
                   assigned_partitions=topic_partitions_value(cls, member.assigned)))


def tombstone(record_type: int, group_id: str, member_id: str | None = None) -> Record:
    fields = {"group_id": group_id}
    if member_id is not None:
        fields["member_id"] = member_id
    return _key(record_type, **fields), None
