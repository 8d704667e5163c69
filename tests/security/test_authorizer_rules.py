"""The StandardAuthorizer's decision rules (broker/security/authorizer.py), table-driven: deny
over allow, implied operations, LITERAL/PREFIXED/wildcard resources, wildcard principal and host,
super.users and allow.everyone.if.no.acl.found; and the filters of DescribeAcls/DeleteAcls."""
from __future__ import annotations

import pytest

from broker.security.authorizer import (CLUSTER_NAME, SUPPORTED_OPERATIONS, AclBinding,
                                        AclBindingFilter, AclOperation as Op,
                                        AclPermissionType as Perm, PatternType as PT,
                                        ResourceType as RT, StandardAuthorizer, new_acl_error,
                                        operations_bitfield, parse_super_users)
from broker.config import ConfigError
from broker.security.authorization import AclFile, kafka_host_address

ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER_HOST = "10.0.0.1", "10.0.0.2"


def acl(name, op, perm=Perm.ALLOW, principal=ALICE, host="*", pattern=PT.LITERAL,
        rtype=RT.TOPIC) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


# (ACLs, principal, host, operation, topic, allow_if_no_acl, expected)
CASES = [
    # no ACL at all on the resource: allow.everyone.if.no.acl.found decides
    ([], ALICE, HOST, Op.READ, "t", False, False),
    ([], ALICE, HOST, Op.READ, "t", True, True),
    # an ACL on the resource for someone else: denied even with allow.everyone.if.no.acl.found
    ([acl("t", Op.READ, principal=BOB)], ALICE, HOST, Op.READ, "t", True, False),
    # ACLs only on other resources leave this one without ACLs
    ([acl("other", Op.READ)], ALICE, HOST, Op.READ, "t", True, True),
    ([acl("other", Op.READ)], ALICE, HOST, Op.READ, "t", False, False),
    # a plain allow
    ([acl("t", Op.READ)], ALICE, HOST, Op.READ, "t", False, True),
    ([acl("t", Op.READ)], ALICE, HOST, Op.WRITE, "t", False, False),
    # deny overrides allow, whatever the order and however the allow is granted
    ([acl("t", Op.READ), acl("t", Op.READ, Perm.DENY)], ALICE, HOST, Op.READ, "t", False, False),
    ([acl("t", Op.READ, Perm.DENY), acl("*", Op.ALL)], ALICE, HOST, Op.READ, "t", False, False),
    ([acl("t", Op.ALL), acl("t", Op.READ, Perm.DENY, principal="User:*")], ALICE, HOST, Op.READ,
     "t", False, False),
    ([acl("t", Op.ALL, Perm.DENY), acl("t", Op.READ)], ALICE, HOST, Op.DESCRIBE, "t", True,
     False),
    # implied operations: READ, WRITE, DELETE, ALTER allow DESCRIBE; ALTER_CONFIGS allows
    # DESCRIBE_CONFIGS; ALL allows everything
    *[([acl("t", op)], ALICE, HOST, Op.DESCRIBE, "t", False, True)
      for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.ALL)],
    *[([acl("t", op)], ALICE, HOST, Op.DESCRIBE, "t", False, False)
      for op in (Op.CREATE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS)],
    ([acl("t", Op.ALTER_CONFIGS)], ALICE, HOST, Op.DESCRIBE_CONFIGS, "t", False, True),
    ([acl("t", Op.ALTER)], ALICE, HOST, Op.DESCRIBE_CONFIGS, "t", False, False),
    ([acl("t", Op.DESCRIBE)], ALICE, HOST, Op.READ, "t", False, False),
    ([acl("t", Op.ALL)], ALICE, HOST, Op.ALTER_CONFIGS, "t", False, True),
    # a DENY implies nothing: DENY READ does not deny DESCRIBE
    ([acl("t", Op.READ, Perm.DENY), acl("t", Op.DESCRIBE)], ALICE, HOST, Op.DESCRIBE, "t",
     False, True),
    ([acl("t", Op.WRITE, Perm.DENY)], ALICE, HOST, Op.DESCRIBE, "t", False, False),
    # wildcard principal and host
    ([acl("t", Op.READ, principal="User:*")], BOB, HOST, Op.READ, "t", False, True),
    ([acl("t", Op.READ, host=HOST)], ALICE, HOST, Op.READ, "t", False, True),
    ([acl("t", Op.READ, host=HOST)], ALICE, OTHER_HOST, Op.READ, "t", False, False),
    ([acl("t", Op.READ, Perm.DENY, host=OTHER_HOST), acl("t", Op.READ)], ALICE, HOST, Op.READ,
     "t", False, True),
    # principal types differ: Group:alice is not User:alice
    ([acl("t", Op.READ, principal="Group:alice")], ALICE, HOST, Op.READ, "t", False, False),
    # wildcard resource name (LITERAL "*")
    ([acl("*", Op.READ)], ALICE, HOST, Op.READ, "anything", False, True),
    ([acl("*", Op.READ, Perm.DENY), acl("t", Op.READ)], ALICE, HOST, Op.READ, "t", False, False),
    # PREFIXED: a prefix of the name matches, a longer or other name does not; LITERAL needs the
    # exact name
    ([acl("orders-", Op.WRITE, pattern=PT.PREFIXED)], ALICE, HOST, Op.WRITE, "orders-eu", False,
     True),
    ([acl("orders-", Op.WRITE, pattern=PT.PREFIXED)], ALICE, HOST, Op.WRITE, "orders-", False,
     True),
    ([acl("orders-", Op.WRITE, pattern=PT.PREFIXED)], ALICE, HOST, Op.WRITE, "orders", False,
     False),
    ([acl("orders-", Op.WRITE, pattern=PT.PREFIXED)], ALICE, HOST, Op.WRITE, "payments", True,
     True),
    ([acl("orders", Op.WRITE)], ALICE, HOST, Op.WRITE, "orders-eu", False, False),
    ([acl("o", Op.WRITE, pattern=PT.PREFIXED),
      acl("orders-e", Op.WRITE, Perm.DENY, pattern=PT.PREFIXED)], ALICE, HOST, Op.WRITE,
     "orders-eu", False, False),
    ([acl("o", Op.WRITE, pattern=PT.PREFIXED),
      acl("orders-e", Op.WRITE, Perm.DENY, pattern=PT.PREFIXED)], ALICE, HOST, Op.WRITE,
     "orders-us", False, True),
    # "*" as a PREFIXED name is a prefix like any other, not a wildcard
    ([acl("*", Op.READ, pattern=PT.PREFIXED)], ALICE, HOST, Op.READ, "t", False, False),
    ([acl("*", Op.READ, pattern=PT.PREFIXED)], ALICE, HOST, Op.READ, "*t", False, True),
]


