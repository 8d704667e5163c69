"""Kafka's StandardAuthorizer: ACL bindings, their store and the decision ``authorize``.

Sans-I/O: the state is a plain object; :class:`AclFile` (the edge) persists it in the data
directory. The rules are StandardAuthorizerData's:

* a principal named in ``super.users`` may do anything;
* the ACLs of a resource are those of its exact name (LITERAL), of the wildcard name ``*``
  (LITERAL) and of every PREFIXED name that starts it;
* an ACL applies when its principal is the session's or ``User:*`` and its host is the client's
  address or ``*``; an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, an ALLOW of
  ALTER_CONFIGS also allows DESCRIBE_CONFIGS, ALL matches every operation (DENY never implies);
* a matching DENY wins over any ALLOW; no matching ACL denies, unless the resource has no ACL
  at all, when ``allow.everyone.if.no.acl.found`` decides.
"""
from __future__ import annotations

from enum import IntEnum
from typing import Iterable, NamedTuple

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
#: the one name of the CLUSTER resource (Kafka's Resource.CLUSTER_NAME)
CLUSTER_NAME = "kafka-cluster"


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _enum(cls, code: int):
    """Kafka's fromCode: a code it does not know is UNKNOWN."""
    try:
        return cls(code)
    except ValueError:
        return cls.UNKNOWN


def operation(code: int) -> AclOperation:
    return _enum(AclOperation, code)


def resource_type(code: int) -> ResourceType:
    return _enum(ResourceType, code)


def pattern_type(code: int) -> PatternType:
    return _enum(PatternType, code)


def permission_type(code: int) -> AclPermissionType:
    return _enum(AclPermissionType, code)


Op = AclOperation
_IMPLIES_DESCRIBE = frozenset((Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER))
_IMPLIES_DESCRIBE_CONFIGS = frozenset((Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))

