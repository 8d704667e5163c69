"""Streams groups (KIP-1071) on the group coordinator: topology validation and its status codes,
internal topics with Kafka's partition counts, the sticky task assignor, reconciliation
(revocation before reassignment), leaving and session timeouts, StreamsGroupDescribe, the other
group APIs, and replay equal to the live state. Fake clock, in-memory __consumer_offsets."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group.streams.assignor import MemberSpec, assign
from broker.coordinator.group.streams.topology import (Status, StreamsTopology, Subtopology,
                                                 TopicInfo, TopologyError, configure)
from broker.purgatory import Timer

from tests.coordinator.consumer_harness import FakeTopics
from tests.coordinator.harness import Ctx, FakeClock, FakeLog

E = ErrorCode
R = m.StreamsGroupHeartbeatRequest

#: no initial delay unless a test wants one
NO_DELAY = {"group.streams.initial.rebalance.delay.ms": 0}


def word_count(epoch: int = 1, source: str = "words") -> object:
    """The topology of a word count: subtopology 0 reads the source and writes a repartition
    topic; subtopology 1 reads it and keeps counts in a store with a changelog."""
    return R.Topology(epoch=epoch, subtopologies=[
        R.Subtopology(subtopology_id="0", source_topics=[source], source_topic_regex=[],
                      state_changelog_topics=[], repartition_sink_topics=["app-rep"],
                      repartition_source_topics=[], copartition_groups=[]),
        R.Subtopology(subtopology_id="1", source_topics=[], source_topic_regex=[],
                      state_changelog_topics=[R.TopicInfo(name="app-store-changelog",
                                                          partitions=0, replication_factor=0,
                                                          topic_configs=[])],
                      repartition_sink_topics=[],
                      repartition_source_topics=[R.TopicInfo(name="app-rep", partitions=0,
                                                             replication_factor=0,
                                                             topic_configs=[])],
                      copartition_groups=[]),
    ])


class StreamsHarness:
    def __init__(self, config=None, log=None, topics=None) -> None:
        self.clock = FakeClock(0)
        self.timer = Timer(self.clock)
        self.log = log or FakeLog()
        self.topics = topics or FakeTopics()
        self.coordinator = GroupCoordinator(NO_DELAY if config is None else config,
                                            self.clock, self.timer, self.log.persist,
                                            topics=self.topics)
        self.created: dict = {}

    def advance(self, ms: int) -> None:
        target = self.clock.now + ms
        while True:
            deadline = self.timer.next_deadline()
            if deadline is None or deadline > target:
                break
            self.clock.now = max(self.clock.now, deadline)
            self.timer.advance(self.clock.now)
        self.clock.now = target
        self.timer.advance(target)

    def heartbeat(self, member_id="m1", epoch=0, group="g", topology=None, process=None,
                  active=None, standby=None, create=True, **kw):
        if epoch == 0 and topology is None:
            topology = word_count()
        if epoch == 0 and active is None:
            active = {}         # a joining member sends empty task lists, as Kafka Streams
        owned = None if active is None else [
            R.TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in active.items()]
        owned_standby = None if active is None else [
            R.TaskIds(subtopology_id=s, partitions=sorted(ps))
            for s, ps in (standby or {}).items()]
        req = R(group_id=group, member_id=member_id, member_epoch=epoch,
                endpoint_information_epoch=kw.pop("endpoint_epoch", 0),
                rebalance_timeout_ms=kw.pop("rebalance_timeout_ms",
                                            30000 if epoch == 0 else -1),
                topology=topology, process_id=process or f"p-{member_id}",
                active_tasks=owned, standby_tasks=owned_standby,
                warmup_tasks=None if active is None else [], **kw)
        out = []
        self.coordinator.streams_group_heartbeat(req, 0, Ctx(), lambda r, t: out.append((r, t)))
        assert len(out) == 1
        response, to_create = out[0]
        if create:
            for name, topic in to_create.items():
                if self.topics.get(name) is None:
                    self.topics.create(name, topic.partitions)
                    self.created[name] = topic.partitions
        return response

    def describe(self, *groups):
        out = []
        self.coordinator.streams_group_describe(
            m.StreamsGroupDescribeRequest(group_ids=list(groups),
                                          include_authorized_operations=False), 0, Ctx(),
            out.append)
        return out[0].groups


def tasks(response, kind="active") -> dict:
    got = getattr(response, f"{kind}_tasks")
    return None if got is None else {t.subtopology_id: sorted(t.partitions) for t in got}


def statuses(response) -> list:
    return [s.status_code for s in response.status or ()]


# ---------------------------------------------------------------------------- topology

def counts(**topics):
    return lambda name: topics.get(name.replace("-", "_"))


def test_missing_source_topics_status():
    topology = StreamsTopology.from_message(word_count())
    configured = configure(topology, counts())
    assert configured.status == (Status.MISSING_SOURCE_TOPICS,
                                 "Source topics words are missing.")
    assert not configured.ready and configured.internal_topics_to_create == {}


def test_internal_topics_take_the_partition_counts_kafka_derives():
    topology = StreamsTopology.from_message(word_count())
    configured = configure(topology, counts(words=4))
    assert configured.status == (Status.MISSING_INTERNAL_TOPICS, "Internal topics are missing: "
                                 "app-rep, app-store-changelog")
    assert {n: t.partitions for n, t in configured.internal_topics_to_create.items()} == \
        {"app-rep": 4, "app-store-changelog": 4}
    assert {s: c.num_tasks for s, c in configured.subtopologies.items()} == {"0": 4, "1": 4}
    ready = configure(topology, counts(words=4, app_rep=4, app_store_changelog=4))
    assert ready.ready and ready.status is None and ready.internal_topics_to_create == {}


def test_an_internal_topic_with_other_partitions_is_incorrectly_partitioned():
    topology = StreamsTopology.from_message(word_count())
    configured = configure(topology, counts(words=4, app_rep=2))
    assert configured.status == (Status.INCORRECTLY_PARTITIONED_TOPICS,
                                 "Existing topic app-rep has different number of partitions: "
                                 "expected 4, found 2")


def test_copartitioned_sources_must_agree():
    sub = Subtopology("0", source_topics=("left", "right"),
                      copartition_groups=(((0, 1), (), ()),))
    topology = StreamsTopology(1, (sub,))
    bad = configure(topology, counts(left=3, right=2))
    assert bad.status == (Status.INCORRECTLY_PARTITIONED_TOPICS,
                          "Following topics do not have the same number of partitions: "
                          "[{left=3, right=2}]")
    assert configure(topology, counts(left=3, right=3)).ready


def test_a_repartition_topic_copartitioned_with_a_source_follows_it():
    writer = Subtopology("0", source_topics=("big",), repartition_sink_topics=("rep",))
    joiner = Subtopology("1", source_topics=("small",),
                         repartition_source_topics=(TopicInfo("rep"),),
                         copartition_groups=(((0,), (), (0,)),))
    configured = configure(StreamsTopology(1, (writer, joiner)), counts(big=8, small=3))
    assert configured.internal_topics_to_create["rep"].partitions == 3


def test_a_repartition_source_never_written_is_an_invalid_topology():
    reader = Subtopology("0", repartition_source_topics=(TopicInfo("rep"),))
    try:
        configure(StreamsTopology(1, (reader,)), counts())
    except TopologyError as exc:
        assert exc.code == E.STREAMS_INVALID_TOPOLOGY
        assert "never used as a sink topic" in exc.message
    else:
        raise AssertionError("an unresolvable repartition topic was accepted")


# ---------------------------------------------------------------------------- the assignor

def test_assignor_balances_and_is_sticky():
    subs = {"0": (4, False), "1": (4, True)}
    first = assign({"a": MemberSpec("pa"), "b": MemberSpec("pb")}, subs)
    counts_ = {mid: sum(len(p) for p in act.values()) for mid, (act, _sb) in first.items()}
    assert counts_ == {"a": 4, "b": 4}
    every = sorted((s, p) for act, _sb in first.values() for s, ps in act.items() for p in ps)
    assert every == [(s, p) for s in "01" for p in range(4)]
    # a third member takes a share; what a and b keep is what they had
    specs = {mid: MemberSpec(f"p{mid}", act, sb) for mid, (act, sb) in first.items()}
    specs["c"] = MemberSpec("pc")
    second = assign(specs, subs)
    sizes = sorted(sum(len(p) for p in act.values()) for act, _sb in second.values())
    assert sizes == [2, 3, 3]
    for mid in "ab":
        for s, ps in second[mid][0].items():
            assert ps <= first[mid][0].get(s, frozenset())


def test_standbys_never_on_the_process_of_the_active():
    subs = {"0": (3, True), "1": (2, False)}
    members = {"a1": MemberSpec("p1"), "a2": MemberSpec("p1"), "b": MemberSpec("p2")}
    result = assign(members, subs, num_standby_replicas=1)
    process = {"a1": "p1", "a2": "p1", "b": "p2"}
    active_at = {}
    for mid, (act, _sb) in result.items():
        for s, ps in act.items():
            for p in ps:
                active_at[(s, p)] = process[mid]
    standby = [(s, p, process[mid]) for mid, (_a, sb) in result.items()
               for s, ps in sb.items() for p in ps]
    # stateful subtopology 0 only, one standby each, on the other process
    assert sorted((s, p) for s, p, _ in standby) == [("0", 0), ("0", 1), ("0", 2)]
    assert all(active_at[(s, p)] != proc for s, p, proc in standby)


def test_no_standby_when_only_one_process():
    result = assign({"a": MemberSpec("p"), "b": MemberSpec("p")}, {"0": (2, True)}, 1)
    assert all(sb == {} for _a, sb in result.values())


# ---------------------------------------------------------------------------- heartbeats

def test_first_member_gets_internal_topics_created_then_all_tasks():
    h = StreamsHarness()
    h.topics.create("words", 2)
    r = h.heartbeat("m1")
    assert r.error_code == 0 and r.member_id == "m1"
    assert statuses(r) == [Status.MISSING_INTERNAL_TOPICS]
    assert h.created == {"app-rep": 2, "app-store-changelog": 2}
    assert r.member_epoch == 2 and tasks(r) == {}   # Kafka's new group is at epoch 1
    assert r.heartbeat_interval_ms == 250           # group.streams.heartbeat.interval.ms here
    (g,) = h.describe("g")
    assert g.group_state == "NotReady"
    r = h.heartbeat("m1", epoch=2, active={})
    assert r.error_code == 0 and statuses(r) == []
    assert r.member_epoch == 3 and tasks(r) == {"0": [0, 1], "1": [0, 1]}
    (g,) = h.describe("g")
    assert (g.group_state, g.group_epoch, g.assignment_epoch) == ("Stable", 3, 3)
    assert [s.subtopology_id for s in g.topology.subtopologies] == ["0", "1"]
    assert g.topology.subtopologies[1].state_changelog_topics[0].partitions == 2


def ready_group(h, members=("m1",)):
    h.topics.create("words", 4)
    h.topics.create("app-rep", 4)
    h.topics.create("app-store-changelog", 4)
    out = {}
    for mid in members:
        out[mid] = h.heartbeat(mid)
    return out


def test_second_member_gets_tasks_only_after_the_first_revokes_them():
    h = StreamsHarness()
    r1 = ready_group(h)["m1"]
    assert tasks(r1) == {"0": [0, 1, 2, 3], "1": [0, 1, 2, 3]}
    r2 = h.heartbeat("m2")
    assert r2.error_code == 0 and r2.member_epoch == 3
    assert tasks(r2) == {}                    # every task is still m1's
    r1 = h.heartbeat("m1", epoch=2, active={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}})
    assert r1.member_epoch == 2               # keeps its epoch until it revoked
    kept = tasks(r1)
    assert sum(len(p) for p in kept.values()) == 4
    (g,) = h.describe("g")
    assert g.group_state == "Reconciling"
    r1 = h.heartbeat("m1", epoch=2, active={s: set(p) for s, p in kept.items()})
    assert r1.member_epoch == 3
    r2 = h.heartbeat("m2", epoch=3, active={})
    mine = tasks(r2)
    assert sum(len(p) for p in mine.values()) == 4
    every = sorted((s, p) for t in (kept, mine) for s, ps in t.items() for p in ps)
    assert every == [(s, p) for s in "01" for p in range(4)]
    (g,) = h.describe("g")
    assert g.group_state == "Stable"
    assert sorted(mm.member_id for mm in g.members) == ["m1", "m2"]


def test_leaving_hands_the_tasks_to_the_other_member():
    h = StreamsHarness()
    ready_group(h, ("m1",))
    h.heartbeat("m2")
    r1 = h.heartbeat("m1", epoch=2, active={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}})
    h.heartbeat("m1", epoch=2, active={s: set(p) for s, p in tasks(r1).items()})
    h.heartbeat("m2", epoch=3, active={})
    left = h.heartbeat("m2", epoch=-1)
    assert (left.error_code, left.member_epoch) == (0, -1)
    r1 = h.heartbeat("m1", epoch=3, active={s: set(p) for s, p in tasks(r1).items()})
    assert tasks(r1) == {"0": [0, 1, 2, 3], "1": [0, 1, 2, 3]}


def test_session_timeout_fences_a_silent_member():
    h = StreamsHarness()
    ready_group(h, ("m1",))
    h.heartbeat("m2")
    for _ in range(10):
        h.advance(5_000)
        h.heartbeat("m2", epoch=3, active={})
    assert sorted(mm.member_id for mm in h.describe("g")[0].members) == ["m2"]


def test_missing_source_topic_status_and_nothing_assigned():
    h = StreamsHarness()
    r = h.heartbeat("m1", topology=word_count(source="absent"))
    assert r.error_code == 0 and statuses(r) == [Status.MISSING_SOURCE_TOPICS]
    assert r.status[0].status_detail == "Source topics absent are missing."
    assert tasks(r) == {} and h.created == {}
    h.topics.create("absent", 1)
    r = h.heartbeat("m1", epoch=r.member_epoch, active={})
    assert statuses(r) == [Status.MISSING_INTERNAL_TOPICS]
    r = h.heartbeat("m1", epoch=r.member_epoch, active={})
    assert statuses(r) == [] and tasks(r) == {"0": [0], "1": [0]}


def test_stale_topology_and_shutdown_application():
    h = StreamsHarness()
    ready_group(h, ("m1",))
    r = h.heartbeat("m2", topology=word_count(epoch=0))
    assert statuses(r) == [Status.STALE_TOPOLOGY]
    assert r.status[0].status_detail == ("The member's topology epoch 0 is behind the group's "
                                         "topology epoch 1.")
    r = h.heartbeat("m1", epoch=2, active={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}},
                    shutdown_application=True)
    assert Status.SHUTDOWN_APPLICATION in statuses(r)
    r = h.heartbeat("m2", epoch=3, active={})
    assert Status.SHUTDOWN_APPLICATION in statuses(r)


def test_initial_rebalance_delay_answers_assignment_delayed():
    h = StreamsHarness(config={"group.streams.initial.rebalance.delay.ms": 100})
    h.topics.create("words", 2)
    h.topics.create("app-rep", 2)
    h.topics.create("app-store-changelog", 2)
    r1 = h.heartbeat("m1")
    assert statuses(r1) == [Status.ASSIGNMENT_DELAYED]
    assert r1.status[0].status_detail == ("Assignment delayed due to the configured initial "
                                          "rebalance delay.")
    r2 = h.heartbeat("m2")
    assert statuses(r2) == [Status.ASSIGNMENT_DELAYED]
    h.advance(100)
    r1 = h.heartbeat("m1", epoch=r1.member_epoch, active={})
    r2 = h.heartbeat("m2", epoch=r2.member_epoch, active={})
    mine = [tasks(r1), tasks(r2)]
    assert [sum(len(p) for p in t.values()) for t in mine] == [2, 2]


def test_request_errors():
    h = StreamsHarness()
    h.topics.create("words", 1)
    r = h.heartbeat("", create=False)
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, "MemberId can't be empty.")
    r = h.heartbeat("m1", rebalance_timeout_ms=-1)
    assert r.error_message == "RebalanceTimeoutMs must be provided in first request."
    r = h.heartbeat("m1", epoch=1)
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND,
                                               "Streams group g not found.")
    r = h.heartbeat("m1", instance_id="i")
    assert r.error_message == "Static membership is not yet supported."
    r = h.heartbeat("m1", epoch=-3)
    assert r.error_message == "MemberEpoch is -3, but must be greater than or equal to -2."
    bad = word_count()
    bad.subtopologies[1].state_changelog_topics[0].partitions = 3
    r = h.heartbeat("m1", topology=bad)
    assert r.error_code == E.STREAMS_INVALID_TOPOLOGY
    h.heartbeat("m1")
    r = h.heartbeat("m1", epoch=7, active={})
    assert r.error_code == E.FENCED_MEMBER_EPOCH
    r = h.heartbeat("m9", epoch=1, active={})
    assert r.error_code == E.UNKNOWN_MEMBER_ID
    other = word_count()
    other.subtopologies[0].source_topics = ["words", "more"]
    r = h.heartbeat("m2", topology=other)
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST,
                                               "Topology updates are not supported yet.")


def test_list_describe_groups_delete_and_offsets():
    h = StreamsHarness()
    ready_group(h, ("m1",))
    listed = []
    h.coordinator.list_groups(m.ListGroupsRequest(states_filter=[], types_filter=[]), 5, Ctx(),
                              listed.append)
    (entry,) = [g for g in listed[0].groups if g.group_id == "g"]
    assert (entry.group_type, entry.group_state, entry.protocol_type) == \
        ("streams", "Stable", "streams")
    # an offset commit with the member's epoch is accepted; an older or unknown one is not
    def commit(member, epoch):
        out = []
        req = m.OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=epoch,
                                    member_id=member, group_instance_id=None,
                                    retention_time_ms=-1, topics=[
                                        m.OffsetCommitRequest.OffsetCommitRequestTopic(
                                            name="words", partitions=[
                                                m.OffsetCommitRequest.OffsetCommitRequestPartition(
                                                    partition_index=0, committed_offset=5,
                                                    committed_leader_epoch=-1,
                                                    committed_metadata="")])])
        h.coordinator.offset_commit(req, 9, Ctx(), out.append)
        return out[0].topics[0].partitions[0].error_code
    assert commit("m1", 2) == E.NONE
    assert commit("m1", 3) == E.STALE_MEMBER_EPOCH
    assert commit("nobody", 2) == E.UNKNOWN_MEMBER_ID
    deleted = []
    h.coordinator.delete_groups(m.DeleteGroupsRequest(groups_names=["g"]), 2, Ctx(),
                                deleted.append)
    assert deleted[0].results[0].error_code == E.NON_EMPTY_GROUP
    h.heartbeat("m1", epoch=-1)
    deleted = []
    h.coordinator.delete_groups(m.DeleteGroupsRequest(groups_names=["g"]), 2, Ctx(),
                                deleted.append)
    assert deleted[0].results[0].error_code == E.NONE
    (g,) = h.describe("g")
    assert g.error_code == E.GROUP_ID_NOT_FOUND


def test_replay_rebuilds_the_live_groups():
    h = StreamsHarness()
    ready_group(h, ("m1",))
    h.heartbeat("m2")
    r1 = h.heartbeat("m1", epoch=2, active={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}})
    h.heartbeat("m3", group="other")
    h.heartbeat("m3", group="other", epoch=-1)
    live = h.describe("g", "other")
    again = StreamsHarness(log=h.log, topics=h.topics)
    runtime = again.coordinator.runtime
    for p in range(runtime.num_partitions):
        runtime.begin_loading(p)
        runtime.load(p, h.log.records(p))
        runtime.finish_loading(p)
    assert again.describe("g", "other") == live
    assert live[0].group_state == "Reconciling"
    # the loaded members go on where they were: m1 revokes and reaches the new epoch
    owned = {s: set(p) for s, p in tasks(r1).items()}
    r1 = again.heartbeat("m1", epoch=2, active=owned)
    assert r1.error_code == 0 and r1.member_epoch == 3
    # a loaded member that never comes back is fenced after its session
    for _ in range(3):
        again.advance(20_000)
        assert again.heartbeat("m1", epoch=3, active=owned).error_code == 0
    assert [mm.member_id for mm in again.describe("g")[0].members] == ["m1"]


def test_a_member_that_does_not_revoke_in_time_is_fenced():
    h = StreamsHarness()
    ready_group(h, ("m1",))
    h.heartbeat("m2", rebalance_timeout_ms=1000)
    r1 = h.heartbeat("m1", epoch=2, active={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}})
    assert r1.member_epoch == 2                   # asked to revoke half of its tasks
    h.advance(30_000)                             # its rebalance timeout (30 s at its join)
    assert [mm.member_id for mm in h.describe("g")[0].members] == ["m2"]
    r2 = h.heartbeat("m2", epoch=3, active={})
    assert sum(len(p) for p in tasks(r2).values()) == 8


def test_changing_num_standby_replicas_starts_a_new_assignment():
    configs = {}
    h = StreamsHarness()
    for shard in h.coordinator.shards:
        shard.context.group_config = lambda gid: configs
    r = ready_group(h, ("m1",))["m1"]
    epoch = r.member_epoch
    configs["streams.num.standby.replicas"] = "1"
    r = h.heartbeat("m1", epoch=epoch, active={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}})
    assert r.member_epoch == epoch + 1            # one process: no standby to place
    assert tasks(r, "standby") is None


def test_rebalance_history():
    h = StreamsHarness()
    ready_group(h, ("m1",))
    h.heartbeat("m2")
    r1 = h.heartbeat("m1", epoch=2, active={"0": {0, 1, 2, 3}, "1": {0, 1, 2, 3}})
    h.heartbeat("m1", epoch=2, active={s: set(p) for s, p in tasks(r1).items()})
    h.heartbeat("m2", epoch=3, active={})
    history = h.coordinator.stats.history.of("g", h.clock.now)
    latest = history[0]
    assert (latest["cause"], latest["outcome"], latest["generation"]) == \
        ("member joined", "stable", 3)
    assert [e["member_id"] for e in latest["joined"]] == ["m2"]
    h.heartbeat("m2", epoch=-1)
    latest = h.coordinator.stats.history.of("g", h.clock.now)[0]
    assert latest["cause"] == "member left" and [e["member_id"] for e in latest["left"]] == \
        ["m2"]


def test_streams_settings_are_checked_as_kafka_checks_them():
    import pytest
    from broker.config import BrokerConfig, ConfigError
    for bad, message in [
            ({"group.streams.heartbeat.interval.ms": 100},
             "group.streams.heartbeat.interval.ms must be greater than or equal to "
             "group.streams.min.heartbeat.interval.ms"),
            ({"group.streams.num.standby.replicas": 3},
             "group.streams.num.standby.replicas must be less than or equal to "
             "group.streams.max.standby.replicas"),
            ({"group.streams.heartbeat.interval.ms": 15000,
              "group.streams.max.heartbeat.interval.ms": 60000,
              "group.streams.session.timeout.ms": 15000,
              "group.streams.min.session.timeout.ms": 1000},
             "group.streams.heartbeat.interval.ms must be less than "
             "group.streams.session.timeout.ms")]:
        with pytest.raises(ConfigError, match=message):
            BrokerConfig({"metrics.port": 0, **bad})
