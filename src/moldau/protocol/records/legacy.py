"""Legacy message sets (magic 0 and 1): decoding and building (``convert`` turns them into RecordBatch v2 and
back).

Layout of one entry of a message set (big endian)::

    offset        int64
    message_size  int32    (bytes of the message that follows)
    crc           uint32   CRC-32 (zlib) of magic..end
    magic         int8     (offset 16 from the entry start, as in v2)
    attributes    int8     bits 0-2 codec, bit 3 timestamp type (magic 1 only)
    timestamp     int64    (magic 1 only)
    key           int32 length (-1 = null) + bytes
    value         int32 length (-1 = null) + bytes

A compressed message ("wrapper") carries a whole inner message set, compressed, as its value. With magic 1
the inner offsets are relative (0..n-1) and the wrapper's offset is the absolute offset of the last inner
message; with magic 0 the inner offsets are absolute. With a LogAppendTime wrapper (magic 1) every inner
message takes the wrapper's timestamp.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .codecs import DEFAULT_MAX_DECOMPRESSED, NONE, ZSTD, compress, decompress
from .crc import crc32
from .exceptions import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from .record import LOG_APPEND_TIME, NO_TIMESTAMP, Record

__all__ = [
    "LegacyRecord",
    "LegacyBuilder",
    "decode_message_set",
    "iter_entries",
    "expand_entry",
    "write_message",
    "message_overhead",
]

_ENTRY_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_ENTRY_V1 = struct.Struct(">qiIbbq")  # ... timestamp
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_SIZE = struct.Struct(">qi")
_U32 = struct.Struct(">I")
_LOG_OVERHEAD = 12
_CRC_AT = 12  # crc position within an entry
_MAGIC_AT = 16
_TIMESTAMP_TYPE_FLAG = 0x08
_CODEC_MASK = 0x07

# smallest message: crc + magic + attributes (+ timestamp) + key length + value length
_MIN_MESSAGE = {0: 4 + 1 + 1 + 4 + 4, 1: 4 + 1 + 1 + 8 + 4 + 4}

_Buf = bytes | bytearray | memoryview


def message_overhead(magic: int) -> int:
    """Bytes an entry takes besides its key and value (log overhead included)."""
    return _LOG_OVERHEAD + _MIN_MESSAGE[magic]


@dataclass(slots=True)
class LegacyRecord:
    """One (inner or plain) legacy message, with absolute offset."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    magic: int
    timestamp_type: int
    compression: int  # codec of the wrapper it came from (0 for a plain message)
    wrapper_offset: int  # offset of the top-level entry it came from (its own offset when plain)

    def to_record(self) -> Record:
        return Record(self.offset, self.timestamp, self.key, self.value, [])


@dataclass(slots=True)
class _Entry:
    pos: int
    offset: int
    size: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: memoryview | None


