"""Kafka wire primitives (sans-I/O).

Readers take ``(buf, pos)`` and return ``(value, new_pos)``; ``buf`` is anything that supports the buffer
protocol and integer indexing (bytes, bytearray, memoryview of format 'B').  Writers append to a
``bytearray``.  All readers raise :class:`ProtocolDecodeError` on truncated or malformed input.

The generated codecs in :mod:`moldau.protocol.schema` inline most of this logic; these functions are the
reference forms and the building blocks for hand-written code (records, headers, tools).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable
from typing import Sized, TypeVar, cast

from .errors import ProtocolDecodeError

__all__ = [
    "INT8", "INT16", "INT32", "INT64", "UINT16", "UINT32", "FLOAT64", "BOOL", "UUID_S",
    "ZERO_UUID", "read_int8", "read_int16", "read_int32", "read_int64", "read_uint16", "read_uint32",
    "read_float64", "read_bool", "read_uuid", "write_int8", "write_int16", "write_int32", "write_int64",
    "write_uint16", "write_uint32", "write_float64", "write_bool", "write_uuid",
    "read_uvarint", "write_uvarint", "uvarint_bytes", "read_varint", "write_varint", "read_varlong",
    "write_varlong", "zigzag_encode", "zigzag_decode", "uvarint_size", "varint_size",
    "read_string", "read_nullable_string", "read_compact_string", "read_compact_nullable_string",
    "write_string", "write_nullable_string", "write_compact_string", "write_compact_nullable_string",
    "read_bytes", "read_nullable_bytes", "read_compact_bytes", "read_compact_nullable_bytes",
    "write_bytes", "write_nullable_bytes", "write_compact_bytes", "write_compact_nullable_bytes",
    "read_array", "read_compact_array", "write_array", "write_compact_array",
    "read_tagged_fields", "write_tagged_fields", "records_len", "records_chunks",
]

Buf = bytes | bytearray | memoryview  # what decoders read
T = TypeVar("T")

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
BOOL = struct.Struct(">?")
UUID_S = struct.Struct(">16s")

ZERO_UUID = uuid.UUID(int=0)

_PROBLEMS = (struct.error, IndexError, ValueError, TypeError, OverflowError, UnicodeDecodeError)


def _fixed_reader(s: struct.Struct, kind: type[T]) -> Callable[[Buf, int], tuple[T, int]]:
    size = s.size
    unpack_from = s.unpack_from

    def read(buf: Buf, pos: int) -> tuple[T, int]:
        try:
            value: T = unpack_from(buf, pos)[0]
            return value, pos + size
        except struct.error:
            raise ProtocolDecodeError(f"truncated input at {pos} (need {size} bytes)") from None

    return read


def _fixed_writer(s: struct.Struct, kind: type[T]) -> Callable[[bytearray, T], None]:
    pack = s.pack

    def write(out: bytearray, value: T) -> None:
        out += pack(value)

    return write


read_int8 = _fixed_reader(INT8, int)
read_int16 = _fixed_reader(INT16, int)
read_int32 = _fixed_reader(INT32, int)
read_int64 = _fixed_reader(INT64, int)
read_uint16 = _fixed_reader(UINT16, int)
read_uint32 = _fixed_reader(UINT32, int)
read_float64 = _fixed_reader(FLOAT64, float)
read_bool = _fixed_reader(BOOL, bool)
write_int8 = _fixed_writer(INT8, int)
write_int16 = _fixed_writer(INT16, int)
write_int32 = _fixed_writer(INT32, int)
write_int64 = _fixed_writer(INT64, int)
write_uint16 = _fixed_writer(UINT16, int)
write_uint32 = _fixed_writer(UINT32, int)
write_float64 = _fixed_writer(FLOAT64, float)


def write_bool(out: bytearray, value: bool) -> None:
    out.append(1 if value else 0)


def read_uuid(buf: Buf, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise ProtocolDecodeError(f"truncated uuid at {pos}")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def write_uuid(out: bytearray, value: uuid.UUID | None) -> None:
    out += (value or ZERO_UUID).bytes


# --- varints ---------------------------------------------------------------------------------------------

_UV_CACHE = [bytes([i]) for i in range(128)]


def uvarint_bytes(value: int) -> bytes:
    """Unsigned varint encoding of ``value`` (0 <= value < 2**64)."""
    if 0 <= value < 128:
        return _UV_CACHE[value]
    if value < 0:
        raise ValueError(f"unsigned varint must not be negative: {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_uvarint(out: bytearray, value: int) -> None:
    if 0 <= value < 128:
        out.append(value)
    else:
        out += uvarint_bytes(value)


def read_uvarint(buf: Buf, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Read an unsigned varint of at most ``max_bytes`` bytes (5 for 32-bit, 10 for 64-bit values)."""
    result = 0
    shift = 0
    try:
        for i in range(max_bytes):
            b = buf[pos + i]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, pos + i + 1
            shift += 7
    except IndexError:
        raise ProtocolDecodeError(f"truncated varint at {pos}") from None
    raise ProtocolDecodeError(f"varint longer than {max_bytes} bytes at {pos}")


