"""The group coordinator: routes each group to its shard and speaks the classic group APIs.

Sans-I/O. Every API method takes ``(request, api_version, context, respond)`` — the decoded
request, its version, a context with ``client_id`` and ``client_host``, and a callback that gets
the response message exactly once, at once or later (delayed operations, stored writes).

The broker supplies:

* ``clock() -> int`` — milliseconds;
* ``timer`` — a :class:`broker.purgatory.Timer` over that clock, which the broker drives
  (``timer.advance(now)`` when ``timer.next_wakeup()`` is due; ``timer.on_earlier_deadline``
  tells it to re-arm). Heartbeat, join, sync, pending-member and retention deadlines all live there;
* ``persist(partition, records, on_done)`` — append ``records`` (a list of ``(key, value)``
  bytes, value None for a tombstone) to partition ``partition`` of ``__consumer_offsets`` and
  then call ``on_done(None)``, or ``on_done(exc)`` if the append failed (an exception with a
  ``code`` attribute holding a Kafka error code is mapped as Kafka maps append errors; any other
  is answered COORDINATOR_NOT_AVAILABLE). ``on_done`` may be called at once or later;
* ``topic_exists(topic, partition) -> bool`` — for UNKNOWN_TOPIC_OR_PARTITION in OffsetCommit
  and OffsetDelete.

At startup with a data directory the broker replays each partition into the runtime::

    coordinator.runtime.begin_loading(p)  # the shard answers COORDINATOR_LOAD_IN_PROGRESS
    coordinator.runtime.load(p, records)  # iterable of (key, value) in log order
    coordinator.runtime.finish_loading(p)
"""
from __future__ import annotations

import uuid
from functools import partial
from typing import Callable

import structlog

from protocol import messages as m
from protocol.errors import ErrorCode

from ...purgatory import DelayedOperationPurgatory, Timer
from ..common.result import CoordinatorResult, append_error
from ..common.runtime import CoordinatorRuntime
from ..common.settings import settings
from .context import Stats
from .group import GroupError, GroupState
from .shard import GroupCoordinatorShard

log = structlog.get_logger("broker.coordinator")

E = ErrorCode

#: DescribeGroups authorized_operations for a group when asked, without an authorizer (everything
#: Kafka allows on a group resource): READ(3), DELETE(6), DESCRIBE(8), DESCRIBE_CONFIGS(10),
#: ALTER_CONFIGS(11). With one, broker/apis/describe_groups.py fills the field from the ACLs.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


@settings("group.min.session.timeout.ms", "group.max.session.timeout.ms",
          "group.initial.rebalance.delay.ms", "group.max.size", "offset.metadata.max.bytes",
          "offsets.retention.minutes", "offsets.topic.num.partitions",
          "offsets.retention.check.interval.ms", "group.consumer.heartbeat.interval.ms",
          "group.consumer.session.timeout.ms", "group.consumer.max.size",
          "group.consumer.assignors", "group.consumer.assignment.interval.ms",
          "group.coordinator.rebalance.protocols", "group.consumer.migration.policy",
          "group.share.heartbeat.interval.ms", "group.share.session.timeout.ms",
          "group.share.max.size", "group.share.assignment.interval.ms", "group.streams.heartbeat.interval.ms",
          "group.streams.session.timeout.ms", "group.streams.max.size",
          "group.streams.num.standby.replicas", "group.streams.initial.rebalance.delay.ms",
          "group.streams.assignment.interval.ms")
class CoordinatorConfig:
    """The group coordinator's settings (common/settings.py): ``group_max_size`` is
    ``group.max.size``, declared with its default in broker/config.py; ``from_config`` reads
    them from None (defaults), a CoordinatorConfig, or a mapping keyed by Kafka's names or by
    these attribute names."""

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60 * 1000


def _stored_now(partition, records, on_done, **kwargs) -> None:
    on_done(None)


def _leave_error(exc: BaseException, response: tuple) -> tuple:
    """LeaveGroup's answer to a failed write (members leaving a consumer group)."""
    return append_error(exc), []


def _join_error(member_id: str, exc: BaseException, response: dict) -> dict:
    """JoinGroup's answer to a failed write (a classic member joining a consumer group)."""
    return {"error": append_error(exc), "member_id": member_id}


