"""The KIP-848 server-side assignors (broker/coordinator/group/consumer/assignors.py).

The exact expectations are Kafka 4.3's, worked out from its assignor classes; where a case is
one of Kafka's own assignor test cases, the docstring names it. Topic ids are the fixed ones those
cases use, because the uniform assignor's tie-breaks hang on topic id hashes.
"""
from __future__ import annotations

import base64
import copy
import random
import time
import uuid

import pytest

from broker.coordinator.group.consumer.assignors import (
    ASSIGNORS, HETEROGENEOUS, HOMOGENEOUS, GroupSpec, MemberSubscription, RangeAssignor,
    TopicDescriber, UniformAssignor, _java_string_key, _java_uuid_key, _string_hash, java_order)


def kafka_uuid(text: str) -> uuid.UUID:
    """A topic id from Kafka's base64 form, as ``Uuid.fromString`` reads it."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))


T1 = kafka_uuid("T1-A4s3VTwiI5CTbEp6POw")
T2 = kafka_uuid("T2-B4s3VTwiI5YHbPp6YUe")
T3 = kafka_uuid("T3-CU8fVTLCz5YMkLoDQsa")
T4 = kafka_uuid("T4-Tw9fVTLCz5HbPp6YQsa")
GHOST = uuid.UUID(int=0xDEAD)  # a topic that does not exist
NAMES = {T1: "topic1", T2: "topic2", T3: "topic3", T4: "topic4"}


def member(topics=(), assigned=None, instance_id=None) -> MemberSubscription:
    return MemberSubscription(
        subscribed_topic_ids=frozenset(topics), instance_id=instance_id,
        assigned_partitions={t: frozenset(p) for t, p in (assigned or {}).items()})


def describer(counts: dict) -> TopicDescriber:
    return TopicDescriber({t: (NAMES.get(t, str(t)), n) for t, n in counts.items()})


def run(assignor, members: dict, counts: dict, subscription_type=None) -> dict:
    return assignor.assign(GroupSpec(members, subscription_type), describer(counts))


def plain(result: dict) -> dict:
    """The result with sorted partition lists, for readable comparisons."""
    return {m: {t: sorted(p) for t, p in a.items()} for m, a in result.items()}


def check_valid(members: dict, counts: dict, result: dict) -> None:
    """Every member has an entry; members get only existing topics they subscribe to; no
    partition goes twice; every partition of a subscribed existing topic goes somewhere."""
    assert set(result) == set(members)
    seen: dict = {}
    for member_id, assignment in result.items():
        for topic_id, parts in assignment.items():
            assert topic_id in members[member_id].subscribed_topic_ids
            assert topic_id in counts and parts
            for p in parts:
                assert 0 <= p < counts[topic_id]
                assert (topic_id, p) not in seen, f"{topic_id}-{p} twice"
                seen[(topic_id, p)] = member_id
    wanted = {t for m in members.values() for t in m.subscribed_topic_ids if t in counts}
    assert set(seen) == {(t, p) for t in wanted for p in range(counts[t])}


def sizes(result: dict) -> dict:
    return {m: sum(len(p) for p in a.values()) for m, a in result.items()}


def feed_back(members: dict, result: dict) -> dict:
    """The members again, holding ``result`` as their current target assignment."""
    return {m: MemberSubscription(s.subscribed_topic_ids, s.rack_id, s.instance_id,
                                  result.get(m, {}))
            for m, s in members.items()}


# ---------------------------------------------------------------------- Java orders
def test_java_hashes_and_orders_match_the_jdk():
    """The Java orders the assignors' tie-breaks hang on: String.hashCode over UTF-16 units,
    Uuid.compareTo on signed halves, String.compareTo on UTF-16 units, HashMap buckets."""
    spread = lambda h: h ^ (h >> 16)  # noqa: E731
    assert _string_hash("A") == 65
    assert _string_hash("hello") == spread(99162322)
    assert _string_hash("\U0001F600") == spread(31 * 0xD83D + 0xDE00)
    high_bit = uuid.UUID(int=1 << 127)
    assert sorted([uuid.UUID(int=5), high_bit], key=_java_uuid_key) == [high_bit,
                                                                        uuid.UUID(int=5)]
    assert sorted(["\uffff", "\U0001F600"], key=_java_string_key) == ["\U0001F600", "\uffff"]
    # A ninth key in one bucket of a table under 64 buckets doubles the table.
    keys = list(range(0, 144, 16))
    assert java_order(keys, keys) == [0, 32, 64, 96, 128, 16, 48, 80, 112]
    assert java_order(keys[:8], keys[:8]) == keys[:8]
    assert java_order(list("BCA"), [_string_hash(k) for k in "BCA"]) == ["A", "B", "C"]


def test_member_ids_follow_kafkas_hash_map_order():
    """Buckets first ('A' is 65 and 'Q' 81: both bucket 1 of 16), then insertion order."""
    spec = GroupSpec({m: member() for m in ["C", "B", "A", "Q"]})
    assert spec.member_ids == ("A", "Q", "B", "C")
    assert list(spec.members) == ["C", "B", "A", "Q"]
    assert GroupSpec({m: member() for m in "CBQA"}).member_ids == ("Q", "A", "B", "C")


# ---------------------------------------------------------------------- uniform, homogeneous
def test_uniform_homogeneous_first_assignment_two_members_two_topics():
    """Kafka's testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks: topic3's id hashes to an
    earlier bucket than topic1's, so topic3 is dealt first; the extra partition goes to the
    last member (UniformHomogeneousAssignmentBuilder)."""
    members = {"A": member([T1, T3]), "B": member([T1, T3])}
    result = run(UniformAssignor(), members, {T1: 3, T3: 2})
    assert plain(result) == {"A": {T3: [0, 1]}, "B": {T1: [0, 1, 2]}}


def test_uniform_homogeneous_more_members_than_partitions():
    """Kafka's testFirstAssignmentNumMembersGreaterThanTotalNumPartitions."""
    members = {m: member([T3]) for m in "ABC"}
    result = run(UniformAssignor(), members, {T3: 2})
    assert plain(result) == {"A": {}, "B": {T3: [0]}, "C": {T3: [1]}}


