"""A protocol-level load generator for the group coordinator: simulated members over real sockets.

No client library: requests are encoded with ``protocol.messages`` and sent over asyncio streams,
pipelined, with many simulated members sharing one connection (real clients open one coordinator
connection per member; sharing keeps the load generator cheap enough to saturate the broker on a
small machine). Responses are matched to requests by correlation id, so a broker that answers out
of order (librdkafka's mock cluster answers a delayed JoinGroup late) works as well as one that
answers in order.

Pieces:

* ``Connection``: one socket; ``call(request, version)`` awaits the decoded response;
  ``flood_*`` keeps a window of pre-encoded Heartbeats in flight and counts answers.
* ``Member``: one simulated consumer (member id, generation, its connection).
* ``join_and_sync``: the classic JoinGroup (MEMBER_ID_REQUIRED, rejoin) -> SyncGroup dance, with
  the leader assigning one partition per member; retries on the errors clients retry on.
* ``form_groups``: many groups at once; ``IdleHeartbeats``: every member heartbeats at its
  normal interval; ``heartbeat_flood``: Heartbeats as fast as the pipeline allows.
* KIP-848 consumer groups: ``ConsumerMember`` and ``consumer_member_loop`` (a member that joins
  with ConsumerGroupHeartbeat epoch 0 and then heartbeats as the Java client does: at once to
  acknowledge a changed assignment, else every heartbeat_interval_ms the broker gives);
  ``form_consumer_groups`` (many groups at once, until each holds a disjoint covering assignment
  at one epoch), ``describe_consumer_group`` (checks that with ConsumerGroupDescribe),
  ``leave_consumer_groups``; ``IdleHeartbeats`` and ``heartbeat_flood`` take a
  ``request_for(member)`` to send ConsumerGroupHeartbeat instead of Heartbeat.
* ``create_topic``: CreateTopics, then Metadata until every partition has a leader.

Every wait has a deadline.
"""
from __future__ import annotations

import asyncio
import os
import pathlib
import random
import struct
import sys
import time
import uuid
from dataclasses import dataclass, field

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from protocol.framing import encode_request  # noqa: E402
from protocol.messages import (  # noqa: E402
    APIS, ApiVersionsRequest, ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest,
    CreateTopicsRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, MetadataRequest,
    SyncGroupRequest, SyncGroupResponse)

NONE = 0
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15
COORDINATOR_LOAD_IN_PROGRESS = 14
MEMBER_ID_REQUIRED = 79
INVALID_REQUEST = 42
FENCED_MEMBER_EPOCH = 110
TOPIC_ALREADY_EXISTS = 36
REQUEST_TIMED_OUT = 7
RETRIABLE = {REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, NOT_COORDINATOR,
             COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS}
# ConsumerGroupHeartbeat errors a consumer retries after a backoff (the others it rejoins on, or
# fails with)
CONSUMER_RETRIABLE = {NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
                      REQUEST_TIMED_OUT}

API_JOIN_GROUP, API_HEARTBEAT, API_LEAVE_GROUP, API_SYNC_GROUP, API_VERSIONS = 11, 12, 13, 14, 18
API_METADATA, API_CREATE_TOPICS = 3, 19
API_CONSUMER_GROUP_HEARTBEAT, API_CONSUMER_GROUP_DESCRIBE = 68, 69
# Versions we would like to speak; lowered to what the broker advertises.
WANTED = {API_JOIN_GROUP: 9, API_SYNC_GROUP: 5, API_HEARTBEAT: 4, API_LEAVE_GROUP: 5}
# The same for APIs a broker may lack (then left out of negotiate()'s answer): KIP-848 consumer
# groups and what their workload needs (a topic to assign).
OPTIONAL = {API_CONSUMER_GROUP_HEARTBEAT: 1, API_CONSUMER_GROUP_DESCRIBE: 1,
            API_CREATE_TOPICS: 7, API_METADATA: 12}

_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">ihh")  # size, api key, api version: the bytes before the correlation id
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

TOPIC = "bench-topic"