def _share_heartbeat_error(exc: BaseException, response):
    """ShareGroupHeartbeat's answer to a failed write."""
    return m.ShareGroupHeartbeatResponse(error_code=int(append_error(exc)), member_epoch=0)


def _streams_heartbeat_error(exc: BaseException, response: tuple) -> tuple:
    """StreamsGroupHeartbeat's answer to a failed write: no internal topics to create."""
    return m.StreamsGroupHeartbeatResponse(error_code=int(append_error(exc))), {}


class TopicsView:
    """What consumer groups need to know of topics (the broker passes one over its topics):
    ``get(name) -> (topic_id, partitions) | None``, ``by_id(topic_id) -> (name, partitions) |
    None``, ``names()`` (the topics a regex may match) and ``version()``, which changes whenever
    a topic is created, deleted or gains partitions. This default knows none."""

    def get(self, name: str):
        return None

    def by_id(self, topic_id):
        return None

    def names(self):
        return ()

    def version(self) -> int:
        return 0


def _join_callback(respond: Callable, api_version: int) -> Callable:
    """A JoinGroup answer (classic/manager.py, loaded with the first classic group)."""
    from .classic.manager import make_join_callback
    return make_join_callback(respond, api_version)


def _sync_callback(respond: Callable, api_version: int) -> Callable:
    """A SyncGroup answer (classic/manager.py, loaded with the first classic group)."""
    from .classic.manager import make_sync_callback
    return make_sync_callback(respond, api_version)


def _client_id(context) -> str:
    return getattr(context, "client_id", None) or ""


_HOSTS: dict[str, str] = {}  # client address -> its "/address" form, shared by its members


def _client_host(context) -> str:
    """Kafka reports a member's host as Java's InetAddress.toString(): "/127.0.0.1"."""
    host = getattr(context, "client_host", None) or ""
    shown = _HOSTS.get(host)
    if shown is None:
        shown = host if not host or host.startswith("/") else "/" + host
        if len(_HOSTS) >= 4096:
            _HOSTS.clear()
        _HOSTS[host] = shown
    return shown


