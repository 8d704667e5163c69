"""Streams groups (KIP-1071): the fourth group type beside classic/, consumer/ and share/.

``topology.py`` the topology and its configuration against the topics (status codes, internal
topics and their partition counts), ``configured_topology.py`` that configuration for a group
against the shard's topics, ``assignor.py`` the sticky task assignor, ``group.py`` the group and
its members (reconciled with consumer/reconciliation.py), ``records.py`` their __consumer_offsets
records. On a group shard, as in consumer/: ``manager.py`` the StreamsGroupHeartbeat steps,
``heartbeat.py`` its checks and answers, ``target_assignment.py``, ``timeouts.py``,
``replay.py`` and ``describe.py`` (StreamsGroupDescribe), with ``settings.py`` a group's own
streams.* configs.
"""
