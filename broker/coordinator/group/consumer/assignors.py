"""KIP-848 server-side partition assignors, ``uniform`` and ``range``, as Kafka 4.3's group
coordinator implements them: Kafka's UniformAssignor (its UniformHomogeneousAssignmentBuilder and
UniformHeterogeneousAssignmentBuilder) and RangeAssignor.

Pure functions of a GroupSpec (the members, their subscriptions and their current target
assignment) and a TopicDescriber (partition counts): no I/O, no clock, inputs are not mutated. The
result maps every member id to ``{topic_id: frozenset(partitions)}``, empty for a member that gets
nothing.

What the output depends on
--------------------------
Kafka breaks ties by the iteration order of Java hash maps and sets, so one group gets another
assignment when its member or topic ids change. We reproduce those orders (``java_order``), so
that with the same ids the output is Kafka's:

* Member order. Kafka's coordinator hands the assignor a ``java.util.HashMap`` keyed by member id,
  so members come in the bucket order of ``String.hashCode`` (``GroupSpec.member_ids``, its table
  sized for the member count). Members sharing a bucket keep their order in ``GroupSpec.members``:
  Kafka's is its group's member map order with a joining member last; pass the same.
* uniform, homogeneous. Partitions to hand out are dealt topic by topic, topics in the bucket order
  of ``Uuid.hashCode`` of their ids (a ``HashSet<Uuid>``; ties: the bucket order of the names'
  ``String.hashCode``, then the name), each topic's partitions ascending, then the partitions that
  over-quota members give up. They fill the members below quota in member order. The
  ``total % members`` extra partitions go to members that already hold that many, else to the
  last members in member order. A member over its quota keeps the partitions it meets first in
  the order Kafka rebuilds its assignment from its record: topics in ``Uuid.hashCode`` bucket
  order (ties: the order of ``assigned_partitions``), partitions in ``Integer.hashCode`` bucket
  order (ties: ascending).
* uniform, heterogeneous. Members are numbered in member order, and ties between members go to the
  lower number. Topics are visited by partitions per subscriber (descending), subscriber count
  (ascending), then topic id as Kafka's ``Uuid.compareTo`` orders it: the most significant 64 bits
  as a signed long, then the least significant 64 bits.
* range. Members are sorted: those with an instance id first, by instance id, then the others by
  member id, both compared like Java's ``String.compareTo`` (UTF-16 code units). Each topic is split
  on its own, so neither topic ids nor the order of ``GroupSpec.members`` matter.

Our topic ids are not a real Kafka's, and client-generated member ids differ from run to run, so a
differential test should compare ``uniform`` assignments by their properties (balance, coverage,
stickiness), and ``range`` ones by topic name only when the member and instance ids are the same.

How Kafka feeds them
--------------------
* ``assigned_partitions`` is the member's current *target* assignment, not what it owns. A static
  member replacing another (same instance id, new member id) inherits the old member's target, and
  the old member is left out.
* Subscriptions list the ids of existing topics only; Kafka would fail the assignment on an
  unknown topic (its TopicIds view cannot yield one), we give nobody partitions of it.
* Kafka computes the subscription type from topic *names*: a member subscribed to a missing
  topic, members mixing regexes and names or using different regexes make the group
  heterogeneous. Pass it to GroupSpec to match; left out, it is computed from topic ids.
* Neither assignor uses racks in Kafka 4.3 (rack-aware code was removed from both); ``rack_id``
  and ``TopicDescriber.racks_for_partition`` exist for the interface only.
* ``range`` ignores the current assignment: it is stable only through sorted member/instance ids.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Hashable, Iterable, Mapping, Sequence

HOMOGENEOUS = "homogeneous"
HETEROGENEOUS = "heterogeneous"

_U32 = 0xFFFF_FFFF
_U64 = (1 << 64) - 1
_MAX_BALANCE_ROUNDS = 16  # Kafka's MAX_ITERATION_COUNT of the heterogeneous balancing loop


class PartitionAssignorError(Exception):
    """Kafka's PartitionAssignorException: no assignment could be computed (Kafka answers the
    heartbeat that triggered it with UNKNOWN_SERVER_ERROR)."""


@dataclass(frozen=True)
class MemberSubscription:
    """Kafka's MemberSubscription plus the member's current target assignment (Kafka's
    MemberSubscriptionAndAssignmentImpl), which makes the uniform assignor sticky."""

    subscribed_topic_ids: frozenset          # uuid.UUID topic ids
    rack_id: str | None = None
    instance_id: str | None = None
    #: the member's current target assignment: {topic_id: frozenset[int]} (for stickiness)
    assigned_partitions: Mapping = field(default_factory=dict)


# ---------------------------------------------------------------------- Java iteration orders
def _spread(h: int) -> int:
    """java.util.HashMap.hash(): folds the high half of a 32-bit hash into the low half, whose
    bits pick the bucket."""
    return h ^ (h >> 16)


@lru_cache(maxsize=1 << 16)
def _string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), spread."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _U32
    return _spread(h)


def _uuid_hash(topic_id: uuid.UUID) -> int:
    """Kafka's ``Uuid.hashCode``: the 64-bit halves xor-ed, then the 32-bit halves, spread."""
    x = topic_id.int
    x = (x >> 64) ^ (x & _U64)
    return _spread(((x >> 32) ^ x) & _U32)


