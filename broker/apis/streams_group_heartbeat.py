"""StreamsGroupHeartbeat: join, heartbeat and leave a streams group (KIP-1071,
broker/coordinator/streams). With an authorizer the group needs READ, as Kafka's KafkaApis
checks before its group coordinator. The internal topics the coordinator finds missing
(repartition and changelog topics, with the partition counts it derived) are created here once
the answer's records are stored, as Kafka's KafkaApis asks its topic creation manager; the
members see them configured at a following heartbeat."""
from __future__ import annotations

import structlog

from protocol import messages as m
from protocol.errors import ErrorCode

from ..security.authorizer import AclOperation, ResourceType
from ..topic_configs import TOPIC_CONFIGS, validate_topic_config
from ..topics import validate_topic_name

NAME = "StreamsGroupHeartbeat"

log = structlog.get_logger("broker.apis")


def handle(broker, ctx, request, respond) -> None:
    auth = broker.authorizer
    if auth is not None and not auth.allowed(ctx, AclOperation.READ, ResourceType.GROUP,
                                             request.group_id):
        respond(m.StreamsGroupHeartbeatResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
        return

    def answer(response, to_create) -> None:
        if to_create:
            create_internal_topics(broker, ctx, to_create)
        respond(response)

    broker.coordinator.streams_group_heartbeat(request, ctx.api_version, ctx, answer)


def create_internal_topics(broker, ctx, to_create: dict) -> None:
    """Create the missing internal topics (with an authorizer: those the principal may
    CREATE), with the configs the application gave them (a changelog's cleanup.policy=compact)
    and the broker's default.replication.factor unless it gave one. One Kafka would refuse (a
    bad name, config or replication factor) is not created and stays missing."""
    auth = broker.authorizer
    alive = len(broker.cluster.alive())
    for name, topic in to_create.items():
        if name in broker.topics.topics or validate_topic_name(name) is not None:
            continue
        if auth is not None and not auth.allowed(ctx, AclOperation.CREATE, ResourceType.TOPIC,
                                                 name):
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
