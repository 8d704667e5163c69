"""Real consumer groups of every Python client, each member its own process, against a real
broker process: form, consume exactly once, commit, lose a member, resume where committed."""
from __future__ import annotations

import signal

import pytest

from tests.support import BrokerProcess, GroupMember, unique, wait_until

PARTITIONS = 6


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1)])
    admin.close()


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i, v in enumerate(values):
        producer.send(topic, value=v.encode(), partition=i % PARTITIONS)
    producer.flush()
    producer.close()


def covering(members, partitions=PARTITIONS):
    """True when the members' assignments are disjoint and cover every partition."""
    seen = []
    for m in members:
        seen.extend(m.assignment())
    return sorted(seen) == list(range(partitions))


def consumed_values(members) -> list[str]:
    return [v for m in members for (_p, _o, v) in m.records()]


CASES = [("kafka-python", "range"), ("kafka-python", "roundrobin"), ("kafka-python", "sticky"),
         ("aiokafka", "range"), ("aiokafka", "roundrobin"),
         ("confluent", "range"), ("confluent", "roundrobin"),
         ("confluent", "cooperative-sticky"),
         ("confluent", "consumer:uniform"), ("confluent", "consumer:range")]


@pytest.mark.parametrize("client,assignor", CASES)
def test_group_of_three_consumes_exactly_once_and_resumes(broker, client, assignor):
    topic, group = unique("grp-topic"), unique("grp")
    create_topic(broker.bootstrap, topic)
    members = [GroupMember.python(client, broker.bootstrap, topic, group, assignor,
                                  client_id=f"member-{i}") for i in range(3)]
    try:
        wait_until(lambda: covering(members) and all(m.assignment() for m in members), 40,
                   message="three members sharing all six partitions")
        first = [f"a{i}" for i in range(60)]
        produce(broker.bootstrap, topic, first)
        wait_until(lambda: len(consumed_values(members)) >= 60, 30, message="60 records")
        assert sorted(consumed_values(members)) == sorted(first)

        # one member leaves (close() sends LeaveGroup): the other two take over its partitions
        leaver = members.pop()
        assert leaver.stop() == 0
        wait_until(lambda: covering(members), 30, message="two members covering everything")
        second = [f"b{i}" for i in range(30)]
        produce(broker.bootstrap, topic, second)
        wait_until(lambda: len(consumed_values(members)) >= 90 - len(leaver.records()), 30,
                   message="the second batch")

        # a new member resumes from the committed offsets: nothing is consumed twice
        members.append(GroupMember.python(client, broker.bootstrap, topic, group, assignor,
                                          client_id="member-new"))
        wait_until(lambda: covering(members) and all(m.assignment() for m in members), 40,
                   message="three members again")
        third = [f"c{i}" for i in range(30)]
        produce(broker.bootstrap, topic, third)
        everything = first + second + third
        wait_until(lambda: len(consumed_values(members + [leaver])) >= len(everything), 30,
                   message="every record")
        assert sorted(consumed_values(members + [leaver])) == sorted(everything)
    finally:
        for m in members:
            m.stop()


def test_killed_member_is_expired_after_its_session_timeout(broker):
    topic, group = unique("kill-topic"), unique("kill")
    create_topic(broker.bootstrap, topic)
    survivor = GroupMember.python("kafka-python", broker.bootstrap, topic, group, "range",
                                  session_timeout_ms=6000)
    victim = GroupMember.python("kafka-python", broker.bootstrap, topic, group, "range",
                                session_timeout_ms=6000)
    try:
        wait_until(lambda: covering([survivor, victim]) and victim.assignment(), 40,
                   message="two members")
        victim.stop(signal.SIGKILL)
        # no LeaveGroup: the coordinator expires the member after its 6 s session timeout
        wait_until(lambda: survivor.assignment() == set(range(PARTITIONS)), 30,
                   message="the survivor owning every partition")
        assert "member expired" in broker.logs() or "expired" in broker.logs()
    finally:
        survivor.stop()


