"""Bursts of consumer-group joins (consumer/join_bursts.py, JoinBursts.queue and flush): with the
broker's event loop, the first heartbeats of a group that arrive together share one target
assignment, and each member gets its share of the free partitions in its first answer. One join
at a time gives exactly the answers and records it gives without batching."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from broker.coordinator.group.consumer.group import MemberState
from broker.coordinator.group.consumer.join_bursts import MAX_BATCH_TURNS
from broker.coordinator.group.group import GroupState

from tests.coordinator.consumer_harness import ConsumerHarness, FakeTopics
from tests.coordinator.harness import Ctx, Reply

E = ErrorCode
ALL = set(range(6))


def harness(partitions=6, batched=True, **config) -> ConsumerHarness:
    topics = FakeTopics()
    topics.create("t", partitions)
    return ConsumerHarness(config, topics, batched=batched)


def held(h: ConsumerHarness, reply) -> set:
    return h.assigned(reply).get("t", set())


def test_a_burst_of_first_heartbeats_is_answered_with_one_target_for_all():
    h = harness()
    replies = [h.heartbeat(member_id=f"m{i}") for i in range(3)]
    assert not any(r.done for r in replies)     # waiting for the end of the burst
    writes = h.log.writes
    h.turn()                                    # the turn after the burst: its reads
    assert not any(r.done for r in replies)
    h.turn()                                    # nothing more came: answered
    assert all(r.done for r in replies) and not h.deferred
    assert [r.member_epoch for r in replies] == [4, 4, 4]
    shares = [held(h, r) for r in replies]
    assert sorted(len(s) for s in shares) == [2, 2, 2] and set().union(*shares) == ALL
    group = h.group()
    assert group.state is GroupState.STABLE
    assert (group.group_epoch, group.assignment_epoch) == (4, 4)
    assert all(mm.state is MemberState.STABLE for mm in group.members.values())
    # each join's member and epoch, one target, each member's assignment
    assert h.log.writes == writes + 3 + 1 + 3


def test_joins_arriving_turn_after_turn_wait_until_a_turn_brings_none():
    h = harness(partitions=12)
    replies = [h.heartbeat(member_id="m0")]
    for i in range(1, 4):
        h.turn()
        replies.append(h.heartbeat(member_id=f"m{i}"))
        assert not any(r.done for r in replies)
    h.turn()
    h.turn()
    assert all(r.done for r in replies)
    assert {r.member_epoch for r in replies} == {5}
    assert sorted(len(held(h, r)) for r in replies) == [3, 3, 3, 3]


def test_a_burst_that_keeps_growing_is_answered_after_max_batch_turns():
    h = harness(partitions=40)
    first = h.heartbeat(member_id="m0")
    turns = 0
    while not first.done:
        h.heartbeat(member_id=f"n{turns}")
        h.turn()
        turns += 1
        assert turns <= MAX_BATCH_TURNS + 1
    assert turns == MAX_BATCH_TURNS + 1
    assert first.error == E.NONE and first.member_epoch == h.group().assignment_epoch


def test_another_request_for_the_group_answers_the_waiting_joins_first():
    h = harness()
    h.heartbeat(member_id="m1")
    h.settle()
    joining = h.heartbeat(member_id="m2")
    assert not joining.done
    # m1's heartbeat is handled after m2's join: it is told to give up half
    revoke = h.heartbeat(member_id="m1", epoch=2, owned={"t": ALL})
    assert joining.done and joining.member_epoch == 3 and held(h, joining) == set()
    assert revoke.member_epoch == 2 and len(held(h, revoke)) == 3
    # a describe too
    late = h.heartbeat(member_id="m3")
    described = h.describe()[0]
    assert late.done and late.member_epoch == 4
    assert {mm.member_id for mm in described.members} == {"m1", "m2", "m3"}


def test_the_same_member_twice_in_a_burst_is_handled_in_order():
    h = harness()
    first = h.heartbeat(member_id="m1")
    again = h.heartbeat(member_id="m1")        # its earlier join is answered first
    assert first.done and first.member_epoch == 2 and held(h, first) == ALL
    h.settle()
    assert again.error == E.NONE and again.member_epoch == 2


def test_errors_in_a_burst_are_answered_with_the_others():
    h = harness(**{"group.consumer.max.size": 2})
    replies = [h.heartbeat(member_id=f"m{i}") for i in range(3)]
    bad = h.heartbeat(member_id="m9", assignor="nope")
    h.settle()
    assert [r.error for r in replies] == [E.NONE, E.NONE, E.GROUP_MAX_SIZE_REACHED]
    assert bad.error == E.UNSUPPORTED_ASSIGNOR
    assert replies[0].member_epoch == replies[1].member_epoch == 3
    assert held(h, replies[0]) | held(h, replies[1]) == ALL


def test_an_answer_that_raises_does_not_strand_the_other_joins():
    h = harness()
    first = h.heartbeat(member_id="m1")

    def broken(response):
        raise RuntimeError("the connection is gone")

    req = m.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m2", member_epoch=0, rebalance_timeout_ms=300000,
        subscribed_topic_names=["t"], topic_partitions=[])
    h.coordinator.consumer_group_heartbeat(req, 1, Ctx(), broken)
    last = h.heartbeat(member_id="m3")
    h.settle()
    assert first.member_epoch == last.member_epoch == 4
    assert len(held(h, first)) == len(held(h, last)) == 2
    assert set(h.group().members) == {"m1", "m2", "m3"}


def test_a_failed_write_answers_the_error():
    h = harness()
    h.heartbeat(member_id="m1")
    h.settle()
    h.log.fail_with = RuntimeError("disk full")
    joining = h.heartbeat(member_id="m2")
    h.settle()
    assert joining.error == E.COORDINATOR_NOT_AVAILABLE
    assert set(h.group().members) == {"m1"} and h.group().group_epoch == 2


def test_unloading_answers_the_waiting_joins():
    h = harness()
    joining = h.heartbeat(member_id="m1")
    h.coordinator.close()
    assert joining.error == E.NOT_COORDINATOR
    h.settle()
    assert len(joining.responses) == 1


def test_replay_of_a_burst_rebuilds_the_same_group():
    h = harness()
    for i in range(4):
        h.heartbeat(member_id=f"m{i}", instance=f"i{i}" if i % 2 else None)
    h.settle()
    live = h.group()
    replayed = ConsumerHarness(topics=h.topics)
    shard = replayed.coordinator.shard_for("g")
    shard.begin_loading()
    shard.load(h.log.records(shard.partition))
    shard.finish_loading()
    group = replayed.group()
    assert (group.group_epoch, group.assignment_epoch) == (live.group_epoch,
                                                           live.assignment_epoch)
    assert group.members == live.members and group.target == live.target
    assert group.state is live.state is GroupState.STABLE


def _scenario(h: ConsumerHarness) -> list:
    """Sequential heartbeats (each answered before the next), as the conformance tests send
    them: joins, revocations, a static member, a subscription change, a leave."""
    out = []

    def send(**kw):
        reply = h.heartbeat(**kw)
        h.settle()
        out.append(reply.value.to_dict())
        return reply

    send(member_id="m1")
    send(member_id="m2", rebalance=10000)
    r = send(member_id="m1", epoch=2, owned={"t": ALL})
    send(member_id="m1", epoch=2, owned={"t": h.assigned(r)["t"]})
    send(member_id="m2", epoch=3, owned={})
    send(member_id="s1", instance="i1")
    for mid in ("m1", "m2", "s1"):
        member = h.group().members[mid]
        send(member_id=mid, epoch=member.member_epoch,
             owned={"t": set().union(*member.assigned.values())})
    h.topics.create("u", 2)
    send(member_id="m2", epoch=h.group().members["m2"].member_epoch, topics=["t", "u"],
         owned={"t": set().union(*h.group().members["m2"].assigned.values())})
    send(member_id="m1", epoch=-1)
    send(member_id="m1")
    return out


def test_one_join_at_a_time_gives_the_answers_and_records_of_no_batching():
    plain, batched = harness(batched=False), harness(batched=True)
    assert _scenario(plain) == _scenario(batched)
    partition = plain.coordinator.shard_for("g").partition
    assert plain.log.records(partition) == batched.log.records(partition)


def test_a_steady_heartbeat_of_another_group_does_not_wait():
    h = harness()
    h.heartbeat(group="a", member_id="a1")
    h.settle()
    joining = h.heartbeat(group="b", member_id="b1")
    steady = h.heartbeat(group="a", member_id="a1", epoch=2)
    assert steady.done and steady.error == E.NONE and not joining.done
    h.settle()
    assert joining.member_epoch == 2


def test_other_apis_on_the_group_answer_the_waiting_joins_first():
    """Every request on a group finds its shard through GroupCoordinator.shard_for, which
    answers the burst first (here OffsetFetch, which checks member epochs)."""
    h = harness()
    joining = h.heartbeat(member_id="m1")
    reply = Reply()
    h.coordinator.offset_fetch(m.OffsetFetchRequest(group_id="g", topics=None), 7, Ctx(),
                               reply)
    assert joining.done and joining.member_epoch == 2 and reply.error == E.NONE
