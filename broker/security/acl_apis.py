"""What the three ACL APIs share.

Without an authorizer (``authorizer.class.name`` empty) DescribeAcls, CreateAcls and DeleteAcls
answer SECURITY_DISABLED, as a Kafka broker without one (tools show "security is disabled").
With one they need CLUSTER DESCRIBE (describe) or CLUSTER ALTER (create, delete). A request
carrying the code of UNKNOWN (0) as a resource type, pattern type, operation or permission type
is one Kafka cannot parse: the connection closes. Other codes Kafka does not know read as
UNKNOWN and are refused one creation or filter at a time.
"""
from __future__ import annotations

from protocol.errors import ErrorCode

from ..security.authorizer import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   PatternType, ResourceType, operation, pattern_type,
                                   permission_type, resource_type)

#: Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: the ACLs one CreateAcls may add, or one
#: DeleteAcls may remove, checked before anything changes
MAX_ACLS_PER_REQUEST = 10_000

SECURITY_DISABLED = ErrorCode.SECURITY_DISABLED
CLUSTER_AUTHORIZATION_FAILED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
# Kafka's own wording, which differs between the describe and the create/delete answers
NO_AUTHORIZER = "No Authorizer is configured on the broker"
NO_AUTHORIZER_CHANGE = "No Authorizer is configured."


def cluster_denied_message(api: str, op: AclOperation) -> str:
    """The message of Kafka's ClusterAuthorizationException for a request denied as a whole."""
    return f"Request {api} needs {op.name} permission."


def creation_has_unknown(c) -> bool:
    """A CreateAcls creation Kafka's request parser refuses: a part whose code is UNKNOWN's (0).
    Other codes it does not know become UNKNOWN and are refused one creation at a time."""
    return 0 in (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type)


def filter_has_unknown(f) -> bool:
    """The same for a DescribeAcls request or a DeleteAcls filter."""
    return 0 in (f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type)


def creation_not_a_binding(c) -> bool:
    """A creation that is no ACL at all (a resource type ANY, a pattern type ANY or MATCH, an
    operation or permission type ANY): Kafka fails to build its AclBinding and answers the whole
    request UNKNOWN_SERVER_ERROR."""
    return (c.resource_type == ResourceType.ANY
            or c.resource_pattern_type in (PatternType.ANY, PatternType.MATCH)
            or c.operation == AclOperation.ANY or c.permission_type == AclPermissionType.ANY)


def filter_error(f: AclBindingFilter) -> str | None:
    """Kafka's validation of a DeleteAcls filter (AclControlManager.validateFilter)."""
    if f.resource_type == ResourceType.UNKNOWN or f.pattern_type == PatternType.UNKNOWN:
        return "Unknown patternFilter."
    if f.operation == AclOperation.UNKNOWN or f.permission_type == AclPermissionType.UNKNOWN:
        return "Unknown entryFilter."
    return None


def binding(creation) -> AclBinding:
    return AclBinding(resource_type(creation.resource_type), creation.resource_name,
                      pattern_type(creation.resource_pattern_type), creation.principal,
                      creation.host, operation(creation.operation),
                      permission_type(creation.permission_type))


def binding_filter(row) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter (v1+: with a pattern type)."""
    return AclBindingFilter(resource_type(row.resource_type_filter), row.resource_name_filter,
                            pattern_type(row.pattern_type_filter), row.principal_filter,
                            row.host_filter, operation(row.operation),
                            permission_type(row.permission_type))
