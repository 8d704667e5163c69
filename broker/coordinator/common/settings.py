"""A coordinator's settings, read from the broker's.

Each setting is declared once, in broker/config.py (its Kafka name, parser, default and doc). A
coordinator names the settings it reads with :func:`settings`, which makes its settings class:
one attribute per name (``group.max.size`` -> ``group_max_size``), defaulting to the broker's
default, and ``from_config`` to read them from the broker's config."""
from __future__ import annotations

from ...config import SETTINGS
from ...values import Values


def settings(*names: str):
    """Class decorator: a class with one slot per Kafka setting name in ``names``, each a
    keyword of its ``__init__`` defaulting to the broker's default; equality and repr from
    broker/values.py."""
    def make(cls):
        attributes = tuple(name.replace(".", "_") for name in names)
        defaults = {attribute: SETTINGS[name].default
                    for attribute, name in zip(attributes, names)}
        namespace = {key: value for key, value in vars(cls).items()
                     if key not in ("__dict__", "__weakref__")}
        namespace.update(
            __slots__=attributes, __init__=_init,
            KAFKA_NAMES=dict(zip(attributes, names)), DEFAULTS=defaults,
            TYPES={attribute: _type_of(default) for attribute, default in defaults.items()},
            from_config=classmethod(settings_from))
        return type(cls.__name__, (Values,), namespace)
    return make


def _init(self, **values) -> None:
    for attribute, default in self.DEFAULTS.items():
        setattr(self, attribute, values.pop(attribute, default))
    if values:
        raise TypeError(f"{type(self).__name__} has no setting {', '.join(sorted(values))}")


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
    for attribute, kind in cls.TYPES.items():
        for name in (cls.KAFKA_NAMES[attribute], attribute):
            try:
                value = config[name]
            except (KeyError, IndexError, TypeError, AttributeError):
                continue
            if value is None:
                continue
            if kind is tuple:
                values[attribute] = tuple(value) if not isinstance(value, str) else \
                    tuple(v.strip() for v in value.split(",") if v.strip())
            elif kind is str:
                values[attribute] = str(value).lower()
            elif kind is bool:
                values[attribute] = value if isinstance(value, bool) else \
                    str(value).lower() == "true"
            else:
                values[attribute] = int(value)
            break
    return cls(**values)