def _int_hash(value: int) -> int:
    """Java's ``Integer.hashCode``, spread."""
    return _spread(value & _U32)


def _java_uuid_key(topic_id: uuid.UUID) -> tuple[int, int]:
    """Sort key matching Kafka's ``Uuid.compareTo``: both halves compared as signed longs."""
    x = topic_id.int
    msb, lsb = x >> 64, x & _U64
    return (msb - (1 << 64) if msb >> 63 else msb, lsb - (1 << 64) if lsb >> 63 else lsb)


def _java_string_key(s: str) -> bytes:
    """Sort key matching Java's ``String.compareTo``: UTF-16 code units, not code points."""
    return s.encode("utf-16-be", "surrogatepass")


def _copied_set_table(count: int) -> int:
    """Buckets of ``new HashSet<>(collection)`` (JDK 19 and later, as Kafka 4.3's image runs on):
    the power of two at or above ``ceil(max(count, 12) / 0.75)``."""
    need = -(-4 * max(count, 12) // 3)
    return 1 << (need - 1).bit_length()


def java_order(keys: Sequence[Hashable], hashes: Sequence[int], table: int = 16) -> list:
    """The order in which a ``java.util.HashMap`` (or ``HashSet``) iterates ``keys`` put into it
    in this order, given their spread ``hashes`` and the table size it starts with (16 for
    ``new HashMap<>()``).

    Iteration walks the buckets in index order and each bucket in insertion order (resizes keep
    it), so only the final table size needs simulating: it doubles past 3/4 load, and when a
    ninth key lands in one bucket of a table under 64 buckets. The order inside tree bins (nine
    keys in one bucket of a larger table) is not modelled; real ids practically never make one.
    """
    count = len(hashes)
    n = table
    while count > n * 3 // 4:
        n *= 2
    if n < 64 and count > 8:
        # a crowded bucket may have doubled a small table: replay the puts
        n = table
        fill: dict[int, int] = {}
        for done, h in enumerate(hashes, 1):
            bucket = h & (n - 1)
            fill[bucket] = fill.get(bucket, 0) + 1
            grown = n
            if fill[bucket] > 8 and grown < 64:
                grown *= 2
            while done > grown * 3 // 4:
                grown *= 2
            if grown != n:
                n = grown
                fill = {}
                for old in hashes[:done]:
                    fill[old & (n - 1)] = fill.get(old & (n - 1), 0) + 1
    mask = n - 1
    # sorted() is stable: keys sharing a bucket keep their insertion order
    order = sorted(range(count), key=[h & mask for h in hashes].__getitem__)
    return [keys[i] for i in order]


# ---------------------------------------------------------------------- inputs
class GroupSpec:
    """Kafka's GroupSpecImpl: the members (id -> subscription and current target assignment) and
    the group's subscription type. Treat it as immutable once built."""

    def __init__(self, members: Mapping[str, MemberSubscription],
                 subscription_type: str | None = None) -> None:
        self.members: dict[str, MemberSubscription] = dict(members)
        if subscription_type is None:
            subscriptions = {frozenset(m.subscribed_topic_ids) for m in self.members.values()}
            subscription_type = HOMOGENEOUS if len(subscriptions) <= 1 else HETEROGENEOUS
        elif subscription_type not in (HOMOGENEOUS, HETEROGENEOUS):
            raise ValueError(f"unknown subscription type {subscription_type!r}")
        #: "homogeneous" when every member subscribes to the same topics, else "heterogeneous"
        self.subscription_type = subscription_type
        self._member_ids: tuple[str, ...] | None = None

    @property
    def member_ids(self) -> tuple[str, ...]:
        """The members in Kafka's ``GroupSpec.memberIds()`` order: Kafka's TargetAssignmentBuilder
        puts them into a fresh ``HashMap``, whose bucket order the uniform assignor follows."""
        if self._member_ids is None:
            ids = list(self.members)
            self._member_ids = tuple(java_order(ids, [_string_hash(m) for m in ids]))
        return self._member_ids

    def is_partition_assigned(self, topic_id: uuid.UUID, partition: int) -> bool:
        """Whether some member's current target assignment holds the partition."""
        return any(partition in m.assigned_partitions.get(topic_id, ())
                   for m in self.members.values())


class TopicDescriber:
    """Kafka's SubscribedTopicDescriber over ``{topic_id: (name, num_partitions)}``."""

    def __init__(self, topics: Mapping[uuid.UUID, tuple[str, int]]) -> None:
        self._topics = dict(topics)

    def num_partitions(self, topic_id: uuid.UUID) -> int:
        """The topic's partition count, -1 for a topic that does not exist."""
        entry = self._topics.get(topic_id)
        return -1 if entry is None else entry[1]

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        entry = self._topics.get(topic_id)
        return None if entry is None else entry[0]

    def racks_for_partition(self, topic_id: uuid.UUID, partition: int) -> frozenset:
        """The racks of the partition's replicas; we have no rack information (and Kafka 4.3's
        assignors do not ask)."""
        return frozenset()


Assignment = dict[str, dict[uuid.UUID, frozenset[int]]]


def _freeze(partitions: Iterable[int], previous) -> frozenset[int]:
    """The partitions as a frozenset, reusing the previous one when they did not change."""
    new = frozenset(partitions)
    return previous if isinstance(previous, frozenset) and previous == new else new


# ---------------------------------------------------------------------- uniform
class UniformAssignor:
    """Kafka's UniformAssignor: balanced (member sizes differ by at most one when everyone has
    the same subscription) first, sticky second. Homogeneous groups take the quota-based
    builder, heterogeneous ones the balancing one."""

    name = "uniform"

    def assign(self, group_spec: GroupSpec, topics: TopicDescriber) -> Assignment:
        if not group_spec.members:
            return {}
        if group_spec.subscription_type == HOMOGENEOUS:
            return _uniform_homogeneous(group_spec, topics)
        return _uniform_heterogeneous(group_spec, topics)


def _homogeneous_topic_order(subscribed: frozenset, topics: TopicDescriber) -> list:
    """The existing topics in the order Kafka's ``new HashSet<>(subscribedTopicIds)`` yields
    them: that set is filled from the member's topic names, a ``HashSet<String>`` (filled in
    name order here, for want of the order the client listed them in)."""
    table = _copied_set_table(len(subscribed))
    known = sorted((t for t in subscribed if topics.num_partitions(t) >= 0),
                   key=lambda t: (topics.topic_name(t) or "", t.int))
    by_name = java_order(known, [_string_hash(topics.topic_name(t) or "") for t in known], table)
    return java_order(by_name, [_uuid_hash(t) for t in by_name], table)


def _record_order(assigned: Mapping, claims: Mapping[uuid.UUID, frozenset]) -> list:
    """A member's claimed (topic, partitions) in the order Kafka iterates its current assignment
    once rebuilt from its record: a ``HashMap`` of topics, each a ``HashSet`` of partitions."""
    topic_ids = list(assigned)
    ordered = []
    for topic_id in java_order(topic_ids, [_uuid_hash(t) for t in topic_ids]):
        claim = claims.get(topic_id)
        if not claim:
            continue
        raw = sorted(set(assigned[topic_id]))
        table = _copied_set_table(len(raw))
        if len(raw) > 1 and (raw[0] < 0 or raw[-1] >= table):  # else ascending
            raw = java_order(raw, [_int_hash(p) for p in raw], table)
        ordered.append((topic_id, [p for p in raw if p in claim]))
    return ordered


def _uniform_homogeneous(spec: GroupSpec, topics: TopicDescriber) -> Assignment:
    """Kafka's UniformHomogeneousAssignmentBuilder: every member gets ``total // members``
    partitions, ``total % members`` of them one more. Members keep what they hold up to their
    quota; what is free or given up fills the members below quota.

    A member whose assignment does not change gets its ``assigned_partitions`` mapping itself
    back (the caller sees it unchanged without comparing)."""
    member_ids = spec.member_ids
    members = spec.members
    result: Assignment = dict.fromkeys(members)
    topic_order = _homogeneous_topic_order(
        frozenset(members[member_ids[0]].subscribed_topic_ids), topics)
    if not topic_order:
        return {m: {} for m in members}
    counts = [topics.num_partitions(t) for t in topic_order]
    claims = _consistent_claims(spec, topic_order, counts)
    if claims is None:
        claims = _first_claims(spec, topic_order, counts)
    taken, claimed, whole = claims

    free = []
    for topic_id, n, held in zip(topic_order, counts, taken):
        if len(held) < n:
            free += [(topic_id, p) for p in range(n) if p not in held]
    total = sum(counts)
    member_count = len(member_ids)
    base, extra = divmod(total, member_count)

    below_quota: list[tuple[str, int]] = []
    for index, member_id in enumerate(member_ids):
        quota = base + 1 if extra > 0 else base
        owed_extra = extra > 0
        mine = claimed[member_id]
        holding = 0
        for parts in mine.values():
            holding += len(parts)
        if holding <= quota:
            result[member_id] = members[member_id].assigned_partitions \
                if member_id in whole else dict(mine)
            quota -= holding
        else:
            kept_parts: dict[uuid.UUID, frozenset] = {}
            for topic_id, parts in _record_order(members[member_id].assigned_partitions, mine):
                if len(parts) <= quota:
                    kept_parts[topic_id] = mine[topic_id]
                    quota -= len(parts)
                    continue
                if quota:
                    kept_parts[topic_id] = frozenset(parts[:quota])
                free.extend((topic_id, p) for p in parts[quota:])
                quota = 0
            result[member_id] = kept_parts
        # Since KAFKA-18688 a member does not take the extra partition unless it already holds
        # it or too few members remain to take all the extras.
        if quota > 0 and owed_extra and member_count - index > extra:
            quota -= 1
            owed_extra = False
        if quota > 0:
            below_quota.append((member_id, quota))
        if owed_extra:
            extra -= 1

    cursor = 0
    for member_id, quota in below_quota:
        dealt = free[cursor:cursor + quota]
        cursor += len(dealt)
        if not dealt:
            continue
        gained: dict[uuid.UUID, list[int]] = {}
        for topic_id, p in dealt:
            gained.setdefault(topic_id, []).append(p)
        target = result[member_id] = dict(result[member_id])  # never the input's mapping
        for topic_id, parts in gained.items():
            target[topic_id] = target.get(topic_id, frozenset()).union(parts)
    if cursor < len(free):
        raise PartitionAssignorError("Partitions were left unassigned")
    return result


def _consistent_claims(spec: GroupSpec, topic_order: list, counts: list):
    """The members' claims when their current assignments are consistent (the usual case):
    only the group's topics, in range, no partition held twice. Then every member keeps what
    it holds. -> (claimed partitions per topic, {member: {topic: partitions}}, the members
    whose claim is their whole ``assigned_partitions``), or None: see _first_claims."""
    slots = {t.int: i for i, t in enumerate(topic_order)}
    taken = [set() for _ in topic_order]
    claimed = {}
    whole = set()
    for member_id, member in spec.members.items():
        assigned = member.assigned_partitions
        if not assigned:
            claimed[member_id] = assigned
            whole.add(member_id)
            continue
        mine = {}
        kept_all = True
        for topic_id, parts in assigned.items():
            slot = slots.get(topic_id.int)
            if slot is None or not parts:
                kept_all = False
                continue
            held = taken[slot]
            if not held.isdisjoint(parts):
                return None
            held.update(parts)
            if type(parts) is not frozenset:
                parts = frozenset(parts)
                kept_all = False
            mine[topic_id] = parts
        claimed[member_id] = mine
        if kept_all:
            whole.add(member_id)
    for held, n in zip(taken, counts):
        if held and (min(held) < 0 or max(held) >= n):
            return None
    return taken, claimed, whole


def _first_claims(spec: GroupSpec, topic_order: list, counts: list):
    """The members' claims in general: partitions of the group's topics, in range, the first
    claimant in member order wins. Same result as _consistent_claims."""
    held = {t: bytearray(n) for t, n in zip(topic_order, counts)}
    claimed: dict[str, dict[uuid.UUID, frozenset]] = {}
    for member_id in spec.member_ids:
        mine = {}
        for topic_id, parts in spec.members[member_id].assigned_partitions.items():
            marks = held.get(topic_id)
            if marks is None:
                continue
            kept = [p for p in parts if 0 <= p < len(marks) and not marks[p]]
            for p in kept:
                marks[p] = 1
            if kept:
                mine[topic_id] = _freeze(kept, parts)
        claimed[member_id] = mine
    taken = [{p for p, mark in enumerate(held[t]) if mark} for t in topic_order]
    return taken, claimed, set()


class _Balancer:
    """Kafka's MemberAssignmentBalancer: walks a topic's subscribers sorted by size (then number)
    to hand the next partition to the least loaded and take one from the most loaded. Reads the
    live ``sizes``, which the caller updates as partitions move."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.order: list[int] = []

    def initialize(self, members: list[int]) -> int:
        """Starts over with these members; returns the spread between the largest and smallest."""
        sizes = self.sizes
        self.order = order = sorted(members, key=lambda m: (sizes[m], m))
        low, high = sizes[order[0]], sizes[order[-1]]
        self.least_end = 0                  # [0, least_end): the least loaded members
        self.least_level = low - 1          # their size before this round of handing out
        self.next_least = 0
        self.most_start = len(order)        # [most_start, most_end): the most loaded members
        self.most_end = len(order)
        self.most_level = high + 1          # their size before this round of taking away
        self.next_most = len(order) - 1
        return high - low

    def next_least_loaded(self) -> int:
        """The member to give the next partition to; once everyone in the least loaded range had
        one, the range's level rises and takes in the members now level with it."""
        order, sizes = self.order, self.sizes
        if self.next_least >= self.least_end:
            self.least_level += 1
            while self.least_end < len(order) and sizes[order[self.least_end]] == self.least_level:
                self.least_end += 1
            self.next_least = 0
        member = order[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        """The member to take the next partition from, walking the most loaded range right to
        left and widening it leftwards; -1 when no member is left."""
        order, sizes = self.order, self.sizes
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                # Emptied by exclusions: restart from the next member down so the range grows.
                self.most_level = sizes[order[self.most_start - 1]]
            else:
                self.most_level -= 1
            while self.most_start > 0 and sizes[order[self.most_start - 1]] == self.most_level:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = order[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        """Drops the member next_most_loaded just returned (it has nothing to give up) by moving
        it past the end of the most loaded range."""
        i, last = self.next_most + 1, self.most_end - 1
        self.order[i], self.order[last] = self.order[last], self.order[i]
        self.most_end -= 1

    def balanced(self) -> bool:
        return self.most_level - self.least_level <= 1


def _uniform_heterogeneous(spec: GroupSpec, topics: TopicDescriber) -> Assignment:
    """Kafka's UniformHeterogeneousAssignmentBuilder: members keep every partition of the topics
    they still subscribe to, free partitions go to the least loaded subscribers, then partitions
    move from the most to the least loaded subscribers of each topic until no move helps."""
    member_ids = spec.member_ids
    result: Assignment = {m: {} for m in spec.members}

    subscribers: dict[uuid.UUID, list[int]] = {}
    for index, member_id in enumerate(member_ids):
        for topic_id in spec.members[member_id].subscribed_topic_ids:
            if topics.num_partitions(topic_id) >= 0:
                subscribers.setdefault(topic_id, []).append(index)
    if not subscribers:
        return result
    counts = {t: topics.num_partitions(t) for t in subscribers}

    def topic_key(topic_id: uuid.UUID):
        members = len(subscribers[topic_id])
        return (-(counts[topic_id] / members), members, _java_uuid_key(topic_id))

    sizes = [0] * len(member_ids)
    owners = {t: [-1] * n for t, n in counts.items()}
    for index, member_id in enumerate(member_ids):
        member = spec.members[member_id]
        for topic_id, parts in member.assigned_partitions.items():
            row = owners.get(topic_id)
            if row is None or topic_id not in member.subscribed_topic_ids:
                continue
            for p in parts:
                if 0 <= p < len(row) and row[p] < 0:
                    row[p] = index
                    sizes[index] += 1

    balancer = _Balancer(sizes)
    free = {t: [p for p, o in enumerate(row) if o < 0] for t, row in owners.items()}
    for topic_id in sorted((t for t in free if free[t]), key=topic_key):
        balancer.initialize(subscribers[topic_id])
        row = owners[topic_id]
        for p in free[topic_id]:
            member = balancer.next_least_loaded()
            row[p] = member
            sizes[member] += 1

    movable = sorted((t for t in subscribers if len(subscribers[t]) >= 2), key=topic_key)
    last_moved = -1
    for _ in range(_MAX_BALANCE_ROUNDS if movable else 0):
        for position, topic_id in enumerate(movable):
            if position == last_moved:
                break  # a whole lap without moves
            if _balance_topic(topic_id, subscribers[topic_id], owners[topic_id], sizes,
                              balancer) or last_moved < 0:
                last_moved = position
        else:
            continue
        break

    previous = {m: spec.members[m].assigned_partitions for m in member_ids}
    gathered: list[dict[uuid.UUID, list[int]]] = [{} for _ in member_ids]
    for topic_id, row in owners.items():
        for p, owner in enumerate(row):
            gathered[owner].setdefault(topic_id, []).append(p)
    for index, member_id in enumerate(member_ids):
        before = previous[member_id]
        result[member_id] = {t: _freeze(parts, before.get(t))
                             for t, parts in gathered[index].items()}
    return result


def _balance_topic(topic_id, members: list[int], row: list[int], sizes: list[int],
                   balancer: _Balancer) -> int:
    """Moves the topic's partitions from its most to its least loaded subscribers until their
    sizes are within one, or the most loaded have none of it left; returns how many moved.

    The most loaded member gives up its highest partition of the topic (as owned when the pass
    started)."""
    if balancer.initialize(members) <= 1:
        return 0
    by_owner = sorted(range(len(row)), key=lambda p: (row[p], p))
    start: dict[int, int] = {}
    end: dict[int, int] = {}
    for i, p in enumerate(by_owner):
        start.setdefault(row[p], i)
        end[row[p]] = i + 1

    moved = 0
    while not balancer.balanced():
        while True:
            giver = balancer.next_most_loaded()
            if giver < 0 or end.get(giver, 0) - start.get(giver, 0) > 0:
                break
            balancer.exclude_most_loaded()
        if giver < 0:
            break
        end[giver] -= 1
        p = by_owner[end[giver]]
        taker = balancer.next_least_loaded()
        if balancer.balanced():
            break
        sizes[row[p]] -= 1
        row[p] = taker
        sizes[taker] += 1
        moved += 1
    return moved


# ---------------------------------------------------------------------- range
class RangeAssignor:
    """Kafka's RangeAssignor: each topic is cut into contiguous ranges dealt to its subscribers
    in sorted order, the first ``partitions % subscribers`` getting one more; topics with the
    same partition count and subscribers are thus co-partitioned. Static members sort first, by
    instance id, which keeps their ranges across restarts."""

    name = "range"

    def assign(self, group_spec: GroupSpec, topics: TopicDescriber) -> Assignment:
        if not group_spec.members:
            return {}
        members = group_spec.members
        ordered = sorted(group_spec.member_ids, key=lambda m: _range_sort_key(m, members[m]))
        result: Assignment = {m: {} for m in members}
        if group_spec.subscription_type == HOMOGENEOUS:
            # Kafka takes the first member's topics and splits them over everyone.
            subscribed = members[ordered[0]].subscribed_topic_ids
            per_topic = {t: ordered for t in subscribed}
        else:
            per_topic = {}
            for member_id in ordered:
                for topic_id in members[member_id].subscribed_topic_ids:
                    per_topic.setdefault(topic_id, []).append(member_id)
        for topic_id, subscribers in per_topic.items():
            count = topics.num_partitions(topic_id)
            if count <= 0:
                continue
            base, extra = divmod(count, len(subscribers))
            start = 0
            for i, member_id in enumerate(subscribers):
                end = min(start + base + (1 if i < extra else 0), count)
                if start < end:
                    result[member_id][topic_id] = frozenset(range(start, end))
                start = end
        return result


def _range_sort_key(member_id: str, member: MemberSubscription) -> tuple[int, bytes]:
    if member.instance_id is not None:
        return (0, _java_string_key(member.instance_id))
    return (1, _java_string_key(member_id))


#: Kafka's group.consumer.assignors default order: the first is the group's default.
ASSIGNORS = {"uniform": UniformAssignor, "range": RangeAssignor}

__all__ = [
    "ASSIGNORS", "HETEROGENEOUS", "HOMOGENEOUS", "GroupSpec", "MemberSubscription",
    "PartitionAssignorError", "RangeAssignor", "TopicDescriber", "UniformAssignor", "java_order",
]