def subscription_metadata(topics: list[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = [_I16.pack(0), _I32.pack(len(topics))]
    for t in topics:
        raw = t.encode()
        out += [_I16.pack(len(raw)), raw]
    out.append(_I32.pack(-1))
    return b"".join(out)


def assignment_bytes(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: version, [(topic, [partition])], null user data."""
    raw = topic.encode()
    return b"".join([_I16.pack(0), _I32.pack(1), _I16.pack(len(raw)), raw,
                     _I32.pack(len(partitions)), *(_I32.pack(p) for p in partitions),
                     _I32.pack(-1)])


METADATA = subscription_metadata([TOPIC])


class BrokerError(Exception):
    pass


class Connection:
    """One pipelined connection shared by many simulated members. Answers are parsed in the
    transport's data_received (an asyncio.Protocol, no reader task between the socket and the
    waiting member), so the load generator spends as little as it can per answer: on 2 cores
    it shares the machine with the broker it measures."""

    def __init__(self, host: str, port: int, client_id: str = "bench") -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future | None = None
        self.buf = bytearray()
        self.pending: dict[int, object] = {}
        self.next_correlation = 1
        self.closed_error: BaseException | None = None
        # heartbeat flood state
        self.flood_frames: list[tuple[bytes, bytes]] = []
        self.flood_index = 0
        self.flood_on = False
        self.flood_ok = 0
        self.flood_errors: dict[int, int] = {}
        self.flood_error_offset = 0
        self.flood_in_flight = 0

    async def open(self, timeout: float = 10.0) -> "Connection":
        loop = asyncio.get_running_loop()
        self.lost = loop.create_future()
        self.transport, _ = await asyncio.wait_for(
            loop.create_connection(lambda: _ConnectionProtocol(self), self.host, self.port),
            timeout)
        return self

    def _correlation(self) -> int:
        c = self.next_correlation
        self.next_correlation = c + 1 if c < 0x7FFFFFFF else 1
        return c

    def call_nowait(self, request, version: int) -> asyncio.Future:
        """Send now; the future resolves to the decoded response (or raises)."""
        if self.closed_error is not None:
            raise ConnectionError(f"connection closed: {self.closed_error!r}")
        api = APIS[type(request).api_key]
        corr = self._correlation()
        fut = asyncio.get_running_loop().create_future()
        self.pending[corr] = (fut, api, version)
        self.transport.write(encode_request(api.key, version, corr, self.client_id, request))
        return fut

    async def call(self, request, version: int, timeout: float = 60.0):
        return await asyncio.wait_for(self.call_nowait(request, version), timeout)

    def _received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pending = self.pending
        unpack_i32 = _I32.unpack_from
        pos = 0
        end = len(buf)
        flood_answers = 0
        while end - pos >= 4:
            (size,) = unpack_i32(buf, pos)
            if end - pos - 4 < size:
                break
            start = pos + 4
            (corr,) = unpack_i32(buf, start)
            entry = pending.pop(corr, None)
            if entry is None:
                pass  # an answer to something we gave up on
            elif entry is True:  # a flood Heartbeat
                (code,) = _I16.unpack_from(buf, start + self.flood_error_offset)
                if code == 0:
                    self.flood_ok += 1
                else:
                    self.flood_errors[code] = self.flood_errors.get(code, 0) + 1
                flood_answers += 1
            else:
                fut, api, version = entry
                if not fut.done():
                    frame = bytes(buf[start:start + size])
                    hv = api.response_header_version(version)
                    off = 4 if hv == 0 else 5
                    try:
                        fut.set_result(api.response.decode(frame, version, off))
                    except Exception as exc:  # noqa: BLE001 - handed to the caller
                        lenient = _lenient_sync_group(api.key, frame, version, off)
                        if lenient is not None:
                            fut.set_result(lenient)
                        else:
                            fut.set_exception(exc)
            pos = start + size
        if pos:
            del buf[:pos]
        if flood_answers:
            self.flood_in_flight -= flood_answers
            if self.flood_on:
                self._flood_send(flood_answers)

    def _fail(self, exc: BaseException) -> None:
        self.closed_error = exc
        self.flood_on = False
        for entry in self.pending.values():
            if entry is not True and not entry[0].done():
                entry[0].set_exception(ConnectionError(f"connection lost: {exc!r}"))
        self.pending.clear()

    # ----------------------------------------------------------------------- heartbeat flood

    def flood_prepare(self, members: list, version: int, request_for=None) -> None:
        """Pre-encode one heartbeat per member (a classic Heartbeat, or what
        ``request_for(member)`` returns); only the correlation id changes per send. The answer's
        error code must follow its throttle time (Heartbeat v1+, ConsumerGroupHeartbeat)."""
        if request_for is None:
            def request_for(m):
                return HeartbeatRequest(group_id=m.group_id, generation_id=m.generation,
                                        member_id=m.member_id)
        frames = []
        api_key = API_HEARTBEAT
        for m in members:
            request = request_for(m)
            api_key = type(request).api_key
            full = encode_request(api_key, version, 0, self.client_id, request)
            frames.append((full[:8], full[12:]))
        self.flood_frames = frames
        self.flood_index = 0
        api = APIS[api_key]
        header = 4 if api.response_header_version(version) == 0 else 5
        throttle = 4 if version >= 1 or api_key != API_HEARTBEAT else 0
        self.flood_error_offset = header + throttle

    def flood_start(self, window: int) -> None:
        self.flood_on = True
        self._flood_send(window)

    def _flood_send(self, n: int) -> None:
        if not self.flood_frames or self.closed_error is not None:
            return
        frames = self.flood_frames
        count = len(frames)
        i = self.flood_index
        pending = self.pending
        out = []
        for _ in range(n):
            corr = self.next_correlation
            self.next_correlation = corr + 1 if corr < 0x7FFFFFFF else 1
            head, tail = frames[i]
            out.append(head)
            out.append(_I32.pack(corr))
            out.append(tail)
            pending[corr] = True
            i += 1
            if i == count:
                i = 0
        self.flood_index = i
        self.flood_in_flight += n
        self.transport.write(b"".join(out))

    async def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
            try:
                await asyncio.wait_for(asyncio.shield(self.lost), 2)
            except (OSError, asyncio.TimeoutError, ConnectionError):
                pass


class _ConnectionProtocol(asyncio.Protocol):
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.data_received = conn._received

    def connection_lost(self, exc: BaseException | None) -> None:
        conn = self.conn
        conn._fail(exc or ConnectionError("closed by the broker"))
        if conn.lost is not None and not conn.lost.done():
            conn.lost.set_result(None)


def _lenient_sync_group(api_key: int, frame: bytes, version: int, off: int):
    """A SyncGroup answer (non-flexible versions) whose assignment is null, which Kafka never
    sends (the field is not nullable) but librdkafka's mock cluster does: read it as empty."""
    if api_key != API_SYNC_GROUP or version >= 4:
        return None
    try:
        pos = off
        throttle = 0
        if version >= 1:
            (throttle,) = _I32.unpack_from(frame, pos)
            pos += 4
        (code,) = _I16.unpack_from(frame, pos)
        (size,) = _I32.unpack_from(frame, pos + 2)
        assignment = b"" if size < 0 else bytes(frame[pos + 6:pos + 6 + size])
    except struct.error:
        return None
    return SyncGroupResponse(throttle_time_ms=throttle, error_code=code, assignment=assignment)


async def negotiate(host: str, port: int, caps: dict[int, int] | None = None) -> dict[int, int]:
    """api key -> version to use: the highest of ours (WANTED, lowered by `caps`) that the
    broker advertises."""
    conn = await Connection(host, port, "bench-versions").open()
    try:
        resp = await conn.call(ApiVersionsRequest(), 0, timeout=10)
    finally:
        await conn.close()
    if resp.error_code:
        raise BrokerError(f"ApiVersions error {resp.error_code}")
    ranges = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
    versions = {}
    for key, wanted in list(WANTED.items()) + list(OPTIONAL.items()):
        if key not in ranges:
            if key in OPTIONAL:
                continue
            raise BrokerError(f"broker does not advertise api key {key}")
        low, high = ranges[key]
        version = min(wanted, high, APIS[key].max_version, (caps or {}).get(key, wanted))
        if version < max(low, APIS[key].min_version):
            if key in OPTIONAL:
                continue
            raise BrokerError(f"no common version of api key {key}: broker {low}-{high}")
        versions[key] = version
    return versions


@dataclass(eq=False)
class Member:
    conn: Connection
    group_id: str
    index: int
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    assignment: bytes = b""
    joins: int = 0
    errors: dict = field(default_factory=dict)


@dataclass
class JoinStats:
    """Times (time.perf_counter) across one formation of one or many groups."""
    first_join_sent: float = 0.0
    last_join_sent: float = 0.0           # the last JoinGroup of any kind
    last_join_with_id_sent: float = 0.0   # the last JoinGroup carrying a member id
    join_round_sent: float = 0.0          # when the last member sent its first JoinGroup that
    #                                       was not answered MEMBER_ID_REQUIRED
    last_sync_received: float = 0.0
    member_id_required: int = 0
    joins: int = 0
    syncs: int = 0
    generations: list = field(default_factory=list)
    complete_groups: set = field(default_factory=set)
    errors: dict = field(default_factory=dict)

    def note_error(self, api: str, code: int) -> None:
        key = f"{api}:{code}"
        self.errors[key] = self.errors.get(key, 0) + 1


class Gate:
    """Members that got MEMBER_ID_REQUIRED wait here until every member has its id (or
    `timeout`), so the rejoins go out together, like a fleet of consumers starting at once."""

    def __init__(self, expected: int, timeout: float) -> None:
        self.expected = expected
        self.seen = 0
        self.event = asyncio.Event()
        self.timeout = timeout

    def arrive(self) -> None:
        self.seen += 1
        if self.seen >= self.expected:
            self.event.set()

    async def wait(self) -> None:
        try:
            await asyncio.wait_for(self.event.wait(), self.timeout)
        except asyncio.TimeoutError:
            self.event.set()


class GroupProgress:
    """Which members of one group hold a SyncGroup answer, and for which generation. The group
    is complete (stable with every member) once all of them hold one for the same generation."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.synced: dict[int, int] = {}
        self.done = asyncio.Event()
        # the same moment as a future its members wait on together (asyncio.wait on one shared
        # future: no task per waiting member, as wait_for(done.wait()) makes)
        self.completed = asyncio.get_running_loop().create_future()
        self.completed_at = 0.0
        self.generation = -1
        self.follower_syncs: dict[int, int] = {}
        self.leader_waiter: tuple | None = None

    def synced_at(self, member: Member, now: float) -> None:
        self.synced[member.index] = member.generation
        if len(self.synced) == self.size and len(set(self.synced.values())) == 1:
            self.completed_at = now
            self.generation = member.generation
            self.done.set()
            if not self.completed.done():
                self.completed.set_result(None)

    def lost(self, member: Member) -> None:
        self.synced.pop(member.index, None)

    def follower_sync_sent(self, generation: int) -> None:
        self.follower_syncs[generation] = self.follower_syncs.get(generation, 0) + 1
        waiter = self.leader_waiter
        if waiter is not None and waiter[0] == generation and \
                self.follower_syncs[generation] >= waiter[1]:
            waiter[2].set()

    async def followers_sent(self, generation: int, followers: int, timeout: float) -> None:
        """Until `followers` members have sent SyncGroup for `generation` (or `timeout`)."""
        if self.follower_syncs.get(generation, 0) >= followers:
            return
        event = asyncio.Event()
        self.leader_waiter = (generation, followers, event)
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            self.leader_waiter = None


async def join_and_sync(member: Member, versions: dict[int, int], stats: JoinStats,
                        gate: Gate | None, progress: GroupProgress, deadline: float,
                        session_timeout_ms: int, rebalance_timeout_ms: int,
                        group_members_hint: int, heartbeat_s: float) -> None:
    """JoinGroup (MEMBER_ID_REQUIRED -> rejoin) then SyncGroup, then Heartbeat every
    `heartbeat_s` until every member of the group is stable in one generation; rejoins on
    REBALANCE_IN_PROGRESS, as a consumer does. Raises asyncio.TimeoutError past `deadline`
    (time.perf_counter)."""
    hv = versions[API_HEARTBEAT]
    while True:
        await _join_then_sync(member, versions, stats, gate, progress, deadline,
                              session_timeout_ms, rebalance_timeout_ms, group_members_hint)
        gate = None
        progress.synced_at(member, time.perf_counter())
        wait = heartbeat_s * random.random()  # spread the first Heartbeats over the interval
        rejoin = False
        while not progress.done.is_set():
            left = deadline - time.perf_counter()
            if left <= 0:
                raise asyncio.TimeoutError(f"group {member.group_id} not complete")
            await asyncio.wait((progress.completed,), timeout=min(wait, left))
            if progress.done.is_set():
                return
            wait = heartbeat_s
            resp = await member.conn.call_nowait(HeartbeatRequest(
                group_id=member.group_id, generation_id=member.generation,
                member_id=member.member_id), hv)
            code = resp.error_code
            if code == NONE:
                continue
            stats.note_error("heartbeat", code)
            if code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
                if code == UNKNOWN_MEMBER_ID:
                    member.member_id = ""
                rejoin = True
                break
            if code not in RETRIABLE:
                raise BrokerError(f"Heartbeat error {code}")
        if not rejoin:
            return
        progress.lost(member)


async def _join_then_sync(member: Member, versions: dict[int, int], stats: JoinStats,
                          gate: Gate | None, progress: GroupProgress, deadline: float,
                          session_timeout_ms: int,
                          rebalance_timeout_ms: int, group_members_hint: int) -> None:
    jv = versions[API_JOIN_GROUP]
    sv = versions[API_SYNC_GROUP]
    conn = member.conn
    first = gate is not None
    in_round = False
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            raise asyncio.TimeoutError(f"member {member.index} of {member.group_id} not stable")
        req = JoinGroupRequest(group_id=member.group_id, session_timeout_ms=session_timeout_ms,
                               rebalance_timeout_ms=rebalance_timeout_ms,
                               member_id=member.member_id, group_instance_id=None,
                               protocol_type="consumer",
                               protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                                   name="range", metadata=METADATA)],
                               reason=None)
        fut = conn.call_nowait(req, jv)
        now = time.perf_counter()
        if not stats.first_join_sent:
            stats.first_join_sent = now
        stats.last_join_sent = now
        if member.member_id:
            stats.last_join_with_id_sent = now
        stats.joins += 1
        member.joins += 1
        resp = await fut  # form_groups holds the deadline
        if first:
            gate.arrive()
        code = resp.error_code
        if code != MEMBER_ID_REQUIRED and not in_round:
            # this member's part of the join round: its first JoinGroup the broker took
            in_round = True
            if now > stats.join_round_sent:
                stats.join_round_sent = now
        if code == MEMBER_ID_REQUIRED:
            stats.member_id_required += 1
            member.member_id = resp.member_id
            if first:
                first = False
                await gate.wait()
            continue
        first = False
        if code == UNKNOWN_MEMBER_ID:
            stats.note_error("join", code)
            member.member_id = ""
            continue
        if code != NONE:
            stats.note_error("join", code)
            if code not in RETRIABLE:
                raise BrokerError(f"JoinGroup error {code}")
            await asyncio.sleep(0.05)
            continue
        member.member_id = resp.member_id
        member.generation = resp.generation_id
        member.leader = resp.leader == resp.member_id
        assignments = []
        if member.leader:
            ids = [m.member_id for m in resp.members]
            per = [[] for _ in ids]
            for p in range(max(len(ids), group_members_hint)):
                per[p % len(ids)].append(p)
            assignments = [SyncGroupRequest.SyncGroupRequestAssignment(
                member_id=mid, assignment=assignment_bytes(TOPIC, parts))
                for mid, parts in zip(ids, per)]
        sreq = SyncGroupRequest(group_id=member.group_id, generation_id=member.generation,
                                member_id=member.member_id, group_instance_id=None,
                                protocol_type="consumer", protocol_name=resp.protocol_name,
                                assignments=assignments)
        if member.leader:
            # The leader syncs after its followers, as a leader busy computing the assignment
            # does. librdkafka's mock cluster needs this order: it answers a follower's
            # SyncGroup that comes after the leader's with INVALID_REQUEST.
            await progress.followers_sent(member.generation, len(resp.members) - 1,
                                          min(1.0, max(0.0, deadline - time.perf_counter())))
            fut = conn.call_nowait(sreq, sv)
        else:
            fut = conn.call_nowait(sreq, sv)
            progress.follower_sync_sent(member.generation)
        sresp = await fut
        stats.syncs += 1
        if sresp.error_code == NONE:
            member.assignment = sresp.assignment
            return
        stats.note_error("sync", sresp.error_code)
        if sresp.error_code == UNKNOWN_MEMBER_ID:
            member.member_id = ""
        elif sresp.error_code not in RETRIABLE and sresp.error_code != INVALID_REQUEST:
            # (the mock cluster answers INVALID_REQUEST to a SyncGroup in a state it did not
            # expect; librdkafka's consumer rejoins on it, and so do we)
            raise BrokerError(f"SyncGroup error {sresp.error_code}")


# ------------------------------------------------------------------ KIP-848 consumer groups

_CGH_TP = ConsumerGroupHeartbeatRequest.TopicPartitions


@dataclass(eq=False)
class ConsumerMember:
    """One simulated KIP-848 consumer: a client-generated member id (ConsumerGroupHeartbeat
    v1; v0 takes the broker's), its member epoch and the partitions it owns, as its last answer
    left them ({topic_id: frozenset of partitions})."""
    conn: Connection
    group_id: str
    index: int
    topic: str
    member_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    epoch: int = 0
    owned: dict = field(default_factory=dict)
    heartbeats: int = 0
    acks: int = 0
    joins: int = 0
    interval_ms: int = 0


def consumer_join_request(member: ConsumerMember,
                          rebalance_timeout_ms: int) -> ConsumerGroupHeartbeatRequest:
    """The first heartbeat (epoch 0): everything the Java client sends when it (re)joins."""
    return ConsumerGroupHeartbeatRequest(
        group_id=member.group_id, member_id=member.member_id, member_epoch=0, instance_id=None,
        rack_id=None, rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=[member.topic], subscribed_topic_regex=None,
        server_assignor=None, topic_partitions=[])


def consumer_heartbeat_request(member: ConsumerMember,
                               owned: dict | None = None) -> ConsumerGroupHeartbeatRequest:
    """A later heartbeat: the member epoch, and the owned partitions only when they changed
    since the last heartbeat (``owned``; None otherwise), as the Java client sends it."""
    tps = None
    if owned is not None:
        tps = [_CGH_TP(topic_id=t, partitions=sorted(p))
               for t, p in sorted(owned.items(), key=lambda kv: kv[0].bytes) if p]
    return ConsumerGroupHeartbeatRequest(
        group_id=member.group_id, member_id=member.member_id, member_epoch=member.epoch,
        instance_id=None, rack_id=None, rebalance_timeout_ms=-1, subscribed_topic_names=None,
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=tps)


def consumer_leave_request(member: ConsumerMember) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(
        group_id=member.group_id, member_id=member.member_id, member_epoch=-1,
        instance_id=None, rack_id=None, rebalance_timeout_ms=-1, subscribed_topic_names=None,
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=None)


@dataclass
class ConsumerJoinStats:
    """Times (time.perf_counter) across one formation of one or many consumer groups."""
    first_sent: float = 0.0        # the first member's first heartbeat
    last_first_sent: float = 0.0   # the last member's first heartbeat
    last_first_answer: float = 0.0  # when the last member had the answer to its first one
    completed_at: float = 0.0      # when the last group became complete
    heartbeats: int = 0            # requests of every kind
    acks: int = 0                  # heartbeats sent at once to acknowledge a new assignment
    rejoins: int = 0               # epoch-0 heartbeats after a fence
    max_interval_ms: int = 0       # heartbeat_interval_ms the broker gave
    complete_groups: set = field(default_factory=set)
    epochs: dict = field(default_factory=dict)   # group -> epoch it completed at
    errors: dict = field(default_factory=dict)

    def note_error(self, code: int) -> None:
        key = f"heartbeat:{code}"
        self.errors[key] = self.errors.get(key, 0) + 1


def _partitions(owned: dict):
    for t, ps in owned.items():
        for p in ps:
            yield (t, p)


class ConsumerProgress:
    """One consumer group's members as their last answers left them. The group is complete
    (stable) once every member is at one epoch, holds partitions (there are at least as many
    as members) and their partitions are disjoint and cover the topic; counted incrementally,
    so a check costs O(1) per answer. (Holding partitions matters when the broker defers a
    target assignment: until then the first member holds everything at the old epoch.)"""

    def __init__(self, size: int, partitions: int) -> None:
        self.size = size
        self.partitions = partitions
        self.state: dict[int, tuple[int, dict]] = {}   # member index -> (epoch, owned)
        self.at_epoch: dict[int, int] = {}              # epoch -> members at it
        self.owners: dict[tuple, int] = {}              # (topic id, partition) -> holders
        self.overlaps = 0                               # partitions with two holders or more
        self.holding = 0                                # members that hold partitions
        self.done = asyncio.Event()
        self.completed = asyncio.get_running_loop().create_future()  # see GroupProgress
        self.completed_at = 0.0
        self.epoch = -1

    def update(self, member: ConsumerMember, now: float) -> None:
        old = self.state.get(member.index)
        if old is not None:
            epoch, owned = old
            self.at_epoch[epoch] -= 1
            if owned:
                self.holding -= 1
            if owned is not member.owned:
                for key in _partitions(owned):
                    n = self.owners[key] - 1
                    if n == 1:
                        self.overlaps -= 1
                    if n:
                        self.owners[key] = n
                    else:
                        del self.owners[key]
        self.state[member.index] = (member.epoch, member.owned)
        self.at_epoch[member.epoch] = self.at_epoch.get(member.epoch, 0) + 1
        if member.owned:
            self.holding += 1
        if old is None or old[1] is not member.owned:
            for key in _partitions(member.owned):
                n = self.owners.get(key, 0) + 1
                if n == 2:
                    self.overlaps += 1
                self.owners[key] = n
        if (not self.done.is_set() and member.epoch > 0
                and self.at_epoch[member.epoch] == self.size
                and self.holding == min(self.size, self.partitions)
                and len(self.owners) == self.partitions and not self.overlaps):
            self.completed_at = now
            self.epoch = member.epoch
            self.done.set()
            self.completed.set_result(None)


async def consumer_member_loop(member: ConsumerMember, version: int, progress: ConsumerProgress,
                               stats: ConsumerJoinStats, deadline: float,
                               rebalance_timeout_ms: int) -> None:
    """Join with epoch 0, then heartbeat as the Java client does until the group is complete:
    at once after an answer that changed the assignment (acknowledging it: the owned
    partitions, which are the new assignment since this client revokes and takes partitions
    instantly), else heartbeat_interval_ms after the previous heartbeat was sent; one request
    in flight. FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: give up everything and rejoin (epoch
    0, same member id). Raises asyncio.TimeoutError past `deadline` (time.perf_counter)."""
    conn = member.conn
    request = consumer_join_request(member, rebalance_timeout_ms)
    first = True
    answered = False
    member.joins += 1
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            raise asyncio.TimeoutError(f"consumer {member.index} of {member.group_id} "
                                       f"not stable")
        # stamped before the write: on a small machine the broker, woken by it, can run before
        # the write returns
        sent = time.perf_counter()
        fut = conn.call_nowait(request, version)
        if first:
            first = False
            if not stats.first_sent:
                stats.first_sent = sent
            stats.last_first_sent = max(stats.last_first_sent, sent)
        stats.heartbeats += 1
        member.heartbeats += 1
        resp = await fut  # form_consumer_groups holds the deadline
        now = time.perf_counter()
        if not answered:
            answered = True
            stats.last_first_answer = max(stats.last_first_answer, now)
        code = resp.error_code
        if code != NONE:
            stats.note_error(code)
            if code in (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID):
                member.epoch = 0
                member.owned = {}
                progress.update(member, now)
                request = consumer_join_request(member, rebalance_timeout_ms)
                stats.rejoins += 1
                member.joins += 1
                continue
            if code in CONSUMER_RETRIABLE:
                await asyncio.sleep(0.05)
                continue
            raise BrokerError(f"ConsumerGroupHeartbeat error {code}: {resp.error_message}")
        if resp.member_id and not member.member_id:
            member.member_id = resp.member_id   # v0: the broker names the member
        member.epoch = resp.member_epoch
        member.interval_ms = resp.heartbeat_interval_ms
        if resp.heartbeat_interval_ms > stats.max_interval_ms:
            stats.max_interval_ms = resp.heartbeat_interval_ms
        changed = False
        if resp.assignment is not None:
            new = {tp.topic_id: frozenset(tp.partitions)
                   for tp in resp.assignment.topic_partitions if tp.partitions}
            if new != member.owned:
                member.owned = new
                changed = True
        progress.update(member, now)
        if progress.done.is_set():
            return
        if changed:
            request = consumer_heartbeat_request(member, member.owned)
            stats.acks += 1
            member.acks += 1
            continue
        request = consumer_heartbeat_request(member)
        wait = sent + member.interval_ms / 1000 - now
        if wait > 0:
            await asyncio.wait((progress.completed,), timeout=max(0.001, min(wait, deadline - now)))
            if progress.done.is_set():
                return


async def _run_members(coroutines: list, deadline: float, partial_ok: bool) -> None:
    """Run one task per member until all return, one fails, or ``deadline`` (time.perf_counter)
    passes: the deadline is held here, once, not by a wait_for around every call of every
    member. A timeout raises asyncio.TimeoutError unless ``partial_ok``."""
    tasks = [asyncio.ensure_future(c) for c in coroutines]
    try:
        done, running = await asyncio.wait(tasks, timeout=max(0.0, deadline - time.perf_counter()),
                                           return_when=asyncio.FIRST_EXCEPTION)
        failed = next((t.exception() for t in done if t.exception() is not None), None)
        if failed is None and running:
            failed = asyncio.TimeoutError(f"{len(running)} members not stable by the deadline")
        if failed is not None and not (partial_ok and isinstance(failed, asyncio.TimeoutError)):
            raise failed
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def form_consumer_groups(members: list[ConsumerMember], version: int, partitions: int,
                               timeout: float, rebalance_timeout_ms: int,
                               partial_ok: bool = False) -> ConsumerJoinStats:
    """Every member sends its first ConsumerGroupHeartbeat at once, then heartbeats as a client
    does until its group is complete (every member at one epoch, holding a disjoint share that
    covers the `partitions` of the topic). Returns the timing stats (raises on timeout, unless
    `partial_ok`: then complete_groups says which groups formed)."""
    stats = ConsumerJoinStats()
    deadline = time.perf_counter() + timeout
    progress: dict[str, ConsumerProgress] = {}
    for m in members:
        if m.group_id not in progress:
            progress[m.group_id] = ConsumerProgress(0, partitions)
        progress[m.group_id].size += 1
    await _run_members([consumer_member_loop(m, version, progress[m.group_id], stats, deadline,
                                             rebalance_timeout_ms) for m in members],
                       deadline, partial_ok)
    stats.complete_groups = {g for g, p in progress.items() if p.done.is_set()}
    stats.epochs = {g: p.epoch for g, p in progress.items() if p.done.is_set()}
    stats.completed_at = max(p.completed_at for p in progress.values())
    return stats


async def describe_consumer_group(conn: Connection, version: int, group_id: str, size: int,
                                  partitions: int) -> dict:
    """ConsumerGroupDescribe, and whether it shows the group complete: `size` members, every
    member epoch equal to the group epoch and the assignment epoch, their assignments disjoint
    and covering the `partitions`."""
    resp = await conn.call(ConsumerGroupDescribeRequest(group_ids=[group_id],
                                                        include_authorized_operations=False),
                           version, timeout=30)
    g = resp.groups[0]
    out = {"error_code": g.error_code, "state": g.group_state, "group_epoch": g.group_epoch,
           "assignment_epoch": g.assignment_epoch, "members": len(g.members),
           "assignor": g.assignor_name}
    problems = []
    if g.error_code:
        problems.append(f"error {g.error_code}: {g.error_message}")
    if len(g.members) != size:
        problems.append(f"{len(g.members)} members, not {size}")
    epochs = sorted({mm.member_epoch for mm in g.members})
    if epochs != [g.group_epoch] or g.assignment_epoch != g.group_epoch:
        problems.append(f"member epochs {epochs[:5]}, group epoch {g.group_epoch}, "
                        f"assignment epoch {g.assignment_epoch}")
    held: list = []
    for mm in g.members:
        for tp in (mm.assignment.topic_partitions if mm.assignment else []):
            held += [(tp.topic_id, p) for p in tp.partitions]
    if len(held) != len(set(held)) or len(set(held)) != partitions:
        problems.append(f"{len(set(held))} of {partitions} partitions held, "
                        f"{len(held) - len(set(held))} twice")
    out["stable"] = not problems
    if problems:
        out["problems"] = problems
    return out


async def leave_consumer_groups(members: list[ConsumerMember], version: int,
                                timeout: float = 30.0) -> int:
    """ConsumerGroupHeartbeat with epoch -1 for every member; returns answers with errors."""
    futs = [m.conn.call_nowait(consumer_leave_request(m), version)
            for m in members if m.conn.closed_error is None and m.epoch > 0]
    if not futs:
        return 0
    done = await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), timeout)
    return sum(1 for r in done if isinstance(r, BaseException) or r.error_code)


async def create_topic(host: str, port: int, versions: dict[int, int], name: str,
                       partitions: int, timeout: float = 30.0) -> None:
    """CreateTopics (an existing topic is fine), then Metadata until every partition has a
    leader (Kafka's broker learns of a new topic from its controller a moment later)."""
    conn = await Connection(host, port, "bench-admin").open()
    try:
        resp = await conn.call(CreateTopicsRequest(
            topics=[CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions,
                                                       replication_factor=1, assignments=[],
                                                       configs=[])],
            timeout_ms=int(timeout * 1000)), versions[API_CREATE_TOPICS], timeout=timeout)
        code = resp.topics[0].error_code
        if code not in (NONE, TOPIC_ALREADY_EXISTS):
            raise BrokerError(f"CreateTopics {name}: error {code} {resp.topics[0].error_message}")
        deadline = time.perf_counter() + timeout
        while True:
            meta = await conn.call(MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                allow_auto_topic_creation=False), versions[API_METADATA], timeout=timeout)
            t = meta.topics[0]
            if (t.error_code == NONE and len(t.partitions) == partitions
                    and all(p.leader_id >= 0 for p in t.partitions)):
                return
            if time.perf_counter() > deadline:
                raise BrokerError(f"topic {name} has no leader for every partition after "
                                  f"{timeout} s: {t}")
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


async def open_connections(host: str, port: int, count: int, prefix: str) -> list[Connection]:
    conns = []
    for start in range(0, count, 50):  # a few at a time: do not flood the accept queue
        batch = [Connection(host, port, f"{prefix}-{i}") for i in range(start, min(count,
                                                                                  start + 50))]
        await asyncio.gather(*(c.open() for c in batch))
        conns += batch
    return conns


def place_members(conns: list[Connection], groups: list[str], per_group: int) -> list[Member]:
    """Members of consecutive groups fill one connection after another (group-major)."""
    total = len(groups) * per_group
    per_conn = -(-total // len(conns))
    members = []
    for g, group_id in enumerate(groups):
        for i in range(per_group):
            n = g * per_group + i
            members.append(Member(conn=conns[n // per_conn], group_id=group_id, index=n))
    return members


async def form_groups(members: list[Member], versions: dict[int, int], timeout: float,
                      session_timeout_ms: int, rebalance_timeout_ms: int,
                      per_group: int, heartbeat_s: float = 0.1,
                      partial_ok: bool = False) -> JoinStats:
    """All members join and sync at once, and heartbeat every `heartbeat_s` until their group
    is complete; returns the timing stats (raises on timeout, unless `partial_ok`: then
    complete_groups says which groups formed). last_sync_received is when the last group
    became complete."""
    stats = JoinStats()
    deadline = time.perf_counter() + timeout
    gates: dict[str, Gate] = {}
    progress: dict[str, GroupProgress] = {}
    for m in members:
        if m.group_id not in gates:
            gates[m.group_id] = Gate(0, min(5.0, timeout))
            progress[m.group_id] = GroupProgress(0)
        gates[m.group_id].expected += 1
        progress[m.group_id].size += 1
    await _run_members([join_and_sync(m, versions, stats, gates[m.group_id],
                                      progress[m.group_id], deadline, session_timeout_ms,
                                      rebalance_timeout_ms, per_group, heartbeat_s)
                        for m in members], deadline, partial_ok)
    stats.complete_groups = {g for g, p in progress.items() if p.done.is_set()}
    stats.last_sync_received = max(p.completed_at for p in progress.values())
    stats.generations = sorted({p.generation for p in progress.values() if p.done.is_set()})
    return stats


async def leave_groups(members: list[Member], versions: dict[int, int],
                       timeout: float = 10.0) -> int:
    """LeaveGroup for every member (batched per group from v3); returns answers with errors."""
    lv = versions[API_LEAVE_GROUP]
    by_group: dict[str, list[Member]] = {}
    for m in members:
        if m.member_id:
            by_group.setdefault(m.group_id, []).append(m)
    futs = []
    for group_id, ms in by_group.items():
        conn = ms[0].conn
        if conn.closed_error is not None:
            continue
        if lv >= 3:
            futs.append(conn.call_nowait(LeaveGroupRequest(
                group_id=group_id, members=[LeaveGroupRequest.MemberIdentity(
                    member_id=m.member_id) for m in ms]), lv))
        else:
            for m in ms:
                futs.append(m.conn.call_nowait(LeaveGroupRequest(group_id=group_id,
                                                                 member_id=m.member_id), lv))
    if not futs:
        return 0
    done = await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), timeout)
    return sum(1 for r in done if isinstance(r, BaseException) or r.error_code)


class IdleHeartbeats:
    """Each member heartbeats once per `interval`, spread evenly over the interval, the way a
    fleet of idle consumers does. Runs until stop()."""

    def __init__(self, members: list, versions: dict[int, int], interval: float,
                 tick: float = 0.05, request_for=None) -> None:
        """``request_for(member)``: the request to send (default: a classic Heartbeat)."""
        self.members = members
        self.request_for = request_for
        self.version = versions[API_HEARTBEAT if request_for is None
                                else API_CONSUMER_GROUP_HEARTBEAT]
        self.interval = interval
        self.tick = tick
        self.ok = 0
        self.errors: dict[int, int] = {}
        self.task: asyncio.Task | None = None
        self.outstanding: set[asyncio.Future] = set()

    def start(self) -> None:
        self.task = asyncio.ensure_future(self._run())

    def _done(self, fut: asyncio.Future) -> None:
        self.outstanding.discard(fut)
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            self.errors[-1] = self.errors.get(-1, 0) + 1
        elif fut.result().error_code:
            code = fut.result().error_code
            self.errors[code] = self.errors.get(code, 0) + 1
        else:
            self.ok += 1

    async def _run(self) -> None:
        slots = max(1, round(self.interval / self.tick))
        start = time.perf_counter()
        tick = 0
        while True:
            n = len(self.members)  # the list may grow while groups form
            lo = (tick % slots) * n // slots
            hi = ((tick % slots) + 1) * n // slots
            for m in self.members[lo:hi]:
                if m.conn.closed_error is not None:
                    continue
                request = (HeartbeatRequest(group_id=m.group_id, generation_id=m.generation,
                                            member_id=m.member_id)
                           if self.request_for is None else self.request_for(m))
                fut = m.conn.call_nowait(request, self.version)
                self.outstanding.add(fut)
                fut.add_done_callback(self._done)
            tick += 1
            await asyncio.sleep(max(0.0, start + tick * self.tick - time.perf_counter()))

    async def stop(self, drain: float = 5.0) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
        if self.outstanding:
            await asyncio.wait(list(self.outstanding), timeout=drain)


async def heartbeat_flood(conns: list[Connection], members: list,
                          versions: dict[int, int], seconds: float, window: int,
                          sample: float = 1.0, broker_pid: int | None = None,
                          request_for=None) -> dict:
    """Keep `window` Heartbeats in flight on every connection for `seconds`; count successful
    answers per second. Returns per-second samples, totals, error codes and the CPU use of the
    broker process (`broker_pid`) and of this process over the same seconds. With
    ``request_for(member)`` (a ConsumerGroupHeartbeat, say) that is what is sent instead."""
    version = versions[API_HEARTBEAT if request_for is None else API_CONSUMER_GROUP_HEARTBEAT]
    by_conn: dict[int, list] = {}
    for m in members:
        by_conn.setdefault(id(m.conn), []).append(m)
    active = [c for c in conns if id(c) in by_conn and c.closed_error is None]
    for c in active:
        c.flood_prepare(by_conn[id(c)], version, request_for)
        c.flood_ok = 0
        c.flood_errors = {}
    cpu0 = cpu_seconds(broker_pid) if broker_pid else None
    own0 = time.process_time()
    t0 = time.perf_counter()
    for c in active:
        c.flood_start(window)
    samples: list = []
    cpu_samples: list = []  # the broker's CPU %, per sample
    last_ok = 0
    last_t = t0
    last_cpu = cpu0
    end = t0 + seconds
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        await asyncio.sleep(min(sample, end - now))
        now = time.perf_counter()
        if now - last_t < sample / 4 and now < end:
            continue  # the event loop's timer woke us early: no sample of a sliver of time
        if now - last_t < sample / 4:
            break     # the last sliver before the end: no sample of it either
        ok = sum(c.flood_ok for c in active)
        samples.append(round((ok - last_ok) / (now - last_t)))
        cpu = cpu_seconds(broker_pid) if broker_pid else None
        if cpu is not None and last_cpu is not None:
            cpu_samples.append(round(100 * (cpu - last_cpu) / (now - last_t)))
        last_ok, last_t, last_cpu = ok, now, cpu
    for c in active:
        c.flood_on = False
    elapsed = time.perf_counter() - t0
    total_ok = sum(c.flood_ok for c in active)
    total_errors = sum(sum(c.flood_errors.values()) for c in active)
    cpu1 = cpu_seconds(broker_pid) if broker_pid else None
    own1 = time.process_time()
    # drain what is still in flight (bounded)
    drain_end = time.perf_counter() + 10
    while time.perf_counter() < drain_end and any(
            c.flood_in_flight > 0 and c.closed_error is None for c in active):
        await asyncio.sleep(0.02)
    errors: dict[int, int] = {}
    for c in active:
        for code, n in c.flood_errors.items():
            errors[code] = errors.get(code, 0) + n
    return {
        "seconds": round(elapsed, 3),
        "ok_in_window": total_ok,
        "ok_per_second": round(total_ok / elapsed),
        "answered_per_second": round((total_ok + total_errors) / elapsed),  # errors included
        "per_second_samples": samples,
        "broker_cpu_percent_samples": cpu_samples,
        "errors": {str(k): v for k, v in sorted(errors.items())},
        "connections": len(active),
        "window_per_connection": window,
        "lost_connections": sum(1 for c in active if c.closed_error is not None),
        "broker_cpu_percent": None if cpu0 is None or cpu1 is None else
        round(100 * (cpu1 - cpu0) / elapsed),
        "loadgen_cpu_percent": round(100 * (own1 - own0) / elapsed),
    }


def rss_kib(pid: int) -> int | None:
    """VmRSS of a process in KiB (Linux), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None
