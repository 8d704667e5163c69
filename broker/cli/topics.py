"""``kbroker topic create|list|describe|delete|alter-config|add-partitions`` on kafka-python's
KafkaAdminClient (CreateTopics, Metadata, ListOffsets, DescribeConfigs, DeleteTopics,
IncrementalAlterConfigs, CreatePartitions)."""
from __future__ import annotations

from .connection import admin, connection_from
from .errors import CliError
from .output import emit_json, pairs, section, table


def _name_values(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CliError(f"{flag} expects NAME=VALUE, got {item!r}", status=2)
        out[name.strip()] = value.strip()
    return out


def _error_name(code: int) -> str | None:
    if not code:
        return None
    import kafka.errors as errors
    return errors.for_code(code).message


def _report(rows: list[dict], args, what: str) -> int:
    """A table or JSON lines of {topic, error, message}; exit 1 if any failed."""
    if args.format == "json":
        for row in rows:
            emit_json(row)
    else:
        table(["TOPIC", "STATUS"], [[r["topic"], "OK" if not r["error"] else
                                     f"{r['error']}: {r['message'] or ''}".rstrip(": ")]
                                    for r in rows])
    failed = [r for r in rows if r["error"]]
    if failed:
        first = failed[0]
        raise CliError(f"could not {what} topic {first['topic']!r}: {first['error']}"
                       + (f" ({first['message']})" if first["message"] else ""))
    return 0


def create(args) -> int:
    conn = connection_from(args)
    configs = _name_values(args.config, "--config")
    with admin(conn) as client:
        result = client.create_topics(
            {t: {"num_partitions": args.partitions, "replication_factor": args.replication_factor,
                 "configs": configs} for t in args.topics},
            timeout_ms=int(conn.timeout_s * 1000), raise_errors=False)
        rows = []
        for topic in result["topics"]:
            error = _error_name(topic["error_code"])
            if error == "TOPIC_ALREADY_EXISTS" and args.if_not_exists:
                error = None
            rows.append({"topic": topic["name"], "error": error,
                         "message": topic.get("error_message") if error else None})
        created = [r["topic"] for r in rows if not r["error"]]
        if created:  # visible with a leader everywhere before the next command uses it
            client.wait_for_topics(created, timeout_ms=int(conn.timeout_s * 1000))
    return _report(rows, args, "create")


def delete(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        result = client.delete_topics(args.topics, timeout_ms=int(conn.timeout_s * 1000),
                                      raise_errors=False)
    rows = []
    for topic in result["topics"]:
        error = _error_name(topic["error_code"])
        if error == "UNKNOWN_TOPIC_OR_PARTITION" and args.if_exists:
            error = None
        rows.append({"topic": topic["name"], "error": error,
                     "message": topic.get("error_message") if error else None})
    return _report(rows, args, "delete")


def list_topics(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        topics = client.describe_topics()
    rows = []
    for t in sorted(topics, key=lambda t: t["name"]):
        if t["is_internal"] and not args.internal:
            continue
        parts = t["partitions"]
        rows.append({"name": t["name"], "topic_id": _topic_id(t), "internal": t["is_internal"],
                     "partitions": len(parts),
                     "replication_factor": len(parts[0]["replica_nodes"]) if parts else 0})
    if args.format == "json":
        for row in rows:
            emit_json(row)
    else:
        table(["NAME", "PARTITIONS", "REPLICAS"],
              [[r["name"], r["partitions"], r["replication_factor"]] for r in rows])
    return 0


def _topic_id(topic: dict) -> str | None:
    tid = topic.get("topic_id")
    return None if tid in (None, "00000000-0000-0000-0000-000000000000") else str(tid)


def unknown_topic(topic: str) -> CliError:
    return CliError(f"topic {topic!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION)")


def describe_topic_metadata(client, topics: list[str]) -> list[dict]:
    """Metadata of each topic, failing on the first that does not exist."""
    found = client.describe_topics(topics)
    by_name = {t["name"]: t for t in found}
    for name in topics:
        t = by_name.get(name)
        if t is None or t["error_code"] == 3:
            raise unknown_topic(name)
        if t["error_code"]:
            raise CliError(f"topic {name!r}: {_error_name(t['error_code'])}")
    return [by_name[name] for name in topics]


def describe(args) -> int:
    from kafka import TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, OffsetSpec
    conn = connection_from(args)
    with admin(conn) as client:
        metas = describe_topic_metadata(client, args.topics)
        tps = [TopicPartition(t["name"], p["partition_index"]) for t in metas
               for p in t["partitions"]]
        earliest = client.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
        latest = client.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
        configs = client.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t["name"]) for t in metas],
            config_filter="all" if args.all_configs else "modified")
    topic_configs = configs.get("topic", {})
    for i, t in enumerate(metas):
        parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
        start = {p["partition_index"]: earliest[TopicPartition(t["name"], p["partition_index"])]
                 .offset for p in parts}
        end = {p["partition_index"]: latest[TopicPartition(t["name"], p["partition_index"])]
               .offset for p in parts}
        out = {
            "name": t["name"], "topic_id": _topic_id(t), "internal": t["is_internal"],
            "partition_count": len(parts),
            "replication_factor": len(parts[0]["replica_nodes"]) if parts else 0,
            "partitions": [{
                "partition": p["partition_index"], "leader": p["leader_id"],
                "leader_epoch": p["leader_epoch"], "replicas": p["replica_nodes"],
                "isr": p["isr_nodes"], "offline_replicas": p["offline_replicas"],
                "error": _error_name(p["error_code"]),
                "log_start_offset": start[p["partition_index"]],
                "high_watermark": end[p["partition_index"]],
            } for p in parts],
            "configs": {name: c["value"] for name, c in
                        sorted(topic_configs.get(t["name"], {}).items())},
        }
        if args.format == "json":
            emit_json(out)
            continue
        if i:
            print()
        pairs([("NAME", out["name"]), ("TOPIC-ID", out["topic_id"]),
               ("INTERNAL", str(out["internal"]).lower()),
               ("PARTITIONS", out["partition_count"]),
               ("REPLICATION-FACTOR", out["replication_factor"])])
        section("CONFIGS" if args.all_configs else "CONFIGS (set on the topic)")
        if out["configs"]:
            table(["NAME", "VALUE"], [[k, v] for k, v in out["configs"].items()])
        else:
            print("(none)")
        section("PARTITIONS")
        table(["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "LOG-START-OFFSET",
               "HIGH-WATERMARK"],
              [[p["partition"], p["leader"], p["leader_epoch"],
                ",".join(map(str, p["replicas"])), ",".join(map(str, p["isr"])),
                p["log_start_offset"], p["high_watermark"]] for p in out["partitions"]])
    return 0


