"""Kafka 4.3's sticky task assignor for streams groups (its StickyTaskAssignor, "sticky").

Tasks are ``(subtopology_id, partition)``. Members belong to processes (one Kafka Streams
instance with several stream threads is one process with several members); a process's load
is its task count over its member count.

Active tasks first: each stays with its previous active owner while that member is below its
fair share (ceil of the tasks left over the members left); then with the least-loaded previous
standby owner; the rest go, in subtopology then partition order, to the least-loaded member of
the least-loaded process. Then, with ``num.standby.replicas`` > 0, each task of a stateful
subtopology gets that many standbys, never on a process that already holds the task (active or
standby): first the previous active owner (now without it), then a previous standby owner, then
the least-loaded processes. Kafka 4.3's assignor assigns no warm-up tasks.
"""
from __future__ import annotations

import dataclasses

import structlog

log = structlog.get_logger("broker.coordinator")

ASSIGNOR_NAME = "sticky"


@dataclasses.dataclass
class MemberSpec:
    """What the assignor knows of a member: its process and its previous target."""

    process_id: str
    active: dict = dataclasses.field(default_factory=dict)    # subtopology -> partitions
    standby: dict = dataclasses.field(default_factory=dict)


class _Process:
    __slots__ = ("process_id", "order", "task_count", "counts", "tasks", "active", "standby")

    def __init__(self, process_id: str, order: int) -> None:
        self.process_id = process_id
        self.order = order
        self.task_count = 0
        self.counts: dict[str, int] = {}       # member -> tasks
        self.tasks: set = set()
        self.active: dict[str, set] = {}
        self.standby: dict[str, set] = {}

    @property
    def load(self) -> float:
        return self.task_count / len(self.counts) if self.counts else -1.0

    def add(self, member_id: str, task, active: bool) -> int:
        self.task_count += 1
        self.tasks.add(task)
        (self.active if active else self.standby).setdefault(member_id, set()).add(task)
        self.counts[member_id] += 1
        return self.counts[member_id]

    def add_to_least_loaded(self, task, active: bool) -> int:
        member_id = min(self.counts, key=lambda m: (self.counts[m], m))
        return self.add(member_id, task, active)


