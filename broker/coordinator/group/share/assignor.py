"""The simple assignor of share groups (Kafka's SimpleAssignor, ``simple``).

Share-group members own records, not partitions, so a partition may go to several members: with
more members than partitions each partition is shared by ceil(members / partitions) of them.
The slots (partitions times that sharing) are spread evenly over the members; what a member
holds and may keep stays with it (sticky), the rest goes to the members with the fewest
partitions. A partition no member could take within those counts still goes to a subscriber
with the fewest, so every subscribed partition is assigned.
"""
from __future__ import annotations

import math
import uuid
from typing import Mapping


def assign(subscriptions: Mapping[str, frozenset], partitions: Mapping[uuid.UUID, int],
           current: Mapping[str, Mapping]) -> dict[str, dict]:
    """``subscriptions``: member id -> the ids of the topics it subscribes to (existing ones);
    ``partitions``: topic id -> partition count; ``current``: member id -> its assignment
    ``{topic_id: frozenset}``. Returns every member's new assignment in the same form."""
    members = sorted(subscriptions)
    out: dict[str, dict] = {member: {} for member in members}
    if not members:
        return out
    wanted = sorted({t for topics in subscriptions.values() for t in topics if t in partitions},
                    key=lambda t: t.bytes)
    targets = [(t, p) for t in wanted for p in range(partitions[t])]
    if not targets:
        return out
    sharing = math.ceil(len(members) / len(targets))
    per_member = sharing * len(targets) / len(members)
    desired = {member: math.ceil(per_member * (i + 1)) - math.ceil(per_member * i)
               for i, member in enumerate(members)}
    holders: dict[tuple, list[str]] = {tp: [] for tp in targets}
    counts = {member: 0 for member in members}

    def give(member: str, tp: tuple) -> None:
        holders[tp].append(member)
        counts[member] += 1

    # 1. keep what each member holds, still subscribes to, within both limits
    for member in members:
        for topic_id, held in sorted(current.get(member, {}).items(), key=lambda kv: kv[0].bytes):
            if topic_id not in subscriptions[member] or topic_id not in partitions:
                continue
            for p in sorted(held):
                tp = (topic_id, p)
                if tp in holders and counts[member] < desired[member] \
                        and len(holders[tp]) < sharing:
                    give(member, tp)
    # 2. fill each partition up to its sharing from the members with the fewest
    for tp in targets:
        while len(holders[tp]) < sharing:
            free = [mm for mm in members if counts[mm] < desired[mm] and tp[0] in
                    subscriptions[mm] and mm not in holders[tp]]
            if not free:
                break
            give(min(free, key=lambda mm: (counts[mm], mm)), tp)
    # 3. a partition nobody took (uneven subscriptions): its least loaded subscriber
    for tp in targets:
        if not holders[tp]:
            subscribers = [mm for mm in members if tp[0] in subscriptions[mm]]
            if subscribers:
                give(min(subscribers, key=lambda mm: (counts[mm], mm)), tp)
    for (topic_id, p), held_by in holders.items():
        for member in held_by:
            out[member].setdefault(topic_id, set()).add(p)
    return {member: {t: frozenset(ps) for t, ps in assignment.items()}
            for member, assignment in out.items()}
