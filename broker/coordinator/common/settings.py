"""A coordinator's settings, read from the broker's.

Each setting is declared once, in broker/config.py (its Kafka name, parser, default and doc). A
coordinator names the settings it reads with :func:`settings`, which makes its settings class:
one attribute per name (``group.max.size`` -> ``group_max_size``), defaulting to the broker's
default, and ``from_config`` to read them from the broker's config."""
from __future__ import annotations

from dataclasses import field, fields, make_dataclass

from ...config import kafka_default


def settings(*names: str):
    """Class decorator: a dataclass with one field per Kafka setting name in ``names``."""
    def make(cls):
        attributes = [name.replace(".", "_") for name in names]
        defaults = [kafka_default(name) for name in names]
        namespace = {key: value for key, value in vars(cls).items()
                     if key not in ("__dict__", "__weakref__")}
        namespace["KAFKA_NAMES"] = dict(zip(attributes, names))
        namespace["from_config"] = classmethod(settings_from)
        return make_dataclass(cls.__name__, [
            (attribute, _type_of(default), field(default=default))
            for attribute, default in zip(attributes, defaults)], namespace=namespace)
    return make


def _type_of(default) -> type:
    for kind in (bool, int, str, tuple):   # bool first: a bool is an int
        if isinstance(default, kind):
            return kind
    raise TypeError(f"a coordinator setting of an unexpected type: {default!r}")


def settings_from(cls, config=None):
    """A settings class's instance from None (its defaults), an instance, or a mapping (a dict
    or the broker's config) keyed by Kafka's names (``group.max.size``) or by the attribute
    names. Values are converted to the field's type (a tuple from a comma list)."""
    if config is None:
        return cls()
    if isinstance(config, cls):
        return config
    values = {}
    for f in fields(cls):
        for name in (cls.KAFKA_NAMES[f.name], f.name):
            try:
                value = config[name]
            except (KeyError, IndexError, TypeError, AttributeError):
                continue
            if value is None:
                continue
            if f.type is tuple:
                values[f.name] = tuple(value) if not isinstance(value, str) else \
                    tuple(v.strip() for v in value.split(",") if v.strip())
            elif f.type is str:
                values[f.name] = str(value).lower()
            elif f.type is bool:
                values[f.name] = value if isinstance(value, bool) else \
                    str(value).lower() == "true"
            else:
                values[f.name] = int(value)
            break
    return cls(**values)
