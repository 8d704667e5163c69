"""A streams group's topology and its configuration against the cluster's topics (Kafka's
StreamsTopology and InternalTopicManager), as plain values with no I/O.

The first member of a streams group sends the application's topology: subtopologies, each with
its source topics, the repartition topics it writes (sink) and reads (source), its changelog
topics and its copartition groups. :func:`configure` checks it against the topics that exist
and derives what Kafka derives:

- a missing source topic answers MISSING_SOURCE_TOPICS, and nothing is assigned;
- a repartition topic without a fixed partition count gets the largest input partition count
  of the subtopology that writes it (repeated until every count is known);
- topics of one copartition group must have the same partition count (repartition topics
  follow the others); otherwise INCORRECTLY_PARTITIONED_TOPICS;
- a changelog topic has as many partitions as its subtopology has tasks (the largest input
  partition count);
- internal topics that do not exist yet are returned to be created (MISSING_INTERNAL_TOPICS
  until they are); one that exists with another partition count is INCORRECTLY_PARTITIONED.

A subtopology has as many tasks as its largest input topic has partitions.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from protocol.errors import ErrorCode

E = ErrorCode


class Status:
    """StreamsGroupHeartbeatResponse's status codes."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5


class TopologyError(Exception):
    """The topology cannot be configured: a status (``status`` set) the members are told of,
    or an error code (STREAMS_INVALID_TOPOLOGY, UNKNOWN_SERVER_ERROR) answered to the member."""

    def __init__(self, message: str, status: int | None = None,
                 code: ErrorCode = E.STREAMS_INVALID_TOPOLOGY) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code


def _status(status: int, message: str) -> TopologyError:
    return TopologyError(message, status=status)


@dataclasses.dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int = 0            # 0: derived by the broker
    replication_factor: int = 0    # 0: the broker's default
    configs: tuple = ()            # ((key, value), ...)


@dataclasses.dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple = ()
    source_topic_regex: tuple = ()
    state_changelog_topics: tuple = ()      # TopicInfo
    repartition_sink_topics: tuple = ()
    repartition_source_topics: tuple = ()   # TopicInfo
    #: ((source topic indexes), (regex indexes), (repartition source indexes)), ...
    copartition_groups: tuple = ()

    @property
    def stateful(self) -> bool:
        return bool(self.state_changelog_topics)

    def copartitioned_topic_sets(self) -> list[frozenset]:
        out = []
        for sources, _regex, repartition in self.copartition_groups:
            names = {self.source_topics[i] for i in sources}
            names |= {self.repartition_source_topics[i].name for i in repartition}
            out.append(frozenset(names))
        return out


@dataclasses.dataclass(frozen=True)
class StreamsTopology:
    epoch: int
    subtopologies: tuple        # Subtopology, in the order the member sent them

    def by_id(self) -> dict[str, Subtopology]:
        return {s.subtopology_id: s for s in self.subtopologies}

    def required_topics(self) -> set[str]:
        """Kafka's requiredTopics: source, repartition source and changelog topics."""
        out: set[str] = set()
        for s in self.subtopologies:
            out.update(s.source_topics)
            out.update(t.name for t in s.repartition_source_topics)
            out.update(t.name for t in s.state_changelog_topics)
        return out

    # ------------------------------------------------------------------ wire and records
    @classmethod
    def from_message(cls, topology) -> "StreamsTopology":
        """From StreamsGroupHeartbeatRequest.Topology or StreamsGroupTopologyValue (same
        shape; the record's topic configs are spelled key/value)."""
        def info(t) -> TopicInfo:
            return TopicInfo(t.name, t.partitions, t.replication_factor,
                             tuple((c.key, c.value) for c in (t.topic_configs or ())))

        subs = []
        for s in topology.subtopologies or ():
            subs.append(Subtopology(
                s.subtopology_id, tuple(s.source_topics or ()),
                tuple(s.source_topic_regex or ()),
                tuple(info(t) for t in s.state_changelog_topics or ()),
                tuple(s.repartition_sink_topics or ()),
                tuple(info(t) for t in s.repartition_source_topics or ()),
                tuple((tuple(g.source_topics or ()), tuple(g.source_topic_regex or ()),
                       tuple(g.repartition_source_topics or ()))
                      for g in s.copartition_groups or ())))
        return cls(topology.epoch, tuple(subs))


def validate_request_topology(topology) -> None:
    """Kafka's throwIfInvalidTopology: changelog topics' partition counts are the broker's."""
    for s in topology.subtopologies or ():
        for t in s.state_changelog_topics or ():
            if t.partitions != 0:
                raise TopologyError(
                    f"Changelog topic {t.name} must have an undefined partition count, but it "
                    f"is set to {t.partitions}.")


