"""Fetch long-poll: a Fetch below min_bytes waits as a delayed operation, watched by each of its
partitions, until a Produce to one of them brings enough bytes or max_wait_ms passes.

A read_committed Fetch reads below the last stable offset, so an append above it brings
nothing; the transaction marker that moves it wakes the fetch (``write_txn_markers`` calls
``partition_appended`` too: a marker is an append)."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import FetchResponse

from .apis import fetch as fetch_api
from .purgatory import DelayedOperation, DelayedOperationPurgatory


class DelayedFetch(DelayedOperation):
    kind = "fetch"

    def __init__(self, broker, request, respond) -> None:
        super().__init__(request.max_wait_ms)
        self.broker = broker
        self.request = request
        self.respond = respond
        self.result = None

    def try_complete(self) -> bool:
        responses, total, errors = fetch_api.read(self.broker, self.request)
        if total >= self.request.min_bytes or errors:
            self.result = responses
            return True
        return False

    def on_complete(self) -> None:
        responses = self.result
        if responses is None:
            responses, _total, _errors = fetch_api.read(self.broker, self.request)
        self.broker.metrics.fetched(responses)
        self.respond(FetchResponse(error_code=ErrorCode.NONE, session_id=0,
                                   responses=responses))

    def on_expiration(self) -> None:
        pass


class FetchPurgatory:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.purgatory = DelayedOperationPurgatory(broker.timer, "fetch")

    def wait(self, request, respond) -> None:
        op = DelayedFetch(self.broker, request, respond)
        keys = [("fetch", ft.topic, fp.partition) for ft in request.topics
                for fp in ft.partitions]
        self.purgatory.try_complete_else_watch(op, keys)

    def partition_appended(self, topic: str, partition: int) -> None:
        self.purgatory.check_and_complete(("fetch", topic, partition))

    def complete_all(self) -> None:
        """At shutdown: answer every waiting fetch with what is there now."""
        self.purgatory.force_complete_all()
