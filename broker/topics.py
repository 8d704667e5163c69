"""Topics and partitions: names, ids, partition counts, configs, and each partition's log.

Topic metadata lives in memory; with a data directory it is also written to
``<data-dir>/topics.json`` (atomically: temp file + rename) so it survives a restart.
"""
from __future__ import annotations

import json
import os
import re
import uuid

from protocol.errors import ErrorCode
from protocol.records import iter_batches

from .cluster import Cluster
from .log import LogConfig, LogManager
from .log.files import write_json
from .partitions.producer_state import ProducerStateTable
from .broker_configs import BrokerConfigs
from .topic_configs import TOPIC_CONFIGS, BrokerDefaults
from .txn_markers import end_marker_batch

#: the epoch Kafka gives a new partition's first leader; each change of leader (a node going down
#: or up, broker/cluster.py) moves a partition to the next, stamped into every batch its leader
#: appends (partitionLeaderEpoch) and answered by Metadata, ListOffsets and OffsetForLeaderEpoch
LEADER_EPOCH = 0

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
#: the names Kafka's Topic.isInternal treats as internal, whether or not the topic exists
SHARE_STATE_TOPIC = "__share_group_state"
INTERNAL_TOPICS = frozenset((OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, SHARE_STATE_TOPIC))
MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> str | None:
    """Why a topic name is illegal, or None (Kafka's Topic.validate rules)."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL.match(name):
        return (f"Topic name \"{name}\" is illegal, it contains a character other than ASCII "
                "alphanumerics, '.', '_' and '-'")
    return None


#: the replicas of a partition made without a cluster (node 1 alone)
ONE_REPLICA = [1]
#: a new partition's leader epoch cache: its first leader's epoch from offset 0
FIRST_EPOCHS = ((LEADER_EPOCH, 0),)


class Partition:
    """One topic partition: its log and its producers' state, which together give the last
    stable offset (``log.last_stable_offset``) and the aborted transactions
    (``log.txn_index``); and its place on the cluster's nodes, as Kafka's controller records
    it (PartitionRegistration): replicas, in-sync replicas, leader (-1: none) and leader epoch,
    with the leader epoch cache (epoch, start offset) that OffsetForLeaderEpoch answers from.
    broker/cluster.py changes the placement; the lists are replaced, never changed in place, so
    partitions may share them."""

    __slots__ = ("topic", "index", "log", "producers", "replicas", "isr", "leader",
                 "leader_epoch", "epochs")

    def __init__(self, topic: "Topic", index: int, log, replicas: list[int] = None) -> None:
        if replicas is None:
            replicas = ONE_REPLICA
        self.topic = topic
        self.index = index
        self.log = log
        self.producers = ProducerStateTable()
        log.producers = self.producers  # the cleaner keeps each producer's last batch
        self.replicas = replicas
        self.isr = replicas
        self.leader = replicas[0]
        self.leader_epoch = LEADER_EPOCH
        self.epochs: tuple[tuple[int, int], ...] = FIRST_EPOCHS

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    def append_batch(self, records, batch, *, verification=None,
                     log_append_time: int | None = None):
        """Append one validated batch (``records``, parsed as ``batch``) as the leader, with the
        producer checks: (error code, first offset, duplicate). A duplicate (the metadata of the
        batch it repeats, not appended again) answers its original first offset; an error -1.
        ``verification`` is the guard a transactional Produce got for this partition
        (``ProducerStateTable.start_verification``)."""
        if batch.producer_id < 0:
            return ErrorCode.NONE, self.log.append(
                records, log_append_time=log_append_time,
                partition_leader_epoch=self.leader_epoch).first_offset, None
        producers = self.producers
        code, duplicate = producers.check(batch, verification)
        if code:
            return code, -1, None
        if duplicate is not None:
            return ErrorCode.NONE, duplicate.first_offset, duplicate
        log = self.log
        first_offset = log.append(records, log_append_time=log_append_time,
                                  partition_leader_epoch=self.leader_epoch).first_offset
        timestamp = batch.max_timestamp if log_append_time is None else log_append_time
        if producers.update(batch, first_offset, timestamp):
            log.first_unstable_offset = producers.first_unstable_offset()
        return ErrorCode.NONE, first_offset, None

    def append_from_coordinator(self, records) -> int:
        """Append a batch a coordinator wrote (e.g. a transactional offset commit into
        __consumer_offsets) and let the producer state follow it, as Kafka does for its
        coordinators' appends (no sequence or verification checks: the coordinator checked
        the producer), so the last stable offset and the aborted index cover it. Returns the
        first offset."""
        log = self.log
        first_offset = offset = log.append(records,
                                           partition_leader_epoch=self.leader_epoch).first_offset
        producers = self.producers
        for batch in iter_batches(records):
            if (batch.producer_id >= 0 and not batch.is_control
                    and producers.update(batch, offset, batch.max_timestamp)):
                log.first_unstable_offset = producers.first_unstable_offset()
            offset += batch.last_offset_delta + 1
        return first_offset

    def write_end_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                         coordinator_epoch: int, timestamp: int,
                         transaction_version: int = 2) -> int:
        """Append a COMMIT or ABORT marker and end the producer's transaction here: the first
        unstable offset moves, an aborted transaction enters the aborted index. Returns the
        error code (nothing is written on an error)."""
        producers = self.producers
        code = producers.check_marker(producer_id, producer_epoch, coordinator_epoch,
                                      transaction_version)
        if code:
            return code
        log = self.log
        offset = log.append(end_marker_batch(producer_id, producer_epoch, commit,
                                             coordinator_epoch, timestamp),
                            partition_leader_epoch=self.leader_epoch).first_offset
        ended = producers.complete(producer_id, producer_epoch, coordinator_epoch, offset,
                                   timestamp)
        if ended is not None:
            if not commit:
                log.txn_index.append(producer_id, ended[0], offset, ended[1])
            log.first_unstable_offset = producers.first_unstable_offset()
        return ErrorCode.NONE


class Topic:
    def __init__(self, name: str, topic_id: uuid.UUID, configs: dict[str, str],
                 internal: bool, replication_factor: int = 1) -> None:
        self.name = name
        self.topic_id = topic_id
        self.configs = configs  # only the ones set explicitly; defaults come from the broker
        self.internal = internal
        self.replication_factor = replication_factor
        self.partitions: list[Partition] = []


class TopicManager:
    def __init__(self, config, data_dir: str | None, cluster=None, broker_configs=None) -> None:
        self.config = config
        #: where partitions live (broker/cluster.py); one node unless told otherwise
        self.cluster = cluster if cluster is not None else Cluster(config["node.id"], 1)
        self.data_dir = data_dir
        #: the broker's configs, dynamic ones included (broker/broker_configs.py)
        self.broker_configs = broker_configs if broker_configs is not None else \
            BrokerConfigs(config, config["node.id"], data_dir)
        self.broker_configs.listeners.append(self.broker_configs_changed)
        #: what a topic without its own value of a config gets (broker/topic_configs.py)
        self.broker_defaults = BrokerDefaults(self.broker_configs)
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self.logs = LogManager(data_dir)
        self._meta_path = os.path.join(data_dir, "topics.json") if data_dir else None
        #: changes whenever a topic is created or deleted or gains partitions (consumer groups
        #: recompute their assignment when the topics they subscribe to change)
        self.version = 0

    # -- lookups

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def name_of(self, topic_id) -> str | None:
        """The name of the topic with this id; None for an id no topic has (never created,
        or deleted, even if a topic of the same name was created since)."""
        topic = self.by_id.get(topic_id)
        return None if topic is None else topic.name

    def partition(self, name: str, index: int) -> Partition | None:
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def config_value(self, topic: Topic, name: str) -> str:
        value = topic.configs.get(name)
        return self.broker_defaults.value(name) if value is None else value

    def log_config(self, topic: Topic) -> LogConfig:
        return LogConfig.from_topic_config({n: self.config_value(topic, n)
                                            for n in TOPIC_CONFIGS})

    # -- changes

    def create(self, name: str, num_partitions: int, configs: dict[str, str] | None = None,
               internal: bool = False, topic_id: uuid.UUID | None = None,
               save: bool = True, replication_factor: int = 1,
               assignments: list[list[int]] | None = None) -> Topic:
        """``assignments``: each partition's replicas, in partition order (CreateTopics's
        replica assignment, or what topics.json recorded); else ``replication_factor`` replicas
        per partition as the cluster places them."""
        if assignments:
            replication_factor = len(assignments[0])
        topic = Topic(name, topic_id or uuid.uuid4(), dict(configs or {}), internal,
                      replication_factor)
        self.topics[name] = topic
        self.by_id[topic.topic_id] = topic
        self._add_partitions(topic, len(assignments) if assignments else num_partitions,
                             assignments)
        self.version += 1
        if save:
            self.save()
        return topic

    def _add_partitions(self, topic: Topic, total: int,
                        assignments: list[list[int]] | None = None) -> None:
        log_config = self.log_config(topic)
        cluster = self.cluster
        for index in range(len(topic.partitions), total):
            log = self.logs.get_or_create(topic.name, index, log_config)
            replicas = assignments[index] if assignments else None
            partition = Partition(topic, index, log, cluster.replicas(
                topic.name, index, topic.replication_factor, replicas))
            cluster.place(partition)
            partition.producers.rebuild(log)
            topic.partitions.append(partition)

    def partitions(self):
        """Every partition of every topic."""
        for topic in self.topics.values():
            yield from topic.partitions

    def add_partitions(self, name: str, total: int,
                       assignments: list[list[int]] | None = None) -> None:
        topic = self.topics[name]
        self._add_partitions(topic, total, [[]] * len(topic.partitions) + assignments
                             if assignments else None)
        self.version += 1
        self.save()

    def delete(self, name: str) -> None:
        topic = self.topics.pop(name)
        self.by_id.pop(topic.topic_id, None)
        self.version += 1
        self.logs.delete_topic(name)
        # Partition.topic <-> Topic.partitions is a cycle: break it so the logs' memory is freed
        # now, not at the next cyclic garbage collection
        topic.partitions.clear()
        self.save()

    def alter_configs(self, name: str, configs: dict[str, str | None]) -> None:
        topic = self.topics[name]
        for key, value in configs.items():
            if value is None:
                topic.configs.pop(key, None)
            else:
                topic.configs[key] = value
        self.logs.set_config(name, self.log_config(topic))
        self.save()

    def broker_configs_changed(self) -> None:
        """A dynamic broker config changed: every topic's defaults follow at once, as on
        Kafka (log.retention.ms set cluster-wide applies to each topic without its own)."""
        self.broker_defaults = BrokerDefaults(self.broker_configs)
        for topic in self.topics.values():
            self.logs.set_config(topic.name, self.log_config(topic))

    # -- persistence of metadata

    def load(self) -> None:
        """Reopen the topics recorded in the data directory."""
        if not self._meta_path or not os.path.exists(self._meta_path):
            return
        with open(self._meta_path) as f:
            doc = json.load(f)
        for entry in doc["topics"]:
            topic = self.create(entry["name"], entry["partitions"], entry.get("configs", {}),
                                entry.get("internal", False), uuid.UUID(entry["id"]),
                                save=False,
                                replication_factor=entry.get("replication_factor", 1),
                                assignments=entry.get("replicas"))
            for index, epochs in entry.get("leader_epochs", {}).items():
                partition = topic.partitions[int(index)]
                partition.epochs = tuple((e, start) for e, start in epochs)
                partition.leader_epoch = partition.epochs[-1][0]

    def save(self) -> None:
        if not self._meta_path:
            return
        doc = {"version": 1, "topics": [self._entry(t) for t in self.topics.values()]}
        write_json(self._meta_path, doc, indent=1)

    def _entry(self, t: Topic) -> dict:
        """A topic's record in topics.json; its placement only where it is not the default."""
        entry = {"name": t.name, "id": str(t.topic_id), "partitions": len(t.partitions),
                 "configs": t.configs, "internal": t.internal}
        if not self.cluster.single:
            entry["replication_factor"] = t.replication_factor
            entry["replicas"] = [p.replicas for p in t.partitions]
        epochs = {p.index: p.epochs for p in t.partitions if p.epochs is not FIRST_EPOCHS}
        if epochs:
            entry["leader_epochs"] = epochs
        return entry

    def close(self) -> None:
        self.logs.close()
