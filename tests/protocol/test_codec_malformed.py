"""Bad input: every decode failure is a DecodeError that says what and where, and lengths and
counts are checked against the bytes that remain before anything is allocated."""
from __future__ import annotations

import random
import resource
import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from protocol import framing
from protocol.messages import (
    MESSAGES, ApiVersionsRequest, FetchRequest, HeartbeatRequest, JoinGroupRequest,
    MetadataRequest, MetadataResponse, ProduceRequest, SyncGroupResponse)
from protocol.schema import DecodeError
from test_codec_roundtrip import instances

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")


def join_v5():
    return JoinGroupRequest(
        group_id="g", session_timeout_ms=1, rebalance_timeout_ms=2, member_id="m",
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="r", metadata=b"md")])


def fails(cls, data, version, *words):
    with pytest.raises(DecodeError) as info:
        cls.decode(data, version)
    message = str(info.value)
    for word in words:
        assert word in message, message
    return message


# ------------------------------------------------------------------------------ truncation

@pytest.mark.parametrize("cls,obj,version", [
    (JoinGroupRequest, join_v5(), 5),
    (JoinGroupRequest, join_v5(), 6),  # flexible: compact lengths, tagged fields
    (MetadataRequest, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")]), 1),
    (FetchRequest, FetchRequest(cluster_id="c", topics=[FetchRequest.FetchTopic(
        topic="t", partitions=[FetchRequest.FetchPartition(partition=1)])]), 12),
    (ApiVersionsRequest, ApiVersionsRequest(client_software_name="x",
                                            client_software_version="1"), 3),
])
def test_every_truncation_is_a_decode_error(cls, obj, version):
    data = obj.encode(version)
    assert cls.decode(data, version) == obj
    for cut in range(len(data)):
        with pytest.raises(DecodeError):
            cls.decode(data[:cut], version)


def test_truncated_string_says_where():
    data = join_v5().encode(5)
    # cut inside protocol_type ("consumer")
    cut = data.index(b"consumer") + 3
    fails(JoinGroupRequest, data[:cut], 5, "JoinGroupRequest v5", "protocol_type", "exceeds")


def test_truncated_uuid():
    obj = FetchRequest(topics=[FetchRequest.FetchTopic(partitions=[])])
    data = obj.encode(13)
    fails(FetchRequest, data[:-6], 13, "uuid")


# ------------------------------------------------------------------------------ lengths

def test_negative_length_of_a_non_nullable_string():
    data = bytearray(join_v5().encode(5))
    data[0:2] = I16.pack(-1)  # group_id is not nullable
    fails(JoinGroupRequest, bytes(data), 5, "group_id", "null or negative length")
    data[0:2] = I16.pack(-7)
    fails(JoinGroupRequest, bytes(data), 5, "group_id")


def test_negative_length_of_a_nullable_string_is_null():
    # Kafka reads any negative length of a nullable string as null
    obj = join_v5()
    data = bytearray(obj.encode(5))
    pos = data.index(b"\xff\xff\x00\x08consumer")  # group_instance_id = null
    data[pos:pos + 2] = I16.pack(-5)
    assert JoinGroupRequest.decode(bytes(data), 5) == obj


def test_oversized_string_length():
    data = bytearray(join_v5().encode(5))
    data[0:2] = I16.pack(32767)
    fails(JoinGroupRequest, bytes(data), 5, "group_id", "length 32767 exceeds")


def test_oversized_bytes_length():
    data = join_v5().encode(5)
    pos = len(data) - 6  # metadata: int32 length then b"md"
    assert data[pos:] == I32.pack(2) + b"md"
    bad = data[:pos] + I32.pack(2**31 - 1) + b"md"
    fails(JoinGroupRequest, bad, 5, "metadata", "2147483647 exceeds")


def test_oversized_compact_length():
    data = bytearray(join_v5().encode(6))
    # group_id is a compact string: uvarint length + 1; 0xffffffff0f = 2**32 - 1
    bad = b"\xff\xff\xff\xff\x0f" + bytes(data[2:])
    fails(JoinGroupRequest, bad, 6, "group_id", "exceeds")


def test_varint_longer_than_five_bytes():
    bad = b"\xff\xff\xff\xff\xff\x01" + join_v5().encode(6)[2:]
    fails(JoinGroupRequest, bad, 6, "varint")


def _peak_bytes_of(fn) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base


@pytest.mark.parametrize("count", [2**31 - 1, 2**20, 5])
def test_array_count_larger_than_remaining_fails_before_allocating(count):
    # MetadataRequest v1: topics is an int32-counted array of structs
    data = I32.pack(count) + b"\x00\x01t"
    peak = _peak_bytes_of(lambda: fails(MetadataRequest, data, 1, "topics", "exceeds"))
    assert peak < 256 * 1024, f"decoding a {count}-item claim allocated {peak} bytes"


def test_int_array_count_larger_than_remaining():
    # SyncGroupResponse has no int arrays; MetadataResponse v0 partitions have []int32 replicas
    resp = MetadataResponse(brokers=[], topics=[MetadataResponse.MetadataResponseTopic(
        name="t", partitions=[MetadataResponse.MetadataResponsePartition(
            replica_nodes=[1, 2], isr_nodes=[1])])])
    data = resp.encode(0)
    marker = I32.pack(2) + I32.pack(1) + I32.pack(2)
    pos = data.index(marker)
    bad = data[:pos] + I32.pack(2**31 - 1) + data[pos + 4:]
    peak = _peak_bytes_of(lambda: fails(MetadataResponse, bad, 0, "replica_nodes"))
    assert peak < 256 * 1024


def test_compact_array_count_larger_than_remaining():
    # JoinGroupRequest v6 protocols: compact array, uvarint count + 1; claim 2**32 - 2 items
    data = join_v5().encode(6)
    pos = data.index(b"consumer") + len(b"consumer")
    assert data[pos] == 2
    bad = data[:pos] + b"\xff\xff\xff\xff\x0f" + data[pos + 1:]
    peak = _peak_bytes_of(lambda: fails(JoinGroupRequest, bad, 6, "protocols", "exceeds"))
    assert peak < 256 * 1024


def test_null_non_nullable_array():
    data = I32.pack(-1)
    # MetadataRequest v0 topics is not nullable (v1+ is)
    fails(MetadataRequest, data, 0, "topics", "null array")
    assert MetadataRequest.decode(data, 1).topics is None


def test_oversized_records_length():
    req = ProduceRequest(topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(records=b"abc")])])
    data = req.encode(3)
    assert data.endswith(I32.pack(3) + b"abc")
    bad = data[:-7] + I32.pack(1 << 30) + b"abc"
    fails(ProduceRequest, bad, 3, "records", "exceeds")