@pytest.mark.parametrize("acls,principal,host,op,name,allow_if_none,expected", CASES)
def test_decision(acls, principal, host, op, name, allow_if_none, expected):
    authorizer = StandardAuthorizer((), allow_if_none, acls)
    assert authorizer.authorize(principal, host, op, RT.TOPIC, name) is expected


def test_resource_types_are_separate():
    authorizer = StandardAuthorizer((), False, [acl("x", Op.READ, rtype=RT.GROUP)])
    assert authorizer.authorize(ALICE, HOST, Op.READ, RT.GROUP, "x")
    assert not authorizer.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "x")
    # a topic ACL does not give the topic type ACLs "on the resource" for another type
    authorizer = StandardAuthorizer((), True, [acl("x", Op.READ, principal=BOB)])
    assert authorizer.authorize(ALICE, HOST, Op.READ, RT.GROUP, "x")


def test_super_users_pass_every_check_even_with_deny_acls():
    acls = [acl("*", Op.ALL, Perm.DENY, principal="User:*"),
            acl(CLUSTER_NAME, Op.ALL, Perm.DENY, principal="User:admin", rtype=RT.CLUSTER)]
    authorizer = StandardAuthorizer(parse_super_users("User:admin; User:ops"), False, acls)
    for principal in ("User:admin", "User:ops"):
        assert authorizer.authorize(principal, HOST, Op.WRITE, RT.TOPIC, "t")
        assert authorizer.authorize(principal, HOST, Op.ALTER, RT.CLUSTER, CLUSTER_NAME)
    assert not authorizer.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "t")
    assert parse_super_users("") == frozenset()
    assert parse_super_users(" User:a ;;User:b ") == {"User:a", "User:b"}


