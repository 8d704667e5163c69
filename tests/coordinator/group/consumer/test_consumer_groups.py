"""Consumer groups (KIP-848) on a fake clock: epochs, reconciliation with revocation, fencing,
leaving, timeouts, static members, metadata changes, replay and the other group APIs."""
from __future__ import annotations

import pytest

from protocol import messages as m
from protocol.errors import ErrorCode

from broker.coordinator.group.consumer.group import MemberState
from broker.coordinator.group.group import GroupState

from tests.coordinator.consumer_harness import ConsumerHarness, FakeTopics
from tests.coordinator.harness import Ctx, FakeLog, Reply

#: every test here runs with joins answered at once and batched (conftest.py)
pytestmark = pytest.mark.usefixtures("joins_at_once_and_batched")

E = ErrorCode
ALL = set(range(6))


def harness(partitions=6, **config) -> ConsumerHarness:
    topics = FakeTopics()
    topics.create("t", partitions)
    return ConsumerHarness(config, topics)


def three_members(h: ConsumerHarness):
    """m1, m2 and m3 joined one after the other and all reconciled: returns their epochs."""
    a = h.heartbeat(member_id="m1")
    assert a.error == E.NONE and a.member_epoch == 2 and h.assigned(a) == {"t": ALL}
    h.heartbeat(member_id="m2")
    a = h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL})
    a = h.heartbeat(member_id="m1", epoch=a.member_epoch, owned=h.assigned(a))
    h.heartbeat(member_id="m2", epoch=3, owned={})
    h.heartbeat(member_id="m3")
    for mid in ("m1", "m2", "m3"):
        for _ in range(3):
            member = h.group().members[mid]
            owned = {h.topics.by_id(t)[0]: set(p) for t, p in member.assigned.items()}
            h.heartbeat(member_id=mid, epoch=member.member_epoch, owned=owned)
    return {mid: mm.member_epoch for mid, mm in h.group().members.items()}


# ----------------------------------------------------------------------------- joining

def test_first_member_gets_every_partition_at_epoch_2():
    """Kafka 4.3 starts a group at epoch 1, so its first member moves it to 2."""
    h = harness()
    reply = h.heartbeat(member_id="m1")
    assert reply.error == E.NONE
    assert reply.member_id == "m1" and reply.member_epoch == 2
    assert reply.heartbeat_interval_ms == 250
    assert h.assigned(reply) == {"t": ALL}
    group = h.group()
    assert group.state is GroupState.STABLE
    assert group.group_epoch == 2 and group.assignment_epoch == 2


def test_v0_member_gets_its_id_from_the_coordinator():
    h = harness()
    reply = h.heartbeat(member_id="", version=0)
    assert reply.error == E.NONE and reply.member_id == "uuid1"


def test_second_member_waits_until_the_first_revokes():
    """The reconciliation of Kafka's CurrentAssignmentBuilder, step by step."""
    h = harness()
    h.heartbeat(member_id="m1")
    joined = h.heartbeat(member_id="m2")
    # the group moves to epoch 3; m2's partitions are still m1's, so it gets none yet
    assert joined.member_epoch == 3 and h.assigned(joined) == {}
    assert h.group().state is GroupState.RECONCILING
    assert h.group().members["m2"].state is MemberState.UNRELEASED_PARTITIONS
    # m1 is told to keep half: it stays in epoch 2 until it no longer owns the other half
    revoke = h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL})
    kept = h.assigned(revoke)["t"]
    assert revoke.member_epoch == 2 and len(kept) == 3
    assert h.group().members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    # still owning them: nothing moves
    again = h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL})
    assert again.member_epoch == 2 and again.assignment is None
    assert h.heartbeat(member_id="m2", epoch=3, owned={}).assignment is None
    # revoked: m1 reaches epoch 3, then m2 gets the freed partitions
    done = h.heartbeat(member_id="m1", epoch=2, owned={"t": kept})
    assert done.member_epoch == 3
    got = h.heartbeat(member_id="m2", epoch=3, owned={})
    assert got.member_epoch == 3 and h.assigned(got) == {"t": ALL - kept}
    assert h.group().state is GroupState.STABLE


def test_three_members_hold_disjoint_covering_assignments():
    h = harness()
    epochs = three_members(h)
    group = h.group()
    assert group.state is GroupState.STABLE
    assert set(epochs.values()) == {group.group_epoch} == {4}
    held = [set().union(*mm.assigned.values()) for mm in group.members.values()]
    assert sorted(len(p) for p in held) == [2, 2, 2]
    assert set().union(*held) == ALL


