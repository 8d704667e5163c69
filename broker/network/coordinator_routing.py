"""NOT_COORDINATOR from a node that does not coordinate a request's group or transactional id.

With several nodes (broker/cluster.py) the coordinator of a group or transactional id is the
node leading its partition of __consumer_offsets or __transaction_state (FindCoordinator names
it). Kafka's coordinator runtime answers NOT_COORDINATOR for a key whose partition it does not
host, and the client looks the coordinator up again. In this process every node reaches the
same coordinator shards, so the check is made once per request, before its handler: the keys
coordinated elsewhere get NOT_COORDINATOR where the API carries it (broker/network/
error_placement.py) and the handler answers the others. One node coordinates everything: no
request is looked at.
"""
from __future__ import annotations

from protocol.errors import ErrorCode

from ..topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from .error_placement import answer_error, names_of, shape_of

#: FindCoordinator's key types
GROUP, TRANSACTION, SHARE = 0, 1, 2

#: the APIs the group coordinator answers, by the key that routes them
GROUP_APIS = frozenset((
    "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch",
    "OffsetDelete", "DescribeGroups", "DeleteGroups", "ConsumerGroupHeartbeat",
    "ConsumerGroupDescribe", "TxnOffsetCommit"))
#: the APIs the transaction coordinator answers (InitProducerId only with a transactional id)
TRANSACTION_APIS = frozenset((
    "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn",
    "DescribeTransactions"))


def coordinator_node(broker, key: str, key_type: int) -> int:
    """The node leading the internal partition of ``key``, -1 while it has no leader."""
    if key_type == SHARE:   # group:topic id:partition, already validated
        from ..coordinator.share_state.store import parse_coordinator_key
        node = broker.share_coordinator.coordinator_of(*parse_coordinator_key(key))
        return -1 if node is None else node
    if key_type == TRANSACTION:
        topic, coordinator = TRANSACTION_STATE_TOPIC, broker.transactions
    else:
        topic, coordinator = OFFSETS_TOPIC, broker.coordinator
    return broker.topics.partition(topic, coordinator.partition_for(key)).leader


def misrouted(broker, conn, req, request) -> bool:
    """Answer the keys of ``request`` that ``conn``'s node does not coordinate with
    NOT_COORDINATOR; True when that took the request (the handler may still answer the rest
    of it). Only asked while several nodes serve."""
    name = req.handler.name
    node = conn.node_id
    if node is None or (name not in GROUP_APIS and name not in TRANSACTION_APIS):
        return False
    names = names_of(request, shape_of(req.handler, req.api_version).request_arrays,
                     broker.topics)
    if name in GROUP_APIS:
        key_type, keys, field = GROUP, names.groups, "group"
    else:
        key_type, keys, field = TRANSACTION, names.transactions, "transactional_id"
    elsewhere = frozenset(k for k in keys if coordinator_node(broker, k, key_type) != node)
    if not elsewhere:
        return False
    answer_error(broker, conn, req, request, req.respond, ErrorCode.NOT_COORDINATOR,
                 {field: elsewhere}, "This is not the correct coordinator.",
                 "request for a coordinator on another node without an answer")
    return True


def hosted_groups(broker, ctx, respond):
    """ListGroups on one of several nodes: only the groups that node coordinates, as each
    Kafka broker lists the groups of the partitions it hosts."""
    node = _serving_node(broker, ctx)
    if node is None:
        return respond

    def answer(response) -> None:
        response.groups = [g for g in response.groups
                           if coordinator_node(broker, g.group_id, GROUP) == node]
        respond(response)
    return answer


def hosted_transactions(broker, ctx, rows: list) -> list:
    """ListTransactions on one of several nodes: only the transactional ids (first of each
    row) that node coordinates."""
    node = _serving_node(broker, ctx)
    if node is None:
        return rows
    return [row for row in rows if coordinator_node(broker, row[0], TRANSACTION) == node]


def _serving_node(broker, ctx) -> int | None:
    """The node a request reached while several nodes serve; None with one node, or for an
    in-process request (the console, EmbeddedBroker's admin calls)."""
    conn = getattr(ctx, "conn", None)
    if broker.cluster.single or conn is None:
        return None
    return conn.node_id
