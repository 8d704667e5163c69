"""The target assignment of a consumer group (step 2 of a heartbeat, see manager.py): the
assignor run over every member (Kafka's TargetAssignmentBuilder), a record for each member whose
target changed and one for the new assignment epoch; and the assignment deferred by
group.consumer.assignment.interval.ms, which a timer computes once the interval is over.
"""
from __future__ import annotations

import structlog

from protocol.errors import ErrorCode

from ...common.result import CoordinatorResult
from ...common.timer import CoordinatorTimer
from ..context import GroupContext
from . import records as crec, settings
from .assignors import (ASSIGNORS, HETEROGENEOUS, HOMOGENEOUS, GroupSpec,
                        MemberSubscription, TopicDescriber)
from ..group import GroupError
from .group import ConsumerGroup, can_compute_next_target
from .subscriptions import topic_metadata

log = structlog.get_logger("broker.coordinator")

E = ErrorCode


class TargetAssignment:
    """Computes the target assignments of the consumer groups of one shard."""

    def __init__(self, context: GroupContext, timer: CoordinatorTimer) -> None:
        self.context = context
        self.groups = context.groups
        self.config = context.config
        self.clock = context.clock
        self.timer = timer
        #: (topic names, regex) -> the ids of the existing topics they name, at a topics version
        self._topic_ids: dict = {}
        self._topic_ids_version = -1

    @property
    def topics(self):
        return self.context.topics

    def due(self, group: ConsumerGroup, group_epoch: int, now: int) -> bool:
        """Whether a new target assignment is computed now: the group epoch is ahead of it and
        group.consumer.assignment.interval.ms has passed since the last one."""
        return can_compute_next_target(
            group, group_epoch, settings.assignment_interval_ms(self.context, group.group_id), now)

    def compute(self, group: ConsumerGroup, member, updated, metadata: dict, resolved,
                group_epoch: int, records: list, now: int) -> dict:
        """Kafka's TargetAssignmentBuilder: run the assignor over every member (``member``
        replaced by ``updated``, or removed when ``updated`` is None) and write a record for
        each member whose target changed, then the new assignment epoch."""
        by_name = {name: topic_id for topic_id, (name, _n) in metadata.items()}
        version = self.topics.version()
        if version != self._topic_ids_version:   # the cache below holds for one version
            self._topic_ids.clear()
            self._topic_ids_version = version
        skip = member.member_id if member is not None else None
        replaces = updated.instance_id if updated is not None else None
        targets = group.target
        cache = group.assignment_specs
        fresh = {}
        specs = {}
        assignors: dict[str, int] = {}
        # Kafka's subscription type: homogeneous when every member names the same topics (or
        # all the same regex and no names), found while walking the members
        first = None
        homogeneous = True
        for mid, mm in _assigned_members(group, skip, updated, replaces, assignors):
            names = mm.subscribed_topic_names
            regex = mm.subscribed_topic_regex
            if first is None:
                first = (names, regex)
            elif homogeneous and (regex != first[1] or (names is not first[0]
                                                        and names != first[0])):
                homogeneous = False
            target = targets.get(mid)
            if target is None and updated is not None and mid == updated.member_id \
                    and skip != mid:
                target = targets.get(member.member_id)
            matched = None
            if regex:
                matched = (resolved or {}).get(regex)
                if matched is None:
                    matched = group.resolved_regexes.get(regex, ())
            # a member's spec is reused while the member, its target and its topics are
            cached = cache.get(mid)
            if cached is not None and cached[0] is mm and cached[1] is target \
                    and cached[2] is matched and cached[3] == version:
                spec = cached[4]
            else:
                spec = MemberSubscription(
                    subscribed_topic_ids=self._member_topic_ids(names, matched, by_name),
                    rack_id=mm.rack_id, instance_id=mm.instance_id,
                    assigned_partitions=target or {})
            fresh[mid] = (mm, target, matched, version, spec)
            specs[mid] = spec
        group.assignment_specs = fresh
        if updated is not None and updated.server_assignor:
            assignors[updated.server_assignor] = assignors.get(updated.server_assignor, 0) + 1
        assignor_name = max(assignors, key=assignors.__getitem__) if assignors \
            else self.config.group_consumer_assignors[0]
        if first is not None and first[1] and first[0]:
            homogeneous = False       # a regex and names: Kafka calls that heterogeneous
        assignor = ASSIGNORS[assignor_name]()
        describer = TopicDescriber(metadata)
        try:
            result = assignor.assign(
                GroupSpec(specs, HOMOGENEOUS if homogeneous else HETEROGENEOUS), describer)
        except Exception as exc:  # an assignor bug must not take the group down
            log.error("assignor failed", group=group.group_id, assignor=assignor_name,
                      error=str(exc))
            raise GroupError(E.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target "
                             f"assignment for epoch {group_epoch}: {exc}.") from exc
        for mid in specs:
            new = result.get(mid)
            old = targets.get(mid)
            if new is not None and new is old:
                continue                    # the assignor handed the member's target back
            new = {t: frozenset(p) for t, p in (new or {}).items() if p}
            if new != (old or {}):
                records.append(crec.target_assignment_record(group.group_id, mid, new))
            result[mid] = new
        records.append(crec.target_assignment_epoch_record(group.group_id, group_epoch, now))
        log.info("target assignment computed", group=group.group_id, epoch=group_epoch,
                 assignor=assignor_name, members=len(specs), topics=len(metadata))
        return result

    def _member_topic_ids(self, names: frozenset, matched, metadata_by_name: dict) -> frozenset:
        """The ids of the existing topics a member names or its regex matched (Kafka's
        TopicIds)."""
        key = (names, frozenset(matched or ()))
        ids = self._topic_ids.get(key)
        if ids is None:
            ids = frozenset(metadata_by_name[n] for n in names.union(key[1])
                            if n in metadata_by_name)
            if len(self._topic_ids) < 4096:
                self._topic_ids[key] = ids
        return ids

    # ------------------------------------------------------------------ deferred by the interval
    def schedule(self, group: ConsumerGroup, delay_ms: int) -> None:
        key = ("assign", group.group_id)
        if not self.timer.is_scheduled(key):
            gid = group.group_id
            self.timer.schedule(key, max(delay_ms, 0), lambda: self._on_due(gid))

    def _on_due(self, group_id: str) -> None:
        """The deferred target assignment of a group whose epoch moved on within the interval:
        Kafka computes it at the next heartbeat after the interval; here the timer does, so
        the members find it at their next heartbeats."""
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or self.context.loading \
                or group.group_epoch <= group.assignment_epoch or not group.members:
            return
        now = self.clock()
        records: list = []
        metadata = topic_metadata(self.topics, group.subscribed_topic_names())
        try:
            self.compute(group, None, None, metadata, None, group.group_epoch, records, now)
        except GroupError:
            return
        self.context.append(CoordinatorResult(records))


def _assigned_members(group: ConsumerGroup, skip, updated, replaces, assignors: dict):
    """The members the assignor sees, in the group's order: ``updated`` in the place of the
    member ``skip`` (or last when new), without a static member it replaces (same instance id
    ``replaces``). Counts each member's server assignor into ``assignors``, as Kafka's
    computePreferredServerAssignor does: every member but ``skip`` (``updated`` is the
    caller's to add)."""
    seen_updated = False
    for mid, mm in group.members.items():
        if mid == skip:
            if updated is not None and updated.member_id == mid:
                seen_updated = True
                yield mid, updated          # keeps its place in the group's order
            continue
        if mm.server_assignor:
            assignors[mm.server_assignor] = assignors.get(mm.server_assignor, 0) + 1
        if replaces is not None and mm.instance_id == replaces:
            continue                        # a static member replaced by ``updated``
        if updated is not None and mid == updated.member_id:
            seen_updated = True
        yield mid, mm
    if updated is not None and not seen_updated:
        yield updated.member_id, updated
