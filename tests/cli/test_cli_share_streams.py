"""``kbroker group describe|lag|list`` of share groups (KIP-932) and streams groups (KIP-1071)
against a kbroker process: a share group of two confluent-kafka ShareConsumers, and a streams
group of one member heartbeating Kafka Streams' word-count topology (StreamsGroupHeartbeat, as
tests/conformance/test_streams_group_conformance.py drives it) that commits an offset. The
share scenario also runs against Apache Kafka 4.3.1 in test_cli_kafka.py."""
from __future__ import annotations

import time

from tests.cli.support import json_lines, kbroker, ok, one_line_error
from tests.conformance.test_share_group_conformance import alter_group_configs
from tests.conformance.test_streams_group_conformance import StreamsMember, word_count
from tests.support import RawClient, unique

RECORDS = 10


def _describe(b: str, group: str) -> dict:
    (desc,) = json_lines(kbroker("group", "describe", group, "-b", b, "--format", "json"))
    return desc


def share_scenario(b: str, port: int, topic: str, group: str) -> dict:
    """Two ShareConsumers (client ids ck-a, ck-b) read RECORDS records of a two-partition topic,
    five a partition, acknowledging each (implicit mode: at their next poll); describe, in JSON
    and as text, while both are members of the group's latest assignment and once every record
    is acknowledged, then lag; then, the consumers gone, reset-offsets of the start offsets, list
    and delete."""
    import confluent_kafka as ck
    ok(kbroker("topic", "create", topic, "-p", "2", "-b", b))
    for partition in (0, 1):
        ok(kbroker("produce", topic, "-p", str(partition), "-b", b,
                   input="".join(f"p{partition}-{i}\n" for i in range(RECORDS // 2))))
    admin = RawClient(port, client_id="cli-test-admin")
    try:
        assert alter_group_configs(admin, group, ("share.auto.offset.reset", "earliest", 0)) == \
            (0, None)
    finally:
        admin.close()
    consumers = [ck.ShareConsumer({"bootstrap.servers": b, "group.id": group,
                                   "client.id": f"ck-{who}"}) for who in "ab"]
    seen, desc = set(), None
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for c in consumers:
                seen.update((m.partition(), m.offset()) for m in c.poll(0.2)
                            if m.error() is None)
            if len(seen) == RECORDS:
                desc = _describe(b, group)
                # both members caught up with the group's assignment, all acknowledged
                if len(desc["members"]) == 2 and len(desc["offsets"]) == 2 and \
                        all(m["member_epoch"] == desc["assignment_epoch"]
                            for m in desc["members"]) and \
                        all(o["lag"] == 0 for o in desc["offsets"]):
                    break
        text = ok(kbroker("group", "describe", group, "-b", b))
    finally:
        for c in consumers:
            c.close()
    assert seen == {(p, o) for p in (0, 1) for o in range(RECORDS // 2)}
    lag = json_lines(kbroker("group", "lag", group, "-b", b, "--format", "json"))
    lag_text = ok(kbroker("group", "lag", group, "-b", b))
    reset = json_lines(kbroker("group", "reset-offsets", group, "--all-topics", "--to-earliest",
                               "--execute", "-b", b, "--format", "json"))
    reset_one = json_lines(kbroker("group", "reset-offsets", group, "--topic", f"{topic}:0",
                                   "--to-offset", "3", "--execute", "-b", b, "--format", "json"))
    after_reset = _describe(b, group)["offsets"]
    listed = [g for g in json_lines(kbroker("group", "list", "-b", b, "--format", "json"))
              if g["group"] == group]
    deleted = ok(kbroker("group", "delete", group, "-b", b))
    gone = one_line_error(kbroker("group", "describe", group, "-b", b))
    return {"describe": desc, "text": text, "lag": lag, "lag_text": lag_text, "reset": reset,
            "reset_one": reset_one, "after_reset": after_reset, "listed": listed,
            "deleted": deleted, "gone": gone}


def assert_share_described(seen: dict, topic: str, group: str) -> None:
    desc = seen["describe"]
    assert (desc["group"], desc["type"], desc["state"], desc["protocol_type"]) == \
        (group, "share", "Stable", "share")
    assert desc["group_epoch"] >= desc["assignment_epoch"] > 0
    assert sorted(m["client_id"] for m in desc["members"]) == ["ck-a", "ck-b"]
    for m in desc["members"]:
        assert set(m) == {"member_id", "client_id", "host", "member_epoch", "assignment"}
        assert m["member_id"] and m["host"] == "/127.0.0.1"
        assert m["member_epoch"] == desc["assignment_epoch"]
        assert m["assignment"] and {a["topic"] for a in m["assignment"]} == {topic}
    assigned = {a["partition"] for m in desc["members"] for a in m["assignment"]}
    assert assigned == {0, 1}
    # every record acknowledged: nothing left to deliver. The start offset is the one the
    # share coordinator stored with the last acknowledgement, from before it moved (Kafka's too)
    starts = [o["start_offset"] for o in desc["offsets"]]
    assert all(isinstance(s, int) and 0 <= s <= RECORDS // 2 for s in starts), starts
    assert desc["offsets"] == [{"topic": topic, "partition": p, "start_offset": s, "lag": 0}
                               for p, s in zip((0, 1), starts)]
    assert desc["total_lag"] == 0
    text = seen["text"]
    assert "None" not in text and "Traceback" not in text
    lines = text.splitlines()
    assert lines[:3] == [f"GROUP             {group}", "TYPE              share",
                         "STATE             Stable"]
    assert "GROUP-EPOCH" in text and "ASSIGNMENT-EPOCH" in text
    for m in desc["members"]:
        assert any(line.startswith(m["member_id"]) and m["client_id"] in line
                   for line in lines)
    at = lines.index("OFFSETS")
    assert lines[at + 1].split() == ["TOPIC", "PARTITION", "START-OFFSET", "LAG"]
    assert [line.split() for line in lines[at + 2:]] == [[topic, "0", str(starts[0]), "0"],
                                                          [topic, "1", str(starts[1]), "0"]]
    assert [(r["group"], r["type"], r["topic"], r["partition"], r["lag"]) for r in seen["lag"]] \
        == [(group, "share", topic, p, 0) for p in (0, 1)]
    assert all(set(r) == {"group", "type", "topic", "partition", "start_offset", "lag"} and
               isinstance(r["start_offset"], int) for r in seen["lag"])
    assert [line.split()[:3] + line.split()[4:] for line in seen["lag_text"].splitlines()] \
        == [["GROUP", "TOPIC", "PARTITION", "LAG"], [group, topic, "0", "0"],
            [group, topic, "1", "0"]]
    assert seen["lag_text"].split()[3] == "START-OFFSET"
    # reset-offsets moves the start offsets (AlterShareGroupOffsets): every record is to be
    # delivered again from there, so the lag is the records after it
    assert seen["reset"] == [{"group": group, "topic": topic, "partition": p, "current_offset": s,
                              "new_offset": 0, "executed": True}
                             for p, s in zip((0, 1), starts)]
    assert seen["reset_one"] == [{"group": group, "topic": topic, "partition": 0,
                                  "current_offset": 0, "new_offset": 3, "executed": True}]
    assert seen["after_reset"] == [{"topic": topic, "partition": 0, "start_offset": 3, "lag": 2},
                                   {"topic": topic, "partition": 1, "start_offset": 0, "lag": 5}]
    assert seen["listed"] == [{"group": group, "type": "share", "state": "Empty",
                               "protocol_type": "share"}]
    assert seen["deleted"].split() == ["GROUP", "STATUS", group, "OK"]
    assert "does not exist" in seen["gone"] and "GROUP_ID_NOT_FOUND" in seen["gone"]


def test_share_group_describe_lag_reset_list_and_delete(broker):
    topic, group = unique("cli-share"), unique("cli-share-g")
    seen = share_scenario(broker.bootstrap, broker.port, topic, group)
    assert_share_described(seen, topic, group)


def streams_scenario(b: str, port: int, source: str, group: str) -> dict:
    """One member owning every task of word count's two subtopologies (0 reads the source,
    1 the repartition topic); it commits offset 2 of source partition 0, whose log end is 3;
    describe and lag. Once it has left, reset-offsets and delete."""
    from protocol.messages import OffsetCommitRequest as C
    ok(kbroker("topic", "create", source, "-p", "3", "-b", b))
    ok(kbroker("produce", source, "-p", "0", "-b", b, input="a\nb\nc\n"))
    admin = RawClient(port, client_id="cli-test-admin")
    member = StreamsMember(RawClient(port, client_id="streams-app"), group,
                           word_count(group, source))
    try:
        assert alter_group_configs(admin, group, ("streams.initial.rebalance.delay.ms", "0", 0),
                                   ("streams.assignment.interval.ms", "0", 0)) == (0, None)
        time.sleep(1)   # Kafka's group coordinator sees a new topic a moment after its creation
        deadline = time.monotonic() + 30
        response = member.heartbeat()
        while not (member.active.get("0") == [0, 1, 2] and member.active.get("1") == [0, 1, 2]):
            assert time.monotonic() < deadline, response
            time.sleep(0.1)
            response = member.heartbeat()
        committed = admin.call(C(
            group_id=group, generation_id_or_member_epoch=member.epoch,
            member_id=member.member_id, group_instance_id=None, retention_time_ms=-1,
            topics=[C.OffsetCommitRequestTopic(name=source, partitions=[
                C.OffsetCommitRequestPartition(partition_index=0, committed_offset=2,
                                               committed_leader_epoch=-1,
                                               committed_metadata="")])]), 9)
        assert committed.topics[0].partitions[0].error_code == 0
        desc = _describe(b, group)
        text = ok(kbroker("group", "describe", group, "-b", b))
        lag = json_lines(kbroker("group", "lag", group, "-b", b, "--format", "json"))
        assert member.heartbeat(epoch=-1).error_code == 0   # leaves: the group is Empty
        reset = json_lines(kbroker("group", "reset-offsets", group, "--topic", source,
                                   "--to-latest", "--execute", "-b", b, "--format", "json"))
        after_reset = _describe(b, group)
        deleted = ok(kbroker("group", "delete", group, "-b", b))
        gone = one_line_error(kbroker("group", "describe", group, "-b", b))
    finally:
        member.client.close()
        admin.close()
    return {"describe": desc, "text": text, "lag": lag, "reset": reset,
            "after_reset": after_reset, "deleted": deleted, "gone": gone,
            "member": (member.member_id, member.process_id)}


def assert_streams_described(seen: dict, source: str, group: str) -> None:
    desc, text, lag, reset = seen["describe"], seen["text"], seen["lag"], seen["reset"]
    after_reset, deleted, gone = seen["after_reset"], seen["deleted"], seen["gone"]
    member_id, process_id = seen["member"]
    repartition = f"{group}-words-repartition"
    assert (desc["group"], desc["type"], desc["state"], desc["protocol_type"]) == \
        (group, "streams", "Stable", "streams")
    assert desc["group_epoch"] >= desc["assignment_epoch"] > 0 and desc["topology_epoch"] == 1
    assert desc["subtopologies"] == [
        {"subtopology": "0", "source_topics": [source], "repartition_source_topics": []},
        {"subtopology": "1", "source_topics": [], "repartition_source_topics": [repartition]}]
    (m,) = desc["members"]
    assert (m["member_id"], m["process_id"], m["client_id"], m["host"]) == \
        (member_id, process_id, "streams-app", "/127.0.0.1")
    every = [0, 1, 2]
    assert m["active_tasks"] == [{"subtopology": "0", "partitions": every},
                                 {"subtopology": "1", "partitions": every}]
    assert m["standby_tasks"] == [] and m["warmup_tasks"] == []
    assert m["assignment"] == sorted([{"topic": t, "partition": p}
                                      for t in (source, repartition) for p in every],
                                     key=lambda a: (a["topic"], a["partition"]))
    rows = {(o["topic"], o["partition"]): o for o in desc["offsets"]}
    assert set(rows) == {(t, p) for t in (source, repartition) for p in every}
    assert (rows[source, 0]["committed_offset"], rows[source, 0]["log_end_offset"],
            rows[source, 0]["lag"], rows[source, 0]["member_id"]) == (2, 3, 1, member_id)
    assert all(o["committed_offset"] is None and o["lag"] is None
               for k, o in rows.items() if k != (source, 0))
    assert desc["total_lag"] == 1
    assert "None" not in text and "Traceback" not in text
    lines = text.splitlines()
    assert lines[1] == "TYPE              streams" and "TOPOLOGY-EPOCH    1" in lines
    header = lines[lines.index("MEMBERS") + 1].split()
    assert header == ["MEMBER-ID", "INSTANCE-ID", "PROCESS-ID", "CLIENT-ID", "HOST",
                      "ACTIVE-TASKS", "STANDBY-TASKS", "WARMUP-TASKS"]
    assert lines[lines.index("MEMBERS") + 2].split() == [
        member_id, "-", process_id, "streams-app", "/127.0.0.1", "0:0,1,2",
        "1:0,1,2", "-", "-"]
    assert [(r["group"], r["type"], r["topic"], r["partition"], r["committed_offset"],
             r["lag"]) for r in lag if r["committed_offset"] is not None] == \
        [(group, "streams", source, 0, 2, 1)]
    assert [(r["partition"], r["current_offset"], r["new_offset"]) for r in reset] == \
        [(0, 2, 3), (1, None, 0), (2, None, 0)]
    assert after_reset["state"] == "Empty" and after_reset["members"] == []
    assert [(o["topic"], o["partition"], o["committed_offset"], o["lag"])
            for o in after_reset["offsets"]] == [(source, p, end, 0) for p, end in
                                                 ((0, 3), (1, 0), (2, 0))]
    assert deleted.split() == ["GROUP", "STATUS", group, "OK"]
    assert "does not exist" in gone and "GROUP_ID_NOT_FOUND" in gone


def test_streams_group_describe_lag_reset_and_delete(broker):
    source, group = unique("cli-words"), unique("cli-streams")
    seen = streams_scenario(broker.bootstrap, broker.port, source, group)
    assert_streams_described(seen, source, group)