def _per_member(tasks: int, members: int) -> int:
    return 0 if members == 0 else -(-tasks // members)


class _Assignment:
    def __init__(self, members: dict[str, MemberSpec], subtopologies: dict,
                 num_standby: int) -> None:
        self.num_standby = num_standby
        self.total_active = sum(n for n, _stateful in subtopologies.values())
        self.total = self.total_active + sum(n * num_standby for n, stateful
                                             in subtopologies.values() if stateful)
        self.members_with_active_capacity = len(members)
        self.members_with_capacity = len(members)
        self.active_per_member = _per_member(self.total_active, len(members))
        self.total_per_member = _per_member(self.total, len(members))
        self.processes: dict[str, _Process] = {}
        self.prev_active: dict = {}
        self.prev_standby: dict = {}
        for member_id in sorted(members):
            spec = members[member_id]
            process = self.processes.get(spec.process_id)
            if process is None:
                process = self.processes[spec.process_id] = _Process(spec.process_id,
                                                                     len(self.processes))
            process.counts[member_id] = 0
            for sub, partitions in spec.active.items():
                for p in partitions:
                    self.prev_active[(sub, p)] = (spec.process_id, member_id)
            for sub, partitions in spec.standby.items():
                for p in partitions:
                    self.prev_standby.setdefault((sub, p), []).append((spec.process_id,
                                                                       member_id))

    # -- quotas, as Kafka lowers the fair share once a member reached it
    def _took_active(self, count: int) -> None:
        if count == self.active_per_member:
            self.members_with_active_capacity -= 1
            self.total_active -= count
            self.active_per_member = _per_member(self.total_active,
                                                 self.members_with_active_capacity)

    def _took_task(self, count: int) -> None:
        if count == self.total_per_member:
            self.members_with_capacity -= 1
            self.total -= count
            self.total_per_member = _per_member(self.total, self.members_with_capacity)

    def _least_loaded(self, exclude=()) -> list:
        return sorted((p for p in self.processes.values() if p not in exclude),
                      key=lambda p: (p.load, -len(p.counts), p.order))

    def _prev_least_loaded(self, owners, task) -> tuple | None:
        """Kafka's findPrevMemberWithLeastLoad."""
        if not owners:
            return None
        candidate = owners[0]
        cand_process = self.processes[candidate[0]]
        cand_load = cand_process.load
        cand_member_load = cand_process.counts[candidate[1]]
        for owner in owners[1:]:
            process = self.processes[owner[0]]
            if process.load < cand_load and (task is None or task not in process.tasks):
                member_load = process.counts[owner[1]]
                if member_load < cand_member_load:
                    candidate, cand_load, cand_member_load = owner, process.load, member_load
        if task is None or task not in self.processes[candidate[0]].tasks:
            return candidate
        return None

    def assign_active(self, tasks: list) -> None:
        left = sorted(tasks, key=lambda t: (t[1], t[0]))
        for source in (lambda t: self.prev_active.get(t),
                       lambda t: self._prev_least_loaded(self.prev_standby.get(t), None)):
            rest = []
            for task in left:
                owner = source(task)
                if owner is not None and owner[0] in self.processes and \
                        owner[1] in self.processes[owner[0]].counts:
                    process = self.processes[owner[0]]
                    if process.counts[owner[1]] < self.active_per_member:
                        count = process.add(owner[1], task, True)
                        self._took_active(count)
                        self._took_task(count)
                        continue
                rest.append(task)
            left = rest
        for task in sorted(left):
            least = self._least_loaded()
            if not least:
                raise RuntimeError(f"No process available to assign active task {task}.")
            count = least[0].add_to_least_loaded(task, True)
            self._took_active(count)
            self._took_task(count)

    def assign_standby(self, tasks: list) -> None:
        to_least_loaded = []
        for task in sorted(tasks, key=lambda t: (t[1], t[0]), reverse=True):
            for i in range(self.num_standby):
                owner = self.prev_active.get(task)
                if owner is not None:
                    process = self.processes[owner[0]]
                    if task not in process.tasks and \
                            process.counts[owner[1]] < self.total_per_member:
                        self._took_task(process.add(owner[1], task, False))
                        continue
                owners = self.prev_standby.get(task)
                if owners:
                    owner = self._prev_least_loaded(owners, task)
                    if owner is not None:
                        process = self.processes[owner[0]]
                        if process.counts[owner[1]] < self.total_per_member:
                            self._took_task(process.add(owner[1], task, False))
                            continue
                to_least_loaded.append((task, self.num_standby - i))
                break
        for task, remaining in sorted(to_least_loaded, reverse=True):
            for i in range(remaining):
                if not self._standby_to_least_loaded(task):
                    log.warning("not enough capacity for the standby replicas of a task",
                                task=f"{task[0]}_{task[1]}",
                                unassigned=self.num_standby - i)
                    break

    def _standby_to_least_loaded(self, task) -> bool:
        for process in self._least_loaded():
            if task not in process.tasks:
                self._took_task(process.add_to_least_loaded(task, False))
                return True
        return False

    def result(self, member_ids) -> dict:
        out = {member_id: ({}, {}) for member_id in member_ids}
        for process in self.processes.values():
            for index, by_member in ((0, process.active), (1, process.standby)):
                for member_id, tasks in by_member.items():
                    target = out[member_id][index]
                    for sub, p in tasks:
                        target.setdefault(sub, set()).add(p)
        return {mid: ({s: frozenset(ps) for s, ps in a.items()},
                      {s: frozenset(ps) for s, ps in sb.items()})
                for mid, (a, sb) in out.items()}


def assign(members: dict[str, MemberSpec], subtopologies: dict[str, tuple],
           num_standby_replicas: int = 0) -> dict[str, tuple]:
    """``subtopologies``: id -> (number of tasks, stateful). Returns member id -> (active,
    standby), each ``{subtopology_id: frozenset(partitions)}``."""
    if not members:
        return {}
    state = _Assignment(members, subtopologies, num_standby_replicas)
    state.assign_active([(sub, p) for sub, (n, _s) in sorted(subtopologies.items())
                         for p in range(n)])
    if num_standby_replicas > 0:
        state.assign_standby([(sub, p) for sub, (n, stateful) in sorted(subtopologies.items())
                              if stateful for p in range(n)])
    return state.result(members)
