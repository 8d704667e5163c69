"""Differential conformance of authorization: the ACL APIs and what each API answers a principal
the ACLs refuse, against a real Apache Kafka 4.x broker with Kafka's StandardAuthorizer and
against kbroker with ``authorizer.class.name`` set to it (the ``acl_target`` fixture).

Both brokers run with ``allow.everyone.if.no.acl.found=true`` and no super users. Every client
here is User:ANONYMOUS (PLAINTEXT); the denials are DENY ACLs whose host is 127.0.0.2, and the
refused client connects from that address. Kafka's own controller and inter-broker traffic come
from 127.0.0.1, so the DENY ACLs, even those on the cluster, never touch them.

Each scenario asserts Kafka's answers, observed on the real broker. Lists whose order Kafka does
not define (it builds them from hash sets) are compared sorted.
"""
from __future__ import annotations

import re
import socket
import time
import uuid

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    DescribeTopicPartitionsRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FetchRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    ListTransactionsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    WriteTxnMarkersRequest,
    ProduceRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
)
from protocol.records import SimpleRecord, build_batch
from protocol.schema import ZERO_UUID
from tests.support import BrokerProcess, RawClient, unique

from . import topics
from .conftest import GROUP_SETTINGS, Target, kbroker_settings
from .kafka_server import KafkaServer

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_SETTINGS = {
    "authorizer.class.name": STANDARD_AUTHORIZER,
    "allow.everyone.if.no.acl.found": "true",
}
#: the address the refused client connects from (any 127/8 address reaches loopback)
DENIED_HOST = "127.0.0.2"
ANONYMOUS = "User:ANONYMOUS"

# Kafka's codes (AclOperation, ResourceType, PatternType, AclPermissionType)
ANY_OP, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
R_ANY, R_TOPIC, R_GROUP, R_CLUSTER, R_TXN = 1, 2, 3, 4, 5
P_ANY, P_MATCH, P_LITERAL, P_PREFIXED = 1, 2, 3, 4
DENY, ALLOW = 2, 3
CONFIG_TOPIC, CONFIG_BROKER = 2, 4


@pytest.fixture(scope="module")
def kafka_acl_server():
    server = KafkaServer(overrides={**GROUP_SETTINGS, **AUTHORIZER_SETTINGS})
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kbroker_acl_server():
    server = BrokerProcess(overrides={**kbroker_settings(), **AUTHORIZER_SETTINGS})
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["kafka", "kbroker"])
def acl_target(request) -> Target:
    server = request.getfixturevalue(f"{request.param}_acl_server")
    return Target(request.param, server.port, server)


@pytest.fixture
def clients(acl_target):
    """(allowed, refused): a client from 127.0.0.1 and one from DENIED_HOST."""
    allowed = RawClient(acl_target.port, client_id="acl-conformance")
    refused = RawClient.__new__(RawClient)
    refused.sock = socket.create_connection(("127.0.0.1", acl_target.port), timeout=10,
                                            source_address=(DENIED_HOST, 0))
    refused.client_id = "acl-conformance-refused"
    refused.correlation_id = 0
    yield allowed, refused
    allowed.close()
    refused.close()


C = CreateAclsRequest
D = DeleteAclsRequest


def creation(rtype, name, pattern, principal, host, op, perm) -> C.AclCreation:
    return C.AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
                         principal=principal, host=host, operation=op, permission_type=perm)


def create_acls(client: RawClient, *rows) -> list:
    answer = client.call(C(creations=[creation(*row) for row in rows]), 3)
    return [(r.error_code, r.error_message) for r in answer.results]


def describe(client: RawClient, rtype=R_ANY, name=None, pattern=P_ANY, principal=None,
             host=None, op=ANY_OP, perm=1):
    answer = client.call(DescribeAclsRequest(
        resource_type_filter=rtype, resource_name_filter=name, pattern_type_filter=pattern,
        principal_filter=principal, host_filter=host, operation=op, permission_type=perm), 3)
    return answer.error_code, sorted(
        (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
         a.permission_type) for r in answer.resources for a in r.acls)


