"""The data plane (Kafka's ReplicaManager and Partition): ``replicas.py`` where each partition
lives and who leads it, as the APIs that report or change placement see it."""