@dataclasses.dataclass(frozen=True)
class InternalTopic:
    """An internal topic as it should be (Kafka's ConfiguredInternalTopic)."""

    name: str
    partitions: int
    replication_factor: int | None
    configs: dict


@dataclasses.dataclass(frozen=True)
class ConfiguredSubtopology:
    num_tasks: int
    source_topics: frozenset
    repartition_source_topics: dict     # name -> InternalTopic
    repartition_sink_topics: frozenset
    state_changelog_topics: dict        # name -> InternalTopic
    stateful: bool


@dataclasses.dataclass(frozen=True)
class ConfiguredTopology:
    """The topology configured against the cluster at ``metadata_hash``: the subtopologies
    with their task counts (None if it could not be configured), the internal topics to
    create, and the status the members are told of (None when ready)."""

    epoch: int
    metadata_hash: int
    subtopologies: dict | None
    internal_topics_to_create: dict
    status: tuple | None           # (status code, detail)

    @property
    def ready(self) -> bool:
        return self.status is None and self.subtopologies is not None


def summarize(topics) -> str:
    """Kafka's summarizeTopics: the first three, then a count."""
    topics = list(topics)
    if not topics:
        return "<none>"
    shown = ", ".join(topics[:3])
    return shown + (f" and {len(topics) - 3} additional topics" if len(topics) > 3 else "")


def configure(topology: StreamsTopology, partition_count: Callable[[str], int | None],
              metadata_hash: int = 0) -> ConfiguredTopology:
    """Kafka's InternalTopicManager.configureTopics. ``partition_count(name)`` is the topic's
    partition count, or None if it does not exist. Raises TopologyError for a topology that
    can never be configured (STREAMS_INVALID_TOPOLOGY)."""
    try:
        _check_source_topics(topology, partition_count)
        decided = _decide_partition_counts(topology, partition_count)
        configured = {}
        for s in sorted(topology.subtopologies, key=lambda s: s.subtopology_id):
            configured[s.subtopology_id] = _configure_subtopology(s, partition_count, decided)
        to_create = _missing_internal_topics(configured, topology, partition_count)
        status = None
        if to_create:
            status = (Status.MISSING_INTERNAL_TOPICS,
                      "Internal topics are missing: " + summarize(to_create))
        return ConfiguredTopology(topology.epoch, metadata_hash, configured, to_create, status)
    except TopologyError as exc:
        if exc.status is None:
            raise
        return ConfiguredTopology(topology.epoch, metadata_hash, None, {},
                                  (exc.status, exc.message))


def _check_source_topics(topology: StreamsTopology, count) -> None:
    missing = sorted({t for s in topology.subtopologies for t in s.source_topics
                      if count(t) is None})
    if missing:
        raise _status(Status.MISSING_SOURCE_TOPICS,
                      f"Source topics {summarize(missing)} are missing.")


def _decide_partition_counts(topology: StreamsTopology, count) -> dict[str, int]:
    decided: dict[str, int] = {}

    def known(topic: str) -> int | None:
        n = count(topic)
        return n if n is not None else decided.get(topic)

    decided.update(_repartition_counts(topology, known))
    fixed = {t.name for s in topology.subtopologies for t in s.repartition_source_topics
             if t.partitions != 0}
    flexible = {t.name for s in topology.subtopologies for t in s.repartition_source_topics
                if t.partitions == 0}
    for s in topology.subtopologies:
        for group in s.copartitioned_topic_sets():
            decided.update(_enforce_copartitioning(group, fixed, flexible, known))
    for s in topology.subtopologies:
        inputs = [known(t) for t in s.source_topics] + \
                 [known(t.name) for t in s.repartition_source_topics]
        if not inputs:
            raise TopologyError(f"No source topics found for subtopology {s.subtopology_id}")
        if any(n is None for n in inputs):
            raise TopologyError("No partition count for a source topic of subtopology "
                                f"{s.subtopology_id}", code=E.UNKNOWN_SERVER_ERROR)
        for t in s.state_changelog_topics:
            decided[t.name] = max(inputs)
    return decided


