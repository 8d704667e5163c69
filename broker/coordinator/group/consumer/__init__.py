"""KIP-848 consumer groups: the ConsumerGroupHeartbeat protocol, target assignment,
reconciliation, and the online migration from classic groups."""