class GroupCoordinator:
    """The group coordinator service (Kafka's GroupCoordinatorService): holds the runtime whose
    shards (shard.py) own the groups, and answers the group APIs by routing each group to its
    shard; also the offsets retention sweep and the counters the metrics read."""

    def __init__(self, config=None, clock: Callable[[], int] | None = None,
                 timer: Timer | None = None, persist: Callable | None = None,
                 topic_exists: Callable[[str, int], bool] | None = None, *,
                 new_uuid: Callable[[], object] = uuid.uuid4, topics=None,
                 persist_marker: Callable | None = None,
                 defer: Callable[[Callable[[], None]], None] | None = None) -> None:
        """``defer(fn)`` runs ``fn`` at the next event-loop turn (loop.call_soon): with it, a
        burst of consumer-group joins shares one target assignment (consumer/join_bursts.py); it
        needs a ``persist`` that stores at once, as the broker's does."""
        self.config = CoordinatorConfig.from_config(config)
        if clock is None:
            clock = timer.clock if timer is not None else None
        if clock is None:
            raise ValueError("the coordinator needs a clock (or a timer that has one)")
        self.clock = clock
        self.timer = timer if timer is not None else Timer(clock)
        self.persist = persist if persist is not None else _stored_now
        self.topic_exists = topic_exists if topic_exists is not None else (lambda t, p: True)
        #: topic metadata for consumer groups (see TopicsView)
        self.topics = topics if topics is not None else TopicsView()
        #: ``topic_filter(context) -> (name -> bool)``: the topics a consumer-group member's
        #: regular expression may resolve to, those its principal may DESCRIBE (the broker
        #: sets it when it has an authorizer); None: every topic
        self.topic_filter: Callable | None = None
        self.stats = Stats()
        self.heartbeat_purgatory = DelayedOperationPurgatory("Heartbeat", self.timer)
        self.rebalance_purgatory = DelayedOperationPurgatory("Rebalance", self.timer)
        self.runtime = CoordinatorRuntime(self.config.offsets_topic_num_partitions, lambda p: (
            GroupCoordinatorShard(p, self.config, self.clock, self.timer,
                                  self.heartbeat_purgatory, self.rebalance_purgatory,
                                  self._persist, self.topic_exists, self.stats, new_uuid,
                                  self.topics, persist_marker, defer)))
        #: routing, the runtime's: ``shards[p]`` owns partition p of __consumer_offsets
        self.shards = self.runtime.shards
        self.partition_for = self.runtime.partition_for
        self._partitions = self.runtime.key_partitions
        self._retention_handle = None
        self._closed = False
        self._schedule_retention()

    def shard_for(self, key: str):
        """The shard of a group; joins of the group still waiting for the end of their burst
        are answered first, so that every other request sees them (consumer/join_bursts.py)."""
        partition = self._partitions.get(key)
        if partition is None:
            partition = self.partition_for(key)
        shard = self.shards[partition]
        shard.flush_joins(key)
        return shard

    @property
    def shards_loading(self) -> set[int]:
        return self.runtime.shards_loading

    def set_share_listener(self, listener, group_config=None) -> None:
        """Who hears of share-group members leaving and share groups deleted (the broker's
        share partitions, share/leader.py), and where a group's own configs are read
        (``group_config(group_id) -> mapping``, group_configs.py)."""
        for shard in self.shards:
            shard.set_group_hooks(listener, group_config)

    def _persist(self, partition: int, records: list, on_done, **kwargs) -> None:
        self.persist(partition, records, on_done, **kwargs)

    def close(self) -> None:
        """Stop: cancel the retention sweep and answer every waiting request (the client finds
        the coordinator again)."""
        self._closed = True
        if self._retention_handle is not None:
            self.timer.cancel(self._retention_handle)
            self._retention_handle = None
        self.runtime.unload_all(E.NOT_COORDINATOR)

    # ------------------------------------------------------------------ retention
    def _schedule_retention(self) -> None:
        if self._closed:
            return
        self._retention_handle = self.timer.call_later(
            self.config.offsets_retention_check_interval_ms, self._run_retention)

    def _run_retention(self) -> None:
        self._retention_handle = None
        try:
            self.expire_offsets()
        finally:
            self._schedule_retention()

    def expire_offsets(self, now: int | None = None) -> int:
        """Run the offsets retention sweep now on every loaded shard; returns offsets expired."""
        now = self.clock() if now is None else now
        return sum(shard.offsets.expire(now) for shard in self.shards if not shard.loading)

    def on_partitions_deleted(self, topic: str, partitions) -> int:
        """A topic was deleted: every loaded shard drops its groups' offsets of it (Kafka's
        GroupCoordinatorService.onPartitionsDeleted). Returns the offsets deleted."""
        partitions = list(partitions)
        return sum(shard.offsets.on_partitions_deleted(topic, partitions)
                   for shard in self.shards if not shard.loading)

    # ------------------------------------------------------------------ metrics
    @property
    def rebalances_total(self) -> int:
        return self.stats.rebalances_total

    @property
    def expired_members_total(self) -> int:
        return self.stats.expired_members_total

    def groups_by_state(self) -> dict[str, int]:
        counts = {state.value: 0 for state in GroupState if state is not GroupState.DEAD}
        for shard in self.shards:
            for group in shard.groups.values():
                if group.state is not GroupState.DEAD:
                    counts[group.state.value] += 1
        return counts

    def group_count(self) -> int:
        return sum(len(shard.groups) for shard in self.shards)

    def member_count(self) -> int:
        return sum(len(group.members) for shard in self.shards for group in shard.groups.values())

    def waiting_operations(self) -> dict[str, int]:
        out = dict(self.heartbeat_purgatory.waiting_by_kind())
        for kind, n in self.rebalance_purgatory.waiting_by_kind().items():
            out[kind] = out.get(kind, 0) + n
        return out

    def group(self, group_id: str):
        """The group's metadata object (for tests and tools), or None."""
        return self.shard_for(group_id).groups.get(group_id)

    # ================================================================== JoinGroup
    def join_group(self, request, api_version: int, context, respond: Callable) -> None:
        if not request.group_id:
            _join_callback(respond, api_version)(error=E.INVALID_GROUP_ID,
                                                     member_id=request.member_id)
            return
        shard = self.shard_for(request.group_id)
        if shard.loading:
            _join_callback(respond, api_version)(error=E.COORDINATOR_LOAD_IN_PROGRESS,
                                                     member_id=request.member_id)
            return
        group = shard.groups.get(request.group_id)
        kind = getattr(group, "group_type", None)
        if kind in ("share", "streams") and group.state is not GroupState.DEAD:
            # Kafka's classicGroupJoin: a group of another type that is not a consumer group
            _join_callback(respond, api_version)(error=E.INCONSISTENT_GROUP_PROTOCOL,
                                                     member_id="")
            return
        if kind == "consumer" and group.state is not GroupState.DEAD:
            if group.members:
                self._classic_join_to_consumer_group(shard, group, request, api_version,
                                                     context, respond)
                return
            shard.consumer.convert_to_classic(group)
        shard.classic.join_group(request, api_version, _client_id(context), _client_host(context),
                         respond)

    # ================================================================== SyncGroup
    def sync_group(self, request, api_version: int, context, respond: Callable) -> None:
        if api_version >= 5 and (request.protocol_type is None or request.protocol_name is None):
            # from v5 both fields are mandatory; Kafka (KafkaApis) answers a request missing one
            # with INCONSISTENT_GROUP_PROTOCOL before it looks at the group id or the group
            _sync_callback(respond, api_version)(error=E.INCONSISTENT_GROUP_PROTOCOL)
            return
        if not request.group_id:
            _sync_callback(respond, api_version)(error=E.INVALID_GROUP_ID)
            return
        shard = self.shard_for(request.group_id)
        if shard.loading:
            # the rebalance in progress was lost with the old state: REBALANCE_IN_PROGRESS makes
            # the client rejoin (where it backs off on COORDINATOR_LOAD_IN_PROGRESS); clients do
            # not all expect COORDINATOR_LOAD_IN_PROGRESS from SyncGroup
            _sync_callback(respond, api_version)(error=E.REBALANCE_IN_PROGRESS)
            return
        group = shard.groups.get(request.group_id)
        kind = getattr(group, "group_type", None)
        if kind in ("share", "streams"):
            _sync_callback(respond, api_version)(error=E.UNKNOWN_MEMBER_ID)
            return
        if kind == "consumer":
            callback = _sync_callback(respond, api_version)
            try:
                callback(**shard.consumer.classic_members.sync(group, request, api_version))
            except GroupError as exc:
                callback(error=exc.code)
            return
        shard.classic.sync_group(request, api_version, respond)

    # ================================================================== Heartbeat
    def heartbeat(self, request, api_version: int, context, respond: Callable) -> None:
        if not request.group_id:
            error = E.INVALID_GROUP_ID
        else:
            shard = self.shard_for(request.group_id)
            # while loading, answer blindly (as Kafka does): the member is not known yet
            kind = getattr(shard.groups.get(request.group_id), "group_type", None)
            if shard.loading:
                error = E.NONE
            elif kind in ("share", "streams"):
                error = E.UNKNOWN_MEMBER_ID
            elif kind == "consumer":
                try:
                    error = shard.consumer.classic_members.heartbeat(
                        shard.groups[request.group_id], request, api_version)
                except GroupError as exc:
                    error = exc.code
            else:
                error = shard.classic.heartbeat(request, api_version)
        respond(m.HeartbeatResponse(error_code=error))

    # ================================================================== LeaveGroup
    def leave_group(self, request, api_version: int, context, respond: Callable) -> None:
        if api_version >= 3:
            identities = [(mi.member_id, mi.group_instance_id,
                           mi.reason if api_version >= 5 else None) for mi in request.members]
        else:
            identities = [(request.member_id, None, None)]
        if not request.group_id:
            top, results = E.INVALID_GROUP_ID, []
        else:
            shard = self.shard_for(request.group_id)
            kind = getattr(shard.groups.get(request.group_id), "group_type", None)
            if shard.loading:
                top, results = E.COORDINATOR_LOAD_IN_PROGRESS, []
            elif kind in ("share", "streams"):
                top, results = E.UNKNOWN_MEMBER_ID, []
            elif kind == "consumer":
                records, results = shard.consumer.classic_members.leave(
                    shard.groups[request.group_id], identities)
                if records:
                    shard.consumer.write(request.group_id, records, (E.NONE, results),
                                         partial(self._answer_leave, respond, api_version),
                                         _leave_error)
                    return
                top = E.NONE
            else:
                top, results = shard.classic.leave_group(request.group_id, identities)
        self._answer_leave(respond, api_version, (top, results))

    @staticmethod
    def _answer_leave(respond, api_version: int, answer: tuple) -> None:
        top, results = answer
        if api_version >= 3:
            cls = m.LeaveGroupResponse.MemberResponse
            respond(m.LeaveGroupResponse(
                error_code=int(top),
                members=[cls(member_id=mid, group_instance_id=iid, error_code=int(err))
                         for mid, iid, err in results]))
        else:
            error = top
            if error == E.NONE:
                error = next((err for _, _, err in results if err != E.NONE), E.NONE)
            respond(m.LeaveGroupResponse(error_code=int(error)))

    def _classic_join_to_consumer_group(self, shard, group, request, api_version: int, context,
                                        respond) -> None:
        """A classic member joins a consumer group (online migration, consumer/migration.py):
        answered once its records are stored."""
        callback = _join_callback(respond, api_version)
        try:
            records, answer = shard.consumer.classic_members.join(
                group, request, api_version, _client_id(context), _client_host(context))
        except GroupError as exc:
            callback(error=exc.code, member_id=request.member_id)
            return
        shard.consumer.write(request.group_id, records, answer,
                             lambda fields: callback(**fields),
                             partial(_join_error, request.member_id))

    # ================================================================== ConsumerGroupHeartbeat
    def consumer_group_heartbeat(self, request, api_version: int, context,
                                 respond: Callable) -> None:
        """KIP-848: the member's heartbeat carries its subscription and what it owns; the
        answer carries its epoch and, when it changed, its assignment."""
        group_id = request.group_id or ""
        if "consumer" not in self.config.group_coordinator_rebalance_protocols:
            respond(m.ConsumerGroupHeartbeatResponse(
                error_code=int(E.UNSUPPORTED_VERSION), member_epoch=0))
            return
        partition = self._partitions.get(group_id)
        shard = self.shards[partition if partition is not None
                            else self.partition_for(group_id)]
        if shard.loading:
            respond(m.ConsumerGroupHeartbeatResponse(
                error_code=int(E.COORDINATOR_LOAD_IN_PROGRESS), member_epoch=0))
            return
        client_id = _client_id(context)
        client_host = _client_host(context)
        topic_filter = self.topic_filter(context) if self.topic_filter is not None else None
        consumer = shard.consumer
        if request.member_epoch == 0 and consumer.joins.defer is not None:
            consumer.joins.queue(request, api_version, client_id, client_host, respond,
                                 topic_filter)
            return
        if consumer.joins.waiting:
            consumer.joins.flush(group_id)
        response = consumer.steady_heartbeat(request, client_id, client_host)
        if response is not None:
            respond(response)
            return
        records, response = consumer.heartbeat(request, api_version, client_id, client_host,
                                               topic_filter=topic_filter)
        consumer.write(group_id, records, response, respond)

    # ================================================================== *GroupDescribe
    def _describe_groups(self, request, response_cls, describe: Callable):
        """ConsumerGroupDescribe, ShareGroupDescribe and StreamsGroupDescribe: each group id
        described by its shard's manager (``describe(shard, group_id, include_ops)``), with the
        answers Kafka gives for an empty id and a loading shard, and the authorized operations
        when asked for."""
        out = []
        include_ops = bool(request.include_authorized_operations)
        cls = response_cls.DescribedGroup
        for group_id in request.group_ids:
            if not group_id:
                out.append(cls(error_code=int(E.INVALID_GROUP_ID), group_id=group_id))
                continue
            shard = self.shard_for(group_id)
            if shard.loading:
                out.append(cls(error_code=int(E.COORDINATOR_LOAD_IN_PROGRESS),
                               group_id=group_id))
                continue
            described = describe(shard, group_id, include_ops)
            if described.error_code == 0:
                described.authorized_operations = GROUP_AUTHORIZED_OPERATIONS if include_ops \
                    else AUTHORIZED_OPERATIONS_OMITTED
            out.append(described)
        return response_cls(groups=out)

    # ================================================================== ConsumerGroupDescribe
    def consumer_group_describe(self, request, api_version: int, context,
                                respond: Callable) -> None:
        respond(self._describe_groups(request, m.ConsumerGroupDescribeResponse,
                                      lambda shard, group_id, include_ops:
                                      shard.consumer.describe(group_id, include_ops)))

    # ================================================================== ShareGroupHeartbeat
    def share_group_heartbeat(self, request, api_version: int, context,
                              respond: Callable) -> None:
        """KIP-932: join (epoch 0), heartbeat, leave (epoch -1) a share group
        (share/manager.py); the session timeout restarts once the answer's records are
        stored."""
        shard = self.shard_for(request.group_id or "")
        if shard.loading:
            respond(m.ShareGroupHeartbeatResponse(
                error_code=int(E.COORDINATOR_LOAD_IN_PROGRESS), member_epoch=0))
            return
        share = shard.share
        records, response = share.heartbeat(request, _client_id(context), _client_host(context))

        def answer(response) -> None:
            if response.error_code == 0 and response.member_epoch > 0:
                share.schedule_session(request.group_id, request.member_id)
            respond(response)

        shard.context.append(CoordinatorResult(records, response), answer,
                             _share_heartbeat_error)

    # ================================================================== ShareGroupDescribe
    def share_group_describe(self, request, api_version: int, context,
                             respond: Callable) -> None:
        respond(self._describe_groups(request, m.ShareGroupDescribeResponse,
                                      lambda shard, group_id, _: shard.share.describe(group_id)))

    # ================================================================== StreamsGroupHeartbeat
    def streams_group_heartbeat(self, request, api_version: int, context,
                                respond: Callable) -> None:
        """KIP-1071: join (epoch 0, with the topology), heartbeat, leave (epoch -1) a streams
        group (streams/manager.py). ``respond(response, internal_topics)`` once the records
        are stored: the internal topics to create ({name: streams.topology.InternalTopic})."""
        shard = self.shard_for(request.group_id or "")
        if shard.loading:
            respond(m.StreamsGroupHeartbeatResponse(
                error_code=int(E.COORDINATOR_LOAD_IN_PROGRESS)), {})
            return
        streams = shard.streams
        records, response, to_create = streams.heartbeat(request, _client_id(context),
                                                         _client_host(context))

        def answer(result: tuple) -> None:
            if result[0].error_code == 0 and result[0].member_epoch >= 0:
                streams.after_heartbeat(request.group_id, request.member_id)
            respond(*result)

        shard.context.append(CoordinatorResult(records, (response, to_create)), answer,
                             _streams_heartbeat_error)

    # ================================================================== StreamsGroupDescribe
    def streams_group_describe(self, request, api_version: int, context,
                               respond: Callable) -> None:
        respond(self._describe_groups(request, m.StreamsGroupDescribeResponse,
                                      lambda shard, group_id, _: shard.streams.describe(group_id)))

    # ================================================================== OffsetCommit
    def offset_commit(self, request, api_version: int, context, respond: Callable) -> None:
        partitions = []
        for topic in request.topics:
            for p in topic.partitions:
                error = None if self.topic_exists(topic.name, p.partition_index) else \
                    E.UNKNOWN_TOPIC_OR_PARTITION
                partitions.append((topic.name, p.partition_index, p.committed_offset,
                                   p.committed_leader_epoch, p.committed_metadata, error))

        def answer(results: dict) -> None:
            topic_cls = m.OffsetCommitResponse.OffsetCommitResponseTopic
            part_cls = m.OffsetCommitResponse.OffsetCommitResponsePartition
            respond(m.OffsetCommitResponse(topics=[
                topic_cls(name=t.name, partitions=[
                    part_cls(partition_index=p.partition_index,
                             error_code=int(results.get((t.name, p.partition_index), E.NONE)))
                    for p in t.partitions])
                for t in request.topics]))

        shard = self.shard_for(request.group_id)
        if shard.loading:
            answer({(t, p): err or E.COORDINATOR_LOAD_IN_PROGRESS
                    for t, p, _o, _e, _md, err in partitions})
            return
        shard.offsets.commit(request, api_version, partitions, answer)

    # ================================================================== TxnOffsetCommit
    def txn_offset_commit(self, request, api_version: int, partitions: list,
                          respond: Callable) -> None:
        """Offsets of a transaction (the transaction coordinator verified it first):
        ``partitions`` as for OffsetCommit; ``respond({(topic, partition): error})``."""
        shard = self.shard_for(request.group_id)
        if shard.loading:
            respond({(t, p): err or E.COORDINATOR_LOAD_IN_PROGRESS
                     for t, p, _o, _e, _md, err in partitions})
            return
        shard.offsets.txn_commit(request, api_version, partitions, respond)

    def complete_transaction(self, partition: int, producer_id: int, producer_epoch: int,
                             commit: bool, coordinator_epoch: int, on_done,
                             transaction_version: int = 2) -> None:
        """The transaction coordinator ends a transaction that committed offsets here: write its
        marker into the partition, after which the offsets are committed or dropped."""
        shard = self.shards[partition]
        if shard.loading:
            on_done(RuntimeError("coordinator loading"))
            return
        shard.write_marker(producer_id, producer_epoch, commit, coordinator_epoch, on_done,
                           transaction_version)

    # ================================================================== OffsetFetch
    def offset_fetch(self, request, api_version: int, context, respond: Callable) -> None:
        if api_version >= 8:
            wanted = [(g.group_id, None if g.topics is None else
                       [(t.name, list(t.partition_indexes)) for t in g.topics])
                      for g in request.groups]
        else:
            topics = request.topics
            wanted = [(request.group_id, None if topics is None and api_version >= 2 else
                       [(t.name, list(t.partition_indexes)) for t in topics or ()])]
        require_stable = bool(request.require_stable) if api_version >= 7 else False
        answers = []
        members = {g.group_id: (g.member_id, g.member_epoch) for g in request.groups} \
            if api_version >= 9 else {}
        for group_id, topics in wanted:
            shard = self.shard_for(group_id)
            error = None
            if shard.loading:
                error = E.COORDINATOR_LOAD_IN_PROGRESS
            elif group_id in members:
                group = shard.groups.get(group_id)
                if getattr(group, "group_type", None) in ("consumer", "streams"):
                    error = group.validate_offset_fetch(*members[group_id])
            if error is not None:
                answers.append((group_id, error, topics))
            else:
                answers.append((group_id, E.NONE,
                                shard.offsets.fetch(group_id, topics, require_stable)))
        if api_version >= 8:
            g_cls = m.OffsetFetchResponse.OffsetFetchResponseGroup
            t_cls = m.OffsetFetchResponse.OffsetFetchResponseTopics
            p_cls = m.OffsetFetchResponse.OffsetFetchResponsePartitions
            groups = []
            for group_id, error, rows in answers:
                if error != E.NONE:
                    groups.append(g_cls(group_id=group_id, topics=[], error_code=int(error)))
                    continue
                groups.append(g_cls(group_id=group_id, error_code=0, topics=[
                    t_cls(name=topic, partitions=[
                        p_cls(partition_index=p, committed_offset=o, committed_leader_epoch=e,
                              metadata=md, error_code=int(err)) for p, o, e, md, err in parts])
                    for topic, parts in rows]))
            respond(m.OffsetFetchResponse(groups=groups))
            return
        t_cls = m.OffsetFetchResponse.OffsetFetchResponseTopic
        p_cls = m.OffsetFetchResponse.OffsetFetchResponsePartition
        _group_id, error, rows = answers[0]
        if error != E.NONE:
            if api_version < 2:  # no group-level error field: every partition carries it
                topics = [t_cls(name=topic, partitions=[
                    p_cls(partition_index=p, committed_offset=-1, metadata="",
                          error_code=int(error)) for p in parts]) for topic, parts in rows or ()]
            else:
                topics = []
            respond(m.OffsetFetchResponse(topics=topics, error_code=int(error)))
            return
        respond(m.OffsetFetchResponse(error_code=0, topics=[
            t_cls(name=topic, partitions=[
                p_cls(partition_index=p, committed_offset=o, committed_leader_epoch=e,
                      metadata=md, error_code=int(err)) for p, o, e, md, err in parts])
            for topic, parts in rows]))

    # ================================================================== DescribeGroups
    def describe_groups(self, request, api_version: int, context, respond: Callable) -> None:
        cls = m.DescribeGroupsResponse.DescribedGroup
        include_ops = api_version >= 3 and bool(request.include_authorized_operations)
        out = []
        for group_id in request.groups:
            shard = self.shard_for(group_id)
            if shard.loading:
                out.append(cls(error_code=int(E.COORDINATOR_LOAD_IN_PROGRESS), group_id=group_id))
                continue
            group = shard.groups.get(group_id)
            if getattr(group, "group_type", "classic") != "classic" and \
                    group.state is not GroupState.DEAD:
                # Kafka describes only classic groups here: a consumer group is not found
                described = cls(group_id=group_id, group_state=GroupState.DEAD.value)
                if api_version >= 6:
                    described.error_code = int(E.GROUP_ID_NOT_FOUND)
                    described.error_message = f"Group {group_id} is not a classic group."
            else:
                described = shard.classic.describe_group(group_id, api_version)
            if include_ops and described.error_code == 0:
                described.authorized_operations = GROUP_AUTHORIZED_OPERATIONS
            out.append(described)
        respond(m.DescribeGroupsResponse(groups=out))

    # ================================================================== ListGroups
    def list_groups(self, request, api_version: int, context, respond: Callable) -> None:
        states = {s.lower() for s in (request.states_filter or ())} if api_version >= 4 else set()
        types = {t.lower() for t in (request.types_filter or ())} if api_version >= 5 else set()
        error = E.NONE
        groups = []
        for shard in self.shards:
            if shard.loading:
                error = E.COORDINATOR_LOAD_IN_PROGRESS
                continue
            groups.extend(shard.list_groups(states, types))
        respond(m.ListGroupsResponse(error_code=int(error), groups=groups))

    # ================================================================== DeleteGroups
    def delete_groups(self, request, api_version: int, context, respond: Callable) -> None:
        names = list(dict.fromkeys(request.groups_names))
        results: dict[str, ErrorCode] = {}
        by_shard: dict[int, list[str]] = {}
        for group_id in names:
            shard = self.shard_for(group_id)
            if shard.loading:
                results[group_id] = E.COORDINATOR_LOAD_IN_PROGRESS
            else:
                by_shard.setdefault(shard.partition, []).append(group_id)
        waiting = {"shards": len(by_shard)}

        def answer() -> None:
            cls = m.DeleteGroupsResponse.DeletableGroupResult
            respond(m.DeleteGroupsResponse(results=[
                cls(group_id=g, error_code=int(results.get(g, E.NONE))) for g in names]))

        if not by_shard:
            answer()
            return

        def shard_done(shard_results: dict) -> None:
            results.update(shard_results)
            waiting["shards"] -= 1
            if waiting["shards"] == 0:
                answer()

        for partition, group_ids in by_shard.items():
            self.shards[partition].delete_groups(group_ids, shard_done)

    # ================================================================== OffsetDelete
    def offset_delete(self, request, api_version: int, context, respond: Callable) -> None:
        topics = []
        for t in request.topics:
            topics.append((t.name, [
                (p.partition_index, None if self.topic_exists(t.name, p.partition_index)
                 else E.UNKNOWN_TOPIC_OR_PARTITION) for p in t.partitions]))

        def answer(result: tuple) -> None:
            group_error, rows = result
            t_cls = m.OffsetDeleteResponse.OffsetDeleteResponseTopic
            p_cls = m.OffsetDeleteResponse.OffsetDeleteResponsePartition
            respond(m.OffsetDeleteResponse(error_code=int(group_error), topics=[
                t_cls(name=topic, partitions=[
                    p_cls(partition_index=p, error_code=int(err)) for p, err in parts])
                for topic, parts in rows]))

        if not request.group_id:
            answer((E.INVALID_GROUP_ID, []))
            return
        shard = self.shard_for(request.group_id)
        if shard.loading:
            answer((E.COORDINATOR_LOAD_IN_PROGRESS, []))
            return
        shard.offsets.delete(request.group_id, topics, answer)
