"""Differential conformance of transactions (KIP-98, with KIP-890's transaction version 2): every
scenario runs against a real Apache Kafka 4.x broker and against kbroker (the ``target`` fixture)
with raw requests, and asserts Kafka's answers: error codes per request version, producer ids and
epochs, transaction states, markers and offsets in the log, the last stable offset, the aborted
transactions of a read_committed fetch and pending transactional offsets.

Two client flows, with the request versions real clients send:
- transaction version 1 (the partitions of a transaction are added with AddPartitionsToTxn, the
  group with AddOffsetsToTxn; the epoch stays across transactions): librdkafka, kafka-python and
  aiokafka (``TV1_CLIENTS``);
- transaction version 2 (a Produce v12+ or TxnOffsetCommit v5 adds its partition itself, EndTxn v5
  bumps the epoch and answers it): the Java client 4.x (``JAVA``).

What differs by nature between the brokers (producer ids, timestamps, node ids) is checked for its
shape and its relations (the same id again, a start time set or -1). Kafka answers EndTxn before
its markers are written, so a transaction is PrepareCommit/PrepareAbort for a moment: every step
that needs the markers waits for CompleteCommit/CompleteAbort with a deadline (``wait_state``).
"""
from __future__ import annotations

import time
import uuid

import pytest

from protocol.errors import ErrorCode as E
from protocol.messages import (
    AddOffsetsToTxnRequest,
    ApiVersionsRequest,
    AddPartitionsToTxnRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FetchRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ListTransactionsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
    SyncGroupRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from protocol.records import SimpleRecord, build_batch, iter_batches
from tests.support import RawClient, unique

from . import topics
from .conftest import TRANSACTION_SETTINGS
from .kafka_server import java_string_hashcode
from .test_group_conformance import join

TRANSACTION_KEY = 1                  # FindCoordinator key type of a transactional id
MAX_TIMEOUT_MS = 900000              # transaction.max.timeout.ms, Kafka's default
OFFSETS_PARTITIONS = 50              # offsets.topic.num.partitions, Kafka's default
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST = -1
COMMIT, ABORT = 1, 0                 # control record types of the end-transaction marker

# The versions each client sends (Produce: the highest the client knows).
TV1_CLIENTS = {
    "librdkafka": dict(init=4, produce=9, add_partitions=0, add_offsets=0, txn_offset_commit=3,
                       end_txn=1),
    "kafka-python": dict(init=4, produce=9, add_partitions=3, add_offsets=3, txn_offset_commit=3,
                         end_txn=3),
    "aiokafka": dict(init=0, produce=8, add_partitions=0, add_offsets=0, txn_offset_commit=0,
                     end_txn=0),
}
JAVA = dict(init=5, produce=13, add_partitions=None, add_offsets=None, txn_offset_commit=5,
            end_txn=5)


# ---------------------------------------------------------------------------------------------
# Fixtures

_READY: dict[str, str | None] = {}


def _wait_for_transaction_coordinator(port: int) -> str | None:
    """None once FindCoordinator(key type 1) and InitProducerId answer NONE, else why not.
    Kafka's first FindCoordinator for a transactional id creates __transaction_state and answers
    COORDINATOR_NOT_AVAILABLE; its partitions then load (COORDINATOR_LOAD_IN_PROGRESS)."""
    client = RawClient(port, client_id="conformance-warmup")
    last = None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = client.call(FindCoordinatorRequest(key_type=TRANSACTION_KEY,
                                                       coordinator_keys=["warmup"]), 4)
            last = ("FindCoordinator", E(found.coordinators[0].error_code).name)
            if found.coordinators[0].error_code == E.NONE:
                init = client.call(InitProducerIdRequest(
                    transactional_id=unique("warmup"), transaction_timeout_ms=60000,
                    producer_id=-1, producer_epoch=-1), 5)
                last = ("InitProducerId", E(init.error_code).name)
                if init.error_code == E.NONE:
                    return None
            time.sleep(0.2)
    finally:
        client.close()
    return f"no transaction coordinator within 60 s, last answer {last}"


@pytest.fixture
def client(target) -> RawClient:
    """A connection to a target whose transaction coordinator is ready."""
    if target.name not in _READY:
        _READY[target.name] = _wait_for_transaction_coordinator(target.port)
    assert _READY[target.name] is None, _READY[target.name]
    c = RawClient(target.port, client_id="conformance-txn")
    yield c
    c.close()


@pytest.fixture
def connect(target, client):
    """connect() -> another connection to the target (one per producer), closed at the end."""
    made: list[RawClient] = []

    def _connect(client_id: str = "conformance-txn") -> RawClient:
        c = RawClient(target.port, client_id=client_id)
        made.append(c)
        return c

    yield _connect
    for c in made:
        c.close()


@pytest.fixture
def topic(client) -> str:
    """A new 3-partition topic per scenario (offsets in the log are part of what is asserted),
    once every partition answers ListOffsets: Kafka's broker takes the leadership of a new
    partition a moment after its metadata shows the leader, and answers NOT_LEADER_OR_FOLLOWER
    to a Produce until then."""
    name = topics.create_topic(client, unique("txn"), 3)
    deadline = time.monotonic() + 30
    while any(list_offset(client, name, p, READ_UNCOMMITTED)[0] != E.NONE for p in range(3)):
        assert time.monotonic() < deadline, f"{name} never took writes"
        time.sleep(0.05)
    return name


# ---------------------------------------------------------------------------------------------
# Helpers

def partition_for(group: str) -> int:
    """The __consumer_offsets partition of a group (Kafka's partitionFor)."""
    h = java_string_hashcode(group)
    return (0 if h == -(1 << 31) else abs(h)) % OFFSETS_PARTITIONS


_ADVERTISED: dict[int, dict[int, tuple[int, int]]] = {}


def advertised(client: RawClient) -> dict[int, tuple[int, int]]:
    """{api key: (min, max)} of the broker behind ``client`` (asked once per broker)."""
    port = client.sock.getpeername()[1]
    if port not in _ADVERTISED:
        response = client.call(ApiVersionsRequest(client_software_name="conformance",
                                                  client_software_version="1"), 3)
        _ADVERTISED[port] = {k.api_key: (k.min_version, k.max_version)
                             for k in response.api_keys}
    return _ADVERTISED[port]


def topic_id(client: RawClient, name: str) -> uuid.UUID:
    meta = client.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                       allow_auto_topic_creation=False), 12)
    return meta.topics[0].topic_id


