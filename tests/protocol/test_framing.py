"""Framing: size prefix, request headers v1/v2, response headers v0/v1 (ApiVersions always v0)."""
from __future__ import annotations

import io
import struct
import warnings

import pytest

from protocol import framing
from protocol.framing import (
    SIZE, encode_request, read_request_header, read_response_header,
    response_header)
from protocol.messages import (
    APIS, ApiVersionsResponse, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    MetadataRequest, RequestHeader, ResponseHeader)
from protocol.schema import DecodeError

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.consumer.group import HeartbeatRequest as KpHeartbeatRequest
    from kafka.protocol.consumer.group import HeartbeatResponse as KpHeartbeatResponse
    from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KpApiVersionsResponse
    from kio.schema.request_header.v1.header import RequestHeader as KioRequestHeaderV1
    from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeaderV2
    from kio.serial import entity_reader, entity_writer


def hb(version=4):
    return HeartbeatRequest(group_id="g", generation_id=1, member_id="m",
                            group_instance_id=None if version < 3 else "i")


def header_bytes(api_key, version, correlation_id, client_id, tags=None):
    out = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        out += b"\xff\xff"
    else:
        raw = client_id.encode()
        out += struct.pack(">h", len(raw)) + raw
    if tags is not None:
        out += tags
    return out


# ------------------------------------------------------------------------------ request header v1

def test_request_header_v1():
    body = hb(3).encode(3)
    frame = header_bytes(12, 3, 99, "client-1") + body
    h = read_request_header(frame)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (12, 3, 99, "client-1")
    assert h.header_version == 1
    assert frame[h.body_offset:] == body
    assert HeartbeatRequest.decode(frame, 3, h.body_offset) == hb(3)
    assert "client-1" in repr(h)


def test_request_header_v1_null_client_id():
    frame = header_bytes(12, 2, 5, None) + hb(2).encode(2)
    h = read_request_header(frame)
    assert h.client_id is None and h.header_version == 1 and h.body_offset == 10


def test_request_header_v1_empty_and_non_ascii_client_id():
    h = read_request_header(header_bytes(3, 1, 5, "") + b"\xff\xff\xff\xff")
    assert h.client_id == "" and h.body_offset == 10
    h = read_request_header(header_bytes(3, 1, 5, "клиент-ü") + b"\xff\xff\xff\xff")
    assert h.client_id == "клиент-ü"


def test_request_header_invalid_utf8_client_id_is_replaced():
    # Java decodes the client id leniently (new String(bytes, UTF_8)); so do we: the header
    # still parses so the server can answer
    frame = struct.pack(">hhih", 12, 3, 1, 2) + b"\xff\xfe" + hb(3).encode(3)
    h = read_request_header(frame)
    assert h.client_id == "\ufffd\ufffd" and h.body_offset == 12


# ------------------------------------------------------------------------------ request header v2

def test_request_header_v2():
    body = hb(4).encode(4)
    frame = header_bytes(12, 4, 7, "cli", b"\x00") + body
    h = read_request_header(frame)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (12, 4, 7, "cli")
    assert h.header_version == 2
    assert h.body_offset == 10 + 3 + 1
    assert HeartbeatRequest.decode(frame, 4, h.body_offset) == hb(4)


def test_request_header_v2_client_id_is_not_compact():
    # in v2 the client id keeps its int16 length; a compact length would misparse
    frame = header_bytes(18, 3, 1, "abc", b"\x00")
    assert frame[8:10] == b"\x00\x03"
    h = read_request_header(frame + b"\x04x\x021\x00")
    assert h.client_id == "abc" and h.body_offset == len(frame)


def test_request_header_v2_null_client_id():
    frame = header_bytes(12, 4, 7, None, b"\x00") + hb(4).encode(4)
    h = read_request_header(frame)
    assert h.client_id is None and h.header_version == 2 and h.body_offset == 11


def test_request_header_v2_tagged_fields_are_skipped():
    tags = b"\x02" + b"\x00\x03abc" + b"\x81\x01\x01z"  # tag 0 (3 bytes), tag 129 (1 byte)
    body = hb(4).encode(4)
    frame = header_bytes(12, 4, 7, "cli", tags) + body
    h = read_request_header(frame)
    assert frame[h.body_offset:] == body
    assert HeartbeatRequest.decode(frame, 4, h.body_offset) == hb(4)