def test_a_member_that_lost_the_response_may_come_back_with_its_previous_epoch():
    h = harness()
    h.heartbeat(member_id="m1")
    h.heartbeat(member_id="m2")
    revoke = h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL})
    kept = h.assigned(revoke)["t"]
    h.heartbeat(member_id="m1", epoch=2, owned={"t": kept})       # -> epoch 3, response lost
    retry = h.heartbeat(member_id="m1", epoch=2, owned={"t": kept})
    assert retry.error == E.NONE and retry.member_epoch == 3
    # but not while owning partitions outside its assignment
    stale = h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL})
    assert stale.error == E.FENCED_MEMBER_EPOCH


def test_a_steady_heartbeat_writes_nothing_and_keeps_the_session_alive():
    """The answer of ConsumerGroupManager.steady_heartbeat (the common heartbeat) is the full
    path's: the same epoch, no assignment, no record; a topic change elsewhere or a new group
    epoch sends the heartbeat through the full path again."""
    h = harness(**{"group.consumer.session.timeout.ms": 45000})
    h.heartbeat(member_id="m1")
    writes = h.log.writes
    for _ in range(5):
        h.advance(40000)
        reply = h.heartbeat(member_id="m1", epoch=2)
        assert (reply.error, reply.member_epoch, reply.assignment) == (E.NONE, 2, None)
        assert reply.heartbeat_interval_ms == 250
    assert "m1" in h.group().members and h.log.writes == writes
    h.topics.create("elsewhere", 3)       # a new topics version, the same metadata hash
    again = h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL})
    assert (again.error, again.member_epoch, again.assignment) == (E.NONE, 2, None)
    assert h.log.writes == writes and h.group().metadata_version == h.topics.version()
    h.heartbeat(member_id="m2")
    moved = h.heartbeat(member_id="m1", epoch=2)
    assert moved.member_epoch == 2 and len(h.assigned(moved)["t"]) == 3
    assert h.group().members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    h.advance(40000)
    h.heartbeat(member_id="m1", epoch=2)
    h.advance(5000)                       # m2 went silent: only its session ends
    assert set(h.group().members) == {"m1"}


# ----------------------------------------------------------------------------- errors

def test_v0_member_ids_look_like_kafkas():
    import uuid
    from broker.coordinator.group.consumer.group import new_member_id
    made = new_member_id(uuid.UUID(int=1 << 120))
    assert len(made) == 22 and "=" not in made and made == "AQAAAAAAAAAAAAAAAAAAAA"


def test_the_consumer_protocol_can_be_switched_off():
    h = harness(**{"group.coordinator.rebalance.protocols": "classic"})
    assert h.heartbeat(member_id="m1").error == E.UNSUPPORTED_VERSION


def test_epochs_ahead_or_unknown_members_are_refused():
    h = harness()
    h.heartbeat(member_id="m1")
    assert h.heartbeat(member_id="m1", epoch=5, owned={}).error == E.FENCED_MEMBER_EPOCH
    assert h.heartbeat(member_id="nobody", epoch=2, owned={}).error == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat(group="other", member_id="m1", epoch=2).error == E.GROUP_ID_NOT_FOUND


def test_malformed_heartbeats_get_invalid_request_with_kafkas_message():
    h = harness()
    cases = [
        (dict(member_id=""), "MemberId can't be empty."),
        (dict(group=""), "GroupId can't be empty."),
        (dict(instance=""), "InstanceId can't be empty."),
        (dict(rack=" "), "RackId can't be empty."),
        (dict(rebalance=-1), "RebalanceTimeoutMs must be provided in first request."),
        (dict(epoch=-3, owned={}), "MemberEpoch is invalid."),
    ]
    for kwargs, message in cases:
        reply = h.heartbeat(**kwargs)
        assert reply.error == E.INVALID_REQUEST, kwargs
        assert reply.error_message == message
    req = m.ConsumerGroupHeartbeatRequest(group_id="g", member_id="m", member_epoch=0,
                                          rebalance_timeout_ms=1000, topic_partitions=[])
    reply = Reply()
    h.coordinator.consumer_group_heartbeat(req, 1, Ctx(), reply)
    h.settle()
    assert reply.error == E.INVALID_REQUEST
    assert reply.error_message.startswith("Either SubscribedTopicNames or SubscribedTopicRegex")


