"""The classic consumer-group APIs: each is answered by the group coordinator (broker/coordinator),
which takes the decoded request, the version and the context, and calls ``respond`` exactly once,
at once or later (delayed operations). This module only routes."""
from __future__ import annotations

# (Kafka API name, versions we advertise, GroupCoordinator method)
ENTRIES = [
    ("OffsetCommit", (2, 9), "offset_commit"),
    ("OffsetFetch", (1, 9), "offset_fetch"),
    ("JoinGroup", (0, 9), "join_group"),
    ("Heartbeat", (0, 4), "heartbeat"),
    ("LeaveGroup", (0, 5), "leave_group"),
    ("SyncGroup", (0, 5), "sync_group"),
    ("DescribeGroups", (0, 6), "describe_groups"),
    ("ListGroups", (0, 5), "list_groups"),
    ("DeleteGroups", (0, 2), "delete_groups"),
    ("OffsetDelete", (0, 0), "offset_delete"),
    ("ConsumerGroupHeartbeat", (0, 1), "consumer_group_heartbeat"),
    ("ConsumerGroupDescribe", (0, 1), "consumer_group_describe"),
]

#: the APIs of the consumer protocol (KIP-848), served when group.coordinator.rebalance.protocols
#: names "consumer"
CONSUMER_PROTOCOL_APIS = ("ConsumerGroupHeartbeat", "ConsumerGroupDescribe")


def route(method: str):
    def handle(broker, ctx, request, respond) -> None:
        getattr(broker.coordinator, method)(request, ctx.api_version, ctx, respond)
    handle.__name__ = method
    return handle
