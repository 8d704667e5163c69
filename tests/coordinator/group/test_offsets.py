"""OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups, Describe/ListGroups and retention."""
from __future__ import annotations

import pytest

from protocol import messages as m
from protocol.errors import KafkaError

from broker.coordinator.group import records as rec
from tests.coordinator.harness import (E, Ctx, Harness, Reply, assignment, commit_errors,
                                       committed, subscription)
from tests.coordinator.group.classic.test_scenarios import form

MINUTE = 60_000


def fetch_v8(h, groups: dict, require_stable=False, version=8):
    g_cls = m.OffsetFetchRequest.OffsetFetchRequestGroup
    t_cls = m.OffsetFetchRequest.OffsetFetchRequestTopics
    req = m.OffsetFetchRequest(require_stable=require_stable, groups=[
        g_cls(group_id=g, topics=None if ts is None else
              [t_cls(name=t, partition_indexes=ps) for t, ps in ts.items()])
        for g, ts in groups.items()])
    reply = Reply()
    h.coordinator.offset_fetch(req, version, Ctx(), reply)
    return reply


def delete_groups(h, *names):
    reply = Reply()
    h.coordinator.delete_groups(m.DeleteGroupsRequest(groups_names=list(names)), 2, Ctx(), reply)
    return reply


def offset_delete(h, group, topics: dict):
    t_cls = m.OffsetDeleteRequest.OffsetDeleteRequestTopic
    p_cls = m.OffsetDeleteRequest.OffsetDeleteRequestPartition
    req = m.OffsetDeleteRequest(group_id=group, topics=[
        t_cls(name=t, partitions=[p_cls(partition_index=p) for p in ps])
        for t, ps in topics.items()])
    reply = Reply()
    h.coordinator.offset_delete(req, 0, Ctx(), reply)
    return reply


def list_groups(h, states=(), types=(), version=5):
    reply = Reply()
    h.coordinator.list_groups(m.ListGroupsRequest(states_filter=list(states),
                                                  types_filter=list(types)),
                              version, Ctx(), reply)
    return reply


# --------------------------------------------------------------------------- commit / fetch

def test_simple_commit_and_fetch():
    h = Harness()
    reply = h.commit("simple", {("t", 0): 10, ("t", 1): 20, ("u", 0): 5}, metadata="hello")
    assert set(commit_errors(reply).values()) == {E.NONE}
    fetched = h.fetch("simple", {"t": [0, 1, 2]})
    assert committed(fetched) == {("t", 0): 10, ("t", 1): 20, ("t", 2): -1}
    part = fetched.value.topics[0].partitions[0]
    assert part.metadata == "hello" and part.committed_leader_epoch == 3
    everything = h.fetch("simple", None)
    assert committed(everything) == {("t", 0): 10, ("t", 1): 20, ("u", 0): 5}
    assert h.state("simple") == "Empty"
    assert h.fetch("nobody", None).value.topics == []
    assert committed(h.fetch("nobody", {"t": [0]})) == {("t", 0): -1}


def test_commit_is_answered_after_the_write_and_applied_then():
    h = Harness()
    h.log.auto = False
    reply = h.commit("g", {("t", 0): 1})
    assert not reply.done
    assert committed(h.fetch("g", {"t": [0]})) == {("t", 0): -1}   # not stored yet
    stable = h.fetch("g", {"t": [0]}, require_stable=True)
    assert stable.value.topics[0].partitions[0].error_code == E.UNSTABLE_OFFSET_COMMIT
    h.log.complete()
    assert commit_errors(reply) == {("t", 0): E.NONE}
    assert committed(h.fetch("g", {"t": [0]}, require_stable=True)) == {("t", 0): 1}


