"""``kbroker consume TOPIC``: print records through kafka-python's KafkaConsumer, from the
beginning, an offset, a time or the end, alone (every partition assigned) or as a member of a
group (classic protocol) that commits what it printed. Without --follow it stops at the end of
the partitions as they were when it started (their last stable offset under read_committed)."""
from __future__ import annotations

import datetime
import sys
import time

from .connection import connection_from, consumer
from .errors import CliError
from .output import emit_json, text
from .topics import unknown_topic

COMMIT_EVERY_S = 5.0


def parse_time(value: str) -> int:
    """Milliseconds since the epoch, from a number of them or an ISO 8601 time (UTC unless it
    names a zone)."""
    value = value.strip()
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        when = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise CliError(f"bad time {value!r}: expected ms since the epoch or ISO 8601 "
                       "(2026-01-31T12:00:00Z)", status=2) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return int(when.timestamp() * 1000)


def parse_start(value: str | None, in_group: bool) -> tuple[str, int | None]:
    """('beginning'|'end'|'offset'|'time', number)."""
    if value is None or value in ("beginning", "start", "oldest", "earliest"):
        return "beginning", None
    if value in ("end", "newest", "latest"):
        return "end", None
    if in_group:
        raise CliError("in a group --offset is beginning or end (used when the group has no "
                       "committed offset); move a group with `kbroker group reset-offsets`",
                       status=2)
    if value.startswith("@"):
        return "time", parse_time(value[1:])
    try:
        offset = int(value)
    except ValueError:
        raise CliError(f"bad --offset {value!r}: beginning, end, an offset or @TIME",
                       status=2) from None
    if offset < 0:
        raise CliError("--offset must not be negative", status=2)
    return "offset", offset


class Formatter:
    """Writes one record as text (its value), JSON, or a kcat -f style format string."""

    ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "0": "\0"}

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        if fmt not in ("text", "json") and "%" not in fmt:
            raise CliError(f"bad --format {fmt!r}: text, json, or a format with %s, %k, ...",
                           status=2)
        self.out = sys.stdout.buffer

    def write(self, record) -> None:
        if self.fmt == "json":
            emit_json({
                "topic": record.topic, "partition": record.partition, "offset": record.offset,
                "timestamp": record.timestamp, "key": text(record.key),
                "value": text(record.value),
                "headers": [{"key": k, "value": text(v)} for k, v in (record.headers or [])],
            })
            return
        if self.fmt == "text":
            self.out.write((record.value or b"") + b"\n")
            return
        self.out.write(self._render(record))

    def _render(self, record) -> bytes:
        parts: list[bytes] = []
        fmt, i = self.fmt, 0
        while i < len(fmt):
            ch = fmt[i]
            if ch == "\\" and i + 1 < len(fmt) and fmt[i + 1] in self.ESCAPES:
                parts.append(self.ESCAPES[fmt[i + 1]].encode())
                i += 2
            elif ch == "%" and i + 1 < len(fmt):
                parts.append(self._field(fmt[i + 1], record))
                i += 2
            else:
                parts.append(ch.encode())
                i += 1
        return b"".join(parts)

    @staticmethod
    def _field(code: str, record) -> bytes:
        if code == "s":
            return record.value or b""
        if code == "k":
            return record.key or b""
        if code == "S":
            return str(-1 if record.value is None else len(record.value)).encode()
        if code == "K":
            return str(-1 if record.key is None else len(record.key)).encode()
        if code == "t":
            return record.topic.encode()
        if code == "p":
            return str(record.partition).encode()
        if code == "o":
            return str(record.offset).encode()
        if code == "T":
            return str(record.timestamp).encode()
        if code == "h":
            return b",".join(k.encode() + b"=" + (v or b"") for k, v in (record.headers or []))
        if code == "%":
            return b"%"
        raise CliError(f"unknown format code %{code} (use %t %p %o %T %k %s %K %S %h %%)",
                       status=2)

    def flush(self) -> None:
        if self.fmt == "json":
            sys.stdout.flush()
        else:
            self.out.flush()


