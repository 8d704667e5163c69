"""DescribeConfigs: topic configs (explicit and defaults) and this broker's settings."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import DescribeConfigsResponse

from ..config import SETTINGS
from ..security.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from ..topics import INT_TOPIC_CONFIGS

NAME = "DescribeConfigs"
VERSIONS = (1, 4)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SOURCE_DYNAMIC_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 4, 5
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_LIST = 1, 2, 3, 5, 7

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


def _topic_entries(broker, topic, keys, synonyms: bool):
    out = []
    for name, (default, broker_name) in sorted(broker.topics.defaults.items()):
        if keys is not None and name not in keys:
            continue
        explicit = topic.configs.get(name)
        source = SOURCE_DYNAMIC_TOPIC if explicit is not None else SOURCE_DEFAULT
        syn = []
        if synonyms:
            if explicit is not None:
                syn.append(Synonym(name=name, value=explicit, source=SOURCE_DYNAMIC_TOPIC))
            syn.append(Synonym(name=broker_name, value=default, source=SOURCE_DEFAULT))
        out.append(Entry(name=name, value=explicit if explicit is not None else default,
                         read_only=False, config_source=source, is_sensitive=False,
                         synonyms=syn,
                         config_type=TYPE_LONG if name in INT_TOPIC_CONFIGS else TYPE_STRING,
                         documentation=None))
    return out


def _broker_entries(broker, keys):
    out = []
    for name, setting in sorted(SETTINGS.items()):
        if keys is not None and name not in keys:
            continue
        value = broker.config[name]
        text = None if value is None else (str(value).lower() if isinstance(value, bool)
                                           else str(value))
        ctype = TYPE_BOOLEAN if setting.parse.__name__ == "_bool" else \
            TYPE_INT if setting.parse is int else TYPE_STRING
        source = SOURCE_DEFAULT if value == setting.default else SOURCE_STATIC_BROKER
        out.append(Entry(name=name, value=text, read_only=True, config_source=source,
                         is_sensitive=False, synonyms=[], config_type=ctype,
                         documentation=setting.doc))
    return out


_GROUP_TYPES = {"INT": TYPE_INT, "STRING": TYPE_STRING, "BOOLEAN": TYPE_BOOLEAN}


def _group_entries(broker, group_id: str, keys, synonyms: bool):
    """A group's configs (broker/coordinator/group_configs.py), for any group id, as Kafka."""
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
            configs = _broker_entries(broker, keys)
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
