"""Compile Kafka's message definitions (protocol/schemas.json) into classes and fast codecs.

Each message and each of its nested structs becomes a plain class with ``__slots__`` (field names in
snake_case). For every (struct, version) the first use generates straight-line Python source for a
decoder and an encoder (consecutive fixed-width fields share one ``struct`` call, zero tagged fields
is a single byte) and compiles it once. The definitions are data; this module is the only place
that knows how they map to bytes.

Every decode failure raises :class:`DecodeError` saying what and where. Lengths and counts are
checked against the bytes that remain before anything is allocated.
"""
from __future__ import annotations

import json
import keyword
import pathlib
import re
import struct
import threading
import uuid
from collections.abc import Mapping

_SCHEMAS = pathlib.Path(__file__).with_name("schemas.json")

INT_FORMATS = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
               "int64": "q", "float64": "d", "bool": "?"}
ZERO_UUID = uuid.UUID(int=0)


class DecodeError(ValueError):
    """Bytes that are not a valid encoding of the message they claim to be."""


# ---------------------------------------------------------------------------- versions, names

class VersionRange:
    __slots__ = ("low", "high")

    def __init__(self, spec) -> None:
        spec = str(spec).strip()
        if spec in ("none", ""):
            self.low, self.high = 1, 0
        elif spec.endswith("+"):
            self.low, self.high = int(spec[:-1]), 1 << 15
        elif "-" in spec:
            low, high = spec.split("-")
            self.low, self.high = int(low), int(high)
        else:
            self.low = self.high = int(spec)

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high


_SNAKE: dict[str, str] = {}


def snake_case(name: str) -> str:
    """``ProducerId`` -> ``producer_id``; remembered, as the same names recur in every message."""
    found = _SNAKE.get(name)
    if found is None:
        found = _SNAKE[name] = _snake_case(name)
    return found


def _snake_case(name: str) -> str:
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    name = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    name = name.lower()
    return name + "_" if keyword.iskeyword(name) else name


# ---------------------------------------------------------------------------- runtime helpers

_U8 = [bytes([i]) for i in range(128)]


