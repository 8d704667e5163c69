"""One handler module per Kafka API: decode -> call a component -> encode.

Each module defines ``NAME`` (Kafka's API name), ``VERSIONS`` (the range we serve and advertise)
and ``handle(broker, ctx, request, respond)``; a module may also define ``ADVERTISED_VERSIONS``
when ApiVersions lists more than is served (Produce from v0, as Kafka 4 lists it: KAFKA-18659; a
request outside the served range closes the connection, as on Kafka). This registry is the one
coherent set of versions that ApiVersions advertises: kafka-python infers the broker's version
from these maxima.
"""
from __future__ import annotations

import importlib

from protocol.messages import API_BY_NAME, ApiVersionsResponse

API_VERSIONS_KEY = 18

_MODULES = [
    "produce", "fetch", "list_offsets", "metadata", "find_coordinator", "api_versions",
    "create_topics", "delete_topics", "init_producer_id", "describe_configs",
    "create_partitions", "describe_cluster", "delete_records", "alter_configs",
    "incremental_alter_configs", "describe_log_dirs", "describe_acls", "create_acls",
    "delete_acls", "describe_producers", "add_partitions_to_txn", "add_offsets_to_txn",
    "end_txn", "txn_offset_commit", "describe_transactions", "list_transactions",
    "offset_for_leader_epoch", "describe_topic_partitions", "elect_leaders",
    "alter_partition_reassignments", "list_partition_reassignments", "alter_replica_log_dirs",
    "describe_quorum", "list_config_resources", "sasl_handshake", "sasl_authenticate",
    "alter_user_scram_credentials", "describe_user_scram_credentials", "write_txn_markers",
    "create_delegation_token", "renew_delegation_token", "expire_delegation_token",
    "describe_delegation_token", "offset_commit", "offset_fetch", "join_group", "heartbeat",
    "leave_group", "sync_group", "describe_groups", "list_groups", "delete_groups",
    "offset_delete", "consumer_group_heartbeat", "consumer_group_describe",
    "describe_client_quotas", "alter_client_quotas", "update_features", "unregister_broker",
    "add_raft_voter", "remove_raft_voter",
]

#: the APIs of the consumer protocol (KIP-848), advertised when group.coordinator.rebalance.protocols
#: names "consumer"
CONSUMER_PROTOCOL_APIS = ("ConsumerGroupHeartbeat", "ConsumerGroupDescribe")


class ApiHandler:
    __slots__ = ("name", "key", "min_version", "max_version", "advertised_min", "handle",
                 "request", "response", "api", "codecs")

    def __init__(self, name: str, versions: tuple[int, int], handle,
                 advertised: tuple[int, int] | None = None) -> None:
        self.api = API_BY_NAME[name]
        self.name = name
        self.key = self.api.key
        self.min_version, self.max_version = versions  # what is served
        self.advertised_min = (advertised or versions)[0]  # what ApiVersions lists
        self.handle = handle
        self.request = self.api.request
        self.response = self.api.response
        self.codecs: dict[int, tuple] = {}  # version -> codec(version)

    def response_header_version(self, version: int) -> int:
        return self.api.response_header_version(version)

    def codec(self, version: int) -> tuple:
        """(decode(frame, offset) -> (request, end), encode(response, write), response header
        version) for an advertised version, compiled on first use and then one dict lookup."""
        codec = self.codecs.get(version)
        if codec is None:
            codec = self.codecs[version] = (
                self.request.decoder(version), self.response.encoder(version),
                self.response_header_version(version))
        return codec


def _register(handler: ApiHandler) -> None:
    HANDLERS[handler.key] = handler


HANDLERS: dict[int, ApiHandler] = {}


def api_version_entries(config=None) -> list:
    """The advertised ranges; without the consumer protocol's APIs when the broker's
    ``group.coordinator.rebalance.protocols`` leaves it out, as Kafka does."""
    Entry = ApiVersionsResponse.ApiVersion
    hidden = ()
    if config is not None and "consumer" not in config["group.coordinator.rebalance.protocols"]:
        hidden = CONSUMER_PROTOCOL_APIS
    return [Entry(api_key=h.key, min_version=h.advertised_min, max_version=h.max_version)
            for h in sorted(HANDLERS.values(), key=lambda h: h.key) if h.name not in hidden]


for _name in _MODULES:
    _module = importlib.import_module(f"{__name__}.{_name}")
    _register(ApiHandler(_module.NAME, _module.VERSIONS, _module.handle,
                         getattr(_module, "ADVERTISED_VERSIONS", None)))

