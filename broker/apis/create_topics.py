"""CreateTopics: validate names, partition counts, replication factor and configs, then create."""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import CreateTopicsResponse

from ..security.authorizer import AclOperation, ResourceType
from ..topic_configs import DYNAMIC_TOPIC_CONFIG, TOPIC_CONFIGS, validate_topic_config
from ..topics import validate_topic_name

NAME = "CreateTopics"

Result = CreateTopicsResponse.CreatableTopicResult
ConfigEntry = CreateTopicsResponse.CreatableTopicConfigs


def assignment_problem(broker, replica_lists: list[list[int]],
                       width: int | None = None) -> str | None:
    """Kafka's controller's checks of a manual replica assignment (ReplicationControlManager),
    or None. ``width``: the replicas each partition must have (the topic's existing ones)."""
    registered = set(broker.cluster.alive())
    for index, replicas in enumerate(replica_lists):
        if not replicas:
            return "The manual partition assignment includes an empty replica list."
        if len(set(replicas)) != len(replicas):
            twice = next(b for b in replicas if replicas.count(b) > 1)
            return (f"The manual partition assignment includes the broker {twice} more than "
                    "once.")
        if any(b not in registered for b in replicas):
            return (f"All brokers specified in the manual partition assignment for partition "
                    f"{index} must be registered.")
        if width is not None and len(replicas) != width:
            return (f"The manual partition assignment includes a partition with "
                    f"{len(replicas)} replica(s), but this is inconsistent with previous "
                    f"partitions, which have {width} replica(s).")
        width = len(replicas)
    return None


def _check(broker, topic) -> tuple[int, str | None, int, int, list | None]:
    """(error, message, partitions, replication factor, replica assignment or None) for one
    requested topic."""
    name = topic.name
    problem = validate_topic_name(name)
    if problem:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, problem, 0, 0, None
    if broker.topics.get(name) is not None:
        return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.", 0, 0, None
    assignments = None
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return (ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor and "
                    "replicasAssignments were set. Both cannot be used at the same time.", 0,
                    0, None)
        by_index = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        if sorted(by_index) != list(range(len(topic.assignments))):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions should be 0..n-1", 0, 0,
                    None)
        assignments = [by_index[i] for i in range(len(by_index))]
        problem = assignment_problem(broker, assignments)
        if problem:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem, 0, 0, None
        partitions, rf = len(assignments), len(assignments[0])
    else:
        partitions = topic.num_partitions
        if partitions == -1:
            partitions = broker.config["num.partitions"]
        if partitions <= 0:
            return (ErrorCode.INVALID_PARTITIONS,
                    "Number of partitions was set to an invalid non-positive value.", 0, 0,
                    None)
        rf = topic.replication_factor
        if rf == 0 or rf < -1:
            return (ErrorCode.INVALID_REPLICATION_FACTOR,
                    "Replication factor must be larger than 0, or -1 to use the default value.",
                    0, 0, None)
        if rf == -1:
            rf = broker.config["default.replication.factor"]
        registered = len(broker.cluster.alive())
        if rf > registered:
            return (ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Unable to replicate the partition {rf} time(s): The target replication "
                    f"factor of {rf} cannot be reached because only {registered} broker(s) "
                    "are registered.", 0, 0, None)
    seen = set()
    for c in topic.configs:
        if c.name in seen:
            return ErrorCode.INVALID_REQUEST, f"Duplicate config {c.name}", 0, 0, None
        seen.add(c.name)
        if c.name not in TOPIC_CONFIGS:
            return ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {c.name}", 0, 0, None
        problem = validate_topic_config(c.name, c.value)
        if problem:
            return ErrorCode.INVALID_CONFIG, problem, 0, 0, None
    return ErrorCode.NONE, None, partitions, rf, assignments


#: Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH: one request may ask for at most
#: this many partitions in all, checked before anything is allocated
MAX_PARTITIONS_PER_REQUEST = 10_000
#: Kafka's QuorumController.MAX_RECORDS_PER_USER_OP: the records one request would write (a
#: topic, each of its partitions, each config it sets) are bounded too
MAX_RECORDS_PER_REQUEST = 10_000


def requested_partitions(request, default_partitions: int) -> int:
    """Kafka's validateTotalNumberOfPartitions: the default for -1, explicit assignments by
    count, non-positive counts not at all."""
    total = 0
    for topic in request.topics:
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += default_partitions
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


