"""A deterministic harness for consumer groups (KIP-848): the coordinator on a fake clock with
an in-memory __consumer_offsets log and topics that tests create, grow and delete."""
from __future__ import annotations

import uuid

from protocol import messages as m
from protocol.errors import ErrorCode

from broker.coordinator.group import GroupCoordinator
from broker.coordinator.group.coordinator import TopicsView
from broker.purgatory import Timer

from .harness import Ctx, FakeClock, FakeLog, Reply

E = ErrorCode


class FakeTopics(TopicsView):
    def __init__(self) -> None:
        self.topics: dict[str, tuple[uuid.UUID, int]] = {}
        self._version = 0
        self._next = 0

    def create(self, name: str, partitions: int) -> uuid.UUID:
        self._next += 1
        topic_id = uuid.UUID(int=self._next)
        self.topics[name] = (topic_id, partitions)
        self._version += 1
        return topic_id

    def grow(self, name: str, partitions: int) -> None:
        topic_id, _ = self.topics[name]
        self.topics[name] = (topic_id, partitions)
        self._version += 1

    def delete(self, name: str) -> None:
        del self.topics[name]
        self._version += 1

    def id(self, name: str) -> uuid.UUID:
        return self.topics[name][0]

    def get(self, name):
        return self.topics.get(name)

    def by_id(self, topic_id):
        for name, (tid, n) in self.topics.items():
            if tid == topic_id:
                return name, n
        return None

    def names(self):
        return list(self.topics)

    def version(self) -> int:
        return self._version


class ConsumerHarness:
    """Heartbeats as a client sends them; ``owned`` maps topic names to partitions."""

    #: True: a harness made without ``batched`` defers as the broker does and settles after
    #: each heartbeat, as a client that waits for each answer sees it (the fixture
    #: joins_at_once_and_batched in conftest.py runs whole test modules both ways)
    batched_by_default = False

    def __init__(self, config: dict | None = None, topics: FakeTopics | None = None,
                 log: FakeLog | None = None, start: int = 0,
                 batched: bool | None = None) -> None:
        """``batched``: the coordinator defers to the next event-loop turn as the broker's
        does; ``turn()`` runs one turn (the joins then wait for the end of their burst)."""
        self.settle_each = batched is None and self.batched_by_default
        batched = self.settle_each or bool(batched)
        self.clock = FakeClock(start)
        self.timer = Timer(self.clock)
        self.log = log or FakeLog()
        self.topics = topics or FakeTopics()
        self._uuid = 0
        # a new target at every change unless a test sets an interval (it has tests of its own)
        config = {"group.consumer.assignment.interval.ms": 0, **(config or {})}
        self.deferred: list = []
        self.coordinator = GroupCoordinator(config, self.clock, self.timer,
                                            self.log.persist, new_uuid=self._new_uuid,
                                            topics=self.topics,
                                            defer=self.deferred.append if batched else None)

    def turn(self) -> int:
        """One event-loop turn: what was deferred before it runs. -> how many ran."""
        todo, self.deferred[:] = list(self.deferred), []
        for fn in todo:
            fn()
        return len(todo)

    def settle(self) -> int:
        """Turns until nothing is deferred. -> how many."""
        turns = 0
        while self.deferred:
            self.turn()
            turns += 1
            assert turns < 100, "deferred work keeps coming"
        return turns

    def _new_uuid(self) -> str:
        self._uuid += 1
        return f"uuid{self._uuid}"

    def advance(self, ms: int) -> None:
        target = self.clock.now + ms
        while True:
            deadline = self.timer.next_deadline()
            if deadline is None or deadline > target:
                break
            self.clock.now = max(self.clock.now, deadline)
            self.timer.advance(self.clock.now)
        self.clock.now = target
        self.timer.advance(target)

    def heartbeat(self, group="g", member_id="m1", epoch=0, *, topics=None, regex=None,
                  owned=None, instance=None, rack=None, rebalance=300000, assignor=None,
                  version=1, client_id="client") -> Reply:
        """epoch 0 sends a full request (topics default ["t"]); later ones send only
        ``owned`` (None: not sent) unless topics/regex are given."""
        tp_cls = m.ConsumerGroupHeartbeatRequest.TopicPartitions
        if epoch == 0:
            if topics is None and regex is None:
                topics = ["t"]
            owned = owned or {}
        req = m.ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance,
            rack_id=rack, rebalance_timeout_ms=rebalance if epoch == 0 else -1,
            subscribed_topic_names=topics, subscribed_topic_regex=regex,
            server_assignor=assignor,
            topic_partitions=None if owned is None else [
                tp_cls(topic_id=self.topics.id(t), partitions=sorted(ps))
                for t, ps in owned.items()])
        reply = Reply()
        self.coordinator.consumer_group_heartbeat(req, version, Ctx(client_id), reply)
        if self.settle_each:
            self.settle()
        return reply

    def assigned(self, reply: Reply) -> dict[str, set[int]] | None:
        """The assignment in a heartbeat response by topic name; None when not sent."""
        if reply.value.assignment is None:
            return None
        out = {}
        for tp in reply.value.assignment.topic_partitions:
            name = self.topics.by_id(tp.topic_id)[0]
            out[name] = set(tp.partitions)
        return out

    def group(self, group_id="g"):
        return self.coordinator.group(group_id)

    def describe(self, *group_ids) -> list:
        reply = Reply()
        self.coordinator.consumer_group_describe(
            m.ConsumerGroupDescribeRequest(group_ids=list(group_ids or ["g"]),
                                           include_authorized_operations=False), 1, Ctx(), reply)
        return reply.value.groups
