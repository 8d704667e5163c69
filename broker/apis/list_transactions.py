"""ListTransactions: the transactional ids this coordinator knows, filtered by state, producer
id, how long they have run (v1) and a regular expression on the id (v2)."""
from __future__ import annotations

from protocol.messages import ListTransactionsResponse

from ..security.authorizer import AclOperation, ResourceType
from ..network.coordinator_routing import hosted_transactions

NAME = "ListTransactions"

State = ListTransactionsResponse.TransactionState


def handle(broker, ctx, request, respond) -> None:
    version = ctx.api_version
    error, unknown, rows = broker.transactions.list_transactions(
        request.producer_id_filters, request.state_filters,
        request.duration_filter if version >= 1 else -1,
        request.transactional_id_pattern if version >= 2 else None)
    rows = hosted_transactions(broker, ctx, rows)
    auth = broker.authorizer
    if auth is not None:
        # only the transactional ids the principal may describe
        may_describe = auth.predicate(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID)
        rows = [row for row in rows if may_describe(row[0])]
    respond(ListTransactionsResponse(
        error_code=int(error), unknown_state_filters=unknown,
        transaction_states=[State(transactional_id=tid, producer_id=pid, transaction_state=state)
                            for tid, pid, state in rows]))