def test_static_member_restart_within_session_timeout_causes_no_rebalance(broker):
    topic, group = unique("static-topic"), unique("static")
    create_topic(broker.bootstrap, topic)
    a = GroupMember.python("confluent", broker.bootstrap, topic, group, "range",
                           instance_id="static-a", session_timeout_ms=30000)
    b = GroupMember.python("confluent", broker.bootstrap, topic, group, "range",
                           instance_id="static-b", session_timeout_ms=30000)
    try:
        wait_until(lambda: covering([a, b]) and a.assignment() and b.assignment(), 40,
                   message="two static members")
        before_b = b.assignment()
        a_events = len(a.snapshot())
        # a static member's close() does not send LeaveGroup; it comes back with the same id
        assert b.stop() == 0
        b = GroupMember.python("confluent", broker.bootstrap, topic, group, "range",
                               instance_id="static-b", session_timeout_ms=30000)
        wait_until(lambda: b.assignment(), 40, message="the restarted static member")
        assert b.assignment() == before_b
        produce(broker.bootstrap, topic, [f"s{i}" for i in range(12)])
        wait_until(lambda: len(consumed_values([a, b])) >= 12, 30, message="12 records")
        # the other member saw no revocation or new assignment
        assert [e for e in a.snapshot()[a_events:] if e["event"] in ("assigned", "revoked")] \
            == []
    finally:
        a.stop()
        b.stop()


def test_broker_restart_with_data_dir_keeps_groups_and_offsets(tmp_path):
    data_dir = str(tmp_path / "data")
    first = BrokerProcess(data_dir=data_dir)
    first.start()
    topic, group = unique("restart-topic"), unique("restart")
    try:
        create_topic(first.bootstrap, topic)
        member = GroupMember.python("kafka-python", first.bootstrap, topic, group, "range")
        wait_until(lambda: member.assignment() == set(range(PARTITIONS)), 40,
                   message="assignment")
        produce(first.bootstrap, topic, [f"r{i}" for i in range(30)])
        wait_until(lambda: len(member.records()) >= 30, 30, message="30 records")
        wait_until(lambda: member.snapshot()[-1]["event"] == "committed", 10,
                   message="the commit")
        assert member.stop() == 0
    finally:
        assert first.stop() == 0
    second = BrokerProcess(data_dir=data_dir, port=first.port)
    second.start()
    try:
        from kafka import KafkaAdminClient, TopicPartition
        admin = KafkaAdminClient(bootstrap_servers=second.bootstrap)
        offsets = admin.list_group_offsets(group)[group]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == \
            {p: 5 for p in range(PARTITIONS)}
        assert group in [g["group_id"] for g in admin.list_groups()]
        admin.close()
        produce(second.bootstrap, topic, [f"after{i}" for i in range(12)])
        member = GroupMember.python("kafka-python", second.bootstrap, topic, group, "range")
        wait_until(lambda: len(member.records()) >= 12, 40, message="records after restart")
        assert sorted(v for _p, _o, v in member.records()) == sorted(
            f"after{i}" for i in range(12))
        member.stop()
        assert TopicPartition(topic, 0) in offsets
    finally:
        assert second.stop() == 0


def test_describe_and_list_groups_agree_with_the_members(broker):
    from kafka import KafkaAdminClient
    topic, group = unique("describe-topic"), unique("describe")
    create_topic(broker.bootstrap, topic)
    members = [GroupMember.python("kafka-python", broker.bootstrap, topic, group, "range",
                                  client_id=f"desc-{i}") for i in range(2)]
    try:
        wait_until(lambda: covering(members) and all(m.assignment() for m in members), 40,
                   message="two members")
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        description = admin.describe_groups([group])[group]
        assert description["group_state"] == "Stable"
        assert description["protocol_type"] == "consumer"
        assert description["protocol_data"] == "range"
        assert sorted(m["client_id"] for m in description["members"]) == ["desc-0", "desc-1"]
        # what the coordinator stored as each member's assignment is what the member reports
        for member in description["members"]:
            owner = members[int(member["client_id"].removeprefix("desc-"))]
            stored = member["member_assignment"]
            partitions = sorted(p for t in stored["assigned_partitions"]
                                for p in t["partitions"])
            assert partitions == sorted(owner.assignment())
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert listed[group]["protocol_type"] == "consumer"
        assert listed[group]["group_state"] == "Stable"
        admin.close()
    finally:
        for m in members:
            m.stop()


# ---------------------------------------------------------------- the consumer protocol (KIP-848)
# confluent-kafka members with group.protocol=consumer: the broker assigns and sets the
# heartbeat interval; a member's session is the broker's group.consumer.session.timeout.ms

def consumer_member(bootstrap: str, topic: str, group: str, name: str, **kw) -> GroupMember:
    return GroupMember.python("confluent", bootstrap, topic, group, "consumer", client_id=name,
                              **kw)


