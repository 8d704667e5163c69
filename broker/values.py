"""Equality and a repr by attribute, as a dataclass gives them, for the plain classes built at
start (making a dataclass exec()s its methods' source at every start)."""
from __future__ import annotations


class Values:
    """A base giving ``==`` (the same type, equal attributes), no hash, and a repr
    ``Name(a=1, b=2)``. The attributes are the class's own ``__slots__`` in order, else the
    instance's ``vars()``."""

    __slots__ = ()

    def _values(self) -> dict:
        names = type(self).__dict__.get("__slots__")
        if names is None:
            return vars(self)
        return {name: getattr(self, name) for name in names}

    def __eq__(self, other) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._values() == other._values()

    __hash__ = None

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self._values().items())
        return f"{type(self).__name__}({fields})"
