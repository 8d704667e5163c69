"""KIP-848 consumer groups: the ConsumerGroupHeartbeat protocol, target assignment and reconciliation."""
