"""Records of ``__consumer_offsets`` in Kafka's own format, so Kafka's tools can read the topic.

A record key is an int16 key version followed by the key struct; the value is an int16 value
version followed by the value struct, or None (a tombstone) when the key is deleted.

=========================  ===========  ==================================================
key version                key struct   value struct (versions written here)
=========================  ===========  ==================================================
0 (legacy), 1              OffsetCommitKey    OffsetCommitValue v3 (v1 when an expire timestamp is set)
2                          GroupMetadataKey   GroupMetadataValue v3
=========================  ===========  ==================================================

Kafka 4 stores the other group types (consumer/share/streams groups of KIP-848 and later) under
higher key versions; this broker ignores them when it loads a partition.
"""
from __future__ import annotations

import struct
from typing import Iterable, NamedTuple

from protocol import messages as m

from .group import GroupMetadata, OffsetAndMetadata

OFFSET_COMMIT_KEY_VERSION = 1
LEGACY_OFFSET_COMMIT_KEY_VERSION = 0
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_INT16 = struct.Struct(">h")
_VERSION_0 = _INT16.pack(0)

Record = tuple[bytes, "bytes | None"]


class OffsetKey(NamedTuple):
    group: str
    topic: str
    partition: int


class GroupKey(NamedTuple):
    group: str


class RecordError(ValueError):
    """A key or value that is not a valid __consumer_offsets record."""


class RecordFormats:
    """The key and value messages of one modern group type's records (consumer, share and
    streams groups: a record type, then a version-0 key; a version-0 value), by record type."""

    def __init__(self, kind: str, keys: dict[int, str], values: dict[int, str]) -> None:
        self.kind = kind            # "consumer group", ... as the errors name it
        #: the key and value messages' names, by record type: their classes are built when a
        #: record of the type is first read or written (protocol/messages.py), not at import
        self.keys = keys
        self.values = values
        self.types = frozenset(keys)

    def decode_key(self, record_type: int, key: bytes):
        try:
            return m.MESSAGES[self.keys[record_type]].decode(key, 0, 2)
        except Exception as exc:
            raise RecordError(f"bad {self.kind} key of type {record_type}: {exc}") from exc

    def decode_value(self, record_type: int, value: bytes):
        if len(value) < 2:
            raise RecordError(f"{self.kind} value shorter than its version")
        try:
            return m.MESSAGES[self.values[record_type]].decode(value, 0, 2, exact=False)
        except Exception as exc:
            raise RecordError(f"bad {self.kind} value of type {record_type}: {exc}") from exc

    def key(self, record_type: int, **fields) -> bytes:
        return _INT16.pack(record_type) + m.MESSAGES[self.keys[record_type]](**fields).encode(0)

    def value(self, record_type: int, **fields) -> bytes:
        return _VERSION_0 + m.MESSAGES[self.values[record_type]](**fields).encode(0)


# --------------------------------------------------------------------------- keys

def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    body = m.OffsetCommitKey(group=group, topic=topic, partition=partition).encode(0)
    return _INT16.pack(OFFSET_COMMIT_KEY_VERSION) + body


def group_metadata_key(group: str) -> bytes:
    return _INT16.pack(GROUP_METADATA_KEY_VERSION) + m.GroupMetadataKey(group=group).encode(0)


def record_type(key: bytes) -> int:
    """The int16 that starts every key: its version for offsets and classic groups, the record
    type for the others (consumer/records.py)."""
    if key is None or len(key) < 2:
        raise RecordError("record key shorter than its version")
    return _INT16.unpack_from(key)[0]


def decode_key(key: bytes) -> OffsetKey | GroupKey | None:
    """The decoded key, or None for a key version this broker does not handle (other group types)."""
    if key is None or len(key) < 2:
        raise RecordError("record key shorter than its version")
    version = _INT16.unpack_from(key)[0]
    try:
        if version in (LEGACY_OFFSET_COMMIT_KEY_VERSION, OFFSET_COMMIT_KEY_VERSION):
            k = m.OffsetCommitKey.decode(key, 0, 2)
            return OffsetKey(k.group, k.topic, k.partition)
        if version == GROUP_METADATA_KEY_VERSION:
            return GroupKey(m.GroupMetadataKey.decode(key, 0, 2).group)
    except RecordError:
        raise
    except Exception as exc:
        raise RecordError(f"bad key of version {version}: {exc}") from exc
    return None