def eventually(read, expected, timeout: float = 15.0):
    """Kafka's broker applies ACLs from its controller's log a moment after CreateAcls or
    DeleteAcls answered; kbroker at once."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def deny_all(client: RawClient, *resources) -> None:
    """DENY ALL on each (resource type, name, pattern) for the refused client's host, and ALLOW
    ALL for 127.0.0.1: once a resource has ACLs, a principal no ACL allows is refused, and
    allow.everyone.if.no.acl.found no longer applies to it."""
    rows = [(int(rtype), name, pattern, ANONYMOUS, host, ALL, perm)
            for rtype, name, pattern in resources
            for host, perm in ((DENIED_HOST, DENY), ("127.0.0.1", ALLOW))]
    assert create_acls(client, *rows) == [(E.NONE, "")] * len(rows)
    expected = sorted(rows)
    assert eventually(lambda: [a for a in describe(client)[1] if a in expected],
                      expected) == expected


def delete_all(client: RawClient) -> None:
    client.call(D(filters=[D.DeleteAclsFilter(
        resource_type_filter=R_ANY, resource_name_filter=None, pattern_type_filter=P_ANY,
        principal_filter=None, host_filter=None, operation=ANY_OP, permission_type=1)]), 3)
    assert eventually(lambda: describe(client), (E.NONE, [])) == (E.NONE, [])


# ---------------------------------------------------------------- the ACL APIs

def test_create_describe_delete_with_filters(acl_target, clients):
    client, _ = clients
    t = unique("acl-api")
    rows = [
        (R_TOPIC, t, P_LITERAL, "User:alice", "*", READ, ALLOW),
        (R_TOPIC, t, P_LITERAL, "User:bob", "10.0.0.1", WRITE, DENY),
        (R_TOPIC, t + "-", P_PREFIXED, "User:alice", "*", DESCRIBE, ALLOW),
        (R_GROUP, t, P_LITERAL, "User:alice", "*", READ, ALLOW),
        (R_TXN, t, P_PREFIXED, "User:*", "*", WRITE, ALLOW),
    ]
    assert create_acls(client, *rows) == [(E.NONE, "")] * len(rows)
    # creating the same ACL again succeeds and adds nothing
    assert create_acls(client, rows[0]) == [(E.NONE, "")]
    mine = sorted(rows)
    assert eventually(lambda: (E.NONE, [a for a in describe(client)[1] if t in a[1]]),
                      (E.NONE, mine)) == (E.NONE, mine)
    # filters: name with ANY (exact name, any pattern), LITERAL, PREFIXED, MATCH
    assert describe(client, name=t) == (E.NONE, sorted([rows[0], rows[1], rows[3], rows[4]]))
    assert describe(client, rtype=R_TOPIC, name=t, pattern=P_LITERAL) == \
        (E.NONE, sorted(rows[:2]))
    assert describe(client, rtype=R_TOPIC, pattern=P_PREFIXED, name=t + "-") == \
        (E.NONE, [rows[2]])
    assert describe(client, rtype=R_TOPIC, name=t + "-eu", pattern=P_MATCH) == \
        (E.NONE, [rows[2]])
    assert describe(client, rtype=R_TXN, name=t + "-x", pattern=P_MATCH) == (E.NONE, [rows[4]])
    assert describe(client, rtype=R_TOPIC, name=t, principal="User:bob") == \
        (E.NONE, [rows[1]])
    assert describe(client, rtype=R_TOPIC, name=t, host="10.0.0.1", op=WRITE, perm=DENY) == \
        (E.NONE, [rows[1]])
    assert describe(client, rtype=R_GROUP, name=t, op=WRITE) == (E.NONE, [])
    # delete: each filter lists what it removed; an ACL two filters match is in both answers
    deleted = client.call(D(filters=[
        D.DeleteAclsFilter(resource_type_filter=R_TOPIC, resource_name_filter=t,
                           pattern_type_filter=P_LITERAL, principal_filter=None,
                           host_filter=None, operation=ANY_OP, permission_type=1),
        D.DeleteAclsFilter(resource_type_filter=R_ANY, resource_name_filter=t,
                           pattern_type_filter=P_ANY, principal_filter="User:alice",
                           host_filter=None, operation=READ, permission_type=ALLOW),
        D.DeleteAclsFilter(resource_type_filter=R_TOPIC, resource_name_filter="nothing-" + t,
                           pattern_type_filter=P_ANY, principal_filter=None,
                           host_filter=None, operation=ANY_OP, permission_type=1),
    ]), 3)
    assert [(r.error_code, r.error_message, sorted(
        (m.error_code, m.error_message, m.resource_type, m.resource_name, m.pattern_type,
         m.principal, m.host, m.operation, m.permission_type) for m in r.matching_acls))
        for r in deleted.filter_results] == [
        (E.NONE, None, sorted((0, None, *row) for row in rows[:2])),
        (E.NONE, None, sorted((0, None, *row) for row in (rows[0], rows[3]))),
        (E.NONE, None, []),
    ]
    rest = sorted([rows[2], rows[4]])
    assert eventually(lambda: (E.NONE, [a for a in describe(client)[1] if t in a[1]]),
                      (E.NONE, rest)) == (E.NONE, rest)
    delete_all(client)


def test_invalid_acls(acl_target, clients):
    client, _ = clients
    t = unique("acl-invalid")
    ok = (R_TOPIC, t, P_LITERAL, ANONYMOUS, "*", READ, ALLOW)
    # each creation is checked alone; codes Kafka does not know read as UNKNOWN
    answers = create_acls(
        client,
        (R_CLUSTER, "my-cluster", P_LITERAL, ANONYMOUS, "*", ALTER, ALLOW),
        (R_TOPIC, "", P_LITERAL, ANONYMOUS, "*", READ, ALLOW),
        (99, t, P_LITERAL, ANONYMOUS, "*", READ, ALLOW),
        (R_TOPIC, t, 99, ANONYMOUS, "*", READ, ALLOW),
        (R_TOPIC, t, P_LITERAL, ANONYMOUS, "*", 99, ALLOW),
        (R_TOPIC, t, P_LITERAL, ANONYMOUS, "*", READ, 99),
        (R_TOPIC, t, P_LITERAL, "alice", "*", READ, ALLOW),
        ok,
    )
    assert answers == [
        (E.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (E.INVALID_REQUEST, "Invalid empty resource name"),
        (E.INVALID_REQUEST, "Invalid resourceType UNKNOWN"),
        (E.INVALID_REQUEST, "Invalid patternType UNKNOWN"),
        (E.INVALID_REQUEST, "Invalid operation UNKNOWN"),
        (E.INVALID_REQUEST, "Invalid permissionType UNKNOWN"),
        (E.INVALID_REQUEST, "Could not parse principal from `alice` (no colon is present "
                            "separating the principal type from the principal name)"),
        (E.NONE, ""),
    ]
    assert eventually(lambda: describe(client, name=t), (E.NONE, [ok])) == (E.NONE, [ok])
    # a creation that is no ACL (ANY or MATCH where a value is needed) fails the whole request
    for bad in [(R_ANY, t, P_LITERAL, ANONYMOUS, "*", READ, ALLOW),
                (R_TOPIC, t, P_MATCH, ANONYMOUS, "*", READ, ALLOW),
                (R_TOPIC, t, P_ANY, ANONYMOUS, "*", READ, ALLOW),
                (R_TOPIC, t, P_LITERAL, ANONYMOUS, "*", ANY_OP, ALLOW),
                (R_TOPIC, t, P_LITERAL, ANONYMOUS, "*", READ, 1)]:
        assert create_acls(client, ok, bad) == [(E.UNKNOWN_SERVER_ERROR, None)] * 2
    # DescribeAcls: an unknown code matches nothing; DeleteAcls refuses the filter
    assert describe(client, rtype=99) == (E.NONE, [])
    assert describe(client, name=t, op=99) == (E.NONE, [])
    deleted = client.call(D(filters=[
        D.DeleteAclsFilter(resource_type_filter=99, resource_name_filter=t,
                           pattern_type_filter=P_ANY, principal_filter=None, host_filter=None,
                           operation=ANY_OP, permission_type=1),
        D.DeleteAclsFilter(resource_type_filter=R_ANY, resource_name_filter=t,
                           pattern_type_filter=P_ANY, principal_filter=None, host_filter=None,
                           operation=ANY_OP, permission_type=99),
        D.DeleteAclsFilter(resource_type_filter=R_ANY, resource_name_filter=t,
                           pattern_type_filter=P_ANY, principal_filter=None, host_filter=None,
                           operation=ANY_OP, permission_type=1)]), 3)
    assert [(r.error_code, r.error_message, len(r.matching_acls))
            for r in deleted.filter_results] == [
        (E.INVALID_REQUEST, "Unknown patternFilter.", 0),
        (E.INVALID_REQUEST, "Unknown entryFilter.", 0),
        (E.NONE, None, 1)]


def test_batch_bounds(acl_target, clients):
    """One CreateAcls adds, one DeleteAcls removes, at most 10,000 ACLs (Kafka's
    MAX_RECORDS_PER_USER_OP), checked before anything changes."""
    client, _ = clients
    t = unique("acl-bound")

    def rows(prefix, n):
        return [(R_TOPIC, f"{prefix}-{i}", P_LITERAL, ANONYMOUS, "*", READ, ALLOW)
                for i in range(n)]
    answers = create_acls(client, *rows(t + "-a", 10_001),
                          (R_TOPIC, "", P_LITERAL, ANONYMOUS, "*", READ, ALLOW))
    assert answers[:2] == [(E.POLICY_VIOLATION,
                            "Unable to perform excessively large batch operation.")] * 2
    assert answers[-1] == (E.INVALID_REQUEST, "Invalid empty resource name")
    assert len(answers) == 10_002 and set(answers[:-1]) == {answers[0]}
    assert describe(client, rtype=R_TOPIC, name=t + "-a-0") == (E.NONE, [])
    assert create_acls(client, *rows(t + "-a", 10_000)) == [(E.NONE, "")] * 10_000
    assert create_acls(client, *rows(t + "-b", 1)) == [(E.NONE, "")]
    assert eventually(lambda: len([a for a in describe(client)[1] if a[1].startswith(t)]),
                      10_001) == 10_001
    everything = D.DeleteAclsFilter(
        resource_type_filter=R_ANY, resource_name_filter=None, pattern_type_filter=P_ANY,
        principal_filter=None, host_filter=None, operation=ANY_OP, permission_type=1)
    refused = client.call(D(filters=[everything, everything]), 3)
    assert [(r.error_code, r.error_message, r.matching_acls)
            for r in refused.filter_results] == [
        (E.INVALID_REQUEST, "Cannot remove more than 10000 acls in a single delete operation.",
         [])] * 2
    one = D.DeleteAclsFilter(
        resource_type_filter=R_TOPIC, resource_name_filter=t + "-b-0", pattern_type_filter=P_ANY,
        principal_filter=None, host_filter=None, operation=ANY_OP, permission_type=1)
    # the same ACL matched by two filters counts once
    deleted = client.call(D(filters=[one, one]), 3)
    assert [len(r.matching_acls) for r in deleted.filter_results] == [1, 1]
    assert eventually(lambda: len(describe(client)[1]), 10_000) == 10_000
    deleted = client.call(D(filters=[everything]), 3)
    assert [len(r.matching_acls) for r in deleted.filter_results] == [10_000]
    assert eventually(lambda: describe(client), (E.NONE, [])) == (E.NONE, [])


@pytest.mark.parametrize("field", ["resource_type", "resource_pattern_type", "operation",
                                   "permission_type"])
def test_unknown_code_closes_the_connection(acl_target, clients, field):
    """A code 0 (UNKNOWN) fails the request's parsing: the connection closes unanswered."""
    client, _ = clients
    row = creation(R_TOPIC, "t", P_LITERAL, ANONYMOUS, "*", READ, ALLOW)
    setattr(row, field, 0)
    client.send(C(creations=[row]), 3)
    with pytest.raises(ConnectionError):
        client.receive(CreateAclsResponse, 3, C.api_key)


@pytest.mark.parametrize("field", ["resource_type_filter", "pattern_type_filter", "operation",
                                   "permission_type"])
