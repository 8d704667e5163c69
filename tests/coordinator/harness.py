"""A deterministic harness for the group coordinator: fake clock, the real timer, an in-memory
__consumer_offsets log and helpers that send requests and capture the responses."""
from __future__ import annotations

from protocol import messages as m
from protocol.errors import ErrorCode

from broker.coordinator.group import GroupCoordinator
from broker.purgatory import Timer

E = ErrorCode


class FakeClock:
    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class FakeLog:
    """Records every write per partition; completes at once (auto) or when told to."""

    def __init__(self) -> None:
        self.auto = True
        self.fail_with: BaseException | None = None
        self.written: dict[int, list] = {}
        self.pending: list = []
        self.writes = 0

    def persist(self, partition, records, on_done, producer=None) -> None:
        self.writes += 1
        if self.fail_with is not None:
            on_done(self.fail_with)
            return
        if self.auto:
            self.written.setdefault(partition, []).extend(records)
            on_done(None)
        else:
            self.pending.append((partition, list(records), on_done))

    def complete(self, n: int | None = None, error: BaseException | None = None) -> int:
        done = 0
        while self.pending and (n is None or done < n):
            partition, records, on_done = self.pending.pop(0)
            if error is None:
                self.written.setdefault(partition, []).extend(records)
            on_done(error)
            done += 1
        return done

    def records(self, partition: int) -> list:
        return list(self.written.get(partition, []))


class Reply:
    """Captures the one response a coordinator call sends. Every Reply is registered so the
    autouse fixture in conftest.py fails a test in which any request was answered twice (the
    coordinator shields itself from exceptions raised by respond, so raising here would not)."""

    created: list["Reply"] = []

    def __init__(self) -> None:
        self.responses: list = []
        Reply.created.append(self)

    def __call__(self, response) -> None:
        self.responses.append(response)

    @property
    def done(self) -> bool:
        return bool(self.responses)

    @property
    def value(self):
        assert self.responses, "no response yet"
        assert len(self.responses) == 1, f"responded {len(self.responses)} times: {self.responses}"
        return self.responses[0]

    @property
    def error(self) -> ErrorCode:
        return ErrorCode(self.value.error_code)

    def __getattr__(self, name):
        if name.startswith("_") or name in ("responses",):
            raise AttributeError(name)
        return getattr(self.value, name)

    def __repr__(self) -> str:
        return f"Reply({self.responses[0] if self.responses else 'pending'})"


class Ctx:
    def __init__(self, client_id: str = "client", client_host: str = "127.0.0.1") -> None:
        self.client_id = client_id
        self.client_host = client_host


def subscription(*topics: str) -> bytes:
    return b"\x00\x00" + m.ConsumerProtocolSubscription(topics=list(topics)).encode(0)


def assignment(**topics) -> bytes:
    tp = m.ConsumerProtocolAssignment.TopicPartition
    body = m.ConsumerProtocolAssignment(
        assigned_partitions=[tp(topic=t, partitions=list(ps)) for t, ps in topics.items()])
    return b"\x00\x00" + body.encode(0)


DEFAULT_PROTOCOLS = (("range", subscription("t")),)

#: Harness.sync's default protocol type and name: the group's, as a client echoes its JoinGroup
#: response (pass None explicitly to send a null field).
AS_JOINED = object()


