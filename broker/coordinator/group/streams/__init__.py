"""Streams groups (KIP-1071): the fourth group type beside classic/, consumer/ and share/.

``topology.py`` the topology and its configuration against the topics (status codes, internal
topics and their partition counts), ``assignor.py`` the sticky task assignor, ``group.py`` the
group and its members (reconciled with consumer/reconciliation.py), ``records.py`` their
__consumer_offsets records, ``manager.py`` StreamsGroupHeartbeat and StreamsGroupDescribe on a
group shard.
"""
