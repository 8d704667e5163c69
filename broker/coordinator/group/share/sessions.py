"""Share sessions (Kafka's ShareSessionCache): one per share consumer, keyed by group and member.

ShareFetch epoch 0 opens a session with the partitions it names (an existing one for the same
member is replaced); each later ShareFetch or ShareAcknowledge carries the next epoch and may add
(fetch) or forget partitions; epoch -1 closes it. At most ``max_sessions``
(``group.share.max.share.sessions``) exist: one more is SHARE_SESSION_LIMIT_REACHED.

A session belongs to the client connection that opened it: when that connection closes (a
consumer killed without ending its session), the session ends, as Kafka's ShareSessionCache ends
it from its ConnectionDisconnectListener (the network layer tells broker/coordinator/share/
leader.py, which releases what the member held).
"""
from __future__ import annotations

from protocol.errors import ErrorCode

E = ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INT32_MAX = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """Kafka's ShareRequestMetadata.nextEpoch: 0 and -1 stay, the top wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == INT32_MAX else epoch + 1


class ShareSessionError(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


class ShareSession:
    __slots__ = ("group_id", "member_id", "epoch", "partitions", "conn")

    def __init__(self, group_id: str, member_id: str, partitions, conn=None) -> None:
        self.group_id = group_id
        self.member_id = member_id
        #: the client connection that opened the session: its close ends the session
        self.conn = conn
        self.epoch = next_epoch(INITIAL_EPOCH)      # the epoch the next request carries
        #: (topic id, partition) in the order the consumer named them
        self.partitions: dict[tuple, None] = dict.fromkeys(partitions)


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        #: connection -> the keys of the sessions it opened (Kafka's connectionIdToSessionMap)
        self.by_connection: dict[object, set[tuple[str, str]]] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str, partitions, conn=None) -> ShareSession:
        """Epoch 0: a new session, replacing the member's old one."""
        key = (group_id, member_id)
        self.remove(group_id, member_id)
        if len(self.sessions) >= self.max_sessions:
            raise ShareSessionError(E.SHARE_SESSION_LIMIT_REACHED)
        session = self.sessions[key] = ShareSession(group_id, member_id, partitions, conn)
        if conn is not None:
            self.by_connection.setdefault(conn, set()).add(key)
        return session

    def advance(self, group_id: str, member_id: str, epoch: int, add=(),
                forget=()) -> ShareSession:
        """A request at ``epoch`` > 0 on an existing session: check the epoch, update the
        partitions, expect the next epoch."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(E.SHARE_SESSION_NOT_FOUND)
        if session.epoch != epoch:
            raise ShareSessionError(E.INVALID_SHARE_SESSION_EPOCH)
        for key in add:
            session.partitions.setdefault(key, None)
        for key in forget:
            session.partitions.pop(key, None)
        session.epoch = next_epoch(epoch)
        return session

    def final(self, group_id: str, member_id: str) -> ShareSession:
        """Epoch -1: the session must exist; the caller closes it once answered."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(E.SHARE_SESSION_NOT_FOUND)
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        key = (group_id, member_id)
        session = self.sessions.pop(key, None)
        if session is not None and session.conn is not None:
            owned = self.by_connection.get(session.conn)
            if owned is not None:
                owned.discard(key)
                if not owned:
                    del self.by_connection[session.conn]
        return session

    def opened_by(self, conn) -> list[ShareSession]:
        """The sessions ``conn`` opened and that are still open; it closed, so they are
        forgotten here (the caller ends them)."""
        keys = self.by_connection.pop(conn, ())
        return [self.sessions[key] for key in keys if key in self.sessions]

    def remove_group(self, group_id: str) -> None:
        for group, member in [k for k in self.sessions if k[0] == group_id]:
            self.remove(group, member)
