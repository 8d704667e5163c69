"""What the ACL APIs answer: this broker has no authorizer, like a Kafka broker without
``authorizer.class.name``, so DescribeAcls, CreateAcls and DeleteAcls answer SECURITY_DISABLED
(tools show "security is disabled" instead of an error)."""
from __future__ import annotations

from protocol.errors import ErrorCode

SECURITY_DISABLED = ErrorCode.SECURITY_DISABLED
# Kafka's own wording, which differs between the describe and the create/delete answers
NO_AUTHORIZER = "No Authorizer is configured on the broker"
NO_AUTHORIZER_CHANGE = "No Authorizer is configured."
