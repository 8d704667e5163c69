"""Online migration from the classic protocol (Kafka 4.x, ``group.consumer.migration.policy``).

A running classic group of the "consumer" protocol type becomes a consumer group when a member
joins it with ConsumerGroupHeartbeat (Kafka's convertToConsumerGroup): every classic member
becomes a member of the consumer group at the group's generation, keeping its assignment as its
target. The classic members go on speaking JoinGroup, SyncGroup, Heartbeat and LeaveGroup to the
consumer group (Kafka's classicGroup*ToConsumerGroup): a JoinGroup updates the member as a
heartbeat would and is answered at once with the member epoch as the generation; SyncGroup
hands out the member's assigned partitions in the ConsumerProtocol encoding; Heartbeat answers
REBALANCE_IN_PROGRESS when the member has to rejoin to move on. So a classic group can be rolled
to the consumer protocol member by member.

The way back (Kafka's convertToClassicGroup): when the last consumer-protocol member leaves
and only classic members remain, the group becomes a classic group again at its group epoch,
each member with its target assignment, and a rebalance starts.
"""
from __future__ import annotations

import struct
from typing import Any, Callable, Protocol

import structlog

from protocol import messages as m
from protocol.errors import ErrorCode

from .. import records as rec
from ..context import GroupContext
from ..group import CONSUMER_PROTOCOL_TYPE, GroupError, GroupMetadata, MemberMetadata
from . import records as crec
from .group import ConsumerGroup, ConsumerGroupMember, MemberState, metadata_hash, new_member_id