def iter_entries(buf: _Buf, *, allow_truncated: bool, verify_crc: bool, what: str = "message set"):
    """Yield top-level entries of a message set (no decompression)."""
    mv = memoryview(buf)
    n = len(mv)
    pos = 0
    while pos < n:
        remaining = n - pos
        if remaining < _LOG_OVERHEAD + _MIN_MESSAGE[0]:
            if allow_truncated:
                return
            raise CorruptRecordError(f"truncated message at position {pos} of {what}")
        offset, size = _OFFSET_SIZE.unpack_from(mv, pos)
        magic = mv[pos + _MAGIC_AT]
        if magic > 1:
            if magic == 2:
                raise InvalidRecordError(f"magic 2 batch at position {pos} inside a legacy {what}")
            raise CorruptRecordError(f"invalid magic {magic} at position {pos}")
        if size < _MIN_MESSAGE[magic]:
            raise CorruptRecordError(f"message at position {pos} has invalid size {size}")
        end = pos + _LOG_OVERHEAD + size
        if end > n:
            if allow_truncated:
                return
            raise CorruptRecordError(
                f"message at position {pos} has size {size} but only {remaining - 12} bytes remain"
            )
        (crc,) = _U32.unpack_from(mv, pos + _CRC_AT)
        if verify_crc:
            computed = crc32(mv[pos + _MAGIC_AT : end])
            if computed != crc:
                raise CorruptRecordError(
                    f"Message is corrupt (stored crc = {crc}, computed crc = {computed}) at position {pos}"
                )
        attributes = mv[pos + _MAGIC_AT + 1]
        p = pos + _MAGIC_AT + 2
        if magic == 1:
            (timestamp,) = _I64.unpack_from(mv, p)
            p += 8
        else:
            timestamp = NO_TIMESTAMP
        (klen,) = _I32.unpack_from(mv, p)
        p += 4
        if klen < -1 or (klen > 0 and p + klen + 4 > end):
            raise CorruptRecordError(f"message at position {pos} has invalid key length {klen}")
        key = None if klen == -1 else bytes(mv[p : p + klen])
        p += max(klen, 0)
        (vlen,) = _I32.unpack_from(mv, p)
        p += 4
        if vlen < -1 or (vlen > 0 and p + vlen > end):
            raise CorruptRecordError(f"message at position {pos} has invalid value length {vlen}")
        value = None if vlen == -1 else mv[p : p + vlen]
        p += max(vlen, 0)
        if p != end:
            raise CorruptRecordError(f"message at position {pos}: size {size} does not match its contents")
        yield _Entry(pos, offset, size, magic, attributes, timestamp, key, value)
        pos = end


def expand_entry(entry: _Entry, *, verify_crc: bool, max_decompressed: int) -> list[LegacyRecord]:
    """Records of one top-level entry (decompressing a wrapper)."""
    codec = entry.attributes & _CODEC_MASK
    ts_type = 1 if (entry.magic == 1 and entry.attributes & _TIMESTAMP_TYPE_FLAG) else 0
    value = entry.value
    if codec == NONE:
        return [
            LegacyRecord(
                entry.offset,
                entry.timestamp,
                entry.key,
                None if value is None else bytes(value),
                entry.magic,
                ts_type,
                NONE,
                entry.offset,
            )
        ]
    if codec >= ZSTD:
        raise UnsupportedCompressionError(f"compression codec {codec} is not valid for magic {entry.magic}")
    if value is None:
        raise InvalidRecordError(f"compressed message at offset {entry.offset} has a null value")
    inner_buf = decompress(codec, value, max_bytes=max_decompressed, magic=entry.magic)
    inner = list(
        iter_entries(inner_buf, allow_truncated=False, verify_crc=verify_crc, what="compressed message set")
    )
    if not inner:
        raise InvalidRecordError(f"compressed message at offset {entry.offset} holds no messages")
    out: list[LegacyRecord] = []
    base = 0  # magic 0: inner offsets are absolute
    if entry.magic == 1:
        # wrapper offset = absolute offset of the last inner message; like Kafka, a negative base (a wrapper
        # whose offset was never assigned, e.g. 0 from a producer) leaves the inner offsets as they are
        base = max(entry.offset - inner[-1].offset, 0)
    for e in inner:
        if e.attributes & _CODEC_MASK:
            raise InvalidRecordError(
                f"compressed message at offset {entry.offset} contains a nested compressed message"
            )
        if e.magic != entry.magic:
            raise InvalidRecordError(
                f"compressed message magic {entry.magic} does not match inner magic {e.magic}"
            )
        ts = entry.timestamp if ts_type == LOG_APPEND_TIME else e.timestamp
        out.append(
            LegacyRecord(
                base + e.offset,
                ts,
                e.key,
                None if e.value is None else bytes(e.value),
                e.magic,
                ts_type,
                codec,
                entry.offset,
            )
        )
    return out


