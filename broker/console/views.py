"""What the console's JSON endpoints answer: read-only views of the broker's own state (topics
and their logs, groups and their offsets, settings, traffic, connections), computed on the event
loop so each answer is consistent. Lists page and filter here, on the broker, so that a browser
never receives thousands of topics or groups at once.
"""
from __future__ import annotations

import json
import struct
import time
from collections import OrderedDict, deque

from protocol import messages as m
from protocol.errors import ErrorCode
from protocol.records import CorruptRecordError, iter_batches

from ..config import SECRET_SETTINGS, SETTINGS, kafka_default
from ..topic_configs import TOPIC_CONFIGS
from ..log.base import OffsetOutOfRange
from ..topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC

#: most items one page of a list holds
MAX_PAGE = 500
DEFAULT_PAGE = 50
#: most records the message browser returns at once
MAX_MESSAGES = 500
#: most record bytes the message browser reads from a log for one answer (whole batches, so a
#: larger first batch is still read: Kafka's min-one-message rule)
MAX_SCAN_BYTES = 8 << 20
#: most bytes of a key, value or header value shown; longer ones are cut and say so
MAX_SHOWN_BYTES = 64 << 10
#: most bytes of keys, values and headers one message-browser answer shows in all; past it,
#: each is cut to SHOWN_WHEN_SPENT bytes
MAX_SHOWN_TOTAL = 4 << 20
SHOWN_WHEN_SPENT = 256
#: the largest a compressed batch may expand to while the console reads it
MAX_DECOMPRESSED = 64 << 20
#: lag samples kept per group, groups sampled at once (least recently looked at goes first),
#: and the least time between two samples of a group
LAG_SAMPLES = 300
LAG_GROUPS = 1000
LAG_SAMPLE_MS = 1000
#: request-count snapshots kept for rates, and the least time between two
RATE_SNAPSHOTS = 60
RATE_SNAPSHOT_MS = 1000

_CONTROL_KEY = struct.Struct(">hh")
_INT16 = struct.Struct(">h")


class BadRequest(ValueError):
    """A console request with a bad parameter: answered 400 with the message."""


class NotFound(LookupError):
    """A topic or group that does not exist: answered 404."""


