"""``kbroker group list|describe|lag|reset-offsets|delete`` on kafka-python's KafkaAdminClient
(ListGroups, DescribeGroups, OffsetFetch, ListOffsets, OffsetCommit, DeleteGroups).

Each group type has its own describe API, chosen by the type ListGroups gives: classic groups
DescribeGroups; KIP-848 consumer groups ConsumerGroupDescribe, which kafka-python lacks, so
their members come from confluent-kafka's describe_consumer_groups; share groups (KIP-932)
ShareGroupDescribe and streams groups (KIP-1071) StreamsGroupDescribe, sent through kafka-python
with the classes of broker/cli/kafka_messages.py. Classic, consumer and streams groups commit
offsets, so their offsets and lag are OffsetFetch against the log end offsets; a share group
has no committed offsets but a start offset and lag per share-partition, from
DescribeShareGroupOffsets."""
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


def _send_to_coordinators(client, coordinators: dict[str, int], group_ids: list[str],
                          request_for) -> list:
    """One request per coordinator for the groups it coordinates, ``request_for(ids)`` making
    it; the responses in turn."""
    by_node: dict[int, list[str]] = {}
    for gid in group_ids:
        by_node.setdefault(coordinators[gid], []).append(gid)

    async def send_all():
        return [await client._manager.send(request_for(ids), node_id=node)
                for node, ids in by_node.items()]
    return client._manager.run(send_all)


def _group_error(gid: str, code: int, message: str | None) -> None:
    """A group's error in a share or streams group API: GROUP_ID_NOT_FOUND (no group of this
    type) is no group, None; any other is raised."""
    import kafka.errors as errors
    if code == errors.GroupIdNotFoundError.errno:
        return None
    error = errors.for_code(code)
    raise CliError(f"group {gid!r}: {error.message}" + (f" ({message})" if message else ""))


def _share(client, coordinators: dict[str, int], group_ids: list[str]) -> dict[str, dict]:
    """Share groups by ShareGroupDescribe."""
    from .kafka_messages import ShareGroupDescribeRequest
    out = {}
    for response in _send_to_coordinators(
            client, coordinators, group_ids,
            lambda ids: ShareGroupDescribeRequest(group_ids=ids,
                                                  include_authorized_operations=False)):
        for g in response.groups:
            if g.error_code:
                out[g.group_id] = _group_error(g.group_id, g.error_code, g.error_message)
                continue
            members = [{"member_id": m.member_id, "client_id": m.client_id,
                        "host": m.client_host, "member_epoch": m.member_epoch,
                        "assignment": _tp_list((t.topic_name, p)
                                               for t in m.assignment.topic_partitions
                                               for p in t.partitions)}
                       for m in sorted(g.members, key=lambda m: m.member_id)]
            out[g.group_id] = {"type": "share", "state": g.group_state, "protocol_type": "share",
                               "protocol": g.assignor_name or None,
                               "group_epoch": g.group_epoch,
                               "assignment_epoch": g.assignment_epoch, "members": members}
    return out


def _streams(client, coordinators: dict[str, int], group_ids: list[str]) -> dict[str, dict]:
    """Streams groups by StreamsGroupDescribe. A member's ``assignment`` is the partitions of
    its active tasks' source and repartition source topics (a task is a subtopology's
    partition number), the partitions whose offsets it commits."""
    from .kafka_messages import StreamsGroupDescribeRequest
    out = {}
    for response in _send_to_coordinators(
            client, coordinators, group_ids,
            lambda ids: StreamsGroupDescribeRequest(group_ids=ids,
                                                    include_authorized_operations=False)):
        for g in response.groups:
            if g.error_code:
                out[g.group_id] = _group_error(g.group_id, g.error_code, g.error_message)
                continue
            subtopologies = [{"subtopology": s.subtopology_id,
                              "source_topics": sorted(s.source_topics),
                              "repartition_source_topics": sorted(
                                  t.name for t in s.repartition_source_topics)}
                             for s in (g.topology.subtopologies or [])] if g.topology else []
            sources = {s["subtopology"]: s["source_topics"] + s["repartition_source_topics"]
                       for s in subtopologies}
            members = []
            for m in sorted(g.members, key=lambda m: m.member_id):
                tasks = {kind: _tasks(getattr(m.assignment, kind))
                         for kind in ("active_tasks", "standby_tasks", "warmup_tasks")}
                members.append({
                    "member_id": m.member_id, "group_instance_id": m.instance_id,
                    "client_id": m.client_id, "host": m.client_host,
                    "process_id": m.process_id, "member_epoch": m.member_epoch, **tasks,
                    "assignment": _tp_list({(topic, p) for t in tasks["active_tasks"]
                                            for topic in sources.get(t["subtopology"], ())
                                            for p in t["partitions"]})})
            out[g.group_id] = {"type": "streams", "state": g.group_state,
                               "protocol_type": "streams", "protocol": None,
                               "group_epoch": g.group_epoch,
                               "assignment_epoch": g.assignment_epoch,
                               "topology_epoch": g.topology.epoch if g.topology else None,
                               "subtopologies": subtopologies, "members": members}
    return out


