"""Consumer group records applied to the shard's group table (Kafka's GroupMetadataManager
replay methods): live once the shard stored them, or at load. The same code does both, so a
group is what its records say it is.
"""
from __future__ import annotations

from typing import Callable

from ..context import GroupContext
from ..group import DEAD, GroupMetadata
from ..history import settle_states
from . import records as crec
from .group import LEAVE_GROUP_MEMBER_EPOCH, ConsumerGroup, ConsumerGroupMember


class Replay:
    """Applies the consumer group records of one shard."""

    def __init__(self, context: GroupContext,
                 removed: Callable[[ConsumerGroup, bool], None]) -> None:
        self.groups = context.groups
        self.clock = context.clock
        self.stats = context.stats
        #: removed(group, replay): a group left the table (its timers, a downgrade's end)
        self.removed = removed
        self._touched: set = set()          # groups whose records were applied

    def replay(self, key: crec.ConsumerKey, value: bytes | None, replay: bool) -> None:
        """Apply one consumer group record, live (once stored) or at load."""
        kind = key.type
        if kind == crec.PARTITION_METADATA:
            return  # written by Kafka before 4.1; the metadata hash replaced it
        group_id = key.group
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and group.state is DEAD:
            # being deleted (DeleteGroups): its epoch's tombstone, the last record, drops it
            if kind == crec.GROUP_METADATA and value is None:
                self._remove_group(group, replay)
            return
        if not isinstance(group, ConsumerGroup):
            if value is None:
                return  # a tombstone for a group that is not (or no longer) a consumer group
            fresh = ConsumerGroup(group_id, self.clock())
            if group is not None:   # an empty classic group gives way; its offsets stay
                fresh.offsets = group.offsets
                fresh.pending_offset_commits = group.pending_offset_commits
            group = self.groups[group_id] = fresh
        group.persisted = True
        v = None if value is None else crec.decode_value(kind, value)
        if kind == crec.GROUP_METADATA:
            if v is None:
                self._remove_group(group, replay)
                return
            if not replay and v.epoch > group.group_epoch:
                self.stats.history.epoch_bumped(group_id, self.clock(), group.group_epoch,
                                                v.epoch)
            group.group_epoch = v.epoch
            group.metadata_hash = v.metadata_hash
            group.metadata_version = None
        elif kind == crec.MEMBER_METADATA:
            group.metadata_version = None
            if v is None:
                group.remove_member(key.sub)
            else:
                current = group.members.get(key.sub)
                if current is None:
                    current = ConsumerGroupMember(key.sub)
                    if not replay:
                        self.stats.history.member_joined(group_id, key.sub, v.client_id,
                                                         v.instance_id)
                classic = None
                if v.classic_member_metadata is not None:
                    cm = v.classic_member_metadata
                    classic = (cm.session_timeout_ms,
                               tuple((p.name, p.metadata) for p in cm.supported_protocols))
                group.update_member(current.replace(
                    instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
                    client_host=v.client_host,
                    subscribed_topic_names=frozenset(v.subscribed_topic_names),
                    subscribed_topic_regex=v.subscribed_topic_regex or None,
                    rebalance_timeout_ms=v.rebalance_timeout_ms,
                    server_assignor=v.server_assignor, classic_metadata=classic))
        elif kind == crec.TARGET_ASSIGNMENT_MEMBER:
            if v is None:
                group.target.pop(key.sub, None)
            else:
                group.target[key.sub] = crec.assignment_of(v.topic_partitions)
        elif kind == crec.TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = v.assignment_epoch if v is not None else 0
            group.assignment_timestamp = v.assignment_timestamp if v is not None else 0
            if v is not None and not replay:
                self.stats.history.phase(group_id, self.clock(), "reconcile",
                                         v.assignment_epoch)
        elif kind == crec.CURRENT_MEMBER_ASSIGNMENT:
            current = group.members.get(key.sub)
            if v is None:
                if current is not None:  # its partitions are free from now on
                    group.update_member(current.replace(
                        member_epoch=LEAVE_GROUP_MEMBER_EPOCH, assigned={},
                        pending_revocation={}, assignment_epochs={}))
            else:
                epochs = crec.assignment_epochs_of(v.assigned_partitions, v.member_epoch)
                epochs.update(crec.assignment_epochs_of(v.partitions_pending_revocation,
                                                        v.member_epoch))
                group.update_member((current or ConsumerGroupMember(key.sub)).replace(
                    member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                    state=crec.member_state(v.state),
                    assigned=crec.assignment_of(v.assigned_partitions),
                    pending_revocation=crec.assignment_of(v.partitions_pending_revocation),
                    assignment_epochs=epochs))
        elif kind == crec.REGULAR_EXPRESSION:
            if v is None:
                group.resolved_regexes.pop(key.sub, None)
            else:
                group.resolved_regexes[key.sub] = frozenset(v.topics)
                group.regex_version = v.version
        self._touched.add(group)

    def settle_states(self) -> None:
        """Once a batch of records is applied: the state of each group they touched
        (history.settle_states)."""
        settle_states(self._touched, self.clock(), self.stats.history)
        self._touched.clear()

    def _remove_group(self, group: ConsumerGroup, replay: bool) -> None:
        """The group epoch's tombstone: the group is deleted (its offsets were tombstoned
        before) or converted into a classic group."""
        if self.groups.get(group.group_id) is not group:
            return
        if group.offsets:  # converted to a classic group: the offsets stay
            fresh = GroupMetadata(group.group_id, self.clock())
            fresh.offsets = group.offsets
            self.groups[group.group_id] = fresh
        else:
            del self.groups[group.group_id]
        self.removed(group, replay)