def test_removing_acls_restores_the_default():
    allow, deny = acl("t", Op.READ), acl("t", Op.READ, Perm.DENY)
    authorizer = StandardAuthorizer((), True, [allow, deny])
    assert not authorizer.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    authorizer.remove(deny)
    assert authorizer.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert not authorizer.authorize(BOB, HOST, Op.READ, RT.TOPIC, "t")
    authorizer.remove(allow)
    assert authorizer.authorize(BOB, HOST, Op.READ, RT.TOPIC, "t")  # no ACL left
    prefixed = acl("t", Op.READ, Perm.DENY, pattern=PT.PREFIXED)
    assert authorizer.add(prefixed) and not authorizer.add(prefixed)
    assert not authorizer.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "topic")
    authorizer.remove(prefixed)
    assert authorizer.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "topic")


@pytest.mark.parametrize("acls,expected", [
    ([], False),
    ([acl("t", Op.WRITE)], True),                  # some topic is writable
    ([acl("t", Op.READ)], False),
    ([acl("t", Op.WRITE), acl("t", Op.WRITE, Perm.DENY)], False),
    ([acl("tp", Op.WRITE), acl("t", Op.WRITE, Perm.DENY, pattern=PT.PREFIXED)], False),
    ([acl("tp", Op.WRITE), acl("x", Op.WRITE, Perm.DENY, pattern=PT.PREFIXED)], True),
    ([acl("t", Op.WRITE, pattern=PT.PREFIXED), acl("t", Op.WRITE, Perm.DENY)], True),
    ([acl("*", Op.WRITE), acl("t", Op.WRITE, Perm.DENY)], True),
    ([acl("t", Op.WRITE), acl("*", Op.WRITE, Perm.DENY)], False),
    ([acl("t", Op.ALL, principal="User:*")], True),
    ([acl("t", Op.WRITE, principal=BOB)], False),
    ([acl("t", Op.WRITE, host=OTHER_HOST)], False),
])
def test_authorize_by_resource_type(acls, expected):
    """InitProducerId without a transactional id: WRITE on at least one topic."""
    authorizer = StandardAuthorizer((), False, acls)
    assert authorizer.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC) is expected
    # Kafka first asks about a made-up topic: with allow.everyone.if.no.acl.found that passes
    # unless an ACL applies to every name
    lenient = StandardAuthorizer((), True, acls)
    assert lenient.authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC) is (
        expected or not any(a.resource_name == "*" or a.pattern_type == PT.PREFIXED and
                            "hardcode".startswith(a.resource_name) for a in acls))


def test_authorized_operations_bitfield():
    authorizer = StandardAuthorizer((), False, [acl("t", Op.READ), acl("t", Op.ALTER_CONFIGS)])
    expected = operations_bitfield([Op.READ, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS])
    assert authorizer.authorized_operations(ALICE, HOST, RT.TOPIC, "t") == expected
    assert expected == (1 << 3) | (1 << 8) | (1 << 10) | (1 << 11)
    everything = StandardAuthorizer(("User:admin",), False, [])
    assert everything.authorized_operations("User:admin", HOST, RT.GROUP, "g") == \
        operations_bitfield(SUPPORTED_OPERATIONS[RT.GROUP])


def _f(rtype=RT.ANY, name=None, pattern=PT.ANY, principal=None, host=None, op=Op.ANY,
       perm=Perm.ANY) -> AclBindingFilter:
    return AclBindingFilter(rtype, name, pattern, principal, host, op, perm)


