"""Authorization through real clients against a broker process with the StandardAuthorizer:
kafka-python, confluent-kafka and aiokafka create, describe and delete ACLs; producers and
consumers in a group work where the ACLs allow them and get Kafka's authorization errors where
they deny them (topic, group, transactional id, cluster); ACLs survive a restart with
--data-dir; super.users and allow.everyone.if.no.acl.found.

Every client here is User:ANONYMOUS (a PLAINTEXT listener), so the tests allow and deny with
ACLs on User:ANONYMOUS and User:*; other principals are covered by test_authorizer_rules.py.
"""
from __future__ import annotations

import asyncio

import pytest

from broker.config import BrokerConfig, ConfigError
from tests.support import BrokerProcess, unique

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANONYMOUS = "User:ANONYMOUS"


def authorizer_broker(data_dir=None, **settings) -> BrokerProcess:
    overrides = {"authorizer.class.name": STANDARD_AUTHORIZER,
                 "group.initial.rebalance.delay.ms": 0, **settings}
    proc = BrokerProcess(data_dir=data_dir, overrides=overrides)
    proc.start()
    return proc


@pytest.fixture(scope="module")
def open_broker():
    """Everything a resource has no ACL for is allowed (allow.everyone.if.no.acl.found)."""
    proc = authorizer_broker(**{"allow.everyone.if.no.acl.found": "true"})
    yield proc
    proc.stop()


# ---------------------------------------------------------------- kafka-python's names

def kp_acl(name, op, perm, rtype="TOPIC", pattern="LITERAL", principal=ANONYMOUS, host="*"):
    from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                             ResourcePattern, ResourceType)
    return ACL(principal=principal, host=host, operation=ACLOperation[op],
               permission_type=ACLPermissionType[perm],
               resource_pattern=ResourcePattern(ResourceType[rtype], name,
                                                ACLResourcePatternType[pattern]))


def kp_filter(name=None, rtype="ANY", pattern="ANY", principal=None, op="ANY", perm="ANY"):
    from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType,
                             ACLResourcePatternType, ResourcePatternFilter, ResourceType)
    return ACLFilter(principal=principal, host=None, operation=ACLOperation[op],
                     permission_type=ACLPermissionType[perm],
                     resource_pattern=ResourcePatternFilter(ResourceType[rtype], name,
                                                            ACLResourcePatternType[pattern]))


def kp_rows(acls) -> list:
    return sorted((a.resource_pattern.resource_type.name, a.resource_pattern.resource_name,
                   a.resource_pattern.pattern_type.name, a.principal, a.host, a.operation.name,
                   a.permission_type.name) for a in acls)


def kp_admin(proc):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=proc.bootstrap, request_timeout_ms=10000)


def kp_deny(proc, *resources):
    """DENY ALL for User:ANONYMOUS on each (type, name, pattern), through kafka-python."""
    admin = kp_admin(proc)
    result = admin.create_acls([kp_acl(name, "ALL", "DENY", rtype, pattern)
                                for rtype, name, pattern in resources])
    admin.close()
    assert result["failed"] == []


def kp_delete_all(proc):
    admin = kp_admin(proc)
    admin.delete_acls([kp_filter()])
    admin.close()


# ---------------------------------------------------------------- ACL APIs

