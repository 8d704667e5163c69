"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and its delayed
operations."""
