"""Size-prefixed frames and request/response headers.

The server reads the header (api key, version, correlation id, client id) without touching the
body, so it can refuse an unknown API or version, or answer ApiVersions at v0, before decoding.
"""
from __future__ import annotations

import struct

from .messages import APIS
from .schema import DecodeError, _skip_tags

SIZE = struct.Struct(">i")
_HEADER_FIXED = struct.Struct(">hhih")
_RESPONSE_V0 = struct.Struct(">ii")
_RESPONSE_V1 = struct.Struct(">iiB")


class RequestHeader:
    __slots__ = ("api_key", "api_version", "correlation_id", "client_id", "header_version",
                 "body_offset")

    def __init__(self, api_key, api_version, correlation_id, client_id, header_version,
                 body_offset):
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.header_version = header_version
        self.body_offset = body_offset

    def __repr__(self) -> str:
        return (f"RequestHeader(api_key={self.api_key}, api_version={self.api_version}, "
                f"correlation_id={self.correlation_id}, client_id={self.client_id!r})")


def _header_v2_versions() -> dict:
    """api key -> the versions whose request header is v2 (flexible and within our range)."""
    return {key: range(api.first_flexible, api.max_version + 1) for key, api in APIS.items()}


_HEADER_V2 = _header_v2_versions()
_new = object.__new__
_CLIENT_IDS: dict = {}  # raw client id -> str, bounded
_NOT_FLEXIBLE = range(0)


def read_request_header(frame) -> RequestHeader:
    """Decode the request header (v1 or v2, chosen by the API's flexible versions).

    An unknown api key or version still yields the fixed fields with header v1 so the caller can
    answer or close; the body offset is then only meaningful for known APIs and versions.
    """
    size = len(frame)
    if size < 10:
        raise DecodeError(f"request header truncated: {size} bytes")
    api_key, api_version, correlation_id, n = _HEADER_FIXED.unpack_from(frame, 0)
    if n < 0:
        client_id = None
        pos = 10
    else:
        pos = 10 + n
        if pos > size:
            raise DecodeError(f"request header client id of {n} bytes exceeds the frame")
        raw = frame[10:pos]
        if type(raw) is not bytes:
            raw = bytes(raw)  # bytearray / memoryview slices: hashable copy
        client_id = _CLIENT_IDS.get(raw)  # a connection sends the same client id every time
        if client_id is None:
            # lenient like Java (new String(bytes, UTF_8)): a bad client id must not stop the
            # answer
            client_id = str(raw, "utf-8", "replace")
            if len(_CLIENT_IDS) >= 4096:
                _CLIENT_IDS.clear()
            _CLIENT_IDS[raw] = client_id
    if api_version in _HEADER_V2.get(api_key, _NOT_FLEXIBLE):
        if pos >= size:
            raise DecodeError("request header v2 truncated before its tagged fields")
        if frame[pos] == 0:
            pos += 1
        else:
            pos = _skip_tags(frame, pos, size, "request header")
        header_version = 2
    else:
        header_version = 1
    h = _new(RequestHeader)  # no __init__ call: this runs once per request
    h.api_key = api_key
    h.api_version = api_version
    h.correlation_id = correlation_id
    h.client_id = client_id
    h.header_version = header_version
    h.body_offset = pos
    return h


def encode_request(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                   request) -> bytes:
    """A whole size-prefixed request frame (used by tests and benchmarks acting as clients)."""
    api = APIS[api_key]
    body = request.encode(api_version)
    cid = b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + \
        client_id.encode()
    header = struct.pack(">hhi", api_key, api_version, correlation_id) + cid
    if api.request_header_version(api_version) >= 2:
        header += b"\x00"
    return SIZE.pack(len(header) + len(body)) + header + body


def response_header(correlation_id: int, header_version: int, body_size: int) -> bytes:
    """Size prefix plus response header for a body of body_size bytes."""
    if header_version == 0:
        return _RESPONSE_V0.pack(body_size + 4, correlation_id)
    return _RESPONSE_V1.pack(body_size + 5, correlation_id, 0)


def read_response_header(frame, header_version: int) -> tuple[int, int]:
    """(correlation_id, body offset) of a response frame body (without its size prefix)."""
    if len(frame) < (5 if header_version >= 1 else 4):
        raise DecodeError(f"response header v{header_version} truncated: {len(frame)} bytes")
    (correlation_id,) = struct.unpack_from(">i", frame, 0)
    pos = 4
    if header_version >= 1:
        pos = 5 if frame[4] == 0 else _skip_tags(frame, 4, len(frame), "response header")
    return correlation_id, pos
