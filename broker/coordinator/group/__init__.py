"""The group coordinator: 50 shards, each owning its groups and one partition of
``__consumer_offsets``, on the runtime of common/runtime.py. Sans-I/O but for storage.py.

``coordinator.py`` the service and its contract with the broker (clock, timer, persist,
loading); ``shard.py`` a shard's group table and record switch; ``context.py`` what the managers
see of their shard; ``offsets.py`` committed offsets for every group type; ``records.py`` the
records of ``__consumer_offsets``; one package per group type: ``classic/``, ``consumer/``,
``share/``, ``streams/``.
"""
from ..common.hashing import java_string_hashcode, partition_for
from .coordinator import CoordinatorConfig, GroupCoordinator
from .group import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from .shard import GroupCoordinatorShard

__all__ = ["CoordinatorConfig", "GroupCoordinator", "GroupCoordinatorShard", "GroupMetadata",
           "GroupState", "MemberMetadata", "OffsetAndMetadata", "java_string_hashcode",
           "partition_for"]
