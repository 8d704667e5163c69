"""The console's actions (with ``console.actions.enable``): produce a test message, reset a
group's offsets, delete a group, create or delete a topic.

Each action builds the Kafka request a client would send and hands it to the same handler in
broker/apis/ that answers it from the network, so validation, error codes and side effects are
the API's own; the console only reads the response. An offset reset is what
kafka-consumer-groups.sh --reset-offsets does: ListOffsets for the target offsets, then an
OffsetCommit without a member (the group must have no active members, as the coordinator
checks).
"""
from __future__ import annotations

import asyncio
import uuid

from protocol import messages as m
from protocol.errors import ErrorCode
from protocol.records import build_batch

from .. import apis
from ..security import ANONYMOUS
from ..security.authorizer import AclOperation, ResourceType
from .views import BadRequest

#: the client id the console's requests carry (seen in the broker's logs)
CLIENT_ID = "kbroker-console"
#: how long an action waits for its answer
ACTION_TIMEOUT_S = 30
#: the most partitions one offset reset touches
MAX_RESET_PARTITIONS = 10_000

LIST_OFFSETS_EARLIEST, LIST_OFFSETS_LATEST = -2, -1
READ, DESCRIBE = AclOperation.READ, AclOperation.DESCRIBE
GROUP, TOPIC = ResourceType.GROUP, ResourceType.TOPIC

#: errors that mean the thing exists in a state that forbids the action (HTTP 409) or does not
#: exist (404); any other is a bad request (400)
_CONFLICT = {ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.NON_EMPTY_GROUP,
             ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS,
             ErrorCode.ILLEGAL_GENERATION, ErrorCode.STALE_MEMBER_EPOCH}
_DENIED = {ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
           ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
_MISSING = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.GROUP_ID_NOT_FOUND,
            ErrorCode.UNKNOWN_TOPIC_ID}


class ActionError(Exception):
    """A Kafka error code from the API the action called."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = ErrorCode(code)
        self.message = message or self.code.name
        super().__init__(self.message)

    @property
    def status(self) -> str:
        if self.code in _DENIED:
            return "403 Forbidden"
        if self.code in _CONFLICT:
            return "409 Conflict"
        if self.code in _MISSING:
            return "404 Not Found"
        return "400 Bad Request"

    def to_dict(self) -> dict:
        return {"error": self.code.name, "error_code": int(self.code), "message": self.message}


class _Connection:
    """What handlers may look at of a connection (the Produce handler keys its queue of
    waiting requests by it): the console is a PLAINTEXT client at the HTTP request's address,
    as the HTTP login's principal."""

    def __init__(self, listener: str, security_protocol: str, peer: str,
                 principal=ANONYMOUS) -> None:
        self.listener = listener
        self.security_protocol = security_protocol
        #: the HTTP login's principal: the handler's ACL checks are the caller's
        self.principal = principal
        self.peer = peer
        self.client_host = peer
        self.closed = False
        #: not a node's listener: in-process, it reaches every node's partitions
        self.node_id = None


class _Context:
    """The handler's ``ctx`` for one console request (the fields server.Request gives)."""

    __slots__ = ("conn", "api_version", "client_id", "client_host", "listener")

    def __init__(self, conn: _Connection, api_version: int) -> None:
        self.conn = conn
        self.api_version = api_version
        self.client_id = CLIENT_ID
        self.client_host = conn.client_host
        self.listener = conn.listener


async def call(broker, api: str, request, version: int, caller=None):
    """Hand ``request`` to the API's handler as if it came from a connection of ``caller``
    (its principal and address; None: ANONYMOUS at 127.0.0.1), and wait for its response."""
    handler = next(h for h in apis.HANDLERS.values() if h.name == api)
    if not handler.min_version <= version <= handler.max_version:
        raise RuntimeError(f"{api} v{version} is not served")
    listener = broker.config.listeners[0][0]
    peer, principal = ("127.0.0.1", ANONYMOUS) if caller is None else \
        (caller.host, caller.principal)
    conn = _Connection(listener, broker.config.security_protocols[listener], peer, principal)
    future = asyncio.get_running_loop().create_future()

    def respond(response) -> None:
        if not future.done():
            future.set_result(response)

    handler.handle(broker, _Context(conn, version), request, respond)
    return await asyncio.wait_for(future, ACTION_TIMEOUT_S)


def _string(body: dict, name: str, required: bool = True, default=None):
    value = body.get(name, default)
    if value is None:
        if required:
            raise BadRequest(f"{name} is required")
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string")
    return value


def _integer(body: dict, name: str, default: int) -> int:
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{name} must be an integer")
    return value


# ------------------------------------------------------------------ topics

async def create_topic(broker, body: dict, caller=None) -> dict:
    name = _string(body, "name")
    configs = body.get("configs") or {}
    if not isinstance(configs, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in configs.items()):
        raise BadRequest("configs must be an object of string names to string values")
    topic = m.CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=_integer(body, "partitions", -1),
        replication_factor=_integer(body, "replication_factor", -1), assignments=[],
        configs=[m.CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                 for k, v in configs.items()])
    response = await call(broker, "CreateTopics", m.CreateTopicsRequest(
        topics=[topic], timeout_ms=30000, validate_only=False), 7, caller)
    [result] = response.topics
    if result.error_code:
        raise ActionError(result.error_code, result.error_message)
    return {"name": result.name, "partitions": result.num_partitions,
            "topic_id": str(result.topic_id)}


async def delete_topic(broker, name: str, caller=None) -> dict:
    response = await call(broker, "DeleteTopics", m.DeleteTopicsRequest(
        topic_names=[name], timeout_ms=30000), 5, caller)
    [result] = response.responses
    if result.error_code:
        raise ActionError(result.error_code, result.error_message)
    return {"deleted": name}


