"""One handler module per Kafka API: decode -> call a component -> encode.

``SERVED`` below is the one coherent set of versions that ApiVersions advertises (kafka-python
infers the broker's version from these maxima): Kafka's API name and the versions served. The
API's module, its name in snake_case (``OffsetForLeaderEpoch``: ``offset_for_leader_epoch.py``),
defines ``NAME`` and ``handle(broker, ctx, request, respond)`` and is imported when the broker
first receives that API, so a start loads none of the handlers (nor the message classes they
use) before a client asks.
"""
from __future__ import annotations

import importlib

from protocol.messages import API_BY_NAME, ApiVersionsResponse
from protocol.schema import snake_case

API_VERSIONS_KEY = 18

#: Kafka's API name -> (lowest, highest) version served and advertised
SERVED = {
    "Produce": (3, 13),  # Kafka 4 removed v0-2 (magic 0/1 message sets)
    "Fetch": (4, 18),
    "ListOffsets": (1, 11),
    "Metadata": (0, 13),
    "OffsetCommit": (2, 10),
    "OffsetFetch": (1, 10),
    "FindCoordinator": (0, 6),
    "JoinGroup": (0, 9),
    "Heartbeat": (0, 4),
    "LeaveGroup": (0, 5),
    "SyncGroup": (0, 5),
    "DescribeGroups": (0, 6),
    "ListGroups": (0, 5),
    "SaslHandshake": (0, 1),
    "ApiVersions": (0, 4),
    "CreateTopics": (2, 7),
    "DeleteTopics": (1, 6),
    "DeleteRecords": (0, 2),
    "InitProducerId": (0, 5),
    "OffsetForLeaderEpoch": (2, 4),
    "AddPartitionsToTxn": (0, 5),
    "AddOffsetsToTxn": (0, 4),
    "EndTxn": (0, 5),
    "WriteTxnMarkers": (1, 2),
    "TxnOffsetCommit": (0, 5),
    "DescribeAcls": (1, 3),
    "CreateAcls": (1, 3),
    "DeleteAcls": (1, 3),
    "DescribeConfigs": (1, 4),
    "AlterConfigs": (0, 2),
    "AlterReplicaLogDirs": (1, 2),
    "DescribeLogDirs": (1, 5),
    "SaslAuthenticate": (0, 2),
    "CreatePartitions": (0, 3),
    "CreateDelegationToken": (1, 3),
    "RenewDelegationToken": (1, 2),
    "ExpireDelegationToken": (1, 2),
    "DescribeDelegationToken": (1, 3),
    "DeleteGroups": (0, 2),
    "ElectLeaders": (0, 2),
    "IncrementalAlterConfigs": (0, 1),
    "AlterPartitionReassignments": (0, 1),
    "ListPartitionReassignments": (0, 0),
    "OffsetDelete": (0, 0),
    "DescribeClientQuotas": (0, 1),
    "AlterClientQuotas": (0, 1),
    "DescribeUserScramCredentials": (0, 0),
    "AlterUserScramCredentials": (0, 0),
    "DescribeQuorum": (0, 2),
    "UpdateFeatures": (0, 2),
    "DescribeCluster": (0, 2),
    "DescribeProducers": (0, 0),
    "UnregisterBroker": (0, 0),
    "DescribeTransactions": (0, 0),
    "ListTransactions": (0, 2),
    "ConsumerGroupHeartbeat": (0, 1),
    "ConsumerGroupDescribe": (0, 1),
    "ListConfigResources": (0, 1),
    "DescribeTopicPartitions": (0, 0),
    "ShareGroupHeartbeat": (1, 1),
    "ShareGroupDescribe": (1, 1),
    "ShareFetch": (1, 2),
    "ShareAcknowledge": (1, 2),
    "AddRaftVoter": (0, 1),
    "RemoveRaftVoter": (0, 0),
    "InitializeShareGroupState": (0, 0),
    "ReadShareGroupState": (0, 0),
    "WriteShareGroupState": (0, 1),
    "DeleteShareGroupState": (0, 0),
    "ReadShareGroupStateSummary": (0, 1),
    "DescribeShareGroupOffsets": (0, 1),
    "AlterShareGroupOffsets": (0, 0),
    "DeleteShareGroupOffsets": (0, 0),
    "StreamsGroupHeartbeat": (0, 0),
    "StreamsGroupDescribe": (0, 0),
}

#: where ApiVersions lists more than is served: Produce from v0, as Kafka 4 lists it
#: (KAFKA-18659); a request below the served range closes the connection, as on Kafka
ADVERTISED_MIN = {"Produce": 0}

#: the APIs of the consumer protocol (KIP-848), advertised when group.coordinator.rebalance.protocols
#: names "consumer"
CONSUMER_PROTOCOL_APIS = ("ConsumerGroupHeartbeat", "ConsumerGroupDescribe")
#: the APIs of the streams protocol (KIP-1071), advertised when it names "streams"
STREAMS_PROTOCOL_APIS = ("StreamsGroupHeartbeat", "StreamsGroupDescribe")


class ApiHandler:
    __slots__ = ("name", "key", "min_version", "max_version", "advertised_min", "handle",
                 "api", "codecs", "module", "_request", "_response")

    def __init__(self, name: str, versions: tuple[int, int], advertised_min: int | None = None,
                 handle=None) -> None:
        self.api = API_BY_NAME[name]
        self.name = name
        self.key = self.api.key
        self.min_version, self.max_version = versions  # what is served
        self.advertised_min = versions[0] if advertised_min is None else advertised_min
        self.module = f"{__name__}.{snake_case(name)}"
        self.handle = handle or self._first_request
        self.codecs: dict[int, tuple] = {}  # version -> codec(version)
        self._request = self._response = None

    def _first_request(self, *args):
        """Import the API's module, then hand this request and every later one to it."""
        handle = self.handle = importlib.import_module(self.module).handle
        return handle(*args)

    @property
    def request(self) -> type:
        cls = self._request
        if cls is None:
            cls = self._request = self.api.request
        return cls

    @property
    def response(self) -> type:
        cls = self._response
        if cls is None:
            cls = self._response = self.api.response
        return cls

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


HANDLERS: dict[int, ApiHandler] = {}
for _name, _versions in SERVED.items():
    _handler = ApiHandler(_name, _versions, ADVERTISED_MIN.get(_name))
    HANDLERS[_handler.key] = _handler


def api_version_entries(config=None) -> list:
    """The advertised ranges; without the consumer protocol's APIs when the broker's
    ``group.coordinator.rebalance.protocols`` leaves it out, as Kafka does."""
    Entry = ApiVersionsResponse.ApiVersion
    hidden = ()
    if config is not None and "consumer" not in config["group.coordinator.rebalance.protocols"]:
        hidden = CONSUMER_PROTOCOL_APIS
    if config is not None and "streams" not in config["group.coordinator.rebalance.protocols"]:
        hidden += STREAMS_PROTOCOL_APIS
    return [Entry(api_key=h.key, min_version=h.advertised_min, max_version=h.max_version)
            for h in sorted(HANDLERS.values(), key=lambda h: h.key) if h.name not in hidden]