def test_consumer_protocol_static_member_restarts_without_moving_partitions(broker):
    topic, group = unique("cp-static-topic"), unique("cp-static")
    create_topic(broker.bootstrap, topic)
    a = consumer_member(broker.bootstrap, topic, group, "a", instance_id="inst-a")
    b = consumer_member(broker.bootstrap, topic, group, "b", instance_id="inst-b")
    try:
        wait_until(lambda: covering([a, b]) and a.assignment() and b.assignment(), 40,
                   message="two static members")
        before_b = b.assignment()
        a_events = len(a.snapshot())
        # close() of a static member leaves with epoch -2: its partitions wait for it
        assert b.stop() == 0
        b = consumer_member(broker.bootstrap, topic, group, "b", instance_id="inst-b")
        wait_until(lambda: b.assignment(), 40, message="the restarted static member")
        assert b.assignment() == before_b
        produce(broker.bootstrap, topic, [f"s{i}" for i in range(12)])
        wait_until(lambda: len(consumed_values([a, b])) >= 12, 30, message="12 records")
        assert [e for e in a.snapshot()[a_events:] if e["event"] in ("assigned", "revoked")] \
            == []
    finally:
        a.stop()
        b.stop()


def test_consumer_protocol_killed_member_is_fenced_after_the_session_timeout():
    broker = BrokerProcess(overrides={"group.consumer.session.timeout.ms": 6000,
                                      "group.consumer.min.session.timeout.ms": 6000})
    broker.start()
    topic, group = unique("cp-kill-topic"), unique("cp-kill")
    try:
        create_topic(broker.bootstrap, topic)
        survivor = consumer_member(broker.bootstrap, topic, group, "survivor")
        victim = consumer_member(broker.bootstrap, topic, group, "victim")
        try:
            wait_until(lambda: covering([survivor, victim]) and victim.assignment()
                       and survivor.assignment(), 40, message="two members")
            victim.stop(signal.SIGKILL)
            wait_until(lambda: survivor.assignment() == set(range(PARTITIONS)), 30,
                       message="the survivor owning every partition")
            assert "member fenced: its session expired" in broker.logs()
        finally:
            survivor.stop()
    finally:
        broker.stop()


def test_consumer_protocol_group_survives_a_broker_restart(tmp_path):
    """With --data-dir the group's epochs and assignments are replayed: the member goes on at
    its epoch, resumes at its committed offsets, and nothing is consumed twice."""
    data_dir = str(tmp_path / "data")
    first = BrokerProcess(data_dir=data_dir)
    first.start()
    topic, group = unique("cp-restart-topic"), unique("cp-restart")
    second = None
    member = None
    try:
        create_topic(first.bootstrap, topic)
        member = consumer_member(first.bootstrap, topic, group, "m")
        wait_until(lambda: member.assignment() == set(range(PARTITIONS)), 40,
                   message="assignment")
        produce(first.bootstrap, topic, [f"r{i}" for i in range(30)])
        wait_until(lambda: len(member.records()) >= 30, 30, message="30 records")
        wait_until(lambda: member.snapshot()[-1]["event"] == "committed", 10,
                   message="the commit")
        assert first.stop() == 0
        second = BrokerProcess(data_dir=data_dir, port=first.port)
        second.start()
        produce(second.bootstrap, topic, [f"after{i}" for i in range(12)])
        wait_until(lambda: len(member.records()) >= 42, 40, message="records after restart")
        values = [v for _p, _o, v in member.records()]
        assert sorted(values) == sorted([f"r{i}" for i in range(30)] +
                                        [f"after{i}" for i in range(12)])
        logs = second.logs()
        assert "fenced" not in logs, logs[-3000:]
    finally:
        if member is not None:
            member.stop()
        if second is not None:
            second.stop()
        first.stop()


def test_consumer_protocol_group_as_the_admin_client_sees_it(broker):
    """confluent-kafka's AdminClient describes the group through ConsumerGroupDescribe."""
    from confluent_kafka.admin import AdminClient
    topic, group = unique("cp-describe-topic"), unique("cp-describe")
    create_topic(broker.bootstrap, topic)
    members = [consumer_member(broker.bootstrap, topic, group, f"cp-desc-{i}")
               for i in range(2)]
    try:
        wait_until(lambda: covering(members) and all(m.assignment() for m in members), 40,
                   message="two members")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        description = admin.describe_consumer_groups([group])[group].result(30)
        assert description.state.name == "STABLE"
        assert description.type.name == "CONSUMER"
        assert sorted(mm.client_id for mm in description.members) == ["cp-desc-0", "cp-desc-1"]
        for mm in description.members:
            owner = members[int(mm.client_id.removeprefix("cp-desc-"))]
            assert sorted(tp.partition for tp in mm.assignment.topic_partitions) == \
                sorted(owner.assignment())
        listed = admin.list_consumer_groups().result(30)
        mine = [g for g in listed.valid if g.group_id == group]
        assert [g.type.name for g in mine] == ["CONSUMER"]
    finally:
        for m in members:
            m.stop()