def alter_config(args) -> int:
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType
    changes = {name: (AlterConfigOp.SET, value)
               for name, value in _name_values(args.set, "--set").items()}
    for name in args.delete:
        changes[name.strip()] = (AlterConfigOp.DELETE, None)
    if not changes:
        raise CliError("nothing to change: give --set NAME=VALUE or --delete NAME", status=2)
    conn = connection_from(args)
    with admin(conn) as client:
        result = client.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t, dict(changes)) for t in args.topics],
            validate_only=args.dry_run, raise_on_unknown=False, incremental=True)
    rows = []
    for topic in args.topics:
        outcome = result.get("topic", {}).get(topic, "OK")
        error, message = None, None
        if outcome != "OK":
            error, message = _parse_error(outcome)
        rows.append({"topic": topic, "error": error, "message": message or None})
    return _report(rows, args, "alter the configs of")


def _parse_error(text: str) -> tuple[str, str | None]:
    """Kafka's error name and message from kafka-python's rendering of a per-resource error,
    '[Error 3] UnknownTopicOrPartitionError: The topic 'x' does not exist.'"""
    import re
    match = re.match(r"\[Error (-?\d+)\] \w+(?:: (.*))?$", text, re.S)
    if not match:
        return text, None
    return _error_name(int(match.group(1))), match.group(2)


def add_partitions(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        response = client.create_partitions({t: args.partitions for t in args.topics},
                                            timeout_ms=int(conn.timeout_s * 1000),
                                            raise_errors=False)
    rows = [{"topic": r.name, "error": _error_name(r.error_code),
             "message": r.error_message if r.error_code else None} for r in response.results]
    return _report(rows, args, "add partitions to")
