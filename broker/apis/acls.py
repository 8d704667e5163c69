"""What the three ACL APIs share.

Without an authorizer (``authorizer.class.name`` empty) DescribeAcls, CreateAcls and DeleteAcls
answer SECURITY_DISABLED, as a Kafka broker without one (tools show "security is disabled").
With one they need CLUSTER DESCRIBE (describe) or CLUSTER ALTER (create, delete), and a request
with an UNKNOWN resource type, pattern type, operation or permission type is one Kafka cannot
parse: the connection closes.
"""
from __future__ import annotations

from protocol.errors import ErrorCode

from ..security.authorizer import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   PatternType, ResourceType, operation, pattern_type,
                                   permission_type, resource_type)

SECURITY_DISABLED = ErrorCode.SECURITY_DISABLED
CLUSTER_AUTHORIZATION_FAILED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
# Kafka's own wording, which differs between the describe and the create/delete answers
NO_AUTHORIZER = "No Authorizer is configured on the broker"
NO_AUTHORIZER_CHANGE = "No Authorizer is configured."


def cluster_denied_message(api: str, op: AclOperation) -> str:
    """The message of Kafka's ClusterAuthorizationException for a request denied as a whole."""
    return f"Request {api} needs {op.name} permission."


def creation_has_unknown(c) -> bool:
    """A CreateAcls creation with a part Kafka's request parser refuses (code 0, or one it
    does not know)."""
    return (resource_type(c.resource_type) == ResourceType.UNKNOWN
            or pattern_type(c.resource_pattern_type) == PatternType.UNKNOWN
            or operation(c.operation) == AclOperation.UNKNOWN
            or permission_type(c.permission_type) == AclPermissionType.UNKNOWN)


def filter_has_unknown(f) -> bool:
    """The same for a DescribeAcls request or a DeleteAcls filter."""
    return (resource_type(f.resource_type_filter) == ResourceType.UNKNOWN
            or pattern_type(f.pattern_type_filter) == PatternType.UNKNOWN
            or operation(f.operation) == AclOperation.UNKNOWN
            or permission_type(f.permission_type) == AclPermissionType.UNKNOWN)


def binding(creation) -> AclBinding:
    return AclBinding(resource_type(creation.resource_type), creation.resource_name,
                      pattern_type(creation.resource_pattern_type), creation.principal,
                      creation.host, operation(creation.operation),
                      permission_type(creation.permission_type))


def binding_filter(row, version: int) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter; v0 has no pattern type (LITERAL)."""
    pt = pattern_type(row.pattern_type_filter) if version >= 1 else PatternType.LITERAL
    return AclBindingFilter(resource_type(row.resource_type_filter), row.resource_name_filter,
                            pt, row.principal_filter, row.host_filter, operation(row.operation),
                            permission_type(row.permission_type))
