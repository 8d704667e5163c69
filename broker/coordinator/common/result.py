"""What a coordinator operation hands the runtime to write (Kafka's CoordinatorResult): the
records, in Kafka's formats of the internal topic, and the response the caller gets once they
are stored.

Operations never persist anything themselves: they build a result and give it to their shard
(:meth:`CoordinatorShard.append <broker.coordinator.common.runtime.CoordinatorShard.append>`)
with the caller's ``respond``. The shard persists the records, applies them with the replay's
code and only then hands ``response`` to ``respond``; on a failed write nothing is applied and
the caller gets the API's error answer instead, built by its one ``error_response(exc,
response)`` (Kafka's handleOperationException) from :func:`append_error`, the mapping of a
failed append to the error code Kafka answers.

``append_future`` (Kafka's appendFuture) is work that follows the write whatever its outcome,
done before the answer goes out: classic group writes (a SyncGroup's assignment, a group reset
on failure, as on Kafka) and undoing what an operation changed ahead of its write when the
write fails (Kafka reverts the shard's timeline instead)."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from protocol.errors import ErrorCode

E = ErrorCode


class CoordinatorResult(NamedTuple):
    #: ``(key, value)`` bytes; value None for a tombstone
    records: list
    #: what the caller gets once the records are stored and applied
    response: Any = None
    #: ``(producer_id, producer_epoch)`` for a transactional write: its records stay pending
    #: until the transaction's marker
    producer: tuple[int, int] | None = None
    #: Kafka's appendFuture: called once, with None when the records are stored and applied,
    #: else with the failure, before the caller is answered
    append_future: Callable[[BaseException | None], None] | None = None


def append_error(exc: BaseException | None, for_offsets: bool = False) -> ErrorCode:
    """Kafka's mapping of a failed append to a coordinator's internal topic to the error clients
    get (``for_offsets``: an offset commit's, where too large a batch is
    INVALID_COMMIT_OFFSET_SIZE)."""
    if exc is None:
        return E.NONE
    code = getattr(exc, "code", None)
    if code is None:
        code = getattr(exc, "error_code", None)
    if code is None:
        return E.COORDINATOR_NOT_AVAILABLE
    try:
        code = E(int(code))
    except ValueError:
        return E.UNKNOWN_SERVER_ERROR
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS,
                E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE, E.INVALID_FETCH_SIZE):
        return E.INVALID_COMMIT_OFFSET_SIZE if for_offsets else E.UNKNOWN_SERVER_ERROR
    return code
