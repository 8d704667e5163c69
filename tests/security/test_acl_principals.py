"""ACLs decided on authenticated principals: a broker with the StandardAuthorizer and three
listeners - PLAINTEXT (User:ANONYMOUS), SASL_PLAINTEXT (PLAIN users admin, alice and bob) and SSL
with ssl.client.auth=required (the client certificate mapped to User:kbroker-client). The super
user admin grants alice and the certificate's principal a topic and a group over a real admin
client; they produce and consume, while bob and the anonymous client are refused
TOPIC_AUTHORIZATION_FAILED and write nothing."""
from __future__ import annotations

import pytest

from tests.support import BrokerProcess, free_port, unique

PLAIN_USERS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'username="admin" password="admin-pw" user_admin="admin-pw" '
               'user_alice="alice-pw" user_bob="bob-pw";')


@pytest.fixture(scope="module")
def broker(certs):
    port, sasl_port, ssl_port = free_port(), free_port(), free_port()
    proc = BrokerProcess(port=port, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
                     f"SSL://127.0.0.1:{ssl_port}",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": certs["paths"]["broker.p12"],
        "ssl.keystore.password": certs["password"],
        "ssl.client.auth": "required",
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": certs["paths"]["truststore.p12"],
        "ssl.truststore.password": certs["password"],
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=Development,O=kbroker$/$1/L,DEFAULT"})
    proc.start()
    proc.sasl = f"127.0.0.1:{sasl_port}"
    proc.ssl = f"127.0.0.1:{ssl_port}"
    yield proc
    proc.stop()


def sasl(broker, user: str) -> dict:
    return {"bootstrap.servers": broker.sasl, "security.protocol": "sasl_plaintext",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-pw"}


def mtls(broker, certs) -> dict:
    paths = certs["paths"]
    return {"bootstrap.servers": broker.ssl, "security.protocol": "ssl",
            "ssl.ca.location": paths["ca.crt"], "ssl.certificate.location": paths["client.crt"],
            "ssl.key.location": paths["client.key"]}


def grant(broker, principal: str, topic: str, group: str) -> None:
    """admin (a super user) lets ``principal`` do anything with the topic and the group."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       AdminClient, ResourcePatternType, ResourceType)
    admin = AdminClient(sasl(broker, "admin"))
    bindings = [AclBinding(kind, name, ResourcePatternType.LITERAL, principal, "*",
                           AclOperation.ALL, AclPermissionType.ALLOW)
                for kind, name in ((ResourceType.TOPIC, topic), (ResourceType.GROUP, group))]
    for future in admin.create_acls(bindings).values():
        future.result(15)


def create_topic(broker, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient(sasl(broker, "admin"))  # kept: a collected client fails its futures
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)


def produce(settings: dict, topic: str, n: int = 3) -> list:
    from confluent_kafka import Producer
    results = []
    producer = Producer({**settings, "message.timeout.ms": 8000})
    for i in range(n):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda err, msg: results.append(
            None if err is None else err.name()))
    producer.flush(15)
    return results


def consume(settings: dict, topic: str, group: str, n: int = 3) -> list:
    from confluent_kafka import Consumer
    consumer = Consumer({**settings, "group.id": group, "auto.offset.reset": "earliest"})
    values = []
    try:
        consumer.subscribe([topic])
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value().decode())
                if len(values) == n:
                    break
    finally:
        consumer.close()
    return values


def end_offset(broker, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition
    reader = Consumer({**sasl(broker, "admin"), "group.id": unique("admin")})
    try:
        return reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        reader.close()


def test_a_sasl_user_with_acls_is_served_and_one_without_is_refused(broker):
    topic, group = unique("acl-alice"), unique("acl-alice-g")
    create_topic(broker, topic)
    grant(broker, "User:alice", topic, group)
    assert produce(sasl(broker, "alice"), topic) == [None, None, None]
    assert consume(sasl(broker, "alice"), topic, group) == ["v0", "v1", "v2"]
    assert produce(sasl(broker, "bob"), topic) == ["TOPIC_AUTHORIZATION_FAILED"] * 3
    assert end_offset(broker, topic) == 3


def test_the_client_certificate_principal_is_authorized_and_anonymous_is_not(broker, certs):
    topic, group = unique("acl-mtls"), unique("acl-mtls-g")
    create_topic(broker, topic)
    grant(broker, "User:kbroker-client", topic, group)
    assert produce(mtls(broker, certs), topic) == [None, None, None]
    assert consume(mtls(broker, certs), topic, group) == ["v0", "v1", "v2"]
    anonymous = {"bootstrap.servers": broker.bootstrap}
    assert produce(anonymous, topic) == ["TOPIC_AUTHORIZATION_FAILED"] * 3
    assert end_offset(broker, topic) == 3


def test_scram_credentials_need_cluster_alter_and_describe(broker):
    """AlterUserScramCredentials needs ALTER and DescribeUserScramCredentials DESCRIBE on the
    cluster once an authorizer is on: bob may neither add a user nor list them; admin (a super
    user) may."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    user = unique("scram-user")
    upsertion = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"secret", b"salt-salt")
    bob = AdminClient(sasl(broker, "bob"))
    with pytest.raises(KafkaException) as denied:
        bob.alter_user_scram_credentials([upsertion])[user].result(15)
    assert denied.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
    # kafka-python for the denied describe: confluent-kafka 2.x aborts the process (munmap_chunk:
    # invalid pointer) on this answer, which has Kafka's shape (its getErrorResponse: the error
    # at the top and one unnamed result per user asked)
    from kafka.admin import KafkaAdminClient
    from kafka.errors import ClusterAuthorizationFailedError
    kp_bob = KafkaAdminClient(bootstrap_servers=broker.sasl, security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism="PLAIN", sasl_plain_username="bob",
                              sasl_plain_password="bob-pw")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            kp_bob.describe_user_scram_credentials([user])
    finally:
        kp_bob.close()
    admin = AdminClient(sasl(broker, "admin"))
    admin.alter_user_scram_credentials([upsertion])[user].result(15)
    described = admin.describe_user_scram_credentials([user])[user].result(15)
    [info] = described.scram_credential_infos
    assert (info.mechanism, info.iterations) == (ScramMechanism.SCRAM_SHA_256, 4096)