@pytest.mark.parametrize("tags", [b"", b"\x01", b"\x01\x00", b"\x01\x00\x05ab", b"\x81"])
def test_request_header_v2_truncated_tags(tags):
    with pytest.raises(DecodeError):
        read_request_header(header_bytes(12, 4, 7, "cli", tags))


@pytest.mark.parametrize("frame", [b"", b"\x00\x0c\x00\x04", b"\x00\x0c\x00\x04\x00\x00\x00\x07\x00",
                                   b"\x00\x0c\x00\x04\x00\x00\x00\x07\x00\x09abc"])
def test_request_header_truncated(frame):
    with pytest.raises(DecodeError):
        read_request_header(frame)


def test_request_header_unknown_api_and_version():
    # unknown api key: fixed fields still read, header v1, so the server can answer or close
    h = read_request_header(header_bytes(9999, 0, 3, "x") + b"junk")
    assert (h.api_key, h.api_version, h.correlation_id, h.header_version) == (9999, 0, 3, 1)
    # a version beyond our range of a flexible API: still the fixed fields
    h = read_request_header(header_bytes(12, 99, 3, "x"))
    assert (h.api_key, h.api_version, h.correlation_id) == (12, 99, 3)


def test_request_header_version_per_api_matches_the_definitions():
    for api in APIS.values():
        for v in range(api.min_version, api.max_version + 1):
            flexible = v in api.request.flexible_versions
            assert api.request_header_version(v) == (2 if flexible else 1), (api.name, v)
            expected_response = 0 if api.key == 18 else (1 if flexible else 0)
            assert api.response_header_version(v) == expected_response, (api.name, v)


def test_request_header_matches_the_schema_codec_and_kio():
    frame = header_bytes(12, 4, 7, "cli", b"\x00")
    assert RequestHeader.decode(frame, 2) == RequestHeader(
        request_api_key=12, request_api_version=4, correlation_id=7, client_id="cli")
    kio_v2, size = entity_reader(KioRequestHeaderV2)(frame, 0)
    assert size == len(frame) and kio_v2.client_id == "cli"
    buf = io.BytesIO()
    entity_writer(KioRequestHeaderV2)(buf, kio_v2)
    assert buf.getvalue() == frame == RequestHeader(
        request_api_key=12, request_api_version=4, correlation_id=7, client_id="cli").encode(2)
    frame1 = header_bytes(3, 1, 7, None)
    kio_v1, size = entity_reader(KioRequestHeaderV1)(frame1, 0)
    assert size == len(frame1) and kio_v1.client_id is None
    assert RequestHeader.decode(frame1, 1).client_id is None


# ------------------------------------------------------------------------------ encode_request

@pytest.mark.parametrize("version,client_id", [(3, "cli"), (3, None), (4, "cli"), (4, None)])
def test_encode_request_matches_kafka_python(version, client_id):
    req = hb(version)
    ours = encode_request(12, version, 7, client_id, req)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        kp = KpHeartbeatRequest[version](group_id="g", generation_id=1, member_id="m",
                                         group_instance_id=req.group_instance_id)
        kp.with_header(correlation_id=7, client_id=client_id)
        theirs = bytes(kp.encode(header=True, framed=True))
    assert ours == theirs
    (size,) = SIZE.unpack_from(ours, 0)
    assert size == len(ours) - 4
    h = read_request_header(ours[4:])
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (12, version, 7, client_id)
    assert HeartbeatRequest.decode(ours[4:], version, h.body_offset) == req


def test_encode_request_metadata_v0_and_v12():
    for version in (0, 12):
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")])
        frame = encode_request(3, version, 1, "c", req)[4:]
        h = read_request_header(frame)
        assert h.header_version == (2 if version >= 9 else 1)
        assert MetadataRequest.decode(frame, version, h.body_offset).topics[0].name == "t"


# ------------------------------------------------------------------------------ response headers

def test_response_header_v0():
    body = HeartbeatResponse(error_code=27).encode(3)
    frame = response_header(42, 0, len(body)) + body
    assert frame[:8] == struct.pack(">ii", 4 + len(body), 42)
    assert SIZE.unpack_from(frame, 0)[0] == len(frame) - 4
    corr, pos = read_response_header(frame[4:], 0)
    assert corr == 42 and pos == 4
    assert HeartbeatResponse.decode(frame[4:], 3, pos).error_code == 27


