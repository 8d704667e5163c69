"""Every message class, by Kafka's name: ``from protocol.messages import JoinGroupRequest``.

Classes are compiled from Kafka's definitions in schemas.json (see protocol/schema.py); each has
``decode(data, version)``, ``encode(version)``, ``valid_versions`` and its nested structs as
attributes (``JoinGroupResponse.JoinGroupResponseMember``).
"""
from __future__ import annotations

from .schema import VersionRange, load_messages

MESSAGES, KAFKA_VERSION = load_messages()


def __getattr__(name: str):
    """``from protocol.messages import FetchRequest`` builds the class on first use."""
    try:
        cls = MESSAGES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = cls
    return cls


class Api:
    """One API key: its request and response classes and the versions the codec knows."""

    __slots__ = ("key", "name", "min_version", "max_version", "first_flexible")

    def __init__(self, name: str) -> None:
        self.name = name
        spec = MESSAGES.specs[name + "Request"]
        self.key = spec["apiKey"]
        valid = VersionRange(spec.get("validVersions", "0"))
        self.min_version, self.max_version = valid.low, valid.high
        flexible = VersionRange(spec.get("flexibleVersions", "none"))
        # "none" parses as the empty range low=1, high=0: never flexible, not "flexible from v1"
        self.first_flexible = flexible.low if flexible.low <= flexible.high else 1 << 16

    @property
    def request(self) -> type:
        return MESSAGES[self.name + "Request"]

    @property
    def response(self) -> type:
        return MESSAGES[self.name + "Response"]

    def request_header_version(self, version: int) -> int:
        return 2 if version >= self.first_flexible else 1

    def response_header_version(self, version: int) -> int:
        if self.key == 18:  # ApiVersions responses always use header v0
            return 0
        return 1 if version >= self.first_flexible else 0


APIS: dict[int, Api] = {}
for _name in MESSAGES:
    if _name.endswith("Request") and _name != "RequestHeader":
        _api = Api(_name[: -len("Request")])
        APIS[_api.key] = _api
API_BY_NAME: dict[str, Api] = {a.name: a for a in APIS.values()}