def test_uniform_homogeneous_partitions_added():
    """Kafka's testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics: A gives up the
    extra quota it does not hold; new partitions fill A then B, topic2 before topic1."""
    members = {"A": member([T1, T2], {T1: {0, 2}, T2: {0}}),
               "B": member([T1, T2], {T1: {1}, T2: {1, 2}})}
    result = run(UniformAssignor(), members, {T1: 6, T2: 5})
    assert plain(result) == {"A": {T1: [0, 2], T2: [0, 3, 4]},
                             "B": {T1: [1, 3, 4, 5], T2: [1, 2]}}


def test_uniform_homogeneous_member_removed():
    """Kafka's UniformHomogeneousAssignmentBuilderTest case
    testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics."""
    members = {"A": member([T1, T2], {T1: {0}, T2: {0}}),
               "B": member([T1, T2], {T1: {1}, T2: {1}})}
    result = run(UniformAssignor(), members, {T1: 3, T2: 3})
    assert plain(result) == {"A": {T1: [0], T2: [0, 2]}, "B": {T1: [1, 2], T2: [1]}}


def test_uniform_homogeneous_subscription_removed():
    """Kafka's UniformHomogeneousAssignmentBuilderTest case
    testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics."""
    members = {"A": member([T2], {T1: {0}, T2: {0}}), "B": member([T2], {T1: {1}, T2: {1}})}
    result = run(UniformAssignor(), members, {T1: 2, T2: 2})
    assert plain(result) == {"A": {T2: [0]}, "B": {T2: [1]}}


