"""DescribeTransactions: the state of transactional ids (kafka-transactions.sh describe)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import DescribeTransactionsResponse

from ..security.authorizer import AclOperation, ResourceType

NAME = "DescribeTransactions"


def handle(broker, ctx, request, respond) -> None:
    coordinator = broker.transactions
    auth = broker.authorizer
    if auth is None:
        respond(DescribeTransactionsResponse(transaction_states=[
            coordinator.describe(tid) for tid in request.transactional_ids]))
        return
    # DESCRIBE on each transactional id; its partitions only of topics the principal may
    # describe
    may_describe = auth.predicate(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID)
    may_topic = auth.predicate(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC)
    states = []
    for tid in request.transactional_ids:
        if may_describe(tid):
            state = coordinator.describe(tid)
            state.topics = [t for t in state.topics if may_topic(t.topic)]
        else:
            state = State(transactional_id=tid,
                          error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                          transaction_state="", transaction_timeout_ms=0,
                          transaction_start_time_ms=0, producer_id=0, producer_epoch=0,
                          topics=[])
        states.append(state)
    respond(DescribeTransactionsResponse(transaction_states=states))


State = DescribeTransactionsResponse.TransactionState
