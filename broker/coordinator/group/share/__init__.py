"""Share groups (KIP-932): the third group type beside classic/ and consumer/.

``group.py`` the group and its members, ``records.py`` their __consumer_offsets records,
``assignor.py`` the simple assignor, ``manager.py`` ShareGroupHeartbeat and ShareGroupDescribe
on a group shard; ``partition.py`` a share partition's record states at the leader,
``sessions.py`` the share session cache, ``fetcher.py`` ShareFetch and ShareAcknowledge over
both.
"""