class Harness:
    """The coordinator with the given settings; the initial rebalance delay is 0 unless a test
    sets it, so a join's answer does not wait for the clock (the delay has tests of its own)."""

    def __init__(self, config: dict | None = None, start: int = 0, known_topics=None) -> None:
        config = {"group.initial.rebalance.delay.ms": 0, **(config or {})}
        self.clock = FakeClock(start)
        self.timer = Timer(self.clock)
        self.log = FakeLog()
        self.known_topics = known_topics
        self._uuid = 0
        self.coordinator = GroupCoordinator(config, self.clock, self.timer,
                                            self.log.persist, self._topic_exists,
                                            new_uuid=self._new_uuid)

    def _new_uuid(self) -> str:
        self._uuid += 1
        return f"uuid{self._uuid}"

    def _topic_exists(self, topic: str, partition: int) -> bool:
        if self.known_topics is None:
            return True
        return partition < self.known_topics.get(topic, 0)

    # ---------------------------------------------------------------- time
    def advance_to(self, t: int) -> None:
        """Move the clock to t, running each due callback at its own deadline."""
        assert t >= self.clock.now
        while True:
            deadline = self.timer.next_deadline()
            if deadline is None or deadline > t:
                break
            self.clock.now = max(self.clock.now, deadline)
            self.timer.advance(self.clock.now)
        self.clock.now = t
        self.timer.advance(t)

    def advance(self, ms: int) -> None:
        self.advance_to(self.clock.now + ms)

    def tick(self) -> None:
        """Run what is due now, including what those runs schedule (the timer runs that on its
        next wakeup)."""
        for _ in range(100):
            if not self.timer.advance(self.clock.now):
                return
        raise AssertionError("the timer keeps scheduling due work")

    # ---------------------------------------------------------------- requests
    def join(self, group="g", member_id="", *, version=9, session=10000, rebalance=None,
             protocols=DEFAULT_PROTOCOLS, instance=None, client_id="client",
             protocol_type="consumer", reason=None, tick=True) -> Reply:
        cls = m.JoinGroupRequest.JoinGroupRequestProtocol
        req = m.JoinGroupRequest(
            group_id=group, session_timeout_ms=session,
            rebalance_timeout_ms=session if rebalance is None else rebalance,
            member_id=member_id, group_instance_id=instance, protocol_type=protocol_type,
            protocols=[cls(name=n, metadata=md) for n, md in protocols], reason=reason)
        reply = Reply()
        self.coordinator.join_group(req, version, Ctx(client_id), reply)
        if tick:
            self.tick()  # the initial delayed join (delay 0) completes on the next timer run
        return reply

    def join_new(self, group="g", **kw) -> Reply:
        """v4+ flow: MEMBER_ID_REQUIRED, then join again with the given id."""
        first = self.join(group, **kw)
        if kw.get("instance") is None and kw.get("version", 9) >= 4:
            assert first.error == E.MEMBER_ID_REQUIRED, first
            return self.join(group, first.member_id, **kw)
        return first

    def sync(self, group, member_id, generation, assignments=None, *, version=5, instance=None,
             protocol_type=AS_JOINED, protocol_name=AS_JOINED) -> Reply:
        """protocol_type/protocol_name default to what a client sends: the values its JoinGroup
        response named, i.e. the group's current ones ("" when the group has none)."""
        cls = m.SyncGroupRequest.SyncGroupRequestAssignment
        current = self.coordinator.group(group) if group else None
        if protocol_type is AS_JOINED:
            protocol_type = (current.protocol_type if current is not None else None) or ""
        if protocol_name is AS_JOINED:
            protocol_name = (current.protocol_name if current is not None else None) or ""
        req = m.SyncGroupRequest(
            group_id=group, generation_id=generation, member_id=member_id,
            group_instance_id=instance, protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=[cls(member_id=k, assignment=v) for k, v in (assignments or {}).items()])
        reply = Reply()
        self.coordinator.sync_group(req, version, Ctx(), reply)
        return reply

    def heartbeat(self, group, member_id, generation, *, version=4, instance=None) -> Reply:
        req = m.HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id,
                                 group_instance_id=instance)
        reply = Reply()
        self.coordinator.heartbeat(req, version, Ctx(), reply)
        return reply

    def leave(self, group, *members, version=5) -> Reply:
        """members: member ids, or (member_id, instance_id) pairs."""
        cls = m.LeaveGroupRequest.MemberIdentity
        identities = [cls(member_id=x, group_instance_id=None) if isinstance(x, str)
                      else cls(member_id=x[0], group_instance_id=x[1]) for x in members]
        req = m.LeaveGroupRequest(group_id=group,
                                  member_id=members[0] if members and isinstance(members[0], str)
                                  else "", members=identities)
        reply = Reply()
        self.coordinator.leave_group(req, version, Ctx(), reply)
        return reply

    def commit(self, group, offsets: dict, *, generation=-1, member_id="", instance=None,
               version=8, metadata="", retention=-1) -> Reply:
        """offsets: {(topic, partition): offset}."""
        t_cls = m.OffsetCommitRequest.OffsetCommitRequestTopic
        p_cls = m.OffsetCommitRequest.OffsetCommitRequestPartition
        by_topic: dict[str, list] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(p_cls(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=3,
                committed_metadata=metadata))
        req = m.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation,
                                    member_id=member_id, group_instance_id=instance,
                                    retention_time_ms=retention,
                                    topics=[t_cls(name=t, partitions=ps)
                                            for t, ps in by_topic.items()])
        reply = Reply()
        self.coordinator.offset_commit(req, version, Ctx(), reply)
        return reply

    def fetch(self, group, topics=None, *, version=7, require_stable=False) -> Reply:
        """topics: {topic: [partitions]} or None for all."""
        t_cls = m.OffsetFetchRequest.OffsetFetchRequestTopic
        req = m.OffsetFetchRequest(
            group_id=group, require_stable=require_stable,
            topics=None if topics is None else [t_cls(name=t, partition_indexes=ps)
                                                for t, ps in topics.items()])
        reply = Reply()
        self.coordinator.offset_fetch(req, version, Ctx(), reply)
        return reply

    def describe(self, *groups, version=5):
        reply = Reply()
        self.coordinator.describe_groups(m.DescribeGroupsRequest(groups=list(groups)),
                                         version, Ctx(), reply)
        return reply.value.groups

    def state(self, group="g") -> str | None:
        g = self.coordinator.group(group)
        return None if g is None else g.state.value

    def group(self, group="g"):
        return self.coordinator.group(group)


def committed(reply) -> dict:
    """{(topic, partition): offset} from an OffsetFetch response below v8."""
    return {(t.name, p.partition_index): p.committed_offset
            for t in reply.value.topics for p in t.partitions}


def commit_errors(reply) -> dict:
    return {(t.name, p.partition_index): ErrorCode(p.error_code)
            for t in reply.value.topics for p in t.partitions}