@pytest.mark.parametrize("exc,expected", [
    (RuntimeError("disk gone"), E.COORDINATOR_NOT_AVAILABLE),
    (KafkaError(E.NOT_LEADER_OR_FOLLOWER), E.NOT_COORDINATOR),
    (KafkaError(E.KAFKA_STORAGE_ERROR), E.NOT_COORDINATOR),
    (KafkaError(E.NOT_ENOUGH_REPLICAS), E.COORDINATOR_NOT_AVAILABLE),
    (KafkaError(E.RECORD_LIST_TOO_LARGE), E.INVALID_COMMIT_OFFSET_SIZE),
])
def test_commit_write_failure(exc, expected):
    h = Harness()
    h.log.fail_with = exc
    reply = h.commit("g", {("t", 0): 1})
    assert commit_errors(reply) == {("t", 0): expected}
    h.log.fail_with = None
    assert committed(h.fetch("g", {"t": [0]})) == {("t", 0): -1}
    assert not h.group("g").pending_offset_commits


def test_metadata_too_large_and_unknown_topic():
    h = Harness({"offset.metadata.max.bytes": 5}, known_topics={"t": 2})
    reply = h.commit("g", {("t", 0): 1, ("t", 5): 1, ("nope", 0): 1}, metadata="12345")
    assert commit_errors(reply) == {("t", 0): E.NONE, ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION,
                                    ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    reply = h.commit("g", {("t", 0): 2, ("t", 1): 2}, metadata="123456")
    assert set(commit_errors(reply).values()) == {E.OFFSET_METADATA_TOO_LARGE}
    assert committed(h.fetch("g", {"t": [0]})) == {("t", 0): 1}
    # Java's length: "é" is one unit, "😀" is two
    assert commit_errors(h.commit("g", {("t", 0): 3}, metadata="ééééé")) == {("t", 0): E.NONE}
    assert commit_errors(h.commit("g", {("t", 0): 3}, metadata="😀😀😀")) == {
        ("t", 0): E.OFFSET_METADATA_TOO_LARGE}


def test_commit_in_every_state():
    h = Harness()
    ids, joins = form(h, 2, sync=False)
    member = dict(generation=1, member_id=ids[0])
    # CompletingRebalance: the member knows the generation but not its assignment yet
    assert set(commit_errors(h.commit("g", {("t", 0): 1}, **member)).values()) == {
        E.REBALANCE_IN_PROGRESS}
    h.sync("g", ids[0], 1, {ids[0]: b"", ids[1]: b""})
    # Stable
    assert set(commit_errors(h.commit("g", {("t", 0): 2}, **member)).values()) == {E.NONE}
    # PreparingRebalance: commits from the current generation are accepted
    h.join(member_id=ids[0], client_id="c0")
    assert h.state() == "PreparingRebalance"
    assert set(commit_errors(h.commit("g", {("t", 0): 3}, **member)).values()) == {E.NONE}
    assert set(commit_errors(h.commit("g", {("t", 0): 3}, generation=0,
                                      member_id=ids[0])).values()) == {E.ILLEGAL_GENERATION}
    assert committed(h.fetch("g", {"t": [0]})) == {("t", 0): 3}
    # Empty (everyone gone): simple commits again
    h.leave("g", *ids)
    assert h.state() == "Empty"
    assert set(commit_errors(h.commit("g", {("t", 0): 4})).values()) == {E.NONE}
    assert set(commit_errors(h.commit("g", {("t", 0): 4}, generation=5,
                                      member_id="x")).values()) == {E.UNKNOWN_MEMBER_ID}


def test_commit_retention_time_of_old_versions_sets_expire_timestamp():
    h = Harness()
    h.commit("g", {("t", 0): 1}, version=2, retention=5000)
    key, value = h.log.records(h.coordinator.partition_for("g"))[-1]
    assert value[:2] == b"\x00\x01"    # OffsetCommitValue v1 carries expireTimestamp
    assert rec.decode_offset_commit_value(value).expire_timestamp == 5000
    h.commit("g", {("t", 1): 1}, version=8)
    assert h.log.records(h.coordinator.partition_for("g"))[-1][1][:2] == b"\x00\x03"


def test_offset_fetch_v8_batched_groups_and_versions():
    h = Harness()
    h.commit("a", {("t", 0): 1})
    h.commit("b", {("t", 0): 2, ("u", 1): 3})
    reply = fetch_v8(h, {"a": {"t": [0]}, "b": None, "c": None})
    groups = {g.group_id: g for g in reply.value.groups}
    assert groups["a"].topics[0].partitions[0].committed_offset == 1
    assert {(t.name, p.partition_index): p.committed_offset
            for t in groups["b"].topics for p in t.partitions} == {("t", 0): 2, ("u", 1): 3}
    assert groups["c"].topics == [] and groups["c"].error_code == 0
    for version in (1, 2, 5, 7, 8, 9):
        if version >= 8:
            r = fetch_v8(h, {"a": {"t": [0]}}, version=version)
            encoded = r.value.encode(version)
        else:
            r = h.fetch("a", {"t": [0]}, version=version)
            encoded = r.value.encode(version)
        assert type(r.value).decode(encoded, version) is not None


def test_loading_shard_answers_load_in_progress():
    h = Harness()
    p = h.coordinator.partition_for("g")
    h.coordinator.runtime.begin_loading(p)
    assert h.coordinator.shards_loading == {p}
    assert h.join().error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat("g", "m", 1).error == E.NONE          # answered blindly, as Kafka does
    assert h.sync("g", "m", 1).error == E.REBALANCE_IN_PROGRESS
    assert set(commit_errors(h.commit("g", {("t", 0): 1})).values()) == {
        E.COORDINATOR_LOAD_IN_PROGRESS}
    assert h.fetch("g", {"t": [0]}).value.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    v1 = h.fetch("g", {"t": [0]}, version=1)
    assert v1.value.topics[0].partitions[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.describe("g")[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert list_groups(h).value.error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert delete_groups(h, "g").value.results[0].error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    h.coordinator.runtime.finish_loading(p)
    assert h.coordinator.shards_loading == set()
    assert h.join().error == E.MEMBER_ID_REQUIRED


# --------------------------------------------------------------------------- describe / list

def test_describe_groups():
    h = Harness()
    ids, _ = form(h, 2, sync=True)
    group, = h.describe("g")
    assert (group.error_code, group.group_state, group.protocol_type, group.protocol_data) == (
        0, "Stable", "consumer", "range")
    assert [mm.member_id for mm in group.members] == ids
    assert group.members[0].client_host == "/127.0.0.1" and group.members[0].client_id == "c0"
    assert group.members[0].member_metadata == subscription("t")
    assert group.members[1].member_assignment != b""
    h.join(member_id=ids[0], client_id="c0")
    preparing, = h.describe("g")
    assert preparing.group_state == "PreparingRebalance" and preparing.protocol_data == ""
    # no metadata outside Stable, but the assignment of the last generation synced stays
    assert [(mm.member_metadata, mm.member_assignment) for mm in preparing.members] == [
        (b"", assignment(t=[0])), (b"", assignment(t=[1]))]
    missing_v5, = h.describe("nope", version=5)
    assert (missing_v5.error_code, missing_v5.group_state) == (0, "Dead")
    missing_v6, = h.describe("nope", version=6)
    assert missing_v6.error_code == E.GROUP_ID_NOT_FOUND
    assert missing_v6.error_message == "Group nope not found."
    reply = Reply()
    h.coordinator.describe_groups(m.DescribeGroupsRequest(
        groups=["g"], include_authorized_operations=True), 5, Ctx(), reply)
    assert reply.value.groups[0].authorized_operations > 0


@pytest.mark.parametrize("version", [0, 5])
def test_describe_outside_stable_keeps_each_members_last_synced_assignment(version):
    """Kafka's describeNoMetadata: outside Stable no metadata, but the assignment a member got
    in the last generation it synced; a member new to this rebalance has none. A rebalance that
    interrupts CompletingRebalance resets every assignment."""
    h = Harness()
    a = h.join_new(client_id="a")
    assert h.sync("g", a.member_id, 1, {a.member_id: assignment(t=[0, 1, 2])}).error == E.NONE
    b_id = h.join(client_id="b").member_id
    b = h.join(member_id=b_id, client_id="b")
    assert h.state() == "PreparingRebalance" and not b.done

    def seen():
        group, = h.describe("g", version=version)
        return group.group_state, group.protocol_data, [
            (mm.member_id, mm.member_metadata, mm.member_assignment) for mm in group.members]

    kept = [(a.member_id, b"", assignment(t=[0, 1, 2])), (b_id, b"", b"")]
    assert seen() == ("PreparingRebalance", "", kept)
    a2 = h.join(member_id=a.member_id, client_id="a")
    assert (a2.generation_id, b.generation_id) == (2, 2)
    assert seen() == ("CompletingRebalance", "", kept)
    # B leaves before anyone synced generation 2: the assignments are reset with the rebalance
    assert h.leave("g", b_id).error == E.NONE
    assert seen() == ("PreparingRebalance", "", [(a.member_id, b"", b"")])


def test_list_groups_with_filters():
    h = Harness()
    form(h, 1, group="stable-group")
    form(h, 1, group="completing-group", sync=False)
    h.commit("simple", {("t", 0): 1})
    everything = {g.group_id: g for g in list_groups(h).value.groups}
    assert set(everything) == {"stable-group", "completing-group", "simple"}
    assert everything["simple"].protocol_type == "" and everything["simple"].group_state == \
        "Empty"
    assert everything["stable-group"].group_type == "classic"
    assert [g.group_id for g in list_groups(h, states=["stable"]).value.groups] == [
        "stable-group"]
    assert {g.group_id for g in list_groups(h, states=["Empty", "CompletingRebalance"])
            .value.groups} == {"simple", "completing-group"}
    assert list_groups(h, types=["consumer"]).value.groups == []
    assert len(list_groups(h, types=["Classic"]).value.groups) == 3
    assert len(list_groups(h, states=["stable"], version=3).value.groups) == 3  # no filter <v4


# --------------------------------------------------------------------------- deletion

def test_delete_groups():
    h = Harness()
    form(h, 1, group="busy")
    h.commit("idle", {("t", 0): 1, ("t", 1): 2})
    reply = delete_groups(h, "busy", "idle", "never", "")
    assert [(r.group_id, r.error_code) for r in reply.value.results] == [
        ("busy", E.NON_EMPTY_GROUP), ("idle", 0), ("never", E.GROUP_ID_NOT_FOUND),
        ("", E.GROUP_ID_NOT_FOUND)]
    assert h.group("idle") is None
    assert committed(h.fetch("idle", {"t": [0]})) == {("t", 0): -1}
    written = rec.describe(h.log.records(h.coordinator.partition_for("idle")))
    assert written[-3:] == [(rec.OffsetKey("idle", "t", 0), None),
                            (rec.OffsetKey("idle", "t", 1), None), (rec.GroupKey("idle"), None)]


def test_delete_group_write_failure_restores_it():
    h = Harness()
    h.commit("idle", {("t", 0): 1})
    h.log.fail_with = KafkaError(E.NOT_LEADER_OR_FOLLOWER)
    reply = delete_groups(h, "idle")
    assert reply.value.results[0].error_code == E.NOT_COORDINATOR
    assert h.state("idle") == "Empty"


def test_offset_delete():
    h = Harness(known_topics={"t": 3, "other": 3})
    ids, _ = form(h, 1, sync=True)      # subscribed to "t"
    h.commit("g", {("t", 0): 1, ("other", 0): 1, ("other", 1): 1}, generation=1,
             member_id=ids[0])
    reply = offset_delete(h, "g", {"t": [0], "other": [0, 2], "gone": [0]})
    assert reply.value.error_code == 0
    rows = {(t.name, p.partition_index): p.error_code
            for t in reply.value.topics for p in t.partitions}
    # "other" 2 has no offset: still answered NONE (and no tombstone written), as Kafka 4 does
    assert rows == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("other", 0): 0, ("other", 2): 0,
                    ("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
    assert committed(h.fetch("g", {"other": [0, 1], "t": [0]})) == {
        ("other", 0): -1, ("other", 1): 1, ("t", 0): 1}
    assert offset_delete(h, "nope", {"t": [0]}).value.error_code == E.GROUP_ID_NOT_FOUND
    # a non-consumer group with members cannot have offsets deleted
    h.join("connect-group", version=3, protocol_type="connect")
    assert offset_delete(h, "connect-group", {"t": [0]}).value.error_code == E.NON_EMPTY_GROUP
    # an Empty group can have any of its offsets deleted
    h.leave("g", ids[0])
    reply = offset_delete(h, "g", {"t": [0]})
    assert reply.value.topics[0].partitions[0].error_code == 0


def test_offset_delete_answers_every_partition_of_a_known_topic():
    """Kafka 4 answers each requested partition of a known topic NONE, committed or not, and
    writes tombstones only for the committed ones (and one being committed)."""
    h = Harness(known_topics={"t": 3})
    assert set(commit_errors(h.commit("g", {("t", 0): 1, ("t", 1): 2})).values()) == {E.NONE}
    p = h.coordinator.partition_for("g")
    before = len(h.log.records(p))
    reply = offset_delete(h, "g", {"t": [0, 2], "missing": [0]})
    assert reply.value.error_code == E.NONE
    assert [(t.name, [(q.partition_index, q.error_code) for q in t.partitions])
            for t in reply.value.topics] == [("t", [(0, 0), (2, 0)]),
                                             ("missing", [(0, E.UNKNOWN_TOPIC_OR_PARTITION)])]
    assert rec.describe(h.log.records(p)[before:]) == [(rec.OffsetKey("g", "t", 0), None)]
    assert committed(h.fetch("g", None)) == {("t", 1): 2}
    assert h.state("g") == "Empty"
    # a group with no offsets at all: every partition NONE, nothing written
    ids, _ = form(h, 1, group="bare")
    h.leave("bare", ids[0])
    writes = h.log.writes
    reply = offset_delete(h, "bare", {"t": [0, 1]})
    assert (reply.value.error_code, [(q.partition_index, q.error_code)
                                     for q in reply.value.topics[0].partitions]) == \
        (E.NONE, [(0, 0), (1, 0)])
    assert h.log.writes == writes
    # an offset still being written gets a tombstone after it, so the delete wins
    h.log.auto = False
    pending = h.commit("g", {("t", 2): 7})
    deleted = offset_delete(h, "g", {"t": [2]})
    h.log.complete()
    assert commit_errors(pending) == {("t", 2): E.NONE}
    assert deleted.value.topics[0].partitions[0].error_code == E.NONE
    assert committed(h.fetch("g", {"t": [2]})) == {("t", 2): -1}
    # a failed write fails the whole request: a group-level error and no partitions
    h.log.auto = True
    h.log.fail_with = KafkaError(E.NOT_LEADER_OR_FOLLOWER)
    failed = offset_delete(h, "g", {"t": [1, 2]})
    assert (failed.value.error_code, failed.value.topics) == (E.NOT_COORDINATOR, [])
    h.log.fail_with = None
    assert committed(h.fetch("g", {"t": [1]})) == {("t", 1): 2}


def test_offset_delete_with_an_empty_group_id():
    """Kafka checks the group id before the group (and before its shard's state)."""
    h = Harness(known_topics={"t": 3})
    reply = offset_delete(h, "", {"t": [0], "missing": [0]})
    assert (reply.value.error_code, reply.value.topics) == (E.INVALID_GROUP_ID, [])
    h.coordinator.runtime.begin_loading(h.coordinator.partition_for(""))
    reply = offset_delete(h, "", {"t": [0]})
    assert (reply.value.error_code, reply.value.topics) == (E.INVALID_GROUP_ID, [])
    assert offset_delete(h, "nope", {"t": [0]}).value.error_code == E.GROUP_ID_NOT_FOUND


# --------------------------------------------------------------------------- retention

def test_retention_expires_simple_group_offsets_by_commit_time():
    h = Harness({"offsets.retention.minutes": 10, "offsets.retention.check.interval.ms": MINUTE})
    h.commit("simple", {("t", 0): 1})
    h.advance_to(5 * MINUTE)
    h.commit("simple", {("t", 1): 1})
    h.advance_to(10 * MINUTE)
    assert committed(h.fetch("simple", None)) == {("t", 1): 1}
    h.advance_to(15 * MINUTE)
    assert h.fetch("simple", None).value.topics == []
    assert h.group("simple") is None
    assert h.coordinator.stats.offsets_expired_total == 2


def test_retention_of_empty_consumer_group_counts_from_when_it_became_empty():
    h = Harness({"offsets.retention.minutes": 10, "offsets.retention.check.interval.ms": MINUTE})
    ids, _ = form(h, 1, session=60_000)
    h.commit("g", {("t", 0): 1}, generation=1, member_id=ids[0])
    for t in range(1, 40):                     # alive and Stable for 20 minutes
        h.advance_to(t * MINUTE // 2)
        assert h.heartbeat("g", ids[0], 1).error == E.NONE
    h.advance_to(20 * MINUTE)
    assert committed(h.fetch("g", {"t": [0]})) == {("t", 0): 1}   # subscribed: kept
    h.leave("g", ids[0])                        # Empty from minute 20
    h.advance_to(29 * MINUTE)
    assert committed(h.fetch("g", {"t": [0]})) == {("t", 0): 1}
    h.advance_to(30 * MINUTE)
    assert committed(h.fetch("g", {"t": [0]})) == {("t", 0): -1}
    assert h.group("g") is None                 # the Empty group without offsets is deleted
    written = rec.describe(h.log.records(h.coordinator.partition_for("g")))
    assert written[-2:] == [(rec.OffsetKey("g", "t", 0), None), (rec.GroupKey("g"), None)]


def test_retention_of_stable_consumer_group_expires_only_unsubscribed_topics():
    h = Harness({"offsets.retention.minutes": 10, "offsets.retention.check.interval.ms": MINUTE})
    ids, _ = form(h, 1, session=60_000)        # subscribes to "t"
    h.commit("g", {("t", 0): 1, ("old", 0): 1}, generation=1, member_id=ids[0])
    for t in range(1, 24):
        h.advance_to(t * MINUTE // 2)
        assert h.heartbeat("g", ids[0], 1).error == E.NONE
    assert committed(h.fetch("g", {"t": [0], "old": [0]})) == {("t", 0): 1, ("old", 0): -1}
    assert h.state() == "Stable"


# --------------------------------------------------------------------------- deleted topics

def test_a_deleted_topics_offsets_go_from_every_group_and_stay_gone_after_a_reload():
    """Kafka's onPartitionsDeleted: every group's committed offsets of the deleted topic are
    tombstoned (a topic created again under the name starts with none); other topics' stay."""
    from tests.coordinator.group.test_persistence import replay_into
    h = Harness()
    h.commit("a", {("t", 0): 10, ("t", 1): 11, ("u", 0): 5})
    h.commit("b", {("t", 1): 7})
    h.commit("c", {("u", 0): 1})
    assert h.coordinator.on_partitions_deleted("t", range(2)) == 3
    assert committed(h.fetch("a", None)) == {("u", 0): 5}
    assert committed(h.fetch("b", {"t": [0, 1]})) == {("t", 0): -1, ("t", 1): -1}
    assert committed(h.fetch("c", None)) == {("u", 0): 1}
    reloaded = replay_into(h)
    assert committed(reloaded.fetch("a", None)) == {("u", 0): 5}
    assert committed(reloaded.fetch("b", None)) == {}
    assert h.coordinator.on_partitions_deleted("t", range(2)) == 0   # nothing left to delete


def test_a_commit_being_written_when_its_topic_is_deleted_is_deleted_after_it():
    h = Harness()
    h.log.auto = False
    reply = h.commit("g", {("t", 0): 3})
    assert h.coordinator.on_partitions_deleted("t", [0]) == 1
    h.log.complete()
    assert commit_errors(reply) == {("t", 0): E.NONE}
    assert committed(h.fetch("g", {"t": [0]})) == {("t", 0): -1}


def test_a_failed_tombstone_write_keeps_the_offsets():
    h = Harness()
    h.commit("g", {("t", 0): 3})
    h.log.fail_with = KafkaError(E.NOT_LEADER_OR_FOLLOWER)
    h.coordinator.on_partitions_deleted("t", [0])
    assert committed(h.fetch("g", {"t": [0]})) == {("t", 0): 3}
