"""Each group's recent rebalances, as the console shows them (broker/console).

The group state machines (classic/manager.py, consumer/manager.py, consumer/replay.py and
streams/replay.py) call these hooks at the points where a rebalance starts, moves to its next
phase and ends, and where members join and leave; the hooks only note plain values with the
coordinator's injected clock, so the state machines stay free of I/O.

A classic rebalance has two phases: the join phase (PreparingRebalance, until every member
rejoined or its rebalance timeout) and the sync phase (CompletingRebalance, until the leader's
assignment is stored and the group is Stable). A consumer group (KIP-848) rebalance starts with
a group epoch bump; its phases are the target assignment (Assigning) and the members'
reconciliation (Reconciling, until every member is Stable at the new epoch).

Bounds: the last ``per_group`` rebalances of each group (a ring), the ``max_groups`` groups
changed most recently, and at most ``MAX_NOTED`` member changes noted per rebalance.
"""
from __future__ import annotations

from collections import OrderedDict, deque

from .group import EMPTY, STABLE

#: rebalances kept per group (the oldest goes first)
DEFAULT_PER_GROUP = 20
#: groups whose history is kept; the group that changed least recently is forgotten first
DEFAULT_MAX_GROUPS = 10_000
#: members named as joined or left in one rebalance (a group of thousands shows a count beyond)
MAX_NOTED = 50

JOINED = "member joined"
LEFT = "member left"
EXPIRED = "member expired"
METADATA = "metadata change"
OTHER = "other"


def classic_cause(reason: str) -> str:
    """The kind of a classic rebalance from Kafka's reason text, as classic/manager.py writes
    it ("adding new member ...", "removing member ... on heartbeat expiration", "explicit
    LeaveGroup request ...", "updating metadata for member ...", "leader ... re-joining group
    during Stable"); the client's own reason after "; client reason:" is not looked at."""
    text = reason.split("; client reason:")[0].lower()
    if "expiration" in text or "timeout" in text:
        return EXPIRED
    if "leavegroup" in text:
        return LEFT
    if "metadata" in text or "re-joining" in text or "protocol" in text:
        return METADATA
    if text.startswith("adding") or "joined" in text or "joining" in text:
        return JOINED
    return OTHER


class _Rebalance:
    __slots__ = ("started_ms", "reason", "cause", "from_generation", "generation",
                 "joined", "left", "more_joined", "more_left", "phase_ms", "phase",
                 "phase_started_ms", "ended_ms", "outcome", "members", "first_phase")

    def __init__(self, now: int, reason: str, cause: str, from_generation: int,
                 first_phase: str) -> None:
        self.started_ms = now
        self.reason = reason
        self.cause = cause
        self.from_generation = from_generation
        self.generation = from_generation
        self.joined: list = []
        self.left: list = []
        self.more_joined = 0
        self.more_left = 0
        self.phase_ms: dict[str, int] = {}
        self.phase = self.first_phase = first_phase
        self.phase_started_ms = now
        self.ended_ms: int | None = None
        self.outcome: str | None = None
        self.members: int | None = None

    def note_joined(self, entry: dict) -> None:
        if len(self.joined) < MAX_NOTED:
            self.joined.append(entry)
        else:
            self.more_joined += 1

    def note_left(self, entry: dict) -> None:
        if len(self.left) < MAX_NOTED:
            self.left.append(entry)
        else:
            self.more_left += 1

    def next_phase(self, now: int, phase: str | None) -> None:
        if self.phase is not None:
            self.phase_ms[self.phase] = self.phase_ms.get(self.phase, 0) + max(
                now - self.phase_started_ms, 0)
        self.phase = phase
        self.phase_started_ms = now

    def to_dict(self, now: int) -> dict:
        phases = dict(self.phase_ms)
        if self.ended_ms is None and self.phase is not None:
            phases[self.phase] = phases.get(self.phase, 0) + max(now - self.phase_started_ms, 0)
        return {
            "started_ms": self.started_ms, "ended_ms": self.ended_ms,
            "duration_ms": (self.ended_ms if self.ended_ms is not None else now)
            - self.started_ms,
            "reason": self.reason, "cause": self.cause,
            "from_generation": self.from_generation, "generation": self.generation,
            "joined": list(self.joined), "left": list(self.left),
            "more_joined": self.more_joined, "more_left": self.more_left,
            "phases_ms": phases, "phase": self.phase if self.ended_ms is None else None,
            "outcome": self.outcome or "in progress", "members": self.members,
        }


class _GroupHistory:
    __slots__ = ("rebalances", "current", "pending_joined", "pending_left")

    def __init__(self, per_group: int) -> None:
        self.rebalances: deque[_Rebalance] = deque(maxlen=per_group)
        self.current: _Rebalance | None = None
        #: member changes seen before the rebalance they cause starts (a consumer group's
        #: records are written before the group epoch bump is applied)
        self.pending_joined: list = []
        self.pending_left: list = []


