"""ShareGroupHeartbeat and ShareGroupDescribe for the share groups of one shard (the share-group
half of Kafka's GroupMetadataManager).

A heartbeat goes as a consumer-group heartbeat does (consumer/manager.py), on the same shard,
write path and keyed timer: the member is created or updated and a changed subscription or
topic metadata bumps the group epoch; a group epoch ahead of the target assignment computes a
new one with the simple assignor (assignor.py); the member then takes its target at once (share
groups revoke nothing). The handler returns the records of what changes and the answer; the
shard stores the records, replays them (:meth:`replay`, also the load path) and then answers.

Kafka assigns only share partitions its share coordinator has initialized, which takes a
heartbeat interval; here a share partition is initialized by the first ShareFetch at its
leader (broker/coordinator/group/share/fetcher.py), so a member's first heartbeat gets its
partitions.
"""
from __future__ import annotations

import structlog

from protocol import messages as m
from protocol.errors import ErrorCode

from ...common.result import CoordinatorResult
from ...common.timer import CoordinatorTimer
from ..consumer.group import ConsumerGroupMember, can_compute_next_target, metadata_hash
from ..consumer.records import assignment_of
from ..context import GroupContext
from ..group import DEAD, GroupError
from . import records as srec
from .assignor import assign
from .group import ASSIGNOR_NAME, LEAVE_GROUP_MEMBER_EPOCH, ShareGroup, ShareGroupListener

log = structlog.get_logger("broker.coordinator")

E = ErrorCode
_Response = m.ShareGroupHeartbeatResponse


def _invalid(message: str) -> GroupError:
    return GroupError(E.INVALID_REQUEST, message)


def _empty(value: str | None) -> bool:
    return value is not None and value.strip() == ""