# ------------------------------------------------------------------------------ trailing, version

def test_trailing_bytes():
    data = join_v5().encode(5)
    fails(JoinGroupRequest, data + b"\x00", 5, "1 trailing bytes")
    # decode_from (not exact) reports where it stopped instead
    obj, end = JoinGroupRequest.decode_from(data + b"\x00\x00", 5)
    assert obj == join_v5() and end == len(data)
    assert JoinGroupRequest.decode(data + b"\x00", 5, exact=False) == join_v5()


@pytest.mark.parametrize("version", [-1, 10, 11, 32767])
def test_unknown_version(version):
    fails(JoinGroupRequest, join_v5().encode(5), version, "no version")
    with pytest.raises(DecodeError):
        join_v5().encode(version)


def test_unknown_version_below_minimum():
    # Fetch starts at v4 in Kafka 4's definitions
    low = FetchRequest.valid_versions[0]
    fails(FetchRequest, b"", low - 1, "no version")


# ------------------------------------------------------------------------------ UTF-8

@pytest.mark.parametrize("bad", [b"\xff", b"\xc3", b"\xed\xa0\x80", b"a\x80b", b"\xf8\x88\x80\x80\x80"])
def test_invalid_utf8(bad):
    data = I16.pack(len(bad)) + bad + join_v5().encode(5)[3:]
    fails(JoinGroupRequest, data, 5, "UTF-8")
    # compact string too
    data = bytes([len(bad) + 1]) + bad + join_v5().encode(6)[2:]
    fails(JoinGroupRequest, data, 6, "UTF-8")


def test_non_ascii_utf8_is_fine():
    obj = join_v5()
    obj.group_id = "grüppe-日本-🙂"
    assert JoinGroupRequest.decode(obj.encode(5), 5).group_id == "grüppe-日本-🙂"
    assert JoinGroupRequest.decode(obj.encode(6), 6).group_id == "grüppe-日本-🙂"


# ------------------------------------------------------------------------------ tagged fields

def _fetch12_without_tags() -> bytes:
    data = FetchRequest(topics=[]).encode(12)
    assert data.endswith(b"\x00")  # empty top-level tag section
    return data[:-1]


def test_unknown_tags_are_skipped():
    base = _fetch12_without_tags()
    # tags 7 and 300 are unknown: skipped, never an error
    data = base + b"\x02" + b"\x07\x03abc" + b"\xac\x02\x01z"
    assert FetchRequest.decode(data, 12) == FetchRequest(topics=[])


def test_known_tag_is_decoded():
    base = _fetch12_without_tags()
    data = base + b"\x01\x00\x03\x03id"  # tag 0 = cluster_id, compact string "id"
    assert FetchRequest.decode(data, 12).cluster_id == "id"


def test_tagged_field_overrunning_the_frame():
    base = _fetch12_without_tags()
    fails(FetchRequest, base + b"\x01\x07\x09abc", 12, "tagged field", "exceeds")  # unknown tag
    fails(FetchRequest, base + b"\x01\x00\x09\x03id", 12, "tagged field")  # known tag


