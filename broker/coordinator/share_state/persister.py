"""The share-partition leader's side of the share coordinator (Kafka's persister): the share
partitions of broker/coordinator/share/leader.py are stored in, and read from, the same store
(store.py) that the share-group state APIs serve, so state written by either is read by the
other.

* At each change of a share partition its whole state is stored (one ShareSnapshot: the start
  offset and the in-flight records as state batches; an acquisition is not stored, as on Kafka).
  As Kafka's leader, it stores the start offset from before the change, with what became of
  the records the change finished (tests/conformance/test_share_state_conformance.py).
  A new share partition is initialized first (state epoch 0), as Kafka's group coordinator
  initializes one before its leader reads it.
* A share partition the leader does not hold yet starts from the stored state, if any
  (Kafka's SharePartition reads its state at its first fetch).
* When a share-group state API changes a share partition the leader holds (initialize, write,
  delete, a read with a newer leader epoch), the leader drops it and reads the store again at
  its next fetch: Kafka's leader is fenced by the new state epoch and loads again. Records it had
  acquired are delivered again.
"""
from __future__ import annotations

import uuid

import structlog

from ..group.share.partition import ACQUIRED, AVAILABLE

log = structlog.get_logger("broker.share")


def state_batches(sp) -> list:
    """The in-flight records of a share partition as state batches: acquired ones at the end
    are left out, acquired ones between others are stored available with the delivery count
    they had before (an acquisition is not stored)."""
    batches: list[list] = []
    in_flight = sp.in_flight()
    while in_flight and in_flight[-1][1] is ACQUIRED:
        in_flight.pop()
    for offset, state, count, _member, _deadline in in_flight:
        stored = AVAILABLE if state is ACQUIRED else state
        if state is ACQUIRED:
            count -= 1
        last = batches[-1] if batches else None
        if last is not None and last[1] == offset - 1 and last[2] == stored and \
                last[3] == count:
            last[1] = offset
        else:
            batches.append([offset, offset, int(stored), count])
    return [tuple(b) for b in batches]


def stored_view(sp) -> tuple[int, list, int]:
    """(start offset, state batches, delivery-complete count) as Kafka's leader writes them:
    the start offset from before the change that moved it, with the records finished since
    (accepted, rejected) as batches; the current start offset when those are not known."""
    start, delivered = sp.stored_offsets()
    finished = sp.finished
    if start < sp.start_offset and finished and finished[0][0] == start and \
            finished[-1][1] == sp.start_offset - 1 and all(
                a[1] + 1 == b[0] for a, b in zip(finished, finished[1:])):
        return start, [tuple(b) for b in finished] + state_batches(sp), delivered
    return sp.start_offset, state_batches(sp), delivered - (sp.start_offset - start)


class SharePersister:
    def __init__(self, service, leader) -> None:
        self.service = service
        self.store = service.store
        self.leader = leader
        #: ``leader_epoch(topic id, partition)`` -> the topic partition's leader epoch
        self.leader_epoch = lambda topic_id, index: -1
        self._changing = False

    def persist(self, group_id: str, key: tuple, sp) -> None:
        """ShareLeader.persist: store the share partition (None: it is gone)."""
        topic_id, index = key
        if sp is None:
            records = self.store.forget(group_id, topic_id, index)
        else:
            start, batches, complete = stored_view(sp)
            records = self.store.replace(group_id, topic_id, index,
                                         self.leader_epoch(topic_id, index), start, batches,
                                         complete)
        self.service.store_records(group_id, topic_id, index, records, self._stored)

    @staticmethod
    def _stored(exc) -> None:
        if exc is not None:
            log.error("share-partition state not stored", error=str(exc))

    def stored(self, group_id: str, key: tuple):
        """ShareLeader.load_state: (start offset, [(first, last, state, count)]) stored for a
        share partition the leader does not hold, None if nothing (or no start) is stored."""
        state = self.store.states.get((group_id, *key))
        if state is None or state.start_offset < 0:
            return None
        return state.start_offset, state.state_batches

    def changed(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        """A state API changed a share partition: the leader reads it again at its next
        fetch."""
        self.leader.reload(group_id, (topic_id, partition))

    def restore_all(self) -> int:
        """At start, after the store was replayed: every stored share partition into the
        leader. -> how many."""
        restored = 0
        for (group_id, topic_id, index), state in self.store.states.items():
            if state.start_offset < 0:
                continue
            self.leader.restore(group_id, (topic_id, index), state.start_offset,
                                state.state_batches)
            restored += 1
        return restored
