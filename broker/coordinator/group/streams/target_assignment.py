"""The target assignment of a streams group (step 4 of a heartbeat, see manager.py): the sticky
task assignor (assignor.py) run over every member (Kafka's maybeUpdateStreamsTargetAssignment
and its TargetAssignmentBuilder), a record for each member whose target changed and one for the
new assignment epoch; the assignment deferred by streams.initial.rebalance.delay.ms (a group's
first) or streams.assignment.interval.ms, which a timer computes once it is over (Kafka's
computeDelayedTargetAssignment); and a member's way towards its target (step 5), which is
consumer/reconciliation.py on tasks.

Keys on the shard's timer: ("streams-initial" | "streams-assign", group id).
"""
from __future__ import annotations

from ...common.result import CoordinatorResult
from ...common.timer import CoordinatorTimer
from ..consumer.reconciliation import reconcile
from ..context import GroupContext
from . import records as srec, settings
from .assignor import MemberSpec, assign
from .configured_topology import configured_topology
from .group import ACTIVE, STANDBY, StreamsGroup, StreamsGroupMember, tasks_of
from .heartbeat import status, tasks_in
from .topology import Status


class TargetAssignment:
    """Computes the target assignments of the streams groups of one shard."""

    def __init__(self, context: GroupContext, timer: CoordinatorTimer) -> None:
        self.context = context
        self.groups = context.groups
        self.clock = context.clock
        self.timer = timer

    def delay_initial(self, group_id: str) -> None:
        """The first rebalance of an empty group waits for more members."""
        delay_key = ("streams-initial", group_id)
        delay = settings.initial_rebalance_delay_ms(self.context, group_id)
        if delay > 0 and not self.timer.is_scheduled(delay_key):
            self.timer.schedule(delay_key, delay, lambda: self._on_due(group_id))

    def update(self, group: StreamsGroup, group_epoch: int, updated: StreamsGroupMember,
               configured, configs: dict, statuses: list, now: int) -> tuple:
        """Kafka's maybeUpdateStreamsTargetAssignment -> (epoch, the member's target, records)."""
        gid = group.group_id
        if self.timer.is_scheduled(("streams-initial", gid)):
            statuses.append(status(Status.ASSIGNMENT_DELAYED, "Assignment delayed due to the "
                                   "configured initial rebalance delay."))
            return group.assignment_epoch, {}, []
        if group.assignment_epoch >= group_epoch:
            return group.assignment_epoch, group.target.get(updated.member_id, {}), []
        interval = settings.assignment_interval_ms(self.context, gid)
        if interval > 0 and now < group.assignment_timestamp + interval:
            statuses.append(status(Status.ASSIGNMENT_DELAYED, "Assignment delayed due to the "
                                   "configured assignment interval."))
            self.timer.schedule(("streams-assign", gid),
                                group.assignment_timestamp + interval - now,
                                lambda: self._on_due(gid))
            return group.assignment_epoch, group.target.get(updated.member_id, {}), []
        members = dict(group.members)
        members[updated.member_id] = updated
        targets = self.compute(group, members, configured, configs)
        records = []
        for mid, tasks in targets.items():
            if tasks != group.target.get(mid) or (mid == updated.member_id and
                                                  mid not in group.target):
                records.append(srec.target_assignment_record(gid, mid, tasks))
        records.append(srec.target_assignment_epoch_record(gid, group_epoch, now))
        return group_epoch, targets.get(updated.member_id, {}), records

    def compute(self, group: StreamsGroup, members: dict, configured, configs: dict) -> dict:
        """member id -> tasks by (kind, subtopology): the sticky assignor's answer from each
        member's previous target; nothing while the topology is not ready."""
        if configured is None or not configured.ready:
            return {mid: {} for mid in members}
        specs = {}
        for mid, mm in members.items():
            previous = group.target.get(mid, {})
            specs[mid] = MemberSpec(
                mm.process_id,
                {sub: ps for (k, sub), ps in previous.items() if k == ACTIVE},
                {sub: ps for (k, sub), ps in previous.items() if k == STANDBY})
        subs = {sid: (s.num_tasks, s.stateful) for sid, s in configured.subtopologies.items()}
        result = assign(specs, subs, int(configs.get("num.standby.replicas", "0")))
        return {mid: tasks_of(active, standby) for mid, (active, standby) in result.items()}

    def _on_due(self, group_id: str) -> None:
        """Kafka's computeDelayedTargetAssignment: the initial delay (or the assignment
        interval) is over; compute the target assignment through the write path."""
        group = self.groups.get(group_id)
        if not isinstance(group, StreamsGroup) or self.context.loading or \
                group.assignment_epoch >= group.group_epoch or not group.members:
            return
        configured = configured_topology(self.context.topics, group)
        if configured is None:
            return      # as Kafka: no configured topology, no delayed assignment
        configs = settings.assignment_configs(self.context, group_id)
        targets = self.compute(group, dict(group.members), configured, configs)
        records = [srec.target_assignment_record(group_id, mid, tasks)
                   for mid, tasks in targets.items() if tasks != group.target.get(mid)]
        records.append(srec.target_assignment_epoch_record(group_id, group.group_epoch,
                                                           self.clock()))
        self.context.append(CoordinatorResult(records))

    def cancel(self, group_id: str) -> None:
        """The group is gone: no deferred assignment."""
        self.timer.cancel(("streams-initial", group_id))
        self.timer.cancel(("streams-assign", group_id))


def reconcile_member(group: StreamsGroup, member: StreamsGroupMember, target_epoch: int,
                     target: dict, request) -> StreamsGroupMember:
    """consumer/reconciliation.py on tasks: an active task is free once no process holds it
    (and this member's process holds it as no standby); a standby once this member's
    process holds it in no other role."""
    if member.is_reconciled_to(target_epoch):
        return member
    active_owner, standby_owners, warmup_owners = group.task_owners()
    process = member.process_id

    def held_elsewhere(key, partition: int) -> int:
        kind, sub = key
        task = (sub, partition)
        in_process = process in standby_owners.get(task, ()) or \
            process in warmup_owners.get(task, ())
        if kind == ACTIVE:
            busy = task in active_owner or in_process
        else:
            busy = active_owner.get(task) == process or in_process
        return 0 if busy else -1

    owned = None
    if request.active_tasks is not None:
        owned = tasks_of(tasks_in(request.active_tasks), tasks_in(request.standby_tasks),
                         tasks_in(request.warmup_tasks))
    keys = frozenset(target) | frozenset(member.assigned) | \
        frozenset(member.pending_revocation)
    return reconcile(member, target_epoch, target, owned, held_elsewhere, keys, False)
