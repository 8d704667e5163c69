"""``kbroker group list|describe|lag|reset-offsets|delete`` on kafka-python's KafkaAdminClient
(ListGroups, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups).

KIP-848 consumer groups (type ``consumer``) are not classic groups: DescribeGroups answers
GROUP_ID_NOT_FOUND for them, and kafka-python has no ConsumerGroupDescribe, so their members
and assignments come from confluent-kafka's describe_consumer_groups (librdkafka sends
ConsumerGroupDescribe). Offsets and lag are the same for both kinds."""
from __future__ import annotations

import sys

from .connection import admin, connection_from
from .errors import CliError
from .output import emit_json, pairs, section, table

INACTIVE = ("Empty", "Dead")


def list_groups(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        groups = sorted(client.list_groups(), key=lambda g: g["group_id"])
    rows = [{"group": g["group_id"], "type": g.get("group_type") or None,
             "state": g.get("group_state") or None,
             "protocol_type": g.get("protocol_type") or None} for g in groups]
    if args.format == "json":
        for row in rows:
            emit_json(row)
    else:
        table(["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE"],
              [[r["group"], r["type"], r["state"], r["protocol_type"]] for r in rows])
    return 0


def _group_types(client) -> dict[str, tuple[str | None, str | None]]:
    """group id -> (type, state) from ListGroups."""
    return {g["group_id"]: (g.get("group_type") or None, g.get("group_state") or None)
            for g in client.list_groups()}


def _classic(client, group_ids: list[str]) -> dict[str, dict]:
    """Classic groups by DescribeGroups; a group that does not exist maps to None."""
    out = {}
    for gid, d in client.describe_groups(group_ids).items():
        if d.get("error"):
            if "GroupIdNotFound" in d["error"] or "[Error 69]" in d["error"]:
                out[gid] = None
                continue
            raise CliError(f"group {gid!r}: {d['error']}")
        members = []
        for m in d["members"]:
            assignment = m.get("member_assignment")
            tps = []
            if isinstance(assignment, dict):
                for t in assignment.get("assigned_partitions", []):
                    tps.extend((t["topic"], p) for p in t["partitions"])
            members.append({"member_id": m["member_id"],
                            "group_instance_id": m.get("group_instance_id"),
                            "client_id": m["client_id"], "host": m["client_host"],
                            "assignment": _tp_list(tps)})
        state = d["group_state"]
        if state == "Dead" and not members:
            out[gid] = None
            continue
        out[gid] = {"type": "classic", "state": state,
                    "protocol_type": d["protocol_type"] or None,
                    "protocol": d["protocol_data"] or None, "members": members}
    return out


def _consumer_protocol(conn, group_ids: list[str]) -> dict[str, dict]:
    """KIP-848 consumer groups through confluent-kafka (ConsumerGroupDescribe)."""
    try:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient
    except ImportError:
        raise CliError(f"group {group_ids[0]!r} is a KIP-848 consumer group; describing its "
                       "members needs confluent-kafka (pip install 'kbroker[cli]' or "
                       "pip install confluent-kafka)") from None
    import logging
    client = AdminClient(dict(conn.librdkafka(), logger=logging.getLogger("kafka.librdkafka")))
    out = {}
    futures = client.describe_consumer_groups(group_ids, request_timeout=conn.timeout_s)
    for gid, future in futures.items():
        try:
            d = future.result()
        except KafkaException as exc:
            raise CliError(f"group {gid!r}: {exc.args[0].str() if exc.args else exc}") \
                from None
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id, "host": m.host,
                    "assignment": _tp_list((tp.topic, tp.partition)
                                           for tp in m.assignment.topic_partitions)}
                   for m in d.members]
        out[gid] = {"type": "consumer", "state": _state_name(d.state),
                    "protocol_type": "consumer", "protocol": d.partition_assignor or None,
                    "members": members}
    return out


def _state_name(state) -> str:
    """confluent-kafka's ConsumerGroupState.STABLE as Kafka names it: Stable."""
    names = {"PREPARING_REBALANCE": "PreparingRebalance",
             "COMPLETING_REBALANCE": "CompletingRebalance"}
    name = getattr(state, "name", str(state))
    return names.get(name, name.capitalize())


def _tp_list(tps) -> list[dict]:
    return [{"topic": t, "partition": p} for t, p in sorted(tps)]


