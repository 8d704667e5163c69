"""Output of the client commands: aligned tables for a terminal (headers in capitals, as
kafka-consumer-groups.sh and rpk print them) and JSON for scripts."""
from __future__ import annotations

import json
import sys


def table(headers: list[str], rows: list[list], out=None) -> None:
    """Columns padded to their widest cell; None prints as '-'."""
    out = out or sys.stdout
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    for row in [headers] + cells:
        out.write("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() + "\n")


def section(title: str, out=None) -> None:
    (out or sys.stdout).write(f"\n{title}\n")


def pairs(items: list[tuple[str, object]], out=None) -> None:
    """``NAME  value`` lines for a summary."""
    out = out or sys.stdout
    width = max((len(k) for k, _ in items), default=0)
    for key, value in items:
        out.write(f"{key.ljust(width)}  {'-' if value is None else value}\n")


def emit_json(value, out=None) -> None:
    out = out or sys.stdout
    out.write(json.dumps(value, separators=(",", ":"), ensure_ascii=False) + "\n")


def text(data: bytes | None) -> str | None:
    """Bytes as text: UTF-8, with undecodable bytes as \\xNN escapes."""
    if data is None:
        return None
    return data.decode("utf-8", errors="backslashreplace")
