"""``kbroker produce TOPIC``: one record a line from stdin or a file, through kafka-python's
KafkaProducer. A line may carry headers and a key, in kafka-console-producer's layout:
``name:value,name:value<header-separator>key<key-separator>value``."""
from __future__ import annotations

import os
import sys
import time

from .connection import connection_from, producer
from .errors import CliError
from .output import emit_json

CODEC_PACKAGES = {"snappy": ("has_snappy", "python-snappy"), "lz4": ("has_lz4", "lz4"),
                  "zstd": ("has_zstd", "zstandard"), "gzip": ("has_gzip", "(built in)")}


def parse_line(line: bytes, args, static_headers: list) -> tuple[bytes | None, bytes,
                                                                  list[tuple[str, bytes]]]:
    """(key, value, headers) of one input line, its line terminator already removed."""
    headers = list(static_headers)
    if args.header_separator:
        sep = args.header_separator.encode()
        head, found, line = line.partition(sep)
        if not found:
            raise CliError(f"a line has no header separator {args.header_separator!r}: "
                           f"{head[:60]!r}")
        for item in head.split(b","):
            if not item:
                continue
            name, colon, value = item.partition(b":")
            headers.append((name.decode("utf-8", "replace"), value if colon else b""))
    key = args.key.encode() if args.key is not None else None
    if args.key_separator:
        sep = args.key_separator.encode()
        key_part, found, value = line.partition(sep)
        if not found:
            raise CliError(f"a line has no key separator {args.key_separator!r}: "
                           f"{key_part[:60]!r}")
        return key_part, value, headers
    return key, line, headers


class Progress:
    """Bytes of the input file read so far, on one rewritten stderr line."""

    def __init__(self, total: int | None, enabled: bool) -> None:
        self.total = total
        self.enabled = enabled
        self.shown_at = 0.0

    def show(self, done: int, records: int, final: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not final and now - self.shown_at < 0.2):
            return
        self.shown_at = now
        if self.total:
            share = min(100.0, 100.0 * done / self.total)
            bar = "#" * int(share / 5)
            text = (f"[{bar:<20}] {share:5.1f}%  {records} records, "
                    f"{done / 1048576:.1f} of {self.total / 1048576:.1f} MiB")
        else:
            text = f"{records} records, {done / 1048576:.1f} MiB"
        sys.stderr.write("\r" + text + ("\n" if final else ""))
        sys.stderr.flush()


def run(args) -> int:
    import kafka.codec as codec
    import kafka.errors as errors
    static_headers = []
    for item in args.header:
        name, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--header expects NAME=VALUE, got {item!r}", status=2)
        static_headers.append((name, value.encode()))
    if args.compression != "none":
        check, package = CODEC_PACKAGES[args.compression]
        if not getattr(codec, check)():
            raise CliError(f"--compression {args.compression} needs the {package} package "
                           f"(pip install {package})")
    conn = connection_from(args)
    if args.file:
        try:
            source = open(args.file, "rb")
        except OSError as exc:
            raise CliError(f"cannot read {args.file}: {exc.strerror}") from None
        total = os.fstat(source.fileno()).st_size
    else:
        source, total = sys.stdin.buffer, None
    progress = Progress(total, args.progress or (args.file is not None and sys.stderr.isatty()))

    client = producer(conn, acks={"all": "all", "-1": "all", "0": 0, "1": 1}[args.acks],
                      compression_type=None if args.compression == "none" else args.compression,
                      linger_ms=5)
    outcome = {"failed": None, "acked": 0}
    partitions: dict[int, list[int]] = {}

    def delivered(meta) -> None:
        outcome["acked"] += 1
        span = partitions.setdefault(meta.partition, [meta.offset, meta.offset, 0])
        span[0] = min(span[0], meta.offset)
        span[1] = max(span[1], meta.offset)
        span[2] += 1

    def failed(exc) -> None:
        if outcome["failed"] is None:
            outcome["failed"] = exc

    records = read = 0
    try:
        if args.partition is not None:
            known = client.partitions_for(args.topic)
            if args.partition not in known:
                raise CliError(f"topic {args.topic!r} has no partition {args.partition} "
                               f"(it has {len(known)})")
        for raw in source:
            read += len(raw)
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if line.endswith(b"\r"):
                line = line[:-1]
            key, value, headers = parse_line(line, args, static_headers)
            future = client.send(args.topic, value=value, key=key, headers=headers or None,
                                 partition=args.partition)
            future.add_callback(delivered)
            future.add_errback(failed)
            records += 1
            if outcome["failed"] is not None:
                break
            progress.show(read, records)
        client.flush(timeout=max(conn.timeout_s, 30.0))
    except errors.KafkaTimeoutError as exc:
        if "metadata" in str(exc).lower():
            raise CliError(f"topic {args.topic!r} does not exist and was not created "
                           "(UNKNOWN_TOPIC_OR_PARTITION)") from None
        raise
    finally:
        client.close(timeout=5)
        if source is not sys.stdin.buffer:
            source.close()
    progress.show(read, records, final=True)
    if outcome["failed"] is not None:
        from .errors import describe
        raise CliError(f"producing to {args.topic!r} failed after {outcome['acked']} records: "
                       f"{describe(outcome['failed'], conn.bootstrap, conn.protocol)}")
    spans = [{"partition": p, "first_offset": s[0], "last_offset": s[1], "records": s[2]}
             for p, s in sorted(partitions.items())]
    if args.format == "json":
        emit_json({"topic": args.topic, "records": outcome["acked"], "partitions": spans})
    else:
        where = ", ".join(f"partition {s['partition']} offsets {s['first_offset']}-"
                          f"{s['last_offset']}" for s in spans)
        count = outcome["acked"]
        print(f"produced {count} record{'' if count == 1 else 's'} to {args.topic}"
              + (f" ({where})" if where else ""))
    return 0
