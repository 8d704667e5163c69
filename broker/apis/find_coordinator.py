"""FindCoordinator: the node that coordinates a group or a transactional id.

The shard is abs(java_hashcode(key)) % the partitions of __consumer_offsets (groups, key type 0)
or of __transaction_state (transactional ids, key type 1); the answer is the node that leads
that partition: this node while one node serves all, else whichever node leads it now
(COORDINATOR_NOT_AVAILABLE while none does).
"""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import FindCoordinatorResponse

from ..security.authorizer import AclOperation, ResourceType
from ..network.coordinator_routing import GROUP, SHARE, TRANSACTION, coordinator_node

NAME = "FindCoordinator"

_DENIED_MESSAGES = {ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
                    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                        "Transactional Id authorization failed."}
Coordinator = FindCoordinatorResponse.Coordinator


#: what Kafka asks of a key before it looks for its coordinator, and its error when denied
_DESCRIBE = {GROUP: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
             TRANSACTION: (ResourceType.TRANSACTIONAL_ID,
                           ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}


def _answer(broker, ctx, key: str, key_type: int) -> tuple[int, str | None]:
    auth = broker.authorizer
    if auth is not None and key_type in _DESCRIBE:
        rtype, denied = _DESCRIBE[key_type]
        if not auth.allowed(ctx, AclOperation.DESCRIBE, rtype, key):
            # Kafka's message for the error (v4+ answers carry none)
            return denied, _DENIED_MESSAGES[denied] if ctx.api_version < 4 else ""
    if key_type == TRANSACTION:
        return ErrorCode.NONE, None
    if key_type == SHARE and ctx.api_version >= 6:
        return _share_key(broker, ctx, key)
    if key_type != GROUP:
        return ErrorCode.INVALID_REQUEST, (
            "This most likely occurs because of a request being malformed by the client library "
            "or the message was sent to an incompatible broker. See the broker logs for more "
            "details.")
    if not key:
        return ErrorCode.INVALID_REQUEST, "group id must not be empty"
    return ErrorCode.NONE, None


def _share_key(broker, ctx, key: str) -> tuple[int, str | None]:
    """A share coordinator key (``group:topic id:partition``, v6+): CLUSTER_ACTION, then
    Kafka's SharePartitionKey.validate; the state topic is created if it is not there yet,
    and meanwhile the coordinator is not available, as on Kafka."""
    from ..coordinator.share_state.service import denied
    from ..coordinator.share_state.store import parse_coordinator_key
    if denied(broker, ctx):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    try:
        parse_coordinator_key(key)
    except ValueError:
        return ErrorCode.INVALID_REQUEST, ""
    if broker.share_coordinator.state_topic() is None:
        broker.share_coordinator.state_topic(create=True)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, ""
    return ErrorCode.NONE, None


def _node(broker, ctx, key: str, key_type: int) -> tuple[int, str, int]:
    """(node id, host, port) of the coordinator of ``key``: the node leading its partition of
    __consumer_offsets or __transaction_state (this node while one node serves all)."""
    if broker.cluster.single:
        return (broker.node_id, *broker.advertised(ctx.listener))
    node = coordinator_node(broker, key, key_type)
    if node == -1:
        return -1, "", -1
    return (node, *broker.advertised(ctx.listener, node))


def _located(broker, ctx, key: str, key_type: int) -> tuple[int, str | None, tuple]:
    """(error, message, (node, host, port)) of one key: the coordinator's node, or
    COORDINATOR_NOT_AVAILABLE while its partition has no leader (all its replicas down)."""
    error, message = _answer(broker, ctx, key, key_type)
    if error != ErrorCode.NONE:
        return error, message, (-1, "", -1)
    where = _node(broker, ctx, key, key_type)
    if where[0] == -1:
        return (ErrorCode.COORDINATOR_NOT_AVAILABLE,
                "The coordinator is not available." if ctx.api_version < 4 else "", where)
    return error, message, where


def handle(broker, ctx, request, respond) -> None:
    if ctx.api_version < 4:
        error, message, (node, host, port) = _located(broker, ctx, request.key,
                                                      request.key_type)
        ok = error == ErrorCode.NONE
        if ok:
            message = "NONE"  # Kafka sends the error's message, and NONE's is its name
        respond(FindCoordinatorResponse(
            error_code=error, error_message=message, node_id=node if ok else -1,
            host=host if ok else "", port=port if ok else -1))
        return
    coordinators = []
    for key in request.coordinator_keys:
        error, message, (node, host, port) = _located(broker, ctx, key, request.key_type)
        ok = error == ErrorCode.NONE
        if ok:
            message = ""
        coordinators.append(Coordinator(key=key, node_id=node if ok else -1,
                                        host=host if ok else "", port=port if ok else -1,
                                        error_code=error, error_message=message))
    respond(FindCoordinatorResponse(coordinators=coordinators))
