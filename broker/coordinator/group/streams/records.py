"""The __consumer_offsets records of streams groups (KIP-1071), in Kafka's formats.

As for consumer and share groups: an int16 record type (Kafka's coordinator-key apiKey) and the
key struct at version 0; the value is an int16 version 0 and the flexible value struct, or None
for a tombstone.

====  ==========================================  ==============================================
type  key (group, and member)                      value
====  ==========================================  ==============================================
17    StreamsGroupMetadataKey                      group epoch, metadata hash, validated
                                                   topology epoch, assignment configs
19    StreamsGroupMemberMetadataKey                a member's process, endpoint, tags, epochs
20    StreamsGroupTargetAssignmentMetadataKey      target assignment epoch and time
21    StreamsGroupTargetAssignmentMemberKey        a member's target tasks
22    StreamsGroupCurrentMemberAssignmentKey       a member's epochs, state, tasks and those
                                                   pending revocation
23    StreamsGroupTopologyKey                      the topology
====  ==========================================  ==============================================
"""
from __future__ import annotations

from typing import NamedTuple

from protocol import messages as m

from ..records import Record, RecordFormats
from .group import ACTIVE, KINDS, STREAMS_MEMBER_STATES

GROUP_METADATA = 17
MEMBER_METADATA = 19
TARGET_ASSIGNMENT_METADATA = 20
TARGET_ASSIGNMENT_MEMBER = 21
CURRENT_MEMBER_ASSIGNMENT = 22
TOPOLOGY = 23

_KEYS = {
    GROUP_METADATA: "StreamsGroupMetadataKey",
    MEMBER_METADATA: "StreamsGroupMemberMetadataKey",
    TARGET_ASSIGNMENT_METADATA: "StreamsGroupTargetAssignmentMetadataKey",
    TARGET_ASSIGNMENT_MEMBER: "StreamsGroupTargetAssignmentMemberKey",
    CURRENT_MEMBER_ASSIGNMENT: "StreamsGroupCurrentMemberAssignmentKey",
    TOPOLOGY: "StreamsGroupTopologyKey",
}
_VALUES = {
    GROUP_METADATA: "StreamsGroupMetadataValue",
    MEMBER_METADATA: "StreamsGroupMemberMetadataValue",
    TARGET_ASSIGNMENT_METADATA: "StreamsGroupTargetAssignmentMetadataValue",
    TARGET_ASSIGNMENT_MEMBER: "StreamsGroupTargetAssignmentMemberValue",
    CURRENT_MEMBER_ASSIGNMENT: "StreamsGroupCurrentMemberAssignmentValue",
    TOPOLOGY: "StreamsGroupTopologyValue",
}
_FORMATS = RecordFormats("streams group", _KEYS, _VALUES)
RECORD_TYPES = _FORMATS.types
decode_value = _FORMATS.decode_value
_key = _FORMATS.key
_value = _FORMATS.value


class StreamsKey(NamedTuple):
    type: int
    group: str
    member: str | None = None


def decode_key(record_type: int, key: bytes) -> StreamsKey:
    k = _FORMATS.decode_key(record_type, key)
    return StreamsKey(record_type, k.group_id, getattr(k, "member_id", None))


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int,
                       validated_topology_epoch: int, configs: dict) -> Record:
    cls = m.StreamsGroupMetadataValue.LastAssignmentConfig
    return (_key(GROUP_METADATA, group_id=group_id),
            _value(GROUP_METADATA, epoch=epoch, metadata_hash=metadata_hash,
                   validated_topology_epoch=validated_topology_epoch,
                   last_assignment_configs=[cls(key=k, value=v)
                                            for k, v in sorted(configs.items())]))


def topology_record(group_id: str, topology) -> Record:
    v = m.StreamsGroupTopologyValue

    def info(t):
        return v.TopicInfo(name=t.name, partitions=t.partitions,
                           replication_factor=t.replication_factor,
                           topic_configs=[v.TopicConfig(key=k, value=val)
                                          for k, val in t.configs])

    subs = [v.Subtopology(
        subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
        source_topic_regex=list(s.source_topic_regex),
        state_changelog_topics=[info(t) for t in s.state_changelog_topics],
        repartition_sink_topics=list(s.repartition_sink_topics),
        repartition_source_topics=[info(t) for t in s.repartition_source_topics],
        copartition_groups=[v.CopartitionGroup(source_topics=list(a), source_topic_regex=list(b),
                                               repartition_source_topics=list(c))
                            for a, b, c in s.copartition_groups])
        for s in topology.subtopologies]
    return (_key(TOPOLOGY, group_id=group_id),
            _value(TOPOLOGY, epoch=topology.epoch, subtopologies=subs))