def test_tagged_value_overrunning_its_declared_size():
    base = _fetch12_without_tags()
    # tag 0 declares 1 byte but its compact string needs 2; the next (unknown) tag 1 would
    # otherwise be read from inside it
    fails(FetchRequest, base + b"\x02\x00\x01\x02\x01\x00", 12, "tagged field 0", "cluster_id")
    # and a value shorter than its declared size
    fails(FetchRequest, base + b"\x01\x00\x03\x01xx", 12, "tagged field 0")


def test_truncated_tag_section():
    base = _fetch12_without_tags()
    for tail in (b"", b"\x01", b"\x01\x00", b"\x02\x07\x00", b"\x81"):
        fails(FetchRequest, base + tail, 12)


def test_tag_count_huge_does_not_loop_forever():
    base = _fetch12_without_tags()
    fails(FetchRequest, base + b"\xff\xff\xff\xff\x0f\x07\x00", 12)


# ------------------------------------------------------------------------------ inputs

def test_accepts_bytes_bytearray_memoryview():
    data = join_v5().encode(6)
    for buf in (data, bytearray(data), memoryview(data)):
        assert JoinGroupRequest.decode(buf, 6) == join_v5()


def test_heartbeat_wrong_types_in_body():
    fails(HeartbeatRequest, b"", 4)
    fails(HeartbeatRequest, b"\x00", 0)


# ------------------------------------------------------------------------------ fuzz

FUZZ_FRAMES = 20_000


def _seed_encodings() -> list:
    """A few random valid encodings of every message at every version."""
    out = []
    for name, cls in sorted(MESSAGES.items()):
        low, high = cls.valid_versions
        for version in range(low, high + 1):
            @settings(max_examples=2, phases=[Phase.generate], derandomize=True, database=None,
                      deadline=None, suppress_health_check=list(HealthCheck))
            @given(instances(cls, version))
            def collect(obj):
                out.append((cls, version, obj.encode(version)))

            collect()
    return out


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        if op < 0.35 and b:  # bit flip
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op < 0.55 and b:  # interesting byte: length/count edges
            b[rng.randrange(len(b))] = rng.choice((0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF))
        elif op < 0.7 and len(b) >= 4:  # interesting int32 in place
            p = rng.randrange(len(b) - 3)
            b[p:p + 4] = I32.pack(rng.choice((-1, -2, 2**31 - 1, 2**20, 0x7FFF)))
        elif op < 0.85:  # truncation
            del b[rng.randrange(len(b) + 1):]
        else:  # insertion
            p = rng.randrange(len(b) + 1)
            b[p:p] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 6)))
    return bytes(b)


def test_fuzz_only_decode_error_escapes():
    seeds = _seed_encodings()
    rng = random.Random(20240602)
    frames = []
    for _ in range(FUZZ_FRAMES):
        cls, version, data = rng.choice(seeds)
        frames.append((cls, version, _mutate(rng, data)))
    # plus purely random frames against random messages
    for _ in range(2_000):
        cls, version, _ = rng.choice(seeds)
        frames.append((cls, version, bytes(rng.randrange(256) for _ in range(rng.randrange(64)))))

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    tracemalloc.reset_peak()
    base, _ = tracemalloc.get_traced_memory()
    decoded = errors = 0
    try:
        for cls, version, data in frames:
            try:
                cls.decode(data, version)
                decoded += 1
            except DecodeError:
                errors += 1
            # anything else propagates and fails the test with the frame in the traceback
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert decoded + errors == len(frames)
    assert errors > len(frames) // 2  # the mutations mostly break frames
    assert peak - base < 8 * 1024 * 1024, f"decoding small frames peaked at {peak - base} bytes"
    assert rss_after - rss_before < 64 * 1024, "max RSS grew by more than 64 MiB"  # KiB on Linux


def test_fuzz_request_headers():
    rng = random.Random(7)
    seed = framing.encode_request(11, 6, 42, "client-ü", join_v5())[4:]
    seed2 = framing.encode_request(11, 5, 42, None, join_v5())[4:]
    for i in range(5_000):
        data = _mutate(rng, seed if i % 2 else seed2)
        try:
            header = framing.read_request_header(data)
        except DecodeError:
            continue
        assert 0 <= header.body_offset <= len(data)
        api = header.api_key
        if api == 11 and 0 <= header.api_version <= 9:
            try:
                JoinGroupRequest.decode(data, header.api_version, header.body_offset)
            except DecodeError:
                pass
    for i in range(2_000):
        data = _mutate(rng, b"\x00\x00\x00\x2a\x00" + b"body")
        try:
            framing.read_response_header(data, i % 2)
        except DecodeError:
            pass


def test_sync_group_assignment_bytes_are_copied_not_views():
    # bytes fields are copies (safe to keep after the frame buffer is reused)
    resp = SyncGroupResponse(assignment=b"\x01\x02")
    buf = bytearray(resp.encode(3))
    back = SyncGroupResponse.decode(buf, 3)
    buf[-1] = 0xFF
    assert back.assignment == b"\x01\x02" and type(back.assignment) is bytes