def test_unknown_server_assignor_and_bad_regex():
    h = harness()
    reply = h.heartbeat(assignor="sticky")
    assert reply.error == E.UNSUPPORTED_ASSIGNOR
    assert reply.error_message == ("ServerAssignor sticky is not supported. Supported "
                                   "assignors: uniform, range.")
    assert h.heartbeat(topics=None, regex="(unclosed").error == E.INVALID_REGULAR_EXPRESSION
    # RE2's syntax, as Kafka's RE2J: no lookaround, no backreferences
    assert h.heartbeat(topics=None, regex="(?=a)b").error == E.INVALID_REGULAR_EXPRESSION
    assert h.heartbeat(topics=None, regex="(a)\\1").error == E.INVALID_REGULAR_EXPRESSION


def test_group_max_size():
    h = harness(**{"group.consumer.max.size": 1})
    h.heartbeat(member_id="m1")
    assert h.heartbeat(member_id="m2").error == E.GROUP_MAX_SIZE_REACHED
    assert h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL}).error == E.NONE


# ----------------------------------------------------------------------------- leaving

def test_a_leaving_member_gives_its_partitions_to_the_others():
    h = harness()
    three_members(h)
    leave = h.heartbeat(member_id="m3", epoch=-1)
    assert leave.error == E.NONE and leave.member_epoch == -1
    group = h.group()
    assert "m3" not in group.members and group.group_epoch == 5
    for mid in ("m1", "m2"):
        member = group.members[mid]
        owned = {"t": set().union(*member.assigned.values())}
        h.heartbeat(member_id=mid, epoch=member.member_epoch, owned=owned)
    assert group.state is GroupState.STABLE
    held = [set().union(*mm.assigned.values()) for mm in group.members.values()]
    assert sorted(map(len, held)) == [3, 3] and set().union(*held) == ALL


def test_the_last_member_leaving_empties_the_group():
    h = harness()
    h.heartbeat(member_id="m1")
    assert h.heartbeat(member_id="m1", epoch=-1).member_epoch == -1
    assert h.group().state is GroupState.EMPTY
    assert h.heartbeat(member_id="m1", epoch=-1).error == E.UNKNOWN_MEMBER_ID


# ----------------------------------------------------------------------------- timeouts

def test_session_timeout_fences_a_silent_member():
    h = harness(**{"group.consumer.session.timeout.ms": 45000})
    h.heartbeat(member_id="m1")
    h.heartbeat(member_id="m2")
    for _ in range(10):          # m1 keeps heartbeating, m2 goes silent
        h.advance(5000)
        member = h.group().members["m1"]
        h.heartbeat(member_id="m1", epoch=member.member_epoch,
                    owned={"t": set().union(*member.assigned.values())})
    assert set(h.group().members) == {"m1"}
    assert h.coordinator.stats.expired_members_total == 1


def test_a_groups_own_session_timeout_and_heartbeat_interval_win_over_the_brokers():
    """consumer.session.timeout.ms and consumer.heartbeat.interval.ms set on a group (its GROUP
    configs) apply to that group at the next heartbeat, as Kafka's GroupMetadataManager reads
    them per group; another group keeps the broker's."""
    h = harness(**{"group.consumer.session.timeout.ms": 45000,
                   "group.consumer.heartbeat.interval.ms": 250})
    configs = {"short": {"consumer.session.timeout.ms": "10000",
                         "consumer.heartbeat.interval.ms": "1000"}}
    for shard in h.coordinator.shards:
        shard.context.group_config = lambda group_id: configs.get(group_id, {})
    assert h.heartbeat(group="short", member_id="s1").heartbeat_interval_ms == 1000
    assert h.heartbeat(group="g", member_id="g1").heartbeat_interval_ms == 250
    h.advance(9999)
    assert "s1" in h.group("short").members
    h.advance(1)                                  # the group's 10 s, not the broker's 45 s
    assert "s1" not in h.group("short").members
    assert "g1" in h.group("g").members
    h.advance(35000)
    assert "g1" not in h.group("g").members
    # a changed config applies at the member's next heartbeat
    configs["short"]["consumer.heartbeat.interval.ms"] = "2000"
    joined = h.heartbeat(group="short", member_id="s2")
    assert joined.heartbeat_interval_ms == 2000
    assert h.heartbeat(group="short", member_id="s2",
                       epoch=joined.member_epoch).heartbeat_interval_ms == 2000


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced():
    h = harness()
    h.heartbeat(member_id="m1", rebalance=10000)
    h.heartbeat(member_id="m2")
    h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL})   # told to revoke
    h.advance(9999)
    h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL})   # heartbeats, never revokes
    assert "m1" in h.group().members
    h.advance(1)
    assert "m1" not in h.group().members
    got = h.heartbeat(member_id="m2", epoch=h.group().members["m2"].member_epoch, owned={})
    assert h.assigned(got) == {"t": ALL}


