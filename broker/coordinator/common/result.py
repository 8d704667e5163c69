"""What a coordinator operation hands the runtime to write (Kafka's CoordinatorResult): the
records, in Kafka's formats of the internal topic, and what to do once they are stored.

Operations never persist anything themselves: they build a result and give it to their shard
(:meth:`CoordinatorShard.append <broker.coordinator.common.runtime.CoordinatorShard.append>`),
which persists the records, applies them with the replay's code and only then calls
``stored(None)``; on a failed write nothing is applied and ``stored(exc)`` gets the failure."""
from __future__ import annotations

from typing import Callable, NamedTuple


class CoordinatorResult(NamedTuple):
    #: ``(key, value)`` bytes; value None for a tombstone
    records: list
    #: called once: with None when the records are stored and applied, else with the failure
    stored: Callable[[BaseException | None], None]
    #: ``(producer_id, producer_epoch)`` for a transactional write: its records stay pending
    #: until the transaction's marker
    producer: tuple[int, int] | None = None
