"""The data plane (Kafka's ReplicaManager and Partition): ``append.py`` a partition's records
checked and appended, ``read.py`` partitions read for a Fetch, ``fetch_purgatory.py`` long-poll
fetches, ``fetch_sessions.py`` fetch sessions (KIP-227), ``producer_state.py`` each partition's
producers (idempotence and open transactions), ``replicas.py`` where each partition lives and who
leads it. The Produce and Fetch handlers (broker/apis/) call in here; nothing here imports them.
"""