def _offsets(client, group_ids: list[str], members: dict[str, list]) -> dict[str, list[dict]]:
    """Per group: committed offset, log end offset and lag of every partition it has an
    offset for or a member is assigned, with the member that has it."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec
    committed = client.list_group_offsets({gid: None for gid in group_ids})
    owners: dict[str, dict] = {}
    wanted = set()
    for gid in group_ids:
        owners[gid] = {}
        for m in members.get(gid, []):
            for a in m["assignment"]:
                tp = TopicPartition(a["topic"], a["partition"])
                owners[gid][tp] = m
                wanted.add(tp)
        wanted.update(tp for tp, om in committed.get(gid, {}).items())
    ends = {}
    if wanted:
        known = _existing(client, {tp.topic for tp in wanted})
        ends = client.list_partition_offsets({tp: OffsetSpec.LATEST for tp in wanted
                                              if (tp.topic, tp.partition) in known})
    out = {}
    for gid in group_ids:
        rows = []
        tps = set(committed.get(gid, {})) | set(owners[gid])
        for tp in sorted(tps):
            om = committed.get(gid, {}).get(tp)
            offset = om.offset if om is not None and om.offset >= 0 else None
            end = ends[tp].offset if tp in ends else None
            member = owners[gid].get(tp)
            rows.append({"topic": tp.topic, "partition": tp.partition,
                         "committed_offset": offset, "log_end_offset": end,
                         "lag": None if offset is None or end is None else max(0, end - offset),
                         "member_id": member["member_id"] if member else None,
                         "client_id": member["client_id"] if member else None,
                         "host": member["host"] if member else None})
        out[gid] = rows
    return out


def _existing(client, topics: set[str]) -> set[tuple[str, int]]:
    """(topic, partition) pairs that exist now (a group may keep offsets of a deleted topic)."""
    found = set()
    for t in client.describe_topics(sorted(topics)):
        if not t["error_code"]:
            found.update((t["name"], p["partition_index"]) for p in t["partitions"])
    return found


def describe_groups(conn, client, group_ids: list[str]) -> dict[str, dict | None]:
    types = _group_types(client)
    for gid in group_ids:
        kind = types.get(gid, (None,))[0]
        if kind not in (None, "classic", "consumer"):
            raise CliError(f"group {gid!r} is a {kind} group; only classic and consumer groups "
                           "can be described yet (kbroker group list shows it)")
    classic = [g for g in group_ids if types.get(g, ("classic",))[0] != "consumer"]
    found: dict[str, dict | None] = {}
    if classic:
        found.update(_classic(client, classic))
    modern = [g for g in group_ids if g not in found]
    if modern:
        found.update(_consumer_protocol(conn, modern))
    # the coordinator's node id: kafka-python finds it (FindCoordinator) but does not say it
    coordinators = client._manager.run(client._find_coordinator_ids, list(group_ids))
    for gid, d in found.items():
        if d is not None:
            d["coordinator"] = coordinators.get(gid)
    return found


def _no_group(gid: str) -> CliError:
    return CliError(f"group {gid!r} does not exist (GROUP_ID_NOT_FOUND)")


def describe(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        found = describe_groups(conn, client, args.groups)
        for gid in args.groups:
            if found.get(gid) is None:
                raise _no_group(gid)
        offsets = _offsets(client, args.groups, {g: found[g]["members"] for g in args.groups})
    for i, gid in enumerate(args.groups):
        d = found[gid]
        rows = offsets[gid]
        lags = [r["lag"] for r in rows if r["lag"] is not None]
        out = {"group": gid, "type": d["type"], "state": d["state"],
               "protocol_type": d["protocol_type"], "protocol": d["protocol"],
               "coordinator": d["coordinator"], "members": d["members"], "offsets": rows,
               "total_lag": sum(lags) if lags else None}
        if args.format == "json":
            emit_json(out)
            continue
        if i:
            print()
        pairs([("GROUP", gid), ("TYPE", d["type"]), ("STATE", d["state"]),
               ("PROTOCOL", d["protocol"]), ("COORDINATOR", d["coordinator"]),
               ("MEMBERS", len(d["members"])), ("TOTAL-LAG", out["total_lag"])])
        if d["members"]:
            section("MEMBERS")
            table(["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"],
                  [[m["member_id"], m["group_instance_id"], m["client_id"], m["host"],
                    _assignment_text(m["assignment"])] for m in d["members"]])
        section("OFFSETS")
        _offsets_table(rows)
    return 0


def _assignment_text(assignment: list[dict]) -> str:
    by_topic: dict[str, list[int]] = {}
    for a in assignment:
        by_topic.setdefault(a["topic"], []).append(a["partition"])
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(by_topic.items())) or "-"


def _offsets_table(rows: list[dict], group: str | None = None) -> None:
    if not rows:
        print("(no committed offsets)")
        return
    headers = ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID",
               "HOST", "CLIENT-ID"]
    table((["GROUP"] if group else []) + headers,
          [([group] if group else []) + [r["topic"], r["partition"], r["committed_offset"],
                                         r["log_end_offset"], r["lag"], r["member_id"],
                                         r["host"], r["client_id"]] for r in rows])


def lag(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        group_ids = args.groups or sorted(  # share and streams groups are not described yet
            gid for gid, (kind, _) in _group_types(client).items()
            if kind in (None, "classic", "consumer"))
        found = describe_groups(conn, client, group_ids) if group_ids else {}
        for gid in args.groups:
            if found.get(gid) is None:
                raise _no_group(gid)
        group_ids = [g for g in group_ids if found.get(g) is not None]
        offsets = _offsets(client, group_ids, {g: found[g]["members"] for g in group_ids}) \
            if group_ids else {}
    rows = [dict(group=gid, **row) for gid in group_ids for row in offsets[gid]]
    if args.format == "json":
        for row in rows:
            emit_json(row)
        return 0
    table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"],
          [[r["group"], r["topic"], r["partition"], r["committed_offset"], r["log_end_offset"],
            r["lag"]] for r in rows])
    return 0


def _reset_partitions(client, args, committed: dict) -> list:
    """The partitions --topic and --all-topics name."""
    from kafka import TopicPartition
    if args.all_topics and args.topic:
        raise CliError("give --topic or --all-topics, not both", status=2)
    if args.all_topics:
        tps = sorted(committed)
        if not tps:
            raise CliError(f"group {args.group!r} has no committed offsets; name topics "
                           "with --topic")
        return tps
    if not args.topic:
        raise CliError("name the partitions to reset: --topic TOPIC[:P,P...] or --all-topics",
                       status=2)
    wanted = []
    for item in args.topic:
        topic, _, parts = item.partition(":")
        from .topics import describe_topic_metadata
        meta = describe_topic_metadata(client, [topic])[0]
        existing = sorted(p["partition_index"] for p in meta["partitions"])
        if parts:
            try:
                chosen = [int(p) for p in parts.split(",") if p.strip()]
            except ValueError:
                raise CliError(f"bad --topic {item!r}: TOPIC or TOPIC:0,1,2", status=2) \
                    from None
            missing = sorted(set(chosen) - set(existing))
            if missing:
                raise CliError(f"topic {topic!r} has no partition {missing[0]}")
        else:
            chosen = existing
        wanted.extend(TopicPartition(topic, p) for p in chosen)
    return sorted(set(wanted))


def reset_offsets(args) -> int:
    """Kafka's kafka-consumer-groups.sh --reset-offsets: the new offsets are computed from
    the partitions' earliest and latest offsets and clamped into that range; with --execute
    they are committed for the group, which must have no members."""
    from kafka.admin import OffsetSpec, OffsetTimestamp
    from kafka.structs import OffsetAndMetadata
    conn = connection_from(args)
    with admin(conn) as client:
        state = _group_types(client).get(args.group, (None, None))[1]
        if state is not None and state not in INACTIVE:
            raise CliError(f"Assignments can only be reset if the group '{args.group}' is "
                           f"inactive, but the current state is {state}.")
        committed = client.list_group_offsets({args.group: None}).get(args.group, {})
        tps = _reset_partitions(client, args, committed)
        earliest = client.list_partition_offsets({tp: OffsetSpec.EARLIEST for tp in tps})
        latest = client.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
        at_time = {}
        if args.to_datetime is not None:
            from .consume import parse_time
            when = parse_time(args.to_datetime)
            at_time = client.list_partition_offsets({tp: OffsetTimestamp(when) for tp in tps})
        plan = []
        for tp in tps:
            low, high = earliest[tp].offset, latest[tp].offset
            current = committed.get(tp)
            current = current.offset if current is not None and current.offset >= 0 else None
            if args.to_earliest:
                target = low
            elif args.to_latest:
                target = high
            elif args.to_offset is not None:
                target = args.to_offset
            elif args.to_datetime is not None:
                found = at_time[tp].offset
                target = high if found is None or found < 0 else found
            elif args.shift_by is not None:
                target = (current if current is not None else low) + args.shift_by
            else:  # --to-current
                target = current if current is not None else high
            plan.append({"group": args.group, "topic": tp.topic, "partition": tp.partition,
                         "current_offset": current, "new_offset": min(max(target, low), high)})
        if args.execute:
            result = client.alter_group_offsets(args.group, {
                tp: OffsetAndMetadata(row["new_offset"], "", -1)
                for tp, row in zip(tps, plan)})
            failed = [(tp, err) for tp, err in result.items() if err.errno]
            if failed:
                tp, err = failed[0]
                raise CliError(f"could not commit the offset of {tp.topic}-{tp.partition} for "
                               f"group {args.group!r}: {err.message}")
    if args.format == "json":
        for row in plan:
            emit_json(dict(row, executed=bool(args.execute)))
    else:
        table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
              [[r["group"], r["topic"], r["partition"], r["current_offset"], r["new_offset"]]
               for r in plan])
    if not args.execute:
        print("dry run: nothing was committed; add --execute to commit these offsets",
              file=sys.stderr)
    return 0


def delete(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        result = client.delete_groups(args.groups)
    rows = []
    for gid in args.groups:
        outcome = result.get(gid, "OK")
        error = None if outcome == "OK" else _kafka_name(outcome)
        rows.append({"group": gid, "error": error})
    if args.format == "json":
        for row in rows:
            emit_json(row)
    else:
        table(["GROUP", "STATUS"], [[r["group"], r["error"] or "OK"] for r in rows])
    failed = [r for r in rows if r["error"]]
    if failed:
        raise CliError(f"could not delete group {failed[0]['group']!r}: {failed[0]['error']}")
    return 0


def _kafka_name(class_name: str) -> str:
    """GROUP_ID_NOT_FOUND for kafka-python's GroupIdNotFoundError."""
    import kafka.errors as errors
    return getattr(getattr(errors, class_name, None), "message", class_name)
