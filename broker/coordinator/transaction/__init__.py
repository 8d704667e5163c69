"""The transaction coordinator (KIP-98, with KIP-890's transaction version 2), sharded over the
partitions of ``__transaction_state`` on the runtime it shares with the group coordinator
(common/runtime.py). ``storage.py`` binds it to that topic; ``producer_ids.py`` hands out producer
ids."""
from .coordinator import TransactionCoordinator, TransactionConfig

__all__ = ["TransactionCoordinator", "TransactionConfig"]
