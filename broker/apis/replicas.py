"""Where each partition lives and who leads it, as the APIs that report or change placement see
it (OffsetForLeaderEpoch, DescribeTopicPartitions, ElectLeaders, the reassignment APIs,
AlterReplicaLogDirs, DescribeQuorum, ListConfigResources).

One node holds everything today: it is the only registered broker, it leads every partition at
leader epoch 0 (the epoch Kafka gives a new partition's first leader, and what Metadata and
ListOffsets answer), alone in the replica set and the ISR, with nothing being reassigned, in the
broker's one log directory. The handlers ask these functions instead of assuming so, so that
several nodes need only new answers here."""
from __future__ import annotations

import os

from .describe_log_dirs import IN_MEMORY

from ..topics import LEADER_EPOCH  # noqa: F401 - the handlers ask this module


class Placement:
    """One partition's replicas as Kafka's controller records them (PartitionRegistration)."""

    __slots__ = ("leader", "leader_epoch", "replicas", "isr", "adding", "removing", "elr",
                 "last_known_elr", "offline")

    def __init__(self, leader: int, leader_epoch: int, replicas: list[int], isr: list[int],
                 adding: list[int] = (), removing: list[int] = (), elr: list[int] = (),
                 last_known_elr: list[int] = (), offline: list[int] = ()) -> None:
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.adding = list(adding)
        self.removing = list(removing)
        self.elr = list(elr)
        self.last_known_elr = list(last_known_elr)
        self.offline = list(offline)

    @property
    def preferred_leader(self) -> int:
        """The first replica: the leader a preferred election restores."""
        return self.replicas[0] if self.replicas else -1

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)


def placement(broker, partition) -> Placement:
    """Where a partition lives: its leader is the node ``broker.cluster`` gives it (this one
    while a process serves a single node), alone in its replica set and ISR."""
    node = broker.cluster.leader(partition.topic.name, partition.index)
    return Placement(leader=node, leader_epoch=LEADER_EPOCH, replicas=[node], isr=[node])


def led_elsewhere(broker, conn, topic: str, index: int) -> bool:
    """The request came (on ``conn``) to a node that does not lead the partition: Kafka
    answers NOT_LEADER_OR_FOLLOWER for it (never while one node leads everything)."""
    cluster = broker.cluster
    if cluster.single or conn.node_id is None:  # None: in-process (the console)
        return False
    return cluster.leader(topic, index) != conn.node_id


def nodes(broker, listener: str) -> list[tuple[int, str, int]]:
    """(node id, host, port) of every node as clients of ``listener`` reach it."""
    return [(node, *broker.advertised(listener, node)) for node in broker.cluster.node_ids]


def elect_leader(broker, partition, unclean: bool) -> bool:
    """Make the preferred replica (unclean: any live replica, in sync or not) the partition's
    leader at the next leader epoch; False when none may lead. Only asked when the partition
    lacks that leader, which never happens while one node leads everything."""
    return False


def reassign(broker, partition, target: list[int] | None) -> None:
    """Start moving the partition's replicas to ``target`` (None: revert the move under way).
    Only asked for a real move, which one node cannot have: its only valid target is the
    replica set it has."""
    raise NotImplementedError("replicas move between nodes only")


def broker_ids(broker) -> list[int]:
    """The registered brokers' node ids, in order."""
    return [broker.node_id]


def leader_epochs(broker, partition) -> list[tuple[int, int]]:
    """The partition's leader epoch cache: (epoch, start offset) in epoch order. One leader
    since the partition was created: its epoch starts at the log start offset (Kafka moves the
    first entry up with the log start, after DeleteRecords or retention)."""
    return [(placement(broker, partition).leader_epoch, partition.log.log_start_offset)]


def log_dirs(broker) -> list[str]:
    """The log directories of this node, as DescribeLogDirs names them."""
    data_dir = broker.topics.data_dir
    return [data_dir or IN_MEMORY]


def partition_log_dir(broker, partition) -> str:
    return log_dirs(broker)[0]


def named_log_dir(broker, path: str) -> str | None:
    """The log directory ``path`` names, or None: Kafka wants its absolute path, exactly
    (DescribeLogDirs's name is also taken, which in memory is the only one)."""
    for name in log_dirs(broker):
        if path == name or (name != IN_MEMORY and path == os.path.abspath(name)):
            return name
    return None
