"""Every message class, by Kafka's name: ``from protocol.messages import JoinGroupRequest``.

Classes are compiled from Kafka's definitions in schemas.json (see protocol/schema.py); each has
``decode(data, version)``, ``encode(version)``, ``valid_versions`` and its nested structs as
attributes (``JoinGroupResponse.JoinGroupResponseMember``).
"""
from __future__ import annotations

from .schema import load_messages

MESSAGES, KAFKA_VERSION = load_messages()
globals().update(MESSAGES)


class Api:
    """One API key: its request and response classes and the versions the codec knows."""

    __slots__ = ("key", "name", "request", "response", "min_version", "max_version",
                 "first_flexible")

    def __init__(self, name: str) -> None:
        self.name = name
        self.request = MESSAGES[name + "Request"]
        self.response = MESSAGES[name + "Response"]
        self.key = self.request.api_key
        self.min_version, self.max_version = self.request.valid_versions
        flexible = self.request.flexible_versions
        # "none" parses as the empty range low=1, high=0: never flexible, not "flexible from v1"
        self.first_flexible = flexible.low if flexible.low <= flexible.high else 1 << 16

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
