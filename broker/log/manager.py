"""LogManager: the broker's partition logs, by (topic, partition).

With ``data_dir=None`` every partition gets a MemoryLog (the default: nothing on disk). With a
data directory each partition is a SegmentLog in ``<data_dir>/<topic>-<partition>/``, and
``start()`` reopens (and recovers) every partition directory found there. Topic names may contain
'-', so a directory name is split on its last '-'.

What is NOT here: topic metadata (topic ids, partition counts, topic configs) is owned by the
topic metadata store. It tells the manager which config a partition uses through the
``config_for(topic, partition)`` hook at start, the ``config`` argument of ``get_or_create`` and
``set_config``; this module only maps (topic, partition) to a PartitionLog and stores no metadata
of its own. Nothing here deletes a discovered directory because metadata lacks its topic: that
decision belongs to the metadata store, which calls ``delete_partition``.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from typing import Callable, Iterator, Mapping

from .base import LogConfig, PartitionLog, wall_clock_ms
from .cleaner import LogCleaner
from .memory import MemoryBudget, MemoryLog

__all__ = ["LogManager", "partition_dir_name", "parse_partition_dir_name", "validate_topic_name"]

logger = logging.getLogger("broker.log")

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249
_DELETED_DIR = re.compile(r"^.+-\d+\.[0-9a-f]{32}-delete$")


def validate_topic_name(topic: str) -> None:
    """Kafka's rule for topic names (they become directory names): raises ValueError."""
    if not topic or topic in (".", ".."):
        raise ValueError(f"illegal topic name {topic!r}")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise ValueError(f"topic name longer than {MAX_TOPIC_NAME_LENGTH} characters")
    if not _LEGAL_TOPIC.match(topic):
        raise ValueError(f"topic name {topic!r} has characters other than ASCII alphanumerics, "
                         "'.', '_' and '-'")


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """'my-topic-3' -> ('my-topic', 3); None for anything that is not a partition directory."""
    topic, sep, number = name.rpartition("-")
    if not sep or not number.isdigit() or not number.isascii():
        return None
    try:
        validate_topic_name(topic)
    except ValueError:
        return None
    return topic, int(number)