def write_uvarint(value: int) -> bytes:
    if value < 128:
        return _U8[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """Unsigned varint at pos -> (value, next position). At most 5 bytes (32-bit)."""
    value = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise DecodeError(f"unsigned varint longer than 5 bytes at byte {pos}")


def _fail(what: str, where: str, pos: int):
    raise DecodeError(f"{what} in {where} at byte {pos}")


def _skip_tags(buf, pos: int, end: int, where: str) -> int:
    try:
        count, pos = read_uvarint(buf, pos)
        for _ in range(count):
            _tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            if size > end - pos:
                _fail(f"tagged field of {size} bytes exceeds the {end - pos} that remain", where,
                      pos)
            pos += size
    except IndexError:  # a varint running off the end (framing calls this outside decode)
        _fail("truncated tagged fields", where, pos)
    return pos


_S = {}


def _struct(fmt: str) -> struct.Struct:
    s = _S.get(fmt)
    if s is None:
        s = _S[fmt] = struct.Struct(">" + fmt)
    return s


# ---------------------------------------------------------------------------- schema model

class Field:
    __slots__ = ("name", "attr", "type", "versions", "nullable", "tagged", "tag", "default",
                 "struct", "is_array", "elem", "flexible_override")

    def __init__(self, spec: dict, structs: dict, owner: str) -> None:
        self.name = spec["name"]
        self.attr = snake_case(spec["name"])
        self.type = spec["type"]
        self.versions = VersionRange(spec.get("versions", "0+"))
        self.nullable = VersionRange(spec.get("nullableVersions", "none"))
        self.tagged = VersionRange(spec.get("taggedVersions", "none"))
        self.tag = spec.get("tag")
        fo = spec.get("flexibleVersions")
        self.flexible_override = VersionRange(fo) if fo is not None else None
        self.is_array = self.type.startswith("[]")
        self.elem = self.type[2:] if self.is_array else self.type
        self.struct = None
        if self.elem not in INT_FORMATS and self.elem not in ("string", "bytes", "records", "uuid"):
            if "fields" in spec:
                self.struct = StructDef(self.elem, spec["fields"], structs, owner)
                structs[self.elem] = self.struct
            else:
                self.struct = self.elem  # a common struct, resolved after parsing
        self.default = self._default(spec.get("default"))

    def _default(self, raw):
        if self.is_array:
            return None if raw == "null" else []
        t = self.elem
        if self.struct is not None:
            return None
        if raw == "null":
            return None
        if t == "bool":
            return str(raw).lower() == "true" if raw is not None else False
        if t in INT_FORMATS:
            if raw is None or raw == "":
                return 0
            if t == "float64":
                return float(raw)
            return int(str(raw), 0)
        if t == "string":
            return "" if raw is None else str(raw)
        if t == "uuid":
            return ZERO_UUID
        if t == "bytes":
            return b""
        return None  # records

    def is_flexible(self, version: int, struct_flexible: bool) -> bool:
        if self.flexible_override is not None:
            return struct_flexible and version in self.flexible_override
        return struct_flexible


class StructDef:
    __slots__ = ("name", "fields", "cls", "owner")

    def __init__(self, name: str, fields: list, structs: dict, owner: str) -> None:
        self.name = name
        self.owner = owner
        self.fields = [Field(f, structs, owner) for f in fields]
        self.cls = None


class MessageDef:
    def __init__(self, spec: dict) -> None:
        self.name = spec["name"]
        self.kind = spec["type"]
        self.api_key = spec.get("apiKey")
        self.valid = VersionRange(spec.get("validVersions", "0"))
        self.flexible = VersionRange(spec.get("flexibleVersions", "none"))
        self.structs: dict[str, StructDef] = {}
        for common in spec.get("commonStructs", []):
            self.structs[common["name"]] = StructDef(
                common["name"], common["fields"], self.structs, self.name)
        self.root = StructDef(self.name, spec["fields"], self.structs, self.name)
        for sdef in [self.root, *self.structs.values()]:
            for f in sdef.fields:
                if isinstance(f.struct, str):
                    f.struct = self.structs[f.struct]


# ---------------------------------------------------------------------------- classes

class Message:
    """Base of every generated message and struct class."""

    __slots__ = ()
    _fields: tuple = ()

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and all(
            getattr(self, f) == getattr(other, f) for f in self._fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict:
        def plain(v):
            if isinstance(v, Message):
                return v.to_dict()
            if isinstance(v, list):
                return [plain(x) for x in v]
            return v
        return {f: plain(getattr(self, f)) for f in self._fields}


def _make_class(sdef: StructDef, namespace: dict) -> type:
    attrs = []
    for f in sdef.fields:
        if f.attr not in attrs:
            attrs.append(f.attr)

    def __init__(self, *args, **kwargs):
        """The first instance compiles the class's real ``__init__`` (one keyword per field,
        with Kafka's defaults) and puts it in this one's place: most classes are never
        instantiated by a broker, and compiling them all cost tens of ms at every start."""
        init = _compile_init(sdef, attrs, namespace)
        cls.__init__ = init
        init(self, *args, **kwargs)

    cls = type(sdef.name, (Message,), {
        "__slots__": tuple(attrs), "_fields": tuple(attrs), "__init__": __init__,
        "__qualname__": sdef.name if sdef.owner == sdef.name else f"{sdef.owner}.{sdef.name}",
    })
    sdef.cls = cls
    return cls


def _compile_init(sdef: StructDef, attrs: list[str], namespace: dict):
    defaults = {}
    for f in sdef.fields:
        defaults.setdefault(f.attr, f)
    params, body = [], []
    for a in attrs:
        f = defaults[a]
        if f.is_array and f.default is not None:
            params.append(f"{a}=_MISSING")
            body.append(f"    self.{a} = [] if {a} is _MISSING else {a}")
        else:
            params.append(f"{a}={_const(f.default, namespace)}")
            body.append(f"    self.{a} = {a}")
    src = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or "    pass") + "\n"
    ns = dict(namespace)
    exec(compile(src, f"<{sdef.name}.__init__>", "exec"), ns)
    return ns["__init__"]


_MISSING = object()


def _const(value, namespace: dict) -> str:
    if isinstance(value, uuid.UUID):
        return "_ZERO_UUID"
    return repr(value)


# ---------------------------------------------------------------------------- code generation

class _Gen:
    """Generates the decoder and encoder source for one struct at one version."""

    def __init__(self, codec: "Codec", sdef: StructDef, version: int, flexible: bool) -> None:
        self.codec = codec
        self.sdef = sdef
        self.version = version
        self.flexible = flexible
        self.lines: list[str] = []
        self.counter = 0
        self.where = f"{sdef.owner} v{version}" if sdef.owner == sdef.name else \
            f"{sdef.owner}.{sdef.name} v{version}"

    def tmp(self, prefix="t") -> str:
        self.counter += 1
        return f"_{prefix}{self.counter}"

    # -- decoding

    def decode_source(self, fname: str) -> str:
        sdef, v = self.sdef, self.version
        L = self.lines
        L.append(f"def {fname}(buf, pos):")
        L.append("    end = len(buf)")
        present = [f for f in sdef.fields if v in f.versions and not (v in f.tagged)]
        tagged = [f for f in sdef.fields if v in f.versions and v in f.tagged]
        locals_: dict[str, str] = {}
        run: list[tuple[Field, str]] = []

        def flush_run(indent):
            if not run:
                return
            fmt = "".join(INT_FORMATS[f.elem] for f, _ in run)
            s = self.codec.ref_struct(fmt)
            names = ", ".join(n for _, n in run)
            L.append(f"{indent}{names}{',' if len(run) == 1 else ''} = {s}.unpack_from(buf, pos)")
            L.append(f"{indent}pos += {struct.calcsize('>' + fmt)}")
            run.clear()

        for f in present:
            var = self.tmp("v")
            locals_[f.attr] = var
            if not f.is_array and f.elem in INT_FORMATS:
                run.append((f, var))
                continue
            flush_run("    ")
            self.decode_field(f, var, "    ")
        flush_run("    ")
        if self.flexible:
            for f in tagged:
                var = self.tmp("v")
                locals_[f.attr] = var
                L.append(f"    {var} = {self.default_expr(f)}")
            L.append("    if buf[pos] == 0:")
            L.append("        pos += 1")
            L.append("    else:")
            if tagged:
                L.append("        _n, pos = read_uvarint(buf, pos)")
                L.append("        for _ in range(_n):")
                L.append("            _tag, pos = read_uvarint(buf, pos)")
                L.append("            _size, pos = read_uvarint(buf, pos)")
                L.append("            if _size > end - pos:")
                L.append(f"                _fail('tagged field exceeds the frame', {self.where!r}, pos)")
                L.append("            _start = pos")
                first = True
                for f in tagged:
                    L.append(f"            {'if' if first else 'elif'} _tag == {f.tag}:")
                    first = False
                    self.decode_field(f, locals_[f.attr], "                ")
                    # a known tag's value must fill its declared size exactly: no overrun into
                    # the next tag, no unread bytes
                    L.append("                if pos != _start + _size:")
                    L.append(f"                    _fail(f'tagged field {f.tag} ({f.attr}) of {{_size}} bytes "
                             f"has a value of {{pos - _start}}', {self.where!r}, _start)")
                L.append("            pos = _start + _size")
            else:
                L.append(f"        pos = _skip_tags(buf, pos, end, {self.where!r})")
        args = []
        for a in sdef.cls._fields:
            if a in locals_:
                args.append(locals_[a])
            else:
                f = next(x for x in sdef.fields if x.attr == a)
                args.append(self.default_expr(f))
        # object.__new__ and slot stores: no __init__ call (a third faster for small structs)
        L.append(f"    _o = _new({self.codec.ref_class(sdef)})")
        for a, value in zip(sdef.cls._fields, args):
            L.append(f"    _o.{a} = {value}")
        L.append("    return _o, pos")
        return "\n".join(L) + "\n"

    def default_expr(self, f: Field) -> str:
        if f.is_array and f.default is not None:
            return "[]"
        return _const(f.default, {})

    def decode_field(self, f: Field, var: str, ind: str) -> None:
        L = self.lines
        v = self.version
        flex = f.is_flexible(v, self.flexible)
        nullable = v in f.nullable
        where = f"{self.where} field {f.attr}"
        if f.is_array:
            n = self.tmp("n")
            self.decode_length(n, flex, ind)
            L.append(f"{ind}if {n} < 0:")
            if nullable:
                L.append(f"{ind}    {var} = None")
            else:
                L.append(f"{ind}    _fail('null array', {where!r}, pos)")
            L.append(f"{ind}else:")
            L.append(f"{ind}    if {n} > end - pos:")
            L.append(f"{ind}        _fail(f'array of {{{n}}} items exceeds the {{end - pos}} bytes that remain', {where!r}, pos)")
            if f.elem in INT_FORMATS:
                size = struct.calcsize(">" + INT_FORMATS[f.elem])
                L.append(f"{ind}    {var} = list(_unpack_from('>%d{INT_FORMATS[f.elem]}' % {n}, buf, pos))")
                L.append(f"{ind}    pos += {size} * {n}")
            else:
                L.append(f"{ind}    {var} = []")
                L.append(f"{ind}    _app = {var}.append")
                L.append(f"{ind}    for _ in range({n}):")
                ev = self.tmp("e")
                self.decode_scalar(f, ev, ind + "        ", flex, False, where)
                L.append(f"{ind}        _app({ev})")
            return
        self.decode_scalar(f, var, ind, flex, nullable, where)

    def decode_length(self, n: str, flex: bool, ind: str) -> None:
        L = self.lines
        if flex:
            L.append(f"{ind}{n} = buf[pos]")
            L.append(f"{ind}pos += 1")
            L.append(f"{ind}if {n} > 127:")
            L.append(f"{ind}    {n}, pos = read_uvarint(buf, pos - 1)")
            L.append(f"{ind}{n} -= 1")
        else:
            L.append(f"{ind}{n}, = _I32.unpack_from(buf, pos)")
            L.append(f"{ind}pos += 4")

    def decode_scalar(self, f: Field, var: str, ind: str, flex: bool, nullable: bool, where):
        L = self.lines
        t = f.elem
        if f.struct is not None:
            fn = self.codec.ref_decoder(f.struct, self.version, self.flexible)
            if nullable:
                L.append(f"{ind}if buf[pos] == 255:")
                L.append(f"{ind}    {var} = None")
                L.append(f"{ind}    pos += 1")
                L.append(f"{ind}else:")
                L.append(f"{ind}    {var}, pos = {fn}(buf, pos + 1)")
            else:
                L.append(f"{ind}{var}, pos = {fn}(buf, pos)")
            return
        if t in INT_FORMATS:
            fmt = INT_FORMATS[t]
            L.append(f"{ind}{var}, = {self.codec.ref_struct(fmt)}.unpack_from(buf, pos)")
            L.append(f"{ind}pos += {struct.calcsize('>' + fmt)}")
            return
        if t == "uuid":
            L.append(f"{ind}if end - pos < 16:")
            L.append(f"{ind}    _fail('truncated uuid', {where!r}, pos)")
            L.append(f"{ind}{var} = _UUID(bytes=bytes(buf[pos:pos + 16]))")
            L.append(f"{ind}pos += 16")
            return
        n = self.tmp("n")
        e = self.tmp("x")

        def value(lo: str, hi: str) -> str:
            if t == "string":  # buf is bytes or bytearray (decode_from ensures it)
                return f"buf[{lo}:{hi}].decode()"
            if t == "bytes":
                return f"bytes(buf[{lo}:{hi}])"
            return f"memoryview(buf)[{lo}:{hi}]"  # records: a view into the frame, no copy

        if flex:
            # fast path: a one-byte compact length (value 1..127, i.e. 0..126 bytes, non-null)
            # (the byte is length + 1, so the value ends at pos + byte)
            L.append(f"{ind}{n} = buf[pos]")
            L.append(f"{ind}if 0 < {n} < 128:")
            L.append(f"{ind}    {e} = pos + {n}")
            L.append(f"{ind}    if {e} > end:")
            L.append(f"{ind}        _fail(f'length {{{n} - 1}} exceeds the {{end - pos - 1}} bytes that remain', {where!r}, pos + 1)")
            L.append(f"{ind}    {var} = {value('pos + 1', e)}")
            L.append(f"{ind}    pos = {e}")
            if nullable:  # and a one-byte null
                L.append(f"{ind}elif {n} == 0:")
                L.append(f"{ind}    {var} = None")
                L.append(f"{ind}    pos += 1")
            L.append(f"{ind}else:")
            L.append(f"{ind}    {n}, pos = read_uvarint(buf, pos)")
            L.append(f"{ind}    {n} -= 1")
            slow = ind + "    "
        else:
            size = 2 if t == "string" else 4
            L.append(f"{ind}{n}, = {'_I16' if t == 'string' else '_I32'}.unpack_from(buf, pos)")
            L.append(f"{ind}if {n} >= 0:")
            L.append(f"{ind}    {e} = pos + {size} + {n}")
            L.append(f"{ind}    if {e} > end:")
            L.append(f"{ind}        _fail(f'length {{{n}}} exceeds the {{end - pos - {size}}} bytes that remain', {where!r}, pos + {size})")
            L.append(f"{ind}    {var} = {value(f'pos + {size}', e)}")
            L.append(f"{ind}    pos = {e}")
            L.append(f"{ind}else:")
            L.append(f"{ind}    pos += {size}")
            slow = ind + "    "
        L.append(f"{slow}if {n} < 0:")
        if nullable:
            L.append(f"{slow}    {var} = None")
        else:
            L.append(f"{slow}    _fail('null or negative length', {where!r}, pos)")
        L.append(f"{slow}else:")
        L.append(f"{slow}    if {n} > end - pos:")
        L.append(f"{slow}        _fail(f'length {{{n}}} exceeds the {{end - pos}} bytes that remain', {where!r}, pos)")
        L.append(f"{slow}    {var} = {value('pos', f'pos + {n}')}")
        L.append(f"{slow}    pos += {n}")

    # -- encoding

    def encode_source(self, fname: str) -> str:
        sdef, v = self.sdef, self.version
        L = self.lines
        L.append(f"def {fname}(o, w):")
        present = [f for f in sdef.fields if v in f.versions and not (v in f.tagged)]
        tagged = [f for f in sdef.fields if v in f.versions and v in f.tagged]
        run: list[str] = []
        fmts: list[str] = []

        def flush_run():
            if not fmts:
                return
            fmt = "".join(fmts)
            L.append(f"    w({self.codec.ref_struct(fmt)}.pack({', '.join(run)}))")
            run.clear()
            fmts.clear()

        for f in present:
            if not f.is_array and f.elem in INT_FORMATS:
                fmts.append(INT_FORMATS[f.elem])
                run.append(f"o.{f.attr}")
                continue
            flush_run()
            self.encode_field(f, f"o.{f.attr}", "    ")
        if self.flexible and not tagged:
            fmts.append("B")
            run.append("0")
        flush_run()
        if self.flexible and tagged:
            L.append("    _tags = []")
            for f in sorted(tagged, key=lambda x: x.tag):
                if f.struct is not None and not f.is_array and v not in f.nullable:
                    # Kafka's default for a tagged non-nullable struct is an instance with default
                    # fields, never written: omit it when None or equal to that instance
                    dflt = self.codec.ref_default_struct(f.struct)
                    L.append(f"    if o.{f.attr} is not None and o.{f.attr} != {dflt}:")
                else:
                    L.append(f"    if o.{f.attr} != {self.default_expr(f)}:")
                L.append("        _sub = []")
                L.append("        _w = w")
                L.append("        w = _sub.append")
                self.encode_field(f, f"o.{f.attr}", "        ")
                L.append("        w = _w")
                L.append(f"        _tags.append(({f.tag}, b''.join(_sub)))")
            L.append("    w(write_uvarint(len(_tags)))")
            L.append("    for _tag, _data in _tags:")
            L.append("        w(write_uvarint(_tag))")
            L.append("        w(write_uvarint(len(_data)))")
            L.append("        w(_data)")
        if len(L) == 1:
            L.append("    pass")
        return "\n".join(L) + "\n"

    def encode_field(self, f: Field, expr: str, ind: str) -> None:
        L = self.lines
        v = self.version
        flex = f.is_flexible(v, self.flexible)
        nullable = v in f.nullable
        if f.is_array:
            x = self.tmp("a")
            L.append(f"{ind}{x} = {expr}")
            L.append(f"{ind}if {x} is None:")
            L.append(f"{ind}    w({'_U8[0]' if flex else '_NULL32'})")
            L.append(f"{ind}else:")
            if flex:
                L.append(f"{ind}    w(write_uvarint(len({x}) + 1))")
            else:
                L.append(f"{ind}    w(_I32.pack(len({x})))")
            if f.elem in INT_FORMATS:
                L.append(f"{ind}    w(_pack('>%d{INT_FORMATS[f.elem]}' % len({x}), *{x}))")
            else:
                e = self.tmp("e")
                L.append(f"{ind}    for {e} in {x}:")
                self.encode_scalar(f, e, ind + "        ", flex, False)
            return
        self.encode_scalar(f, expr, ind, flex, nullable)

    def encode_scalar(self, f: Field, expr: str, ind: str, flex: bool, nullable: bool) -> None:
        L = self.lines
        t = f.elem
        if f.struct is not None:
            fn = self.codec.ref_encoder(f.struct, self.version, self.flexible)
            if nullable:
                L.append(f"{ind}if {expr} is None:")
                L.append(f"{ind}    w(b'\\xff')")
                L.append(f"{ind}else:")
                L.append(f"{ind}    w(b'\\x01')")
                L.append(f"{ind}    {fn}({expr}, w)")
            else:
                L.append(f"{ind}{fn}({expr}, w)")
            return
        if t in INT_FORMATS:
            L.append(f"{ind}w({self.codec.ref_struct(INT_FORMATS[t])}.pack({expr}))")
            return
        if t == "uuid":
            L.append(f"{ind}w({expr}.bytes)")
            return
        x = self.tmp("s")
        L.append(f"{ind}{x} = {expr}")
        L.append(f"{ind}if {x} is None:")
        L.append(f"{ind}    w({'_U8[0]' if flex else ('_NULL16' if t == 'string' else '_NULL32')})")
        L.append(f"{ind}else:")
        if t == "string":
            L.append(f"{ind}    {x} = {x}.encode('utf-8')")
        if flex:
            L.append(f"{ind}    w(write_uvarint(len({x}) + 1))")
        elif t == "string":
            L.append(f"{ind}    w(_I16.pack(len({x})))")
        else:
            L.append(f"{ind}    w(_I32.pack(len({x})))")
        L.append(f"{ind}    w({x})")


class Codec:
    """Owns the compiled functions; compiles each (struct, version) on first use.

    Compiling is done under one lock: a function is published in the namespace before the
    nested ones it calls, so a second thread must not pick it up half way (a test decoding
    answers from several threads at once met ``NameError`` for a nested decoder)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.ns = {
            "read_uvarint": read_uvarint, "write_uvarint": write_uvarint, "_fail": _fail,
            "_skip_tags": _skip_tags, "_U8": _U8, "_UUID": uuid.UUID, "_ZERO_UUID": ZERO_UUID,
            "_I16": _struct("h"), "_I32": _struct("i"), "_NULL16": b"\xff\xff",
            "_NULL32": b"\xff\xff\xff\xff", "_unpack_from": struct.unpack_from,
            "_pack": struct.pack, "_MISSING": _MISSING, "_new": object.__new__,
        }
        self.names: dict[tuple, str] = {}
        self.pending: list = []

    def ref_struct(self, fmt: str) -> str:
        name = "_S_" + fmt.replace("?", "Z")
        self.ns.setdefault(name, _struct(fmt))
        return name

    def ref_class(self, sdef: StructDef) -> str:
        name = f"C_{sdef.owner}_{sdef.name}"
        self.ns[name] = sdef.cls
        return name

    def ref_default_struct(self, sdef: StructDef) -> str:
        name = f"D_{sdef.owner}_{sdef.name}"
        if name not in self.ns:
            self.ns[name] = sdef.cls()
        return name

    def _ref(self, kind: str, sdef: StructDef, version: int, flexible: bool) -> str:
        key = (kind, sdef.owner, sdef.name, version, flexible)
        name = self.names.get(key)
        if name is None:
            name = f"{kind}_{sdef.owner}_{sdef.name}_v{version}{'f' if flexible else ''}"
            self.names[key] = name
            self.pending.append((kind, sdef, version, flexible, name))
        return name

    def ref_decoder(self, sdef, version, flexible) -> str:
        return self._ref("d", sdef, version, flexible)

    def ref_encoder(self, sdef, version, flexible) -> str:
        return self._ref("e", sdef, version, flexible)

    def bytes_function(self, sdef: StructDef, version: int, flexible: bool):
        """``b(o) -> bytes`` for a top-level message: the encoder's body with a local writer
        and one join, or a single expression when the whole encoding is one ``w(...)``."""
        with self.lock:
            return self._bytes_function(sdef, version, flexible)

    def _bytes_function(self, sdef: StructDef, version: int, flexible: bool):
        self.function("e", sdef, version, flexible)  # compiles every nested encoder it uses
        name = f"b_{sdef.owner}_{sdef.name}_v{version}{'f' if flexible else ''}"
        if name not in self.ns:
            body = _Gen(self, sdef, version, flexible).encode_source(name).splitlines()[1:]
            if len(body) == 1 and body[0].startswith("    w(") and body[0].endswith(")"):
                src = f"def {name}(o):\n    return {body[0][6:-1]}\n"
            else:
                src = (f"def {name}(o):\n    _out = []\n    w = _out.append\n"
                       + "\n".join(body) + "\n    return b''.join(_out)\n")
            exec(compile(src, f"<{name}>", "exec"), self.ns)
        return self.ns[name]

    def function(self, kind: str, sdef: StructDef, version: int, flexible: bool):
        with self.lock:
            name = self._ref(kind, sdef, version, flexible)
            if name not in self.ns:
                while self.pending:
                    k, s, v, fl, n = self.pending.pop()
                    gen = _Gen(self, s, v, fl)
                    src = gen.decode_source(n) if k == "d" else gen.encode_source(n)
                    exec(compile(src, f"<{n}>", "exec"), self.ns)
            return self.ns[name]


_CODEC = Codec()


# ---------------------------------------------------------------------------- message classes

class MessageClass(Message):
    """Adds encode/decode by version to a top-level message class."""

    __slots__ = ()
    _def: MessageDef = None  # type: ignore[assignment]
    _decoders: dict = {}
    _encoders: dict = {}
    _bytes_encoders: dict = {}

    @classmethod
    def _check_version(cls, version: int) -> None:
        if version not in cls._def.valid:
            raise DecodeError(f"{cls._def.name} has no version {version}")

    @classmethod
    def decoder(cls, version: int):
        fn = cls._decoders.get(version)
        if fn is None:
            cls._check_version(version)
            fn = cls._decoders[version] = _CODEC.function(
                "d", cls._def.root, version, version in cls._def.flexible)
        return fn

    @classmethod
    def encoder(cls, version: int):
        fn = cls._encoders.get(version)
        if fn is None:
            cls._check_version(version)
            fn = cls._encoders[version] = _CODEC.function(
                "e", cls._def.root, version, version in cls._def.flexible)
        return fn

    @classmethod
    def decode(cls, data, version: int, offset: int = 0, exact: bool = True):
        """Decode from data[offset:]; with exact, trailing bytes are an error."""
        # decode_from inlined: this is the per-request hot path
        fn = cls._decoders.get(version) or cls.decoder(version)
        if type(data) is not bytes and type(data) is not bytearray:
            data = bytes(data)  # memoryview etc.: the generated code slices and .decode()s
        try:
            obj, pos = fn(data, offset)
        except DecodeError:
            raise
        except Exception as exc:
            raise cls._translate(exc, version) from None
        if exact and pos != len(data):
            raise DecodeError(
                f"{cls._def.name} v{version} has {len(data) - pos} trailing bytes after byte {pos}")
        return obj

    @classmethod
    def decode_from(cls, data, version: int, offset: int = 0, exact: bool = False):
        """(message, end position) decoded from data[offset:]."""
        fn = cls._decoders.get(version) or cls.decoder(version)
        if type(data) is not bytes and type(data) is not bytearray:
            data = bytes(data)
        try:
            obj, pos = fn(data, offset)
        except DecodeError:
            raise
        except Exception as exc:
            raise cls._translate(exc, version) from None
        if exact and pos != len(data):
            raise DecodeError(
                f"{cls._def.name} v{version} has {len(data) - pos} trailing bytes after byte {pos}")
        return obj, pos

    @classmethod
    def _translate(cls, exc: Exception, version: int) -> Exception:
        if isinstance(exc, (struct.error, IndexError)):
            return DecodeError(f"{cls._def.name} v{version} truncated: {exc}")
        if isinstance(exc, UnicodeDecodeError):
            return DecodeError(f"{cls._def.name} v{version} has invalid UTF-8: {exc}")
        if isinstance(exc, (ValueError, TypeError)):
            return DecodeError(f"{cls._def.name} v{version} is malformed: {exc}")
        return exc

    @classmethod
    def bytes_encoder(cls, version: int):
        fn = cls._bytes_encoders.get(version)
        if fn is None:
            cls._check_version(version)
            fn = cls._bytes_encoders[version] = _CODEC.bytes_function(
                cls._def.root, version, version in cls._def.flexible)
        return fn

    def encode(self, version: int) -> bytes:
        return (type(self)._bytes_encoders.get(version) or type(self).bytes_encoder(version))(self)


def _build_message(spec: dict) -> type:
    mdef = MessageDef(spec)
    namespace = {"_MISSING": _MISSING, "_ZERO_UUID": ZERO_UUID}
    nested = {}
    for sdef in mdef.structs.values():
        nested[sdef.name] = _make_class(sdef, namespace)
    root = _make_class(mdef.root, namespace)
    # the root struct's slots live on a base class so instances stay slot-only
    cls = type(mdef.name, (root, MessageClass), {
        "__slots__": (), "_def": mdef, "_decoders": {}, "_encoders": {}, "_bytes_encoders": {},
        "__qualname__": mdef.name, "__module__": "protocol.messages",
    })
    mdef.root.cls = cls
    for name, ncls in nested.items():
        ncls.__module__ = "protocol.messages"
        setattr(cls, name, ncls)
    cls.api_key = mdef.api_key
    cls.valid_versions = (mdef.valid.low, mdef.valid.high)
    cls.flexible_versions = mdef.flexible
    cls.decode, cls.encode = _fast_paths(cls)
    return cls


def _fast_paths(cls):
    """Per-class decode/encode with the same signatures as MessageClass's, for the per-request
    path: no classmethod binding, and only a dict lookup and a call when the version's codec is
    compiled and the input is bytes or bytearray. Anything else (first use of a version, an
    unknown version, a memoryview) fails inside the try and takes the general path."""
    decoders = cls._decoders
    bytes_encoders = cls._bytes_encoders
    general_decode = MessageClass.decode.__func__
    general_encode = MessageClass.encode

    def decode(data, version: int, offset: int = 0, exact: bool = True):
        """Decode from data[offset:]; with exact, trailing bytes are an error."""
        try:
            obj, pos = decoders[version](data, offset)
        except DecodeError:
            raise
        except Exception:
            # not compiled yet, unknown version, another buffer type, or bad input: the
            # general path compiles, converts, decodes again and says what was wrong
            return general_decode(cls, data, version, offset, exact)
        if exact and pos != len(data):
            raise DecodeError(
                f"{cls._def.name} v{version} has {len(data) - pos} trailing bytes after byte {pos}")
        return obj

    def encode(self, version: int) -> bytes:
        try:
            fn = bytes_encoders[version]
        except KeyError:
            return general_encode(self, version)
        return fn(self)

    decode.__qualname__ = f"{cls.__name__}.decode"
    encode.__qualname__ = f"{cls.__name__}.encode"
    return staticmethod(decode), encode


class MessageTable(Mapping):
    """Kafka's message classes by name, each built from its definition on first use: a broker
    uses a fraction of the ~150, and building them all cost ~30 ms at every start."""

    def __init__(self, specs: dict[str, dict]) -> None:
        self.specs = specs
        self._built: dict[str, type] = {}

    def __getitem__(self, name: str) -> type:
        cls = self._built.get(name)
        if cls is None:
            with _CODEC.lock:  # one class per name, whichever thread asks first
                cls = self._built.get(name)
                if cls is None:
                    cls = self._built[name] = _build_message(self.specs[name])
        return cls

    def __iter__(self):
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)


def load_messages() -> tuple[MessageTable, str]:
    doc = json.loads(_SCHEMAS.read_text())
    return MessageTable(doc["messages"]), doc["kafkaVersion"]
