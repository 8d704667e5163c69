"""Produce: validate each partition's record batch, check producer state, append (the append
itself is the data plane's: broker/partitions/append.py).

acks 1 and -1 are the same on a single replica; acks 0 sends no response at all.

Transactional records need the request's transactional id (else the whole request fails with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and come from one producer (else every partition gets
INVALID_PRODUCER_ID_MAPPING). A partition where the producer's transaction is not open yet is
verified with the transaction coordinator first (``broker.transactions.verify_produce``; from v12
that adds the partition to the transaction), and the request is answered once every partition is
settled. Until then, later Produce requests on the same connection wait their turn, as on Kafka,
which reads one request per connection at a time. A request without a transactional id takes
the same path as before transactions: no verification, no waiting.

From v13 a topic goes by its id (KIP-516): an id this broker does not know (never created, or a
topic since deleted, even if re-created under the same name with a new id) is UNKNOWN_TOPIC_ID
for each of its partitions, decided before authorization as Kafka does. v0-2 are advertised, as
Kafka 4 advertises them (KAFKA-18659: older librdkafka refuses to compress otherwise), but not
served: Kafka 4 closes the connection on such a request, whatever it holds, and so does this
broker (broker/network/connection.py closes on any version outside those served: SERVED in
broker/apis/__init__.py).
"""
from __future__ import annotations

from collections import deque

from protocol.errors import ErrorCode
from protocol.messages import ProduceResponse
from protocol.records import TRANSACTIONAL_FLAG

from ..partitions.append import (PartitionResponse, append_checked, append_partition,
                                 check_partition, partition_error)
from ..security.authorizer import AclOperation, ResourceType

NAME = "Produce"
#: from this version topics go by id
FIRST_TOPIC_ID_VERSION = 13

TopicResponse = ProduceResponse.TopicProduceResponse

#: from this version the coordinator adds a produced partition to the transaction itself
#: (transaction version 2, with epoch bumps)
FIRST_ADD_PARTITION_VERSION = 12
#: Kafka's add.partitions.to.txn.retry.backoff.ms and .max.ms: with transaction version 2 a
#: CONCURRENT_TRANSACTIONS answer (the previous transaction is still being committed) is retried
#: here for a while instead of sending the producer back
RETRY_BACKOFF_MS = 20
RETRY_BACKOFF_MAX_MS = 100
_VERIFY_RETRIABLE = (ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                     ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR)
_MAGIC_AT, _ATTRIBUTES_LOW_AT = 16, 22  # a v2 batch's magic byte; its attributes' low byte

#: connections whose earlier Produce waits for the transaction coordinator -> the Produce
#: requests that came after it on that connection
_WAITING: dict[object, deque] = {}


def _has_transactional_records(request) -> bool:
    """Does any partition's (first) batch have the transactional flag? Read from the raw
    header bytes, so a request without a transactional id pays almost nothing for the check."""
    for td in request.topic_data:
        for pd in td.partition_data:
            records = pd.records
            if (records is not None and len(records) > _ATTRIBUTES_LOW_AT
                    and records[_MAGIC_AT] == 2
                    and records[_ATTRIBUTES_LOW_AT] & TRANSACTIONAL_FLAG):
                return True
    return False


def _answer_all(request, respond, code: int, message: str | None) -> None:
    """Fail the whole request: every partition gets the same error."""
    respond(ProduceResponse(responses=[
        TopicResponse(name=td.name, topic_id=td.topic_id, partition_responses=[
            partition_error(pd.index, code, message) for pd in td.partition_data])
        for td in request.topic_data]))


def _without_answer(ctx, request, respond):
    """acks=0: no answer at all; but when a partition failed, the connection is closed (after
    the answers before it), as Kafka closes it, so that the producer notices and refreshes
    its metadata instead of sending into the void."""
    def answered(response: ProduceResponse) -> None:
        failed = [(td.name, p.index, p.error_code) for td in response.responses
                  for p in td.partition_responses if p.error_code]
        if failed:
            ctx.conn.close_after_answers(
                f"Closing connection due to error during produce request with correlation id "
                f"{ctx.header.correlation_id} from client id {ctx.client_id} with ack=0: "
                + ", ".join(f"{t}-{i}: {ErrorCode(c).name}" for t, i, c in failed))
        respond(None)
    return answered


def handle(broker, ctx, request, respond) -> None:
    quotas = broker.client_quotas
    if quotas.produce.enabled:
        respond = _counting_bytes(quotas, ctx, respond)
    if _WAITING:
        queue = _WAITING.get(ctx.conn)
        if queue is not None:
            queue.append((broker, ctx, request, respond))
            return
    _handle(broker, ctx, request, respond)