STORED = [
    acl("orders", Op.READ),
    acl("orders-", Op.WRITE, pattern=PT.PREFIXED, principal=BOB),
    acl("*", Op.DESCRIBE, host=HOST),
    acl("g", Op.READ, Perm.DENY, rtype=RT.GROUP),
    acl(CLUSTER_NAME, Op.ALTER, rtype=RT.CLUSTER),
]


@pytest.mark.parametrize("acl_filter,expected", [
    (_f(), [0, 1, 2, 3, 4]),
    (_f(rtype=RT.TOPIC), [0, 1, 2]),
    (_f(rtype=RT.GROUP), [3]),
    (_f(name="orders"), [0]),                             # ANY: exact name, any pattern type
    (_f(name="orders", pattern=PT.LITERAL), [0]),
    (_f(pattern=PT.PREFIXED), [1]),
    (_f(name="orders-eu", pattern=PT.MATCH), [1, 2]),     # MATCH: what applies to the name
    (_f(name="orders", pattern=PT.MATCH), [0, 2]),
    (_f(name="*", pattern=PT.MATCH), [2]),
    (_f(pattern=PT.MATCH), [0, 1, 2, 3, 4]),               # MATCH without a name: everything
    (_f(principal=BOB), [1]),
    (_f(host=HOST), [2]),
    (_f(host="*"), [0, 1, 3, 4]),                         # "*" in a filter is literal
    (_f(op=Op.READ), [0, 3]),
    (_f(perm=Perm.DENY), [3]),
    (_f(rtype=RT.TOPIC, op=Op.READ, perm=Perm.ALLOW, principal=ALICE, name="orders",
        pattern=PT.LITERAL, host="*"), [0]),
    (_f(name="nothing"), []),
])
def test_filters(acl_filter, expected):
    authorizer = StandardAuthorizer((), False, STORED)
    assert authorizer.matching(acl_filter) == [STORED[i] for i in expected]


@pytest.mark.parametrize("binding,message", [
    (acl("t", Op.READ), None),
    (acl("kafka", Op.ALTER, rtype=RT.CLUSTER),
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl("", Op.READ), "Invalid empty resource name"),
    (acl("t", Op.READ, rtype=RT.ANY), "Invalid resourceType ANY"),
    (acl("t", Op.READ, pattern=PT.MATCH), "Invalid patternType MATCH"),
    (acl("t", Op.READ, pattern=PT.ANY), "Invalid patternType ANY"),
    (acl("t", Op.ANY), "Invalid operation ANY"),
    (acl("t", Op.READ, Perm.ANY), "Invalid permissionType ANY"),
    (acl("t", Op.READ, principal="alice"),
     "Could not parse principal from `alice` (no colon is present separating the principal "
     "type from the principal name)"),
])
def test_new_acl_validation(binding, message):
    assert new_acl_error(binding) == message


def test_acl_file_round_trip(tmp_path):
    store = AclFile(str(tmp_path))
    assert store.load() == []
    store.save(STORED)
    assert store.load() == STORED
    assert not (tmp_path / "acls.json.tmp").exists()
    store.save([])
    assert store.load() == []
    assert AclFile(None).load() == []
    AclFile(None).save(STORED)  # in-memory broker: nothing written, nothing fails
    for broken in ("{", '{"acls": [[2, "t"]]}', '{"acls": [[99, "t", 3, "User:a", "*", 3, 3]]}',
                   "[]"):
        (tmp_path / "acls.json").write_text(broken)
        with pytest.raises(ConfigError, match="is not a readable ACL file"):
            store.load()


@pytest.mark.parametrize("address,expected", [
    ("127.0.0.1", "127.0.0.1"),
    ("::1", "0:0:0:0:0:0:0:1"),
    ("fe80::1%eth0", "fe80:0:0:0:0:0:0:1%eth0"),
    ("2001:db8::ff00:42:8329", "2001:db8:0:0:0:ff00:42:8329"),
    ("::ffff:10.0.0.7", "10.0.0.7"),
    ("", ""),
])
def test_client_addresses_as_kafka_writes_them(address, expected):
    """ACL hosts are compared with Java's InetAddress.getHostAddress form of the address."""
    assert kafka_host_address(address) == expected