def test_uniform_homogeneous_over_quota_member_keeps_in_record_order():
    """Kafka's testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment, with the
    current assignment as a running coordinator holds it: a HashMap rebuilt from the record,
    which iterates topic2 (bucket 1) before topic1 (bucket 10). A, over its quota of 3, keeps
    topic2 whole and the first partition of topic1 (Kafka's own case feeds an insertion-ordered
    map, topic1 first, and so expects A to keep topic1 whole instead)."""
    members = {"A": member([T1, T2], {T1: {0, 1}, T2: {0, 1}}),
               "B": member([T1, T2], {T1: {2}, T2: {2}})}
    result = run(UniformAssignor(), members, {T1: 3, T2: 3})
    assert plain(result) == {"A": {T1: [0], T2: [0, 1]}, "B": {T1: [1, 2], T2: [2]}}


def test_uniform_homogeneous_member_added():
    """Kafka's testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics,
    current assignments in record order (topic2 first): A and B each give up one partition of
    the topic they meet last, and C takes both (UniformHomogeneousAssignmentBuilder)."""
    members = {"A": member([T1, T2], {T1: {0, 2}, T2: {0}}),
               "B": member([T1, T2], {T1: {1}, T2: {1, 2}}),
               "C": member([T1, T2])}
    result = run(UniformAssignor(), members, {T1: 3, T2: 3})
    assert plain(result) == {"A": {T1: [0], T2: [0]}, "B": {T2: [1, 2]}, "C": {T1: [1, 2]}}


@pytest.mark.parametrize("member_count,counts", [
    (3, [7]), (5, [3, 3]), (7, [10, 1, 4]), (10, [3]), (4, [100, 37]), (13, [50, 50, 50]),
])
def test_uniform_homogeneous_fresh_assignment_is_balanced(member_count, counts):
    topics = [uuid.UUID(int=0x1000 + i) for i in range(len(counts))]
    members = {f"member-{i}": member(topics) for i in range(member_count)}
    partitions = dict(zip(topics, counts))
    result = run(UniformAssignor(), members, partitions)
    check_valid(members, partitions, result)
    got = sizes(result).values()
    assert max(got) - min(got) <= 1


def test_uniform_homogeneous_rerun_is_a_no_op_and_reuses_sets():
    """Kafka's testAssignmentReuse: fed its own output, the assignor returns it unchanged."""
    members = {m: member([T1, T2, T3]) for m in "ABC"}
    counts = {T1: 2, T2: 5, T3: 7}
    first = run(UniformAssignor(), members, counts)
    again = feed_back(members, first)
    second = run(UniformAssignor(), again, counts)
    assert second == first
    for m, assignment in second.items():
        for t, parts in assignment.items():
            assert parts is again[m].assigned_partitions[t]


@pytest.mark.parametrize("subscription_type", [HOMOGENEOUS, HETEROGENEOUS])
def test_uniform_does_not_depend_on_member_order_once_assigned(subscription_type):
    """Kafka's testReassignmentStickiness: with a balanced current assignment, every member
    order gives the same assignment."""
    counts = {T1: 2, T2: 5, T3: 7}
    members = {m: member([T1, T2, T3]) for m in "ABC"}
    first = run(UniformAssignor(), members, counts, subscription_type)
    held = feed_back(members, first)
    rng = random.Random(7)
    for _ in range(6):
        order = list(held)
        rng.shuffle(order)
        shuffled = {m: held[m] for m in order}
        assert run(UniformAssignor(), shuffled, counts, subscription_type) == first


def test_uniform_homogeneous_member_join_moves_only_what_it_must():
    topics = [T1, T2]
    counts = {T1: 10, T2: 10}
    members = {f"m{i}": member(topics) for i in range(4)}
    before = run(UniformAssignor(), members, counts)
    assert sorted(sizes(before).values()) == [5, 5, 5, 5]
    joined = feed_back(members, before) | {"m4": member(topics)}
    after = run(UniformAssignor(), joined, counts)
    check_valid(joined, counts, after)
    assert sorted(sizes(after).values()) == [4, 4, 4, 4, 4]
    for m in members:  # each old member gives up exactly one partition and takes none
        kept = {(t, p) for t, ps in after[m].items() for p in ps}
        had = {(t, p) for t, ps in before[m].items() for p in ps}
        assert kept <= had and len(had - kept) == 1


