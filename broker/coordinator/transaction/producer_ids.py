"""Producer ids (Kafka's ProducerIdManager): handed out from blocks of 1000, and the end of the
last block handed out is stored in the data directory before any id of it is used, as Kafka's
controller stores a ProducerIdsRecord. A restart continues after that block, so an id is never
given twice, even once the log cleaner has removed every batch that carried it."""
from __future__ import annotations

import os

from ...log.files import atomic_write

BLOCK_SIZE = 1000
FIRST_PRODUCER_ID = 1000
FILE_NAME = "producer-ids"


class ProducerIdManager:
    def __init__(self, data_dir: str | None) -> None:
        self.path = os.path.join(data_dir, FILE_NAME) if data_dir else None
        self.next_id = FIRST_PRODUCER_ID
        self.block_end = FIRST_PRODUCER_ID   # ids below this are reserved (stored)
        if self.path is not None and os.path.exists(self.path):
            with open(self.path) as f:
                stored = int(f.read().strip() or FIRST_PRODUCER_ID)
            self.next_id = self.block_end = max(stored, FIRST_PRODUCER_ID)

    def at_least(self, producer_id: int) -> None:
        """Never hand out ``producer_id`` or anything below it (ids found in the logs)."""
        if producer_id > self.next_id:
            self.next_id = producer_id
            self.block_end = max(self.block_end, producer_id)

    def generate(self) -> int:
        if self.next_id >= self.block_end:
            self._reserve(self.next_id + BLOCK_SIZE)
        producer_id = self.next_id
        self.next_id += 1
        return producer_id

    def _reserve(self, block_end: int) -> None:
        if self.path is not None:
            atomic_write(self.path, f"{block_end}\n".encode(), durable=True)
        self.block_end = block_end