def test_unknown_filter_code_closes_the_connection(acl_target, clients, field):
    _, client = clients
    request = DescribeAclsRequest(
        resource_type_filter=R_ANY, resource_name_filter=None, pattern_type_filter=P_ANY,
        principal_filter=None, host_filter=None, operation=ANY_OP, permission_type=1)
    setattr(request, field, 0)
    client.send(request, 3)
    with pytest.raises(ConnectionError):
        client.receive(DescribeAclsResponse, 3, DescribeAclsRequest.api_key)


# ---------------------------------------------------------------- per-API denials

@pytest.fixture
def denied(acl_target, clients):
    """Names the refused client may not touch (DENY ALL from DENIED_HOST, the cluster too) and
    names it may; the ACLs are removed afterwards."""
    client, _ = clients
    names = {
        "topic": unique("acl-denied"),
        "ok_topic": unique("acl-ok"),
        "group": unique("acl-denied-group"),
        "ok_group": unique("acl-ok-group"),
        "txn": unique("acl-denied-txn"),
        "nocreate": unique("acl-nocreate"),
    }
    topics.create_topic(client, names["topic"], 1)
    topics.create_topic(client, names["ok_topic"], 1)
    deny_all(client, (R_TOPIC, names["topic"], P_LITERAL), (R_GROUP, names["group"], P_LITERAL),
             (R_TXN, names["txn"], P_LITERAL), (R_TOPIC, names["nocreate"], P_PREFIXED),
             (R_CLUSTER, "kafka-cluster", P_LITERAL))
    yield names
    delete_all(client)


def test_metadata(acl_target, clients, denied):
    _, refused = clients
    M = MetadataRequest
    wanted = [denied["topic"], denied["ok_topic"], denied["nocreate"] + "-auto",
              unique("acl-autocreated")]
    answer = refused.call(M(topics=[M.MetadataRequestTopic(name=n) for n in wanted],
                            allow_auto_topic_creation=True,
                            include_topic_authorized_operations=True), 12)
    got = sorted((t.name, t.error_code, t.topic_id == ZERO_UUID, len(t.partitions),
                  t.topic_authorized_operations) for t in answer.topics)
    all_topic_ops = sum(1 << op for op in (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE,
                                           DESCRIBE_CONFIGS, ALTER_CONFIGS))
    assert got == sorted([
        (denied["topic"], E.TOPIC_AUTHORIZATION_FAILED, True, 0, -2147483648),
        (denied["ok_topic"], E.NONE, False, 1, all_topic_ops),
        # auto-creation needs CREATE: the cluster's is denied, the topic's prefix too
        (denied["nocreate"] + "-auto", E.TOPIC_AUTHORIZATION_FAILED, True, 0, -2147483648),
        # ... while the topic's own CREATE (no ACL, everyone) lets this one be created
        (wanted[3], *auto_created(acl_target), all_topic_ops),
    ])
    assert eventually(lambda: [(t.error_code, len(t.partitions)) for t in refused.call(M(
        topics=[M.MetadataRequestTopic(name=wanted[3])], allow_auto_topic_creation=False),
        12).topics], [(E.NONE, 1)]) == [(E.NONE, 1)]
    everything = refused.call(M(topics=None, allow_auto_topic_creation=False), 12)
    listed = {t.name for t in everything.topics}
    assert denied["ok_topic"] in listed and denied["topic"] not in listed
    # v10 and below report the cluster's operations when asked: none without DESCRIBE
    cluster = refused.call(M(topics=[], allow_auto_topic_creation=False,
                             include_cluster_authorized_operations=True), 10)
    assert cluster.cluster_authorized_operations == 0


def auto_created(target) -> tuple:
    """(error, no id, partitions) of a topic the Metadata request creates: Kafka 4.3 asks its
    controller and answers UNKNOWN_TOPIC_OR_PARTITION meanwhile; kbroker creates it at once and
    describes it. A difference of every auto-creation, authorizer or not."""
    return (E.UNKNOWN_TOPIC_OR_PARTITION, True, 0) if target.is_kafka else (E.NONE, False, 1)


def test_produce_fetch_list_offsets(acl_target, clients, denied):
    _, refused = clients
    batch = build_batch([SimpleRecord(key=None, value=b"v")])
    P = ProduceRequest
    produced = refused.call(P(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
        P.TopicProduceData(name=n, partition_data=[P.PartitionProduceData(index=0, records=batch)])
        for n in (denied["topic"], denied["ok_topic"])]), 9)
    assert sorted((t.name, [(p.index, p.error_code) for p in t.partition_responses])
                  for t in produced.responses) == sorted([
                      (denied["topic"], [(0, E.TOPIC_AUTHORIZATION_FAILED)]),
                      (denied["ok_topic"], [(0, E.NONE)])])
    F = FetchRequest
    fetched = refused.call(F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                             isolation_level=0, session_id=0, session_epoch=-1, topics=[
                                 F.FetchTopic(topic=n, partitions=[F.FetchPartition(
                                     partition=0, current_leader_epoch=-1, fetch_offset=0,
                                     last_fetched_epoch=-1, log_start_offset=-1,
                                     partition_max_bytes=1 << 20)])
                                 for n in (denied["topic"], denied["ok_topic"])],
                             forgotten_topics_data=[], rack_id=""), 12)
    assert fetched.error_code == E.NONE
    assert sorted((t.topic, [(p.partition_index, p.error_code, p.high_watermark,
                              len(p.records or b"") > 0) for p in t.partitions])
                  for t in fetched.responses) == sorted([
                      (denied["topic"], [(0, E.TOPIC_AUTHORIZATION_FAILED, -1, False)]),
                      (denied["ok_topic"], [(0, E.NONE, 1, True)])])
    L = ListOffsetsRequest
    listed = refused.call(L(replica_id=-1, isolation_level=0, topics=[
        L.ListOffsetsTopic(name=n, partitions=[L.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1)])
        for n in (denied["topic"], denied["ok_topic"])]), 7)
    assert sorted((t.name, [(p.partition_index, p.error_code, p.timestamp, p.offset)
                            for p in t.partitions]) for t in listed.topics) == sorted([
        (denied["topic"], [(0, E.TOPIC_AUTHORIZATION_FAILED, -1, -1)]),
        (denied["ok_topic"], [(0, E.NONE, -1, 1)])])


