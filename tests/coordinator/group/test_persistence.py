"""__consumer_offsets records in Kafka's format, and replay: loading a partition's records
rebuilds the same groups and offsets the live coordinator had."""
from __future__ import annotations

from protocol import messages as m

from broker.coordinator.group import records as rec
from broker.coordinator.group.group import OffsetAndMetadata
from broker.coordinator.common.hashing import java_abs, java_string_hashcode, partition_for
from tests.coordinator.harness import E, Harness, assignment, committed
from tests.coordinator.group.classic.test_scenarios import form, static_group


# --------------------------------------------------------------------------- routing

def test_java_string_hashcode():
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("Aa") == java_string_hashcode("BB") == 2112
    assert java_string_hashcode("polygenelubricants") == -2**31
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16
    assert java_string_hashcode("\U0001F600") == 0xD83D * 31 + 0xDE00
    assert java_string_hashcode("é") == 0xE9


def test_java_string_hashcode_overflows_like_java():
    def reference(s: str) -> int:
        units = s.encode("utf-16-be")
        h = 0
        for i in range(0, len(units), 2):
            h = (h * 31 + int.from_bytes(units[i:i + 2], "big")) % 2**32
        return h - 2**32 if h >= 2**31 else h
    for s in ["my-group", "console-consumer-12345", "x" * 100, "grüße-€", "a\U0001F600b"]:
        assert java_string_hashcode(s) == reference(s)


def test_partition_for():
    assert java_abs(-2**31) == 0 and java_abs(-5) == 5
    assert partition_for("polygenelubricants") == 0
    assert partition_for("hello") == 99162322 % 50
    assert partition_for("hello", 7) == 99162322 % 7
    negative = next(s for s in (f"consumer-group-{i}" for i in range(1000)) if java_string_hashcode(s) < 0)
    assert partition_for(negative) == abs(java_string_hashcode(negative)) % 50
    h = Harness({"offsets.topic.num.partitions": 7})
    assert len(h.coordinator.shards) == 7
    assert h.coordinator.shard_for("hello").partition == 99162322 % 7


# --------------------------------------------------------------------------- record format

def test_record_bytes_are_kafkas():
    key = rec.offset_commit_key("g", "t", 0)
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x00"
    assert rec.group_metadata_key("g") == b"\x00\x02\x00\x01g"
    value = rec.offset_commit_value(OffsetAndMetadata(42, 7, "md", 1000))
    assert value[:2] == b"\x00\x03"
    decoded = m.OffsetCommitValue.decode(value[2:], 3)
    assert (decoded.offset, decoded.leader_epoch, decoded.metadata, decoded.commit_timestamp) == (
        42, 7, "md", 1000)
    assert rec.decode_key(key) == rec.OffsetKey("g", "t", 0)
    legacy = b"\x00\x00" + key[2:]
    assert rec.decode_key(legacy) == rec.OffsetKey("g", "t", 0)
    assert rec.decode_key(b"\x00\x03\x00\x01g") is None   # a KIP-848 record: not ours


def test_group_metadata_value_round_trip():
    h = Harness()
    ids, _ = form(h, 2)
    key, value = h.log.records(h.coordinator.partition_for("g"))[-1]
    k, v = rec.decode_record(key, value)
    assert k == rec.GroupKey("g") and value[:2] == b"\x00\x03"
    assert (v.protocol_type, v.generation, v.protocol, v.leader) == ("consumer", 1, "range",
                                                                     ids[0])
    assert [mm.member_id for mm in v.members] == ids
    assert v.members[1].assignment == assignment(t=[1])
    assert v.members[0].client_host == "/127.0.0.1"
    assert v.current_state_timestamp == 0


# --------------------------------------------------------------------------- replay

def snapshot(coordinator) -> dict:
    out = {}
    for shard in coordinator.shards:
        for group_id, g in shard.groups.items():
            if g.state.value == "Dead":
                continue
            out[group_id] = {
                "partition": shard.partition,
                "state": "Stable" if g.members else "Empty",
                "generation": g.generation_id, "protocol_type": g.protocol_type,
                "protocol": g.protocol_name, "leader": g.leader_id,
                "members": [(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                             mm.rebalance_timeout_ms, mm.session_timeout_ms,
                             mm.metadata(g.protocol_name), mm.assignment)
                            for mm in g.members.values()],
                "static": dict(g.static_members),
                "offsets": {tp: om.as_tuple() for tp, om in g.offsets.items()},
            }
    return out


def replay_into(source: Harness, at: int | None = None) -> Harness:
    target = Harness(start=source.clock.now if at is None else at)
    c = target.coordinator
    for p in range(c.runtime.num_partitions):
        c.runtime.begin_loading(p)
        c.runtime.load(p, source.log.records(p))
        c.runtime.finish_loading(p)
    return target


