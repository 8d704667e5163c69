"""kafka-python request and response classes for the group APIs it does not have
(ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets, StreamsGroupDescribe),
built from Kafka's own definitions in protocol/schemas.json, so the group commands send them
through the admin client's connections like every other request: same bootstrap, TLS, SASL,
FindCoordinator and ApiVersions negotiation, and no codec of ours on the client side.

kafka-python builds an ApiMessage class from the definition ``<class name>.json`` that
importlib.resources reads from the package named by the class keyword ``load_json=`` (its own
classes, and StickyAssignorUserData, use that keyword). SCHEMAS is such a package: made here,
not on disk, its resources are the definitions in protocol/schemas.json, so the one copy of
Kafka's messages in this repo serves the client commands too."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import io
import json
import sys

from kafka.protocol.api_message import ApiMessage

from protocol.schema import load_messages


class _Definitions:
    """SCHEMAS' loader, its resource reader and the directory it reads: importlib.resources asks
    the loader for a reader, the reader for files(), and the directory for ``<name>.json``."""

    def __init__(self) -> None:
        self.specs = load_messages()[0].specs

    def get_resource_reader(self, name: str):
        return self

    def files(self):
        return self

    def is_dir(self) -> bool:
        return True

    def is_file(self) -> bool:
        return False

    def joinpath(self, *names: str):
        (filename,) = names
        return _Definition(filename, self.specs.get(filename.removesuffix(".json")))

    __truediv__ = joinpath


class _Definition:
    """One message definition read as the text of a JSON file."""

    def __init__(self, name: str, spec: dict | None) -> None:
        self.name = name
        self.spec = spec

    def is_file(self) -> bool:
        return self.spec is not None

    def is_dir(self) -> bool:
        return False

    def read_text(self, encoding=None, errors=None) -> str:
        if self.spec is None:
            raise FileNotFoundError(f"no message {self.name} in protocol/schemas.json")
        return json.dumps(self.spec)

    def read_bytes(self) -> bytes:
        return self.read_text().encode()

    def open(self, mode: str = "r", *args, **kwargs):
        return io.BytesIO(self.read_bytes()) if "b" in mode else io.StringIO(self.read_text())


def _package(name: str):
    spec = importlib.machinery.ModuleSpec(name, _Definitions(), is_package=True)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # importlib.resources finds the package by its name
    return module


SCHEMAS = _package(__name__ + ".schemas")


class ShareGroupDescribeRequest(ApiMessage, load_json=SCHEMAS): pass
class ShareGroupDescribeResponse(ApiMessage, load_json=SCHEMAS): pass
class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=SCHEMAS): pass
class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=SCHEMAS): pass
class AlterShareGroupOffsetsRequest(ApiMessage, load_json=SCHEMAS): pass
class AlterShareGroupOffsetsResponse(ApiMessage, load_json=SCHEMAS): pass
class StreamsGroupDescribeRequest(ApiMessage, load_json=SCHEMAS): pass
class StreamsGroupDescribeResponse(ApiMessage, load_json=SCHEMAS): pass