# ----------------------------------------------------------------------------- static members

def test_static_member_leaves_and_a_new_instance_takes_its_place_without_rebalance():
    h = harness()
    h.heartbeat(member_id="a1", instance="i1")
    h.heartbeat(member_id="m2")
    for _ in range(2):
        for mid in ("a1", "m2"):
            mm = h.group().members[mid]
            h.heartbeat(member_id=mid, epoch=mm.member_epoch, instance=mm.instance_id,
                        owned={"t": set().union(*mm.assigned.values())})
    group = h.group()
    epoch = group.group_epoch
    held = set().union(*group.members["a1"].assigned.values())
    # while a1 is active, another member id with its instance id is refused
    assert h.heartbeat(member_id="a2", instance="i1").error == E.UNRELEASED_INSTANCE_ID
    left = h.heartbeat(member_id="a1", epoch=-2, instance="i1")
    assert left.member_epoch == -2
    assert group.members["a1"].member_epoch == -2
    back = h.heartbeat(member_id="a2", instance="i1")
    assert back.error == E.NONE
    assert h.assigned(back) == {"t": held} and back.member_epoch == epoch
    assert "a1" not in group.members and group.group_epoch == epoch
    assert h.heartbeat(member_id="a1", epoch=epoch, instance="i1",
                       owned={}).error == E.FENCED_INSTANCE_ID


def test_static_member_that_never_returns_expires():
    h = harness()
    h.heartbeat(member_id="a1", instance="i1")
    h.heartbeat(member_id="a1", epoch=-2, instance="i1")
    h.advance(45000)
    assert h.group().state is GroupState.EMPTY


# ----------------------------------------------------------------------------- metadata

def test_new_partitions_bump_the_group_epoch_at_the_next_heartbeat():
    h = harness()
    h.heartbeat(member_id="m1")
    h.topics.grow("t", 8)
    reply = h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL})
    assert reply.member_epoch == 3 and h.assigned(reply) == {"t": set(range(8))}


def test_a_topic_created_after_the_subscription_is_assigned():
    h = ConsumerHarness()
    reply = h.heartbeat(member_id="m1", topics=["later"])
    assert reply.member_epoch == 2 and reply.assignment.topic_partitions == []
    h.topics.create("later", 2)
    reply = h.heartbeat(member_id="m1", epoch=2, owned={})
    assert reply.member_epoch == 3 and h.assigned(reply) == {"later": {0, 1}}


def test_a_regex_that_would_backtrack_for_ever_is_matched_in_linear_time():
    h = ConsumerHarness()
    h.topics.create("a" * 40 + "!", 1)
    h.topics.create("aaa", 1)
    reply = h.heartbeat(member_id="m1", topics=None, regex="(a+)+")
    assert reply.error == E.NONE and h.assigned(reply) == {"aaa": {0}}


def test_unsubscribing_from_a_topic_revokes_its_partitions_at_once():
    h = ConsumerHarness()
    h.topics.create("t", 2)
    h.topics.create("u", 2)
    reply = h.heartbeat(member_id="m1", topics=["t", "u"])
    assert h.assigned(reply) == {"t": {0, 1}, "u": {0, 1}}
    reply = h.heartbeat(member_id="m1", epoch=2, topics=["t"],
                        owned={"t": {0, 1}, "u": {0, 1}})
    assert h.assigned(reply) == {"t": {0, 1}}
    assert h.group().members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    reply = h.heartbeat(member_id="m1", epoch=reply.member_epoch, owned={"t": {0, 1}})
    assert reply.error == E.NONE
    assert h.group().members["m1"].state is MemberState.STABLE


