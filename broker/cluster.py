"""The nodes one process serves (``nodes``, ``kbroker --nodes N``), which of them are up, and
where each partition lives on them: what Kafka's controller decides and records.

Node ids run from ``node.id`` up, each with its own listeners (``Server.start``). A partition's
replicas are ``replication factor`` consecutive nodes from a start that depends on the topic
(Java's String.hashCode, so a topic keeps its place across restarts) and the partition index, so
leaders spread over the nodes as Kafka's replica assignment spreads them; the first replica
leads. One node: it is every partition's only replica, as before.

Every node serves the same logs in this process, so a replica is always caught up: the in-sync
replicas are the replicas that are up. When a node goes down, each partition it led moves to
the next in-sync replica at the next leader epoch (none left: no leader and an empty ISR, as
Kafka 4.3's controller leaves a partition whose last in-sync replica stopped), and it leaves
every ISR, so an ISR never names a node that is down. When it comes back it rejoins the ISRs and
leads again the partitions left without a leader; the others keep their leader until a preferred
election (ElectLeaders), as Kafka keeps them until its leader rebalance.
"""
from __future__ import annotations

from .coordinator.common.hashing import java_abs, java_string_hashcode


class Cluster:
    __slots__ = ("node_ids", "single", "down", "_one")

    def __init__(self, first_node_id: int, count: int) -> None:
        self.node_ids = list(range(first_node_id, first_node_id + count))
        #: one node leads everything: no request can reach the wrong node
        self.single = count == 1
        #: nodes taken down (``node_down``); their listeners are closed
        self.down: set[int] = set()
        self._one = [first_node_id]  # the replica list every partition of one node shares

    def alive(self) -> list[int]:
        return [n for n in self.node_ids if n not in self.down]

    def replicas(self, topic: str, partition: int, replication_factor: int = 1,
                 given: list[int] | None = None) -> list[int]:
        """A new partition's replicas: ``given`` (an explicit assignment) when it names only
        this cluster's nodes, else ``replication_factor`` nodes placed by the topic's hash."""
        if given and all(n in self.node_ids for n in given):
            return list(given)
        if self.single:
            return self._one
        # as Kafka's controller, only on the nodes that are up (recorded in topics.json)
        nodes = self.alive() if self.down else self.node_ids
        start = (java_abs(java_string_hashcode(topic)) + partition) % len(nodes)
        return [nodes[(start + i) % len(nodes)] for i in range(min(max(replication_factor, 1),
                                                                    len(nodes)))]

    def place(self, partition) -> None:
        """A new partition's leader and ISR given the nodes that are down now."""
        if not self.down:
            return
        isr = [n for n in partition.replicas if n not in self.down]
        partition.isr = isr
        partition.leader = isr[0] if isr else -1

    def node_down(self, node: int, partitions) -> int:
        """Take ``node`` down: it leaves every ISR and its partitions get new leaders. Returns
        how many partitions changed leader."""
        self.down.add(node)
        moved = 0
        for p in partitions:
            if node not in p.isr:
                continue
            isr = [n for n in p.isr if n != node]
            if p.leader == node:
                _elect(p, isr[0] if isr else -1)
                moved += 1
            # with no replica left the ISR is empty (Kafka 4.3's eligible leader replicas)
            p.isr = isr
        return moved

    def node_up(self, node: int, partitions) -> int:
        """Bring ``node`` back: it rejoins the ISR of its partitions and leads those that had
        no leader. Returns how many partitions changed leader."""
        self.down.discard(node)
        moved = 0
        for p in partitions:
            if node not in p.replicas:
                continue
            if p.leader == -1:
                p.isr = [n for n in p.replicas if n not in self.down]
                _elect(p, node if node in p.isr else p.isr[0])
                moved += 1
            elif node not in p.isr:
                p.isr = [n for n in p.replicas if n in p.isr or n == node]
        return moved

    def reassign(self, p, target: list[int]) -> None:
        """A completed reassignment to ``target``: its live nodes in sync at once; the leader
        stays if it is kept, else the first live target replica leads at the next epoch."""
        p.replicas = list(target)
        isr = [n for n in target if n not in self.down]
        p.isr = isr
        if p.leader not in isr:
            _elect(p, isr[0] if isr else -1)

    def move_leader(self, p) -> bool:
        """Give the partition's leadership to the next in-sync replica after its leader (a
        controlled move); False when no other replica is in sync."""
        others = [n for n in p.isr if n != p.leader]
        if not others:
            return False
        after = p.replicas.index(p.leader) if p.leader in p.replicas else -1
        ordered = p.replicas[after + 1:] + p.replicas[:after + 1]
        _elect(p, next(n for n in ordered if n in others))
        return True

    def elect_preferred(self, p) -> bool:
        """Make the first replica the leader again if it is in sync: ElectLeaders PREFERRED."""
        preferred = p.replicas[0]
        if p.leader == preferred or preferred not in p.isr:
            return False
        _elect(p, preferred)
        return True

    def elect_unclean(self, p) -> bool:
        """Give a partition without a leader any live replica: ElectLeaders UNCLEAN."""
        live = [n for n in p.replicas if n not in self.down]
        if p.leader != -1 or not live:
            return False
        p.isr = [live[0]]
        _elect(p, live[0])
        return True


def _elect(p, leader: int) -> None:
    """A new leader at the next leader epoch; a node that becomes leader starts the epoch at
    its log end offset (Kafka's makeLeader), which the leader epoch cache records, replacing
    the entries that start there too (epochs in which nothing was appended), as
    LeaderEpochFileCache.assign does."""
    p.leader = leader
    p.leader_epoch += 1
    if leader != -1:
        start = p.log.log_end_offset
        kept = tuple(e for e in p.epochs if e[1] < start)
        p.epochs = kept + ((p.leader_epoch, start),)