def _handle(broker, ctx, request, respond) -> None:
    if request.acks == 0:
        respond = _without_answer(ctx, request, respond)
    auth = broker.authorizer
    # transactional records need a transactional id the principal may WRITE, else the whole
    # request fails (Kafka checks this first, even before topic ids)
    if (request.transactional_id is None or auth is not None) \
            and _has_transactional_records(request) and (
            request.transactional_id is None or not auth.allowed(
                ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                request.transactional_id)):
        _answer_all(request, respond, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None)
        return
    if ctx.api_version >= FIRST_TOPIC_ID_VERSION:
        respond = _resolve_topic_ids(broker, request, respond)
    if auth is not None:
        respond = _authorize_topics(auth, ctx, request, respond)
    if request.transactional_id is not None:
        TransactionalProduce(broker, ctx, request, respond).start()
        return
    acks = request.acks
    now = broker.clock()
    responses = []
    for td in request.topic_data:
        topic = broker.topics.get(td.name)
        parts = []
        for pd in td.partition_data:
            if acks not in (0, 1, -1):
                parts.append(partition_error(pd.index, ErrorCode.INVALID_REQUIRED_ACKS))
            else:
                parts.append(append_partition(broker, topic, pd.index, pd.records, now,
                                              ctx.conn, acks))
        responses.append(TopicResponse(name=td.name, topic_id=td.topic_id,
                                       partition_responses=parts))
    respond(ProduceResponse(responses=responses))


def _counting_bytes(quotas, ctx, respond):
    """Under a producer_byte_rate quota the request's size counts toward the client's rate when
    it is answered, and the answer carries the throttle the client owes, as Kafka's
    handleProduceRequest does (acks=0 too: the connection is muted all the same)."""
    def answer(response) -> None:
        quotas.record_bytes(quotas.produce, ctx, ctx.size)
        respond(response)
    return answer


def _resolve_topic_ids(broker, request, respond):
    """Name each topic of a v13+ request from its id; the ids this broker does not know are
    taken out and answered UNKNOWN_TOPIC_ID. Returns the ``respond`` to go on with."""
    by_id = broker.topics.by_id
    known, unknown = [], []
    for td in request.topic_data:
        topic = by_id.get(td.topic_id)
        if topic is None:
            unknown.append(td)
        else:
            td.name = topic.name
            known.append(td)
    if not unknown:
        return respond
    request.topic_data = known

    def respond_with_unknown(response) -> None:
        if response is not None:
            response.responses.extend(TopicResponse(
                name="", topic_id=td.topic_id, partition_responses=[
                    partition_error(pd.index, ErrorCode.UNKNOWN_TOPIC_ID)
                    for pd in td.partition_data])
                for td in unknown)
        respond(response)
    return respond_with_unknown