class LogManager:
    def __init__(self, data_dir: str | os.PathLike | None,
                 default_config: LogConfig | Mapping[str, object] | None = None, *,
                 clock: Callable[[], int] | None = None,
                 config_for: Callable[[str, int], LogConfig | None] | None = None):
        self.data_dir = None if data_dir is None else os.fspath(data_dir)
        if default_config is None or isinstance(default_config, LogConfig):
            self.default_config = default_config or LogConfig()
        else:
            self.default_config = LogConfig.from_topic_config(default_config)
        self._clock = clock or wall_clock_ms
        self._config_for = config_for
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self.cleaner: LogCleaner | None = None
        #: in memory: what all partitions may hold together (set_memory_budget)
        self.memory_budget: MemoryBudget | None = None

    def start(self) -> list[tuple[str, int]]:
        """Open every partition directory under data_dir (running recovery on each); return the
        (topic, partition) pairs found. Leftovers of interrupted deletions are removed."""
        if self.data_dir is None:
            return []
        os.makedirs(self.data_dir, exist_ok=True)
        found = []
        for name in sorted(os.listdir(self.data_dir)):
            path = os.path.join(self.data_dir, name)
            if not os.path.isdir(path):
                continue
            if _DELETED_DIR.match(name):
                shutil.rmtree(path, ignore_errors=True)
                continue
            key = parse_partition_dir_name(name)
            if key is None:
                logger.debug("log manager: ignoring directory %s", path)
                continue
            if key not in self._logs:
                self._logs[key] = segment_log(path, self._config(*key), clock=self._clock)
            found.append(key)
        return found

    def _config(self, topic: str, partition: int) -> LogConfig:
        if self._config_for is not None:
            config = self._config_for(topic, partition)
            if config is not None:
                return config
        return self.default_config

    # --- lookup ---

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def __contains__(self, key: tuple[str, int]) -> bool:
        return key in self._logs

    def __len__(self) -> int:
        return len(self._logs)

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(list(self._logs))

    def items(self) -> list[tuple[tuple[str, int], PartitionLog]]:
        return list(self._logs.items())

    def partitions_of(self, topic: str) -> list[int]:
        return sorted(p for t, p in self._logs if t == topic)

    # --- create / configure / delete ---

    def get_or_create(self, topic: str, partition: int,
                      config: LogConfig | None = None) -> PartitionLog:
        log = self._logs.get((topic, partition))
        if log is not None:
            return log
        validate_topic_name(topic)
        if partition < 0:
            raise ValueError(f"negative partition {partition}")
        config = config if config is not None else self._config(topic, partition)
        if self.data_dir is None:
            log = MemoryLog(config, clock=self._clock)
            if self.memory_budget is not None:
                self.memory_budget.add(log)
        else:
            path = os.path.join(self.data_dir, partition_dir_name(topic, partition))
            log = segment_log(path, config, clock=self._clock)
        self._logs[(topic, partition)] = log
        return log

    def set_memory_budget(self, max_bytes: int) -> MemoryBudget | None:
        """Bound what the in-memory logs hold together (log.memory.max.bytes, -1 = no bound);
        nothing to do with a data directory."""
        if self.data_dir is not None:
            return None
        self.memory_budget = MemoryBudget(max_bytes, self._clock)
        for log in self._logs.values():
            self.memory_budget.add(log)
        return self.memory_budget

    def set_config(self, topic: str, config: LogConfig, partition: int | None = None) -> None:
        """Apply a topic's (new) config to one or all of its open partitions."""
        for (t, p), log in self._logs.items():
            if t == topic and (partition is None or p == partition):
                log.config = config

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Close the partition's log and remove its data. The directory is first renamed to
        '<topic>-<partition>.<uuid>-delete' (as Kafka does) so an interrupted removal is
        finished by the next start() instead of resurrecting the partition."""
        log = self._logs.pop((topic, partition), None)
        if self.data_dir is None:
            if log is not None:
                log.delete()
            return log is not None
        path = os.path.join(self.data_dir, partition_dir_name(topic, partition))
        if log is not None:
            log.close()
        if not os.path.isdir(path):
            return log is not None
        doomed = f"{path}.{uuid.uuid4().hex}-delete"
        os.rename(path, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def delete_topic(self, topic: str) -> int:
        partitions = set(self.partitions_of(topic))
        if self.data_dir is not None and os.path.isdir(self.data_dir):
            for name in os.listdir(self.data_dir):
                key = parse_partition_dir_name(name)
                if key is not None and key[0] == topic:
                    partitions.add(key[1])
        for partition in partitions:
            self.delete_partition(topic, partition)
        return len(partitions)

    # --- periodic work (the broker runs these from a timer) ---

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Kafka's log.retention.check.interval.ms task: returns bytes deleted."""
        now = self._clock() if now_ms is None else now_ms
        return sum(log.apply_retention(now) for log in list(self._logs.values()))

    def compact(self, now_ms: int | None = None) -> int:
        """One cleaning pass over every compacted log that needs one, now and in this thread
        (tests and tools; the broker runs ``start_cleaner``): returns bytes freed."""
        now = self._clock() if now_ms is None else now_ms
        return sum(log.compact(now) for log in list(self._logs.values())
                   if log.config.compact_enabled)

    def start_cleaner(self, **settings) -> LogCleaner:
        """Kafka's log cleaner as a task on the running event loop (log.cleaner.enable):
        ``settings`` are LogCleaner's (backoff_ms, dedupe_buffer_size, ...)."""
        self.cleaner = LogCleaner(self, clock=self._clock, **settings)
        self.cleaner.start()
        return self.cleaner

    async def stop_cleaner(self) -> None:
        """Stop the cleaner; a pass in progress ends with nothing swapped in."""
        cleaner, self.cleaner = self.cleaner, None
        if cleaner is not None:
            await cleaner.stop()

    def maybe_flush(self, now_ms: int | None = None) -> int:
        """Kafka's log flusher for flush.ms: returns how many logs were fsynced."""
        now = self._clock() if now_ms is None else now_ms
        return sum(1 for log in list(self._logs.values()) if log.maybe_flush(now))

    def flush(self) -> None:
        for log in self._logs.values():
            log.flush()

    def close(self) -> None:
        """Clean shutdown: flush and close every log (SegmentLog fsyncs and writes indexes)."""
        logs, self._logs = list(self._logs.values()), {}
        errors = []
        for log in logs:
            try:
                log.close()
            except OSError as exc:  # keep closing the others
                errors.append(exc)
                logger.error("log manager: closing %r failed: %s", log, exc)
        if errors:
            raise errors[0]


def segment_log(path: str, config: LogConfig, clock):
    """A partition's SegmentLog: the segments module is loaded only by a broker with a data
    directory."""
    from .segments import SegmentLog
    return SegmentLog(path, config, clock=clock)