@pytest.mark.parametrize("subscription_type", [HOMOGENEOUS, HETEROGENEOUS])
def test_uniform_member_leave_keeps_survivors_partitions(subscription_type):
    counts = {T1: 9, T2: 4, T3: 6}
    members = {f"m{i}": member([T1, T2, T3]) for i in range(5)}
    before = run(UniformAssignor(), members, counts, subscription_type)
    survivors = {m: s for m, s in feed_back(members, before).items() if m != "m2"}
    after = run(UniformAssignor(), survivors, counts, subscription_type)
    check_valid(survivors, counts, after)
    for m in survivors:
        for t, parts in before[m].items():
            assert parts <= after[m][t]
    got = sizes(after).values()
    assert max(got) - min(got) <= 1


# ---------------------------------------------------------------------- uniform, heterogeneous
HETEROGENEOUS_CASES = [
    # (Kafka's UniformHeterogeneousAssignmentBuilderTest case, members, counts, expected)
    ("testFirstAssignmentTwoMembersTwoTopics",
     {"A": member([T1, T3]), "B": member([T3])}, {T1: 3, T3: 6},
     {"A": {T1: [0, 1, 2], T3: [4]}, "B": {T3: [0, 1, 2, 3, 5]}}),
    ("testFirstAssignmentNumMembersGreaterThanTotalNumPartitions",
     {"A": member([T3]), "B": member([T3]), "C": member([T1])}, {T1: 2, T3: 1},
     {"A": {T3: [0]}, "B": {}, "C": {T1: [0, 1]}}),
    ("testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment",
     {"A": member([T1], {T1: {0, 1, 2}}),
      "B": member([T1, T2], {T1: {3}, T2: {0}}),
      "C": member([T1, T2, T3], {T1: {4, 5}, T2: {1, 2, 3}, T3: {0, 1, 2, 3}})},
     {T1: 6, T2: 4, T3: 4},
     {"A": {T1: [0, 1, 2, 5]}, "B": {T1: [3], T2: [0, 1, 2, 3]},
      "C": {T1: [4], T3: [0, 1, 2, 3]}}),
    ("testReassignmentWhenPartitionsAreAddedForTwoMembers",
     {"A": member([T1, T3], {T1: {0, 1, 2, 3}, T3: {0, 1}}),
      "B": member([T1, T2, T3, T4], {T2: {0, 1, 2}, T4: {0, 1, 2}})},
     {T1: 6, T2: 5, T3: 3, T4: 3},
     {"A": {T1: [0, 1, 2, 3, 4, 5], T3: [0, 1, 2]}, "B": {T2: [0, 1, 2, 3, 4], T4: [0, 1, 2]}}),
    ("testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics",
     {"A": member([T1], {T1: {0, 2}, T2: {0}}),
      "B": member([T1, T2], {T1: {1}, T2: {1, 2}}),
      "C": member([T1, T2])},
     {T1: 6, T2: 7},
     {"A": {T1: [0, 2, 3, 4, 5]}, "B": {T1: [1], T2: [1, 2, 6]}, "C": {T2: [0, 3, 4, 5]}}),
    ("testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics",
     {"A": member([T1, T3], {T1: {0, 1, 2}, T3: {0, 1}}), "B": member([T2], {T2: {3, 4, 5, 6}})},
     {T1: 3, T2: 8, T3: 3},
     {"A": {T1: [0, 1, 2], T3: [0, 1, 2]}, "B": {T2: list(range(8))}}),
    ("testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics",
     {"A": member([T1], {T1: {0, 2}, T2: {1, 3}}), "B": member([T1, T2], {T1: {1}, T2: {0, 2, 4}})},
     {T1: 3, T2: 5},
     {"A": {T1: [0, 1, 2]}, "B": {T2: [0, 1, 2, 3, 4]}}),
    ("testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions",
     {"A": member([T1, T2, T3], {T1: {0, 1}, T2: {0, 1}, T3: {0, 1}}), "B": member([T1, T2, T3])},
     {T1: 2, T2: 2, T3: 2},
     {"A": {T2: [0], T3: [0, 1]}, "B": {T1: [0, 1], T2: [1]}}),
    ("testFirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions",
     {"A": member([T1]), "B": member([])}, {T1: 3},
     {"A": {T1: [0, 1, 2]}, "B": {}}),
]