class RebalanceHistory:
    """Recent rebalances of every group; the console reads :meth:`of`."""

    def __init__(self, per_group: int = DEFAULT_PER_GROUP,
                 max_groups: int = DEFAULT_MAX_GROUPS) -> None:
        if per_group < 1 or max_groups < 1:
            raise ValueError("per_group and max_groups must be at least 1")
        self.per_group = per_group
        self.max_groups = max_groups
        self.groups: OrderedDict[str, _GroupHistory] = OrderedDict()

    def _group(self, group_id: str) -> _GroupHistory:
        history = self.groups.get(group_id)
        if history is None:
            history = self.groups[group_id] = _GroupHistory(self.per_group)
            if len(self.groups) > self.max_groups:
                self.groups.popitem(last=False)
        else:
            self.groups.move_to_end(group_id)
        return history

    # -- hooks the state machines call

    def member_joined(self, group_id: str, member_id: str, client_id: str = "",
                      instance_id: str | None = None) -> None:
        history = self._group(group_id)
        entry = {"member_id": member_id, "client_id": client_id, "instance_id": instance_id}
        if self._joinable(history):
            history.current.note_joined(entry)
        elif len(history.pending_joined) < MAX_NOTED:
            history.pending_joined.append(entry)

    def member_left(self, group_id: str, member_id: str, why: str) -> None:
        """``why``: "left" (LeaveGroup or a leave heartbeat), "expired" (session timeout),
        or another short word for a removal (such as a missed SyncGroup)."""
        history = self._group(group_id)
        entry = {"member_id": member_id, "why": why}
        if self._joinable(history):
            history.current.note_left(entry)
        elif len(history.pending_left) < MAX_NOTED:
            history.pending_left.append(entry)

    @staticmethod
    def _joinable(history: _GroupHistory) -> bool:
        """A member change belongs to an open classic rebalance in its join phase (a member
        joining during PreparingRebalance); later, it starts the next one. In a consumer group
        every member change bumps the group epoch: it belongs to the next rebalance."""
        current = history.current
        return current is not None and current.phase == current.first_phase == "join"

    def started(self, group_id: str, now: int, reason: str, cause: str | None,
                from_generation: int, first_phase: str) -> None:
        """A rebalance starts; one still open ends as "interrupted" (a member joined or left
        in its middle, as in Kafka, where the new rebalance supersedes it). ``cause`` None:
        the member changes noted since the last rebalance tell it (a consumer group's epoch
        bump), else it is a metadata change (subscriptions or the topics' partitions)."""
        history = self._group(group_id)
        current = history.current
        if current is not None:
            self._end(history, now, "interrupted")
        if cause is None:
            whys = {entry["why"] for entry in history.pending_left}
            cause = (EXPIRED if whys - {"left"} else LEFT if whys
                     else JOINED if history.pending_joined else METADATA)
        rebalance = _Rebalance(now, reason, cause, from_generation, first_phase)
        for entry in history.pending_joined:
            rebalance.note_joined(entry)
        for entry in history.pending_left:
            rebalance.note_left(entry)
        history.pending_joined = []
        history.pending_left = []
        history.current = rebalance
        history.rebalances.append(rebalance)

    def epoch_bumped(self, group_id: str, now: int, from_epoch: int, epoch: int) -> None:
        """A consumer or streams group's rebalance starts with its group epoch bump
        (consumer/replay.py, streams/replay.py); the target assignment is its first phase."""
        self.started(group_id, now, f"group epoch bumped to {epoch}", None, from_epoch,
                     "assign")

    def phase(self, group_id: str, now: int, phase: str, generation: int) -> None:
        """The open rebalance moves to its next phase (classic: the join phase ended with
        ``generation``; consumer: the target assignment of epoch ``generation`` is stored)."""
        history = self.groups.get(group_id)
        if history is None or history.current is None:
            return
        history.current.generation = generation
        if history.current.phase != phase:
            history.current.next_phase(now, phase)

    def ended(self, group_id: str, now: int, outcome: str, members: int | None = None,
              generation: int | None = None) -> None:
        """The open rebalance ends: "stable", or "empty" (no member is left). (One that a new
        rebalance supersedes ends "interrupted", in :meth:`started`.)"""
        history = self.groups.get(group_id)
        if history is None or history.current is None:
            return
        if generation is not None:
            history.current.generation = generation
        history.current.members = members
        self._end(history, now, outcome)

    @staticmethod
    def _end(history: _GroupHistory, now: int, outcome: str) -> None:
        current = history.current
        current.next_phase(now, None)
        current.ended_ms = now
        current.outcome = outcome
        history.current = None

    def forget(self, group_id: str) -> None:
        """The group was deleted."""
        self.groups.pop(group_id, None)

    # -- reads

    def in_progress(self, group_id: str) -> bool:
        history = self.groups.get(group_id)
        return history is not None and history.current is not None

    def of(self, group_id: str, now: int, limit: int | None = None) -> list[dict]:
        """The group's rebalances, newest first."""
        history = self.groups.get(group_id)
        if history is None:
            return []
        out = []
        for rebalance in reversed(history.rebalances):
            if limit is not None and len(out) >= limit:
                break
            out.append(rebalance.to_dict(now))
        return out


def settle_states(groups, now: int, history: RebalanceHistory) -> None:
    """Once a batch of records is applied (consumer/replay.py, streams/replay.py): the state of
    each group they touched (Kafka's maybeUpdateGroupState), computed once per batch rather
    than once per record; a rebalance in the history ends when its group is Stable or Empty."""
    for group in groups:
        group.update_state(now)
        if group.state in (STABLE, EMPTY) and history.in_progress(group.group_id):
            history.ended(group.group_id, now, "stable" if group.state is STABLE
                          else "empty", len(group.members), group.group_epoch)
