"""Differential tests against two independent codecs installed as test dependencies.

* kafka-python 3.x (``kafka.protocol.*``): its own compiler of Kafka's JSON definitions, a different
  Kafka release than ours. Every message and version both know.
* kio (PyPI ``kio``): dataclasses generated from Kafka's definitions, native readers. Every message
  and version it has; this is the only independent check for ConsumerGroupHeartbeat,
  ConsumerGroupDescribe, the consumer protocol subscription/assignment and the headers, which
  kafka-python does not model as messages.

For random instances (the round-trip strategies), both directions: ours encode -> theirs decode ->
same values; theirs encode -> ours decode -> same values; and the two encodings byte-for-byte equal
(Kafka's encoding is canonical: tagged fields in tag order, defaults omitted, so equal values must
give equal bytes). Fields are paired by position among the fields present at the version, so
renames (kio's ``session_timeout`` for ``SessionTimeoutMs``) do not matter, and a schema difference
between the libraries shows up as a count mismatch.

Not covered by either library: Produce v0-2 (both start at v3), and the __consumer_offsets records
(OffsetCommitKey/Value, GroupMetadataKey/Value). Those rely on the round-trip tests only.
"""
from __future__ import annotations

import dataclasses
import datetime
import importlib
import inspect
import io
import pkgutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.messages import MESSAGES
from protocol.schema import ZERO_UUID, StructDef, snake_case
from test_codec_roundtrip import SETTINGS, instances

# ------------------------------------------------------------------------------ kafka-python

import kafka.protocol
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.codecs import BitField

INT32_MIN = -(1 << 31)


def _kafka_python_classes() -> dict[str, type]:
    found = {}
    for mod in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        if ".old" in mod.name or "generate_stubs" in mod.name:
            continue
        module = importlib.import_module(mod.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, ApiMessage) and obj is not ApiMessage \
                    and getattr(obj, "_json", None) is not None:
                found[name] = obj
    return found


KP = _kafka_python_classes()


def kp_cases():
    out = []
    for name, cls in sorted(MESSAGES.items()):
        kp = KP.get(name)
        if kp is None:
            continue
        low = max(cls.valid_versions[0], kp.valid_versions[0])
        high = min(cls.valid_versions[1], kp.valid_versions[1])
        for v in range(low, high + 1):
            out.append(pytest.param(cls, kp, v, id=f"{name}-v{v}"))
    return out


def _kp_fields(kp_struct, version):
    return [f for f in kp_struct.fields.values() if f.for_version_q(version)]


def _ours_fields(sdef: StructDef, version):
    return [f for f in sdef.fields if version in f.versions]


def to_kp(obj, sdef: StructDef, kp_struct, version, top_cls=None):
    ours, theirs = _ours_fields(sdef, version), _kp_fields(kp_struct, version)
    assert len(ours) == len(theirs), (sdef.name, version, [f.attr for f in ours],
                                      [f.name for f in theirs])
    kwargs = {}
    for f, k in zip(ours, theirs):
        value = getattr(obj, f.attr)
        if value is not None and f.struct is not None:
            if f.is_array:
                value = [to_kp(x, f.struct, k, version) for x in value]
            else:
                value = to_kp(value, f.struct, k, version)
        elif getattr(k, "_type", None) is BitField:
            # kafka-python turns the int32 "authorized operations" bitfield into a set of bit
            # numbers; INT32_MIN (only bit 31: "not requested") is None
            value = None if value == INT32_MIN else \
                {b for b in range(32) if (value & 0xFFFFFFFF) >> b & 1}
        elif f.elem == "uuid" and value == ZERO_UUID:
            # kafka-python's all-zero UUID is None (its default): a zero UUID object would be
            # "not the default" to it and be written as a tagged field, which Kafka does not do
            value = k.default
        elif isinstance(value, memoryview):
            value = bytes(value)
        kwargs[k.name] = value
    if top_cls is not None:
        return top_cls(version=version, **kwargs)
    return kp_struct.data_class(version=version, **kwargs)


def from_kp(kobj, sdef: StructDef, kp_struct, version):
    ours, theirs = _ours_fields(sdef, version), _kp_fields(kp_struct, version)
    assert len(ours) == len(theirs)
    kwargs = {}
    for f, k in zip(ours, theirs):
        value = getattr(kobj, k.name)
        if value is not None and f.struct is not None:
            if f.is_array:
                value = [from_kp(x, f.struct, k, version) for x in value]
            else:
                value = from_kp(value, f.struct, k, version)
        elif getattr(k, "_type", None) is BitField:
            if value is None:
                value = INT32_MIN
            else:
                value = sum(1 << b for b in value)
                value = value - (1 << 32) if value >= 1 << 31 else value
        elif f.elem == "uuid" and value is None:
            value = ZERO_UUID  # kafka-python reads the all-zero UUID as None
        elif isinstance(value, (bytearray, memoryview)):
            value = bytes(value)
        kwargs[f.attr] = value
    return sdef.cls(**kwargs)