def _refuse_all(request, message: str, refused: list) -> CreateTopicsResponse:
    """The whole request fails, every topic with it, as Kafka's controller fails it."""
    return CreateTopicsResponse(topics=[
        Result(name=topic.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=message,
               num_partitions=-1, replication_factor=-1, configs=None)
        for topic in request.topics] + refused)


def _authorize(auth, ctx, request) -> tuple[list, object]:
    """Kafka's controller checks: CREATE on the cluster or on each topic (the others are left
    out and answered TOPIC_AUTHORIZATION_FAILED at the end), and DESCRIBE_CONFIGS on a created
    topic to see its configs. Returns (refused results, may see configs)."""
    counts: dict[str, int] = {}
    for topic in request.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    if auth.cluster(ctx, AclOperation.CREATE):
        may_create = None
    else:
        may_create = auth.predicate(ctx, AclOperation.CREATE, ResourceType.TOPIC)
    refused = []
    if may_create is not None:
        kept = []
        for topic in request.topics:
            if counts[topic.name] == 1 and not may_create(topic.name):
                refused.append(Result(name=topic.name,
                                      error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                      error_message="Authorization failed.", num_partitions=-1,
                                      replication_factor=-1, configs=None))
            else:
                kept.append(topic)
        request.topics = kept
    return refused, auth.predicate(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC)


def handle(broker, ctx, request, respond) -> None:
    refused, may_see_configs = [], None
    if broker.authorizer is not None:
        refused, may_see_configs = _authorize(broker.authorizer, ctx, request)
    if requested_partitions(request, broker.config["num.partitions"]) > \
            MAX_PARTITIONS_PER_REQUEST:
        respond(_refuse_all(request, "Excessively large number of partitions per request.",
                            refused))
        return
    seen: dict[str, int] = {}
    for topic in request.topics:
        seen[topic.name] = seen.get(topic.name, 0) + 1
    checked = []    # (topic, error, message, partitions, configs)
    records = 0     # what Kafka's controller would write: a topic, its partitions, its configs
    for topic in request.topics:
        if seen[topic.name] > 1:
            checked.append((topic, ErrorCode.INVALID_REQUEST,
                            f"Create topics request from client `{ctx.client_id}` contains "
                            f"multiple entries for the following topics: {topic.name}", 0, {},
                            0, None))
            continue
        error, message, partitions, rf, assignments = _check(broker, topic)
        configs = {c.name: c.value for c in topic.configs if c.value is not None}
        if not error:
            records += 1 + partitions + len(configs)
        checked.append((topic, error, message, partitions, configs, rf, assignments))
    if records > MAX_RECORDS_PER_REQUEST:
        respond(_refuse_all(request, "Unable to perform excessively large batch operation.",
                            refused))
        return
    results = []
    # controller_mutation_rate: each topic's partitions, strict from v6 (Kafka's
    # ReplicationControlManager applies it once a topic passed its checks)
    quota = broker.client_quotas.mutation_quota(ctx, strict_from=6)
    for topic, error, message, partitions, configs, rf, assignments in checked:
        if not error and quota is not None and not quota.record(partitions):
            error, message = ErrorCode.THROTTLING_QUOTA_EXCEEDED, None
        if error:
            results.append(Result(name=topic.name, error_code=error, error_message=message,
                                  num_partitions=-1, replication_factor=-1, configs=None))
            continue
        topic_id = None
        if not request.validate_only:
            created = broker.topics.create(topic.name, partitions, configs,
                                           replication_factor=rf, assignments=assignments)
            topic_id = created.topic_id
            broker.on_topic_created(created, reason="CreateTopics")
        defaults = broker.topics.broker_defaults
        entries = [ConfigEntry(name=n, value=configs.get(n, defaults.value(n)), read_only=False,
                               config_source=DYNAMIC_TOPIC_CONFIG if n in configs else
                               defaults.sources[n], is_sensitive=False)
                   for n in sorted(TOPIC_CONFIGS)]
        if may_see_configs is None or may_see_configs(topic.name):
            result = Result(name=topic.name, error_code=ErrorCode.NONE, error_message=None,
                            num_partitions=partitions, replication_factor=rf, configs=entries)
        else:  # created, but its configs are not shown
            result = Result(name=topic.name, error_code=ErrorCode.NONE, error_message=None,
                            num_partitions=-1, replication_factor=-1, configs=[],
                            topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        if topic_id is not None:
            result.topic_id = topic_id
        results.append(result)
    broker.client_quotas.finish_mutations(quota, ctx)
    respond(CreateTopicsResponse(topics=results + refused))