def _authorize_topics(auth, ctx, request, respond):
    """Each topic needs WRITE, else its partitions get TOPIC_AUTHORIZATION_FAILED and the others
    go on. Returns the ``respond`` to go on with."""
    may_write = auth.predicate(ctx, AclOperation.WRITE, ResourceType.TOPIC)
    denied = [td for td in request.topic_data if not may_write(td.name)]
    if not denied:
        return respond
    request.topic_data = [td for td in request.topic_data if may_write(td.name)]

    def respond_with_denied(response) -> None:
        if response is not None:
            response.responses.extend(TopicResponse(
                name=td.name, topic_id=td.topic_id, partition_responses=[
                    partition_error(pd.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    for pd in td.partition_data]) for td in denied)
        respond(response)
    return respond_with_denied


def _resume(conn) -> None:
    """Run the Produce requests that waited behind a finished one on ``conn``, in order, until
    one of them waits for the coordinator in turn."""
    queue = _WAITING.pop(conn, None)
    if getattr(conn, "closed", False):
        return  # nobody reads the answers; the client sends again on a new connection
    while queue:
        broker, ctx, request, respond = queue.popleft()
        _handle(broker, ctx, request, respond)
        if conn in _WAITING:
            _WAITING[conn].extend(queue)
            return


def _verification_error(code: int, version: int) -> tuple[int, str | None]:
    """The error a Produce answers for a failed verification (Kafka translates the
    coordinator's retriable errors into one that older clients retry without a metadata
    refresh)."""
    if code == ErrorCode.INVALID_TXN_STATE:
        return code, "Partition was not added to the transaction"
    if code in _VERIFY_RETRIABLE or (code == ErrorCode.CONCURRENT_TRANSACTIONS
                                     and version < FIRST_ADD_PARTITION_VERSION):
        return (ErrorCode.NOT_ENOUGH_REPLICAS,
                "Unable to verify the partition has been added to the transaction. "
                f"Underlying error: {ErrorCode(code).name}")
    return code, None


class TransactionalProduce:
    """One Produce with a transactional id, from its checks to its answer (Kafka's
    handleProduceAppend): check every partition, verify the transactional ones whose
    transaction is not open here yet, then append what passed."""

    __slots__ = ("broker", "conn", "request", "respond", "version", "slots", "answers",
                 "checked", "transactional", "producer", "guards", "started", "calls",
                 "pending", "queued", "finished")

    def __init__(self, broker, ctx, request, respond) -> None:
        self.broker = broker
        self.conn = ctx.conn
        self.request = request
        self.respond = respond
        self.version = ctx.api_version
        self.slots: list = []  # per partition in request order: (topic, pd)
        self.answers: dict[int, PartitionResponse] = {}  # slot -> settled answer
        self.checked: dict[int, tuple] = {}  # slot -> (partition, batch) to append
        self.transactional: list[int] = []  # slots with transactional batches
        self.producer: tuple[int, int] | None = None  # (producer id, epoch)
        self.guards: dict[int, object] = {}  # slot -> verification guard
        self.started = broker.clock()
        self.calls = 0
        self.pending = False  # waiting for the coordinator (or for a retry)
        self.queued = False  # later requests on the connection wait for this one
        self.finished = False

    def start(self) -> None:
        broker = self.broker
        request = self.request
        acks = request.acks
        producers = set()
        for td in request.topic_data:
            topic = broker.topics.get(td.name)
            for pd in td.partition_data:
                slot = len(self.slots)
                self.slots.append((topic, pd))
                if acks not in (0, 1, -1):
                    self.answers[slot] = partition_error(pd.index, ErrorCode.INVALID_REQUIRED_ACKS)
                    continue
                result = check_partition(broker, topic, pd.index, pd.records, self.conn, acks)
                if type(result) is PartitionResponse:
                    self.answers[slot] = result
                    continue
                self.checked[slot] = result
                batch = result[1]
                if batch.is_transactional and batch.producer_id >= 0:
                    producers.add((batch.producer_id, batch.producer_epoch))
                    self.transactional.append(slot)
        if len(producers) > 1:
            _answer_all(request, self.respond, ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                        "Transactional records contained more than one producer ID")
            return
        if not producers:
            self.finish({})
            return
        self.producer = producers.pop()
        self.verify()

    def verify(self) -> None:
        """Ask the coordinator about the partitions where the producer's transaction is not
        open yet (the others need nothing)."""
        producer_id, epoch = self.producer
        supports_epoch_bump = self.version >= FIRST_ADD_PARTITION_VERSION
        self.guards = {}
        keys = []
        for slot in self.transactional:
            self.answers.pop(slot, None)  # a retry decides afresh
            partition, batch = self.checked[slot]
            code, guard = partition.producers.start_verification(
                producer_id, batch.base_sequence, epoch, supports_epoch_bump)
            if code:
                self.answers[slot] = partition_error(partition.index, code)
            elif guard is not None:
                self.guards[slot] = guard
                keys.append((partition.topic.name, partition.index))
        if not keys:
            self.finish({})
            return
        self.calls += 1
        call = self.calls
        self.pending = True
        coordinator = getattr(self.broker, "transactions", None)
        if coordinator is None:  # no transaction coordinator in this broker
            self.verified(call, {key: ErrorCode.COORDINATOR_NOT_AVAILABLE for key in keys})
        else:
            coordinator.verify_produce(
                self.request.transactional_id, producer_id, epoch, keys, self.version,
                lambda results: self.verified(call, results))
        if self.pending and not self.queued:
            self.queued = True
            _WAITING.setdefault(self.conn, deque())

    def verified(self, call: int, results: dict) -> None:
        if call != self.calls or self.finished or not self.pending:
            return  # a late or repeated answer
        if (self.version >= FIRST_ADD_PARTITION_VERSION
                and ErrorCode.CONCURRENT_TRANSACTIONS in results.values()
                and self.broker.clock() - self.started < RETRY_BACKOFF_MAX_MS):
            self.broker.timer.call_later(RETRY_BACKOFF_MS, self.verify)
            return
        self.pending = False
        self.finish(results)

    def finish(self, results: dict) -> None:
        """Settle the verified partitions, append every partition that passed, answer."""
        self.finished = True
        broker = self.broker
        answers = self.answers
        for slot, guard in self.guards.items():
            partition = self.checked[slot][0]
            code = results.get((partition.topic.name, partition.index), ErrorCode.NONE)
            if code:
                code, message = _verification_error(code, self.version)
                answers[slot] = partition_error(partition.index, code, message)
        now = broker.clock()
        guards = self.guards
        slots = self.slots
        for slot, (partition, batch) in self.checked.items():
            if slot not in answers:
                topic, pd = slots[slot]
                answers[slot] = append_checked(broker, topic, partition, pd.records, batch, now,
                                               guards.get(slot))
        request = self.request
        responses = []
        slot = 0
        for td in request.topic_data:
            parts = []
            for _pd in td.partition_data:
                parts.append(answers[slot])
                slot += 1
            responses.append(TopicResponse(name=td.name, topic_id=td.topic_id,
                                           partition_responses=parts))
        self.respond(ProduceResponse(responses=responses))
        if self.queued:
            _resume(self.conn)