def _tasks(task_ids) -> list[dict]:
    return sorted(({"subtopology": t.subtopology_id, "partitions": sorted(t.partitions)}
                   for t in task_ids), key=lambda t: t["subtopology"])


def describe_groups(conn, client, group_ids: list[str]) -> dict[str, dict | None]:
    """Each group by the describe API of its type; a group that does not exist maps to None."""
    types = _group_types(client)
    kinds: dict[str, list[str]] = {}
    for gid in group_ids:
        kinds.setdefault(types.get(gid, (None,))[0] or "classic", []).append(gid)
    # the coordinator's node id: kafka-python finds it (FindCoordinator) but does not say it
    coordinators = client._manager.run(client._find_coordinator_ids, list(group_ids))
    found: dict[str, dict | None] = {}
    for kind, ids in kinds.items():
        if kind == "classic":
            found.update(_classic(client, ids))
        elif kind == "consumer":
            found.update(_consumer_protocol(conn, ids))
        elif kind == "share":
            found.update(_share(client, coordinators, ids))
        elif kind == "streams":
            found.update(_streams(client, coordinators, ids))
        else:
            raise CliError(f"group {ids[0]!r} is a {kind} group, a type kbroker's group "
                           "commands do not know")
    for gid, d in found.items():
        if d is not None:
            d["coordinator"] = coordinators.get(gid)
    return found


def _share_offsets(client, coordinators: dict[str, int],
                   group_ids: list[str]) -> dict[str, list[dict]]:
    """Per share group: the start offset and lag of every share-partition it has state for
    (DescribeShareGroupOffsets of all its topics); ``None`` where the partition has no start
    offset yet or answered an error, as kafka-share-groups.sh prints ``-``."""
    from .kafka_messages import DescribeShareGroupOffsetsRequest as Request
    out: dict[str, list[dict]] = {gid: [] for gid in group_ids}
    for response in _send_to_coordinators(
            client, coordinators, group_ids,
            lambda ids: Request(groups=[Request.DescribeShareGroupOffsetsRequestGroup(
                group_id=gid, topics=None) for gid in ids])):
        for g in response.groups:
            if g.error_code:
                _group_error(g.group_id, g.error_code, g.error_message)
                continue
            rows = [{"topic": t.topic_name, "partition": p.partition_index,
                     "start_offset": p.start_offset if not p.error_code and p.start_offset >= 0
                     else None,
                     "lag": p.lag if not p.error_code and p.lag >= 0 else None}
                    for t in g.topics for p in t.partitions]
            out[g.group_id] = sorted(rows, key=lambda r: (r["topic"], r["partition"]))
    return out


def group_offsets(client, found: dict[str, dict]) -> dict[str, list[dict]]:
    """The offset rows of each described group: committed offsets and lag, or a share group's
    start offsets and lag."""
    share = [g for g, d in found.items() if d["type"] == "share"]
    others = [g for g in found if g not in share]
    out = _offsets(client, others, {g: found[g]["members"] for g in others}) if others else {}
    if share:
        out.update(_share_offsets(client, {g: found[g]["coordinator"] for g in share}, share))
    return out


