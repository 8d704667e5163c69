"""The data plane (Kafka's ReplicaManager and Partition): ``replicas.py`` where each partition
lives and who leads it, as the APIs that report or change placement see it;
``fetch_purgatory.py`` long-poll fetches; ``fetch_sessions.py`` fetch sessions (KIP-227);
``producer_state.py`` each partition's producers (idempotence and open transactions)."""