async def produce(broker, name: str, body: dict, caller=None) -> dict:
    """One record, its key and value UTF-8 text (null when absent), headers as an object."""
    key = _string(body, "key", required=False)
    value = _string(body, "value", required=False)
    headers = body.get("headers") or {}
    if not isinstance(headers, dict) or not all(
            isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in headers.items()):
        raise BadRequest("headers must be an object of string names to string values")
    partition = _integer(body, "partition", 0)
    batch = build_batch([(None if key is None else key.encode(),
                          None if value is None else value.encode(),
                          tuple((k, None if v is None else v.encode())
                                for k, v in headers.items()),
                          broker.clock())])
    request = m.ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        m.ProduceRequest.TopicProduceData(name=name, partition_data=[
            m.ProduceRequest.PartitionProduceData(index=partition, records=batch)])])
    response = await call(broker, "Produce", request, 9, caller)
    [topic] = response.responses
    [result] = topic.partition_responses
    if result.error_code:
        raise ActionError(result.error_code, result.error_message)
    return {"topic": name, "partition": partition, "offset": result.base_offset}


# ------------------------------------------------------------------ groups

async def delete_group(broker, group_id: str, caller=None) -> dict:
    response = await call(broker, "DeleteGroups", m.DeleteGroupsRequest(
        groups_names=[group_id]), 2, caller)
    [result] = response.results
    if result.error_code:
        raise ActionError(result.error_code)
    return {"deleted": group_id}


async def reset_offsets(broker, group_id: str, body: dict, caller=None) -> dict:
    """``to``: earliest, latest or timestamp (with ``timestamp`` in ms); ``topic``: only that
    topic's partitions (all of them), else every partition the group has an offset for."""
    to = _string(body, "to")
    if to not in ("earliest", "latest", "timestamp"):
        raise BadRequest("to must be earliest, latest or timestamp")
    if to == "timestamp":
        spec = _integer(body, "timestamp", -1)
        if spec < 0:
            raise BadRequest("timestamp must be milliseconds since the epoch")
    else:
        spec = LIST_OFFSETS_EARLIEST if to == "earliest" else LIST_OFFSETS_LATEST
    topic = _string(body, "topic", required=False)
    # what the group and topic hold is shown only to whom OffsetCommit would answer: READ on
    # the group, as Kafka's AlterConsumerGroupOffsets checks first, and DESCRIBE on the topic
    if caller is not None and not caller.may(READ, GROUP, group_id):
        raise ActionError(ErrorCode.GROUP_AUTHORIZATION_FAILED,
                          f"Not authorized to access group: {group_id}")
    if topic is not None and caller is not None and not caller.may(DESCRIBE, TOPIC, topic):
        raise ActionError(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                          f"Not authorized to access topic: {topic}")
    if topic is not None:
        found = broker.topics.get(topic)
        if found is None:
            raise ActionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              f"Topic '{topic}' does not exist.")
        wanted = [(topic, p.index) for p in found.partitions]
    else:
        group = broker.coordinator.shard_for(group_id).groups.get(group_id)
        if group is None or group.state.value == "Dead":
            raise ActionError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        wanted = sorted(group.offsets)
        if not wanted:
            raise BadRequest(f"group {group_id} has no committed offsets: name a topic")
    if len(wanted) > MAX_RESET_PARTITIONS:
        raise BadRequest(f"at most {MAX_RESET_PARTITIONS} partitions at once")
    by_topic: dict[str, list[int]] = {}
    for t, p in wanted:
        by_topic.setdefault(t, []).append(p)
    listed = await call(broker, "ListOffsets", m.ListOffsetsRequest(
        replica_id=-1, isolation_level=0, timeout_ms=30000, topics=[
            m.ListOffsetsRequest.ListOffsetsTopic(name=t, partitions=[
                m.ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=p, current_leader_epoch=-1, timestamp=spec)
                for p in ps]) for t, ps in by_topic.items()]), 7, caller)
    targets: dict[tuple[str, int], int] = {}
    for t in listed.topics:
        for p in t.partitions:
            if p.error_code:
                raise ActionError(p.error_code, f"ListOffsets for {t.name}-{p.partition_index}")
            offset = p.offset
            if offset < 0:  # no record at or after the timestamp: the end, as Kafka's tool does
                log = broker.topics.partition(t.name, p.partition_index).log
                offset = log.log_end_offset
            targets[(t.name, p.partition_index)] = offset
    by_topic_commit: dict[str, list] = {}
    for (t, p), offset in sorted(targets.items()):
        by_topic_commit.setdefault(t, []).append(
            m.OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=p, committed_offset=offset, committed_leader_epoch=-1,
                committed_metadata=""))
    committed = await call(broker, "OffsetCommit", m.OffsetCommitRequest(
        group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, retention_time_ms=-1, topics=[
            m.OffsetCommitRequest.OffsetCommitRequestTopic(name=t, topic_id=uuid.UUID(int=0),
                                                          partitions=ps)
            for t, ps in by_topic_commit.items()]), 9, caller)
    for t in committed.topics:
        for p in t.partitions:
            if p.error_code:
                code = ErrorCode(p.error_code)
                hint = (" (the group has active members: stop its consumers first, as "
                        "kafka-consumer-groups.sh requires)"
                        if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                                    ErrorCode.REBALANCE_IN_PROGRESS,
                                    ErrorCode.STALE_MEMBER_EPOCH) else "")
                raise ActionError(code, f"OffsetCommit {t.name}-{p.partition_index}: "
                                        f"{code.name}{hint}")
    return {"group_id": group_id, "offsets": [
        {"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(targets.items())]}
