"""Streams group records applied to the shard's group table (Kafka's GroupMetadataManager
replay methods for StreamsGroupMetadata, StreamsGroupTopology, StreamsGroupMemberMetadata and
the target and current assignment records): live once the shard stored them, or at load. The
same code does both, so a group is what its records say it is, as consumer/replay.py does for
consumer groups.
"""
from __future__ import annotations

from typing import Callable

import structlog

from ..consumer.group import MemberState
from ..context import GroupContext
from ..group import DEAD
from ..history import settle_states
from . import records as srec
from .group import (MEMBER_STATES_BY_VALUE, StreamsGroup, StreamsGroupMember, is_simple,
                    new_group)
from .topology import StreamsTopology

log = structlog.get_logger("broker.coordinator")


class Replay:
    """Applies the streams group records of one shard."""

    def __init__(self, context: GroupContext, member_removed: Callable[[str, str], None],
                 removed: Callable[[StreamsGroup], None]) -> None:
        self.context = context
        self.groups = context.groups
        self.clock = context.clock
        self.stats = context.stats
        #: member_removed(group id, member id): a live member tombstone (its timers stop)
        self.member_removed = member_removed
        #: removed(group): a group left the table (its timers stop)
        self.removed = removed
        self._touched: set = set()          # groups whose records were applied

    def replay(self, key: srec.StreamsKey, value: bytes | None, replay: bool) -> None:
        """Apply one streams group record, live (once stored) or at load."""
        kind = key.type
        group_id = key.group
        group = self.groups.get(group_id)
        if isinstance(group, StreamsGroup) and group.state is DEAD:
            if kind == srec.GROUP_METADATA and value is None:
                self._remove_group(group)
            return
        if not isinstance(group, StreamsGroup):
            if value is None:
                return
            if group is not None and not is_simple(group):
                log.warning("streams group record for a group of another type ignored",
                            group=group_id)
                return
            group = self.groups[group_id] = new_group(group_id, self.clock(),
                                                      self.context.topics, group)
        group.persisted = True
        v = None if value is None else srec.decode_value(kind, value)
        mid = key.member
        if kind == srec.GROUP_METADATA:
            if v is None:
                self._remove_group(group)
                return
            if not replay and v.epoch > group.group_epoch:
                self.stats.history.epoch_bumped(group_id, self.clock(), group.group_epoch,
                                                v.epoch)
            group.group_epoch = v.epoch
            group.metadata_hash = v.metadata_hash
            group.validated_topology_epoch = v.validated_topology_epoch
            group.last_assignment_configs = {c.key: c.value
                                             for c in v.last_assignment_configs or ()}
        elif kind == srec.TOPOLOGY:
            group.topology = None if v is None else StreamsTopology.from_message(v)
            group.configured = None
        elif kind == srec.MEMBER_METADATA:
            if v is None:
                if group.remove_member(mid) is not None and not replay:
                    self.member_removed(group_id, mid)
            else:
                old = group.members.get(mid)
                if old is None:
                    old = StreamsGroupMember(mid)
                    if not replay:
                        self.stats.history.member_joined(group_id, mid, v.client_id)
                endpoint = None if v.user_endpoint is None else (v.user_endpoint.host,
                                                                 v.user_endpoint.port)
                group.update_member(old.replace(
                    instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
                    client_host=v.client_host, rebalance_timeout_ms=v.rebalance_timeout_ms,
                    topology_epoch=v.topology_epoch, process_id=v.process_id,
                    user_endpoint=endpoint,
                    client_tags=tuple(sorted((kv.key, kv.value) for kv in v.client_tags or ()))))
        elif kind == srec.TARGET_ASSIGNMENT_MEMBER:
            if v is None:
                group.target.pop(mid, None)
            else:
                group.target[mid] = srec.tasks_from(v)[0]
        elif kind == srec.TARGET_ASSIGNMENT_METADATA:
            if v is not None:
                group.assignment_epoch = v.assignment_epoch
                group.assignment_timestamp = v.assignment_timestamp
                if not replay:
                    self.stats.history.phase(group_id, self.clock(), "reconcile",
                                             v.assignment_epoch)
        elif kind == srec.CURRENT_MEMBER_ASSIGNMENT:
            old = group.members.get(mid)
            if v is None:
                if old is not None:
                    group.update_member(old.replace(
                        member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                        assigned={}, pending_revocation={}, assignment_epochs={}))
            else:
                assigned, epochs = srec.tasks_from(v)
                pending, pending_epochs = srec.tasks_from(v, "_pending_revocation")
                epochs.update(pending_epochs)
                group.update_member((old or StreamsGroupMember(mid)).replace(
                    member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                    state=MEMBER_STATES_BY_VALUE.get(v.state, MemberState.UNKNOWN),
                    assigned=assigned, pending_revocation=pending, assignment_epochs=epochs))
        self._touched.add(group)

    def settle_states(self) -> None:
        """Once a batch of records is applied: the state of each group they touched
        (history.settle_states)."""
        settle_states(self._touched, self.clock(), self.stats.history)
        self._touched.clear()

    def _remove_group(self, group: StreamsGroup) -> None:
        """The group epoch's tombstone: the group is deleted."""
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        self.removed(group)
