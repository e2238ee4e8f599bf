"""Declarative message schemas and the compiler that turns them into fast codecs.

A message is declared once, with Kafka's own vocabulary::

    ProduceRequest = Message("ProduceRequest", 0, "request", "0-13", flexible="9+", fields=[
        F("TransactionalId", "string", "3+", nullable="3+", default=None),
        F("Acks", "int16", "0+"),
        F("TopicData", "[]TopicProduceData", "0+", fields=[
            F("Name", "string", "0-12"),
            ...
        ]),
    ])

Version ranges are Kafka's strings: ``"0+"``, ``"3-12"``, ``"5"``, ``"none"``.  Tagged fields give
``tag=`` and ``tagged=`` (the tagged versions).  ``flexible=`` on a field overrides the message's
flexible versions for that field (RequestHeader's ClientId is never compact).

For each ``(message, version)`` the compiler writes Python source with one decode and one encode function
per struct (straight-line ``struct.unpack_from`` / ``pack`` code, consecutive fixed-width fields merged into
one ``struct.Struct``), ``exec``s it once and caches the functions.  Decoded objects are instances of
generated ``__slots__`` classes, one per struct, holding the union of the struct's fields over all versions.
"""

from __future__ import annotations

import keyword
import logging
import re
import struct
import threading
import uuid
from typing import Any, Iterator

from .errors import ProtocolDecodeError, ProtocolEncodeError
from .primitives import ZERO_UUID, uvarint_bytes, write_tagged_fields

__all__ = ["F", "Field", "Message", "parse_versions", "snake_case", "MAX_VERSION"]

log = logging.getLogger(__name__)

MAX_VERSION = 0x7FFF

_FIXED = {
    "int8": ("b", 1), "int16": ("h", 2), "int32": ("i", 4), "int64": ("q", 8),
    "uint16": ("H", 2), "uint32": ("I", 4), "float64": ("d", 8), "bool": ("?", 1), "uuid": ("16s", 16),
}
_VARIABLE = {"string", "bytes", "records"}
PRIMITIVE_TYPES = frozenset(_FIXED) | _VARIABLE

_UNSET: Any = object()


def parse_versions(spec: str | None) -> tuple[int, int] | None:
    """``"0+"`` -> (0, MAX_VERSION), ``"3-12"`` -> (3, 12), ``"5"`` -> (5, 5), ``"none"``/None -> None."""
    if spec is None:
        return None
    spec = spec.strip()
    if spec == "none" or spec == "":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), MAX_VERSION
    if "-" in spec:
        lo, hi = spec.split("-", 1)
        return int(lo), int(hi)
    v = int(spec)
    return v, v


