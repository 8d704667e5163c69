"""DescribeConfigs: topic configs (explicit and defaults) and this broker's settings."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import DescribeConfigsResponse

from ..security.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from ..topic_configs import DYNAMIC_TOPIC_CONFIG, TOPIC_CONFIGS

NAME = "DescribeConfigs"

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


def _topic_entries(broker, topic, keys, synonyms: bool):
    out = []
    defaults = broker.topics.broker_defaults
    for name, spec in sorted(TOPIC_CONFIGS.items()):
        if keys is not None and name not in keys:
            continue
        explicit = topic.configs.get(name)
        syn = []
        if synonyms:
            if explicit is not None:
                syn.append(Synonym(name=name, value=explicit, source=DYNAMIC_TOPIC_CONFIG))
            syn += [Synonym(name=n, value=v, source=src) for n, v, src in defaults.synonyms[name]]
        out.append(Entry(name=name, value=explicit if explicit is not None else defaults.value(name),
                         read_only=False,
                         config_source=DYNAMIC_TOPIC_CONFIG if explicit is not None
                         else defaults.sources[name],
                         is_sensitive=False, synonyms=syn, config_type=spec.type,
                         documentation=None))
    return out


def _broker_entries(broker, name: str, keys, synonyms: bool):
    """Kafka's broker configs (broker/broker_configs.py): every one for this broker's id, the
    cluster-wide dynamic ones for the default entity ""."""
    return [Entry(name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                  is_sensitive=e.sensitive, config_type=e.type, documentation=None,
                  synonyms=[Synonym(name=n, value=v, source=src) for n, v, src in e.synonyms]
                  if synonyms else [])
            for e in broker.topics.broker_configs.describe(name, keys)]


#: ConfigEntry types of DescribeConfigs (Kafka's ConfigType ids)
_GROUP_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3}


def _group_entries(broker, group_id: str, keys, synonyms: bool):
    """A group's configs (broker/coordinator/group/group_configs.py), for any group id, as Kafka."""
    return [Entry(name=name, value=value, read_only=False, config_source=source,
                  is_sensitive=False, config_type=_GROUP_TYPES[ctype], documentation=None,
                  synonyms=[Synonym(name=n, value=v, source=src) for n, v, src in syns]
                  if synonyms else [])
            for name, value, source, ctype, syns in broker.group_configs.describe(group_id, keys)]


#: config resource type -> (the ACL resource whose configs it is, the error when denied)
_ACL_RESOURCES = {
    TOPIC: (ResourceType.TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "Topic authorization failed."),
    BROKER: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
             "Cluster authorization failed."),
    BROKER_LOGGER: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    "Cluster authorization failed."),
    CLIENT_METRICS: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                     "Cluster authorization failed."),
    GROUP: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED,
            "Group authorization failed."),
}


def config_resource_denied(broker, ctx, op: AclOperation, resource_type: int,
                           name: str) -> tuple[int, str] | None:
    """(error, message) when the authorizer refuses ``op`` (DESCRIBE_CONFIGS or ALTER_CONFIGS)
    on a config resource: a topic's or group's own ACLs, the cluster's for broker configs."""
    auth = broker.authorizer
    acl = _ACL_RESOURCES.get(resource_type)
    if auth is None or acl is None:
        return None
    rtype, error, message = acl
    if auth.allowed(ctx, op, rtype, CLUSTER_NAME if rtype == ResourceType.CLUSTER else name):
        return None
    return error, message


def handle(broker, ctx, request, respond) -> None:
    results = []
    denied = []   # Kafka lists the refused resources after the others
    for res in request.resources:
        keys = set(res.configuration_keys) if res.configuration_keys is not None else None
        refused = config_resource_denied(broker, ctx, AclOperation.DESCRIBE_CONFIGS,
                                         res.resource_type, res.resource_name)
        if refused is not None:
            denied.append(Result(error_code=refused[0], error_message=refused[1],
                                 resource_type=res.resource_type,
                                 resource_name=res.resource_name, configs=[]))
            continue
        if res.resource_type == TOPIC:
            topic = broker.topics.get(res.resource_name)
            if topic is None:
                results.append(Result(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      error_message=f"Topic {res.resource_name} does not exist",
                                      resource_type=TOPIC, resource_name=res.resource_name,
                                      configs=[]))
                continue
            configs = _topic_entries(broker, topic, keys, request.include_synonyms)
        elif res.resource_type == BROKER:
            if res.resource_name not in ("", str(broker.node_id)):
                results.append(Result(error_code=ErrorCode.INVALID_REQUEST,
                                      error_message=f"Unexpected broker id {res.resource_name}",
                                      resource_type=BROKER, resource_name=res.resource_name,
                                      configs=[]))
                continue
            configs = _broker_entries(broker, res.resource_name, keys, request.include_synonyms)
        elif res.resource_type == GROUP:
            configs = _group_entries(broker, res.resource_name, keys, request.include_synonyms)
        else:
            results.append(Result(error_code=ErrorCode.INVALID_REQUEST,
                                  error_message=f"Unsupported resource type {res.resource_type}",
                                  resource_type=res.resource_type,
                                  resource_name=res.resource_name, configs=[]))
            continue
        # Kafka's success carries an empty message, not none
        results.append(Result(error_code=ErrorCode.NONE, error_message="",
                              resource_type=res.resource_type, resource_name=res.resource_name,
                              configs=configs))
    respond(DescribeConfigsResponse(results=results + denied))
