"""Legacy message sets (magic 0 and 1) and conversion to/from RecordBatch v2.

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

from .batch import (
    CONTROL_FLAG,
    LOG_APPEND_TIME,
    NO_TIMESTAMP,
    BatchBuilder,
    Record,
    decode_batch,
    split_batches,
)
from .codecs import DEFAULT_MAX_DECOMPRESSED, NONE, ZSTD, compress, decompress
from .crc import crc32
from .exceptions import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError

__all__ = [
    "LegacyRecord",
    "LegacyBuilder",
    "decode_message_set",
    "legacy_to_v2",
    "v2_to_legacy",
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


def _iter_entries(buf: _Buf, *, allow_truncated: bool, verify_crc: bool, what: str = "message set"):
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


def _expand(entry: _Entry, *, verify_crc: bool, max_decompressed: int) -> list[LegacyRecord]:
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
        _iter_entries(inner_buf, allow_truncated=False, verify_crc=verify_crc, what="compressed message set")
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
    for entry in _iter_entries(buf, allow_truncated=allow_truncated, verify_crc=verify_crc):
        out.extend(_expand(entry, verify_crc=verify_crc, max_decompressed=max_decompressed))
    return out


def legacy_to_v2(
    message_set: _Buf,
    *,
    compression: int | None = None,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> list[bytes]:
    """Convert a magic 0/1 produce payload into v2 batch(es) (what Kafka's LogValidator does on
    up-conversion).

    Keys, values and timestamps are kept (magic 0 -> NO_TIMESTAMP -1; a LogAppendTime magic-1 wrapper gives
    its timestamp to every inner message). All messages go into one v2 batch, compressed with ``compression``
    when given, else with the codec of the (first) compressed wrapper in the payload, else uncompressed.
    Offsets are relative from 0 (the broker assigns real ones). CRCs are verified; a partial trailing message,
    nested compression or a magic-2 batch in the payload is refused. An empty payload gives [].
    """
    records: list[LegacyRecord] = []
    codec = NONE
    for entry in _iter_entries(message_set, allow_truncated=False, verify_crc=True):
        expanded = _expand(entry, verify_crc=True, max_decompressed=max_decompressed)
        if codec == NONE and expanded[0].compression != NONE:
            codec = expanded[0].compression
        records.extend(expanded)
    if not records:
        return []
    if compression is not None:
        codec = compression
    builder = BatchBuilder(
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    for r in records:
        builder.append(r.timestamp, r.key, r.value)
    return [builder.build(0)]


def v2_to_legacy(
    buf: _Buf,
    magic: int,
    *,
    recompress: bool = True,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> bytes:
    """Down-convert v2 batches into a magic 0 or 1 message set (for Fetch/Produce versions before v2 format).

    Offsets stay absolute; control batches are dropped; headers are dropped (as Kafka does); magic 0 loses
    timestamps. With ``recompress`` each compressed batch becomes one compressed wrapper message with the same
    codec (zstd has no legacy form, so zstd batches come out uncompressed); otherwise everything is written
    uncompressed. A partial trailing batch is ignored. Batches with no records left produce nothing.
    """
    if magic not in (0, 1):
        raise ValueError(f"v2_to_legacy: magic must be 0 or 1, not {magic}")
    out = bytearray()
    for pos, header in split_batches(buf, allow_truncated=True):
        if header.attributes & CONTROL_FLAG:
            continue
        records = decode_batch(buf, pos, header=header, max_decompressed=max_decompressed)
        if not records:
            continue
        ts_type = header.timestamp_type if magic == 1 else 0
        codec = header.compression if recompress else NONE
        if codec == ZSTD:
            codec = NONE
        if codec == NONE:
            for r in records:
                _write_message(out, magic, r.offset, ts_type << 3, r.timestamp, r.key, r.value)
        else:
            inner = bytearray()
            first = records[0].offset
            for r in records:
                inner_offset = r.offset - first if magic == 1 else r.offset
                _write_message(inner, magic, inner_offset, ts_type << 3, r.timestamp, r.key, r.value)
            wrapper_ts = max(r.timestamp for r in records)
            if magic == 1 and ts_type == LOG_APPEND_TIME:
                wrapper_ts = header.max_timestamp
            value = compress(codec, inner, magic=magic)
            # magic 1: relative inner offsets, wrapper = absolute offset of the last inner message
            _write_message(out, magic, records[-1].offset, codec | (ts_type << 3), wrapper_ts, None, value)
    return bytes(out)


def _write_message(
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
        _write_message(self._buf, self.magic, index, attrs, timestamp, key, value)
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
        _write_message(out, self.magic, base_offset + self._count - 1, attrs, ts, None, value)
        return bytes(out)

