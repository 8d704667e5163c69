"""The coordinators, arranged as Kafka 4 arranges its own: ``common/`` is what they share (the
runtime of shards over an internal topic's partitions, the write path, loading, the keyed timer,
hashing, the internal topic as storage); ``group/`` is the group coordinator over
``__consumer_offsets`` with one package per group type (classic/, consumer/, share/,
streams/); ``share_state/`` is the share coordinator over ``__share_group_state`` (the share
partitions' state and its APIs); ``transaction/`` is the transaction coordinator over
``__transaction_state``."""