def _no_group(gid: str) -> CliError:
    return CliError(f"group {gid!r} does not exist (GROUP_ID_NOT_FOUND)")


def describe(args) -> int:
    conn = connection_from(args)
    with admin(conn) as client:
        found = describe_groups(conn, client, args.groups)
        for gid in args.groups:
            if found.get(gid) is None:
                raise _no_group(gid)
        offsets = group_offsets(client, {g: found[g] for g in args.groups})
    for i, gid in enumerate(args.groups):
        d = found[gid]
        rows = offsets[gid]
        lags = [r["lag"] for r in rows if r["lag"] is not None]
        head = {k: d[k] for k in ("type", "state", "protocol_type", "protocol", "coordinator")}
        out = {"group": gid, **head, **{k: v for k, v in d.items() if k not in head},
               "offsets": rows, "total_lag": sum(lags) if lags else None}
        if args.format == "json":
            emit_json(out)
            continue
        if i:
            print()
        _print_description(out)
    return 0


def _print_description(d: dict) -> None:
    epochs = [("GROUP-EPOCH", d["group_epoch"]), ("ASSIGNMENT-EPOCH", d["assignment_epoch"])] \
        if "group_epoch" in d else []
    if d["type"] == "streams":
        epochs.append(("TOPOLOGY-EPOCH", d["topology_epoch"]))
    pairs([("GROUP", d["group"]), ("TYPE", d["type"]), ("STATE", d["state"]),
           ("PROTOCOL", d["protocol"]), ("COORDINATOR", d["coordinator"]), *epochs,
           ("MEMBERS", len(d["members"])), ("TOTAL-LAG", d["total_lag"])])
    members = d["members"]
    if d["type"] == "streams":
        if d["subtopologies"]:
            section("SUBTOPOLOGIES")
            table(["SUBTOPOLOGY", "SOURCE-TOPICS", "REPARTITION-SOURCE-TOPICS"],
                  [[s["subtopology"], ",".join(s["source_topics"]) or "-",
                    ",".join(s["repartition_source_topics"]) or "-"]
                   for s in d["subtopologies"]])
        if members:
            section("MEMBERS")
            table(["MEMBER-ID", "INSTANCE-ID", "PROCESS-ID", "CLIENT-ID", "HOST", "ACTIVE-TASKS",
                   "STANDBY-TASKS", "WARMUP-TASKS"],
                  [[m["member_id"], m["group_instance_id"], m["process_id"], m["client_id"],
                    m["host"], _tasks_text(m["active_tasks"]), _tasks_text(m["standby_tasks"]),
                    _tasks_text(m["warmup_tasks"])] for m in members])
    elif members:
        section("MEMBERS")
        if d["type"] == "share":
            table(["MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"],
                  [[m["member_id"], m["client_id"], m["host"], _assignment_text(m["assignment"])]
                   for m in members])
        else:
            table(["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"],
                  [[m["member_id"], m["group_instance_id"], m["client_id"], m["host"],
                    _assignment_text(m["assignment"])] for m in members])
    section("OFFSETS")
    if d["type"] == "share":
        _share_offsets_table(d["offsets"])
    else:
        _offsets_table(d["offsets"])


def _tasks_text(tasks: list[dict]) -> str:
    """``0:0,1 1:2`` for subtopology 0's partitions 0 and 1 and subtopology 1's partition 2."""
    return " ".join(f"{t['subtopology']}:{','.join(map(str, t['partitions']))}"
                    for t in tasks) or "-"


def _share_offsets_table(rows: list[dict]) -> None:
    """kafka-share-groups.sh --describe's columns."""
    if not rows:
        print("(no share-partition offsets)")
        return
    table(["TOPIC", "PARTITION", "START-OFFSET", "LAG"],
          [[r["topic"], r["partition"], r["start_offset"], r["lag"]] for r in rows])


def _assignment_text(assignment: list[dict]) -> str:
    by_topic: dict[str, list[int]] = {}
    for a in assignment:
        by_topic.setdefault(a["topic"], []).append(a["partition"])
    return " ".join(f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(by_topic.items())) or "-"


