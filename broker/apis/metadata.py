"""Metadata: brokers, controller, topics and partitions; auto-creates topics when allowed."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import MetadataResponse
from protocol.schema import ZERO_UUID

from ..security.authorization import authorized_operations, cluster_authorized_operations
from ..security.authorizer import AclOperation, ResourceType
from ..topics import validate_topic_name
from ..partitions.replicas import controller_id, nodes

NAME = "Metadata"

Broker_ = MetadataResponse.MetadataResponseBroker
Topic_ = MetadataResponse.MetadataResponseTopic
Partition_ = MetadataResponse.MetadataResponsePartition
AUTHORIZED_OPERATIONS_OMITTED = -2147483648
DESCRIBE, CREATE, TOPIC = AclOperation.DESCRIBE, AclOperation.CREATE, ResourceType.TOPIC


def topic_entry(broker, topic) -> Topic_:
    name = topic.name
    down = broker.cluster.down
    partitions = []
    for p in topic.partitions:
        offline = [n for n in p.replicas if n in down] if down else []
        partitions.append(Partition_(
            error_code=ErrorCode.NONE if p.leader != -1 else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=p.index, leader_id=p.leader, leader_epoch=p.leader_epoch,
            replica_nodes=p.replicas, isr_nodes=p.isr, offline_replicas=offline))
    return Topic_(
        error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id,
        is_internal=topic.internal, topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        partitions=partitions)


def refused(request, error: int) -> MetadataResponse:
    """Kafka's answer to a request it refuses as a whole: each requested topic with the error
    and no partitions (a null name as ""), no brokers, no cluster id."""
    return MetadataResponse(error_code=error, topics=[
        Topic_(error_code=error, name=t.name if t.name is not None else "", topic_id=t.topic_id,
               is_internal=False, partitions=[]) for t in request.topics or ()])


def handle(broker, ctx, request, respond) -> None:
    version = ctx.api_version
    topics = broker.topics
    auth = broker.authorizer
    entries = []
    denied = []   # Kafka lists the topics it refuses after the others
    # v0: an empty list means all topics; v1+: null means all topics
    all_topics = request.topics is None or (version == 0 and not request.topics)
    if not all_topics and version < 12 and any(
            t.name is None or t.topic_id != ZERO_UUID for t in request.topics):
        # v10 and v11 carry topic ids and nullable names, but only v12 serves them; the answer
        # cannot carry a null name before v12 either
        respond(refused(request, ErrorCode.INVALID_REQUEST))
        return
    may_describe = auth.predicate(ctx, DESCRIBE, TOPIC) if auth is not None else None
    if all_topics:
        # topics the principal may not describe are left out without a word
        entries = [topic_entry(broker, t) for t in topics.topics.values()
                   if may_describe is None or may_describe(t.name)]
    else:
        auto_create = broker.config["auto.create.topics.enable"] and (
            version < 4 or request.allow_auto_topic_creation)
        may_create = None
        for requested in request.topics:
            name = requested.name
            topic = topics.get(name) if name is not None else topics.by_id.get(requested.topic_id)
            if may_describe is not None:
                shown = name if name is not None else (topic.name if topic is not None else None)
                if shown is not None and not may_describe(shown):
                    # neither the topic's existence nor its id is disclosed
                    denied.append(Topic_(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                         name=name, topic_id=requested.topic_id,
                                         is_internal=False, partitions=[]))
                    continue
            if topic is None and name is not None and auto_create and \
                    validate_topic_name(name) is None:
                if auth is not None:
                    if may_create is None:
                        may_create = _may_create(auth, ctx)
                    if not may_create(name):
                        denied.append(Topic_(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                             name=name, topic_id=ZERO_UUID, is_internal=False,
                                             partitions=[]))
                        continue
                topic = topics.create(name, broker.config["num.partitions"])
                broker.on_topic_created(topic, reason="auto-created by Metadata")
            if topic is not None:
                entries.append(topic_entry(broker, topic))
                continue
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if name is not None and validate_topic_name(name) is not None:
                error = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif name is None:
                error = ErrorCode.UNKNOWN_TOPIC_ID
            entries.append(Topic_(error_code=error, name=name, topic_id=requested.topic_id,
                                  partitions=[],
                                  topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
    cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
    if version >= 8:
        if request.include_topic_authorized_operations:
            for entry in entries:
                if entry.name is not None:
                    entry.topic_authorized_operations = authorized_operations(
                        auth, ctx, TOPIC, entry.name)
        if version <= 10 and request.include_cluster_authorized_operations:
            cluster_operations = cluster_authorized_operations(auth, ctx)
    brokers = [Broker_(node_id=node, host=host, port=port, rack=None)
               for node, host, port in nodes(broker, ctx.listener)]
    respond(MetadataResponse(
        brokers=brokers,
        cluster_id=broker.cluster_id, controller_id=controller_id(broker), topics=entries + denied,
        cluster_authorized_operations=cluster_operations))


def _may_create(auth, ctx):
    """Auto-creation needs CREATE on the cluster or on the topic."""
    if auth.cluster(ctx, CREATE):
        return lambda name: True
    return auth.predicate(ctx, CREATE, TOPIC)