def run(args) -> int:
    from kafka import OffsetAndMetadata, TopicPartition
    if args.num is not None and args.num < 1:
        raise CliError("-n must be at least 1", status=2)
    if args.group and args.partition:
        raise CliError("--partition cannot be used with --group (the group assigns "
                       "partitions)", status=2)
    start, number = parse_start(args.offset, bool(args.group))
    formatter = Formatter(args.format)
    conn = connection_from(args)
    timeout_ms = int(conn.timeout_s * 1000)
    client = consumer(conn, group_id=args.group, enable_auto_commit=False,
                      auto_offset_reset="latest" if start == "end" else "earliest",
                      isolation_level=args.isolation_level, allow_auto_create_topics=False,
                      bootstrap_timeout_ms=timeout_ms)
    printed = 0
    last: dict = {}   # partition -> offset of the last record printed
    committed_at = time.monotonic()

    def commit() -> None:
        if args.group and last:
            client.commit({tp: OffsetAndMetadata(offset + 1, "", -1)
                           for tp, offset in last.items()}, timeout_ms=timeout_ms)
            last.clear()

    try:
        client.bootstrap(timeout_ms=timeout_ms)
        partitions = client.partitions_for_topic(args.topic)
        if not partitions:
            raise unknown_topic(args.topic)
        if args.group:
            client.subscribe([args.topic])
        else:
            wanted = args.partition or sorted(partitions)
            missing = sorted(set(wanted) - set(partitions))
            if missing:
                raise CliError(f"topic {args.topic!r} has no partition {missing[0]} "
                               f"(it has {len(partitions)})")
            tps = [TopicPartition(args.topic, p) for p in wanted]
            client.assign(tps)
            _seek(client, tps, start, number, timeout_ms)
        ends: dict = {}
        assigned_by = time.monotonic() + conn.timeout_s + 30.0  # a group may rebalance first
        while True:
            remaining = None if args.num is None else args.num - printed
            batch = client.poll(timeout_ms=200, max_records=min(remaining or 500, 500))
            assignment = client.assignment()
            new = [tp for tp in assignment if tp not in ends]
            if new:
                ends.update(client.end_offsets(new, timeout_ms=timeout_ms))
            for tp in sorted(batch, key=lambda tp: tp.partition):
                for record in batch[tp]:
                    if args.num is not None and printed >= args.num:
                        break
                    formatter.write(record)
                    last[tp] = record.offset
                    printed += 1
            formatter.flush()
            if args.num is not None and printed >= args.num:
                break
            if args.group and time.monotonic() - committed_at > COMMIT_EVERY_S:
                commit()
                committed_at = time.monotonic()
            if not assignment:
                if time.monotonic() > assigned_by:
                    raise CliError(f"no partition of {args.topic!r} was assigned to this "
                                   f"member of group {args.group!r}")
                continue
            if not args.follow and all(client.position(tp, timeout_ms=timeout_ms) >= ends[tp]
                                       for tp in assignment):
                break
    except KeyboardInterrupt:
        pass
    finally:
        try:
            commit()
        finally:
            client.close(autocommit=False, timeout_ms=5000)
    return 0


def _seek(client, tps: list, start: str, number: int | None, timeout_ms: int) -> None:
    if start == "beginning":
        client.seek_to_beginning(*tps)
    elif start == "end":
        client.seek_to_end(*tps)
    elif start == "offset":
        for tp in tps:
            client.seek(tp, number)
    else:
        found = client.offsets_for_times({tp: number for tp in tps}, timeout_ms=timeout_ms)
        ends = None
        for tp in tps:
            if found.get(tp) is not None:
                client.seek(tp, found[tp].offset)
            else:  # nothing at or after that time: the end
                ends = ends or client.end_offsets(tps, timeout_ms=timeout_ms)
                client.seek(tp, ends[tp])
