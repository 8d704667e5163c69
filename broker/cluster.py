"""The nodes one process serves (``nodes``, ``kbroker --nodes N``) and where each partition
lives on them.

Node ids run from ``node.id`` up, each with its own listeners (``Server.start``). A partition's
replicas are ``replication.factor`` consecutive nodes from a start that depends on the topic
(Java's String.hashCode, so a topic keeps its place across restarts) and the partition index, so
leaders spread over the nodes as Kafka's replica assignment spreads them; the first replica
leads. One node: it is every partition's only replica, as before.
"""
from __future__ import annotations

from .coordinator.hashing import java_abs, java_string_hashcode


class Cluster:
    __slots__ = ("node_ids", "single")

    def __init__(self, first_node_id: int, count: int) -> None:
        self.node_ids = list(range(first_node_id, first_node_id + count))
        #: one node leads everything: no request can reach the wrong node
        self.single = count == 1

    def replicas(self, topic: str, partition: int, replication_factor: int = 1) -> list[int]:
        nodes = self.node_ids
        if self.single:
            return nodes[:]
        start = (java_abs(java_string_hashcode(topic)) + partition) % len(nodes)
        return [nodes[(start + i) % len(nodes)] for i in range(min(replication_factor,
                                                                    len(nodes)))]

    def leaders(self, topic: str, count: int) -> list[int]:
        """The leaders of partitions 0..count-1 of ``topic`` (the topic hashed once)."""
        nodes = self.node_ids
        if self.single:
            return [nodes[0]] * count
        start = java_abs(java_string_hashcode(topic))
        return [nodes[(start + p) % len(nodes)] for p in range(count)]

    def leader(self, topic: str, partition: int) -> int:
        nodes = self.node_ids
        if self.single:
            return nodes[0]
        return nodes[(java_abs(java_string_hashcode(topic)) + partition) % len(nodes)]