def busy_history() -> Harness:
    h = Harness()
    ids, _ = form(h, 3, group="dyn")
    h.commit("dyn", {("t", 0): 10, ("t", 1): 11}, generation=1, member_id=ids[0],
             metadata="m")
    a, b = static_group(h)
    h.join(client_id="b", instance="ib", rebalance=30000)         # static restart, no rebalance
    h.commit("g", {("t", 0): 5}, generation=1, member_id=a, instance="ia")
    h.commit("simple", {("x", 0): 1, ("x", 1): 2})
    h.commit("simple", {("x", 0): 3})                              # later record wins
    h.commit("doomed", {("x", 0): 1})
    from tests.coordinator.group.test_offsets import delete_groups, offset_delete
    assert delete_groups(h, "doomed").value.results[0].error_code == 0
    assert offset_delete(h, "simple", {"x": [1]}).value.error_code == 0
    gone, _ = form(h, 1, group="left")
    h.commit("left", {("t", 0): 1}, generation=1, member_id=gone[0])
    h.leave("left", gone[0])                                      # Empty at generation 2
    return h


def test_replay_rebuilds_identical_state():
    h = busy_history()
    before = snapshot(h.coordinator)
    assert set(before) == {"dyn", "g", "simple", "left"}
    assert before["left"]["state"] == "Empty" and before["left"]["generation"] == 2
    assert before["simple"]["offsets"].keys() == {("x", 0)}
    loaded = replay_into(h)
    assert snapshot(loaded.coordinator) == before
    assert loaded.state("dyn") == "Stable" and loaded.state("left") == "Empty"


def test_replay_twice_and_reload_are_idempotent():
    h = busy_history()
    once = replay_into(h)
    # the loaded coordinator writes nothing on load; replaying its source again is the same
    twice = replay_into(h)
    assert snapshot(once.coordinator) == snapshot(twice.coordinator)
    c = once.coordinator
    p = c.partition_for("dyn")
    c.runtime.begin_loading(p)
    c.runtime.load(p, h.log.records(p))
    c.runtime.finish_loading(p)
    assert snapshot(c) == snapshot(twice.coordinator)


def test_loaded_members_carry_on_or_expire():
    h = Harness()
    ids, _ = form(h, 2, group="dyn")
    loaded = replay_into(h)
    assert loaded.heartbeat("dyn", ids[0], 1).error == E.NONE
    assert loaded.sync("dyn", ids[1], 1).assignment == assignment(t=[1])
    loaded.advance(10000)      # ids[1] sent nothing more, ids[0] neither: both expire
    assert loaded.state("dyn") == "Empty"
    assert loaded.coordinator.expired_members_total == 2


def test_loaded_offsets_are_served():
    h = busy_history()
    loaded = replay_into(h)
    assert committed(loaded.fetch("dyn", {"t": [0, 1]})) == {("t", 0): 10, ("t", 1): 11}
    assert loaded.fetch("dyn", {"t": [0]}).value.topics[0].partitions[0].metadata == "m"
    assert committed(loaded.fetch("simple", None)) == {("x", 0): 3}
    assert loaded.fetch("doomed", None).value.topics == []


def test_load_skips_foreign_and_unreadable_records():
    h = Harness()
    h.commit("g", {("t", 0): 1})
    p = h.coordinator.partition_for("g")
    records = [(b"\x00\x05junk", b"\x00\x00whatever"),      # another group type
               (b"\x00", b"x")] + h.log.records(p) + [
        (rec.group_metadata_key("g"), b"\x00\x03\xff")]   # truncated value
    target = Harness()
    target.coordinator.runtime.begin_loading(p)
    assert target.coordinator.runtime.load(p, records) == 4
    target.coordinator.runtime.finish_loading(p)
    assert committed(target.fetch("g", {"t": [0]})) == {("t", 0): 1}


def test_offsets_before_group_record_survive_replay():
    """Offsets of a group may precede its GroupMetadata record in the log."""
    h = Harness()
    h.commit("g", {("t", 0): 1})
    ids, _ = form(h, 1)       # the group's metadata record comes after its first offsets
    loaded = replay_into(h)
    assert committed(loaded.fetch("g", {"t": [0]})) == {("t", 0): 1}
    assert loaded.group().leader_id == ids[0]


def test_sync_write_failure_propagates_error_and_rebalances():
    h = Harness()
    ids, _ = form(h, 2, sync=False)
    follower = h.sync("g", ids[1], 1)
    h.log.fail_with = RuntimeError("log unavailable")
    leader = h.sync("g", ids[0], 1, {ids[0]: b"a", ids[1]: b"b"})
    assert leader.error == E.COORDINATOR_NOT_AVAILABLE
    assert follower.error == E.COORDINATOR_NOT_AVAILABLE
    assert h.state() == "PreparingRebalance"
    assert all(mm.assignment == b"" for mm in h.group().members.values())


def test_sync_answers_only_after_the_write():
    h = Harness()
    ids, _ = form(h, 1, sync=False)
    h.log.auto = False
    reply = h.sync("g", ids[0], 1, {ids[0]: b"mine"})
    assert not reply.done and h.state() == "CompletingRebalance"
    assert h.group().members[ids[0]].assignment == b""      # not applied before it is stored
    h.log.complete()
    assert reply.assignment == b"mine" and h.state() == "Stable"