@pytest.mark.parametrize("case,members,counts,expected", HETEROGENEOUS_CASES,
                         ids=[c[0] for c in HETEROGENEOUS_CASES])
def test_uniform_heterogeneous_matches_kafka(case, members, counts, expected):
    """Kafka's UniformHeterogeneousAssignmentBuilderTest cases of the same names: topics by
    partitions per subscriber then Uuid.compareTo, ties between members to the lower index."""
    result = run(UniformAssignor(), members, counts, HETEROGENEOUS)
    assert plain(result) == expected
    check_valid(members, counts, result)


def test_uniform_heterogeneous_balances_each_cohort():
    """Members with the same subscription end within one partition of each other."""
    topics = [uuid.UUID(int=0x2000 + i) for i in range(6)]
    counts = {t: n for t, n in zip(topics, [12, 7, 30, 5, 9, 16])}
    members = {f"x{i}": member(topics[:3]) for i in range(5)}
    members |= {f"y{i}": member(topics[3:]) for i in range(4)}
    result = run(UniformAssignor(), members, counts)
    assert GroupSpec(members).subscription_type == HETEROGENEOUS
    check_valid(members, counts, result)
    for prefix in "xy":
        got = [n for m, n in sizes(result).items() if m.startswith(prefix)]
        assert max(got) - min(got) <= 1


def test_uniform_heterogeneous_random_groups_are_valid_and_sticky():
    rng = random.Random(1)
    topics = [uuid.UUID(int=0x3000 + i) for i in range(8)]
    counts = {t: rng.randint(1, 20) for t in topics}
    members = {f"m{i}": member(rng.sample(topics, rng.randint(1, 8))) for i in range(12)}
    first = run(UniformAssignor(), members, counts, HETEROGENEOUS)
    check_valid(members, counts, first)
    assert run(UniformAssignor(), feed_back(members, first), counts, HETEROGENEOUS) == first


# ---------------------------------------------------------------------- range
def test_range_heterogeneous_three_members_three_topics():
    """Kafka's RangeAssignorTest case
    testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions."""
    members = {"A": member([T1, T2]), "B": member([T3]), "C": member([T2, T3])}
    result = run(RangeAssignor(), members, {T1: 3, T2: 3, T3: 2})
    assert plain(result) == {"A": {T1: [0, 1, 2], T2: [0, 1]}, "B": {T3: [0]},
                             "C": {T2: [2], T3: [1]}}


def test_range_more_members_than_partitions():
    """Kafka's RangeAssignorTest testFirstAssignmentNumMembersGreaterThanNumPartitions."""
    members = {m: member([T1, T3]) for m in "CBA"}
    result = run(RangeAssignor(), members, {T1: 3, T3: 2})
    assert plain(result) == {"C": {T1: [2]}, "B": {T1: [1], T3: [1]},
                             "A": {T1: [0], T3: [0]}}


def test_range_co_partitions_topics_of_equal_size():
    """Member i (in member id order) gets the same partition numbers of every topic."""
    members = {m: member([T1, T2]) for m in ["m2", "m0", "m1"]}
    result = run(RangeAssignor(), members, {T1: 8, T2: 8})
    assert plain(result) == {"m0": {T1: [0, 1, 2], T2: [0, 1, 2]},
                             "m1": {T1: [3, 4, 5], T2: [3, 4, 5]},
                             "m2": {T1: [6, 7], T2: [6, 7]}}
    for m in members:
        assert result[m][T1] == result[m][T2]


def test_range_co_partitions_in_heterogeneous_groups_too():
    members = {"a": member([T1, T2]), "b": member([T1, T2]), "c": member([T3])}
    result = run(RangeAssignor(), members, {T1: 5, T2: 5, T3: 4})
    assert result["a"][T1] == result["a"][T2] == frozenset({0, 1, 2})
    assert result["b"][T1] == result["b"][T2] == frozenset({3, 4})
    assert plain(result)["c"] == {T3: [0, 1, 2, 3]}