def test_response_header_v1():
    body = HeartbeatResponse(error_code=27).encode(4)
    frame = response_header(42, 1, len(body)) + body
    assert frame[:9] == struct.pack(">iiB", 5 + len(body), 42, 0)
    corr, pos = read_response_header(frame[4:], 1)
    assert corr == 42 and pos == 5
    assert HeartbeatResponse.decode(frame[4:], 4, pos).error_code == 27
    assert ResponseHeader.decode(frame[4:9], 1) == ResponseHeader(correlation_id=42)


def test_response_header_v1_matches_kafka_python():
    body = HeartbeatResponse(throttle_time_ms=3, error_code=0).encode(4)
    ours = response_header(9, APIS[12].response_header_version(4), len(body)) + body
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        kp = KpHeartbeatResponse[4](throttle_time_ms=3, error_code=0)
        kp.with_header(correlation_id=9)
        assert ours == bytes(kp.encode(header=True, framed=True))


def test_response_header_v1_tagged_fields_are_skipped():
    frame = struct.pack(">i", 42) + b"\x01\x05\x02ab" + b"body"
    assert read_response_header(frame, 1) == (42, 9)


@pytest.mark.parametrize("frame,version", [(b"", 0), (b"\x00\x00\x00", 0), (b"\x00\x00\x00\x01", 1),
                                           (b"\x00\x00\x00\x01\x01", 1),
                                           (b"\x00\x00\x00\x01\x01\x00\x09x", 1)])
def test_response_header_truncated(frame, version):
    with pytest.raises(DecodeError):
        read_response_header(frame, version)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_response_uses_header_v0(version):
    api = APIS[18]
    assert api.response_header_version(version) == 0
    resp = ApiVersionsResponse(error_code=0, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=a.key, min_version=a.min_version,
                                       max_version=a.max_version) for a in APIS.values()])
    body = resp.encode(version)
    frame = response_header(11, api.response_header_version(version), len(body)) + body
    corr, pos = read_response_header(frame[4:], 0)
    assert corr == 11 and pos == 4
    assert ApiVersionsResponse.decode(frame[4:], version, pos) == resp
    if version >= 3:
        # the body is flexible but the header is still v0: no tag byte after the correlation id
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            kp = KpApiVersionsResponse[version](error_code=0, api_keys=[], throttle_time_ms=0)
            kp.with_header(correlation_id=11)
            theirs = bytes(kp.encode(header=True, framed=True))
        empty = ApiVersionsResponse(error_code=0, api_keys=[]).encode(version)
        assert theirs == response_header(11, 0, len(empty)) + empty


def test_join_group_flexible_frame_end_to_end():
    req = JoinGroupRequest(group_id="g", session_timeout_ms=10, member_id="", protocol_type="c",
                           protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                               name="range", metadata=b"\x00" * 100)])
    frame = framing.encode_request(11, 6, 3, "cli", req)
    h = read_request_header(frame[4:])
    assert h.header_version == 2
    assert JoinGroupRequest.decode(frame[4:], 6, h.body_offset) == req


def test_sasl_handshake_v1_uses_header_v1():
    # SaslHandshake has flexibleVersions "none": v1 is not flexible (header v1, response v0).
    # The empty range once read as "flexible from v1" and expected a tag byte after the client id.
    from protocol.messages import SaslHandshakeRequest

    api = APIS[17]
    assert api.request_header_version(1) == 1 and api.response_header_version(1) == 0
    body = SaslHandshakeRequest(mechanism="PLAIN").encode(1)
    frame = header_bytes(17, 1, 5, "cli") + body
    h = read_request_header(frame)
    assert h.header_version == 1 and frame[h.body_offset:] == body
    assert SaslHandshakeRequest.decode(frame, 1, h.body_offset).mechanism == "PLAIN"
    assert encode_request(17, 1, 5, "cli", SaslHandshakeRequest(mechanism="PLAIN"))[4:] == frame


def test_request_header_from_bytearray_and_memoryview():
    frame = header_bytes(12, 4, 7, "cli-ü", b"\x00") + hb(4).encode(4)
    for buf in (frame, bytearray(frame), memoryview(frame)):
        h = read_request_header(buf)
        assert (h.client_id, h.header_version) == ("cli-ü", 2)
        assert HeartbeatRequest.decode(buf, 4, h.body_offset) == hb(4)


def test_many_client_ids():
    # client ids are cached by their bytes; the cache is bounded and stays correct
    for i in range(5000):
        assert read_request_header(header_bytes(12, 3, i, f"c{i}")).client_id == f"c{i}"
    assert len(framing._CLIENT_IDS) <= 4096