def kp_override(cls):
    """kafka-python, as a client, decodes an ApiVersionsResponse with a non-zero error code as v0
    whatever the version (the broker answers an unsupported version with v0): so those values
    only go through it with error code 0. Our codec is the broker side and encodes what it is
    given; the header/version choice is the caller's."""
    if cls.__name__ != "ApiVersionsResponse":
        return None
    return lambda f, v: st.just(0) if f.attr == "error_code" and f.type == "int16" else None


@pytest.mark.parametrize("cls,kp,version", kp_cases())
def test_kafka_python(cls, kp, version):
    @SETTINGS
    @given(instances(cls, version, override=kp_override(cls)))
    def run(obj):
        ours = obj.encode(version)
        kobj = to_kp(obj, cls._def.root, kp._struct, version, top_cls=kp)
        theirs = bytes(kobj.encode(version=version))
        # theirs -> ours
        assert cls.decode(theirs, version) == obj
        # ours -> theirs
        decoded = kp.decode(ours, version=version)
        assert from_kp(decoded, cls._def.root, kp._struct, version) == obj
        # canonical encoding: byte for byte
        assert theirs == ours

    run()


def test_kafka_python_covers_the_client_apis():
    names = {p.values[0].__name__ for p in kp_cases()}
    for api in ("Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch",
                "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup",
                "DescribeGroups", "ListGroups", "SaslHandshake", "ApiVersions", "CreateTopics",
                "DeleteTopics", "InitProducerId", "DescribeConfigs", "SaslAuthenticate",
                "CreatePartitions", "DeleteGroups", "OffsetDelete", "DescribeCluster"):
        assert api + "Request" in names and api + "Response" in names, api


# ------------------------------------------------------------------------------ kio

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, classify_field
from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import i32Timedelta, i64Timedelta

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MS = datetime.timedelta(milliseconds=1)


def kio_class(name: str, version: int):
    if name.endswith("Request"):
        base, leaf = name[:-7], "request"
    elif name.endswith("Response"):
        base, leaf = name[:-8], "response"
    else:
        base, leaf = name, "data"
    if name in ("RequestHeader", "ResponseHeader"):
        leaf = "header"
    try:
        module = importlib.import_module(f"kio.schema.{snake_case(base)}.v{version}.{leaf}")
    except ImportError:
        return None
    return getattr(module, name, None)


def kio_cases():
    out = []
    for name, cls in sorted(MESSAGES.items()):
        low, high = cls.valid_versions
        for v in range(low, high + 1):
            kcls = kio_class(name, v)
            if kcls is not None:
                out.append(pytest.param(cls, kcls, v, id=f"{name}-v{v}"))
    return out


def _kio_pairs(sdef: StructDef, kcls, version):
    ours, theirs = _ours_fields(sdef, version), dataclasses.fields(kcls)
    assert len(ours) == len(theirs), (sdef.name, version, [f.attr for f in ours],
                                      [f.name for f in theirs])
    return list(zip(ours, theirs))


def _kio_nested(kf):
    shape = classify_field(kf)
    assert isinstance(shape, (EntityField, EntityTupleField))
    return shape.type_


def _kafka_type(kf):
    return kf.metadata.get("kafka_type")


def kio_override(sdef: StructDef, kcls, version):
    """Field -> strategy limited to what kio's typed values can carry.

    kio maps error codes to an enum of known codes, *_ms fields to timedelta/datetime (datetimes
    cannot be negative or past year 9999; it converts timedeltas through float seconds, which
    is inexact beyond 2**53 microseconds): a kio limitation, not a wire-format difference.
    """
    table = {}

    def walk(sd, kc):
        for f, kf in _kio_pairs(sd, kc, version):
            if f.struct is not None:
                if (f.struct.name, id(kc)) not in seen:
                    seen.add((f.struct.name, id(kc)))
                    walk(f.struct, _kio_nested(kf))
                continue
            kt = _kafka_type(kf)
            if kt == "error_code":
                table[id(f)] = st.sampled_from(sorted(e.value for e in ErrorCode))
            elif kt == "timedelta_i64":
                table[id(f)] = st.integers(-(1 << 40), 1 << 40)
            elif kt == "datetime_i64":
                s = st.integers(0, 1 << 40)
                table[id(f)] = st.one_of(st.just(-1), s) if version in f.nullable else s

    seen: set = set()
    walk(sdef, kcls)

    def override(f, v):
        s = table.get(id(f))
        if s is not None and f.is_array:
            return st.lists(s, max_size=3)
        return s

    return override