class Producer:
    """One transactional producer on its own connection: its producer id and epoch, the next
    sequence per partition, and the request versions of the client it stands for.

    Every method sends one request and returns Kafka's answer for it; a successful
    InitProducerId, or EndTxn v5 (which bumps the epoch), updates the id and epoch the way the
    client does, and a new epoch starts the sequences at 0 again."""

    def __init__(self, client: RawClient, versions: dict, transactional_id: str | None = None,
                 timeout_ms: int = 60000) -> None:
        self.client = client
        self.versions = versions
        self.transactional_id = unique("txn-id") if transactional_id is None else transactional_id
        self.timeout_ms = timeout_ms
        self.producer_id = -1
        self.epoch = -1
        self.sequences: dict[tuple[str, int], int] = {}
        self.last_timestamp = -1          # the max timestamp of the last batch sent
        self._topic_ids: dict[str, uuid.UUID] = {}

    def _new_epoch(self, producer_id: int, epoch: int) -> None:
        self.producer_id, self.epoch = producer_id, epoch
        self.sequences.clear()

    def init(self, version: int | None = None, producer_id: int = -1, producer_epoch: int = -1,
             timeout_ms: int | None = None):
        response = self.client.call(InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            producer_id=producer_id, producer_epoch=producer_epoch),
            self.versions["init"] if version is None else version)
        if response.error_code == E.NONE:
            self._new_epoch(response.producer_id, response.producer_epoch)
        return response

    def add_partitions(self, partitions, version: int | None = None, epoch: int | None = None,
                       producer_id: int | None = None) -> list[tuple[str, int, int]]:
        """AddPartitionsToTxn v0-v3 -> [(topic, partition, error code)] in answer order."""
        A = AddPartitionsToTxnRequest
        by_topic: dict[str, list[int]] = {}
        for name, partition in partitions:
            by_topic.setdefault(name, []).append(partition)
        response = self.client.call(A(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id if producer_id is None else producer_id,
            v3_and_below_producer_epoch=self.epoch if epoch is None else epoch,
            v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=n, partitions=ps)
                                 for n, ps in by_topic.items()]),
            self.versions["add_partitions"] if version is None else version)
        return sorted((t.name, p.partition_index, p.partition_error_code)
                      for t in response.results_by_topic_v3_and_below
                      for p in t.results_by_partition)

    def add_offsets(self, group: str, version: int | None = None,
                    epoch: int | None = None) -> int:
        response = self.client.call(AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.epoch if epoch is None else epoch, group_id=group),
            self.versions["add_offsets"] if version is None else version)
        return response.error_code

    def produce(self, topic: str, partition: int, values, version: int | None = None,
                epoch: int | None = None, sequence: int | None = None,
                producer_id: int | None = None, transactional_id: str | None = ""):
        """One transactional batch -> the partition's answer; the sequence advances on NONE.
        The version is capped at the broker's highest, as a client negotiates it: the Java
        client sends v13 where the broker has it, v12 elsewhere."""
        version = self.versions["produce"] if version is None else version
        version = min(version, advertised(self.client)[ProduceRequest.api_key][1])
        key = (topic, partition)
        base_sequence = self.sequences.get(key, 0) if sequence is None else sequence
        # the time now: a record older than segment.ms (7 days) than the next would make Kafka
        # roll a segment, and one Fetch reads a single segment
        now = int(time.time() * 1000)
        self.last_timestamp = now + len(values) - 1
        batch = build_batch(
            [SimpleRecord(key=None, value=v.encode(), timestamp=now + i)
             for i, v in enumerate(values)],
            producer_id=self.producer_id if producer_id is None else producer_id,
            producer_epoch=self.epoch if epoch is None else epoch,
            base_sequence=base_sequence, is_transactional=True)
        P = ProduceRequest
        data = P.TopicProduceData(partition_data=[P.PartitionProduceData(index=partition,
                                                                          records=batch)])
        if version >= 13:
            if topic not in self._topic_ids:
                self._topic_ids[topic] = topic_id(self.client, topic)
            data.topic_id = self._topic_ids[topic]
        else:
            data.name = topic
        response = self.client.call(P(
            transactional_id=self.transactional_id if transactional_id == "" else transactional_id,
            acks=-1, timeout_ms=30000, topic_data=[data]), version)
        answer = response.responses[0].partition_responses[0]
        if answer.error_code == E.NONE:
            self.sequences[key] = base_sequence + len(values)
        return answer

    def txn_offset_commit(self, group: str, offsets, version: int | None = None,
                          epoch: int | None = None, generation: int = -1, member: str = "",
                          instance: str | None = None) -> list[tuple[str, int, int]]:
        """TxnOffsetCommit of {(topic, partition): offset} -> [(topic, partition, error)]."""
        R = TxnOffsetCommitRequest
        by_topic: dict[str, list] = {}
        for (name, partition), offset in offsets.items():
            by_topic.setdefault(name, []).append(R.TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_leader_epoch=-1,
                committed_metadata=f"txn-{offset}"))
        response = self.client.call(R(
            transactional_id=self.transactional_id, group_id=group,
            producer_id=self.producer_id, producer_epoch=self.epoch if epoch is None else epoch,
            generation_id=generation, member_id=member, group_instance_id=instance,
            topics=[R.TxnOffsetCommitRequestTopic(name=n, partitions=ps)
                    for n, ps in by_topic.items()]),
            self.versions["txn_offset_commit"] if version is None else version)
        return sorted((t.name, p.partition_index, p.error_code)
                      for t in response.topics for p in t.partitions)

    def end(self, commit: bool, version: int | None = None, epoch: int | None = None,
            producer_id: int | None = None, transactional_id: str | None = None):
        version = self.versions["end_txn"] if version is None else version
        response = self.client.call(EndTxnRequest(
            transactional_id=self.transactional_id if transactional_id is None
            else transactional_id,
            producer_id=self.producer_id if producer_id is None else producer_id,
            producer_epoch=self.epoch if epoch is None else epoch, committed=commit), version)
        if version >= 5 and response.error_code == E.NONE and (
                (response.producer_id, response.producer_epoch) != (self.producer_id, self.epoch)):
            self._new_epoch(response.producer_id, response.producer_epoch)
        return response


def end_answer(response) -> tuple[int, int, int]:
    return response.error_code, response.producer_id, response.producer_epoch


def describe(client: RawClient, *transactional_ids: str):
    return client.call(DescribeTransactionsRequest(transactional_ids=list(transactional_ids)),
                       0).transaction_states


def partitions_of(state) -> set[tuple[str, int]]:
    """The partitions of a described transaction (Kafka lists them from a hash set)."""
    return {(t.topic, p) for t in state.topics for p in t.partitions}


def wait_state(client: RawClient, transactional_id: str, state: str, timeout: float = 30):
    """The described transaction once it is in ``state``; fails after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        [described] = describe(client, transactional_id)
        if described.transaction_state == state:
            return described
        assert time.monotonic() < deadline, f"never {state}: {described}"
        time.sleep(0.02)


def fetch(client: RawClient, topic: str, partition: int, offset: int, isolation: int,
          version: int = 12, max_bytes: int = 1 << 20):
    """One partition of a Fetch; from v13 the topic goes by its id."""
    F = FetchRequest
    wanted = F.FetchTopic(partitions=[F.FetchPartition(
        partition=partition, fetch_offset=offset, log_start_offset=-1,
        partition_max_bytes=max_bytes)])
    if version >= 13:
        wanted.topic_id = topic_id(client, topic)
    else:
        wanted.topic = topic
    response = client.call(F(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=isolation,
        session_id=0, session_epoch=-1, topics=[wanted], forgotten_topics_data=[], rack_id=""),
        version)
    return response.responses[0].partitions[0]


def batches(answer) -> list[tuple]:
    """(first offset, last offset, producer id, epoch, transactional, control, values) per batch;
    a control batch's values are its (marker type, coordinator epoch)."""
    out = []
    for batch in iter_batches(answer.records or b""):
        records = list(batch.records())
        if batch.is_control:
            [record] = records
            assert int.from_bytes(record.key[:2], "big") == 0       # key version
            assert int.from_bytes(record.value[:2], "big") == 0     # value version
            values = (int.from_bytes(record.key[2:4], "big"),
                      int.from_bytes(record.value[2:6], "big", signed=True))
        else:
            values = tuple(r.value.decode() for r in records)
        out.append((batch.base_offset, batch.last_offset, batch.producer_id,
                    batch.producer_epoch, batch.is_transactional, batch.is_control, values))
    return out


def whole_batches(answer) -> list[tuple[int, int]]:
    """(first, last offset) of each whole batch: Kafka fills partition_max_bytes, so the data
    may end in part of a batch, which clients drop."""
    data = answer.records or b""
    out = []
    position = 0
    while len(data) - position >= 12:
        batch_length = int.from_bytes(data[position + 8:position + 12], "big")
        if position + 12 + batch_length > len(data):
            break
        [batch] = iter_batches(data, position, position + 12 + batch_length)
        out.append((batch.base_offset, batch.last_offset))
        position += batch.size
    return out


def aborted(answer) -> list[tuple[int, int]] | None:
    if answer.aborted_transactions is None:
        return None
    return sorted((a.producer_id, a.first_offset) for a in answer.aborted_transactions)


def list_offset(client: RawClient, topic: str, partition: int, isolation: int,
                version: int = 7) -> tuple[int, int]:
    """ListOffsets latest -> (error, offset), at ``version`` or the broker's highest below it."""
    L = ListOffsetsRequest
    version = min(version, advertised(client)[L.api_key][1])
    response = client.call(L(replica_id=-1, isolation_level=isolation, topics=[
        L.ListOffsetsTopic(name=topic, partitions=[
            L.ListOffsetsPartition(partition_index=partition, timestamp=LATEST)])]), version)
    answer = response.topics[0].partitions[0]
    return answer.error_code, answer.offset


def offset_fetch(client: RawClient, group: str, topic: str, partitions, require_stable: bool,
                 version: int = 8) -> list[tuple[int, int, str, int]]:
    """OffsetFetch -> [(partition, offset, metadata, error)]; the group-level error must be 0."""
    R = OffsetFetchRequest
    if version >= 8:
        response = client.call(R(groups=[R.OffsetFetchRequestGroup(
            group_id=group, topics=[R.OffsetFetchRequestTopics(
                name=topic, partition_indexes=list(partitions))])],
            require_stable=require_stable), version)
        [answer] = response.groups
        assert answer.error_code == E.NONE
        found = answer.topics
    else:
        request = R(group_id=group, topics=[R.OffsetFetchRequestTopic(
            name=topic, partition_indexes=list(partitions))])
        if version >= 7:
            request.require_stable = require_stable
        response = client.call(request, version)
        if version >= 2:
            assert response.error_code == E.NONE
        found = response.topics
    return sorted((p.partition_index, p.committed_offset, p.metadata, p.error_code)
                  for t in found for p in t.partitions)


def commit_offset(client: RawClient, group: str, topic: str, partition: int, offset: int) -> None:
    """A plain (not transactional) offset commit, as an admin would do it."""
    R = OffsetCommitRequest
    response = client.call(R(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                             group_instance_id=None, topics=[R.OffsetCommitRequestTopic(
                                 name=topic, partitions=[R.OffsetCommitRequestPartition(
                                     partition_index=partition, committed_offset=offset,
                                     committed_leader_epoch=-1, committed_metadata="plain")])]),
                           8)
    assert response.topics[0].partitions[0].error_code == E.NONE


