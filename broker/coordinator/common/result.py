"""What a coordinator operation hands the runtime to write (Kafka's CoordinatorResult): the
records, in Kafka's formats of the internal topic, and what to do once they are stored.

Operations never persist anything themselves: they build a result and give it to their shard
(:meth:`CoordinatorShard.append <broker.coordinator.common.runtime.CoordinatorShard.append>`),
which persists the records, applies them with the replay's code and only then calls
``stored(None)``; on a failed write nothing is applied and ``stored(exc)`` gets the failure,
which :func:`append_error` turns into the error code Kafka answers."""
from __future__ import annotations

from typing import Callable, NamedTuple

from protocol.errors import ErrorCode

E = ErrorCode


class CoordinatorResult(NamedTuple):
    #: ``(key, value)`` bytes; value None for a tombstone
    records: list
    #: called once: with None when the records are stored and applied, else with the failure
    stored: Callable[[BaseException | None], None]
    #: ``(producer_id, producer_epoch)`` for a transactional write: its records stay pending
    #: until the transaction's marker
    producer: tuple[int, int] | None = None


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