def test_regex_subscription_follows_topics_as_they_come():
    h = ConsumerHarness()
    h.topics.create("orders-eu", 1)
    h.topics.create("payments", 1)
    reply = h.heartbeat(member_id="m1", topics=None, regex="orders-.*")
    assert h.assigned(reply) == {"orders-eu": {0}}
    h.topics.create("orders-us", 1)
    reply = h.heartbeat(member_id="m1", epoch=2, owned={"orders-eu": {0}})
    assert h.assigned(reply) == {"orders-eu": {0}, "orders-us": {0}}
    assert h.describe()[0].members[0].subscribed_topic_regex == "orders-.*"


# ----------------------------------------------------------------------------- persistence

def test_replay_rebuilds_the_same_group():
    h = harness()
    three_members(h)
    h.heartbeat(member_id="m3", epoch=-1)
    for _ in range(2):
        for mid in ("m1", "m2"):
            mm = h.group().members[mid]
            h.heartbeat(member_id=mid, epoch=mm.member_epoch,
                        owned={"t": set().union(*mm.assigned.values())})
    live = h.group()
    assert live.state is GroupState.STABLE and live.group_epoch == 5
    fresh = ConsumerHarness(topics=h.topics)
    partition = h.coordinator.partition_for("g")
    fresh.coordinator.runtime.begin_loading(partition)
    fresh.coordinator.runtime.load(partition, h.log.records(partition))
    fresh.coordinator.runtime.finish_loading(partition)
    replayed = fresh.group()
    assert replayed.group_epoch == live.group_epoch
    assert replayed.assignment_epoch == live.assignment_epoch
    assert replayed.members == live.members
    assert replayed.target == live.target
    assert replayed.state is live.state
    # the members go on with their epochs: no new rebalance
    for mid, member in replayed.members.items():
        reply = fresh.heartbeat(member_id=mid, epoch=member.member_epoch,
                                owned={"t": set().union(*member.assigned.values())})
        assert reply.error == E.NONE and reply.member_epoch == member.member_epoch
    assert fresh.group().group_epoch == live.group_epoch


def test_a_failed_write_answers_the_error_and_changes_nothing():
    log = FakeLog()
    topics = FakeTopics()
    topics.create("t", 6)
    h = ConsumerHarness(topics=topics, log=log)
    log.fail_with = OSError("disk full")
    reply = h.heartbeat(member_id="m1")
    assert reply.error == E.COORDINATOR_NOT_AVAILABLE
    assert h.group() is None


# ----------------------------------------------------------------------------- other APIs

def test_consumer_group_describe():
    h = harness()
    three_members(h)
    described = h.describe("g", "missing")
    group, missing = described
    assert group.error_code == 0 and group.group_state == "Stable"
    assert group.group_epoch == 4 and group.assignment_epoch == 4
    assert group.assignor_name == "uniform"
    assert sorted(mm.member_id for mm in group.members) == ["m1", "m2", "m3"]
    for member in group.members:
        assert member.subscribed_topic_names == ["t"]
        assert member.assignment.topic_partitions[0].topic_name == "t"
        assert member.assignment == member.target_assignment
    assert missing.error_code == E.GROUP_ID_NOT_FOUND


def test_offset_commit_checks_the_member_epoch():
    h = harness()
    h.heartbeat(member_id="m1")

    def commit(member_id, epoch, version=9):
        cls = m.OffsetCommitRequest.OffsetCommitRequestTopic
        part = m.OffsetCommitRequest.OffsetCommitRequestPartition
        req = m.OffsetCommitRequest(
            group_id="g", generation_id_or_member_epoch=epoch, member_id=member_id,
            topics=[cls(name="t", partitions=[part(partition_index=0, committed_offset=5)])])
        reply = Reply()
        h.coordinator.offset_commit(req, version, Ctx(), reply)
        return E(reply.value.topics[0].partitions[0].error_code)

    assert commit("m1", 2) == E.NONE
    assert commit("m1", 3) == E.STALE_MEMBER_EPOCH      # newer than the member's
    assert commit("m1", 1) == E.STALE_MEMBER_EPOCH      # older than the partition's
    assert commit("other", 2) == E.UNKNOWN_MEMBER_ID
    assert commit("m1", 2, version=8) == E.UNSUPPORTED_VERSION
    # KIP-1251: after m2 joins and m1 moves to epoch 3, a commit with epoch 2 is still
    # accepted for a partition m1 has held since epoch 2
    h.heartbeat(member_id="m2")
    h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL})
    kept = set().union(*h.group().members["m1"].assigned.values())
    h.heartbeat(member_id="m1", epoch=2, owned={"t": kept})
    assert h.group().members["m1"].member_epoch == 3
    assert 0 in kept
    assert commit("m1", 2) == E.NONE
    assert h.group().offsets[("t", 0)].offset == 5