def test_range_ignores_current_assignment_and_member_order():
    """Kafka's RangeAssignor is not sticky: only the sorted member ids count."""
    counts = {T1: 7}
    members = {"B": member([T1], {T1: {0, 1, 2}}), "A": member([T1], {T1: {5, 6}})}
    result = run(RangeAssignor(), members, counts)
    assert plain(result) == {"B": {T1: [4, 5, 6]}, "A": {T1: [0, 1, 2, 3]}}
    assert run(RangeAssignor(), dict(reversed(members.items())), counts) == result


def test_range_static_members_keep_their_ranges():
    """Kafka's RangeAssignorTest testMixedStaticMembership: static members sort first by
    instance id, so a static member rejoining under a new member id gets its range back."""
    counts = {T1: 5}
    members = {"A": member([T1], instance_id="instanceA"),
               "C": member([T1], instance_id="instanceC"),
               "B": member([T1])}
    first = run(RangeAssignor(), members, counts)
    assert plain(first) == {"A": {T1: [0, 1]}, "C": {T1: [2, 3]}, "B": {T1: [4]}}
    rejoined = {"memberA1": member([T1], instance_id="instanceA"), "C": members["C"],
                "B": members["B"]}
    second = run(RangeAssignor(), rejoined, counts)
    assert second["memberA1"] == first["A"]
    assert second["B"] == first["B"] and second["C"] == first["C"]


def test_range_sorts_member_ids_like_java():
    """Java compares UTF-16 code units: U+1F600 (a surrogate pair) sorts before U+FFFF."""
    members = {"\uffff": member([T1]), "\U0001F600": member([T1])}
    result = run(RangeAssignor(), members, {T1: 3})
    assert plain(result) == {"\uffff": {T1: [2]}, "\U0001F600": {T1: [0, 1]}}


# ---------------------------------------------------------------------- both
@pytest.mark.parametrize("name", ["uniform", "range"])
@pytest.mark.parametrize("subscription_type", [HOMOGENEOUS, HETEROGENEOUS])
def test_unknown_topics_are_skipped(name, subscription_type):
    members = {"A": member([T1, GHOST]), "B": member([T1, GHOST])}
    result = run(ASSIGNORS[name](), members, {T1: 4}, subscription_type)
    check_valid(members, {T1: 4}, result)
    assert all(GHOST not in a for a in result.values())
    only_ghost = {"A": member([GHOST]), "B": member([GHOST])}
    assert run(ASSIGNORS[name](), only_ghost, {T1: 4}, subscription_type) == {"A": {}, "B": {}}


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_empty_group_and_members_without_subscriptions(name):
    assignor = ASSIGNORS[name]()
    assert run(assignor, {}, {T1: 3}) == {}
    assert run(assignor, {"A": member(), "B": member()}, {T1: 3}) == {"A": {}, "B": {}}


@pytest.mark.parametrize("name", ["uniform", "range"])
@pytest.mark.parametrize("subscription_type", [HOMOGENEOUS, HETEROGENEOUS])
def test_same_inputs_same_output_and_inputs_untouched(name, subscription_type):
    rng = random.Random(3)
    topics = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(5)]
    counts = {t: rng.randint(1, 30) for t in topics}
    members = {}
    for i in range(9):
        subs = topics if subscription_type == HOMOGENEOUS else rng.sample(topics, 3)
        held = {t: set(rng.sample(range(counts[t]), 1)) for t in subs[:1]}
        members[f"member-{i}"] = MemberSubscription(frozenset(subs), instance_id=None,
                                                    assigned_partitions=held)
    # Make the claims disjoint, as a coordinator's would be.
    seen = set()
    for m in members.values():
        for t, parts in m.assigned_partitions.items():
            parts -= {p for p in parts if (t, p) in seen}
            seen |= {(t, p) for p in parts}
    snapshot = copy.deepcopy(members)
    first = run(ASSIGNORS[name](), members, counts, subscription_type)
    second = run(ASSIGNORS[name](), members, counts, subscription_type)
    assert first == second
    assert members == snapshot
    check_valid(members, counts, first)