class ShareGroupManager:
    """The share-group protocol for the share groups of one shard."""

    def __init__(self, context: GroupContext) -> None:
        self.context = context
        self.groups = context.groups
        self.config = context.config
        self.clock = context.clock
        self.stats = context.stats
        self.timer = CoordinatorTimer(context.timer)
        self.listener = ShareGroupListener()
        self._touched: set = set()

    @property
    def topics(self):
        return self.context.topics

    def session_timeout_ms(self, group_id: str) -> int:
        return self.context.setting(group_id, "share.session.timeout.ms")

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self.context.setting(group_id, "share.heartbeat.interval.ms")

    # ================================================================== ShareGroupHeartbeat
    def heartbeat(self, request, client_id: str, client_host: str) -> tuple:
        """-> (records, response); nothing changes until the shard stores the records."""
        try:
            self._validate(request)
            if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(request)
            return self._heartbeat(request, client_id, client_host)
        except GroupError as exc:
            return [], _Response(error_code=int(exc.code), error_message=exc.message,
                                 member_epoch=0, heartbeat_interval_ms=0)

    @staticmethod
    def _validate(request) -> None:
        """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid."""
        if _empty(request.member_id) or not request.member_id:
            raise _invalid("MemberId can't be empty.")
        if _empty(request.group_id) or not request.group_id:
            raise _invalid("GroupId can't be empty.")
        if _empty(request.rack_id):
            raise _invalid("RackId can't be empty.")
        if request.member_epoch == 0:
            if not request.subscribed_topic_names:
                raise _invalid("SubscribedTopicNames must be set in first request.")
        elif request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            raise _invalid("MemberEpoch is invalid.")

    def _group(self, group_id: str, create: bool) -> ShareGroup:
        """Kafka's getOrMaybeCreateShareGroup; a new group enters the table when its records
        are replayed."""
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            if not create:
                raise GroupError(E.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
            return ShareGroup(group_id, self.clock())
        if not isinstance(group, ShareGroup):
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        return group

    def _heartbeat(self, request, client_id: str, client_host: str) -> tuple:
        group_id = request.group_id
        member_id = request.member_id
        epoch = request.member_epoch
        now = self.clock()
        group = self._group(group_id, epoch == 0)
        max_size = self.config.group_share_max_size
        if len(group.members) >= max_size and member_id not in group.members:
            raise GroupError(E.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum "
                                                       f"capacity of {max_size} members.")
        member = group.members.get(member_id)
        if member is None:
            if epoch != 0:
                raise GroupError(E.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group_id}.")
            member = ConsumerGroupMember(member_id)
            log.info("member joins the share group", group=group_id, member=member_id)
        elif epoch != 0:
            _check_epoch(member, epoch)
        updated = member.replace(
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            subscribed_topic_names=frozenset(request.subscribed_topic_names)
            if request.subscribed_topic_names is not None else member.subscribed_topic_names,
            client_id=client_id, client_host=client_host)
        records = []
        bump = False
        if updated != member or member_id not in group.members:
            records.append(srec.member_subscription_record(group_id, updated))
            bump = updated.subscribed_topic_names != member.subscribed_topic_names
        group_epoch = group.group_epoch
        topics_version = self.topics.version()
        metadata = None
        if bump or group.metadata_version != topics_version:
            metadata = self.topic_metadata(group.subscribed_topic_names(member_id, updated))
            digest = metadata_hash(metadata)
            if digest != group.metadata_hash:
                bump = True
            elif not bump:
                group.metadata_version = topics_version
            if bump:
                group_epoch += 1
                records.append(srec.group_epoch_record(group_id, group_epoch, digest))
                self.stats.share_group_rebalances_total += 1
        target_epoch = group.assignment_epoch
        target = group.target.get(member_id, {})
        # share.assignment.interval.ms: within it members keep the last target, and a heartbeat
        # after it computes the next one
        interval = self.context.setting(group_id, "share.assignment.interval.ms")
        if can_compute_next_target(group, group_epoch, interval, now):
            if metadata is None:
                metadata = self.topic_metadata(group.subscribed_topic_names(member_id, updated))
            targets = self._compute_target(group, updated, metadata)
            for mid, assignment in targets.items():
                if assignment != group.target.get(mid, {}) or mid == member_id and \
                        mid not in group.target:
                    records.append(srec.target_assignment_record(group_id, mid, assignment))
            records.append(srec.target_assignment_epoch_record(group_id, group_epoch, now))
            target_epoch = group_epoch
            target = targets[member_id]
        reconciled = updated
        if updated.member_epoch != target_epoch or dict(updated.assigned) != dict(target) \
                or member_id not in group.members:
            reconciled = updated.replace(member_epoch=target_epoch,
                                         previous_member_epoch=updated.member_epoch,
                                         assigned=target)
            records.append(srec.current_assignment_record(group_id, reconciled))
        response = _Response(error_code=0, member_id=member_id,
                             member_epoch=reconciled.member_epoch,
                             heartbeat_interval_ms=self.heartbeat_interval_ms(group_id))
        if epoch == 0 or request.subscribed_topic_names is not None or \
                dict(reconciled.assigned) != dict(member.assigned):
            response.assignment = _Response.Assignment(topic_partitions=[
                _Response.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in sorted(reconciled.assigned.items(),
                                                   key=lambda kv: kv[0].bytes)])
        return records, response

    def topic_metadata(self, names) -> dict:
        """{topic_id: (name, partitions)} of the subscribed topics that exist."""
        out = {}
        for name in names:
            found = self.topics.get(name)
            if found is not None:
                topic_id, partitions = found
                out[topic_id] = (name, partitions)
        return out

    def _compute_target(self, group: ShareGroup, updated: ConsumerGroupMember,
                        metadata: dict) -> dict:
        ids_by_name = {name: topic_id for topic_id, (name, _n) in metadata.items()}
        members = dict(group.members)
        members[updated.member_id] = updated
        subscriptions = {mid: frozenset(ids_by_name[n] for n in mm.subscribed_topic_names
                                        if n in ids_by_name)
                         for mid, mm in members.items()}
        partitions = {topic_id: n for topic_id, (_name, n) in metadata.items()}
        current = {mid: group.target.get(mid, mm.assigned) for mid, mm in members.items()}
        return assign(subscriptions, partitions, current)

    def _leave(self, request) -> tuple:
        group_id = request.group_id
        member_id = request.member_id
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:   # Kafka's shareGroup(groupId)
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        if not isinstance(group, ShareGroup):
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(E.UNKNOWN_MEMBER_ID,
                             f"Member {member_id} is not a member of group {group_id}.")
        log.info("member left the share group", group=group_id, member=member_id)
        return (self.fence_member(group, member),
                _Response(error_code=0, member_id=member_id,
                          member_epoch=LEAVE_GROUP_MEMBER_EPOCH))

    def fence_member(self, group: ShareGroup, member: ConsumerGroupMember) -> list:
        """The records that remove a member and bump the group epoch (Kafka's
        shareGroupFenceMember); the others get its partitions at their next heartbeat."""
        gid = group.group_id
        mid = member.member_id
        names = group.subscribed_topic_names(without=mid)
        digest = metadata_hash(self.topic_metadata(names))
        self.timer.cancel(("share-session", gid, mid))
        return [srec.tombstone(srec.CURRENT_MEMBER_ASSIGNMENT, gid, mid),
                srec.tombstone(srec.TARGET_ASSIGNMENT_MEMBER, gid, mid),
                srec.tombstone(srec.MEMBER_METADATA, gid, mid),
                srec.group_epoch_record(gid, group.group_epoch + 1, digest)]

    # ------------------------------------------------------------------ offsets admin
    def empty_group(self, group_id: str, create: bool) -> ShareGroup:
        """The group whose share-partition offsets an admin alters (``create``: a new one if
        none) or deletes: it must be a share group with no members (Kafka's
        throwIfShareGroupIsNotEmpty)."""
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            if not create:
                raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
            return ShareGroup(group_id, self.clock())
        if not isinstance(group, ShareGroup):
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if group.members:
            raise GroupError(E.NON_EMPTY_GROUP, "The group is not empty.")
        return group

    def initialized_record(self, group: ShareGroup, initialized: dict,
                           deleted: set = frozenset()) -> tuple:
        """The ShareGroupStatePartitionMetadata record after share partitions were
        initialized (``initialized``: topic id -> (name, partitions)) or deleted (topic ids)."""
        cls = m.ShareGroupStatePartitionMetadataValue.TopicPartitionsInfo
        topics = {}
        if group.initialized is not None:
            for t in group.initialized.initialized_topics:
                topics[t.topic_id] = (t.topic_name, set(t.partitions))
        for topic_id, (name, partitions) in initialized.items():
            topics.setdefault(topic_id, (name, set()))[1].update(partitions)
        for topic_id in deleted:
            topics.pop(topic_id, None)
        value = srec._value(srec.STATE_PARTITION_METADATA, initializing_topics=[],
                            initialized_topics=[cls(topic_id=t, topic_name=name,
                                                    partitions=sorted(ps))
                                                for t, (name, ps) in sorted(
                                                    topics.items(), key=lambda kv: kv[0].bytes)],
                            deleting_topics=[])
        return srec._key(srec.STATE_PARTITION_METADATA, group_id=group.group_id), value

    # ------------------------------------------------------------------ sessions
    def schedule_session(self, group_id: str, member_id: str) -> None:
        self.timer.extend(("share-session", group_id, member_id),
                          self.session_timeout_ms(group_id),
                          lambda: self.expire_member(group_id, member_id))

    def expire_member(self, group_id: str, member_id: str) -> None:
        """The member's session timed out: fence it through the write path."""
        group = self.groups.get(group_id)
        if not isinstance(group, ShareGroup) or self.context.loading:
            return
        member = group.members.get(member_id)
        if member is None:
            return
        log.info("share group member fenced: its session expired", group=group_id,
                 member=member_id)
        self.stats.expired_members_total += 1
        self.context.append(CoordinatorResult(self.fence_member(group, member)))

    # ------------------------------------------------------------------ replay
    def replay(self, key: srec.ShareKey, value: bytes | None, replay: bool) -> None:
        """Apply one share group record, live (once stored) or at load."""
        kind = key.type
        group_id = key.group
        group = self.groups.get(group_id)
        if isinstance(group, ShareGroup) and group.state is DEAD:
            if kind == srec.GROUP_METADATA and value is None:
                self._remove_group(group)
            return
        if not isinstance(group, ShareGroup):
            if value is None:
                return
            if group is not None and (group.members or group.has_offsets()):
                log.warning("share group record for a group of another type ignored",
                            group=group_id)
                return
            group = self.groups[group_id] = ShareGroup(group_id, self.clock())
        group.persisted = True
        v = None if value is None else srec.decode_value(kind, value)
        mid = key.member
        if kind == srec.GROUP_METADATA:
            if v is None:
                self._remove_group(group)
                return
            group.group_epoch = v.epoch
            group.metadata_hash = v.metadata_hash
        elif kind == srec.MEMBER_METADATA:
            if v is None:
                # the member's share sessions and acquired records stay with the leader of its
                # share partitions until the session closes or its connection does (a consumer
                # leaves before it sends its last acknowledgements), as on Kafka
                if group.remove_member(mid) is not None and not replay:
                    self.timer.cancel(("share-session", group_id, mid))
            else:
                old = group.members.get(mid) or ConsumerGroupMember(mid)
                group.update_member(old.replace(
                    rack_id=v.rack_id, client_id=v.client_id, client_host=v.client_host,
                    subscribed_topic_names=frozenset(v.subscribed_topic_names)))
        elif kind == srec.TARGET_ASSIGNMENT_MEMBER:
            if v is None:
                group.target.pop(mid, None)
            else:
                group.target[mid] = assignment_of(v.topic_partitions)
        elif kind == srec.TARGET_ASSIGNMENT_METADATA:
            if v is not None:
                group.assignment_epoch = v.assignment_epoch
                group.assignment_timestamp = v.assignment_timestamp
        elif kind == srec.CURRENT_MEMBER_ASSIGNMENT:
            old = group.members.get(mid)
            if v is None:
                if old is not None:
                    group.update_member(old.replace(member_epoch=0, previous_member_epoch=0,
                                                    assigned={}))
            else:
                group.update_member((old or ConsumerGroupMember(mid)).replace(
                    member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                    assigned=assignment_of(v.assigned_partitions)))
        elif kind == srec.STATE_PARTITION_METADATA:
            group.initialized = v
        self._touched.add(group)

    def settle_states(self) -> None:
        now = self.clock()
        for group in self._touched:
            group.update_state(now)
        self._touched.clear()

    def _remove_group(self, group: ShareGroup) -> None:
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        for member_id in list(group.members):
            self.timer.cancel(("share-session", group.group_id, member_id))
        self.listener.on_group_deleted(group.group_id)

    def group_tombstones(self, group: ShareGroup) -> list:
        """The records that delete an empty group (Kafka's createGroupTombstoneRecords)."""
        gid = group.group_id
        records = [srec.tombstone(srec.CURRENT_MEMBER_ASSIGNMENT, gid, mid)
                   for mid in group.members]
        records += [srec.tombstone(srec.TARGET_ASSIGNMENT_MEMBER, gid, mid)
                    for mid in group.target]
        records.append(srec.tombstone(srec.TARGET_ASSIGNMENT_METADATA, gid))
        records += [srec.tombstone(srec.MEMBER_METADATA, gid, mid) for mid in group.members]
        if group.initialized is not None:
            records.append(srec.tombstone(srec.STATE_PARTITION_METADATA, gid))
        records.append(srec.tombstone(srec.GROUP_METADATA, gid))
        return records

    # ------------------------------------------------------------------ loading
    def on_loaded(self, group: ShareGroup) -> None:
        for member_id in group.members:
            self.schedule_session(group.group_id, member_id)

    def unload_group(self, group: ShareGroup) -> None:
        for member_id in list(group.members):
            self.timer.cancel(("share-session", group.group_id, member_id))

    # ================================================================== ShareGroupDescribe
    def describe(self, group_id: str):
        cls = m.ShareGroupDescribeResponse.DescribedGroup
        group = self.groups.get(group_id)
        if group is None or group.state is DEAD:
            return cls(error_code=int(E.GROUP_ID_NOT_FOUND),
                       error_message=f"Group {group_id} not found.", group_id=group_id)
        if not isinstance(group, ShareGroup):
            return cls(error_code=int(E.GROUP_ID_NOT_FOUND),
                       error_message=f"Group {group_id} is not a share group.",
                       group_id=group_id)
        member_cls = m.ShareGroupDescribeResponse.Member
        tp_cls = m.ShareGroupDescribeResponse.TopicPartitions
        members = []
        for member in group.members.values():
            tps = []
            for topic_id, partitions in sorted(member.assigned.items(),
                                               key=lambda kv: kv[0].bytes):
                found = self.topics.by_id(topic_id)
                tps.append(tp_cls(topic_id=topic_id, topic_name=found[0] if found else "",
                                  partitions=sorted(partitions)))
            members.append(member_cls(
                member_id=member.member_id, rack_id=member.rack_id,
                member_epoch=member.member_epoch, client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=sorted(member.subscribed_topic_names),
                assignment=m.ShareGroupDescribeResponse.Assignment(topic_partitions=tps)))
        return cls(error_code=0, group_id=group_id, group_state=group.state.value,
                   group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                   assignor_name=ASSIGNOR_NAME, members=members)


def _check_epoch(member: ConsumerGroupMember, epoch: int) -> None:
    """Kafka's throwIfShareGroupMemberEpochIsInvalid (epoch 0, a rejoin, is always valid)."""
    if epoch > member.member_epoch:
        raise GroupError(E.FENCED_MEMBER_EPOCH,
                         f"The share group member has a greater member epoch ({epoch}) than the "
                         f"one known by the group coordinator ({member.member_epoch}). The "
                         "member must abandon all its partitions and rejoin.")
    if epoch < member.member_epoch and epoch != member.previous_member_epoch:
        raise GroupError(E.FENCED_MEMBER_EPOCH,
                         f"The share group member has a smaller member epoch ({epoch}) than the "
                         f"one known by the group coordinator ({member.member_epoch}), and it "
                         "does not match the previous member epoch "
                         f"({member.previous_member_epoch}). The member must abandon all its "
                         "partitions and rejoin.")