def test_kafka_python_admin_acls(open_broker):
    t = unique("kp-acl")
    admin = kp_admin(open_broker)
    acls = [kp_acl(t, "READ", "ALLOW", principal="User:alice"),
            kp_acl(t + "-", "WRITE", "DENY", pattern="PREFIXED", principal="User:*",
                   host="10.1.1.1"),
            kp_acl(t, "DESCRIBE", "ALLOW", rtype="GROUP", principal="User:bob")]
    result = admin.create_acls(acls)
    assert kp_rows(result["succeeded"]) == kp_rows(acls) and result["failed"] == []
    described, error = admin.describe_acls(kp_filter(t))
    assert error.errno == 0 and kp_rows(described) == kp_rows([acls[0], acls[2]])
    described, _ = admin.describe_acls(kp_filter(t + "-x", rtype="TOPIC", pattern="MATCH"))
    assert kp_rows(described) == kp_rows([acls[1]])
    described, _ = admin.describe_acls(kp_filter(rtype="TOPIC", principal="User:alice"))
    assert kp_rows(described) == kp_rows([acls[0]])
    deleted = admin.delete_acls([kp_filter(rtype="TOPIC", pattern="ANY")])
    [(_, matching, error)] = deleted
    assert error.errno == 0 and kp_rows(matching) == kp_rows(acls[:2])
    described, _ = admin.describe_acls(kp_filter())
    assert kp_rows(described) == kp_rows([acls[2]])
    # an ACL Kafka refuses: the CLUSTER resource has one name
    result = admin.create_acls([kp_acl("my-cluster", "ALTER", "ALLOW", rtype="CLUSTER")])
    assert result["succeeded"] == [] and len(result["failed"]) == 1
    admin.delete_acls([kp_filter()])
    assert admin.describe_acls(kp_filter())[0] == []
    admin.close()


def test_confluent_admin_acls(open_broker):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                       AclPermissionType, AdminClient, ResourcePatternType,
                                       ResourceType)
    t = unique("ck-acl")
    admin = AdminClient({"bootstrap.servers": open_broker.bootstrap})
    bindings = [
        AclBinding(ResourceType.TOPIC, t, ResourcePatternType.LITERAL, "User:alice", "*",
                   AclOperation.READ, AclPermissionType.ALLOW),
        AclBinding(ResourceType.TOPIC, t[:6], ResourcePatternType.PREFIXED, "User:*", "*",
                   AclOperation.WRITE, AclPermissionType.DENY),
        AclBinding(ResourceType.TRANSACTIONAL_ID, t, ResourcePatternType.LITERAL, ANONYMOUS,
                   "127.0.0.1", AclOperation.WRITE, AclPermissionType.ALLOW),
    ]
    for future in admin.create_acls(bindings, request_timeout=10).values():
        assert future.result(10) is None

    def rows(found):
        return sorted((b.restype.name, b.name, b.resource_pattern_type.name, b.principal,
                       b.host, b.operation.name, b.permission_type.name) for b in found)

    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert rows(admin.describe_acls(everything).result(10)) == rows(bindings)
    match = AclBindingFilter(ResourceType.TOPIC, t, ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert rows(admin.describe_acls(match).result(10)) == rows(bindings[:2])
    only_deny = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                 AclOperation.ANY, AclPermissionType.DENY)
    [deleted] = admin.delete_acls([only_deny]).values()
    assert rows(deleted.result(10)) == rows(bindings[1:2])
    assert rows(admin.describe_acls(everything).result(10)) == rows([bindings[0], bindings[2]])
    invalid = AclBinding(ResourceType.TOPIC, t, ResourcePatternType.LITERAL, "alice", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    [refused] = admin.create_acls([invalid], request_timeout=10).values()
    with pytest.raises(KafkaException) as failure:
        refused.result(10)
    assert failure.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert "Could not parse principal" in failure.value.args[0].str()
    [deleted] = admin.delete_acls([everything]).values()
    assert len(deleted.result(10)) == 2
    assert admin.describe_acls(everything).result(10) == []


def test_aiokafka_acl_requests(open_broker):
    """aiokafka has no ACL methods on its admin client; it sends its own CreateAcls,
    DescribeAcls and DeleteAcls requests (at the versions it negotiates) through it."""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
    t = unique("aio-acl")
    acls = [(2, t, 3, "User:alice", "*", 3, 3), (3, t, 4, "User:*", "*", 8, 2)]
    everything = (1, None, 1, None, None, 1, 1)

    async def scenario():
        admin = AIOKafkaAdminClient(bootstrap_servers=open_broker.bootstrap)
        await admin.start()
        try:
            created = [await admin._send_request(CreateAclsRequest(*row)) for row in acls]
            described = await admin._send_request(DescribeAclsRequest(1, t, 1, None, None, 1, 1))
            deleted = await admin._send_request(DeleteAclsRequest(*everything))
            after = await admin._send_request(DescribeAclsRequest(*everything))
            return created, described, deleted, after
        finally:
            await admin.close()

    created, described, deleted, after = asyncio.run(scenario())
    assert [r.creation_responses[0][0] for r in created] == [0, 0]
    assert described.error_code == 0
    assert sorted((r[0], r[1], r[2], tuple(tuple(a) for a in r[3])) for r in described.resources) \
        == [(2, t, 3, (("User:alice", "*", 3, 3),)), (3, t, 4, (("User:*", "*", 8, 2),))]
    [(error, _message, matching)] = deleted.filter_responses
    assert error == 0 and len(matching) == 2
    assert after.resources == []


# ---------------------------------------------------------------- producers and consumers

def produce_consume_kafka_python(proc, topic, group):
    from kafka import KafkaConsumer, KafkaProducer
    producer = KafkaProducer(bootstrap_servers=proc.bootstrap)
    producer.send(topic, b"v1").get(10)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=proc.bootstrap, group_id=group,
                             auto_offset_reset="earliest", consumer_timeout_ms=8000)
    values = [m.value for m in consumer][:1]
    consumer.commit()
    consumer.close()
    return values