def member_metadata_record(group_id: str, member) -> Record:
    v = m.StreamsGroupMemberMetadataValue
    endpoint = None if member.user_endpoint is None else v.Endpoint(
        host=member.user_endpoint[0], port=member.user_endpoint[1])
    return (_key(MEMBER_METADATA, group_id=group_id, member_id=member.member_id),
            _value(MEMBER_METADATA, instance_id=member.instance_id, rack_id=member.rack_id,
                   client_id=member.client_id, client_host=member.client_host,
                   rebalance_timeout_ms=member.rebalance_timeout_ms,
                   topology_epoch=member.topology_epoch, process_id=member.process_id,
                   user_endpoint=endpoint,
                   client_tags=[v.KeyValue(key=k, value=val) for k, val in member.client_tags]))


def _task_ids(cls, tasks: dict, kind: str, epochs: dict | None = None) -> list:
    out = []
    for (k, sub), partitions in sorted(tasks.items()):
        if k != kind or not partitions:
            continue
        ps = sorted(partitions)
        fields = {"subtopology_id": sub, "partitions": ps}
        if epochs is not None:
            fields["assignment_epochs"] = [epochs.get(((kind, sub), p), 0) for p in ps]
        out.append(cls(**fields))
    return out


def target_assignment_record(group_id: str, member_id: str, tasks: dict) -> Record:
    cls = m.StreamsGroupTargetAssignmentMemberValue.TaskIds
    return (_key(TARGET_ASSIGNMENT_MEMBER, group_id=group_id, member_id=member_id),
            _value(TARGET_ASSIGNMENT_MEMBER, **{
                f"{kind}_tasks": _task_ids(cls, tasks, kind) for kind in KINDS}))


def target_assignment_epoch_record(group_id: str, epoch: int, timestamp: int) -> Record:
    return (_key(TARGET_ASSIGNMENT_METADATA, group_id=group_id),
            _value(TARGET_ASSIGNMENT_METADATA, assignment_epoch=epoch,
                   assignment_timestamp=timestamp))


def current_assignment_record(group_id: str, member) -> Record:
    cls = m.StreamsGroupCurrentMemberAssignmentValue.TaskIds
    epochs = member.assignment_epochs
    fields = {}
    for kind in KINDS:
        fields[f"{kind}_tasks"] = _task_ids(cls, member.assigned, kind,
                                            epochs if kind == ACTIVE else None)
        fields[f"{kind}_tasks_pending_revocation"] = _task_ids(
            cls, member.pending_revocation, kind, epochs if kind == ACTIVE else None)
    return (_key(CURRENT_MEMBER_ASSIGNMENT, group_id=group_id, member_id=member.member_id),
            _value(CURRENT_MEMBER_ASSIGNMENT, member_epoch=member.member_epoch,
                   previous_member_epoch=member.previous_member_epoch,
                   state=STREAMS_MEMBER_STATES[member.state], **fields))


def tasks_from(value, suffix: str = "") -> tuple[dict, dict]:
    """(tasks by (kind, subtopology), assignment epochs) from a target or current value."""
    tasks = {}
    epochs = {}
    for kind in KINDS:
        for t in getattr(value, f"{kind}_tasks{suffix}") or ():
            if not t.partitions:
                continue
            tasks[(kind, t.subtopology_id)] = frozenset(t.partitions)
            got = getattr(t, "assignment_epochs", None)
            if got:
                for p, e in zip(t.partitions, got):
                    epochs[((kind, t.subtopology_id), p)] = e
    return tasks, epochs


def tombstone(record_type: int, group_id: str, member_id: str | None = None) -> Record:
    fields = {"group_id": group_id}
    if member_id is not None:
        fields["member_id"] = member_id
    return _key(record_type, **fields), None


def group_tombstones(group) -> list:
    """The records that delete an empty group (Kafka's createGroupTombstoneRecords)."""
    gid = group.group_id
    records = [tombstone(CURRENT_MEMBER_ASSIGNMENT, gid, mid) for mid in group.members]
    records += [tombstone(TARGET_ASSIGNMENT_MEMBER, gid, mid) for mid in group.target]
    records.append(tombstone(TARGET_ASSIGNMENT_METADATA, gid))
    records += [tombstone(MEMBER_METADATA, gid, mid) for mid in group.members]
    records.append(tombstone(TOPOLOGY, gid))
    records.append(tombstone(GROUP_METADATA, gid))
    return records
