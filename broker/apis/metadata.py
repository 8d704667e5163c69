"""Metadata: brokers, controller, topics and partitions; auto-creates topics when allowed."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import MetadataResponse
from protocol.schema import ZERO_UUID

from ..topics import validate_topic_name

NAME = "Metadata"
VERSIONS = (0, 13)

Broker_ = MetadataResponse.MetadataResponseBroker
Topic_ = MetadataResponse.MetadataResponseTopic
Partition_ = MetadataResponse.MetadataResponsePartition
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


def topic_entry(broker, topic) -> Topic_:
    node = broker.node_id
    return Topic_(
        error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id,
        is_internal=topic.internal, topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        partitions=[Partition_(error_code=ErrorCode.NONE, partition_index=p.index,
                               leader_id=node, leader_epoch=0, replica_nodes=[node],
                               isr_nodes=[node], offline_replicas=[])
                    for p in topic.partitions])


def refused(request, error: int) -> MetadataResponse:
    """Kafka's answer to a request it refuses as a whole: each requested topic with the error
    and no partitions (a null name as ""), no brokers, no cluster id."""
    return MetadataResponse(error_code=error, topics=[
        Topic_(error_code=error, name=t.name if t.name is not None else "", topic_id=t.topic_id,
               is_internal=False, partitions=[]) for t in request.topics or ()])


def handle(broker, ctx, request, respond) -> None:
    version = ctx.api_version
    topics = broker.topics
    entries = []
    # v0: an empty list means all topics; v1+: null means all topics
    all_topics = request.topics is None or (version == 0 and not request.topics)
    if not all_topics and version < 12 and any(
            t.name is None or t.topic_id != ZERO_UUID for t in request.topics):
        # v10 and v11 carry topic ids and nullable names, but only v12 serves them; the answer
        # cannot carry a null name before v12 either
        respond(refused(request, ErrorCode.INVALID_REQUEST))
        return
    if all_topics:
        entries = [topic_entry(broker, t) for t in topics.topics.values()]
    else:
        auto_create = broker.config["auto.create.topics.enable"] and (
            version < 4 or request.allow_auto_topic_creation)
        for requested in request.topics:
            name = requested.name
            topic = topics.get(name) if name is not None else topics.by_id.get(requested.topic_id)
            if topic is None and name is not None and auto_create and \
                    validate_topic_name(name) is None:
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
    host, port = broker.advertised(ctx.listener)
    respond(MetadataResponse(
        brokers=[Broker_(node_id=broker.node_id, host=host, port=port, rack=None)],
        cluster_id=broker.cluster_id, controller_id=broker.node_id, topics=entries,
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED))