def test_kafka_python_group_allowed_and_denied(open_broker):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
    ok, secret = unique("kp-ok"), unique("kp-secret")
    ok_group, secret_group = unique("kp-group"), unique("kp-secret-group")
    kp_deny(open_broker, ("TOPIC", secret, "LITERAL"), ("GROUP", secret_group, "LITERAL"))
    try:
        assert produce_consume_kafka_python(open_broker, ok, ok_group) == [b"v1"]
        producer = KafkaProducer(bootstrap_servers=open_broker.bootstrap, max_block_ms=5000)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(secret, b"no").get(10)
        producer.close()
        consumer = KafkaConsumer(ok, bootstrap_servers=open_broker.bootstrap,
                                 group_id=secret_group, auto_offset_reset="earliest")
        with pytest.raises(GroupAuthorizationFailedError):
            consumer.poll(timeout_ms=5000)
        consumer.close()
    finally:
        kp_delete_all(open_broker)


def test_confluent_group_allowed_and_denied(open_broker):
    from confluent_kafka import Consumer, KafkaError, Producer
    ok, secret = unique("ck-ok"), unique("ck-secret")
    ok_group, secret_group = unique("ck-group"), unique("ck-secret-group")
    kp_deny(open_broker, ("TOPIC", secret, "LITERAL"), ("GROUP", secret_group, "PREFIXED"))
    try:
        reports = []
        producer = Producer({"bootstrap.servers": open_broker.bootstrap,
                             "message.timeout.ms": 10000})
        producer.produce(ok, b"v1", on_delivery=lambda err, msg: reports.append(err))
        producer.produce(secret, b"no", on_delivery=lambda err, msg: reports.append(err))
        producer.flush(15)
        codes = sorted((e.code() if e else 0) for e in reports)
        assert codes == sorted([0, KafkaError.TOPIC_AUTHORIZATION_FAILED])

        consumer = Consumer({"bootstrap.servers": open_broker.bootstrap, "group.id": ok_group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([ok])
        got = None
        for _ in range(30):
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                got = msg.value()
                break
        assert got == b"v1"
        consumer.commit(asynchronous=False)
        consumer.close()

        denied = Consumer({"bootstrap.servers": open_broker.bootstrap,
                           "group.id": secret_group + "-x", "auto.offset.reset": "earliest"})
        denied.subscribe([ok])
        errors = []
        for _ in range(15):
            msg = denied.poll(1)
            if msg is not None and msg.error() is not None:
                errors.append(msg.error().code())
                break
        denied.close()
        assert errors == [KafkaError.GROUP_AUTHORIZATION_FAILED]
    finally:
        kp_delete_all(open_broker)


def test_aiokafka_group_allowed_and_denied(open_broker):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
    ok, secret = unique("aio-ok"), unique("aio-secret")
    ok_group, secret_group = unique("aio-group"), unique("aio-secret-group")
    kp_deny(open_broker, ("TOPIC", secret, "LITERAL"), ("GROUP", secret_group, "LITERAL"))

    async def scenario():
        producer = AIOKafkaProducer(bootstrap_servers=open_broker.bootstrap,
                                    request_timeout_ms=5000)
        await producer.start()
        try:
            await producer.send_and_wait(ok, b"v1")
            with pytest.raises(TopicAuthorizationFailedError):
                await producer.send_and_wait(secret, b"no")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(ok, bootstrap_servers=open_broker.bootstrap,
                                    group_id=ok_group, auto_offset_reset="earliest")
        await consumer.start()
        try:
            got = (await asyncio.wait_for(consumer.getone(), 15)).value
            await consumer.commit()
        finally:
            await consumer.stop()
        denied = AIOKafkaConsumer(ok, bootstrap_servers=open_broker.bootstrap,
                                  group_id=secret_group, auto_offset_reset="earliest")
        try:
            with pytest.raises(GroupAuthorizationFailedError):  # it waits for its assignment
                await asyncio.wait_for(denied.start(), 15)
        finally:
            await denied.stop()
        return got

    try:
        assert asyncio.run(scenario()) == b"v1"
    finally:
        kp_delete_all(open_broker)


def test_transactional_id_allowed_and_denied(open_broker):
    from confluent_kafka import KafkaError, KafkaException, Producer
    from kafka import KafkaProducer
    from kafka.errors import TransactionalIdAuthorizationFailedError
    topic, secret_txn = unique("txn-topic"), unique("secret-txn")
    kp_deny(open_broker, ("TRANSACTIONAL_ID", secret_txn, "LITERAL"))
    try:
        allowed = Producer({"bootstrap.servers": open_broker.bootstrap,
                            "transactional.id": unique("ok-txn")})
        allowed.init_transactions(15)
        allowed.begin_transaction()
        allowed.produce(topic, b"in-txn")
        allowed.commit_transaction(15)

        denied = Producer({"bootstrap.servers": open_broker.bootstrap,
                           "transactional.id": secret_txn})
        with pytest.raises(KafkaException) as failure:
            denied.init_transactions(15)
        assert failure.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

        producer = KafkaProducer(bootstrap_servers=open_broker.bootstrap,
                                 transactional_id=secret_txn)
        with pytest.raises(TransactionalIdAuthorizationFailedError):
            producer.init_transactions()
        producer.close(timeout=2)
    finally:
        kp_delete_all(open_broker)


def test_cluster_denied():
    """An idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic;
    the ACL APIs need ALTER on the cluster. Once the cluster has an ACL, only what an ACL
    allows on it is allowed."""
    from confluent_kafka import KafkaError, KafkaException, Producer
    from kafka.errors import ClusterAuthorizationFailedError
    proc = authorizer_broker(**{"allow.everyone.if.no.acl.found": "true"})
    try:
        admin = kp_admin(proc)
        result = admin.create_acls([
            # no topic is writable, each may be described
            kp_acl("*", "WRITE", "DENY"), kp_acl("*", "DESCRIBE", "ALLOW"),
            kp_acl("kafka-cluster", "IDEMPOTENT_WRITE", "DENY", rtype="CLUSTER"),
            kp_acl("kafka-cluster", "DESCRIBE", "ALLOW", rtype="CLUSTER"),
            kp_acl("kafka-cluster", "CREATE", "ALLOW", rtype="CLUSTER")])
        assert result["failed"] == []
        producer = Producer({"bootstrap.servers": proc.bootstrap, "enable.idempotence": True,
                             "message.timeout.ms": 10000})
        producer.produce("anything", b"v")
        with pytest.raises(KafkaException) as fatal:   # poll raises the fatal error
            for _ in range(20):
                producer.poll(0.5)
        error = fatal.value.args[0]
        assert (error.code(), error.fatal()) == (KafkaError.CLUSTER_AUTHORIZATION_FAILED, True)
        # ALTER is not allowed by any ACL on the cluster now
        refused = admin.create_acls([kp_acl("t", "READ", "ALLOW")])
        assert refused["succeeded"] == []
        assert refused["failed"] == [ClusterAuthorizationFailedError]
        admin.close()
    finally:
        proc.stop()


def test_super_users_and_no_acl_found():
    """Without allow.everyone.if.no.acl.found nothing is allowed but to super.users."""
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError
    strict = authorizer_broker()
    try:
        producer = KafkaProducer(bootstrap_servers=strict.bootstrap, max_block_ms=4000)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(unique("strict"), b"v").get(10)
        producer.close()
        admin = KafkaAdminClient(bootstrap_servers=strict.bootstrap)
        assert admin.list_topics() == []   # every topic is hidden, the internal ones too
        result = admin.create_acls([kp_acl("t", "READ", "ALLOW")])
        assert result["failed"] == [ClusterAuthorizationFailedError]
        admin.close()
    finally:
        strict.stop()
    superuser = authorizer_broker(**{"super.users": f"User:admin;{ANONYMOUS}"})
    try:
        kp_deny(superuser, ("TOPIC", "*", "LITERAL"))   # deny rules do not bind super users
        topic = unique("super")
        assert produce_consume_kafka_python(superuser, topic, unique("g")) == [b"v1"]
    finally:
        superuser.stop()


def test_acls_persist_across_restart(tmp_path):
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError
    settings = {"allow.everyone.if.no.acl.found": "true"}
    proc = authorizer_broker(str(tmp_path), **settings)
    secret = unique("persisted")
    try:
        kp_deny(proc, ("TOPIC", secret, "LITERAL"))
        admin = kp_admin(proc)
        admin.create_acls([kp_acl("orders-", "READ", "ALLOW", pattern="PREFIXED",
                                  principal="User:alice")])
        before = kp_rows(admin.describe_acls(kp_filter())[0])
        admin.close()
    finally:
        proc.stop()
    assert (tmp_path / "acls.json").exists()
    proc = authorizer_broker(str(tmp_path), **settings)
    try:
        admin = kp_admin(proc)
        assert kp_rows(admin.describe_acls(kp_filter())[0]) == before
        assert len(before) == 2
        producer = KafkaProducer(bootstrap_servers=proc.bootstrap, max_block_ms=4000)
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(secret, b"v").get(10)
        producer.close()
        admin.delete_acls([kp_filter()])
        admin.close()
    finally:
        proc.stop()
    proc = authorizer_broker(str(tmp_path), **settings)
    try:
        admin = kp_admin(proc)
        assert admin.describe_acls(kp_filter())[0] == []
        admin.close()
    finally:
        proc.stop()


def test_authorizer_class_name_is_checked():
    assert BrokerConfig({"authorizer.class.name": ""}).values["authorizer.class.name"] == ""
    BrokerConfig({"authorizer.class.name": STANDARD_AUTHORIZER})
    with pytest.raises(ConfigError, match="kafka.security.authorizer.AclAuthorizer.*is not "
                                          "supported: the only authorizer is " +
                       STANDARD_AUTHORIZER.replace(".", r"\.")):
        BrokerConfig({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    with pytest.raises(ConfigError, match="allow.everyone.if.no.acl.found"):
        BrokerConfig({"allow.everyone.if.no.acl.found": "maybe"})
