"""A streams group's topology against the shard's topics (Kafka's StreamsGroup
configuredTopology and its metadata hash): the partition counts topology.configure reads, the
hash of the topics the topology requires, and the ConfiguredTopology kept on the group until
its topology or the topics change. The heartbeat (manager.py), the delayed target assignment
and StreamsGroupDescribe read the topics through here."""
from __future__ import annotations

from functools import partial

from ..consumer.group import metadata_hash
from .group import StreamsGroup
from .topology import StreamsTopology, TopologyError, configure


def partition_count(topics, name: str) -> int | None:
    """The partitions of topic ``name``; None when it does not exist."""
    found = topics.get(name)
    return None if found is None else found[1]


def topology_metadata_hash(topics, topology: StreamsTopology) -> int:
    """The hash of the topics the topology needs that exist (Kafka's computeMetadataHash
    over requiredTopics)."""
    metadata = {}
    for name in topology.required_topics():
        found = topics.get(name)
        if found is not None:
            metadata[found[0]] = (name, found[1])
    return metadata_hash(metadata)


def configure_against(topics, topology: StreamsTopology, digest: int):
    """topology.configure with the partition counts of ``topics``."""
    return configure(topology, partial(partition_count, topics), digest)


def configured_topology(topics, group: StreamsGroup):
    """The group's topology configured against the topics as they are (derived state,
    kept until the topology or the topics change); None if it cannot be."""
    if group.topology is None:
        return None
    version = topics.version()
    if group.configured is None or group.metadata_version != version:
        try:
            group.configured = configure_against(topics, group.topology, group.metadata_hash)
        except TopologyError:
            return None
    return group.configured