def test_inconsistent_current_assignment_is_tolerated():
    """Partitions out of range, claimed twice, or of unsubscribed topics never reach the output."""
    members = {"A": member([T1], {T1: {0, 1, 9}, T2: {0}}), "B": member([T1], {T1: {1, 2}})}
    for subscription_type in (HOMOGENEOUS, HETEROGENEOUS):
        result = run(UniformAssignor(), members, {T1: 4, T2: 1}, subscription_type)
        check_valid(members, {T1: 4, T2: 1}, result)
        assert result["A"][T1] >= {0, 1}


def test_group_spec_subscription_type():
    assert GroupSpec({}).subscription_type == HOMOGENEOUS
    assert GroupSpec({"A": member([T1]), "B": member([T1])}).subscription_type == HOMOGENEOUS
    assert GroupSpec({"A": member([T1]), "B": member([T2])}).subscription_type == HETEROGENEOUS
    forced = GroupSpec({"A": member([T1]), "B": member([T1])}, HETEROGENEOUS)
    assert forced.subscription_type == HETEROGENEOUS
    with pytest.raises(ValueError):
        GroupSpec({}, "mixed")
    spec = GroupSpec({"A": member([T1], {T1: {2}})})
    assert spec.is_partition_assigned(T1, 2) and not spec.is_partition_assigned(T1, 0)


def test_registry_and_names():
    assert list(ASSIGNORS) == ["uniform", "range"]
    assert all(cls.name == name for name, cls in ASSIGNORS.items())
    assert describer({T1: 3}).racks_for_partition(T1, 0) == frozenset()
    assert describer({T1: 3}).num_partitions(T2) == -1


# ---------------------------------------------------------------------- benchmark
def _timed(assignor, members, counts, subscription_type=None):
    """The result and the best of three runs, in milliseconds."""
    best = float("inf")
    for _ in range(3):
        spec = GroupSpec(members, subscription_type)
        topics = describer(counts)
        start = time.perf_counter()
        result = assignor.assign(spec, topics)
        best = min(best, (time.perf_counter() - start) * 1000)
    return result, best


def test_benchmark_prints_timings():
    """Timings for the record (run with -s to see them); correctness only is asserted."""
    lines = []
    for member_count, topic_count, per_topic in [(1000, 10, 100), (1000, 100, 100)]:
        topics = [uuid.UUID(int=0x5000 + i) for i in range(topic_count)]
        counts = {t: per_topic for t in topics}
        members = {f"consumer-{i:04d}-{uuid.UUID(int=i).hex[:8]}": member(topics)
                   for i in range(member_count)}
        total = topic_count * per_topic
        for name in ("range", "uniform"):
            fresh, ms_fresh = _timed(ASSIGNORS[name](), members, counts)
            again, ms_again = _timed(ASSIGNORS[name](), feed_back(members, fresh), counts)
            check_valid(members, counts, fresh)
            assert again == fresh
            lines.append(f"{name:8} {member_count} members x {total} partitions: "
                         f"fresh {ms_fresh:.1f} ms, rerun {ms_again:.1f} ms")
        joined = feed_back(members, fresh) | {"late-joiner": member(topics)}
        _, ms_join = _timed(UniformAssignor(), joined, counts)
        left = dict(list(feed_back(members, fresh).items())[1:])
        _, ms_leave = _timed(UniformAssignor(), left, counts)
        lines.append(f"uniform  one member joins / leaves {member_count}: {ms_join:.1f} ms / "
                     f"{ms_leave:.1f} ms")
    rng = random.Random(5)
    topics = [uuid.UUID(int=0x6000 + i) for i in range(50)]
    counts = {t: 200 for t in topics}
    members = {f"h{i}": member(rng.sample(topics, 10)) for i in range(1000)}
    result, ms = _timed(UniformAssignor(), members, counts, HETEROGENEOUS)
    check_valid(members, counts, result)
    lines.append(f"uniform  heterogeneous 1000 members x 10000 partitions: {ms:.1f} ms")
    print("\n" + "\n".join(lines))
