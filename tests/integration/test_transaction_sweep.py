"""The abort of transactions past their timeout does not hold the broker: with thousands of open
transactions the sweep aborts them a slice at a time, and a request that arrives while it runs is
answered in the middle of it, over a real socket. (In one pass, 10,000 aborts held every request
for 2-3 s.) The broker of the test runs the sweep only when the test starts it."""
from __future__ import annotations

import concurrent.futures
import threading

from broker.coordinator.transaction.coordinator import SWEEP_SLICE
from broker.testing import EmbeddedBroker
from protocol.messages import (DescribeTransactionsRequest, ListTransactionsRequest,
                               ListTransactionsResponse)
from tests.support import RawClient

TRANSACTIONS = 3000


def _open_transactions(kb: EmbeddedBroker, topic: str, n: int) -> None:
    """``n`` Ongoing transactions with a 1 ms timeout, opened inside the broker as
    InitProducerId and AddPartitionsToTxn would open them."""
    coordinator = kb.broker.transactions
    done: concurrent.futures.Future = concurrent.futures.Future()
    left = [n]

    def added(error) -> None:
        assert error == 0, error
        left[0] -= 1
        if not left[0]:
            done.set_result(None)

    def start() -> None:
        for i in range(n):
            tid = f"sweep-{i}"

            def initialized(error, pid, epoch, tid=tid) -> None:
                assert error == 0, error
                coordinator.add_partitions(tid, pid, epoch, [(topic, i % 3)], 0, added)
            coordinator.init_producer_id(tid, 1, None, initialized)

    kb.call(start)
    done.result(timeout=60)


def _ongoing(client: RawClient) -> list[str]:
    answer = client.call(ListTransactionsRequest(state_filters=["Ongoing"],
                                                 producer_id_filters=[]), 0)
    assert answer.error_code == 0
    return [t.transactional_id for t in answer.transaction_states]


def test_a_request_is_answered_in_the_middle_of_a_large_sweep():
    settings = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 3_600_000}
    with EmbeddedBroker(settings) as kb:
        topic = kb.create_topic(partitions=3)
        _open_transactions(kb, topic, TRANSACTIONS)
        client = RawClient(kb.port)
        try:
            assert len(_ongoing(client)) == TRANSACTIONS
            # the loop is held while the request is sent, so that it waits in the socket when
            # the sweep starts; the sweep's first slice runs before the loop reads it
            held, sent = threading.Event(), threading.Event()
            found: concurrent.futures.Future = concurrent.futures.Future()

            def sweep() -> None:
                held.set()
                sent.wait(10)
                found.set_result(kb.broker.transactions.abort_timed_out_transactions())

            kb.loop.call_soon_threadsafe(sweep)
            assert held.wait(10)
            sent_at = client.send(ListTransactionsRequest(state_filters=["Ongoing"],
                                                          producer_id_filters=[]), 0)
            sent.set()
            correlation_id, answer = client.receive(ListTransactionsResponse, 0,
                                                    ListTransactionsRequest.api_key)
            assert correlation_id == sent_at and answer.error_code == 0
            assert found.result(10) == TRANSACTIONS
            # answered while the sweep was going: some aborted, most not yet
            ongoing_then = len(answer.transaction_states)
            assert 0 < ongoing_then <= TRANSACTIONS - SWEEP_SLICE

            # and the sweep finishes: every one aborted, none left Ongoing
            for _ in range(200):
                if not _ongoing(client):
                    break
                threading.Event().wait(0.05)
            assert _ongoing(client) == []
            described = client.call(DescribeTransactionsRequest(
                transactional_ids=["sweep-0", f"sweep-{TRANSACTIONS - 1}"]), 0)
            assert [(t.transactional_id, t.transaction_state, t.error_code)
                    for t in described.transaction_states] == [
                ("sweep-0", "CompleteAbort", 0), (f"sweep-{TRANSACTIONS - 1}", "CompleteAbort", 0)]
        finally:
            client.close()