def fenced(version: int, new_code_from: int) -> int:
    """PRODUCER_FENCED from the request version that knows it, INVALID_PRODUCER_EPOCH before."""
    return E.PRODUCER_FENCED if version >= new_code_from else E.INVALID_PRODUCER_EPOCH


# ---------------------------------------------------------------------------------------------
# ApiVersions, FindCoordinator and InitProducerId

def test_api_versions_of_the_transaction_apis(target, client):
    versions = advertised(client)
    expected = {
        InitProducerIdRequest: (0, 5),        # v6 (two-phase commit) is not advertised yet
        AddPartitionsToTxnRequest: (0, 5),
        AddOffsetsToTxnRequest: (0, 4),
        EndTxnRequest: (0, 5),
        TxnOffsetCommitRequest: (0, 5),
        DescribeTransactionsRequest: (0, 0),
        ListTransactionsRequest: (0, 2),
        DescribeProducersRequest: (0, 0),
        WriteTxnMarkersRequest: (1, 2),
    }
    assert {r.__name__: versions.get(r.api_key) for r in expected} == {
        r.__name__: v for r, v in expected.items()}
    assert versions[ProduceRequest.api_key][1] >= 12          # transaction version 2 needs 12
    response = client.call(ApiVersionsRequest(client_software_name="conformance",
                                              client_software_version="1"), 3)
    finalized = {f.name: (f.min_version_level, f.max_version_level)
                 for f in response.finalized_features}
    assert finalized["transaction.version"] == (2, 2)


def test_find_coordinator_for_transactional_ids(target, client):
    meta = client.call(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    [broker] = meta.brokers
    node = (broker.node_id, broker.host, broker.port)
    assert broker.port == target.port
    tid = unique("txn-id")
    for version in (1, 3):
        for key in (tid, ""):    # Kafka finds a coordinator for the empty id too
            found = client.call(FindCoordinatorRequest(key=key, key_type=TRANSACTION_KEY),
                                version)
            assert (found.error_code, found.error_message) == (E.NONE, "NONE")
            assert (found.node_id, found.host, found.port) == node
    for version in (4, 6):
        keys = [tid, unique("txn-id"), ""]
        found = client.call(FindCoordinatorRequest(key_type=TRANSACTION_KEY,
                                                   coordinator_keys=keys), version)
        assert [(c.key, c.error_code, c.error_message, c.node_id, c.host, c.port)
                for c in found.coordinators] == [(k, E.NONE, "", *node) for k in keys]


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_init_producer_id_new_and_again(target, client, version):
    producer = Producer(client, JAVA)
    first = producer.init(version)
    assert (first.error_code, first.producer_epoch) == (E.NONE, 0)
    assert first.producer_id >= 0
    again = producer.init(version)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (
        E.NONE, first.producer_id, 1)
    other = Producer(client, JAVA).init(version)
    assert other.error_code == E.NONE and other.producer_id != first.producer_id


@pytest.mark.parametrize("version", [3, 4, 5])
def test_init_producer_id_with_producer_id_and_epoch(target, client, version):
    """v3+ carries the producer's id and epoch (KIP-360): the current ones bump the epoch, the
    previous ones are a retry of that bump (answered without a second bump), anything else is
    fenced, and only a bump that carried them leaves a previous epoch to retry with."""
    producer = Producer(client, JAVA)
    pid = producer.init(version).producer_id
    producer.init(version)
    producer.init(version)                                       # epoch 2, no previous epoch
    retry = producer.init(version, pid, 1)
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (
        fenced(version, 4), -1, -1)
    bump = producer.init(version, pid, 2)
    assert (bump.error_code, bump.producer_id, bump.producer_epoch) == (E.NONE, pid, 3)
    retry = producer.init(version, pid, 2)
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (E.NONE, pid, 3)
    for wrong_pid, wrong_epoch in [(pid, 1), (pid, 9), (pid + 1000, 0)]:
        wrong = producer.init(version, wrong_pid, wrong_epoch)
        assert (wrong.error_code, wrong.producer_id, wrong.producer_epoch) == (
            fenced(version, 4), -1, -1), (wrong_pid, wrong_epoch)
    for half in [(pid, -1), (-1, 3)]:
        invalid = producer.init(version, *half)
        assert (invalid.error_code, invalid.producer_id, invalid.producer_epoch) == (
            E.INVALID_REQUEST, -1, -1), half
    # a transactional id never seen: the given id is of no use, a new one is made
    fresh = Producer(client, JAVA).init(version, 123456789, 7)
    assert (fresh.error_code, fresh.producer_epoch) == (E.NONE, 0)
    assert fresh.producer_id not in (123456789, -1)


def test_init_producer_id_refusals(target, client):
    for timeout in (MAX_TIMEOUT_MS + 1, 0, -1):
        refused = Producer(client, JAVA, timeout_ms=timeout).init()
        assert (refused.error_code, refused.producer_id, refused.producer_epoch) == (
            E.INVALID_TRANSACTION_TIMEOUT, -1, -1), timeout
    at_max = Producer(client, JAVA, timeout_ms=MAX_TIMEOUT_MS).init()
    assert (at_max.error_code, at_max.producer_epoch) == (E.NONE, 0)
    empty = Producer(client, JAVA, transactional_id="").init()
    assert (empty.error_code, empty.producer_id, empty.producer_epoch) == (
        E.INVALID_REQUEST, -1, -1)
    # an idempotent producer (no transactional id): the timeout is not looked at
    for version in (0, 5):
        idempotent = client.call(InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=-5, producer_id=-1,
            producer_epoch=-1), version)
        assert (idempotent.error_code, idempotent.producer_epoch) == (E.NONE, 0)


# ---------------------------------------------------------------------------------------------
# Transaction version 1: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn v0-v4