#: the operations each resource type has (Kafka's AclEntry.supportedOperations), in code order:
#: what the authorized_operations fields of Metadata, DescribeGroups, ... are made of
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE,
                         Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.GROUP: (Op.READ, Op.DELETE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Op.CREATE, Op.ALTER, Op.DESCRIBE, Op.CLUSTER_ACTION,
                           Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE),
    ResourceType.TRANSACTIONAL_ID: (Op.WRITE, Op.DESCRIBE, Op.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


def operations_bitfield(ops: Iterable[AclOperation]) -> int:
    """Kafka's Utils.to32BitField: bit ``code`` set for each operation."""
    bits = 0
    for op in ops:
        bits |= 1 << op
    return bits


class AclBinding(NamedTuple):
    """One ACL: a resource pattern and an access control entry (Kafka's AclBinding)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def to_json(self) -> list:
        return [int(self.resource_type), self.resource_name, int(self.pattern_type),
                self.principal, self.host, int(self.operation), int(self.permission_type)]

    @classmethod
    def from_json(cls, row: list) -> "AclBinding":
        rt, name, pt, principal, host, op, perm = row
        return cls(ResourceType(rt), str(name), PatternType(pt), str(principal), str(host),
                   AclOperation(op), AclPermissionType(perm))


class AclBindingFilter(NamedTuple):
    """What DescribeAcls and DeleteAcls match ACLs with: None fields match anything, ANY
    types match any value, pattern type MATCH matches the ACLs that would apply to the named
    resource (LITERAL of the name or ``*``, PREFIXED of a prefix of it)."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != acl.pattern_type:
            return False
        name = self.resource_name
        if name is not None:
            if pt == PatternType.ANY or pt == acl.pattern_type:
                if name != acl.resource_name:
                    return False
            elif acl.pattern_type == PatternType.LITERAL:
                if name != acl.resource_name and acl.resource_name != WILDCARD:
                    return False
            elif not name.startswith(acl.resource_name):  # PREFIXED under MATCH
                return False
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or \
            self.permission_type == acl.permission_type


def new_acl_error(acl: AclBinding) -> str | None:
    """Why Kafka refuses to create ``acl`` with INVALID_REQUEST (its CreateAcls handler and
    AclControlManager.validateNewAcl, in the order they check), or None."""
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if acl.resource_name == "":
        return "Invalid empty resource name"
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {acl.resource_type.name}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {acl.pattern_type.name}"
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {acl.operation.name}"
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {acl.permission_type.name}"
    if ":" not in acl.principal:
        return (f"Could not parse principal from `{acl.principal}` (no colon is present "
                "separating the principal type from the principal name)")
    return None


def parse_super_users(value: str | None) -> frozenset[str]:
    """super.users: principals separated by semicolons (``User:admin;User:ops``)."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


class _ResourceAcls:
    """The ACLs of one resource type: LITERAL by name (``*`` included) and PREFIXED by prefix,
    with the prefix lengths present so a lookup probes only those."""

    __slots__ = ("literal", "prefixed", "prefix_lengths")

    def __init__(self) -> None:
        self.literal: dict[str, list[AclBinding]] = {}
        self.prefixed: dict[str, list[AclBinding]] = {}
        self.prefix_lengths: list[int] = []

    def add(self, acl: AclBinding) -> None:
        table = self.literal if acl.pattern_type == PatternType.LITERAL else self.prefixed
        table.setdefault(acl.resource_name, []).append(acl)
        if table is self.prefixed:
            self._lengths()

    def remove(self, acl: AclBinding) -> None:
        table = self.literal if acl.pattern_type == PatternType.LITERAL else self.prefixed
        rows = table[acl.resource_name]
        rows.remove(acl)
        if not rows:
            del table[acl.resource_name]
            if table is self.prefixed:
                self._lengths()

    def _lengths(self) -> None:
        self.prefix_lengths = sorted({len(p) for p in self.prefixed})

    def matching(self, name: str):
        """Every ACL that applies to the resource ``name``, whatever its principal."""
        literal = self.literal
        rows = literal.get(name)
        if rows:
            yield from rows
        if name != WILDCARD:
            rows = literal.get(WILDCARD)
            if rows:
                yield from rows
        prefixed = self.prefixed
        for length in self.prefix_lengths:
            if length > len(name):
                break
            rows = prefixed.get(name[:length])
            if rows:
                yield from rows


def _applies(acl: AclBinding, principal: str, host: str, op: AclOperation) -> bool:
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return False
    if acl.host != WILDCARD and acl.host != host:
        return False
    acl_op = acl.operation
    if acl_op == Op.ALL or acl_op == op:
        return True
    if acl.permission_type != AclPermissionType.ALLOW:
        return False
    if op == Op.DESCRIBE:
        return acl_op in _IMPLIES_DESCRIBE
    if op == Op.DESCRIBE_CONFIGS:
        return acl_op in _IMPLIES_DESCRIBE_CONFIGS
    return False


class StandardAuthorizer:
    """The ACLs and the decision. ``authorize`` takes the principal as ``"User:alice"`` (str of
    a KafkaPrincipal) and the client's address."""

    def __init__(self, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False,
                 acls: Iterable[AclBinding] = ()) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self.acls: dict[AclBinding, None] = {}   # insertion-ordered set
        self._by_type: dict[ResourceType, _ResourceAcls] = {}
        for acl in acls:
            self.add(acl)

    # -- the store -------------------------------------------------------------------------

    def add(self, acl: AclBinding) -> bool:
        """Add ``acl``; False when it is already there (Kafka answers success either way)."""
        if acl in self.acls:
            return False
        self.acls[acl] = None
        table = self._by_type.get(acl.resource_type)
        if table is None:
            table = self._by_type[acl.resource_type] = _ResourceAcls()
        table.add(acl)
        return True

    def remove(self, acl: AclBinding) -> None:
        del self.acls[acl]
        self._by_type[acl.resource_type].remove(acl)

    def matching(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [acl for acl in self.acls if acl_filter.matches(acl)]

    # -- the decision ----------------------------------------------------------------------

    def authorize(self, principal: str, host: str, op: AclOperation, rtype: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        table = self._by_type.get(rtype)
        if table is None:
            return self.allow_if_no_acl
        found = allowed = False
        for acl in table.matching(name):
            found = True
            if _applies(acl, principal, host, op):
                if acl.permission_type == AclPermissionType.DENY:
                    return False
                allowed = True
        return allowed or (not found and self.allow_if_no_acl)

    def authorize_by_resource_type(self, principal: str, host: str, op: AclOperation,
                                   rtype: ResourceType) -> bool:
        """Kafka's Authorizer.authorizeByResourceType: may the principal do ``op`` on at least
        one resource of the type? (InitProducerId without a transactional id asks it for
        WRITE on any topic.)"""
        if self.authorize(principal, host, op, rtype, "hardcode"):
            return True
        deny = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        wildcard_allow = False
        for acl in self.acls:
            if acl.resource_type != rtype:
                continue
            if acl.host != host and acl.host != WILDCARD:
                continue
            if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
                continue
            if acl.operation != op and acl.operation != Op.ALL:
                continue
            if acl.permission_type == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                    return False
                deny[acl.pattern_type].add(acl.resource_name)
            elif acl.pattern_type == PatternType.LITERAL and acl.resource_name == WILDCARD:
                wildcard_allow = True
            else:
                allow[acl.pattern_type].add(acl.resource_name)
        if wildcard_allow:
            return True
        for kind, names in allow.items():
            for name in names:
                if kind == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                    return True
        return False

    def authorized_operations(self, principal: str, host: str, rtype: ResourceType,
                              name: str) -> int:
        """The authorized_operations bitfield of a resource (Kafka's
        AuthHelper.authorizedOperations)."""
        return operations_bitfield(op for op in SUPPORTED_OPERATIONS[rtype]
                                   if self.authorize(principal, host, op, rtype, name))