def decode_message_set(
    buf: _Buf,
    *,
    allow_truncated: bool = True,
    verify_crc: bool = True,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> list[LegacyRecord]:
    """Every message of a magic 0/1 message set, compressed wrappers expanded, offsets absolute.

    ``allow_truncated`` (default, fetch parsing) drops a partial trailing message; pass False for produce
    payloads. Raises CorruptRecordError / InvalidRecordError.
    """
    out: list[LegacyRecord] = []
    for entry in iter_entries(buf, allow_truncated=allow_truncated, verify_crc=verify_crc):
        out.extend(expand_entry(entry, verify_crc=verify_crc, max_decompressed=max_decompressed))
    return out


def write_message(
    out: bytearray,
    magic: int,
    offset: int,
    attributes: int,
    timestamp: int,
    key: _Buf | None,
    value: _Buf | None,
) -> None:
    start = len(out)
    klen = -1 if key is None else len(key)
    vlen = -1 if value is None else len(value)
    size = _MIN_MESSAGE[magic] + max(klen, 0) + max(vlen, 0)
    if magic == 0:
        out += _ENTRY_V0.pack(offset, size, 0, 0, attributes)
    else:
        out += _ENTRY_V1.pack(offset, size, 0, 1, attributes, timestamp)
    out += _I32.pack(klen)
    if key is not None:
        out += key
    out += _I32.pack(vlen)
    if value is not None:
        out += value
    _U32.pack_into(out, start + _CRC_AT, crc32(memoryview(out)[start + _MAGIC_AT :]))


def _shift_offsets(buf: _Buf, delta: int) -> bytearray:
    """Copy of a message set with ``delta`` added to every entry's offset (offsets are outside the CRC)."""
    out = bytearray(buf)
    pos = 0
    n = len(out)
    while pos < n:
        (rel,) = _I64.unpack_from(out, pos)
        _I64.pack_into(out, pos, rel + delta)
        (size,) = _I32.unpack_from(out, pos + 8)
        pos += _LOG_OVERHEAD + size
    return out


class LegacyBuilder:
    """Builds a magic 0/1 message set; used through ``BatchBuilder(magic=0|1)``.

    Uncompressed: one message per record with offsets base_offset + i. Compressed: one wrapper message whose
    value is the compressed inner set (inner offsets 0..n-1; wrapper offset = base_offset + n - 1; wrapper
    timestamp = max inner timestamp for magic 1).
    """

    __slots__ = ("magic", "compression", "timestamp_type", "compression_level", "_buf", "_count", "_max_ts")

    def __init__(
        self,
        magic: int,
        compression: int = NONE,
        timestamp_type: int = 0,
        compression_level: int | None = None,
    ):
        if magic not in (0, 1):
            raise ValueError(f"LegacyBuilder: magic must be 0 or 1, not {magic}")
        if compression not in (0, 1, 2, 3):
            raise ValueError(f"compression codec {compression} is not valid for magic {magic}")
        self.magic = magic
        self.compression = compression
        self.timestamp_type = timestamp_type if magic == 1 else 0
        self.compression_level = compression_level
        self._buf = bytearray()
        self._count = 0
        self._max_ts = NO_TIMESTAMP

    @property
    def size_estimate(self) -> int:
        extra = message_overhead(self.magic) if self.compression else 0
        return len(self._buf) + extra

    def append(self, index: int, timestamp: int, key: _Buf | None, value: _Buf | None) -> None:
        if self.magic == 0:
            timestamp = NO_TIMESTAMP
        elif timestamp > self._max_ts:
            self._max_ts = timestamp
        attrs = self.timestamp_type << 3 if not self.compression else 0
        write_message(self._buf, self.magic, index, attrs, timestamp, key, value)
        self._count += 1

    def build(self, base_offset: int = 0) -> bytes:
        if not self._count:
            return b""
        if not self.compression:
            return bytes(_shift_offsets(self._buf, base_offset)) if base_offset else bytes(self._buf)
        inner: _Buf = self._buf
        if self.magic == 0 and base_offset:
            inner = _shift_offsets(self._buf, base_offset)  # magic 0: inner offsets are absolute
        value = compress(self.compression, inner, level=self.compression_level, magic=self.magic)
        out = bytearray()
        attrs = self.compression | (self.timestamp_type << 3)
        ts = self._max_ts if self.magic == 1 else NO_TIMESTAMP
        write_message(out, self.magic, base_offset + self._count - 1, attrs, ts, None, value)
        return bytes(out)

