"""The share coordinator (Kafka's share-coordinator module): the durable state of every share
partition in ``__share_group_state``, served to share-partition leaders by
InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and
ReadShareGroupStateSummary (broker/apis/*_share_group_state*.py).

``store.py`` is the state machine (Kafka's ShareCoordinatorShard), ``batches.py`` how state
batches combine (Kafka's PersisterStateBatchCombiner), ``persister.py`` the leader side (Kafka's
DefaultStatePersister): broker/coordinator/share/leader.py stores and reads its share partitions
through the same store these APIs serve.
"""