def test_list_groups_filters_by_type_and_the_new_states():
    h = harness()
    h.heartbeat(member_id="m1")
    h.heartbeat(member_id="m2")   # now Reconciling

    def listed(states=(), types=()):
        reply = Reply()
        h.coordinator.list_groups(m.ListGroupsRequest(states_filter=list(states),
                                                      types_filter=list(types)), 5, Ctx(), reply)
        return [(g.group_id, g.group_state, g.group_type) for g in reply.value.groups]

    assert listed() == [("g", "Reconciling", "consumer")]
    assert listed(types=["classic"]) == []
    assert listed(types=["Consumer"]) == [("g", "Reconciling", "consumer")]
    assert listed(states=["stable"]) == []


def test_classic_requests_on_a_consumer_group():
    h = harness()
    h.heartbeat(member_id="m1")
    hb = Reply()
    h.coordinator.heartbeat(m.HeartbeatRequest(group_id="g", generation_id=2, member_id="m1"),
                            4, Ctx(), hb)
    assert hb.error == E.UNKNOWN_MEMBER_ID
    described = Reply()
    h.coordinator.describe_groups(m.DescribeGroupsRequest(groups=["g"]), 6, Ctx(), described)
    group = described.value.groups[0]
    assert group.error_code == E.GROUP_ID_NOT_FOUND and group.group_state == "Dead"
    assert group.error_message == "Group g is not a classic group."


def test_delete_an_empty_consumer_group_with_its_offsets():
    h = harness()
    h.heartbeat(member_id="m1")
    assert h.heartbeat(member_id="m1", epoch=-1).error == E.NONE
    reply = Reply()
    h.coordinator.delete_groups(m.DeleteGroupsRequest(groups_names=["g"]), 2, Ctx(), reply)
    assert reply.value.results[0].error_code == 0
    assert h.group() is None
    # and the group starts again from the beginning
    assert h.heartbeat(member_id="m9").member_epoch == 2


def test_metrics_describe_consumer_groups():
    from types import SimpleNamespace

    from broker.metrics_export import BrokerStateCollector
    h = harness()
    h.heartbeat(member_id="m1")
    h.heartbeat(member_id="m2")
    broker = SimpleNamespace(coordinator=h.coordinator, topics=None)
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in BrokerStateCollector(broker).collect() for s in family.samples}
    assert samples[("kafka_group_generation", (("group", "g"),))] == 3
    assert samples[("kafka_group_members", (("group", "g"),))] == 2
    assert samples[("kafka_coordinator_groups", (("state", "Reconciling"),))] == 1
    assert samples[("kafka_coordinator_consumer_group_rebalances_total", ())] == 2


def test_joins_within_the_assignment_interval_share_one_target_assignment():
    """group.consumer.assignment.interval.ms: a join right after a target was computed waits
    for the interval (Kafka's canComputeNextTargetAssignment); the timer then computes one
    target for every join of the burst."""
    h = harness(**{"group.consumer.assignment.interval.ms": 10})
    h.clock.now = 1000
    first = h.heartbeat(member_id="m1")
    assert first.member_epoch == 2 and h.assigned(first) == {"t": ALL}
    h.clock.now = 1003
    second = h.heartbeat(member_id="m2")
    h.clock.now = 1005
    third = h.heartbeat(member_id="m3")
    group = h.group()
    # the group epoch moved on twice, the target waits: the new members are at the old epoch
    assert (group.group_epoch, group.assignment_epoch) == (4, 2)
    assert second.member_epoch == third.member_epoch == 2
    assert h.assigned(second) == h.assigned(third) == {}
    writes = h.log.writes
    h.advance(5)                          # t = 1010: one target for epoch 4
    assert group.assignment_epoch == 4 and h.log.writes == writes + 1
    assert sorted(len(set().union(*t.values())) for t in group.target.values()) == [2, 2, 2]
    revoke = h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL})
    assert len(h.assigned(revoke)["t"]) == 2