def test_offsets_and_groups(acl_target, clients, denied):
    client, refused = clients
    O = OffsetCommitRequest

    def commit(c, group, names):
        answer = c.call(O(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                          group_instance_id=None, topics=[
                              O.OffsetCommitRequestTopic(name=n, partitions=[
                                  O.OffsetCommitRequestPartition(
                                      partition_index=0, committed_offset=0,
                                      committed_leader_epoch=-1, committed_metadata="")])
                              for n in names]), 8)
        return sorted((t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                      for t in answer.topics)

    both = [denied["topic"], denied["ok_topic"]]
    assert commit(refused, denied["group"], both) == sorted([
        (n, [(0, E.GROUP_AUTHORIZATION_FAILED)]) for n in both])
    assert commit(refused, denied["ok_group"], both) == sorted([
        (denied["topic"], [(0, E.TOPIC_AUTHORIZATION_FAILED)]),
        (denied["ok_topic"], [(0, E.NONE)])])
    # the unrestricted client makes the denied group exist, for ListGroups below
    assert commit(client, denied["group"], [denied["ok_topic"]]) == [
        (denied["ok_topic"], [(0, E.NONE)])]

    F = OffsetFetchRequest
    fetched = refused.call(F(groups=[
        F.OffsetFetchRequestGroup(group_id=g, topics=[
            F.OffsetFetchRequestTopics(name=n, partition_indexes=[0]) for n in both])
        for g in (denied["group"], denied["ok_group"])] + [
        F.OffsetFetchRequestGroup(group_id=denied["ok_group"] + "-all", topics=None)],
        require_stable=False), 8)
    assert [(g.group_id, g.error_code, sorted(
        (t.name, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
        for t in g.topics)) for g in fetched.groups] == [
        (denied["group"], E.GROUP_AUTHORIZATION_FAILED, []),
        (denied["ok_group"], E.NONE, sorted([
            (denied["topic"], [(0, -1, E.TOPIC_AUTHORIZATION_FAILED)]),
            (denied["ok_topic"], [(0, 0, E.NONE)])])),
        (denied["ok_group"] + "-all", E.NONE, []),
    ]
    # "all topics" leaves out those the principal may not describe
    assert commit(client, denied["ok_group"] + "-x", both) == sorted([
        (n, [(0, E.NONE)]) for n in both])
    every = refused.call(F(groups=[F.OffsetFetchRequestGroup(
        group_id=denied["ok_group"] + "-x", topics=None)], require_stable=False), 8)
    assert [t.name for t in every.groups[0].topics] == [denied["ok_topic"]]

    J = JoinGroupRequest
    joined = refused.call(J(group_id=denied["group"], session_timeout_ms=30000,
                            rebalance_timeout_ms=30000, member_id="", group_instance_id=None,
                            protocol_type="consumer", protocols=[
                                J.JoinGroupRequestProtocol(name="range", metadata=b"")],
                            reason=None), 9)
    assert (joined.error_code, joined.generation_id, joined.protocol_type,
            joined.protocol_name, joined.leader, joined.member_id, joined.members) == \
        (E.GROUP_AUTHORIZATION_FAILED, -1, None, None, "", "", [])

    described = refused.call(DescribeGroupsRequest(
        groups=[denied["group"], denied["ok_group"]], include_authorized_operations=True), 5)
    assert sorted((g.group_id, g.error_code, g.group_state, g.protocol_type,
                   g.authorized_operations) for g in described.groups) == sorted([
        (denied["group"], E.GROUP_AUTHORIZATION_FAILED, "", "", -2147483648),
        (denied["ok_group"], E.NONE, "Empty", "",
         sum(1 << op for op in (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)))])

    # without DESCRIBE on the cluster, only the groups the principal may describe are listed
    listed = {g.group_id for g in refused.call(ListGroupsRequest(states_filter=[]), 4).groups}
    assert denied["ok_group"] in listed and denied["group"] not in listed
    everyone = {g.group_id for g in client.call(ListGroupsRequest(states_filter=[]), 4).groups}
    assert {denied["ok_group"], denied["group"]} <= everyone

    deleted = refused.call(DeleteGroupsRequest(
        groups_names=[denied["group"], denied["ok_group"]]), 2)
    assert sorted((r.group_id, r.error_code) for r in deleted.results) == sorted([
        (denied["group"], E.GROUP_AUTHORIZATION_FAILED), (denied["ok_group"], E.NONE)])


def test_topic_ids_with_an_authorizer(acl_target, clients, denied):
    """Produce v13 and OffsetCommit/OffsetFetch v10 name topics by id: an unknown id is
    UNKNOWN_TOPIC_ID whatever the ACLs (Kafka resolves ids before it authorizes topics), a
    refused group refuses every topic, unknown ids too."""
    client, refused = clients
    ids = {}
    for key in ("topic", "ok_topic"):
        meta = client.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name=denied[key])], allow_auto_topic_creation=False), 12)
        ids[key] = meta.topics[0].topic_id
    unknown = uuid.uuid4()
    wanted = [ids["topic"], ids["ok_topic"], unknown]
    P = ProduceRequest
    batch = build_batch([SimpleRecord(key=None, value=b"v")])
    produced = refused.call(P(transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
        P.TopicProduceData(topic_id=i, partition_data=[P.PartitionProduceData(
            index=0, records=batch)]) for i in wanted]), 13)
    assert sorted((t.topic_id, t.name, [(p.index, p.error_code) for p in t.partition_responses])
                  for t in produced.responses) == sorted([
        (ids["topic"], "", [(0, E.TOPIC_AUTHORIZATION_FAILED)]),
        (ids["ok_topic"], "", [(0, E.NONE)]),
        (unknown, "", [(0, E.UNKNOWN_TOPIC_ID)])])

    O = OffsetCommitRequest

    def commit(group):
        answer = refused.call(O(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                group_instance_id=None, topics=[
                                    O.OffsetCommitRequestTopic(topic_id=i, partitions=[
                                        O.OffsetCommitRequestPartition(
                                            partition_index=0, committed_offset=3,
                                            committed_leader_epoch=-1, committed_metadata="")])
                                    for i in wanted]), 10)
        return sorted((t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
                      for t in answer.topics)

    assert commit(denied["group"]) == sorted(
        (i, [(0, E.GROUP_AUTHORIZATION_FAILED)]) for i in wanted)
    assert commit(denied["ok_group"]) == sorted([
        (ids["topic"], [(0, E.TOPIC_AUTHORIZATION_FAILED)]),
        (ids["ok_topic"], [(0, E.NONE)]),
        (unknown, [(0, E.UNKNOWN_TOPIC_ID)])])

    F = OffsetFetchRequest
    fetched = refused.call(F(groups=[
        F.OffsetFetchRequestGroup(group_id=g, topics=[
            F.OffsetFetchRequestTopics(topic_id=i, partition_indexes=[0]) for i in wanted])
        for g in (denied["group"], denied["ok_group"])], require_stable=False), 10)
    every = refused.call(F(groups=[F.OffsetFetchRequestGroup(
        group_id=denied["ok_group"], topics=None)], require_stable=False), 10)
    assert [(g.group_id, g.error_code, sorted(
        (t.topic_id, [(p.partition_index, p.committed_offset, p.error_code)
                      for p in t.partitions]) for t in g.topics))
            for g in fetched.groups + every.groups] == [
        (denied["group"], E.GROUP_AUTHORIZATION_FAILED, []),
        (denied["ok_group"], E.NONE, sorted([
            (ids["topic"], [(0, -1, E.TOPIC_AUTHORIZATION_FAILED)]),
            (ids["ok_topic"], [(0, 3, E.NONE)]),
            (unknown, [(0, -1, E.UNKNOWN_TOPIC_ID)])])),
        # all topics: only those the principal may describe, by id
        (denied["ok_group"], E.NONE, [(ids["ok_topic"], [(0, 3, E.NONE)])]),
    ]


def test_find_coordinator(acl_target, clients, denied):
    client, refused = clients
    transaction_coordinator_ready(client)
    for key_type, key, error, message in [
            (0, denied["group"], E.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."),
            (1, denied["txn"], E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
             "Transactional Id authorization failed.")]:
        old = refused.call(FindCoordinatorRequest(key=key, key_type=key_type), 3)
        assert (old.error_code, old.error_message, old.node_id, old.host, old.port) == \
            (error, message, -1, "", -1)
        new = refused.call(FindCoordinatorRequest(key_type=key_type,
                                                  coordinator_keys=[key, "acl-ok-key"]), 4)
        assert [(c.key, c.error_code, c.node_id) for c in new.coordinators] == [
            (key, error, -1), ("acl-ok-key", E.NONE, 1)]
        assert new.coordinators[0].error_message in ("", None)


def transaction_coordinator_ready(client: RawClient) -> None:
    """Kafka creates __transaction_state on the first FindCoordinator for a transactional id,
    and loads it a moment later."""
    assert eventually(lambda: client.call(FindCoordinatorRequest(
        key_type=1, coordinator_keys=["acl-ok-key"]), 4).coordinators[0].error_code,
        E.NONE) == E.NONE


def test_create_and_delete_topics(acl_target, clients, denied):
    _, refused = clients
    T = CreateTopicsRequest
    ok = unique("acl-created")
    created = refused.call(T(topics=[
        T.CreatableTopic(name=n, num_partitions=1, replication_factor=1, assignments=[],
                         configs=[]) for n in (denied["nocreate"] + "-x", ok)],
        timeout_ms=30000, validate_only=False), 7)
    got = {t.name: t for t in created.topics}
    refused_topic = got[denied["nocreate"] + "-x"]
    assert (refused_topic.error_code, refused_topic.error_message,
            refused_topic.num_partitions, refused_topic.replication_factor) == \
        (E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", -1, -1)
    assert (got[ok].error_code, got[ok].num_partitions, got[ok].topic_config_error_code) == \
        (E.NONE, 1, E.NONE)
    D_ = DeleteTopicsRequest
    deleted = refused.call(D_(topics=[D_.DeleteTopicState(name=denied["topic"],
                                                          topic_id=ZERO_UUID)],
                              timeout_ms=30000), 6)
    assert [(r.name, r.topic_id, r.error_code, r.error_message) for r in deleted.responses] == [
        (denied["topic"], ZERO_UUID, E.TOPIC_AUTHORIZATION_FAILED,
         "Topic authorization failed.")]


def test_describe_configs(acl_target, clients, denied):
    _, refused = clients
    R = DescribeConfigsRequest.DescribeConfigsResource
    answer = refused.call(DescribeConfigsRequest(resources=[
        R(resource_type=CONFIG_TOPIC, resource_name=denied["topic"], configuration_keys=None),
        R(resource_type=CONFIG_TOPIC, resource_name=denied["ok_topic"],
          configuration_keys=["cleanup.policy"]),
        R(resource_type=CONFIG_BROKER, resource_name="1", configuration_keys=None),
    ], include_synonyms=False, include_documentation=False), 4)
    assert sorted((r.resource_type, r.resource_name, r.error_code, r.error_message,
                   [c.name for c in r.configs]) for r in answer.results) == sorted([
        (CONFIG_TOPIC, denied["topic"], E.TOPIC_AUTHORIZATION_FAILED,
         "Topic authorization failed.", []),
        (CONFIG_TOPIC, denied["ok_topic"], E.NONE, "", ["cleanup.policy"]),
        (CONFIG_BROKER, "1", E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.",
         []),
    ])


def test_transactions(acl_target, clients, denied):
    _, refused = clients
    init = refused.call(InitProducerIdRequest(transactional_id=denied["txn"],
                                              transaction_timeout_ms=60000, producer_id=-1,
                                              producer_epoch=-1), 5)
    assert (init.error_code, init.producer_id, init.producer_epoch) == \
        (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)
    A = AddPartitionsToTxnRequest
    T = A.AddPartitionsToTxnTopic
    added = refused.call(A(v3_and_below_transactional_id=denied["txn"],
                           v3_and_below_producer_id=1000, v3_and_below_producer_epoch=0,
                           v3_and_below_topics=[T(name=denied["ok_topic"], partitions=[0])]), 3)
    assert [(t.name, [(p.partition_index, p.partition_error_code)
                      for p in t.results_by_partition])
            for t in added.results_by_topic_v3_and_below] == [
        (denied["ok_topic"], [(0, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)])]
    added = refused.call(A(v3_and_below_transactional_id=unique("acl-ok-txn"),
                           v3_and_below_producer_id=1000, v3_and_below_producer_epoch=0,
                           v3_and_below_topics=[T(name=n, partitions=[0])
                                                for n in (denied["topic"], denied["ok_topic"])]),
                         3)
    assert sorted((t.name, [(p.partition_index, p.partition_error_code)
                            for p in t.results_by_partition])
                  for t in added.results_by_topic_v3_and_below) == sorted([
        (denied["topic"], [(0, E.TOPIC_AUTHORIZATION_FAILED)]),
        (denied["ok_topic"], [(0, E.OPERATION_NOT_ATTEMPTED)])])
    # a transactional Produce needs WRITE on the transactional id
    batch = build_batch([SimpleRecord(key=None, value=b"v")], producer_id=1000,
                        producer_epoch=0, base_sequence=0, is_transactional=True)
    P = ProduceRequest
    produced = refused.call(P(transactional_id=denied["txn"], acks=-1, timeout_ms=10000,
                              topic_data=[P.TopicProduceData(name=denied["ok_topic"],
                                                             partition_data=[
                                  P.PartitionProduceData(index=0, records=batch)])]), 9)
    assert [(t.name, [(p.index, p.error_code) for p in t.partition_responses])
            for t in produced.responses] == [
        (denied["ok_topic"], [(0, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)])]


def test_acl_apis_need_the_cluster(acl_target, clients, denied):
    """CreateAcls and DeleteAcls need ALTER on the cluster, DescribeAcls DESCRIBE: refused as a
    whole (the message names the request, which differs by broker)."""
    _, refused = clients
    created = refused.call(C(creations=[creation(R_TOPIC, "x", P_LITERAL, ANONYMOUS, "*", READ,
                                                 ALLOW)]), 3)
    assert [r.error_code for r in created.results] == [E.CLUSTER_AUTHORIZATION_FAILED]
    assert created.results[0].error_message.endswith("needs ALTER permission.")
    described = refused.call(DescribeAclsRequest(
        resource_type_filter=R_ANY, resource_name_filter=None, pattern_type_filter=P_ANY,
        principal_filter=None, host_filter=None, operation=ANY_OP, permission_type=1), 3)
    assert (described.error_code, described.resources) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    assert described.error_message.endswith("needs DESCRIBE permission.")
    deleted = refused.call(D(filters=[D.DeleteAclsFilter(
        resource_type_filter=R_ANY, resource_name_filter=None, pattern_type_filter=P_ANY,
        principal_filter=None, host_filter=None, operation=ANY_OP, permission_type=1)]), 3)
    assert [(r.error_code, r.matching_acls) for r in deleted.filter_results] == [
        (E.CLUSTER_AUTHORIZATION_FAILED, [])]
    assert deleted.filter_results[0].error_message.endswith("needs ALTER permission.")


def test_cluster_and_topic_descriptions(acl_target, clients, denied):
    client, refused = clients
    all_cluster_ops = sum(1 << op for op in (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION,
                                             DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE))
    for c, expected in ((refused, 0), (client, all_cluster_ops)):
        answer = c.call(DescribeClusterRequest(include_cluster_authorized_operations=True,
                                               endpoint_type=1), 1)
        assert (answer.error_code, answer.cluster_authorized_operations) == (E.NONE, expected)
    T = DescribeTopicPartitionsRequest
    answer = refused.call(T(topics=[T.TopicRequest(name=n) for n in (denied["topic"],
                                                                      denied["ok_topic"])],
                            response_partition_limit=100, cursor=None), 0)
    assert sorted((t.name, t.error_code, t.topic_id == ZERO_UUID, len(t.partitions))
                  for t in answer.topics) == sorted([
        (denied["topic"], E.TOPIC_AUTHORIZATION_FAILED, True, 0),
        (denied["ok_topic"], E.NONE, False, 1)])
    every = refused.call(T(topics=[], response_partition_limit=2000, cursor=None), 0)
    listed = {t.name for t in every.topics}
    assert denied["ok_topic"] in listed and denied["topic"] not in listed


def test_topic_admin_apis(acl_target, clients, denied):
    _, refused = clients
    both = (denied["topic"], denied["ok_topic"])
    R = DeleteRecordsRequest
    deleted = refused.call(R(topics=[R.DeleteRecordsTopic(name=n, partitions=[
        R.DeleteRecordsPartition(partition_index=0, offset=0)]) for n in both],
        timeout_ms=10000), 2)
    assert sorted((t.name, [(p.partition_index, p.low_watermark, p.error_code)
                            for p in t.partitions]) for t in deleted.topics) == sorted([
        (denied["topic"], [(0, -1, E.TOPIC_AUTHORIZATION_FAILED)]),
        (denied["ok_topic"], [(0, 0, E.NONE)])])
    P = CreatePartitionsRequest
    grown = refused.call(P(topics=[P.CreatePartitionsTopic(name=n, count=2, assignments=None)
                                   for n in both], timeout_ms=10000, validate_only=True), 3)
    assert sorted((r.name, r.error_code, r.error_message) for r in grown.results) == sorted([
        (denied["topic"], E.TOPIC_AUTHORIZATION_FAILED, None), (denied["ok_topic"], E.NONE, None)])
    D_ = DescribeProducersRequest
    producers = refused.call(D_(topics=[D_.TopicRequest(name=n, partition_indexes=[0])
                                        for n in both]), 0)
    assert sorted((t.name, [(p.partition_index, p.error_code, p.error_message)
                            for p in t.partitions]) for t in producers.topics) == sorted([
        (denied["topic"], [(0, E.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")]),
        (denied["ok_topic"], [(0, E.NONE, None)])])
    O = OffsetForLeaderEpochRequest
    epochs = refused.call(O(replica_id=-1, topics=[O.OffsetForLeaderTopic(topic=n, partitions=[
        O.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])
        for n in both]), 4)
    assert sorted((t.topic, [(p.partition, p.error_code, p.leader_epoch, p.end_offset)
                             for p in t.partitions]) for t in epochs.topics) == sorted([
        (denied["topic"], [(0, E.TOPIC_AUTHORIZATION_FAILED, -1, -1)]),
        (denied["ok_topic"], [(0, E.NONE, 0, 0)])])
    I = IncrementalAlterConfigsRequest
    altered = refused.call(I(resources=[I.AlterConfigsResource(
        resource_type=CONFIG_TOPIC, resource_name=n, configs=[I.AlterableConfig(
            name="retention.ms", config_operation=0, value="100000")]) for n in both] + [
        I.AlterConfigsResource(resource_type=CONFIG_BROKER, resource_name="1", configs=[])],
        validate_only=True), 1)
    assert sorted((r.resource_type, r.resource_name, r.error_code, r.error_message)
                  for r in altered.responses) == sorted([
        (CONFIG_TOPIC, denied["topic"], E.TOPIC_AUTHORIZATION_FAILED,
         "Topic authorization failed."),
        (CONFIG_TOPIC, denied["ok_topic"], E.NONE, None),
        (CONFIG_BROKER, "1", E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")])
    logs = refused.call(DescribeLogDirsRequest(topics=None), 4)
    assert (logs.error_code, logs.results) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    W = WriteTxnMarkersRequest
    markers = refused.call(W(markers=[W.WritableTxnMarker(
        producer_id=1, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[W.WritableTxnMarkerTopic(name=n, partition_indexes=[0]) for n in both])]), 1)
    assert [(m.producer_id, sorted((t.name, [(p.partition_index, p.error_code)
                                             for p in t.partitions]) for t in m.topics))
            for m in markers.markers] == [(1, sorted(
                (n, [(0, E.CLUSTER_AUTHORIZATION_FAILED)]) for n in both))]


def test_more_group_apis(acl_target, clients, denied):
    _, refused = clients
    group = denied["group"]
    beat = refused.call(HeartbeatRequest(group_id=group, generation_id=1, member_id="m",
                                         group_instance_id=None), 4)
    assert beat.error_code == E.GROUP_AUTHORIZATION_FAILED
    S = SyncGroupRequest
    synced = refused.call(S(group_id=group, generation_id=1, member_id="m",
                            group_instance_id=None, protocol_type="consumer",
                            protocol_name="range", assignments=[]), 5)
    assert (synced.error_code, synced.assignment) == (E.GROUP_AUTHORIZATION_FAILED, b"")
    L = LeaveGroupRequest
    left = refused.call(L(group_id=group, members=[L.MemberIdentity(
        member_id="m", group_instance_id=None, reason=None)]), 5)
    assert (left.error_code, left.members) == (E.GROUP_AUTHORIZATION_FAILED, [])
    O = OffsetDeleteRequest
    for group_id, error in ((group, E.GROUP_AUTHORIZATION_FAILED), (denied["ok_group"], None)):
        answer = refused.call(O(group_id=group_id, topics=[O.OffsetDeleteRequestTopic(
            name=denied["topic"], partitions=[O.OffsetDeleteRequestPartition(
                partition_index=0)])]), 0)
        if error is not None:
            assert (answer.error_code, answer.topics) == (error, [])
        else:
            assert answer.error_code in (E.NONE, E.GROUP_ID_NOT_FOUND)
            if answer.error_code == E.NONE:
                assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                        for t in answer.topics] == [
                    (denied["topic"], [(0, E.TOPIC_AUTHORIZATION_FAILED)])]
    described = refused.call(ConsumerGroupDescribeRequest(
        group_ids=[group], include_authorized_operations=True), 0)
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        (group, E.GROUP_AUTHORIZATION_FAILED)]


def test_more_transaction_apis(acl_target, clients, denied):
    _, refused = clients
    txn, group = denied["txn"], denied["group"]
    added = refused.call(AddOffsetsToTxnRequest(transactional_id=txn, producer_id=1000,
                                                producer_epoch=0, group_id="g"), 3)
    assert added.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    added = refused.call(AddOffsetsToTxnRequest(transactional_id=unique("acl-ok-txn"),
                                                producer_id=1000, producer_epoch=0,
                                                group_id=group), 3)
    assert added.error_code == E.GROUP_AUTHORIZATION_FAILED
    ended = refused.call(EndTxnRequest(transactional_id=txn, producer_id=1000, producer_epoch=0,
                                       committed=True), 4)
    assert ended.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    T = TxnOffsetCommitRequest
    for txn_id, group_id, error in ((txn, "g", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                                    (unique("acl-ok-txn"), group, E.GROUP_AUTHORIZATION_FAILED)):
        committed = refused.call(T(transactional_id=txn_id, group_id=group_id,
                                   producer_id=1000, producer_epoch=0, generation_id=-1,
                                   member_id="", group_instance_id=None, topics=[
                                       T.TxnOffsetCommitRequestTopic(
                                           name=denied["ok_topic"], partitions=[
                                               T.TxnOffsetCommitRequestPartition(
                                                   partition_index=0, committed_offset=0,
                                                   committed_leader_epoch=-1,
                                                   committed_metadata="")])]), 3)
        assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
                for t in committed.topics] == [(denied["ok_topic"], [(0, error)])]
    described = refused.call(DescribeTransactionsRequest(transactional_ids=[txn]), 0)
    assert [(s.transactional_id, s.error_code, s.transaction_state, s.producer_id, s.topics)
            for s in described.transaction_states] == [
        (txn, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "", 0, [])]
    # an idempotent producer may write: no ACL says otherwise about some topic (Kafka answers
    # COORDINATOR_LOAD_IN_PROGRESS until its __transaction_state exists)
    assert eventually(lambda: refused.call(InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
        producer_epoch=-1), 5).error_code, E.NONE) == E.NONE


def test_more_describe_filters(acl_target, clients, denied):
    client, refused = clients
    M = MetadataRequest
    ids = {t.name: t.topic_id for t in client.call(M(topics=[
        M.MetadataRequestTopic(name=n) for n in (denied["topic"], denied["ok_topic"])],
        allow_auto_topic_creation=False), 12).topics}
    # asked by id, a refused topic comes back with the id and no name
    by_id = refused.call(M(topics=[M.MetadataRequestTopic(name=None, topic_id=ids[n])
                                   for n in (denied["topic"], denied["ok_topic"])],
                           allow_auto_topic_creation=False), 12)
    assert sorted(((t.name or ""), t.topic_id == ids[denied["topic"]], t.error_code)
                  for t in by_id.topics) == sorted([
        ("", True, E.TOPIC_AUTHORIZATION_FAILED), (denied["ok_topic"], False, E.NONE)])
    # OffsetFetch before v8: one group, the error at the top
    F = OffsetFetchRequest
    old = refused.call(F(group_id=denied["group"], topics=[
        F.OffsetFetchRequestTopic(name=denied["ok_topic"], partition_indexes=[0])],
        require_stable=False), 7)
    assert (old.error_code, old.topics) == (E.GROUP_AUTHORIZATION_FAILED, [])
    old = refused.call(F(group_id=denied["ok_group"], topics=[
        F.OffsetFetchRequestTopic(name=n, partition_indexes=[0])
        for n in (denied["topic"], denied["ok_topic"])], require_stable=False), 7)
    assert old.error_code == E.NONE
    assert sorted((t.name, [(p.partition_index, p.committed_offset, p.error_code)
                            for p in t.partitions]) for t in old.topics) == sorted([
        (denied["topic"], [(0, -1, E.TOPIC_AUTHORIZATION_FAILED)]),
        (denied["ok_topic"], [(0, -1, E.NONE)])])
    # a consumer-protocol member may not subscribe to a topic it may not describe
    H = ConsumerGroupHeartbeatRequest
    for group, topics_, error in (
            (denied["group"], [denied["ok_topic"]], E.GROUP_AUTHORIZATION_FAILED),
            (denied["ok_group"] + "-cg", [denied["ok_topic"], denied["topic"]],
             E.TOPIC_AUTHORIZATION_FAILED)):
        beat = refused.call(H(group_id=group, member_id=unique("member"), member_epoch=0,
                              instance_id=None, rack_id=None, rebalance_timeout_ms=30000,
                              subscribed_topic_names=topics_, subscribed_topic_regex=None,
                              server_assignor=None, topic_partitions=[]), 1)
        assert (beat.error_code, beat.member_id, beat.assignment) == (error, None, None)
    # ListTransactions leaves out the transactional ids the principal may not describe
    transaction_coordinator_ready(client)
    assert eventually(lambda: client.call(InitProducerIdRequest(
        transactional_id=denied["txn"], transaction_timeout_ms=60000, producer_id=-1,
        producer_epoch=-1), 5).error_code, E.NONE) == E.NONE

    def listed(c):
        answer = c.call(ListTransactionsRequest(state_filters=[], producer_id_filters=[],
                                                duration_filter=-1,
                                                transactional_id_pattern=None), 2)
        assert answer.error_code == E.NONE
        return {s.transactional_id for s in answer.transaction_states}
    assert denied["txn"] in listed(client) and denied["txn"] not in listed(refused)


def test_consumer_group_describe_hides_groups_with_refused_topics(acl_target, clients, denied):
    """A consumer group whose members are assigned a topic the principal may not describe is
    answered TOPIC_AUTHORIZATION_FAILED, without its members."""
    client, refused = clients
    group = denied["ok_group"] + "-cgd"
    H = ConsumerGroupHeartbeatRequest
    member = unique("member")
    beat = client.call(H(group_id=group, member_id=member, member_epoch=0, instance_id=None,
                         rack_id=None, rebalance_timeout_ms=30000,
                         subscribed_topic_names=[denied["topic"]], subscribed_topic_regex=None,
                         server_assignor=None, topic_partitions=[]), 1)
    assert beat.error_code == E.NONE
    assert eventually(lambda: [len(m.assignment.topic_partitions) + len(
        m.target_assignment.topic_partitions) > 0 for g in client.call(
            ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
            0).groups for m in g.members], [True]) == [True]
    described = refused.call(ConsumerGroupDescribeRequest(
        group_ids=[group], include_authorized_operations=True), 0)
    assert [(g.group_id, g.error_code, g.error_message, g.members)
            for g in described.groups] == [
        (group, E.TOPIC_AUTHORIZATION_FAILED,
         "The group has described topic(s) that the client is not authorized to describe.", [])]
    seen = client.call(ConsumerGroupDescribeRequest(group_ids=[group],
                                                    include_authorized_operations=True), 0)
    assert [(g.error_code, len(g.members), g.authorized_operations) for g in seen.groups] == [
        (E.NONE, 1, sum(1 << op for op in (READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS,
                                           ALTER_CONFIGS)))]
    client.call(H(group_id=group, member_id=member, member_epoch=-1, instance_id=None,
                  rack_id=None, rebalance_timeout_ms=-1, subscribed_topic_names=None,
                  subscribed_topic_regex=None, server_assignor=None, topic_partitions=None), 1)


def test_regex_subscription_leaves_out_refused_topics(acl_target, clients, denied):
    """A member's regular expression resolves only to topics it may describe."""
    client, refused = clients
    M = MetadataRequest
    ids = {t.name: t.topic_id for t in client.call(M(topics=[
        M.MetadataRequestTopic(name=n) for n in (denied["topic"], denied["ok_topic"])],
        allow_auto_topic_creation=False), 12).topics}
    group = denied["ok_group"] + "-regex"
    regex = f"({re.escape(denied['topic'])}|{re.escape(denied['ok_topic'])})"
    H = ConsumerGroupHeartbeatRequest
    member = unique("member")
    beat = refused.call(H(group_id=group, member_id=member, member_epoch=0, instance_id=None,
                          rack_id=None, rebalance_timeout_ms=30000, subscribed_topic_names=[],
                          subscribed_topic_regex=regex, server_assignor=None,
                          topic_partitions=[]), 1)
    assert beat.error_code == E.NONE
    state = {"epoch": beat.member_epoch, "assigned": None}

    def note(answer):
        """An answer carries the assignment only when it changed: keep the latest."""
        assert answer.error_code == E.NONE, answer
        state["epoch"] = answer.member_epoch
        if answer.assignment is not None:
            state["assigned"] = sorted(t.topic_id for t in answer.assignment.topic_partitions)

    def assigned():
        note(refused.call(H(group_id=group, member_id=member, member_epoch=state["epoch"],
                            instance_id=None, rack_id=None, rebalance_timeout_ms=-1,
                            subscribed_topic_names=None, subscribed_topic_regex=None,
                            server_assignor=None, topic_partitions=None), 1))
        return state["assigned"]
    note(beat)
    assert eventually(assigned, [ids[denied["ok_topic"]]], timeout=20) == \
        [ids[denied["ok_topic"]]]
    refused.call(H(group_id=group, member_id=member, member_epoch=-1, instance_id=None,
                   rack_id=None, rebalance_timeout_ms=-1, subscribed_topic_names=None,
                   subscribed_topic_regex=None, server_assignor=None, topic_partitions=None), 1)


def test_share_group_apis(acl_target, clients, denied):
    """Share groups (KIP-932): READ on the group for ShareGroupHeartbeat, ShareFetch and
    ShareAcknowledge, DESCRIBE on every subscribed topic, READ on each fetched topic, DESCRIBE on
    the group for ShareGroupDescribe and DescribeShareGroupOffsets."""
    from protocol.messages import (DescribeShareGroupOffsetsRequest, ShareAcknowledgeRequest,
                                   ShareFetchRequest, ShareGroupDescribeRequest,
                                   ShareGroupHeartbeatRequest)
    admin, refused = clients
    group, ok_group, topic = denied["group"], denied["ok_group"], denied["topic"]
    topic_id = admin.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        name=topic)], allow_auto_topic_creation=False), 12).topics[0].topic_id
    H = ShareGroupHeartbeatRequest
    beat = refused.call(H(group_id=group, member_id="m-" + unique("x")[-8:], member_epoch=0,
                          rack_id=None, subscribed_topic_names=[denied["ok_topic"]]), 1)
    assert beat.error_code == E.GROUP_AUTHORIZATION_FAILED
    beat = refused.call(H(group_id=ok_group, member_id="m-" + unique("x")[-8:], member_epoch=0,
                          rack_id=None, subscribed_topic_names=[topic]), 1)
    assert beat.error_code == E.TOPIC_AUTHORIZATION_FAILED
    described = refused.call(ShareGroupDescribeRequest(group_ids=[group],
                                                       include_authorized_operations=False), 1)
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        (group, E.GROUP_AUTHORIZATION_FAILED)]
    F = ShareFetchRequest
    fetch = dict(member_id="m1", share_session_epoch=0, max_wait_ms=0, min_bytes=1,
                 max_bytes=1024, max_records=10, batch_size=10, forgotten_topics_data=[],
                 topics=[F.FetchTopic(topic_id=topic_id, partitions=[
                     F.FetchPartition(partition_index=0, acknowledgement_batches=[])])])
    answer = refused.call(F(group_id=group, **fetch), 1)
    assert answer.error_code == E.GROUP_AUTHORIZATION_FAILED
    answer = refused.call(F(group_id=ok_group, **fetch), 1)
    assert answer.error_code == E.NONE
    assert [(p.partition_index, p.error_code) for t in answer.responses
            for p in t.partitions] == [(0, E.TOPIC_AUTHORIZATION_FAILED)]
    A = ShareAcknowledgeRequest
    acked = refused.call(A(group_id=group, member_id="m1", share_session_epoch=1,
                           topics=[]), 1)
    assert acked.error_code == E.GROUP_AUTHORIZATION_FAILED
    D = DescribeShareGroupOffsetsRequest
    offsets = refused.call(D(groups=[D.DescribeShareGroupOffsetsRequestGroup(
        group_id=group, topics=None)]), 1)
    assert [(g.group_id, g.error_code, g.error_message, g.topics) for g in offsets.groups] == [
        (group, E.GROUP_AUTHORIZATION_FAILED, None, [])]


def test_streams_group_apis(acl_target, clients, denied):
    """Streams groups (KIP-1071): READ on the group for StreamsGroupHeartbeat, DESCRIBE on every
    topic the topology names, Kafka's internal topics refused in a topology, DESCRIBE on the
    group for StreamsGroupDescribe."""
    from protocol.messages import StreamsGroupDescribeRequest
    from .test_streams_group_conformance import StreamsMember, word_count
    _admin, refused = clients
    group, ok_group = denied["group"], denied["ok_group"]
    beat = StreamsMember(refused, group, word_count(group, denied["ok_topic"])).heartbeat()
    assert (beat.error_code, beat.error_message) == (E.GROUP_AUTHORIZATION_FAILED, None)
    beat = StreamsMember(refused, ok_group, word_count(ok_group, denied["topic"])).heartbeat()
    assert (beat.error_code, beat.error_message) == (E.TOPIC_AUTHORIZATION_FAILED, None)
    beat = StreamsMember(refused, ok_group, word_count(ok_group, "__consumer_offsets")
                         ).heartbeat()
    assert (beat.error_code, beat.error_message) == (
        E.STREAMS_INVALID_TOPOLOGY, "Use of Kafka internal topics __consumer_offsets in a Kafka "
                                    "Streams topology is prohibited.")
    described = refused.call(StreamsGroupDescribeRequest(
        group_ids=[group], include_authorized_operations=False), 0)
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        (group, E.GROUP_AUTHORIZATION_FAILED)]
    # internal topics it may DESCRIBE but not CREATE (nor CREATE on the cluster): not created,
    # and the MISSING_INTERNAL_TOPICS status says why
    app = unique("acl-streams")
    rows = [(R_TOPIC, app, P_PREFIXED, ANONYMOUS, DENIED_HOST, DESCRIBE, ALLOW),
            (R_TOPIC, app, P_PREFIXED, ANONYMOUS, DENIED_HOST, CREATE, DENY),
            (R_TOPIC, app, P_PREFIXED, ANONYMOUS, "127.0.0.1", ALL, ALLOW)]
    assert create_acls(_admin, *rows) == [(E.NONE, "")] * 3
    assert eventually(lambda: [a for a in describe(_admin)[1] if a in rows], sorted(rows)) == \
        sorted(rows)
    beat = StreamsMember(refused, app, word_count(app, denied["ok_topic"])).heartbeat()
    assert beat.error_code == E.NONE, beat
    [status] = [st for st in beat.status if st.status_code == 3]
    missing, unauthorized = status.status_detail.split("; ")
    internal = {f"{app}-words-repartition", f"{app}-counts-changelog"}
    assert missing.startswith("Internal topics are missing: ")
    assert set(missing[len("Internal topics are missing: "):].split(", ")) == internal
    assert unauthorized.startswith("Unauthorized to CREATE on topics ")
    assert unauthorized.endswith(".")
    assert set(unauthorized[len("Unauthorized to CREATE on topics "):-1].split(", ")) == \
        internal
    listed = _admin.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n)
                                                 for n in sorted(internal)],
                                         allow_auto_topic_creation=False), 12)
    assert [t.error_code for t in listed.topics] == [E.UNKNOWN_TOPIC_OR_PARTITION] * 2