def uvarint_size(value: int) -> int:
    n = 1
    while value > 0x7F:
        value >>= 7
        n += 1
    return n


def zigzag_encode(value: int, bits: int = 64) -> int:
    return ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)


def zigzag_decode(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def varint_size(value: int) -> int:
    return uvarint_size(zigzag_encode(value, 64))


def read_varint(buf: Buf, pos: int) -> tuple[int, int]:
    """Signed (zig-zag) 32-bit varint."""
    raw, pos = read_uvarint(buf, pos, 5)
    if raw > 0xFFFFFFFF:
        raise ProtocolDecodeError("varint out of int32 range")
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: Buf, pos: int) -> tuple[int, int]:
    """Signed (zig-zag) 64-bit varint."""
    raw, pos = read_uvarint(buf, pos, 10)
    if raw > 0xFFFFFFFFFFFFFFFF:
        raise ProtocolDecodeError("varlong out of int64 range")
    return (raw >> 1) ^ -(raw & 1), pos


def write_varint(out: bytearray, value: int) -> None:
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise ValueError(f"varint out of int32 range: {value}")
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, value: int) -> None:
    if not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"varlong out of int64 range: {value}")
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


# --- strings and bytes -----------------------------------------------------------------------------------

def _take(buf: Buf, pos: int, n: int) -> int:
    end = pos + n
    if n < 0 or end > len(buf):
        raise ProtocolDecodeError(f"length {n} at {pos} exceeds input")
    return end


