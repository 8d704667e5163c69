"""broker/cluster.py as a plain object: replica placement, and what a node going down and up does
to leaders, ISRs, leader epochs and the leader epoch cache."""
from __future__ import annotations

from types import SimpleNamespace

from broker.cluster import Cluster
from broker.topics import Partition


def partition(cluster: Cluster, replicas: list[int], end: int = 0) -> Partition:
    log = SimpleNamespace(log_end_offset=end, producers=None, log_start_offset=0)
    p = Partition(None, 0, log, cluster.replicas("t", 0, len(replicas), replicas))
    cluster.place(p)
    return p


def test_replicas_are_consecutive_nodes_from_the_topics_hash_and_spread_leaders():
    cluster = Cluster(1, 3)
    placed = [cluster.replicas("orders", i, 2) for i in range(6)]
    assert all(len(r) == 2 and len(set(r)) == 2 for r in placed)
    assert {r[0] for r in placed} == {1, 2, 3}
    assert cluster.replicas("orders", 0, 5) == cluster.replicas("orders", 0, 3)  # at most N
    assert Cluster(1, 1).replicas("orders", 4, 3) == [1]


def test_down_moves_leadership_to_the_next_in_sync_replica_at_the_next_epoch():
    cluster = Cluster(1, 3)
    p = partition(cluster, [2, 3, 1], end=10)
    assert (p.leader, p.leader_epoch, p.isr) == (2, 0, [2, 3, 1])
    assert cluster.node_down(2, [p]) == 1
    assert (p.leader, p.leader_epoch, p.isr) == (3, 1, [3, 1])
    assert p.epochs == ((0, 0), (1, 10))
    p.log.log_end_offset = 15
    assert cluster.node_down(3, [p]) == 1
    assert (p.leader, p.leader_epoch, p.isr) == (1, 2, [1])
    assert p.epochs == ((0, 0), (1, 10), (2, 15))
    # back up: in sync again, leadership stays until a preferred election
    assert cluster.node_up(2, [p]) == 0
    assert cluster.node_up(3, [p]) == 0
    assert (p.leader, p.isr) == (1, [2, 3, 1])
    assert cluster.elect_preferred(p) and (p.leader, p.leader_epoch) == (2, 3)
    assert not cluster.elect_preferred(p)


def test_the_last_replica_going_down_leaves_no_leader_until_it_returns():
    cluster = Cluster(1, 3)
    p = partition(cluster, [2], end=4)
    assert cluster.node_down(2, [p]) == 1
    assert (p.leader, p.leader_epoch, p.isr) == (-1, 1, [])
    assert p.epochs == ((0, 0),)  # no leader, no epoch start recorded
    assert cluster.node_up(2, [p]) == 1
    assert (p.leader, p.leader_epoch) == (2, 2)
    # epoch 0 ended where epoch 2 began; nothing was appended in epoch 1
    assert p.epochs == ((0, 0), (2, 4))


def test_an_epoch_without_appends_is_replaced_in_the_cache():
    cluster = Cluster(1, 3)
    p = partition(cluster, [1, 2, 3], end=0)
    cluster.node_down(1, [p])
    cluster.node_down(2, [p])
    assert p.epochs == ((2, 0),)


def test_a_partition_made_while_a_node_is_down_avoids_it():
    cluster = Cluster(1, 3)
    cluster.down.add(2)
    for i in range(6):
        assert 2 not in cluster.replicas("t", i, 2)
    p = partition(cluster, [2, 3])  # an explicit assignment naming the down node
    assert (p.leader, p.isr) == (3, [3])
    q = partition(cluster, [2])
    assert (q.leader, q.isr) == (-1, [])