def _repartition_counts(topology: StreamsTopology, known) -> dict[str, int]:
    """Kafka's RepartitionTopics.setup: a repartition topic without a count of its own gets
    the largest input partition count of a subtopology that writes it."""
    counts = {t.name: t.partitions for s in topology.subtopologies
              for t in s.repartition_source_topics if t.partitions != 0}

    def writer_count(s: Subtopology) -> int | None:
        best = None
        for t in s.repartition_source_topics:
            n = counts.get(t.name)
            if n is not None and (best is None or n > best):
                best = n
        for name in s.source_topics:
            n = known(name)
            if n is not None and (best is None or n > best):
                best = n
        return best

    while True:
        needed = progress = False
        for s in topology.subtopologies:
            for sink in s.repartition_sink_topics:
                if sink in counts:
                    continue
                n = writer_count(s)
                if n is None:
                    needed = True
                else:
                    counts[sink] = n
                    progress = True
        if not needed:
            break
        if not progress:
            raise TopologyError("Failed to compute number of partitions for all repartition "
                                "topics. There may be loops in the topology that cannot be "
                                "resolved.")
    for s in topology.subtopologies:
        if any(t.name not in counts for t in s.repartition_source_topics):
            raise TopologyError("Failed to compute number of partitions for all repartition "
                                "topics, because a repartition source topic is never used as "
                                "a sink topic.")
    return counts


def _enforce_copartitioning(group: frozenset, fixed: set, flexible: set,
                            known) -> dict[str, int]:
    """Kafka's CopartitionedTopicsEnforcer.enforce."""
    if not group:
        return {}

    def count(topic: str) -> int:
        n = known(topic)
        if n is None:
            raise TopologyError(f"Number of partitions is not set for topic: {topic}",
                                code=E.UNKNOWN_SERVER_ERROR)
        return n

    repartition = {t: count(t) for t in group if t in fixed or t in flexible}
    others = {t: count(t) for t in group if t not in repartition}
    if set(repartition) == set(group):
        if fixed:
            first = count(next(iter(sorted(fixed))))
            for t in fixed:
                if count(t) != first:
                    raise _status(Status.INCORRECTLY_PARTITIONED_TOPICS,
                                  "Following topics do not have the same number of "
                                  f"partitions: [{_java_map(repartition)}]")
            wanted = first
        else:
            wanted = max(repartition.values(), default=0)
            if wanted == 0:
                raise TopologyError("All topics in the copartition group had undefined "
                                    f"partition number: {sorted(repartition)}")
    else:
        wanted = next(iter(others.values()))
        if any(n != wanted for n in others.values()):
            raise _status(Status.INCORRECTLY_PARTITIONED_TOPICS,
                          "Following topics do not have the same number of partitions: "
                          f"[{_java_map(others)}]")
    out = {}
    for topic, n in repartition.items():
        out[topic] = wanted
        if topic in fixed and n != wanted:
            raise _status(Status.INCORRECTLY_PARTITIONED_TOPICS,
                          f"Number of partitions [{n}] of repartition topic [{topic}] doesn't "
                          f"match number of partitions [{wanted}] of the source topic.")
    return out


def _java_map(counts: dict) -> str:
    """Java's TreeMap.toString: {a=1, b=2}."""
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) + "}"


def _internal(t: TopicInfo, decided: dict) -> InternalTopic:
    if t.partitions == 0 and t.name not in decided:
        raise TopologyError(f"Number of partitions must be set for topic {t.name}",
                            code=E.UNKNOWN_SERVER_ERROR)
    return InternalTopic(t.name, t.partitions or decided[t.name],
                         t.replication_factor or None, dict(t.configs))


def _configure_subtopology(s: Subtopology, count, decided: dict) -> ConfiguredSubtopology:
    def n(topic: str) -> int:
        found = count(topic)
        return found if found is not None else decided[topic]

    inputs = list(s.source_topics) + [t.name for t in s.repartition_source_topics]
    return ConfiguredSubtopology(
        num_tasks=max(n(t) for t in inputs),
        source_topics=frozenset(s.source_topics),
        repartition_source_topics={t.name: _internal(t, decided)
                                   for t in s.repartition_source_topics},
        repartition_sink_topics=frozenset(s.repartition_sink_topics),
        state_changelog_topics={t.name: _internal(t, decided)
                                for t in s.state_changelog_topics},
        stateful=s.stateful)


def _missing_internal_topics(configured: dict, topology: StreamsTopology, count) -> dict:
    wanted: dict[str, InternalTopic] = {}
    for s in configured.values():
        wanted.update(s.repartition_source_topics)
        wanted.update(s.state_changelog_topics)
    for topic in sorted(topology.required_topics()):
        existing = count(topic)
        if existing is None:
            continue
        expected = wanted.pop(topic, None)
        if expected is not None and existing != expected.partitions:
            raise _status(Status.INCORRECTLY_PARTITIONED_TOPICS,
                          f"Existing topic {topic} has different number of partitions: "
                          f"expected {expected.partitions}, found {existing}")
    return dict(sorted(wanted.items()))