def _in(rng: tuple[int, int] | None, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


_SNAKE_1 = re.compile(r"([A-Z]+)([A-Z][a-z])")
_SNAKE_2 = re.compile(r"([a-z0-9])([A-Z])")


def snake_case(name: str) -> str:
    """``ThrottleTimeMs`` -> ``throttle_time_ms``, ``TopicID`` -> ``topic_id``,
    ``ISRNodes`` -> ``isr_nodes``."""
    s = _SNAKE_2.sub(r"\1_\2", _SNAKE_1.sub(r"\1_\2", name)).lower()
    if keyword.iskeyword(s):
        s += "_"
    return s


class Field:
    """One field of a struct, as declared."""

    __slots__ = ("name", "type", "versions_spec", "versions", "nullable_spec", "nullable", "default",
                 "tag", "tagged_spec", "tagged", "flexible_spec", "flexible", "fields", "attr",
                 "is_array", "elem", "struct_name")

    def __init__(self, name: str, type: str, versions: str, *, nullable: str | None = None,
                 default: Any = _UNSET, tag: int | None = None, tagged: str | None = None,
                 flexible: str | None = None, fields: list[Field] | None = None) -> None:
        self.name = name
        self.type = type
        self.versions_spec = versions
        self.versions = parse_versions(versions)
        self.nullable_spec = nullable
        self.nullable = parse_versions(nullable)
        self.default = default
        self.tag = tag
        self.tagged_spec = tagged
        self.tagged = parse_versions(tagged)
        if (tag is None) != (tagged is None):
            raise ValueError(f"field {name}: tag and tagged versions go together")
        self.flexible_spec = flexible
        self.flexible = parse_versions(flexible) if flexible is not None else _UNSET
        self.fields = fields
        self.attr = snake_case(name)
        self.is_array = type.startswith("[]")
        self.elem = type[2:] if self.is_array else type
        if self.elem in PRIMITIVE_TYPES:
            self.struct_name = None
            if fields:
                raise ValueError(f"field {name}: primitive type {type} with sub-fields")
        else:
            self.struct_name = self.elem
            if fields is None:
                raise ValueError(f"field {name}: struct type {type} needs fields")

    def __repr__(self) -> str:
        return f"F({self.name!r}, {self.type!r}, {self.versions_spec!r})"

    def present(self, version: int) -> bool:
        return _in(self.versions, version)

    def is_nullable(self, version: int) -> bool:
        return _in(self.nullable, version)

    def is_tagged(self, version: int) -> bool:
        return _in(self.tagged, version)


F = Field


class _Default:
    """Sentinel class for generated constructors (distinguishes 'not given' from None)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<default>"


_D = _Default()


def _default_value_expr(f: Field, class_of: dict[str, str]) -> tuple[str, bool]:
    """Python expression for a field's default, and whether it must be evaluated per instance."""
    d = f.default
    if d is not _UNSET:
        if d is None:
            return "None", False
        if f.is_array:
            if d == [] or d == "":
                return "[]", True
            raise ValueError(f"field {f.name}: unsupported array default {d!r}")
        if f.elem == "uuid":
            return ("_Z" if d in ("", 0) else f"_UUID({str(d)!r})"), False
        if f.elem == "bytes" and isinstance(d, str):
            return repr(d.encode()), False
        return repr(d), False
    if f.is_array:
        return "[]", True
    t = f.elem
    if f.struct_name is not None:
        return f"_mk_{f.struct_name}()", True
    if t in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
        return "0", False
    if t == "float64":
        return "0.0", False
    if t == "bool":
        return "False", False
    if t == "string":
        return "''", False
    if t == "bytes":
        return "b''", False
    if t == "uuid":
        return "_Z", False
    if t == "records":
        return "None", False
    raise ValueError(f"unknown type {t}")


def _records_info(x: Any) -> tuple[int, Any]:
    """Length and chunks of a ``records`` value (not None)."""
    if isinstance(x, (bytes, bytearray)):
        return len(x), (x,)
    if isinstance(x, memoryview):
        if x.format != "B" or x.ndim != 1:
            x = x.cast("B")
        return x.nbytes, (x,)
    if isinstance(x, (list, tuple)):
        return sum(c.nbytes if isinstance(c, memoryview) else len(c) for c in x), x
    chunks = getattr(x, "chunks", None)
    if chunks is None:
        raise TypeError(f"records value of type {type(x).__name__} is neither bytes-like nor has chunks()")
    return len(x), chunks()


def _write_records(x: Any, b: bytearray, parts: list[Any] | None, compact: bool, nullable: bool) -> None:
    if x is None:
        if not nullable:
            raise ProtocolEncodeError("null records in a version where they are not nullable")
        if compact:
            b.append(0)
        else:
            b += b"\xff\xff\xff\xff"
        return
    n, chunks = _records_info(x)
    if compact:
        if n + 1 < 128:
            b.append(n + 1)
        else:
            b += uvarint_bytes(n + 1)
    else:
        b += _I32.pack(n)
    if n == 0:
        return
    if parts is None:
        for c in chunks:
            b += c
    else:
        parts.append((len(b), chunks))


_I32 = struct.Struct(">i")


def _read_uvarint(buf: Any, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    for i in range(5):
        c = buf[pos + i]
        result |= (c & 0x7F) << shift
        if c < 0x80:
            return result, pos + i + 1
        shift += 7
    raise ProtocolDecodeError(f"varint longer than 5 bytes at {pos}")


def _read_tags(buf: Any, pos: int, blen: int) -> tuple[dict[int, bytes] | None, int]:
    """Read a tagged-field section whose tags are all unknown to this version."""
    nt, pos = _read_uvarint(buf, pos)
    if nt > blen - pos:
        raise _Trunc("tagged field count exceeds input")
    unk: dict[int, bytes] = {}
    for _ in range(nt):
        tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        end = pos + size
        if end > blen:
            raise _Trunc("tagged field exceeds input")
        unk[tag] = bytes(buf[pos:end])
        pos = end
    return unk or None, pos


def _key0(item: tuple[int, Any]) -> int:
    return item[0]


_DECODE_PROBLEMS = (struct.error, IndexError, ValueError, TypeError, OverflowError, UnicodeDecodeError,
                    RecursionError, MemoryError)
_ENCODE_PROBLEMS = (struct.error, TypeError, AttributeError, ValueError, OverflowError)


class _Trunc(ProtocolDecodeError):
    pass


def _is_fixed(f: Field) -> bool:
    """A scalar of fixed size (packed together with its fixed-size neighbours by one struct call)."""
    return not f.is_array and f.struct_name is None and f.elem in _FIXED


def _fixed_runs(fields: list[Field]) -> Iterator[list[Field]]:
    """``fields`` in order as runs: each maximal run of consecutive fixed-size scalars, every other field
    alone."""
    run: list[Field] = []
    for f in fields:
        if _is_fixed(f):
            run.append(f)
            continue
        if run:
            yield run
            run = []
        yield [f]
    if run:
        yield run


class _Src:
    """Tiny source builder."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class _VersionCompiler:
    """Generates the decode/encode source of one message version."""

    def __init__(self, msg: Message, version: int) -> None:
        self.msg = msg
        self.version = version
        self.flexible = _in(msg.flexible, version)
        self.ns: dict[str, Any] = {}
        self.structs_done: set[str] = set()
        self.src = _Src()
        self.counter = 0
        self.fixed_structs: dict[str, str] = {}

    # -- helpers ------------------------------------------------------------------------------------------
    def tmp(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def struct_const(self, fmt: str) -> str:
        name = self.fixed_structs.get(fmt)
        if name is None:
            name = f"_S{len(self.fixed_structs)}"
            self.fixed_structs[fmt] = name
            self.ns[name] = struct.Struct(">" + fmt)
        return name

    def compact(self, f: Field) -> bool:
        if f.flexible is not _UNSET:
            return _in(f.flexible, self.version)
        return self.flexible

    # -- decode -------------------------------------------------------------------------------------------
    def dec_uvarint(self, s: _Src, ind: int, var: str) -> None:
        s(ind, f"{var} = buf[pos]")
        s(ind, "pos += 1")
        s(ind, f"if {var} > 127:")
        s(ind + 1, f"{var}, pos = _ruv(buf, pos - 1)")

    def dec_length(self, s: _Src, ind: int, var: str, compact: bool, wide: bool) -> None:
        """Reads a length into var; -1 means null."""
        if compact:
            self.dec_uvarint(s, ind, var)
            s(ind, f"{var} -= 1")
        elif wide:
            s(ind, f"{var} = _i32(buf, pos)[0]")
            s(ind, "pos += 4")
        else:
            s(ind, f"{var} = _i16(buf, pos)[0]")
            s(ind, "pos += 2")

    def dec_null_check(self, s: _Src, ind: int, var: str, target: str, nullable: bool, what: str) -> int:
        """Emits the null branch; returns the indent for the non-null branch."""
        s(ind, f"if {var} < 0:")
        if nullable:
            s(ind + 1, f"if {var} != -1:")
            s(ind + 2, f"raise _E('invalid {what} length %d' % {var})")
            s(ind + 1, f"{target} = None")
        else:
            s(ind + 1, f"raise _E('invalid length %d for non-nullable {what}' % {var})")
        s(ind, "else:")
        return ind + 1

    def dec_value(self, s: _Src, ind: int, f_elem: str, struct_name: str | None, nullable: bool,
                  compact: bool, target: str) -> None:
        """Decode one non-array value of type f_elem into target."""
        if struct_name is not None:
            fn = self.struct_fn(struct_name)
            if nullable:
                m = self.tmp("m")
                s(ind, f"{m} = _i8(buf, pos)[0]")
                s(ind, "pos += 1")
                s(ind, f"if {m} < 0:")
                s(ind + 1, f"{target} = None")
                s(ind, "else:")
                s(ind + 1, f"{target}, pos = d_{fn}(buf, pos, blen)")
            else:
                s(ind, f"{target}, pos = d_{fn}(buf, pos, blen)")
            return
        if f_elem in _FIXED:
            fmt, size = _FIXED[f_elem]
            c = self.struct_const(fmt)
            if f_elem == "uuid":
                s(ind, "if pos + 16 > blen:")
                s(ind + 1, "raise _T('truncated uuid')")
                s(ind, f"{target} = _UUID(bytes=bytes(buf[pos:pos + 16]))")
            else:
                s(ind, f"{target} = {c}.unpack_from(buf, pos)[0]")
            s(ind, f"pos += {size}")
            return
        n = self.tmp("n")
        self.dec_length(s, ind, n, compact, wide=f_elem != "string")
        i2 = self.dec_null_check(s, ind, n, target, nullable, f_elem)
        e = self.tmp("e")
        s(i2, f"{e} = pos + {n}")
        s(i2, f"if {e} > blen:")
        s(i2 + 1, f"raise _T('{f_elem} of length %d exceeds input' % {n})")
        if f_elem == "string":
            # as Kafka's Readable.readString (new String(bytes, UTF_8)): malformed UTF-8 becomes U+FFFD, the
            # request still parses and is answered (e.g. INVALID_TOPIC_EXCEPTION), the connection stays open
            s(i2, f"{target} = str(buf[pos:{e}], 'utf-8', 'replace')")
        elif f_elem == "bytes":
            s(i2, f"{target} = bytes(buf[pos:{e}])")
        else:  # records: zero copy
            s(i2, f"{target} = buf[pos:{e}]")
        s(i2, f"pos = {e}")

    def dec_field(self, s: _Src, ind: int, f: Field, target: str) -> None:
        v = self.version
        nullable = f.is_nullable(v)
        compact = self.compact(f)
        if not f.is_array:
            self.dec_value(s, ind, f.elem, f.struct_name, nullable, compact, target)
            return
        n = self.tmp("n")
        self.dec_length(s, ind, n, compact, wide=True)
        i2 = self.dec_null_check(s, ind, n, target, nullable, "array")
        s(i2, f"if {n} > blen - pos:")
        s(i2 + 1, f"raise _T('array length %d exceeds remaining input' % {n})")
        if f.struct_name is None and f.elem in _FIXED and f.elem != "uuid":
            fmt, size = _FIXED[f.elem]
            c = self.struct_const(fmt)
            e = self.tmp("e")
            s(i2, f"{e} = pos + {n} * {size}")
            s(i2, f"if {e} > blen:")
            s(i2 + 1, "raise _T('array exceeds input')")
            s(i2, f"{target} = [x for (x,) in {c}.iter_unpack(buf[pos:{e}])]")
            s(i2, f"pos = {e}")
            return
        lst = self.tmp("l")
        x = self.tmp("x")
        s(i2, f"{lst} = []")
        s(i2, f"for _ in range({n}):")
        self.dec_value(s, i2 + 1, f.elem, f.struct_name, False, compact, x)
        s(i2 + 1, f"{lst}.append({x})")
        s(i2, f"{target} = {lst}")

    # -- encode -------------------------------------------------------------------------------------------
    def enc_uvarint(self, s: _Src, ind: int, out: str, expr: str) -> None:
        s(ind, f"if {expr} < 128:")
        s(ind + 1, f"{out}.append({expr})")
        s(ind, "else:")
        s(ind + 1, f"{out} += _uvb({expr})")

    def enc_value(self, s: _Src, ind: int, f_elem: str, struct_name: str | None, nullable: bool,
                  compact: bool, expr: str, out: str, parts: str) -> None:
        if struct_name is not None:
            fn = self.struct_fn(struct_name)
            if nullable:
                s(ind, f"if {expr} is None:")
                s(ind + 1, f"{out}.append(255)")
                s(ind, "else:")
                s(ind + 1, f"{out}.append(1)")
                s(ind + 1, f"e_{fn}({expr}, {out}, {parts})")
            else:
                s(ind, f"e_{fn}({expr}, {out}, {parts})")
            return
        if f_elem in _FIXED:
            fmt, _ = _FIXED[f_elem]
            if f_elem == "uuid":
                s(ind, f"{out} += ({expr} or _Z).bytes")
            else:
                s(ind, f"{out} += {self.struct_const(fmt)}.pack({expr})")
            return
        if f_elem == "records":
            s(ind, f"_wrec({expr}, {out}, {parts}, {compact}, {nullable})")
            return
        x = self.tmp("x")
        s(ind, f"{x} = {expr}")
        if nullable:
            s(ind, f"if {x} is None:")
            null = b"\x00" if compact else (b"\xff\xff" if f_elem == "string" else b"\xff\xff\xff\xff")
            s(ind + 1, f"{out} += {null!r}")
            s(ind, "else:")
            ind += 1
        if f_elem == "string":
            s(ind, f"{x} = {x}.encode('utf-8')")
        n = self.tmp("n")
        s(ind, f"{n} = len({x})")
        if compact:
            s(ind, f"{n} += 1")
            self.enc_uvarint(s, ind, out, n)
        elif f_elem == "string":
            s(ind, f"{out} += _I16.pack({n})")
        else:
            s(ind, f"{out} += _I32.pack({n})")
        s(ind, f"{out} += {x}")

    def enc_field(self, s: _Src, ind: int, f: Field, expr: str, out: str, parts: str) -> None:
        v = self.version
        nullable = f.is_nullable(v)
        compact = self.compact(f)
        if not f.is_array:
            self.enc_value(s, ind, f.elem, f.struct_name, nullable, compact, expr, out, parts)
            return
        a = self.tmp("a")
        s(ind, f"{a} = {expr}")
        if nullable:
            s(ind, f"if {a} is None:")
            null = b"\x00" if compact else b"\xff\xff\xff\xff"
            s(ind + 1, f"{out} += {null!r}")
            s(ind, "else:")
            ind += 1
        if compact:
            n = self.tmp("n")
            s(ind, f"{n} = len({a}) + 1")
            self.enc_uvarint(s, ind, out, n)
        else:
            s(ind, f"{out} += _I32.pack(len({a}))")
        if f.struct_name is None and f.elem in _FIXED and f.elem != "uuid":
            fmt, _ = _FIXED[f.elem]
            s(ind, f"{out} += _pack('>%d{fmt}' % len({a}), *{a})")
            return
        y = self.tmp("y")
        s(ind, f"for {y} in {a}:")
        self.enc_value(s, ind + 1, f.elem, f.struct_name, False, compact, y, out, parts)

    # -- structs ------------------------------------------------------------------------------------------
    def struct_fn(self, name: str) -> str:
        if name not in self.structs_done:
            self.structs_done.add(name)
            self.gen_struct(name)
        return name

    def gen_struct(self, name: str) -> None:
        msg = self.msg
        v = self.version
        fields = msg._struct_fields[name]
        cls = msg._class_var[name]
        present = [f for f in fields if f.present(v)]
        regular = [f for f in present if not (self.flexible and f.is_tagged(v))]
        tagged = sorted((f for f in present if self.flexible and f.is_tagged(v)), key=lambda f: f.tag or 0)
        # Decode ------------------------------------------------------------------------------------------
        s = _Src()
        s(0, f"def d_{name}(buf, pos, blen):")
        for group in _fixed_runs(regular):
            if not _is_fixed(group[0]):
                self.dec_field(s, 1, group[0], f"v_{group[0].attr}")
                continue
            fmt = "".join(_FIXED[g.elem][0] for g in group)
            size = sum(_FIXED[g.elem][1] for g in group)
            c = self.struct_const(fmt)
            targets = ", ".join(f"v_{g.attr}" for g in group)
            s(1, f"{targets}, = {c}.unpack_from(buf, pos)")
            s(1, f"pos += {size}")
            for g in group:
                if g.elem == "uuid":
                    s(1, f"v_{g.attr} = _UUID(bytes=v_{g.attr})")
        unk = "None"
        if self.flexible:
            unk = "unk"
            if not tagged:
                s(1, "if buf[pos] == 0:")
                s(2, "pos += 1")
                s(2, "unk = None")
                s(1, "else:")
                s(2, "unk, pos = _rtags(buf, pos, blen)")
            else:
                s(1, "unk = None")
                for f in tagged:
                    expr, _ = _default_value_expr(f, msg._class_var)
                    s(1, f"v_{f.attr} = {expr}")
                self.dec_uvarint(s, 1, "nt")
                s(1, "if nt:")
                s(2, "if nt > blen - pos:")
                s(3, "raise _T('tagged field count exceeds input')")
                s(2, "for _ in range(nt):")
                self.dec_uvarint(s, 3, "tag")
                self.dec_uvarint(s, 3, "sz")
                s(3, "te = pos + sz")
                s(3, "if te > blen:")
                s(4, "raise _T('tagged field exceeds input')")
                kw = "if"
                for f in tagged:
                    s(3, f"{kw} tag == {f.tag}:")
                    self.dec_field(s, 4, f, f"v_{f.attr}")
                    s(4, "if pos > te:")
                    s(5, "raise _E('tagged field overruns its size')")
                    kw = "elif"
                s(3, "else:")
                s(4, "if unk is None:")
                s(5, "unk = {}")
                s(4, "unk[tag] = bytes(buf[pos:te])")
                s(3, "pos = te")
        s(1, f"o = _new({cls})")
        present_attrs = {f.attr for f in present}
        for attr, f in msg._class_fields[name].items():
            if attr in present_attrs:
                s(1, f"o.{attr} = v_{attr}")
            else:
                expr, _ = _default_value_expr(f, msg._class_var)
                s(1, f"o.{attr} = {expr}")
        s(1, f"o._unknown_tags = {unk}")
        s(1, "return o, pos")
        # Encode ------------------------------------------------------------------------------------------
        s(0, f"def e_{name}(o, b, parts):")
        for group in _fixed_runs(regular):
            if not _is_fixed(group[0]):
                self.enc_field(s, 1, group[0], f"o.{group[0].attr}", "b", "parts")
                continue
            fmt = "".join(_FIXED[g.elem][0] for g in group)
            c = self.struct_const(fmt)
            args = ", ".join(f"(o.{g.attr} or _Z).bytes" if g.elem == "uuid" else f"o.{g.attr}"
                             for g in group)
            s(1, f"b += {c}.pack({args})")
        if self.flexible:
            if not tagged:
                s(1, "u = o._unknown_tags")
                s(1, "if u:")
                s(2, "_wtags(b, u)")
                s(1, "else:")
                s(2, "b.append(0)")
            else:
                s(1, "tg = []")
                for f in tagged:
                    x = self.tmp("t")
                    s(1, f"{x} = o.{f.attr}")
                    s(1, f"if {self.tag_cond(f, x)}:")
                    s(2, "t = bytearray()")
                    self.enc_field(s, 2, f, x, "t", "None")
                    s(2, f"tg.append(({f.tag}, t))")
                s(1, "u = o._unknown_tags")
                s(1, "if u:")
                s(2, "tg.extend(u.items())")
                s(2, "tg.sort(key=_k0)")
                self.enc_uvarint(s, 1, "b", "len(tg)")
                s(1, "for tag, t in tg:")
                self.enc_uvarint(s, 2, "b", "tag")
                self.enc_uvarint(s, 2, "b", "len(t)")
                s(2, "b += t")
        if len(s.lines) and s.lines[-1].startswith("def e_"):
            s(1, "pass")
        self.src.lines.extend(s.lines)

    def tag_cond(self, f: Field, x: str) -> str:
        """Condition under which a tagged field is written: its value differs from the default."""
        expr, _per_instance = _default_value_expr(f, self.msg._class_var)
        if expr == "None":
            return f"{x} is not None"
        if f.is_array:
            return f"{x} is None or len({x}) > 0"
        if f.struct_name is not None:
            dn = f"_DEF_{f.struct_name}"
            self.ns[dn] = self.msg.classes[f.struct_name]()
            return f"{x} != {dn}"
        return f"{x} != {expr}"

    def build(self) -> tuple[Any, Any]:
        msg = self.msg
        root = msg.name
        self.struct_fn(root)
        ns = self.ns
        ns.update(msg._class_ns)
        ns.update({
            "_i8": struct.Struct(">b").unpack_from, "_i16": struct.Struct(">h").unpack_from,
            "_i32": _I32.unpack_from, "_I16": struct.Struct(">h"), "_I32": _I32, "_pack": struct.pack,
            "_E": ProtocolDecodeError, "_T": _Trunc, "_UUID": uuid.UUID, "_Z": ZERO_UUID,
            "_new": object.__new__, "_ruv": _read_uvarint, "_uvb": uvarint_bytes, "_wrec": _write_records,
            "_wtags": write_tagged_fields, "_k0": _key0, "_rtags": _read_tags,
        })
        source = self.src.text()
        code = compile(source, f"<moldau {msg.name} v{self.version}>", "exec")
        exec(code, ns)  # noqa: S102 - generated from declarations only
        self.source = source
        return ns[f"d_{root}"], ns[f"e_{root}"]


def _class_source(name: str, qual: str, fields: dict[str, Field], class_of: dict[str, str]) -> str:
    s = _Src()
    attrs = list(fields)
    s(0, f"class {class_of[name]}:")
    s(1, f"__slots__ = {tuple(attrs + ['_unknown_tags'])!r}")
    s(1, f"_fields = {tuple(attrs)!r}")
    s(1, "__hash__ = None")
    params = []
    body = []
    for attr, f in fields.items():
        expr, per_instance = _default_value_expr(f, class_of)
        if per_instance:
            params.append(f"{attr}=_D")
            body.append(f"self.{attr} = {expr} if {attr} is _D else {attr}")
        else:
            params.append(f"{attr}={expr}")
            body.append(f"self.{attr} = {attr}")
    params.append("_unknown_tags=None")
    body.append("self._unknown_tags = _unknown_tags")
    s(1, f"def __init__(self, *, {', '.join(params)}):")
    for line in body:
        s(2, line)
    s(1, "def __eq__(self, other):")
    s(2, "if other.__class__ is not self.__class__:")
    s(3, "return NotImplemented")
    cmp = " and ".join([f"self.{a} == other.{a}" for a in attrs] +
                       ["(self._unknown_tags or None) == (other._unknown_tags or None)"])
    s(2, f"return {cmp}")
    s(1, "def __repr__(self):")
    inner = ", ".join(f"{a}={{self.{a}!r}}" for a in attrs)
    s(2, f"r = f'{name}({inner}'")
    s(2, "if self._unknown_tags:")
    s(3, "r += f', _unknown_tags={self._unknown_tags!r}'")
    s(2, "return r + ')'")
    s(1, "def to_dict(self):")
    s(2, "return {k: _todict(getattr(self, k)) for k in self._fields}")
    # fast default factory (no keyword parsing), used by the decoders and by defaults of struct fields
    s(0, f"def _mk_{name}():")
    s(1, f"o = _new({class_of[name]})")
    for attr, f in fields.items():
        expr, _ = _default_value_expr(f, class_of)
        s(1, f"o.{attr} = {expr}")
    s(1, "o._unknown_tags = None")
    s(1, "return o")
    s(0, f"{class_of[name]}.__name__ = {name!r}")
    s(0, f"{class_of[name]}.__qualname__ = {qual!r}")
    return s.text()


def _alias_property(attr: str) -> property:
    def get(self: Any) -> Any:
        return getattr(self, attr)

    def set_(self: Any, value: Any) -> None:
        setattr(self, attr, value)

    return property(get, set_, doc=f"alias of {attr}")


def _todict(v: Any) -> Any:
    if hasattr(v, "_fields") and hasattr(v, "to_dict"):
        return v.to_dict()
    if isinstance(v, list):
        return [_todict(x) for x in v]
    if isinstance(v, memoryview):
        return bytes(v)
    return v


class Message:
    """A declared Kafka message (request, response, header or data schema)."""

    def __init__(self, name: str, api_key: int | None, kind: str, versions: str, *,
                 flexible: str | None = None, fields: list[Field]) -> None:
        self.name = name
        self.api_key = api_key
        self.kind = kind
        self.versions_spec = versions
        vr = parse_versions(versions)
        if vr is None:
            raise ValueError(f"{name}: no valid versions")
        self.min_version, self.max_version = vr
        self.flexible_spec = flexible
        self.flexible = parse_versions(flexible)
        self.flexible_min = self.flexible[0] if self.flexible is not None else None
        self.fields = fields
        # Quirk hook: a fixed response header version for every version (ApiVersionsResponse: 0).
        self.fixed_header_version: int | None = None
        self._struct_fields: dict[str, list[Field]] = {}
        self._class_fields: dict[str, dict[str, Field]] = {}
        self._collect(name, fields)
        self._class_var = {n: f"C_{n}" for n in self._struct_fields}
        self._classes: dict[str, type] | None = None
        self._class_ns: dict[str, Any] = {}
        self._codecs: dict[int, tuple[Any, Any]] = {}
        self._lock = threading.Lock()
        self._sources: dict[int, str] = {}
        self._aliases: dict[str, str] = {}

    def _collect(self, sname: str, fields: list[Field]) -> None:
        if sname in self._struct_fields:
            known = self._class_fields[sname]
            for f in fields:
                if f.attr not in known:
                    known[f.attr] = f
                    self._struct_fields[sname].append(f)
        else:
            self._struct_fields[sname] = list(fields)
            cf: dict[str, Field] = {}
            for f in fields:
                if f.attr in cf:
                    raise ValueError(f"{self.name}.{sname}: duplicate attribute {f.attr}")
                cf[f.attr] = f
            self._class_fields[sname] = cf
        for f in fields:
            if f.struct_name is not None:
                assert f.fields is not None
                self._collect(f.struct_name, f.fields)

    def __repr__(self) -> str:
        return f"<Message {self.name} key={self.api_key} v{self.min_version}-{self.max_version}>"

    # -- classes ------------------------------------------------------------------------------------------
    @property
    def classes(self) -> dict[str, type]:
        """Generated classes by struct name (the root struct is the message name)."""
        if self._classes is None:
            with self._lock:
                if self._classes is None:
                    ns: dict[str, Any] = {"_D": _D, "_Z": ZERO_UUID, "_UUID": uuid.UUID, "_todict": _todict,
                                          "_new": object.__new__}
                    src = []
                    # children first is unnecessary: defaults are evaluated at call time
                    for sname, fields in self._class_fields.items():
                        qual = sname if sname == self.name else f"{self.name}.{sname}"
                        src.append(_class_source(sname, qual, fields, self._class_var))
                    exec(compile("\n".join(src), f"<moldau classes {self.name}>", "exec"), ns)  # noqa: S102
                    classes = {sname: ns[self._class_var[sname]] for sname in self._class_fields}
                    for alias, attr in self._aliases.items():
                        setattr(classes[self.name], alias, _alias_property(attr))
                    self._class_ns = {self._class_var[n]: c for n, c in classes.items()}
                    self._class_ns.update({f"_mk_{n}": ns[f"_mk_{n}"] for n in classes})
                    self._classes = classes
        return self._classes

    def add_aliases(self, **aliases: str) -> None:
        """Extra attribute names on the root class (``alias=attribute``), as read/write properties."""
        self._aliases.update(aliases)
        if self._classes is not None:
            for alias, attr in aliases.items():
                setattr(self._classes[self.name], alias, _alias_property(attr))

    @property
    def cls(self) -> type:
        return self.classes[self.name]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        classes = self.classes
        if name in classes:
            return classes[name]
        raise AttributeError(f"{self.name} has no struct or attribute {name!r}")

    def new(self, **fields: Any) -> Any:
        return self.cls(**fields)

    # The declaration stands for its root class (the generated type stubs declare the message as that class):
    # ``ProduceRequest(acks=1)`` builds an instance, ``isinstance(obj, ProduceRequest)`` tests for one.
    def __call__(self, **fields: Any) -> Any:
        return self.cls(**fields)

    def __instancecheck__(self, obj: Any) -> bool:
        return isinstance(obj, self.cls)

    # -- versions -----------------------------------------------------------------------------------------
    def is_flexible(self, version: int) -> bool:
        return _in(self.flexible, version)

    def header_version(self, version: int) -> int:
        """Header version that goes with this message's version (request: 1/2, response: 0/1)."""
        if self.fixed_header_version is not None:
            return self.fixed_header_version
        flexible = self.is_flexible(version)
        if self.kind == "response":
            return 1 if flexible else 0
        return 2 if flexible else 1

    def codec(self, version: int) -> tuple[Any, Any]:
        c = self._codecs.get(version)
        if c is None:
            if not self.min_version <= version <= self.max_version:
                raise ProtocolDecodeError(
                    f"{self.name} v{version} not supported (v{self.min_version}-{self.max_version})")
            self.classes  # noqa: B018 - make sure classes exist
            with self._lock:
                c = self._codecs.get(version)
                if c is None:
                    comp = _VersionCompiler(self, version)
                    c = comp.build()
                    self._sources[version] = comp.source
                    self._codecs[version] = c
        return c

    def source(self, version: int) -> str:
        """The generated source for one version (for debugging)."""
        self.codec(version)
        return self._sources[version]

    # -- codec --------------------------------------------------------------------------------------------
    def decode(self, buf: Any, version: int, offset: int = 0) -> tuple[Any, int]:
        """Decode one message from ``buf`` starting at ``offset``; returns ``(obj, end_offset)``."""
        dec = self._codecs.get(version)
        if dec is None:
            dec = self.codec(version)
        if type(buf) is not memoryview:
            buf = memoryview(buf)
        if buf.format != "B" or buf.ndim != 1:
            try:
                buf = buf.cast("B")
            except TypeError as e:
                raise ProtocolDecodeError(f"unsupported buffer: {e}") from None
        try:
            return dec[0](buf, offset, len(buf))
        except ProtocolDecodeError:
            raise
        except _DECODE_PROBLEMS as e:
            raise ProtocolDecodeError(f"{self.name} v{version}: malformed input ({type(e).__name__}: {e})") \
                from None

    def _encode_raw(self, obj: Any, version: int) -> tuple[bytearray, list[Any]]:
        enc = self._codecs.get(version)
        if enc is None:
            try:
                enc = self.codec(version)
            except ProtocolDecodeError as e:
                raise ProtocolEncodeError(str(e)) from None
        b = bytearray()
        parts: list[Any] = []
        try:
            enc[1](obj, b, parts)
        except ProtocolEncodeError:
            raise
        except _ENCODE_PROBLEMS as e:
            raise ProtocolEncodeError(f"{self.name} v{version}: cannot encode ({type(e).__name__}: {e})") \
                from None
        return b, parts

    def encode(self, obj: Any, version: int) -> bytes:
        b, parts = self._encode_raw(obj, version)
        if not parts:
            return bytes(b)
        return b"".join(_assemble(b, parts))

    def encode_parts(self, obj: Any, version: int) -> list[Any]:
        """Encode to a list of bytes-like parts; ``records`` payloads are separate items (not copied)."""
        b, parts = self._encode_raw(obj, version)
        if not parts:
            return [b]
        return _assemble(b, parts)


def _assemble(b: bytearray, parts: list[Any]) -> list[Any]:
    out: list[Any] = []
    mv = memoryview(b)
    last = 0
    for p, chunks in parts:
        if p > last:
            out.append(mv[last:p])
            last = p
        out.extend(chunks)
    if last < len(b):
        out.append(mv[last:])
    return out
