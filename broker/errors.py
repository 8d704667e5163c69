"""Errors of the broker's own making that several layers raise: kept apart so that the
settings (config.py) and the modules whose settings it checks (security/) need not import each
other."""
from __future__ import annotations


class ConfigError(ValueError):
    """A setting with an unknown name or a bad value."""
