"""The group coordinator (classic protocol): 50 shards, each owning its groups and one partition
of ``__consumer_offsets``; delayed operations per member over an injected clock. Sans-I/O.

See coordinator.py for the contract with the broker (clock, timer, persist, loading).
"""
from .coordinator import CoordinatorConfig, GroupCoordinator
from .group import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from ..common.hashing import java_string_hashcode, partition_for
from .shard import GroupCoordinatorShard

__all__ = ["CoordinatorConfig", "GroupCoordinator", "GroupCoordinatorShard", "GroupMetadata",
           "GroupState", "MemberMetadata", "OffsetAndMetadata", "java_string_hashcode",
           "partition_for"]
