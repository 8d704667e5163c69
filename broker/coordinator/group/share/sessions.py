"""Share sessions (Kafka's ShareSessionCache): one per share consumer, keyed by group and member.

ShareFetch epoch 0 opens a session with the partitions it names (an existing one for the same
member is replaced); each later ShareFetch or ShareAcknowledge carries the next epoch and may add
(fetch) or forget partitions; epoch -1 closes it. At most ``max_sessions``
(``group.share.max.share.sessions``) exist: one more is SHARE_SESSION_LIMIT_REACHED.
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
        #: the connection of the session's last request (its ``closed`` is watched: a closed
        #: connection ends the session, as Kafka's disconnect listener does)
        self.conn = conn
        self.epoch = next_epoch(INITIAL_EPOCH)      # the epoch the next request carries
        #: (topic id, partition) in the order the consumer named them
        self.partitions: dict[tuple, None] = dict.fromkeys(partitions)


class ShareSessionCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str, partitions, conn=None) -> ShareSession:
        """Epoch 0: a new session, replacing the member's old one."""
        key = (group_id, member_id)
        self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_sessions:
            raise ShareSessionError(E.SHARE_SESSION_LIMIT_REACHED)
        session = self.sessions[key] = ShareSession(group_id, member_id, partitions, conn)
        return session

    def advance(self, group_id: str, member_id: str, epoch: int, add=(), forget=(),
                conn=None) -> ShareSession:
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
        if conn is not None:
            session.conn = conn
        return session

    def final(self, group_id: str, member_id: str) -> ShareSession:
        """Epoch -1: the session must exist; the caller closes it once answered."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise ShareSessionError(E.SHARE_SESSION_NOT_FOUND)
        return session

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def closed(self) -> list[ShareSession]:
        """The sessions whose connection has closed."""
        return [s for s in self.sessions.values()
                if s.conn is not None and getattr(s.conn, "closed", False)]

    def remove_group(self, group_id: str) -> None:
        for key in [k for k in self.sessions if k[0] == group_id]:
            del self.sessions[key]