# --------------------------------------------------------------------------- values

def offset_commit_value(offset: OffsetAndMetadata) -> bytes:
    if offset.expire_timestamp is not None:
        version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
        expire = offset.expire_timestamp
    else:
        version = OFFSET_COMMIT_VALUE_VERSION
        expire = -1
    value = m.OffsetCommitValue(offset=offset.offset, leader_epoch=offset.leader_epoch,
                                metadata=offset.metadata or "",
                                commit_timestamp=offset.commit_timestamp,
                                expire_timestamp=expire)
    return _INT16.pack(version) + value.encode(version)


def decode_offset_commit_value(value: bytes) -> OffsetAndMetadata:
    version = _check_version(value, m.OffsetCommitValue)
    v = _decode(m.OffsetCommitValue, value, version)
    expire = v.expire_timestamp if version == 1 and v.expire_timestamp != -1 else None
    leader_epoch = v.leader_epoch if version >= 3 else -1
    return OffsetAndMetadata(v.offset, leader_epoch, v.metadata or "", v.commit_timestamp, expire)


def group_metadata_value(group: GroupMetadata,
                         assignment: dict[str, bytes] | None = None) -> bytes:
    """The group's persisted view: generation, protocol, leader and each member with its
    subscription (metadata of the selected protocol) and assignment."""
    member_cls = m.GroupMetadataValue.MemberMetadata
    protocol = group.protocol_name
    members = []
    for member in group.members.values():
        assigned = member.assignment if assignment is None else assignment.get(member.member_id, b"")
        members.append(member_cls(
            member_id=member.member_id, group_instance_id=member.group_instance_id,
            client_id=member.client_id, client_host=member.client_host,
            rebalance_timeout=member.rebalance_timeout_ms,
            session_timeout=member.session_timeout_ms,
            subscription=member.metadata(protocol) if protocol is not None else b"",
            assignment=assigned or b""))
    value = m.GroupMetadataValue(
        protocol_type=group.protocol_type or "", generation=group.generation_id,
        protocol=protocol, leader=group.leader_id,
        current_state_timestamp=group.state_timestamp if group.state_timestamp is not None else -1,
        members=members)
    return _INT16.pack(GROUP_METADATA_VALUE_VERSION) + value.encode(GROUP_METADATA_VALUE_VERSION)


def decode_group_metadata_value(value: bytes):
    version = _check_version(value, m.GroupMetadataValue)
    return _decode(m.GroupMetadataValue, value, version)


def _decode(cls, value: bytes, version: int):
    try:
        return cls.decode(value, version, 2, exact=False)
    except Exception as exc:
        raise RecordError(f"bad {cls.__name__} v{version}: {exc}") from exc


def _check_version(value: bytes, cls) -> int:
    if value is None or len(value) < 2:
        raise RecordError(f"{cls.__name__} shorter than its version")
    version = _INT16.unpack_from(value)[0]
    low, high = cls.valid_versions
    if version < low:
        raise RecordError(f"{cls.__name__} of unknown version {version}")
    return min(version, high)  # newer versions only add fields at the end or tagged fields


# --------------------------------------------------------------------------- whole records

def offset_commit_record(group: str, topic: str, partition: int,
                         offset: OffsetAndMetadata) -> Record:
    return offset_commit_key(group, topic, partition), offset_commit_value(offset)


def offset_commit_tombstone(group: str, topic: str, partition: int) -> Record:
    return offset_commit_key(group, topic, partition), None


def group_metadata_record(group: GroupMetadata,
                          assignment: dict[str, bytes] | None = None) -> Record:
    return group_metadata_key(group.group_id), group_metadata_value(group, assignment)


def group_metadata_tombstone(group_id: str) -> Record:
    return group_metadata_key(group_id), None


def decode_record(key: bytes, value: bytes | None):
    """(decoded key, decoded value or None) — for tools and tests; None key for other types."""
    k = decode_key(key)
    if k is None or value is None:
        return k, None
    if isinstance(k, OffsetKey):
        return k, decode_offset_commit_value(value)
    return k, decode_group_metadata_value(value)


def describe(records: Iterable[Record]) -> list[tuple]:
    return [decode_record(k, v) for k, v in records]


def java_length(s: str | None) -> int:
    """Java's String.length(): UTF-16 code units."""
    if not s:
        return 0
    return len(s.encode("utf-16-le", "surrogatepass")) // 2