class ConsumerGroups(Protocol):
    """What the classic protocol's requests to consumer groups use of the consumer-group
    manager (consumer/manager.py), which holds this object: its state, and the steps that
    change members the same way for both protocols."""

    context: GroupContext
    config: Any
    clock: Callable[[], int]
    groups: dict
    stats: Any
    timer: Any
    topics: Any

    def topic_metadata(self, names) -> dict: ...
    def update_member(self, group: ConsumerGroup, member: ConsumerGroupMember,
                      updated: ConsumerGroupMember, owned, records: list, *args,
                      **kwargs): ...
    def static_member(self, group: ConsumerGroup, member_id: str, epoch: int,
                      instance_id: str, owned, create: bool, records: list, *args,
                      **kwargs): ...
    def fence_member(self, group: ConsumerGroup, *members: ConsumerGroupMember) -> list: ...
    def schedule_session(self, group_id: str, member: ConsumerGroupMember) -> None: ...
    def cancel_timers(self, group_id: str, member_id: str) -> None: ...
    def write_fence(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None: ...
    def group_tombstones(self, group: ConsumerGroup) -> list: ...

log = structlog.get_logger("broker.coordinator")

E = ErrorCode
_INT16 = struct.Struct(">h")


class ClassicMembers:
    """The classic protocol's requests to consumer groups, and the upgrade of classic groups."""

    def __init__(self, manager: ConsumerGroups) -> None:
        self.manager = manager
        self.config = manager.config

    @property
    def policy(self) -> str:
        return self.config.group_consumer_migration_policy

    # ================================================================== upgrade
    def upgrade(self, classic: GroupMetadata, records: list) -> ConsumerGroup:
        """Kafka's validateOnlineUpgrade and convertToConsumerGroup: the consumer group the
        classic one becomes, and the records that make it so (``records``)."""
        gid = classic.group_id
        if self.policy not in ("bidirectional", "upgrade"):
            raise GroupError(E.GROUP_ID_NOT_FOUND,
                             f"Cannot upgrade classic group {gid} to consumer group because "
                             f"online upgrade is disabled.")
        if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
            raise GroupError(E.GROUP_ID_NOT_FOUND,
                             f"Cannot upgrade classic group {gid} to consumer group because the "
                             f"group does not use the consumer embedded protocol.")
        if len(classic.members) > self.config.group_consumer_max_size:
            raise GroupError(E.GROUP_ID_NOT_FOUND,
                             f"Cannot upgrade classic group {gid} to consumer group because the "
                             f"group size exceeds the consumer group maximum size.")
        manager = self.manager
        generation = classic.generation_id
        group = ConsumerGroup(gid, manager.clock())
        group.group_epoch = generation
        group.assignment_epoch = generation
        try:
            for cm in classic.members.values():
                topics, _owned, rack = decode_subscription(cm.metadata(classic.protocol_name))
                assigned = self._decode_assignment(cm.assignment)
                member = ConsumerGroupMember(
                    cm.member_id, instance_id=cm.group_instance_id, rack_id=rack,
                    client_id=cm.client_id, client_host=cm.client_host,
                    subscribed_topic_names=frozenset(topics),
                    rebalance_timeout_ms=cm.rebalance_timeout_ms, member_epoch=generation,
                    previous_member_epoch=generation, state=MemberState.STABLE,
                    assigned=assigned,
                    assignment_epochs={(t, p): generation for t, ps in assigned.items()
                                       for p in ps},
                    classic_metadata=(cm.session_timeout_ms, tuple(cm.protocols)))
                group.update_member(member)
                group.target[member.member_id] = assigned
        except _Unconvertible as exc:
            raise GroupError(E.GROUP_ID_NOT_FOUND,
                             f"Cannot upgrade classic group {gid} to consumer group because "
                             f"{exc}.") from None
        group.metadata_hash = metadata_hash(
            manager.topic_metadata(group.subscribed_topic_names()))
        # the classic rebalance in progress is over: whoever waits rejoins
        manager.context.classic.unload_group(classic, E.REBALANCE_IN_PROGRESS)
        if classic.persisted:
            records.append(rec.group_metadata_tombstone(gid))
        members = list(group.members.values())
        records.extend(crec.member_subscription_record(gid, mm) for mm in members)
        records.append(crec.group_epoch_record(gid, group.group_epoch, group.metadata_hash))
        records.extend(crec.target_assignment_record(gid, mm.member_id, group.target[mm.member_id])
                       for mm in members)
        records.append(crec.target_assignment_epoch_record(gid, generation, 0))
        records.extend(crec.current_assignment_record(gid, mm) for mm in members)
        for mm in members:
            manager.schedule_session(gid, mm)
        log.info("classic group converted to a consumer group", group=gid,
                 generation=generation, members=len(members))
        return group

    def _decode_assignment(self, data: bytes) -> dict:
        if not data:
            return {}
        try:
            version = min(_INT16.unpack_from(data)[0], 3)
            value = m.ConsumerProtocolAssignment.decode(data, version, 2, exact=False)
        except Exception as exc:
            raise _Unconvertible("the embedded consumer protocol is malformed") from exc
        if value.user_data:
            raise _Unconvertible("an unsupported custom assignor is in use. Please refer to "
                                 "the documentation or switch to a default assignor before "
                                 "re-attempting the upgrade")
        out = {}
        for tp in value.assigned_partitions:
            found = self.manager.topics.get(tp.topic)
            if found is not None and tp.partitions:
                out[found[0]] = out.get(found[0], frozenset()) | frozenset(tp.partitions)
        return out

    # ================================================================== downgrade
    def downgrade(self, group: ConsumerGroup, leaving: set) -> list | None:
        """Kafka's validateOnlineDowngradeWithFencedMembers and convertToClassicGroup: the
        records that turn the group back into a classic group once ``leaving`` are gone, or
        None when it stays a consumer group. The shard rebuilds the classic group from them
        (:meth:`finish_downgrade`)."""
        remaining = [mm for mid, mm in group.members.items() if mid not in leaving]
        if (not remaining or any(mm.classic_metadata is None for mm in remaining)
                or self.policy not in ("bidirectional", "downgrade")
                or len(remaining) > self.config.group_max_size):
            return None
        manager = self.manager
        classic = GroupMetadata(group.group_id, manager.clock())
        for mm in remaining:
            session_timeout, protocols = mm.classic_metadata
            classic.add(MemberMetadata(mm.member_id, mm.instance_id, mm.client_id,
                                       mm.client_host, mm.rebalance_timeout_ms, session_timeout,
                                       CONSUMER_PROTOCOL_TYPE, protocols))
        classic.generation_id = group.group_epoch
        classic.protocol_type = CONSUMER_PROTOCOL_TYPE
        classic.protocol_name = classic.select_protocol()
        assignments = {mm.member_id: self._encode(mm, group.target.get(mm.member_id, {}))
                       for mm in remaining}
        records = manager.group_tombstones(group)
        records.append(rec.group_metadata_record(classic, assignments))
        for mid in group.members:
            manager.cancel_timers(group.group_id, mid)
        log.info("consumer group converted back to a classic group: only classic members "
                 "remain", group=group.group_id, members=len(remaining),
                 generation=group.group_epoch)
        return records

    def finish_downgrade(self, group_id: str, value: bytes) -> None:
        """After the downgrade's records are stored: the classic group with its members, their
        heartbeats, and a rebalance (the members learn the classic generation by rejoining)."""
        classic_manager = self.manager.context.classic
        classic_manager.replay_group_metadata(group_id, rec.decode_group_metadata_value(value),
                                              True)
        group = self.manager.groups.get(group_id)
        if not isinstance(group, GroupMetadata) or not group.members:
            return
        classic_manager.on_loaded(group)
        classic_manager.prepare_rebalance(
            group, f"Downgrade group {group_id} from consumer to classic.")

    # ================================================================== JoinGroup
    def join(self, group: ConsumerGroup, request, version: int, client_id: str,
             client_host: str) -> tuple:
        """Kafka's classicGroupJoinToConsumerGroup -> (records, answer kwargs for the JoinGroup
        callback). The answer goes out once the records are stored."""
        manager = self.manager
        gid = group.group_id
        if self.policy == "disabled":
            raise GroupError(E.INCONSISTENT_GROUP_PROTOCOL,
                             f"Cannot join the consumer group {gid} with the classic protocol "
                             f"because the group migration is disabled.")
        records: list = []
        member_id = request.member_id or ""
        unknown = member_id == ""
        if unknown:
            member_id = new_member_id(manager.context.new_uuid())
        if (len(group.members) >= self.config.group_consumer_max_size
                and member_id not in group.members):
            raise GroupError(E.GROUP_MAX_SIZE_REACHED)
        protocols = tuple((p.name, p.metadata or b"") for p in request.protocols)
        if not self._supports(group, request.protocol_type, {name for name, _ in protocols}):
            raise GroupError(E.INCONSISTENT_GROUP_PROTOCOL)
        instance_id = request.group_instance_id if version >= 5 else None
        if unknown and instance_id is None and version >= 4:
            log.info("classic member must rejoin the consumer group with its member id",
                     group=gid, member=member_id)
            return [], dict(error=E.MEMBER_ID_REQUIRED, member_id=member_id)
        if instance_id is None:
            member = group.members.get(member_id) or ConsumerGroupMember(member_id)
        else:
            member = manager.static_member(group, member_id, -1, instance_id, [], unknown,
                                           records, classic=True)
        topics, owned_names, rack = decode_subscription(protocols[0][1])
        owned = {}
        for name, partitions in owned_names.items():
            found = manager.topics.get(name)
            if found is not None:
                owned[found[0]] = frozenset(partitions)
        rebalance_timeout = request.rebalance_timeout_ms
        if version == 0 or rebalance_timeout is None or rebalance_timeout < 0:
            rebalance_timeout = request.session_timeout_ms
        updated = member.replace(
            instance_id=instance_id if instance_id is not None else member.instance_id,
            rack_id=rack if rack is not None else member.rack_id,
            rebalance_timeout_ms=rebalance_timeout, subscribed_topic_names=frozenset(topics),
            subscribed_topic_regex=None, client_id=client_id, client_host=client_host,
            classic_metadata=(request.session_timeout_ms, protocols))
        reconciled = manager.update_member(group, member, updated, owned, records,
                                           manager.clock())
        timer = manager.timer
        timer.cancel(("join", gid, member_id))
        manager.schedule_session(gid, reconciled)
        timer.schedule(("sync", gid, member_id), max(rebalance_timeout, 0),
                       lambda: self._on_timeout(gid, member_id, "sync"))
        log.info("classic member joined the consumer group", group=gid, member=member_id,
                 epoch=reconciled.member_epoch)
        return records, dict(error=E.NONE, member_id=member_id,
                             generation_id=reconciled.member_epoch,
                             protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=protocols[0][0],
                             leader="", skip_assignment=False, members=())

    @staticmethod
    def _supports(group: ConsumerGroup, protocol_type: str | None, names: set) -> bool:
        """Kafka's ConsumerGroup.supportsClassicProtocols: the consumer protocol type, and a
        protocol every classic member supports."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE:
            return False
        classic = [mm for mm in group.members.values() if mm.classic_metadata is not None]
        if not group.members or not classic:
            return bool(names)
        return any(all(name in {n for n, _ in mm.classic_metadata[1]} for mm in classic)
                   for name in names)

    # ================================================================== SyncGroup, Heartbeat
    def _classic_member(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
                        generation: int) -> ConsumerGroupMember:
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise GroupError(E.UNKNOWN_MEMBER_ID)
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise GroupError(E.UNKNOWN_MEMBER_ID)
            if member.member_id != member_id:
                raise GroupError(E.FENCED_INSTANCE_ID)
        if member.classic_metadata is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID)
        if member.member_epoch != generation:
            raise GroupError(E.ILLEGAL_GENERATION)
        return member

    def sync(self, group: ConsumerGroup, request, version: int) -> dict:
        """Kafka's classicGroupSyncToConsumerGroup -> the SyncGroup callback's kwargs."""
        gid = group.group_id
        member = self._classic_member(group, request.member_id,
                                      request.group_instance_id if version >= 3 else None,
                                      request.generation_id)
        first_protocol = member.classic_metadata[1][0][0]
        if version >= 5 and ((request.protocol_type is not None
                              and request.protocol_type != CONSUMER_PROTOCOL_TYPE)
                             or (request.protocol_name is not None
                                 and request.protocol_name != first_protocol)):
            raise GroupError(E.INCONSISTENT_GROUP_PROTOCOL)
        self._throw_if_rebalancing(group, member)
        timer = self.manager.timer
        timer.cancel(("sync", gid, member.member_id))
        self.manager.schedule_session(gid, member)
        return dict(error=E.NONE, protocol_type=request.protocol_type,
                    protocol_name=request.protocol_name, assignment=self._encode(member))

    def _throw_if_rebalancing(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        if group.assignment_epoch > member.member_epoch and \
                member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout(group.group_id, member)
            raise GroupError(E.REBALANCE_IN_PROGRESS)

    def heartbeat(self, group: ConsumerGroup, request, version: int) -> ErrorCode:
        """Kafka's classicGroupHeartbeatToConsumerGroup: REBALANCE_IN_PROGRESS tells the member
        to rejoin, to catch up with a new target or to finish its revocation."""
        gid = group.group_id
        member = self._classic_member(group, request.member_id,
                                      request.group_instance_id if version >= 3 else None,
                                      request.generation_id)
        self.manager.schedule_session(gid, member)
        if (member.member_epoch < group.assignment_epoch
                or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS
                    and not self._waiting_on_unreleased(group, member))):
            self._schedule_join_timeout(gid, member)
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    @staticmethod
    def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        for topic_id, partitions in group.target.get(member.member_id, {}).items():
            held = member.assigned.get(topic_id, frozenset())
            for p in partitions:
                if p not in held and group.current_partition_epoch(topic_id, p) != -1:
                    return True
        return False

    def _schedule_join_timeout(self, gid: str, member: ConsumerGroupMember) -> None:
        key = ("join", gid, member.member_id)
        if not self.manager.timer.is_scheduled(key):
            self.manager.timer.schedule(key, max(member.rebalance_timeout_ms, 0),
                                        lambda: self._on_timeout(gid, member.member_id, "join"))

    def _on_timeout(self, gid: str, member_id: str, kind: str) -> None:
        manager = self.manager
        group = manager.groups.get(gid)
        if not isinstance(group, ConsumerGroup) or manager.context.loading:
            return
        member = group.members.get(member_id)
        if member is None or member.classic_metadata is None:
            return
        log.info(f"classic member fenced: no {'JoinGroup' if kind == 'join' else 'SyncGroup'} "
                 f"within its rebalance timeout", group=gid, member=member_id)
        manager.stats.expired_members_total += 1
        manager.write_fence(group, member)

    def _encode(self, member: ConsumerGroupMember, partitions=None) -> bytes:
        """The member's assigned partitions (or ``partitions``) as a ConsumerProtocolAssignment,
        in the version of its first protocol's subscription (Kafka's prepareAssignment)."""
        metadata = member.classic_metadata[1][0][1]
        version = 0
        if len(metadata) >= 2:
            version = max(0, min(_INT16.unpack_from(metadata)[0], 3))
        tp_cls = m.ConsumerProtocolAssignment.TopicPartition
        by_name = []
        for topic_id, held in (member.assigned if partitions is None else partitions).items():
            found = self.manager.topics.by_id(topic_id)
            if found is not None:
                by_name.append(tp_cls(topic=found[0], partitions=sorted(held)))
        by_name.sort(key=lambda tp: tp.topic)
        body = m.ConsumerProtocolAssignment(assigned_partitions=by_name, user_data=None)
        return _INT16.pack(version) + body.encode(version)

    # ================================================================== LeaveGroup
    def leave(self, group: ConsumerGroup, identities: list) -> tuple[list, list]:
        """Kafka's classicGroupLeaveToConsumerGroup -> (records, [(member_id, instance_id,
        error)])."""
        results = []
        leaving = []
        for member_id, instance_id, reason in identities:
            member_id = member_id or ""
            if instance_id is None:
                member = group.members.get(member_id)
                error = None if member is not None else E.UNKNOWN_MEMBER_ID
            else:
                member = group.static_member(instance_id)
                if member is None:
                    error = E.UNKNOWN_MEMBER_ID
                elif member_id and member.member_id != member_id:
                    error = E.FENCED_INSTANCE_ID
                else:
                    error = None
            if error is None:
                log.info("member left the consumer group through LeaveGroup",
                         group=group.group_id, member=member.member_id,
                         group_instance_id=instance_id, reason=reason or "not provided")
                if member not in leaving:
                    leaving.append(member)
            results.append((member_id, instance_id, error or E.NONE))
        records = self.manager.fence_member(group, *leaving) if leaving else []
        return records, results


class _Unconvertible(Exception):
    """A classic group whose members' protocol data cannot be read as the consumer protocol."""


def decode_subscription(data: bytes) -> tuple[list, dict, str | None]:
    """(topics, owned partitions {topic: set}, rack id) of a ConsumerProtocolSubscription."""
    if not data or len(data) < 2:
        raise _Unconvertible("the embedded consumer protocol is malformed")
    try:
        version = max(0, min(_INT16.unpack_from(data)[0], 3))
        value = m.ConsumerProtocolSubscription.decode(data, version, 2, exact=False)
    except Exception as exc:
        raise _Unconvertible("the embedded consumer protocol is malformed") from exc
    owned = {}
    for tp in (value.owned_partitions or ()) if version >= 1 else ():
        owned.setdefault(tp.topic, set()).update(tp.partitions)
    rack = value.rack_id if version >= 3 else None
    return list(value.topics), owned, rack or None
