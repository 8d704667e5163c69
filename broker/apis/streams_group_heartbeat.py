"""StreamsGroupHeartbeat: join, heartbeat and leave a streams group (KIP-1071,
broker/coordinator/group/streams). As Kafka's KafkaApis before its group coordinator: the group needs
READ; a topology naming Kafka's internal topics or invalid topic names is refused
(STREAMS_INVALID_TOPOLOGY), and every topic it names needs DESCRIBE. The internal topics the
coordinator finds missing (repartition and changelog topics, with the partition counts it
derived) are created here once the answer's records are stored, as Kafka asks its topic
creation manager, if the principal may CREATE them all (on the cluster, or each topic); else
the answer's MISSING_INTERNAL_TOPICS status says which it may not create."""
from __future__ import annotations

import structlog

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from ..topic_configs import TOPIC_CONFIGS, validate_topic_config
from ..topics import INTERNAL_TOPICS, validate_topic_name

NAME = "StreamsGroupHeartbeat"

log = structlog.get_logger("broker.apis")


def handle(broker, ctx, request, respond) -> None:
    Response = m.StreamsGroupHeartbeatResponse
    if "streams" not in broker.config["group.coordinator.rebalance.protocols"]:
        respond(Response(error_code=ErrorCode.UNSUPPORTED_VERSION))
        return
    auth = broker.authorizer
    if auth is not None and not auth.allowed(ctx, AclOperation.READ, ResourceType.GROUP,
                                             request.group_id):
        respond(Response(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
        return
    if request.topology is not None:
        required = topology_topics(request.topology)
        internal = [t for t in required if t in INTERNAL_TOPICS]
        if internal:
            respond(Response(error_code=ErrorCode.STREAMS_INVALID_TOPOLOGY, error_message=(
                f"Use of Kafka internal topics {','.join(internal)} in a Kafka Streams "
                "topology is prohibited.")))
            return
        invalid = [t for t in required if validate_topic_name(t) is not None]
        if invalid:
            respond(Response(error_code=ErrorCode.STREAMS_INVALID_TOPOLOGY, error_message=(
                f"Topic names {','.join(invalid)} are not valid topic names.")))
            return
        if auth is not None and required and len(auth.allowed_names(
                ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, required)) < len(required):
            respond(Response(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            return

    def answer(response, to_create) -> None:
        if to_create:
            refused = unauthorized_to_create(broker, ctx, to_create)
            if refused:
                _tell_unauthorized(response, refused)
            else:
                create_internal_topics(broker, ctx, to_create)
        respond(response)

    broker.coordinator.streams_group_heartbeat(request, ctx.api_version, ctx, answer)


def topology_topics(topology) -> list[str]:
    """Every topic a topology names, in Kafka's order, each once."""
    out: dict[str, None] = {}
    for s in topology.subtopologies or ():
        for name in list(s.source_topics or ()) + list(s.repartition_sink_topics or ()) + \
                [t.name for t in s.repartition_source_topics or ()] + \
                [t.name for t in s.state_changelog_topics or ()]:
            out[name] = None
    return list(out)


def unauthorized_to_create(broker, ctx, to_create: dict) -> list[str]:
    """The internal topics the principal may not CREATE (none if it may CREATE on the
    cluster)."""
    auth = broker.authorizer
    if auth is None or auth.allowed(ctx, AclOperation.CREATE, ResourceType.CLUSTER,
                                    CLUSTER_NAME):
        return []
    allowed = auth.allowed_names(ctx, AclOperation.CREATE, ResourceType.TOPIC, list(to_create))
    return [name for name in to_create if name not in allowed]


def _tell_unauthorized(response, refused: list[str]) -> None:
    detail = "Unauthorized to CREATE on topics " + ", ".join(refused) + "."
    Status = m.StreamsGroupHeartbeatResponse.Status
    if response.status is None:
        response.status = []
    for status in response.status:
        if status.status_code == 3:     # MISSING_INTERNAL_TOPICS
            status.status_detail += "; " + detail
            return
    response.status.append(Status(status_code=3, status_detail=detail))


def create_internal_topics(broker, ctx, to_create: dict) -> None:
    """Create the missing internal topics with the configs the application gave them (a
    changelog's cleanup.policy=compact) and the broker's default.replication.factor unless it
    gave one. One Kafka would refuse (a bad name, config or replication factor) is not created
    and stays missing."""
    from .create_topics import MAX_PARTITIONS_PER_REQUEST, MAX_RECORDS_PER_REQUEST
    wanted = {n: t for n, t in to_create.items() if n not in broker.topics.topics}
    partitions = sum(t.partitions for t in wanted.values())
    records = partitions + sum(1 + len(t.configs) for t in wanted.values())
    if partitions > MAX_PARTITIONS_PER_REQUEST or records > MAX_RECORDS_PER_REQUEST:
        # Kafka's controller refuses such a CreateTopics as a whole
        log.warning("streams internal topics not created: excessively large", topics=len(wanted),
                    partitions=partitions)
        return
    alive = len(broker.cluster.alive())
    for name, topic in wanted.items():
        if validate_topic_name(name) is not None:
            continue
        configs = dict(topic.configs)
        problem = next((f"{k}: unknown" if k not in TOPIC_CONFIGS else
                        validate_topic_config(k, v) for k, v in configs.items()
                        if k not in TOPIC_CONFIGS or validate_topic_config(k, v)), None)
        rf = topic.replication_factor or broker.config["default.replication.factor"]
        if problem is not None or not 0 < rf <= alive:
            log.warning("streams internal topic not created", topic=name,
                        problem=problem or f"replication factor {rf} of {alive} brokers")
            continue
        created = broker.topics.create(name, topic.partitions, configs, replication_factor=rf)
        broker.on_topic_created(created, reason="streams group internal topic")
        log.info("streams internal topic created", topic=name, partitions=topic.partitions)