def _to_kio_value(kt, value, nullable):
    if kt == "error_code":
        return ErrorCode(value)
    if kt == "timedelta_i32":
        return i32Timedelta.parse(datetime.timedelta(milliseconds=value))
    if kt == "timedelta_i64":
        return i64Timedelta.parse(datetime.timedelta(milliseconds=value))
    if kt == "datetime_i64":
        if value == -1 and nullable:
            return None
        return tz_aware_from_i64(value)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _from_kio_value(kt, value):
    if kt == "error_code":
        return int(value.value)
    if kt in ("timedelta_i32", "timedelta_i64"):
        return value // _MS
    if kt == "datetime_i64":
        return -1 if value is None else (value - _EPOCH) // _MS
    if kt == "uuid" and value is None:
        return ZERO_UUID
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def to_kio(obj, sdef: StructDef, kcls, version):
    kwargs = {}
    for f, kf in _kio_pairs(sdef, kcls, version):
        value = getattr(obj, f.attr)
        nullable = version in f.nullable
        if value is None and f.struct is not None and version in f.tagged and not nullable:
            # absent tagged struct: None here, kio (like Kafka) uses a default instance
            if kf.default is not dataclasses.MISSING:
                value = kf.default
            elif kf.default_factory is not dataclasses.MISSING:
                value = kf.default_factory()
            else:
                value = to_kio(f.struct.cls(), f.struct, _kio_nested(kf), version)
        elif value is None:
            pass
        elif f.struct is not None:
            nested = _kio_nested(kf)
            if f.is_array:
                value = tuple(to_kio(x, f.struct, nested, version) for x in value)
            else:
                value = to_kio(value, f.struct, nested, version)
        elif f.is_array:
            value = tuple(_to_kio_value(_kafka_type(kf), x, False) for x in value)
        elif f.elem == "uuid" and value == ZERO_UUID:
            # kio's all-zero UUID is None; its tagged-field default may be either spelling
            value = None if kf.default is dataclasses.MISSING else kf.default
        else:
            value = _to_kio_value(_kafka_type(kf), value, nullable)
        kwargs[kf.name] = value
    return kcls(**kwargs)


def from_kio(kobj, sdef: StructDef, kcls, version):
    kwargs = {}
    for f, kf in _kio_pairs(sdef, kcls, version):
        value = getattr(kobj, kf.name)
        kt = _kafka_type(kf)
        if value is None:
            value = _from_kio_value(kt, value)
        elif f.struct is not None:
            nested = _kio_nested(kf)
            if f.is_array:
                value = [from_kio(x, f.struct, nested, version) for x in value]
            else:
                value = from_kio(value, f.struct, nested, version)
                if version in f.tagged and value == f.struct.cls():
                    value = None  # the default instance of a tagged struct is None here
        elif f.is_array:
            value = [_from_kio_value(kt, x) for x in value]
        else:
            value = _from_kio_value(kt, value)
        kwargs[f.attr] = value
    return sdef.cls(**kwargs)


def kio_encode(kcls, kobj) -> bytes:
    buf = io.BytesIO()
    entity_writer(kcls)(buf, kobj)
    return buf.getvalue()


def kio_decode(kcls, data: bytes):
    value, size = entity_reader(kcls)(data, 0)
    assert size == len(data), f"kio read {size} of {len(data)} bytes"
    return value


@pytest.mark.parametrize("cls,kcls,version", kio_cases())
def test_kio(cls, kcls, version):
    root = cls._def.root

    @SETTINGS
    @given(instances(cls, version, override=kio_override(root, kcls, version)))
    def run(obj):
        ours = obj.encode(version)
        kobj = to_kio(obj, root, kcls, version)
        theirs = kio_encode(kcls, kobj)
        assert cls.decode(theirs, version) == obj
        assert from_kio(kio_decode(kcls, ours), root, kcls, version) == obj
        assert theirs == ours

    run()


def test_kio_covers_what_kafka_python_does_not():
    kp_names = {p.values[0].__name__ for p in kp_cases()}
    kio_names = {p.values[0].__name__ for p in kio_cases()}
    for name in ("ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse",
                 "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse",
                 "ConsumerProtocolSubscription", "ConsumerProtocolAssignment",
                 "RequestHeader", "ResponseHeader"):
        assert name not in kp_names and name in kio_names, name
