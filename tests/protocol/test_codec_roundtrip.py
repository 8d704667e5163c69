"""Round-trip property tests: every message, every version, random instances from the schema.

The strategies are built by walking the compiled schema (``cls._def``): a field that exists at
the version gets a random value of its wire type (ints over their whole width, non-ASCII strings,
None where nullable at that version, empty and non-empty arrays, nested structs, non-default
tagged fields); a field that does not exist at the version is left at its default, which is what
decode produces for it. ``instances(cls, version)`` is reused by the differential and malformed
input tests (pytest's default import mode puts this directory on sys.path).
"""
from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.messages import MESSAGES
from protocol.schema import INT_FORMATS, Field, StructDef

INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}

# Small sizes keep 376 (message, version) pairs fast; the shapes are what matter.
MAX_ITEMS = 3
TEXT = st.text(max_size=12)  # any code point but surrogates: non-ASCII, multi-byte, NUL
BINARY = st.binary(max_size=24)
UUIDS = st.one_of(st.just(uuid.UUID(int=0)), st.uuids())


def scalar_strategy(type_name: str) -> st.SearchStrategy:
    if type_name in INT_RANGES:
        low, high = INT_RANGES[type_name]
        # the edges matter (sign, width); hypothesis finds them often, make them certain
        return st.one_of(st.sampled_from([low, high, 0, -1 if low < 0 else 1]),
                         st.integers(low, high))
    if type_name == "bool":
        return st.booleans()
    if type_name == "float64":
        return st.floats(allow_nan=False)
    if type_name == "string":
        return TEXT
    if type_name in ("bytes", "records"):
        return BINARY
    if type_name == "uuid":
        return UUIDS
    raise AssertionError(f"no strategy for {type_name}")


Override = "callable(field, version) -> strategy | None"


def field_strategy(f: Field, version: int, override=None, depth: int = 0) -> st.SearchStrategy:
    if override is not None:
        custom = override(f, version)
        if custom is not None:
            return custom
    if f.struct is not None:
        elem = struct_strategy(f.struct, version, override, depth + 1)
    else:
        elem = scalar_strategy(f.elem)
    if f.is_array:
        # nested arrays shrink with depth so big messages (Fetch, Metadata) stay small
        base = st.lists(elem, max_size=max(1, MAX_ITEMS - depth))
    else:
        base = elem
    if version in f.nullable:
        return st.one_of(st.none(), base)
    if f.struct is not None and not f.is_array and version in f.tagged:
        # a tagged struct equal to its default instance is never written (as in Kafka): absent
        # is None here, so generate None or a non-default instance
        default = f.struct.cls()
        return st.one_of(st.none(), base.filter(lambda x: x != default))
    return base


def struct_strategy(sdef: StructDef, version: int, override=None, depth: int = 0):
    kwargs = {}
    for f in sdef.fields:
        if version in f.versions:
            kwargs[f.attr] = field_strategy(f, version, override, depth)
    return st.builds(sdef.cls, **kwargs)


def instances(cls, version: int, override=None) -> st.SearchStrategy:
    """Random instances of a top-level message class valid at version."""
    return struct_strategy(cls._def.root, version, override)


def cases(messages=MESSAGES):
    out = []
    for name, cls in sorted(messages.items()):
        low, high = cls.valid_versions
        for version in range(low, high + 1):
            out.append(pytest.param(cls, version, id=f"{name}-v{version}"))
    return out


SETTINGS = settings(max_examples=15, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def check_roundtrip(cls, version, obj):
    data = obj.encode(version)
    assert isinstance(data, bytes)
    back = cls.decode(data, version)
    assert back == obj, f"{cls.__name__} v{version}\n  in:  {obj!r}\n  out: {back!r}"
    # and the encoding is canonical: decode -> encode reproduces the same bytes
    assert back.encode(version) == data
    # decode_from with an offset and trailing data reads exactly the encoding
    back2, end = cls.decode_from(b"\x07\x07" + data + b"\x09", version, offset=2)
    assert back2 == obj and end == 2 + len(data)


@pytest.mark.parametrize("cls,version", cases())
def test_roundtrip(cls, version):
    @SETTINGS
    @given(instances(cls, version))
    def run(obj):
        check_roundtrip(cls, version, obj)

    run()


@pytest.mark.parametrize("cls,version", cases())
def test_defaults_roundtrip(cls, version):
    """An instance built from defaults only (nested required structs filled in) round-trips."""
    obj = _default_instance(cls._def.root, version)
    check_roundtrip(cls, version, obj)


def _default_instance(sdef: StructDef, version: int):
    obj = sdef.cls()
    for f in sdef.fields:
        if version in f.versions and f.struct is not None and not f.is_array \
                and version not in f.nullable and version not in f.tagged:
            setattr(obj, f.attr, _default_instance(f.struct, version))
    return obj


def test_default_tagged_struct_is_omitted():
    """Kafka writes a tagged non-nullable struct only when it differs from its default."""
    from protocol.messages import FetchRequest, FetchResponse

    plain = FetchRequest(replica_state=None, topics=[]).encode(17)
    assert FetchRequest(replica_state=FetchRequest.ReplicaState(), topics=[]).encode(17) == plain
    assert FetchRequest.decode(plain, 17).replica_state is None
    with_state = FetchRequest(replica_state=FetchRequest.ReplicaState(replica_id=3), topics=[])
    assert with_state.encode(17) != plain
    assert FetchRequest.decode(with_state.encode(17), 17) == with_state
    part = FetchResponse.PartitionData(diverging_epoch=FetchResponse.EpochEndOffset())
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(partitions=[part])])
    back = FetchResponse.decode(resp.encode(12), 12)
    assert back.responses[0].partitions[0].diverging_epoch is None


def test_every_api_in_the_spec_table_is_covered():
    """Issue 2's table: API key -> versions the codec must know."""
    from protocol.messages import APIS

    table = {0: (0, 12), 1: (4, 12), 2: (1, 11), 3: (0, 13), 8: (2, 9), 9: (1, 9), 10: (0, 6),
             11: (0, 9), 12: (0, 4), 13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1),
             18: (0, 4), 19: (2, 7), 20: (1, 6), 22: (0, 5), 32: (1, 4), 36: (0, 2), 37: (0, 3),
             42: (0, 2), 47: (0, 0), 60: (0, 2), 68: (0, 1), 69: (0, 1)}
    for key, (low, high) in table.items():
        api = APIS[key]
        assert api.min_version <= low and api.max_version >= high, api.name
        assert api.response.valid_versions[0] <= low and api.response.valid_versions[1] >= high


def test_int_formats_cover_every_width():
    # the strategy table and the codec agree on which scalar types exist
    assert set(INT_RANGES) | {"bool", "float64"} == set(INT_FORMATS)