def _offsets_table(rows: list[dict]) -> None:
    if not rows:
        print("(no committed offsets)")
        return
    table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID", "HOST",
           "CLIENT-ID"],
          [[r["topic"], r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"],
            r["member_id"], r["host"], r["client_id"]] for r in rows])


def lag(args) -> int:
    """Every partition's lag of the groups named, or of every group: committed offsets against
    log end offsets, and for share groups the start offset and lag of each share-partition."""
    conn = connection_from(args)
    with admin(conn) as client:
        group_ids = args.groups or sorted(_group_types(client))
        found = describe_groups(conn, client, group_ids) if group_ids else {}
        for gid in args.groups:
            if found.get(gid) is None:
                raise _no_group(gid)
        group_ids = [g for g in group_ids if found.get(g) is not None]
        offsets = group_offsets(client, {g: found[g] for g in group_ids}) if group_ids else {}
    rows = [dict(group=gid, type=found[gid]["type"], **row)
            for gid in group_ids for row in offsets[gid]]
    if args.format == "json":
        for row in rows:
            emit_json(row)
        return 0
    shared = [r for r in rows if r["type"] == "share"]
    committed = [r for r in rows if r["type"] != "share"]
    if committed or not shared:
        table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"],
              [[r["group"], r["topic"], r["partition"], r["committed_offset"],
                r["log_end_offset"], r["lag"]] for r in committed])
    if shared:
        if committed:
            print()
        table(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
              [[r["group"], r["topic"], r["partition"], r["start_offset"], r["lag"]]
               for r in shared])
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
    they are committed for the group, which must have no members. A share group's start
    offsets take the place of committed offsets, as in kafka-share-groups.sh --reset-offsets
    (DescribeShareGroupOffsets, AlterShareGroupOffsets)."""
    from kafka.admin import OffsetSpec, OffsetTimestamp
    from kafka.structs import OffsetAndMetadata
    conn = connection_from(args)
    with admin(conn) as client:
        kind, state = _group_types(client).get(args.group, (None, None))
        if state is not None and state not in INACTIVE:
            raise CliError(f"Assignments can only be reset if the group '{args.group}' is "
                           f"inactive, but the current state is {state}.")
        if kind == "share":
            committed = _share_start_offsets(client, args.group)
        else:
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
        if args.execute and kind == "share":
            _alter_share_offsets(client, args.group, plan)
        elif args.execute:
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


def _share_start_offsets(client, group: str) -> dict:
    """A share group's start offsets in the shape of kafka-python's committed offsets."""
    from kafka import TopicPartition
    from kafka.structs import OffsetAndMetadata
    coordinators = client._manager.run(client._find_coordinator_ids, [group])
    rows = _share_offsets(client, coordinators, [group])[group]
    return {TopicPartition(r["topic"], r["partition"]): OffsetAndMetadata(r["start_offset"], "", -1)
            for r in rows if r["start_offset"] is not None}


def _alter_share_offsets(client, group: str, plan: list[dict]) -> None:
    """AlterShareGroupOffsets of the planned start offsets, at the group's coordinator."""
    import kafka.errors as errors

    from .kafka_messages import AlterShareGroupOffsetsRequest as Request
    Topic = Request.AlterShareGroupOffsetsRequestTopic
    Partition = Topic.AlterShareGroupOffsetsRequestPartition
    by_topic: dict[str, list] = {}
    for row in plan:
        by_topic.setdefault(row["topic"], []).append(
            Partition(partition_index=row["partition"], start_offset=row["new_offset"]))
    coordinators = client._manager.run(client._find_coordinator_ids, [group])
    (response,) = _send_to_coordinators(client, coordinators, [group], lambda ids: Request(
        group_id=group, topics=[Topic(topic_name=t, partitions=ps)
                                for t, ps in sorted(by_topic.items())]))
    if response.error_code:
        raise CliError(f"could not reset the start offsets of share group {group!r}: "
                       f"{errors.for_code(response.error_code).message}"
                       + (f" ({response.error_message})" if response.error_message else ""))
    for t in response.responses:
        for p in t.partitions:
            if p.error_code:
                raise CliError(f"could not reset the start offset of {t.topic_name}-"
                               f"{p.partition_index} for share group {group!r}: "
                               f"{errors.for_code(p.error_code).message}")


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