def test_quota_feature_and_quorum_apis_need_the_cluster(acl_target, clients, denied):
    """AlterClientQuotas needs ALTER_CONFIGS on the cluster, DescribeClientQuotas
    DESCRIBE_CONFIGS, UpdateFeatures, UnregisterBroker and the raft voter APIs ALTER: refused
    with the code and message Kafka 4.3.1 gives each."""
    from protocol.messages import (AddRaftVoterRequest, AlterClientQuotasRequest,
                                   DescribeClientQuotasRequest, RemoveRaftVoterRequest,
                                   UnregisterBrokerRequest, UpdateFeaturesRequest)
    _, refused = clients
    Q = AlterClientQuotasRequest
    answers = {}
    altered = refused.call(Q(entries=[Q.EntryData(
        entity=[Q.EntityData(entity_type="client-id", entity_name="acl-quota")],
        ops=[Q.OpData(key="producer_byte_rate", value=1000.0, remove=False)])],
        validate_only=False), 1)
    answers["alter"] = [(e.error_code, e.error_message, [(x.entity_type, x.entity_name)
                                                          for x in e.entity])
                        for e in altered.entries]
    described = refused.call(DescribeClientQuotasRequest(components=[], strict=False), 1)
    answers["describe"] = (described.error_code, described.error_message, described.entries)
    F = UpdateFeaturesRequest
    updated = refused.call(F(timeout_ms=1000, validate_only=True, feature_updates=[
        F.FeatureUpdateKey(feature="group.version", max_version_level=1, upgrade_type=1)]), 1)
    answers["features"] = (updated.error_code, updated.error_message,
                           [(r.feature, r.error_code, r.error_message) for r in updated.results])
    unregistered = refused.call(UnregisterBrokerRequest(broker_id=5), 0)
    answers["unregister"] = (unregistered.error_code, unregistered.error_message)
    added = refused.call(AddRaftVoterRequest(cluster_id=None, timeout_ms=1000, voter_id=7,
                                             voter_directory_id=uuid.uuid4(), listeners=[],
                                             ack_when_committed=True), 1)
    answers["add voter"] = (added.error_code, added.error_message)
    removed = refused.call(RemoveRaftVoterRequest(cluster_id=None, voter_id=7,
                                                  voter_directory_id=uuid.uuid4()), 0)
    answers["remove voter"] = (removed.error_code, removed.error_message)
    denied_alter = answers["features"][1], answers["unregister"][1]
    assert all(m.endswith("needs ALTER permission.") for m in denied_alter), denied_alter
    assert answers == {
        "alter": [(E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.",
                   [("client-id", "acl-quota")])],
        "describe": (E.CLUSTER_AUTHORIZATION_FAILED, None, None),
        # the message names the request, which differs by broker
        "features": (E.CLUSTER_AUTHORIZATION_FAILED, denied_alter[0], []),
        "unregister": (E.CLUSTER_AUTHORIZATION_FAILED, denied_alter[1]),
        "add voter": (E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
        "remove voter": (E.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    }


def test_share_group_state_apis_need_cluster_action(acl_target, clients, denied):
    """The share coordinator's APIs and FindCoordinator for a SHARE key need CLUSTER_ACTION on
    the cluster: every partition (every key) refused, with Kafka's message."""
    from broker.coordinator.share_state.store import coordinator_key

    from .test_share_state_conformance import (
        coordinator_ready,
        delete,
        find_share_coordinator,
        initialize,
        read,
        summary,
        write,
    )
    client, refused = clients
    tid = client.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        name=denied["ok_topic"])], allow_auto_topic_creation=False), 12).topics[0].topic_id
    group = unique("acl-share-state")
    coordinator_ready(client, coordinator_key(group, tid, 0))
    failed = "Cluster authorization failed."
    assert initialize(refused, group, tid, (0, 0, 0), (1, 0, 0)) == [
        (0, E.CLUSTER_AUTHORIZATION_FAILED, failed), (1, E.CLUSTER_AUTHORIZATION_FAILED, failed)]
    assert write(refused, group, tid, 0, 0, 0, 0) == (E.CLUSTER_AUTHORIZATION_FAILED, failed)
    # refused before the request is looked at: an empty group id too
    assert write(refused, "", tid, 0, 0, 0, 0) == (E.CLUSTER_AUTHORIZATION_FAILED, failed)
    assert read(refused, group, tid, 0) == (E.CLUSTER_AUTHORIZATION_FAILED, failed, 0, 0, [])
    assert summary(refused, group, tid, 0) == \
        (E.CLUSTER_AUTHORIZATION_FAILED, failed, 0, 0, 0, -1)
    assert delete(refused, group, tid, 0) == [(0, E.CLUSTER_AUTHORIZATION_FAILED, failed)]
    assert [(c.error_code, c.error_message, c.node_id) for c in find_share_coordinator(
        refused, coordinator_key(group, tid, 0), "bad")] == \
        [(E.CLUSTER_AUTHORIZATION_FAILED, failed, -1)] * 2
    # the allowed client is served
    assert initialize(client, group, tid, (0, 0, 3)) == [(0, E.NONE, None)]
    assert summary(client, group, tid, 0) == (E.NONE, None, 0, 0, 3, 0)