def _utf8(buf: Buf, pos: int, end: int) -> str:
    try:
        return str(buf[pos:end], "utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolDecodeError(f"invalid utf-8 in string at {pos}: {e}") from None


def read_nullable_string(buf: Buf, pos: int) -> tuple[str | None, int]:
    n, pos = read_int16(buf, pos)
    if n < 0:
        if n != -1:
            raise ProtocolDecodeError(f"invalid string length {n}")
        return None, pos
    end = _take(buf, pos, n)
    return _utf8(buf, pos, end), end


def read_string(buf: Buf, pos: int) -> tuple[str, int]:
    s, pos = read_nullable_string(buf, pos)
    if s is None:
        raise ProtocolDecodeError("null value for non-nullable string")
    return s, pos


def read_compact_nullable_string(buf: Buf, pos: int) -> tuple[str | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1)
    return _utf8(buf, pos, end), end


def read_compact_string(buf: Buf, pos: int) -> tuple[str, int]:
    s, pos = read_compact_nullable_string(buf, pos)
    if s is None:
        raise ProtocolDecodeError("null value for non-nullable compact string")
    return s, pos


def read_nullable_bytes(buf: Buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_int32(buf, pos)
    if n < 0:
        if n != -1:
            raise ProtocolDecodeError(f"invalid bytes length {n}")
        return None, pos
    end = _take(buf, pos, n)
    return bytes(buf[pos:end]), end


def read_bytes(buf: Buf, pos: int) -> tuple[bytes, int]:
    b, pos = read_nullable_bytes(buf, pos)
    if b is None:
        raise ProtocolDecodeError("null value for non-nullable bytes")
    return b, pos


def read_compact_nullable_bytes(buf: Buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = _take(buf, pos, n - 1)
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf: Buf, pos: int) -> tuple[bytes, int]:
    b, pos = read_compact_nullable_bytes(buf, pos)
    if b is None:
        raise ProtocolDecodeError("null value for non-nullable compact bytes")
    return b, pos


def write_string(out: bytearray, value: str) -> None:
    data = value.encode("utf-8")
    out += INT16.pack(len(data))
    out += data


def write_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += b"\xff\xff"
    else:
        write_string(out, value)


def write_compact_string(out: bytearray, value: str) -> None:
    data = value.encode("utf-8")
    write_uvarint(out, len(data) + 1)
    out += data


def write_compact_nullable_string(out: bytearray, value: str | None) -> None:
    if value is None:
        out.append(0)
    else:
        write_compact_string(out, value)


def write_bytes(out: bytearray, value: bytes) -> None:
    out += INT32.pack(len(value))
    out += value


def write_nullable_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
    else:
        write_bytes(out, value)


def write_compact_bytes(out: bytearray, value: bytes) -> None:
    write_uvarint(out, len(value) + 1)
    out += value


def write_compact_nullable_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out.append(0)
    else:
        write_compact_bytes(out, value)


# --- arrays ----------------------------------------------------------------------------------------------

def read_array(buf: Buf, pos: int, read_item: Callable[[Buf, int], tuple[T, int]],
               nullable: bool = False) -> tuple[list[T] | None, int]:
    n, pos = read_int32(buf, pos)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise ProtocolDecodeError(f"invalid array length {n}")
    if n > len(buf) - pos:
        raise ProtocolDecodeError(f"array length {n} exceeds remaining input")
    items: list[T] = []
    for _ in range(n):
        item, pos = read_item(buf, pos)
        items.append(item)
    return items, pos


def read_compact_array(buf: Buf, pos: int, read_item: Callable[[Buf, int], tuple[T, int]],
                       nullable: bool = False) -> tuple[list[T] | None, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        if nullable:
            return None, pos
        raise ProtocolDecodeError("null value for non-nullable compact array")
    n -= 1
    if n > len(buf) - pos:
        raise ProtocolDecodeError(f"array length {n} exceeds remaining input")
    items: list[T] = []
    for _ in range(n):
        item, pos = read_item(buf, pos)
        items.append(item)
    return items, pos


def write_array(
    out: bytearray, items: list[T] | None, write_item: Callable[[bytearray, T], None]
) -> None:
    if items is None:
        out += b"\xff\xff\xff\xff"
        return
    out += INT32.pack(len(items))
    for item in items:
        write_item(out, item)


def write_compact_array(out: bytearray, items: list[T] | None,
                        write_item: Callable[[bytearray, T], None]) -> None:
    if items is None:
        out.append(0)
        return
    write_uvarint(out, len(items) + 1)
    for item in items:
        write_item(out, item)


# --- tagged fields ---------------------------------------------------------------------------------------

def read_tagged_fields(buf: Buf, pos: int) -> tuple[dict[int, bytes] | None, int]:
    """Read a tagged-field section, returning raw values by tag (None when empty)."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    if n > len(buf) - pos:
        raise ProtocolDecodeError(f"tagged field count {n} exceeds remaining input")
    fields: dict[int, bytes] = {}
    last = -1
    for _ in range(n):
        tag, pos = read_uvarint(buf, pos)
        if tag <= last:
            raise ProtocolDecodeError(f"tagged fields out of order ({tag} after {last})")
        last = tag
        size, pos = read_uvarint(buf, pos)
        end = _take(buf, pos, size)
        fields[tag] = bytes(buf[pos:end])
        pos = end
    return fields, pos


def write_tagged_fields(
    out: bytearray, fields: dict[int, bytes] | Iterable[tuple[int, bytes]] | None
) -> None:
    if not fields:
        out.append(0)
        return
    items = sorted(fields.items() if isinstance(fields, dict) else fields)
    write_uvarint(out, len(items))
    for tag, data in items:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


# --- records values --------------------------------------------------------------------------------------

def records_chunks(value: object) -> list[Buf]:
    """The bytes-like chunks of a ``records`` field value (not None)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return [value]
    if isinstance(value, list):
        return value
    chunks = getattr(value, "chunks", None)
    if chunks is not None:
        return list(chunks())
    return [memoryview(cast(Buf, value))]


def records_len(value: object) -> int:
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, memoryview):
        return value.nbytes
    if isinstance(value, list):
        return sum(c.nbytes if isinstance(c, memoryview) else len(c) for c in value)
    return len(cast(Sized, value))