class Unauthorized(PermissionError):
    """The caller's ACLs do not allow the view: answered 403 with Kafka's error code."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        self.code = code
        super().__init__(message)


TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def require(allowed: bool, code: ErrorCode, name: str) -> None:
    """Raise Unauthorized (Kafka's message for the code) unless ``allowed``."""
    if not allowed:
        what = {TOPIC_DENIED: "topic", GROUP_DENIED: "group"}.get(code, "cluster")
        raise Unauthorized(code, f"Not authorized to access {what}: {name}")


def _everything(_name: str) -> bool:
    return True


class Loading(RuntimeError):
    """The group's coordinator shard is still replaying its partition of __consumer_offsets:
    answered 503, as the Kafka APIs answer COORDINATOR_LOAD_IN_PROGRESS."""


# ------------------------------------------------------------------ parameters

def int_param(query: dict, name: str, default: int | None = None, low: int | None = None,
              high: int | None = None) -> int | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {raw!r}") from None
    if low is not None and value < low:
        raise BadRequest(f"{name} must be at least {low}, got {value}")
    if high is not None and value > high:
        raise BadRequest(f"{name} must be at most {high}, got {value}")
    return value


def page(items: list, query: dict) -> dict:
    """One page of ``items`` by ``offset`` and ``limit`` (at most MAX_PAGE)."""
    offset = int_param(query, "offset", 0, 0)
    limit = int_param(query, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    return {"total": len(items), "offset": offset, "limit": limit,
            "items": items[offset:offset + limit]}


def _matches(name: str, text: str) -> bool:
    return not text or text.lower() in name.lower()


# ------------------------------------------------------------------ rendering bytes

def render(data, budget: list | None = None) -> dict | None:
    """A key, value or header value as a person reads it: JSON when it is a JSON object or
    array, UTF-8 text when it decodes to printable text, hex otherwise; None for a null. At
    most MAX_SHOWN_BYTES are shown, and what is shown is taken from ``budget`` ([bytes left]
    for the whole answer; once spent, SHOWN_WHEN_SPENT bytes each)."""
    if data is None:
        return None
    raw = bytes(data)
    most = MAX_SHOWN_BYTES
    if budget is not None:
        most = max(min(most, budget[0]), SHOWN_WHEN_SPENT)
    cut = len(raw) > most
    shown = raw[:most]
    if budget is not None:
        budget[0] -= len(shown)
    out: dict = {"size": len(raw)}
    if cut:
        out["truncated"] = True
    text = _utf8(shown, cut)
    if text is not None and all(c.isprintable() or c in "\r\n\t" for c in text):
        if not cut and text.lstrip()[:1] in ("{", "["):
            try:
                out["json"] = json.loads(text)
                out["encoding"] = "json"
                return out
            except (ValueError, RecursionError):
                pass
        out["encoding"] = "utf8"
        out["text"] = text
        return out
    out["encoding"] = "hex"
    out["text"] = shown.hex()
    return out


def _utf8(data: bytes, cut: bool) -> str | None:
    """The text of ``data``, or None; a cut value may end inside a character."""
    for trim in range(4 if cut else 1):
        try:
            return data[:len(data) - trim].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return None


# ------------------------------------------------------------------ topics

def topic_list(broker, query: dict, shown=_everything) -> dict:
    """The topics ``shown(name)`` allows (those the caller may DESCRIBE), as Metadata lists."""
    text = query.get("filter", "")
    internal = query.get("internal", "false") == "true"
    items = []
    for name in sorted(broker.topics.topics):
        topic = broker.topics.topics[name]
        if topic.internal and not internal or not _matches(name, text) or not shown(name):
            continue
        items.append(name)
    result = page(items, query)
    result["items"] = [_topic_summary(broker.topics.topics[n]) for n in result["items"]]
    return result


def _topic_summary(topic) -> dict:
    size = records = 0
    for partition in topic.partitions:
        plog = partition.log
        size += plog.size_bytes
        records += plog.log_end_offset - plog.log_start_offset
    return {"name": topic.name, "topic_id": str(topic.topic_id), "internal": topic.internal,
            "partitions": len(topic.partitions), "size_bytes": size, "offsets": records}


def topic_detail(broker, name: str) -> dict:
    topic = broker.topics.get(name)
    if topic is None:
        raise NotFound(f"Topic '{name}' does not exist.")
    partitions = []
    for partition in topic.partitions:
        plog = partition.log
        partitions.append({"partition": partition.index, "start_offset": plog.log_start_offset,
                           "end_offset": plog.log_end_offset,
                           "last_stable_offset": plog.last_stable_offset,
                           "size_bytes": plog.size_bytes, "leader": partition.leader,
                           "leader_epoch": partition.leader_epoch,
                           "replicas": partition.replicas, "isr": partition.isr})
    configs = []
    defaults = broker.topics.broker_defaults
    for config_name in sorted(TOPIC_CONFIGS):
        value = topic.configs.get(config_name)
        configs.append({"name": config_name,
                        "value": defaults.value(config_name) if value is None else value,
                        "is_default": value is None})
    summary = _topic_summary(topic)
    summary.update(partition_count=summary["partitions"], partitions=partitions,
                   configs=configs)
    return summary


# ------------------------------------------------------------------ messages

def messages(broker, name: str, query: dict) -> dict:
    """Records of a partition (``partition``) or of every partition of the topic, starting
    ``from`` an ``offset`` (the default, from the log start), a ``timestamp`` or the ``end``
    (the last ``limit`` records), with control batches and aborted records marked."""
    topic = broker.topics.get(name)
    if topic is None:
        raise NotFound(f"Topic '{name}' does not exist.")
    limit = int_param(query, "limit", DEFAULT_PAGE, 1, MAX_MESSAGES)
    where = query.get("from", "offset")
    if where not in ("offset", "timestamp", "end", "beginning"):
        raise BadRequest("from must be offset, timestamp, end or beginning")
    partition = int_param(query, "partition", None, 0)
    if partition is not None and partition >= len(topic.partitions):
        raise NotFound(f"Topic '{name}' has no partition {partition}.")
    offset = int_param(query, "offset", None, 0) if where == "offset" else None
    timestamp = int_param(query, "timestamp", None) if where == "timestamp" else None
    if where == "timestamp" and timestamp is None:
        raise BadRequest("from=timestamp needs timestamp (ms since the epoch)")
    chosen = [topic.partitions[partition]] if partition is not None else topic.partitions
    out = []
    budget = [MAX_SCAN_BYTES]
    shown = [MAX_SHOWN_TOTAL]
    for p in chosen:
        plog = p.log
        start, end = plog.log_start_offset, plog.log_end_offset
        if where == "end":
            first = max(start, end - limit)
        elif where == "timestamp":
            found = plog.offset_for_timestamp(timestamp)
            first = end if found is None else found[0]
        elif where == "offset" and offset is not None:
            first = min(max(offset, start), end)
        else:
            first = start
        out.extend(_read(p, first, limit, budget, shown))
    if len(chosen) > 1:
        key = (lambda r: (r["timestamp"], r["partition"], r["offset"])) if where != "end" \
            else (lambda r: (-r["timestamp"], r["partition"], -r["offset"]))
        out.sort(key=key)
        out = out[:limit]
        if where == "end":
            out.reverse()
    return {"topic": name, "partition": partition, "from": where, "limit": limit,
            "messages": out, "truncated_scan": budget[0] <= 0}


def _read(partition, first: int, limit: int, budget: list, shown: list) -> list:
    plog = partition.log
    end = plog.log_end_offset
    aborted = list(plog.txn_index)
    # each producer's ongoing transaction starts at this offset (ProducerStateTable.ongoing)
    open_from = {pid: began for began, pid in partition.producers.ongoing.items()}
    out: list = []
    offset = first
    while offset < end and len(out) < limit and budget[0] > 0:
        try:
            data = plog.read(offset, min(budget[0], 1 << 20), min_one_message=True)
        except OffsetOutOfRange:
            break
        if not data:
            break
        budget[0] -= len(data)
        last = offset
        try:
            for batch in iter_batches(data):
                last = batch.next_offset
                if batch.last_offset < offset:
                    continue
                out.extend(_batch_records(partition.index, batch, offset, limit - len(out),
                                          aborted, open_from, shown))
                if len(out) >= limit:
                    break
        except CorruptRecordError as exc:
            out.append({"partition": partition.index, "offset": last, "error": str(exc),
                        "timestamp": -1})
            break
        if last <= offset:
            break
        offset = last
    return out


def _batch_records(index: int, batch, first: int, room: int, aborted: list,
                   open_from: dict, shown: list) -> list:
    """The batch's records from offset ``first``; a transactional batch's records say whether
    their transaction is open, aborted (the partition's aborted-transaction index names it) or
    committed."""
    out = []
    state = None
    if batch.is_transactional and not batch.is_control:
        started = open_from.get(batch.producer_id)
        if started is not None and batch.base_offset >= started:
            state = "open"
        else:
            pid = batch.producer_id
            for txn in aborted:
                if txn.producer_id == pid and txn.first_offset <= batch.base_offset \
                        <= txn.last_offset:
                    state = "aborted"
                    break
            else:
                state = "committed"
    for record in batch.records(MAX_DECOMPRESSED):
        if record.offset < first:
            continue
        entry = {"partition": index, "offset": record.offset, "timestamp": record.timestamp,
                 "timestamp_type": "LogAppendTime" if batch.timestamp_type else "CreateTime",
                 "key": render(record.key, shown), "value": render(record.value, shown),
                 "headers": [{"key": k, "value": render(v, shown)} for k, v in record.headers]}
        if batch.producer_id >= 0:
            entry["producer_id"] = batch.producer_id
        if batch.is_control:
            entry["control"] = _control_type(record.key)
        elif state is not None:
            entry["transaction"] = state
        out.append(entry)
        if len(out) >= room:
            break
    return out


def _control_type(key) -> str:
    if key is None or len(key) < 4:
        return "UNKNOWN"
    _version, kind = _CONTROL_KEY.unpack_from(key)
    return {0: "ABORT", 1: "COMMIT"}.get(kind, f"TYPE_{kind}")


# ------------------------------------------------------------------ groups

def _groups(broker):
    for shard in broker.coordinator.shards:
        yield from shard.groups.values()


def live_groups(broker):
    """The groups a list shows (not Dead)."""
    return (g for g in _groups(broker) if g.state.value != "Dead")


def _ends(broker, shown=_everything) -> dict:
    """Log end offsets of the partitions of the topics ``shown`` allows: a group's offsets of
    any other topic are left out, as OffsetFetch leaves out topics the caller may not
    DESCRIBE."""
    ends = {}
    for name, topic in broker.topics.topics.items():
        if not shown(name):
            continue
        for p in topic.partitions:
            ends[(name, p.index)] = p.log.log_end_offset
    return ends


def _lag(group, ends: dict) -> int:
    total = 0
    for tp, om in group.offsets.items():
        end = ends.get(tp)
        if end is not None and end > om.offset:
            total += end - om.offset
    return total


def group_list(broker, query: dict, lag_history: "LagHistory", shown=_everything,
               topics=_everything) -> dict:
    """Groups of the loaded coordinator shards; ``loading`` counts the shards not loaded yet
    (their groups are missing from the list until they are)."""
    text = query.get("filter", "")
    state = query.get("state", "").lower()
    kind = query.get("type", "").lower()
    chosen = []
    for group in _groups(broker):
        if group.state.value == "Dead" or not _matches(group.group_id, text) or \
                not shown(group.group_id):
            continue
        group_type = getattr(group, "group_type", "classic")
        if kind and kind != group_type or state and group.state.value.lower() != state:
            continue
        chosen.append(group)
    chosen.sort(key=lambda g: g.group_id)
    result = page(chosen, query)
    result["loading"] = len(broker.coordinator.shards_loading)
    ends = _ends(broker, topics) if result["items"] else {}
    now = broker.clock()
    result["items"] = [_group_summary(g, ends, now, lag_history) for g in result["items"]]
    return result


def _group_summary(group, ends: dict, now: int, lag_history: "LagHistory") -> dict:
    group_type = getattr(group, "group_type", "classic")
    lag = _lag(group, ends)
    lag_history.sample(group.group_id, now, lag)
    return {"group_id": group.group_id, "type": group_type,
            "state": group.state.value, "protocol_type": group.protocol_type or "",
            "members": len(group.members),
            "generation": group.generation_id if group_type == "classic" else group.group_epoch,
            "lag": lag}


def group_detail(broker, group_id: str, lag_history: "LagHistory",
                 topics=_everything) -> dict:
    shard = broker.coordinator.shard_for(group_id)
    if shard.loading:
        raise Loading(f"the coordinator of group {group_id} is loading (partition "
                      f"{shard.partition} of __consumer_offsets)")
    group = shard.groups.get(group_id)
    if group is None or group.state.value == "Dead":
        raise NotFound(f"Group {group_id} not found.")
    now = broker.clock()
    ends = _ends(broker, topics)
    group_type = getattr(group, "group_type", "classic")
    consumer = group_type != "classic"   # consumer (KIP-848) and share (KIP-932) members
    if group_type == "streams":
        members = [_streams_member(mm) for mm in group.members.values()]
    else:
        members = [_consumer_member(broker, mm) if consumer else _classic_member(group, mm)
                   for mm in group.members.values()]
    owners = {}
    for member in members:
        for topic, partitions in member["assignment"].items():
            for p in partitions:
                owners[(topic, p)] = member["member_id"]
    offsets = []
    seen = set()
    for (topic, partition), om in sorted(group.offsets.items()):
        seen.add((topic, partition))
        if not topics(topic):
            continue
        end = ends.get((topic, partition))
        offsets.append({"topic": topic, "partition": partition, "committed": om.offset,
                        "end_offset": end, "lag": None if end is None else max(end - om.offset, 0),
                        "metadata": om.metadata, "member_id": owners.get((topic, partition)),
                        "commit_timestamp": om.commit_timestamp})
    for (topic, partition), member_id in sorted(owners.items()):
        if (topic, partition) not in seen and topics(topic):
            offsets.append({"topic": topic, "partition": partition, "committed": None,
                            "end_offset": ends.get((topic, partition)), "lag": None,
                            "metadata": None, "member_id": member_id, "commit_timestamp": None})
    lag = _lag(group, ends)
    lag_history.sample(group_id, now, lag)
    out = {"group_id": group_id, "type": group_type,
           "state": group.state.value, "protocol_type": group.protocol_type or "",
           "members": members, "offsets": offsets, "lag": lag,
           "lag_history": lag_history.of(group_id),
           "rebalances": broker.coordinator.stats.history.of(group_id, now),
           "coordinator_partition": shard.partition}
    if group_type == "share":
        out.update(group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                   assignor="simple", share_partitions=share_partitions(broker, group_id, now))
    elif group_type == "streams":
        out.update(group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                   assignor="sticky", topology=_streams_topology(group))
    elif consumer:
        out.update(group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                   assignor=_consumer_assignor(broker, group))
    else:
        out.update(generation=group.generation_id, protocol=group.protocol_name,
                   leader=group.leader_id)
    return out


#: in-flight records listed per share partition (the counts cover all of them)
SHARE_RECORDS_SHOWN = 200


def share_partitions(broker, group_id: str, now: int) -> list[dict]:
    """What a share group did with each record of its share partitions (KIP-932): the start
    offset, the in-flight records by state, and each in-flight record's state, delivery count,
    owner and lock expiry, archived ones included, so a user sees why a record stopped coming."""
    out = []
    for (topic_id, index), sp in sorted(broker.shares.partitions_of(group_id).items(),
                                        key=lambda kv: (str(kv[0][0]), kv[0][1])):
        topic = broker.topics.by_id.get(topic_id)
        counts = {"available": 0, "acquired": 0, "acknowledged": 0, "archived": 0}
        records = []
        for offset, state, delivered, member, deadline in sp.in_flight():
            counts[state.name.lower()] += 1
            if len(records) < SHARE_RECORDS_SHOWN:
                records.append({"offset": offset, "state": state.name.lower(),
                                "delivery_count": delivered, "member_id": member,
                                "lock_expires_in_ms": max(0, deadline - now)
                                if member is not None else None})
        out.append({"topic": topic.name if topic is not None else str(topic_id),
                    "partition": index, "start_offset": sp.start_offset,
                    "end_offset": sp.next_offset, "counts": counts, "records": records,
                    "delivery_count_limit": sp.delivery_count_limit,
                    "lock_duration_ms": sp.lock_duration_ms,
                    "archived": [{"offset": o, "delivery_count": n, "reason": why}
                                 for o, n, why in reversed(sp.archived)]})
    return out


def _consumer_assignor(broker, group) -> str:
    for member in group.members.values():
        if member.server_assignor:
            return member.server_assignor
    return broker.coordinator.config.group_consumer_assignors[0]


def decode_assignment(data: bytes) -> dict:
    """A classic consumer's assignment (ConsumerProtocolAssignment) -> {topic: [partitions]};
    {} for an empty or a non-consumer one."""
    if not data:
        return {}
    try:
        version = min(_INT16.unpack_from(data)[0], 3)
        value = m.ConsumerProtocolAssignment.decode(data, version, 2, exact=False)
    except Exception:  # noqa: BLE001 - another protocol's assignment (e.g. Connect)
        return {}
    out: dict = {}
    for tp in value.assigned_partitions:
        out.setdefault(tp.topic, []).extend(tp.partitions)
    return {t: sorted(ps) for t, ps in out.items()}


def _classic_member(group, member) -> dict:
    assignment = decode_assignment(member.assignment) \
        if group.protocol_type == "consumer" else {}
    return {"member_id": member.member_id, "client_id": member.client_id,
            "client_host": member.client_host, "instance_id": member.group_instance_id,
            "assignment": assignment, "leader": group.leader_id == member.member_id,
            "session_timeout_ms": member.session_timeout_ms,
            "rebalance_timeout_ms": member.rebalance_timeout_ms}


def _streams_member(member) -> dict:
    """A streams-group member (KIP-1071) with its active, standby and warm-up tasks
    ("subtopology_partition"); ``assignment`` lists no topic partitions: tasks are not owned
    by topic."""
    return {"member_id": member.member_id, "client_id": member.client_id,
            "client_host": member.client_host, "process_id": member.process_id,
            "member_epoch": member.member_epoch, "state": member.state.name,
            "assignment": {},
            "tasks": {kind: sorted(f"{sub}_{p}" for sub, ps in member.tasks(kind).items()
                                   for p in ps) for kind in ("active", "standby", "warmup")},
            "rebalance_timeout_ms": member.rebalance_timeout_ms}


def _streams_topology(group) -> dict | None:
    """A streams group's topology: each subtopology's topics by role."""
    if group.topology is None:
        return None
    return {"epoch": group.topology.epoch, "subtopologies": [
        {"id": s.subtopology_id, "source_topics": list(s.source_topics),
         "repartition_source_topics": [t.name for t in s.repartition_source_topics],
         "repartition_sink_topics": list(s.repartition_sink_topics),
         "changelog_topics": [t.name for t in s.state_changelog_topics]}
        for s in group.topology.subtopologies]}


def _consumer_member(broker, member) -> dict:
    assignment = {}
    for topic_id, partitions in member.assigned.items():
        topic = broker.topics.by_id.get(topic_id)
        assignment[topic.name if topic is not None else str(topic_id)] = sorted(partitions)
    return {"member_id": member.member_id, "client_id": member.client_id,
            "client_host": member.client_host, "instance_id": member.instance_id,
            "assignment": assignment, "member_epoch": member.member_epoch,
            "state": member.state.name,
            "subscribed_topics": sorted(member.subscribed_topic_names),
            "subscribed_regex": member.subscribed_topic_regex,
            "rebalance_timeout_ms": member.rebalance_timeout_ms}


class LagHistory:
    """Each group's total lag over time, sampled when the console looks at the group, so a
    chart shows how lag moved while someone watched. One sample a second at most is kept; the
    newest look replaces the last sample until a second has passed, so the chart ends at the
    lag the page shows. Bounded: LAG_SAMPLES per group, LAG_GROUPS groups."""

    def __init__(self, per_group: int = LAG_SAMPLES, max_groups: int = LAG_GROUPS,
                 every_ms: int = LAG_SAMPLE_MS) -> None:
        self.per_group = per_group
        self.max_groups = max_groups
        self.every_ms = every_ms
        #: group id -> [samples (time, lag), time of the last sample kept for good]
        self.groups: OrderedDict[str, list] = OrderedDict()

    def sample(self, group_id: str, now: int, lag: int) -> None:
        entry = self.groups.get(group_id)
        if entry is None:
            entry = self.groups[group_id] = [deque(maxlen=self.per_group), None]
            if len(self.groups) > self.max_groups:
                self.groups.popitem(last=False)
        else:
            self.groups.move_to_end(group_id)
        samples, kept = entry
        if samples and samples[-1][0] != kept:   # the last one is provisional: replace it
            samples[-1] = (now, lag)
        else:
            samples.append((now, lag))
        if kept is None or now - kept >= self.every_ms:
            entry[1] = now

    def of(self, group_id: str) -> list:
        entry = self.groups.get(group_id)
        return [list(s) for s in entry[0]] if entry is not None else []


# ------------------------------------------------------------------ broker

class RequestRates:
    """Requests per API per second, from snapshots of the broker's request counters taken when
    the broker view is asked for (at most one a second, the last RATE_SNAPSHOTS kept): the rate
    is over the last minute, or since the console first looked."""

    def __init__(self, clock=time.monotonic) -> None:
        self.clock = clock
        self.snapshots: deque = deque(maxlen=RATE_SNAPSHOTS)

    def rates(self, totals: dict) -> dict:
        now = self.clock()
        if not self.snapshots or (now - self.snapshots[-1][0]) * 1000 >= RATE_SNAPSHOT_MS:
            self.snapshots.append((now, dict(totals)))
        then, before = self.snapshots[0]
        elapsed = now - then
        if elapsed <= 0:
            return {}
        return {api: round((n - before.get(api, 0)) / elapsed, 2) for api, n in totals.items()}


def broker_view(broker, rates: RequestRates, query: dict, actions: bool) -> dict:
    config = broker.config
    settings = []
    for name, setting in SETTINGS.items():
        value = config.values.get(name)
        try:
            kafka, is_kafka = kafka_default(name), True
        except KeyError:
            kafka, is_kafka = None, False
        # a secret (passwords of a JAAS config) is shown as set, never its value
        shown = "[hidden]" if name in SECRET_SETTINGS and value else _plain(value)
        settings.append({
            "name": name, "value": shown, "default": _plain(setting.default),
            "kafka_default": _plain(kafka) if is_kafka else None,
            "kafka_setting": is_kafka,
            "non_default": value != setting.default,
            "differs_from_kafka": is_kafka and value != kafka,
            "doc": setting.doc})
    totals: dict = {}
    for (api, _version), n in broker.metrics.traffic.requests.items():
        totals[api] = totals.get(api, 0) + n
    errors: dict = {}
    for (api, _code, error), n in list(broker.metrics.errors.values.items()):
        if n:
            errors.setdefault(api, {})[error] = int(n)
    per_second = rates.rates(totals)
    apis = [{"api": api, "requests": n, "per_second": per_second.get(api, 0.0),
             "errors": errors.get(api, {})} for api, n in sorted(totals.items())]
    for api in sorted(set(errors) - set(totals)):
        apis.append({"api": api, "requests": 0, "per_second": 0.0, "errors": errors[api]})
    server = broker.server
    now = broker.clock()
    connections = []
    for conn in list(server.connections):
        connections.append({"peer": conn.peer, "listener": conn.listener,
                            "security_protocol": conn.security_protocol,
                            "principal": _principal(conn),
                            "idle_ms": max(now - conn.last_active, 0),
                            "in_flight": len(conn.pending)})
    connections.sort(key=lambda c: c["peer"])
    listeners = [{"name": name, "host": host, "port": port,
                  "security_protocol": config.security_protocols.get(name),
                  "advertised": "%s:%d" % broker.advertised(name) if name in server.bound
                  else None}
                 for name, (host, port) in server.bound.items()]
    return {"node_id": broker.node_id, "cluster_id": broker.cluster_id,
            "listeners": listeners, "settings": settings, "apis": apis,
            "connections": page(connections, query),
            "topics": len(broker.topics.topics),
            "groups": broker.coordinator.group_count(), "actions": actions,
            "internal_topics": [OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC]}


def _principal(conn) -> str:
    principal = getattr(conn, "principal", None)
    return "" if principal is None else str(principal)


def _plain(value):
    if isinstance(value, tuple):
        return ",".join(":".join(map(str, v)) if isinstance(v, tuple) else str(v)
                        for v in value)
    return value
