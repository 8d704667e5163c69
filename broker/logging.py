"""One place that configures logging: structlog for the broker's own events, console lines on a
terminal and JSON lines otherwise (``log.format``), filtered by ``log.level``.

Every line carries ``timestamp`` (ISO 8601, UTC), ``level``, ``logger`` (``broker.coordinator``,
``broker.server``, ...) and ``event``, plus the event's own fields. Messages of libraries that use
the standard ``logging`` module (asyncio's "Task exception was never retrieved", for instance) go
through the same renderer, so a JSON log stays one JSON object per line.
"""
from __future__ import annotations

import logging
import sys

import structlog

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}


class _NamedPrintLogger(structlog.PrintLogger):
    """A PrintLogger that knows the name it was asked for, for ``add_logger_name``."""

    def __init__(self, file, name: str) -> None:
        super().__init__(file)
        self.name = name


class _NamedPrintLoggerFactory:
    def __init__(self, file) -> None:
        self._file = file

    def __call__(self, *args) -> _NamedPrintLogger:
        name = args[0] if args and isinstance(args[0], str) else "broker"
        return _NamedPrintLogger(self._file, name)


def _renderer(fmt: str, stream):
    if fmt == "console":
        colors = bool(getattr(stream, "isatty", lambda: False)())
        return structlog.dev.ConsoleRenderer(colors=colors)
    return structlog.processors.JSONRenderer()


def resolve_format(fmt: str, stream) -> str:
    if fmt == "auto":
        isatty = getattr(stream, "isatty", None)
        return "console" if isatty is not None and isatty() else "json"
    if fmt not in ("console", "json"):
        raise ValueError(f"log.format must be auto, console or json, got {fmt!r}")
    return fmt


def configure_logging(fmt: str = "auto", level: str = "info", stream=None) -> None:
    """Configure structlog and the standard library's root logger to write to ``stream``
    (default stderr) in ``fmt`` at ``level`` and above."""
    stream = stream or sys.stderr
    fmt = resolve_format(fmt, stream)
    if level not in LEVELS:
        raise ValueError(f"log.level must be one of {sorted(LEVELS)}, got {level!r}")
    numeric = LEVELS[level]
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # JSON keeps a traceback as one field of its line; the console renderer prints it readably
    exc = [structlog.processors.format_exc_info] if fmt == "json" else []
    renderer = _renderer(fmt, stream)
    structlog.configure(
        processors=[*shared, structlog.processors.StackInfoRenderer(), *exc, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_NamedPrintLoggerFactory(stream),
        cache_logger_on_first_use=True,
    )
    # the standard library's loggers (asyncio, libraries) through the same renderer
    handler = logging.StreamHandler(stream)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    *exc, renderer]))
    root = logging.getLogger()
    for old in list(root.handlers):
        if getattr(old, "_kbroker", False):
            root.removeHandler(old)
    handler._kbroker = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(numeric)
