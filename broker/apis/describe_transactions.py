"""DescribeTransactions: the state of transactional ids (kafka-transactions.sh describe)."""
from __future__ import annotations

from protocol.messages import DescribeTransactionsResponse

NAME = "DescribeTransactions"
VERSIONS = (0, 0)


def handle(broker, ctx, request, respond) -> None:
    coordinator = broker.transactions
    respond(DescribeTransactionsResponse(transaction_states=[
        coordinator.describe(tid) for tid in request.transactional_ids]))
