"""Where each partition lives and who leads it, as the APIs that report or change placement see
it (OffsetForLeaderEpoch, DescribeTopicPartitions, ElectLeaders, the reassignment APIs,
AlterReplicaLogDirs, DescribeQuorum, ListConfigResources), read from each partition's placement
(broker/topics.py Partition) that broker/cluster.py keeps as nodes go down and up. Nothing is
ever being reassigned, and each node has one log directory."""
from __future__ import annotations

import os

from protocol.errors import ErrorCode

#: the log directory DescribeLogDirs names for a broker without --data-dir
IN_MEMORY = "in-memory"


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
    """Where a partition lives: its replicas, ISR, leader and leader epoch; the replicas on
    nodes that are down are offline."""
    down = broker.cluster.down
    return Placement(leader=partition.leader, leader_epoch=partition.leader_epoch,
                     replicas=partition.replicas, isr=partition.isr,
                     offline=[n for n in partition.replicas if n in down] if down else ())


def led_elsewhere(broker, conn, partition) -> bool:
    """The request came (on ``conn``) to a node that does not lead the partition: Kafka
    answers NOT_LEADER_OR_FOLLOWER for it (never while one node leads everything)."""
    if broker.cluster.single or conn.node_id is None:  # None: in-process (the console)
        return False
    return partition.leader != conn.node_id


def leader_error(broker, conn, partition, current_leader_epoch: int = -1) -> int:
    """Kafka's check of a request for a partition's leader that names the leader epoch it
    expects (Fetch, ListOffsets, OffsetForLeaderEpoch): a node that holds no replica answers
    NOT_LEADER_OR_FOLLOWER; one that does checks the epoch first (older: FENCED_LEADER_EPOCH,
    newer: UNKNOWN_LEADER_EPOCH, -1: not checked), then that it leads."""
    if current_leader_epoch != -1 and current_leader_epoch != partition.leader_epoch and (
            conn is None or conn.node_id is None or conn.node_id in partition.replicas):
        return (ErrorCode.FENCED_LEADER_EPOCH if current_leader_epoch < partition.leader_epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH)
    if conn is not None and led_elsewhere(broker, conn, partition):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.NONE


def nodes(broker, listener: str) -> list[tuple[int, str, int]]:
    """(node id, host, port) of every node that is up, as clients of ``listener`` reach it."""
    return [(node, *broker.advertised(listener, node)) for node in broker.cluster.alive()]


def controller_id(broker) -> int:
    """The node Metadata and DescribeCluster name as controller: this process's first node
    while it is up, else the first node that is."""
    alive = broker.cluster.alive()
    return alive[0] if alive else -1


def elect_leader(broker, partition, unclean: bool) -> bool:
    """Make the preferred replica (unclean: any live replica, in sync or not) the partition's
    leader at the next leader epoch; False when none may lead."""
    cluster = broker.cluster
    return cluster.elect_unclean(partition) if unclean else cluster.elect_preferred(partition)


def reassign(broker, partition, target: list[int] | None) -> None:
    """Move the partition's replicas to ``target``. The nodes share the partition's log, so a
    new replica has nothing to copy and the move completes at once (nothing is ever listed as
    reassigning, and a cancel finds nothing to revert)."""
    if target is None:
        return
    broker.cluster.reassign(partition, target)
    broker.topics.save()


def broker_ids(broker) -> list[int]:
    """The registered brokers' node ids, in order (a node that is down stays registered)."""
    return list(broker.cluster.node_ids)


def leader_epochs(broker, partition) -> list[tuple[int, int]]:
    """The partition's leader epoch cache: (epoch, start offset) in epoch order, the entries
    wholly below the log start offset dropped and the first moved up to it, as Kafka moves it
    after DeleteRecords or retention."""
    start = partition.log.log_start_offset
    epochs = list(partition.epochs)
    while len(epochs) > 1 and epochs[1][1] <= start:
        epochs.pop(0)
    return [(epochs[0][0], max(epochs[0][1], start))] + epochs[1:]


def epoch_at(partition, offset: int) -> int:
    """The leader epoch in which ``offset`` was (or will next be) appended: ListOffsets
    answers it with the offset it found."""
    epoch = partition.epochs[0][0]
    for e, start in partition.epochs:
        if start > offset:
            break
        epoch = e
    return epoch


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