@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_add_partitions_to_txn_errors(target, client, topic, version):
    producer = Producer(client, TV1_CLIENTS["kafka-python"])
    producer.producer_id, producer.epoch = 424242, 0
    assert producer.add_partitions([(topic, 0)], version) == [
        (topic, 0, E.INVALID_PRODUCER_ID_MAPPING)]            # before InitProducerId
    producer.init(3)
    missing = unique("missing")
    assert producer.add_partitions([(missing, 0)], version) == [
        (missing, 0, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert producer.add_partitions([(topic, 7)], version) == [
        (topic, 7, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert producer.add_partitions([(topic, 0), (missing, 0)], version) == sorted([
        (topic, 0, E.OPERATION_NOT_ATTEMPTED), (missing, 0, E.UNKNOWN_TOPIC_OR_PARTITION)])
    for epoch in (producer.epoch + 1, producer.epoch - 1):
        assert producer.add_partitions([(topic, 0)], version, epoch=epoch) == [
            (topic, 0, fenced(version, 2))]
    assert producer.add_partitions([(topic, 0)], version, producer_id=producer.producer_id + 1) \
        == [(topic, 0, E.INVALID_PRODUCER_ID_MAPPING)]
    [state] = describe(client, producer.transactional_id)
    assert (state.transaction_state, state.transaction_start_time_ms) == ("Empty", -1)
    assert producer.add_partitions([(topic, 0)], version) == [(topic, 0, E.NONE)]
    assert producer.add_partitions([(topic, 0), (topic, 1)], version) == [
        (topic, 0, E.NONE), (topic, 1, E.NONE)]
    [state] = describe(client, producer.transactional_id)
    assert state.transaction_state == "Ongoing" and state.transaction_start_time_ms > 0
    assert partitions_of(state) == {(topic, 0), (topic, 1)}


@pytest.mark.parametrize("version", [4, 5])
def test_add_partitions_to_txn_between_brokers(target, client, topic, version):
    """v4+ is what a partition leader sends to the coordinator: a batch of transactions, each
    only verified (is the partition in it?) or added, with PRODUCER_FENCED unmapped."""
    A = AddPartitionsToTxnRequest
    producer = Producer(client, JAVA)
    producer.init()
    pid, epoch, tid = producer.producer_id, producer.epoch, producer.transactional_id

    def call(*transactions):
        response = client.call(A(transactions=[A.AddPartitionsToTxnTransaction(
            transactional_id=t, producer_id=p, producer_epoch=e, verify_only=verify,
            topics=[A.AddPartitionsToTxnTopic(name=n, partitions=ps) for n, ps in wanted])
            for t, p, e, verify, wanted in transactions]), version)
        assert response.error_code == E.NONE
        return [(r.transactional_id, sorted((t.name, p.partition_index, p.partition_error_code)
                                            for t in r.topic_results
                                            for p in t.results_by_partition))
                for r in response.results_by_transaction]

    assert call((tid, pid, epoch, True, [(topic, [0])])) == [
        (tid, [(topic, 0, E.TRANSACTION_ABORTABLE)])]
    assert call((tid, pid, epoch, False, [(topic, [0])])) == [(tid, [(topic, 0, E.NONE)])]
    [state] = describe(client, tid)
    assert (state.transaction_state, partitions_of(state)) == ("Ongoing", {(topic, 0)})
    assert call((tid, pid, epoch, True, [(topic, [0, 1])])) == [
        (tid, [(topic, 0, E.NONE), (topic, 1, E.TRANSACTION_ABORTABLE)])]
    for verify in (True, False):
        assert call((tid, pid, epoch + 1, verify, [(topic, [1])])) == [
            (tid, [(topic, 1, E.PRODUCER_FENCED)])]
        assert call((tid, pid + 1, epoch, verify, [(topic, [1])])) == [
            (tid, [(topic, 1, E.INVALID_PRODUCER_ID_MAPPING)])]
        assert call(("", pid, epoch, verify, [(topic, [1])])) == [
            ("", [(topic, 1, E.INVALID_REQUEST)])]
    missing, unknown = unique("missing"), unique("unknown")
    assert call((tid, pid, epoch, True, [(missing, [0])])) == [
        (tid, [(missing, 0, E.UNKNOWN_TOPIC_OR_PARTITION)])]
    assert call((tid, pid, epoch, True, [(topic, [0])]),
                (unknown, pid, epoch, True, [(topic, [0])])) == [
        (tid, [(topic, 0, E.NONE)]), (unknown, [(topic, 0, E.INVALID_PRODUCER_ID_MAPPING)])]


@pytest.mark.parametrize("version", [3, 8, 9, 10, 11])
def test_produce_without_add_partitions_in_tv1(target, client, topic, version):
    """A Produce before v12 cannot add its partition: Kafka verifies the partition with the
    coordinator and refuses the batch; v11 clients know TRANSACTION_ABORTABLE, older ones get
    INVALID_TXN_STATE with a message (v8+ has the field)."""
    producer = Producer(client, TV1_CLIENTS["librdkafka"])
    producer.init()
    answer = producer.produce(topic, 0, ["r0"], version)
    if version < 11:
        assert answer.error_code == E.INVALID_TXN_STATE
        if version >= 8:
            assert answer.error_message == "Partition was not added to the transaction"
    else:
        assert (answer.error_code, answer.error_message) == (E.TRANSACTION_ABORTABLE, None)
    assert (answer.base_offset, answer.log_start_offset) == (-1, -1)
    [state] = describe(client, producer.transactional_id)
    assert (state.transaction_state, partitions_of(state)) == ("Empty", set())


@pytest.mark.parametrize("name", sorted(TV1_CLIENTS))
def test_tv1_commit_then_abort(target, client, topic, name):
    """A whole transaction version 1 session with one client's versions: records and offsets
    committed, then a second transaction at the same epoch aborted; EndTxn retried after each."""
    producer = Producer(client, TV1_CLIENTS[name])
    init = producer.init()
    pid, epoch = init.producer_id, init.producer_epoch
    group = unique("txn-group")
    assert producer.add_partitions([(topic, 0), (topic, 1)]) == [
        (topic, 0, E.NONE), (topic, 1, E.NONE)]
    assert producer.produce(topic, 0, ["a0", "a1"]).error_code == E.NONE
    assert producer.produce(topic, 1, ["a2"]).error_code == E.NONE
    assert producer.txn_offset_commit(group, {(topic, 0): 3}) == [
        (topic, 0, E.INVALID_TXN_STATE)]                         # before AddOffsetsToTxn
    assert producer.add_offsets(group) == E.NONE
    assert producer.add_offsets(group) == E.NONE                 # again: nothing changes
    assert producer.txn_offset_commit(group, {(topic, 0): 3, (topic, 1): 1}) == [
        (topic, 0, E.NONE), (topic, 1, E.NONE)]
    [state] = describe(client, producer.transactional_id)
    assert (state.transaction_state, state.producer_id, state.producer_epoch) == (
        "Ongoing", pid, epoch)
    assert partitions_of(state) == {(topic, 0), (topic, 1),
                                    ("__consumer_offsets", partition_for(group))}

    assert end_answer(producer.end(True)) == (E.NONE, -1, -1)    # v0-v4 have no id fields
    done = wait_state(client, producer.transactional_id, "CompleteCommit")
    assert (done.producer_epoch, done.topics) == (epoch, [])
    assert done.transaction_start_time_ms == state.transaction_start_time_ms
    assert producer.end(True).error_code == E.NONE               # a retried commit
    assert producer.end(False).error_code == E.INVALID_TXN_STATE
    assert offset_fetch(client, group, topic, [0, 1], require_stable=True) == [
        (0, 3, "txn-3", E.NONE), (1, 1, "txn-1", E.NONE)]
    committed = fetch(client, topic, 0, 0, READ_COMMITTED)
    assert batches(committed) == [
        (0, 1, pid, epoch, True, False, ("a0", "a1")),
        (2, 2, pid, epoch, True, True, (COMMIT, batches(committed)[1][6][1]))]
    assert batches(committed)[1][6][1] >= 0                      # the coordinator epoch
    assert aborted(committed) == []

    # the next transaction: same epoch (no bump in version 1), the sequences go on
    assert producer.add_partitions([(topic, 0)]) == [(topic, 0, E.NONE)]
    assert producer.produce(topic, 0, ["b0"]).error_code == E.NONE
    assert producer.add_offsets(group) == E.NONE
    assert producer.txn_offset_commit(group, {(topic, 0): 9}) == [(topic, 0, E.NONE)]
    assert producer.end(False).error_code == E.NONE
    wait_state(client, producer.transactional_id, "CompleteAbort")
    assert producer.end(False).error_code == E.NONE              # a retried abort
    assert producer.end(True).error_code == E.INVALID_TXN_STATE
    assert offset_fetch(client, group, topic, [0], require_stable=True) == [
        (0, 3, "txn-3", E.NONE)]
    after = fetch(client, topic, 0, 0, READ_COMMITTED)
    assert batches(after)[2:] == [
        (3, 3, pid, epoch, True, False, ("b0",)),
        (4, 4, pid, epoch, True, True, (ABORT, batches(committed)[1][6][1]))]
    assert aborted(after) == [(pid, 3)]


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_end_txn_errors(target, client, topic, version):
    producer = Producer(client, TV1_CLIENTS["librdkafka"])
    producer.init()
    producer.init()                                              # epoch 1: one below is 0
    assert producer.add_partitions([(topic, 0)]) == [(topic, 0, E.NONE)]
    cases = [
        (dict(epoch=producer.epoch + 1), fenced(version, 2)),
        (dict(epoch=producer.epoch - 1), fenced(version, 2)),
        (dict(producer_id=producer.producer_id + 1), E.INVALID_PRODUCER_ID_MAPPING),
        (dict(transactional_id=unique("unknown")), E.INVALID_PRODUCER_ID_MAPPING),
        (dict(transactional_id=""), E.INVALID_REQUEST),
    ]
    for fields, error in cases:
        for commit in (True, False):
            answer = producer.end(commit, version, **fields)
            assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (
                error, -1, -1), (fields, commit)
    [state] = describe(client, producer.transactional_id)
    assert state.transaction_state == "Ongoing"


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_end_txn_with_nothing_added(target, client, version):
    """Version 1 refuses to end a transaction that never began, commit or abort; EndTxn v5
    refuses the commit but aborts (with a new epoch): the Java client's way out of an
    abortable error that struck before any partition was added."""
    producer = Producer(client, TV1_CLIENTS["librdkafka"])
    init = producer.init()
    for commit in (True, False):
        assert producer.end(commit, version).error_code == E.INVALID_TXN_STATE
    assert end_answer(producer.end(True, 5)) == (E.INVALID_TXN_STATE, -1, -1)
    assert end_answer(producer.end(False, 5)) == (E.NONE, init.producer_id, init.producer_epoch + 1)
    done = wait_state(client, producer.transactional_id, "CompleteAbort")
    assert (done.producer_epoch, done.topics) == (init.producer_epoch + 1, [])
    assert done.transaction_start_time_ms > 0


# ---------------------------------------------------------------------------------------------
# Transaction version 2: Produce v12+ and TxnOffsetCommit v5 add their partitions, EndTxn v5

def test_tv2_commit_then_abort(target, client, topic):
    producer = Producer(client, JAVA)
    init = producer.init()
    pid, epoch = init.producer_id, init.producer_epoch
    group = unique("txn-group")
    [state] = describe(client, producer.transactional_id)
    assert (state.transaction_state, state.transaction_start_time_ms) == ("Empty", -1)
    first = producer.produce(topic, 0, ["a0", "a1"])             # no AddPartitionsToTxn
    assert (first.error_code, first.base_offset, first.error_message) == (E.NONE, 0, None)
    [state] = describe(client, producer.transactional_id)
    assert state.transaction_state == "Ongoing" and partitions_of(state) == {(topic, 0)}
    assert producer.txn_offset_commit(group, {(topic, 0): 2}) == [(topic, 0, E.NONE)]
    [state] = describe(client, producer.transactional_id)
    assert partitions_of(state) == {(topic, 0), ("__consumer_offsets", partition_for(group))}
    assert offset_fetch(client, group, topic, [0], require_stable=True) == [
        (0, -1, "", E.UNSTABLE_OFFSET_COMMIT)]

    committed = producer.end(True)
    assert end_answer(committed) == (E.NONE, pid, epoch + 1)     # the bumped epoch
    done = wait_state(client, producer.transactional_id, "CompleteCommit")
    assert (done.producer_id, done.producer_epoch, done.topics) == (pid, epoch + 1, [])
    # a retry carries the epoch the commit was sent with: answered with the bumped one
    assert end_answer(producer.end(True, epoch=epoch)) == (E.NONE, pid, epoch + 1)
    assert end_answer(producer.end(False, epoch=epoch)) == (E.INVALID_TXN_STATE, -1, -1)
    assert end_answer(producer.end(True)) == (E.INVALID_TXN_STATE, -1, -1)   # nothing began
    assert end_answer(producer.end(True, epoch=epoch + 2)) == (E.PRODUCER_FENCED, -1, -1)
    assert end_answer(producer.end(True, 4, epoch=epoch)) == (E.PRODUCER_FENCED, -1, -1)
    assert offset_fetch(client, group, topic, [0], require_stable=True) == [
        (0, 2, "txn-2", E.NONE)]

    second = producer.produce(topic, 0, ["b0"])                  # epoch + 1, sequence 0 again
    assert (second.error_code, second.base_offset) == (E.NONE, 3)
    assert end_answer(producer.end(False)) == (E.NONE, pid, epoch + 2)
    wait_state(client, producer.transactional_id, "CompleteAbort")
    assert end_answer(producer.end(False, epoch=epoch + 1)) == (E.NONE, pid, epoch + 2)
    assert end_answer(producer.end(True, epoch=epoch + 1)) == (E.INVALID_TXN_STATE, -1, -1)
    log = batches(fetch(client, topic, 0, 0, READ_UNCOMMITTED))
    coordinator_epoch = log[1][6][1]
    assert log == [
        (0, 1, pid, epoch, True, False, ("a0", "a1")),
        (2, 2, pid, epoch + 1, True, True, (COMMIT, coordinator_epoch)),   # marker: new epoch
        (3, 3, pid, epoch + 1, True, False, ("b0",)),
        (4, 4, pid, epoch + 2, True, True, (ABORT, coordinator_epoch))]
    assert coordinator_epoch >= 0


def test_tv1_requests_on_a_tv2_transaction(target, client, topic):
    """A transaction begun by Produce v12+ still takes AddPartitionsToTxn v3 and
    AddOffsetsToTxn v3 (Kafka does not refuse the older flow), and EndTxn v5 still bumps."""
    producer = Producer(client, dict(JAVA, add_partitions=3, add_offsets=3))
    init = producer.init()
    group = unique("txn-group")
    assert producer.produce(topic, 0, ["a0"]).error_code == E.NONE
    assert producer.add_partitions([(topic, 0), (topic, 1)]) == [
        (topic, 0, E.NONE), (topic, 1, E.NONE)]
    assert producer.add_offsets(group) == E.NONE
    [state] = describe(client, producer.transactional_id)
    assert partitions_of(state) == {(topic, 0), (topic, 1),
                                    ("__consumer_offsets", partition_for(group))}
    assert end_answer(producer.end(True)) == (E.NONE, init.producer_id, init.producer_epoch + 1)
    wait_state(client, producer.transactional_id, "CompleteCommit")


def test_produce_errors_of_transactional_batches(target, client, topic):
    producer = Producer(client, JAVA)
    producer.init()
    for version in (11, 13):
        cases = [
            (dict(producer_id=producer.producer_id + 1000), E.INVALID_PRODUCER_ID_MAPPING),
            (dict(transactional_id=unique("unknown")), E.INVALID_PRODUCER_ID_MAPPING),
            (dict(transactional_id=None), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            (dict(epoch=producer.epoch + 3), E.INVALID_PRODUCER_EPOCH),
        ]
        for fields, error in cases:
            answer = producer.produce(topic, 0, ["x"], version, **fields)
            assert (answer.error_code, answer.error_message, answer.base_offset) == (
                error, None, -1), (version, fields)
    gap = producer.produce(topic, 0, ["x"], sequence=5)
    assert (gap.error_code, gap.error_message) == (E.OUT_OF_ORDER_SEQUENCE_NUMBER, None)
    assert producer.produce(topic, 0, ["x"]).error_code == E.NONE


# ---------------------------------------------------------------------------------------------
# Fencing and timeouts

@pytest.mark.parametrize("flow", ["tv1", "tv2"])
def test_fencing_by_a_second_init_producer_id(target, client, connect, topic, flow):
    versions = TV1_CLIENTS["kafka-python"] if flow == "tv1" else JAVA
    old = Producer(client, versions)
    init = old.init()
    pid, epoch = init.producer_id, init.producer_epoch
    if flow == "tv1":
        assert old.add_partitions([(topic, 0)]) == [(topic, 0, E.NONE)]
    assert old.produce(topic, 0, ["x"]).error_code == E.NONE

    new = Producer(connect(), JAVA, transactional_id=old.transactional_id)
    first = new.init()       # the coordinator aborts the open transaction with a fence epoch
    assert (first.error_code, first.producer_id, first.producer_epoch) == (
        E.CONCURRENT_TRANSACTIONS, -1, -1)
    deadline = time.monotonic() + 30
    while True:
        again = new.init()
        if again.error_code != E.CONCURRENT_TRANSACTIONS:
            break
        assert time.monotonic() < deadline, "InitProducerId stays CONCURRENT_TRANSACTIONS"
        time.sleep(0.02)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (E.NONE, pid, epoch + 2)
    [state] = describe(client, old.transactional_id)
    assert (state.transaction_state, state.producer_epoch, state.transaction_start_time_ms,
            state.topics) == ("Empty", epoch + 2, -1, [])

    for version in (3, 8, 11, 12, 13):
        for partition in (0, 1):
            answer = old.produce(topic, partition, ["y"], version)
            assert (answer.error_code, answer.error_message, answer.base_offset) == (
                E.INVALID_PRODUCER_EPOCH, None, -1), (version, partition)
    for version in range(6):
        for commit in (True, False):
            assert end_answer(old.end(commit, version)) == (fenced(version, 2), -1, -1), version
    for version in (3, 4, 5):
        answer = old.init(version, pid, epoch)
        assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (
            fenced(version, 4), -1, -1)
    for version in (0, 2, 3):
        assert old.add_partitions([(topic, 1)], version) == [(topic, 1, fenced(version, 2))]
        assert old.add_offsets("g", version) == fenced(version, 2)
    for version in (0, 3, 4, 5):
        assert old.txn_offset_commit("g", {(topic, 0): 1}, version) == [
            (topic, 0, E.INVALID_PRODUCER_EPOCH)]
    log = fetch(client, topic, 0, 0, READ_COMMITTED)
    assert [b[:6] for b in batches(log)] == [(0, 0, pid, epoch, True, False),
                                             (1, 1, pid, epoch + 1, True, True)]
    assert batches(log)[1][6][0] == ABORT
    assert aborted(log) == [(pid, 0)]


@pytest.mark.parametrize("flow", ["tv1", "tv2"])
def test_timed_out_transaction_is_aborted(target, client, topic, flow):
    if not target.is_kafka:
        from broker.config import SETTINGS
        for name, value in TRANSACTION_SETTINGS.items():
            assert name in SETTINGS, f"kbroker runs without {name}={value} (unknown to its config)"
    versions = TV1_CLIENTS["librdkafka"] if flow == "tv1" else JAVA
    producer = Producer(client, versions, timeout_ms=1000)
    init = producer.init()
    pid, epoch = init.producer_id, init.producer_epoch
    if flow == "tv1":
        assert producer.add_partitions([(topic, 0)]) == [(topic, 0, E.NONE)]
    assert producer.produce(topic, 0, ["x"]).error_code == E.NONE
    [ongoing] = describe(client, producer.transactional_id)
    aborted_state = wait_state(client, producer.transactional_id, "CompleteAbort")
    assert (aborted_state.producer_id, aborted_state.producer_epoch, aborted_state.topics,
            aborted_state.transaction_timeout_ms) == (pid, epoch + 1, [], 1000)
    assert aborted_state.transaction_start_time_ms == ongoing.transaction_start_time_ms

    for version, partition in [(11, 0), (13, 1), (13, 0)]:
        answer = producer.produce(topic, partition, ["y"], version)
        assert (answer.error_code, answer.base_offset) == (E.INVALID_PRODUCER_EPOCH, -1)
    for version in (1, 4):
        for commit in (True, False):
            assert end_answer(producer.end(commit, version)) == (fenced(version, 2), -1, -1)
    assert producer.add_partitions([(topic, 1)], 0) == [(topic, 1, E.INVALID_PRODUCER_EPOCH)]
    assert producer.add_partitions([(topic, 1)], 3) == [(topic, 1, E.PRODUCER_FENCED)]
    assert producer.add_offsets("g", 0) == E.INVALID_PRODUCER_EPOCH
    for version in (3, 5):
        assert producer.txn_offset_commit("g", {(topic, 0): 1}, version) == [
            (topic, 0, E.INVALID_PRODUCER_EPOCH)]
    # EndTxn v5: the abort counts as a retry of the coordinator's own abort, the commit cannot be
    assert end_answer(producer.end(True, 5)) == (E.INVALID_TXN_STATE, -1, -1)
    assert end_answer(producer.end(False, 5, epoch=epoch)) == (E.NONE, pid, epoch + 1)
    # the epoch the timeout fenced is the previous epoch: InitProducerId with it is a retry
    retry = producer.init(5, pid, epoch)
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (E.NONE, pid, epoch + 1)
    bump = producer.init(5, pid, epoch + 1)
    assert (bump.error_code, bump.producer_id, bump.producer_epoch) == (E.NONE, pid, epoch + 2)
    log = fetch(client, topic, 0, 0, READ_COMMITTED)
    assert [b[:6] for b in batches(log)] == [(0, 0, pid, epoch, True, False),
                                             (1, 1, pid, epoch + 1, True, True)]
    assert aborted(log) == [(pid, 0)]


# ---------------------------------------------------------------------------------------------
# The data plane: last stable offset, markers, aborted transactions, ListOffsets

def test_last_stable_offset_and_aborted_transactions(target, client, topic):
    idempotent = client.call(InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
        producer_epoch=-1), 4)
    P = ProduceRequest
    now = int(time.time() * 1000)
    batch = build_batch([SimpleRecord(key=None, value=b"i0", timestamp=now),
                         SimpleRecord(key=None, value=b"i1", timestamp=now)],
                        producer_id=idempotent.producer_id,
                        producer_epoch=idempotent.producer_epoch, base_sequence=0)
    written = client.call(P(acks=-1, timeout_ms=30000, topic_data=[P.TopicProduceData(
        name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])]), 9)
    assert written.responses[0].partition_responses[0].error_code == E.NONE

    producer = Producer(client, JAVA)
    init = producer.init()
    pid, epoch = init.producer_id, init.producer_epoch
    assert producer.produce(topic, 0, ["a0", "a1", "a2"]).base_offset == 2
    for version in (4, 12):
        committed = fetch(client, topic, 0, 0, READ_COMMITTED, version)
        assert (committed.error_code, committed.high_watermark, committed.last_stable_offset) \
            == (E.NONE, 5, 2)
        assert [b[:2] for b in batches(committed)] == [(0, 1)]    # stops at the LSO
        assert aborted(committed) == []
        uncommitted = fetch(client, topic, 0, 0, READ_UNCOMMITTED, version)
        assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (5, 2)
        assert [b[:2] for b in batches(uncommitted)] == [(0, 1), (2, 4)]
        assert aborted(uncommitted) is None
    for version in (2, 5, 7, 11):
        assert list_offset(client, topic, 0, READ_COMMITTED, version) == (E.NONE, 2)
        assert list_offset(client, topic, 0, READ_UNCOMMITTED, version) == (E.NONE, 5)

    assert producer.end(True).error_code == E.NONE
    wait_state(client, producer.transactional_id, "CompleteCommit")
    committed = fetch(client, topic, 0, 0, READ_COMMITTED)
    assert (committed.high_watermark, committed.last_stable_offset) == (6, 6)
    assert [b[:6] for b in batches(committed)][1:] == [
        (2, 4, pid, epoch, True, False), (5, 5, pid, epoch + 1, True, True)]

    assert producer.produce(topic, 0, ["b0", "b1"]).base_offset == 6
    assert producer.end(False).error_code == E.NONE
    wait_state(client, producer.transactional_id, "CompleteAbort")
    for offset in (0, 6, 8):
        answer = fetch(client, topic, 0, offset, READ_COMMITTED)
        assert (answer.high_watermark, answer.last_stable_offset) == (9, 9)
        assert aborted(answer) == [(pid, 6)], offset
    assert aborted(fetch(client, topic, 0, 9, READ_COMMITTED)) == []
    everything = batches(fetch(client, topic, 0, 0, READ_UNCOMMITTED))
    assert [b[:6] for b in everything][3:] == [
        (6, 7, pid, epoch + 1, True, False), (8, 8, pid, epoch + 2, True, True)]
    assert everything[3][6] == ("b0", "b1")                        # still there, uncommitted
    assert everything[4][6][0] == ABORT
    for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
        assert list_offset(client, topic, 0, isolation) == (E.NONE, 9)


def test_aborted_transactions_listed_by_fetch_offset(target, client, topic):
    """Which aborted transactions a read_committed Fetch lists: every one whose marker is at or
    after the fetch offset, up to the LSO, however little data the partition's byte limit lets
    through; with topic ids (v13+) as with names."""
    idempotent = client.call(InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
        producer_epoch=-1), 4)
    P = ProduceRequest

    def plain(value: bytes, sequence: int) -> None:
        batch = build_batch([SimpleRecord(key=None, value=value,
                                          timestamp=int(time.time() * 1000))],
                            producer_id=idempotent.producer_id,
                            producer_epoch=idempotent.producer_epoch, base_sequence=sequence)
        written = client.call(P(acks=-1, timeout_ms=30000, topic_data=[P.TopicProduceData(
            name=topic, partition_data=[P.PartitionProduceData(index=0, records=batch)])]), 9)
        assert written.responses[0].partition_responses[0].error_code == E.NONE

    plain(b"i0", 0)                                        # 0
    first = Producer(client, JAVA)
    first.init()
    assert first.produce(topic, 0, ["a0", "a1", "a2"]).base_offset == 1      # 1-3
    assert first.end(False).error_code == E.NONE                             # marker 4
    wait_state(client, first.transactional_id, "CompleteAbort")
    plain(b"i1", 1)                                        # 5
    second = Producer(client, JAVA)
    second.init()
    assert second.produce(topic, 0, ["b0"]).base_offset == 6                 # 6
    assert second.end(False).error_code == E.NONE                            # marker 7
    wait_state(client, second.transactional_id, "CompleteAbort")
    both = [(first.producer_id, 1), (second.producer_id, 6)]

    for offset, expected in [(0, both), (1, both), (4, both), (5, [both[1]]),
                             (7, [both[1]]), (8, [])]:
        for max_bytes in (1, 1 << 20):
            answer = fetch(client, topic, 0, offset, READ_COMMITTED, max_bytes=max_bytes)
            assert (answer.high_watermark, answer.last_stable_offset) == (8, 8)
            assert aborted(answer) == sorted(expected), (offset, max_bytes)
            if offset < 8:
                assert whole_batches(answer)[0][0] == offset
    assert whole_batches(fetch(client, topic, 0, 0, READ_COMMITTED, max_bytes=1)) == [(0, 0)]
    highest = advertised(client)[FetchRequest.api_key][1]     # 18 on Kafka 4.3.1
    for version in sorted({min(v, highest) for v in (12, 13, 16, highest)}):
        committed = fetch(client, topic, 0, 0, READ_COMMITTED, version)
        assert aborted(committed) == both
        assert whole_batches(committed) == [(0, 0), (1, 3), (4, 4), (5, 5), (6, 6), (7, 7)]
        assert aborted(fetch(client, topic, 0, 0, READ_UNCOMMITTED, version)) is None


# ---------------------------------------------------------------------------------------------
# Transactional offsets

@pytest.mark.parametrize("flow", ["tv1", "tv2"])
def test_offset_fetch_with_pending_transactional_offsets(target, client, topic, flow):
    group = unique("txn-group")
    commit_offset(client, group, topic, 0, 5)
    producer = Producer(client, TV1_CLIENTS["kafka-python"] if flow == "tv1" else JAVA)
    producer.init()
    if flow == "tv1":
        assert producer.add_offsets(group) == E.NONE
    assert producer.txn_offset_commit(group, {(topic, 0): 7, (topic, 1): 3}) == [
        (topic, 0, E.NONE), (topic, 1, E.NONE)]
    before = [(0, 5, "plain", E.NONE), (1, -1, "", E.NONE), (2, -1, "", E.NONE)]
    for version in (1, 6, 7, 8):        # the pending offsets are not visible
        assert offset_fetch(client, group, topic, [0, 1, 2], False, version) == before
    for version in (7, 8):
        assert offset_fetch(client, group, topic, [0, 1, 2], True, version) == [
            (0, -1, "", E.UNSTABLE_OFFSET_COMMIT), (1, -1, "", E.UNSTABLE_OFFSET_COMMIT),
            (2, -1, "", E.NONE)]

    assert producer.end(False).error_code == E.NONE
    wait_state(client, producer.transactional_id, "CompleteAbort")
    assert offset_fetch(client, group, topic, [0, 1, 2], True) == before

    if flow == "tv1":
        assert producer.add_offsets(group) == E.NONE
    assert producer.txn_offset_commit(group, {(topic, 0): 8}) == [(topic, 0, E.NONE)]
    assert producer.end(True).error_code == E.NONE
    wait_state(client, producer.transactional_id, "CompleteCommit")
    assert offset_fetch(client, group, topic, [0, 1], True) == [
        (0, 8, "txn-8", E.NONE), (1, -1, "", E.NONE)]


@pytest.mark.parametrize("version", [0, 3, 4])
def test_txn_offset_commit_errors(target, client, topic, version):
    producer = Producer(client, TV1_CLIENTS["kafka-python"])
    producer.init()
    group = unique("txn-group")
    not_added = E.TRANSACTION_ABORTABLE if version >= 4 else E.INVALID_TXN_STATE
    assert producer.txn_offset_commit(group, {(topic, 0): 1}, version) == [(topic, 0, not_added)]
    [state] = describe(client, producer.transactional_id)
    assert state.transaction_state == "Empty"
    assert producer.add_offsets(group) == E.NONE
    missing = unique("missing")
    assert producer.txn_offset_commit(group, {(missing, 0): 1, (topic, 9): 1}, version) == sorted(
        [(missing, 0, E.UNKNOWN_TOPIC_OR_PARTITION), (topic, 9, E.UNKNOWN_TOPIC_OR_PARTITION)])
    assert producer.txn_offset_commit(group, {(topic, 0): 1}, version,
                                      epoch=producer.epoch + 1) == [
        (topic, 0, E.INVALID_PRODUCER_EPOCH)]
    for add_offsets_version in (0, 1, 2, 3):
        assert producer.add_offsets(group, add_offsets_version, epoch=producer.epoch + 1) == \
            fenced(add_offsets_version, 2)
    assert producer.txn_offset_commit(group, {(topic, 0): 1}, version) == [(topic, 0, E.NONE)]


@pytest.mark.parametrize("version", [3, 4, 5])
def test_txn_offset_commit_checks_the_group(target, client, topic, version):
    """TxnOffsetCommit v3+ carries the consumer's generation and member id: the group
    coordinator checks them as for OffsetCommit, after the partition-in-transaction check
    (v5 adds the offsets partition first, so a refused commit still leaves it in the txn)."""
    producer = Producer(client, dict(TV1_CLIENTS["kafka-python"], txn_offset_commit=version))
    producer.init()
    absent = unique("txn-group")
    if version < 5:
        assert producer.add_offsets(absent) == E.NONE
    offsets = {(topic, 0): 1}
    for generation, member, error in [(5, "x", E.ILLEGAL_GENERATION), (-1, "x", E.NONE),
                                      (5, "", E.UNKNOWN_MEMBER_ID), (-1, "", E.NONE)]:
        assert producer.txn_offset_commit(absent, offsets, generation=generation,
                                          member=member) == [(topic, 0, error)], (
            generation, member)

    group = unique("txn-group")
    if version < 5:
        assert producer.add_offsets(group) == E.NONE
    joined = join(client, 5, group, topic=topic)
    joined = join(client, 5, group, member_id=joined.member_id, topic=topic)
    assert joined.error_code == E.NONE
    synced = client.call(SyncGroupRequest(
        group_id=group, generation_id=joined.generation_id, member_id=joined.member_id,
        group_instance_id=None, protocol_type="consumer", protocol_name="range",
        assignments=[]), 5)
    assert synced.error_code == E.NONE
    generation, member = joined.generation_id, joined.member_id
    for fields, error in [
            (dict(generation=generation, member=member), E.NONE),
            (dict(generation=generation + 1, member=member), E.ILLEGAL_GENERATION),
            (dict(generation=generation, member="nobody"), E.UNKNOWN_MEMBER_ID),
            (dict(generation=-1, member=member), E.ILLEGAL_GENERATION),
            (dict(generation=generation, member=member, instance="unknown-instance"),
             E.UNKNOWN_MEMBER_ID),
            (dict(generation=-1, member=""), E.NONE)]:
        assert producer.txn_offset_commit(group, offsets, **fields) == [(topic, 0, error)], \
            fields
    [state] = describe(client, producer.transactional_id)
    assert partitions_of(state) == {("__consumer_offsets", partition_for(absent)),
                                    ("__consumer_offsets", partition_for(group))}


@pytest.mark.parametrize("version", [3, 5])
def test_txn_offset_commit_to_a_consumer_protocol_group(target, client, topic, version):
    """A KIP-848 group with a member: TxnOffsetCommit checks the member's id and epoch, but one
    that names no member at all (generation -1, no member id, no instance id: the producer of
    sendOffsetsToTransaction(offsets, groupId)) commits, as Kafka's ConsumerGroup lets it."""
    from .test_consumer_group_conformance import Member
    producer = Producer(client, dict(TV1_CLIENTS["kafka-python"], txn_offset_commit=version))
    producer.init()
    group = unique("txn-848")
    if version < 5:
        assert producer.add_offsets(group) == E.NONE
    member = Member(client, group, (topic, topic_id(client, topic)))
    joined = member.heartbeat(0)
    assert joined.error_code == E.NONE and joined.member_epoch >= 1
    epoch, member_id = joined.member_epoch, member.member_id
    offsets = {(topic, 0): 1}
    outcomes = [(fields, producer.txn_offset_commit(group, offsets, **fields)[0][2])
                for fields in (dict(generation=epoch, member=member_id),
                               dict(generation=-1, member=""),
                               dict(generation=epoch, member=""),
                               dict(generation=-1, member=member_id),
                               dict(generation=epoch + 1, member=member_id),
                               dict(generation=epoch, member="nobody"))]
    assert outcomes == [
        (dict(generation=epoch, member=member_id), E.NONE),
        (dict(generation=-1, member=""), E.NONE),
        (dict(generation=epoch, member=""), E.UNKNOWN_MEMBER_ID),
        (dict(generation=-1, member=member_id), E.ILLEGAL_GENERATION),
        (dict(generation=epoch + 1, member=member_id), E.ILLEGAL_GENERATION),
        (dict(generation=epoch, member="nobody"), E.UNKNOWN_MEMBER_ID)]


# ---------------------------------------------------------------------------------------------
# DescribeTransactions, ListTransactions, DescribeProducers

def test_describe_transactions(target, client, topic):
    producer = Producer(client, JAVA, timeout_ms=45000)
    init = producer.init()
    missing = unique("unknown")
    empty, unknown, blank = describe(client, producer.transactional_id, missing, "")
    assert (empty.error_code, empty.transactional_id, empty.transaction_state,
            empty.transaction_timeout_ms, empty.transaction_start_time_ms, empty.producer_id,
            empty.producer_epoch, empty.topics) == (
        E.NONE, producer.transactional_id, "Empty", 45000, -1, init.producer_id, 0, [])
    # an error answer carries the schema's defaults, not -1
    for answer, key, error in [(unknown, missing, E.TRANSACTIONAL_ID_NOT_FOUND),
                               (blank, "", E.INVALID_REQUEST)]:
        assert (answer.error_code, answer.transactional_id, answer.transaction_state,
                answer.transaction_timeout_ms, answer.transaction_start_time_ms,
                answer.producer_id, answer.producer_epoch, answer.topics) == (
            error, key, "", 0, 0, 0, 0, [])

    before = int(time.time() * 1000)
    producer.produce(topic, 0, ["a"])
    producer.produce(topic, 2, ["a"])
    after = int(time.time() * 1000)
    [ongoing] = describe(client, producer.transactional_id)
    assert ongoing.transaction_state == "Ongoing"
    assert before - 5000 <= ongoing.transaction_start_time_ms <= after + 5000
    assert partitions_of(ongoing) == {(topic, 0), (topic, 2)}
    producer.end(True)
    done = wait_state(client, producer.transactional_id, "CompleteCommit")
    assert (done.producer_epoch, done.topics, done.transaction_start_time_ms) == (
        1, [], ongoing.transaction_start_time_ms)


def test_list_transactions(target, client, topic):
    ongoing = Producer(client, JAVA, transactional_id=unique("list-ongoing"))
    ongoing.init()
    ongoing.produce(topic, 0, ["a"])
    committed = Producer(client, JAVA, transactional_id=unique("list-committed"))
    committed.init()
    committed.produce(topic, 1, ["a"])
    committed.end(True)
    wait_state(client, committed.transactional_id, "CompleteCommit")
    empty = Producer(client, JAVA, transactional_id=unique("list-empty"))
    empty.init()
    mine = {p.transactional_id: p for p in (ongoing, committed, empty)}

    def listed(version=1, states=(), producer_ids=(), duration=-1, pattern=None):
        request = ListTransactionsRequest(state_filters=list(states),
                                          producer_id_filters=list(producer_ids))
        if version >= 1:
            request.duration_filter = duration
        if version >= 2:
            request.transactional_id_pattern = pattern
        response = client.call(request, version)
        return response.error_code, response.unknown_state_filters, sorted(
            (t.transactional_id, t.transaction_state) for t in response.transaction_states
            if t.transactional_id in mine
            and t.producer_id == mine[t.transactional_id].producer_id)

    everything = [(committed.transactional_id, "CompleteCommit"),
                  (empty.transactional_id, "Empty"), (ongoing.transactional_id, "Ongoing")]
    for version in (0, 1, 2):
        assert listed(version) == (E.NONE, [], everything)
    assert listed(states=["Ongoing"]) == (E.NONE, [], [(ongoing.transactional_id, "Ongoing")])
    assert listed(states=["CompleteCommit", "Empty"]) == (E.NONE, [], everything[:2])
    assert listed(states=["Bogus", "Ongoing"]) == (
        E.NONE, ["Bogus"], [(ongoing.transactional_id, "Ongoing")])
    assert listed(states=["ongoing"]) == (E.NONE, ["ongoing"], [])     # names are exact
    assert listed(producer_ids=[ongoing.producer_id]) == (
        E.NONE, [], [(ongoing.transactional_id, "Ongoing")])
    assert listed(states=["Empty"], producer_ids=[ongoing.producer_id]) == (E.NONE, [], [])
    # duration: running longer than the filter; an Empty transaction (start -1) always is
    assert listed(duration=10**9) == (E.NONE, [], [(empty.transactional_id, "Empty")])
    deadline = time.monotonic() + 10
    while listed(duration=200) != (E.NONE, [], everything):
        assert time.monotonic() < deadline, listed(duration=200)
        time.sleep(0.05)
    assert listed(2, pattern=ongoing.transactional_id[:-2] + ".*") == (
        E.NONE, [], [(ongoing.transactional_id, "Ongoing")])
    assert listed(2, pattern=ongoing.transactional_id[:-2]) == (E.NONE, [], [])  # full match
    assert listed(2, pattern="") == (E.NONE, [], everything)
    bad = client.call(ListTransactionsRequest(state_filters=[], producer_id_filters=[],
                                              duration_filter=-1, transactional_id_pattern="("), 2)
    assert (bad.error_code, bad.transaction_states) == (E.INVALID_REGULAR_EXPRESSION, [])


@pytest.mark.parametrize("flow", ["tv1", "tv2"])
def test_describe_producers_during_a_transaction(target, client, topic, flow):
    producer = Producer(client, TV1_CLIENTS["librdkafka"] if flow == "tv1" else JAVA)
    init = producer.init()
    pid, epoch = init.producer_id, init.producer_epoch
    if flow == "tv1":
        assert producer.add_partitions([(topic, 1)]) == [(topic, 1, E.NONE)]
    assert producer.produce(topic, 1, ["x"]).error_code == E.NONE      # the txn starts at 0
    assert producer.produce(topic, 1, ["a", "b", "c"]).error_code == E.NONE
    D = DescribeProducersRequest

    def states():
        response = client.call(D(topics=[D.TopicRequest(name=topic, partition_indexes=[1])]), 0)
        [answer] = response.topics[0].partitions
        assert (answer.error_code, answer.error_message) == (E.NONE, None)
        return [(s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
                 s.coordinator_epoch, s.current_txn_start_offset) for s in answer.active_producers]

    assert states() == [(pid, epoch, 3, producer.last_timestamp, -1, 0)]
    producer.end(True)
    wait_state(client, producer.transactional_id, "CompleteCommit")
    [(got_pid, got_epoch, last_sequence, last_timestamp, coordinator_epoch, start)] = states()
    marker = batches(fetch(client, topic, 1, 0, READ_UNCOMMITTED))[-1]
    assert (got_pid, start) == (pid, -1)
    assert coordinator_epoch == marker[6][1] and coordinator_epoch >= 0
    assert last_timestamp >= producer.last_timestamp - 1000     # the marker's own time
    if flow == "tv1":
        assert (got_epoch, last_sequence) == (epoch, 3)
    else:                                             # the marker's new epoch restarts sequences
        assert (got_epoch, last_sequence) == (epoch + 1, -1)


def write_markers(client: RawClient, producer_id: int, epoch: int, commit: bool,
                  coordinator_epoch: int, partitions, version: int = 1,
                  transaction_version: int = 0) -> list[tuple[str, int, int]]:
    """WriteTxnMarkers of one marker, as Admin.abortTransaction sends it -> [(topic, partition,
    error)]."""
    W = WriteTxnMarkersRequest
    by_topic: dict[str, list[int]] = {}
    for name, partition in partitions:
        by_topic.setdefault(name, []).append(partition)
    marker = W.WritableTxnMarker(producer_id=producer_id, producer_epoch=epoch,
                                 transaction_result=commit, coordinator_epoch=coordinator_epoch,
                                 topics=[W.WritableTxnMarkerTopic(name=n, partition_indexes=ps)
                                         for n, ps in by_topic.items()])
    if version >= 2:
        marker.transaction_version = transaction_version
    response = client.call(W(markers=[marker]), version)
    [result] = response.markers
    assert result.producer_id == producer_id
    return sorted((t.name, p.partition_index, p.error_code)
                  for t in result.topics for p in t.partitions)


@pytest.mark.parametrize("version", [1, 2])
def test_write_txn_markers_aborts_a_hanging_transaction(target, client, topic, version):
    """kafka-transactions.sh abort / Admin.abortTransaction: the producer and coordinator epochs
    from DescribeProducers, an ABORT marker written straight into the partition; the last
    stable offset moves past the hanging transaction and read_committed skips its records."""
    producer = Producer(client, TV1_CLIENTS["kafka-python"])
    assert producer.init().error_code == E.NONE
    assert producer.init().error_code == E.NONE          # epoch 1: an older one to refuse
    pid, epoch = producer.producer_id, producer.epoch
    assert producer.add_partitions([(topic, 0)]) == [(topic, 0, E.NONE)]
    assert producer.produce(topic, 0, ["a", "b"]).error_code == E.NONE
    assert list_offset(client, topic, 0, READ_COMMITTED) == (E.NONE, 0)
    D = DescribeProducersRequest
    [state] = client.call(D(topics=[D.TopicRequest(name=topic, partition_indexes=[0])]),
                          0).topics[0].partitions[0].active_producers
    assert (state.producer_id, state.producer_epoch, state.current_txn_start_offset) == (
        pid, epoch, 0)

    # refused: an older producer epoch, a partition that does not exist; nothing written
    assert write_markers(client, pid, epoch - 1, False, state.coordinator_epoch, [(topic, 0)],
                         version) == [(topic, 0, E.INVALID_PRODUCER_EPOCH)]
    assert write_markers(client, pid, -1, False, state.coordinator_epoch, [(topic, 0)],
                         version) == [(topic, 0, E.UNKNOWN_SERVER_ERROR)]
    assert write_markers(client, pid, epoch, False, state.coordinator_epoch,
                         [(topic, 7), ("no-such-topic", 0)], version) == [
        ("no-such-topic", 0, E.UNKNOWN_TOPIC_OR_PARTITION), (topic, 7, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert list_offset(client, topic, 0, READ_COMMITTED) == (E.NONE, 0)

    assert write_markers(client, pid, epoch, False, state.coordinator_epoch, [(topic, 0)],
                         version) == [(topic, 0, E.NONE)]
    assert list_offset(client, topic, 0, READ_COMMITTED) == (E.NONE, 3)
    answer = fetch(client, topic, 0, 0, READ_COMMITTED)
    assert aborted(answer) == [(pid, 0)]
    assert batches(answer)[-1][2:6] == (pid, epoch, True, True)
    assert batches(answer)[-1][6][0] == ABORT
    [after] = client.call(D(topics=[D.TopicRequest(name=topic, partition_indexes=[0])]),
                          0).topics[0].partitions[0].active_producers
    assert after.current_txn_start_offset == -1
    # the same marker again: the partition has no transaction of that producer open any more
    assert write_markers(client, pid, epoch, False, state.coordinator_epoch, [(topic, 0)],
                         version) == [(topic, 0, E.NONE)]
    assert list_offset(client, topic, 0, READ_COMMITTED) == (E.NONE, 4)


def test_write_txn_markers_into_consumer_offsets(target, client, topic):
    """A marker for a partition of __consumer_offsets goes to the group coordinator: an ABORT
    drops the transaction's pending offsets, a COMMIT of the next transaction makes them the
    group's committed offsets."""
    group = unique("txn-group")
    commit_offset(client, group, topic, 0, 5)
    producer = Producer(client, TV1_CLIENTS["kafka-python"])
    producer.init()
    pid, epoch = producer.producer_id, producer.epoch
    offsets_partition = ("__consumer_offsets", partition_for(group))
    assert producer.add_offsets(group) == E.NONE
    assert producer.txn_offset_commit(group, {(topic, 0): 7}) == [(topic, 0, E.NONE)]
    assert offset_fetch(client, group, topic, [0], True) == [
        (0, -1, "", E.UNSTABLE_OFFSET_COMMIT)]
    assert write_markers(client, pid, epoch, False, -1, [offsets_partition]) == [
        (*offsets_partition, E.NONE)]
    assert offset_fetch(client, group, topic, [0], True) == [(0, 5, "plain", E.NONE)]

    assert producer.txn_offset_commit(group, {(topic, 0): 9}) == [(topic, 0, E.NONE)]
    assert write_markers(client, pid, epoch, True, -1, [offsets_partition]) == [
        (*offsets_partition, E.NONE)]
    assert offset_fetch(client, group, topic, [0], True) == [(0, 9, "txn-9", E.NONE)]
