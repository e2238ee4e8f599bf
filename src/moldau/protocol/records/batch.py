"""RecordBatch v2 (magic 2): header parsing, validation, in-place patching, records, builder.

Layout of the 61-byte header (big endian)::

    0  base_offset            int64    (outside the CRC: the broker writes it)
    8  batch_length           int32    (bytes after this field: total size - 12)
    12 partition_leader_epoch int32    (outside the CRC)
    16 magic                  int8     (= 2; offset 16 holds the magic in every format)
    17 crc                    uint32   CRC-32C of bytes 21..end
    21 attributes             int16    bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
                                       6 delete horizon set
    23 last_offset_delta      int32
    27 base_timestamp         int64
    35 max_timestamp          int64
    43 producer_id            int64
    51 producer_epoch         int16
    53 base_sequence          int32
    57 records_count          int32
    61 records...            (compressed as one block when codec != 0)

Record (inside the records section)::

    length varint, attributes int8, timestamp_delta varlong, offset_delta varint,
    key_length varint (-1 = null), key, value_length varint (-1 = null), value,
    header_count varint, [header_key_length varint, header_key (utf-8), header_value_length varint, value]

All varints are zig-zag encoded (protobuf style).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from operator import itemgetter
from typing import Callable, Iterable, Sequence

from ._section_loops import make_section_loops
from .codecs import DEFAULT_MAX_DECOMPRESSED, compress, decompress
from .crc import crc32c
from .exceptions import CorruptRecordError, InvalidRecordError
from .legacy import LegacyBuilder, decode_message_set
from .record import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP, Record

__all__ = [
    "BatchHeader",
    "Record",
    "BatchBuilder",
    "parse_batch_header",
    "split_batches",
    "detect_magic",
    "check_crc",
    "compute_crc",
    "set_base_offset",
    "set_partition_leader_epoch",
    "set_log_append_time",
    "set_producer_state",
    "decode_batch",
    "decode_batch_tuples",
    "decode_records",
    "validate_batch",
    "parse_control_record",
    "build_control_batch",
    "encode_record",
    "seal_batch",
    "encode_varint",
    "decode_varint",
    "HEADER_SIZE",
    "HEADER_STRUCT",
    "LOG_OVERHEAD",
    "MIN_BATCH_LENGTH",
    "MAGIC_OFFSET",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "NO_TIMESTAMP",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
]

# ------------------------------------------------------------------------------------------------------------
# layout constants

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_STRUCT = (
    _HEADER  # the header as one struct (fields in the order of BatchHeader), for header-only scans
)
HEADER_SIZE = _HEADER.size  # 61
assert HEADER_SIZE == 61
LOG_OVERHEAD = 12  # base_offset + batch_length: bytes not counted by batch_length
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40


CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")

_Buf = bytes | bytearray | memoryview


# ------------------------------------------------------------------------------------------------------------
# header


@dataclass(slots=True)
class BatchHeader:
    """The fixed 61-byte header of a v2 RecordBatch, decoded."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_FLAG else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Total size in bytes of the batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_sequence(self) -> int:
        """Sequence number of the last record (wraps at 2**31 like Kafka); -1 when not idempotent."""
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


def _magic_error(magic: int, pos: int) -> Exception:
    if magic in (0, 1):
        return InvalidRecordError(f"record batch at position {pos} has magic {magic}, expected 2")
    return CorruptRecordError(f"invalid magic {magic} at position {pos}")


def parse_batch_header(buf: _Buf, pos: int = 0) -> BatchHeader:
    """Decode the 61-byte v2 header at ``pos``.

    Raises CorruptRecordError when fewer than 61 bytes remain or the magic is unknown, InvalidRecordError
    when the magic is 0/1 (a legacy message, not a v2 batch). Does not check batch_length or the CRC.
    """
    if pos < 0 or len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"truncated record batch header at position {pos}")
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != 2:
        raise _magic_error(header.magic, pos)
    return header


def detect_magic(buf: _Buf, pos: int = 0) -> int:
    """Magic byte of the batch/message at ``pos`` (offset 16 in every format): 0, 1 or 2.

    Lets the broker route a produce payload: 2 -> ``split_batches``; 0/1 -> ``legacy_to_v2``.
    Raises CorruptRecordError when the buffer is too short or the magic is unknown.
    """
    if len(buf) - pos < MAGIC_OFFSET + 1:
        raise CorruptRecordError(f"record data too short to hold a magic byte ({len(buf) - pos} bytes)")
    magic = buf[pos + MAGIC_OFFSET]
    if magic > 2:
        raise CorruptRecordError(f"unknown magic {magic} at position {pos}")
    return magic


def split_batches(buf: _Buf, *, allow_truncated: bool = False) -> list[tuple[int, BatchHeader]]:
    """Split a v2 record set into (position, header) pairs without decoding records.

    Validates that batches tile the buffer exactly, that every batch_length is >= 49 and fits, that the magic
    is 2 and records_count >= 0. The CRC is *not* checked here (see ``check_crc``).

    ``allow_truncated=True`` is for fetch responses, where the broker may cut the last batch short: an
    incomplete trailing batch is silently dropped instead of raising.

    Raises CorruptRecordError (bad sizes, truncation, unknown magic) or InvalidRecordError (magic 0/1).
    An empty buffer gives an empty list; deciding whether that is acceptable is the caller's job.
    """
    out: list[tuple[int, BatchHeader]] = []
    n = len(buf)
    pos = 0
    unpack = _HEADER.unpack_from
    while pos < n:
        remaining = n - pos
        if remaining < HEADER_SIZE:
            if allow_truncated:
                break
            raise CorruptRecordError(
                f"truncated record batch at position {pos}: {remaining} bytes, header needs {HEADER_SIZE}"
            )
        fields = unpack(buf, pos)
        batch_length = fields[1]
        magic = fields[3]
        if magic != 2:
            raise _magic_error(magic, pos)
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"record batch at position {pos} has invalid length {batch_length}")
        if batch_length > remaining - LOG_OVERHEAD:
            if allow_truncated:
                break
            raise CorruptRecordError(
                f"record batch at position {pos} has length {batch_length} but only "
                f"{remaining - LOG_OVERHEAD} bytes remain"
            )
        if fields[12] < 0:
            raise CorruptRecordError(
                f"record batch at position {pos} has negative records count {fields[12]}"
            )
        out.append((pos, BatchHeader(*fields)))
        pos += batch_length + LOG_OVERHEAD
    return out


def compute_crc(buf: _Buf, pos: int, size: int) -> int:
    """CRC-32C over attributes..end of the batch occupying buf[pos:pos+size]."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def check_crc(buf: _Buf, pos: int, header: BatchHeader) -> None:
    """Raise CorruptRecordError unless the stored CRC matches the bytes."""
    end = pos + header.batch_length + LOG_OVERHEAD
    if end > len(buf) or header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(f"record batch at position {pos} is truncated")
    computed = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end])
    if computed != header.crc:
        raise CorruptRecordError(
            f"Record is corrupt (stored crc = {header.crc}, computed crc = {computed}) at position {pos}"
        )


def crc_ok(buf: _Buf, pos: int, header: BatchHeader) -> bool:
    """Like check_crc, but returns a bool."""
    end = pos + header.batch_length + LOG_OVERHEAD
    if end > len(buf):
        return False
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end]) == header.crc


# ------------------------------------------------------------------------------------------------------------
# the header as one tuple (``HEADER_STRUCT.unpack_from``): the log's scans read fields by these indexes

F_BASE_OFFSET = 0
F_BATCH_LENGTH = 1
F_LEADER_EPOCH = 2
F_MAGIC = 3
F_CRC = 4
F_ATTRIBUTES = 5
F_LAST_OFFSET_DELTA = 6
F_BASE_TIMESTAMP = 7
F_MAX_TIMESTAMP = 8
F_PRODUCER_ID = 9
F_PRODUCER_EPOCH = 10
F_BASE_SEQUENCE = 11
F_RECORDS_COUNT = 12

INT16 = _I16
INT32 = _I32
INT64 = _I64
UINT32 = _U32
OFFSET_AND_LENGTH = struct.Struct(">qi")  # base_offset, batch_length: the front of every batch


def increment_sequence(seq: int, delta: int) -> int:
    """Kafka's sequence arithmetic: wraps from Int.MaxValue to 0."""
    if seq > 2147483647 - delta:
        return delta - (2147483647 - seq) - 1
    return seq + delta


def record_offsets_and_timestamps(batch: _Buf) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record of one whole batch (any compression)."""
    fields = HEADER_STRUCT.unpack_from(batch, 0)
    if fields[F_ATTRIBUTES] & TIMESTAMP_TYPE_FLAG:
        base, ts = fields[F_BASE_OFFSET], fields[F_MAX_TIMESTAMP]
        return [(base + i, ts) for i in range(fields[F_LAST_OFFSET_DELTA] + 1)]
    return [(r.offset, r.timestamp) for r in decode_batch(batch, 0)]


def control_type(buf: _Buf, pos: int = 0) -> int:
    """Type of the end-transaction marker in the (uncompressed) control batch at ``pos``: 0 = ABORT,
    1 = COMMIT; -1 when the batch does not hold a readable control record."""
    try:
        mv = memoryview(buf)
        if (_I16.unpack_from(mv, pos + ATTRIBUTES_OFFSET)[0] & COMPRESSION_MASK) != 0:
            return -1
        p = pos + HEADER_SIZE
        _length, p = decode_varint(mv, p)
        p += 1  # record attributes
        _ts, p = decode_varint(mv, p)
        _od, p = decode_varint(mv, p)
        klen, p = decode_varint(mv, p)
        if klen < 4:
            return -1
        _version, ctype = _CONTROL_KEY.unpack_from(mv, p)
        return int(ctype)
    except (IndexError, struct.error, ValueError):
        return -1


# ------------------------------------------------------------------------------------------------------------
# in-place patching (broker side)


def set_base_offset(
    buf: bytearray | memoryview, pos: int, base_offset: int, header: BatchHeader | None = None
) -> None:
    """Write base_offset into the first 8 bytes of the batch at ``pos`` (outside the CRC)."""
    _I64.pack_into(buf, pos, base_offset)
    if header is not None:
        header.base_offset = base_offset


def set_partition_leader_epoch(
    buf: bytearray | memoryview, pos: int, epoch: int, header: BatchHeader | None = None
) -> None:
    """Write the partition leader epoch (bytes 12..16, outside the CRC)."""
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)
    if header is not None:
        header.partition_leader_epoch = epoch


def set_log_append_time(
    buf: bytearray | memoryview, pos: int, timestamp: int, header: BatchHeader | None = None
) -> int:
    """Mark the batch LogAppendTime with max_timestamp = ``timestamp`` and recompute the CRC.

    Consumers then report ``timestamp`` for every record of the batch (Kafka semantics). Returns the new CRC;
    updates ``header`` in place when given.
    """
    (batch_length,) = _I32.unpack_from(buf, pos + 8)
    (attributes,) = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    attributes |= TIMESTAMP_TYPE_FLAG
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    crc = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + batch_length + LOG_OVERHEAD])
    _U32.pack_into(buf, pos + CRC_OFFSET, crc)
    if header is not None:
        header.attributes = attributes
        header.max_timestamp = timestamp
        header.crc = crc
    return crc


_PRODUCER_FIELDS = struct.Struct(">qhi")  # producer_id, producer_epoch, base_sequence at offset 43


def set_producer_state(
    buf: bytearray | memoryview,
    pos: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    header: BatchHeader | None = None,
) -> int:
    """Rewrite producer id / epoch / base sequence (inside the CRC) and recompute the CRC; returns it.

    For a producer that assigns sequence numbers only when a built batch is first sent (or re-sent after an
    epoch bump).
    """
    (batch_length,) = _I32.unpack_from(buf, pos + 8)
    _PRODUCER_FIELDS.pack_into(buf, pos + 43, producer_id, producer_epoch, base_sequence)
    crc = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + batch_length + LOG_OVERHEAD])
    _U32.pack_into(buf, pos + CRC_OFFSET, crc)
    if header is not None:
        header.producer_id = producer_id
        header.producer_epoch = producer_epoch
        header.base_sequence = base_sequence
        header.crc = crc
    return crc


# ------------------------------------------------------------------------------------------------------------
# varints


def _build_varint_table(count: int) -> tuple[bytes, ...]:
    """The unsigned varint encoding of every value below ``count`` (at most 1 << 14: one or two bytes)."""
    assert count <= 1 << 14
    one = [bytes((u,)) for u in range(min(count, 128))]
    two = [bytes(((u & 0x7F) | 0x80, u >> 7)) for u in range(128, count)]
    return tuple(one + two)


_VARINT_TABLE_SIZE = 1 << 14  # every zig-zag value with a 1- or 2-byte encoding
_VARINT_TABLE = _build_varint_table(_VARINT_TABLE_SIZE)


def encode_varint(n: int) -> bytes:
    """Zig-zag varint/varlong encoding of a signed 64-bit integer."""
    u = (n << 1) ^ (n >> 63)
    if 0 <= u < _VARINT_TABLE_SIZE:
        return _VARINT_TABLE[u]
    u &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def decode_varint(buf: _Buf, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varlong at ``pos``; returns (value, new_pos). Raises InvalidRecordError."""
    try:
        b = buf[pos]
    except IndexError:
        raise InvalidRecordError("truncated varint") from None
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    return _decode_varint_slow(buf, pos, 10)


def _decode_varint_slow(buf: _Buf, pos: int, max_bytes: int) -> tuple[int, int]:
    """Zig-zag varint of at most ``max_bytes`` bytes (5: int32 varint, 10: int64 varlong)."""
    u = 0
    shift = 0
    n = len(buf)
    limit = pos + max_bytes
    while True:
        if pos >= n:
            raise InvalidRecordError("truncated varint")
        if pos >= limit:
            raise InvalidRecordError("varint too long")
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    if u >> (32 if max_bytes == 5 else 64):
        raise InvalidRecordError("varint overflows its type")
    return (u >> 1) ^ -(u & 1), pos


# ------------------------------------------------------------------------------------------------------------
# records




def _decode_record_general(
    data: _Buf, pos: int, n: int
) -> tuple[int, int, int, bytes | None, bytes | None, list]:
    """Decode the record at ``pos`` with every check: (end, timestamp_delta, offset_delta, key, value,
    headers).

    The reference decoder: ``_decode_section_*`` hand records here whenever their inline fast path is not
    sure (long varints in odd places, malformed data), so errors are exact and precise.
    """
    vslow = _decode_varint_slow
    if pos >= n:
        raise InvalidRecordError("record data ends before records count is reached")
    b = data[pos]
    if b < 0x80:
        length = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        length, pos = vslow(data, pos, 5)
    if length < 6 or length > n - pos:
        raise InvalidRecordError(f"invalid record length {length}")
    end = pos + length
    # attributes (unused), then timestamp delta (varlong)
    pos += 1
    b = data[pos]
    if b < 0x80:
        ts_delta = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        ts_delta, pos = vslow(data, pos, 10)
    if pos >= end:
        raise InvalidRecordError("record truncated")
    b = data[pos]
    if b < 0x80:
        offset_delta = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        offset_delta, pos = vslow(data, pos, 5)
    # key
    if pos >= end:
        raise InvalidRecordError("record truncated")
    b = data[pos]
    if b < 0x80:
        klen = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        klen, pos = vslow(data, pos, 5)
    if klen < 0:
        if klen != -1:
            raise InvalidRecordError(f"invalid key length {klen}")
        key = None
    else:
        if klen > end - pos:
            raise InvalidRecordError(f"key length {klen} exceeds record")
        key = bytes(data[pos : pos + klen])
        pos += klen
    # value
    if pos >= end:
        raise InvalidRecordError("record truncated")
    b = data[pos]
    if b < 0x80:
        vlen = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        vlen, pos = vslow(data, pos, 5)
    if vlen < 0:
        if vlen != -1:
            raise InvalidRecordError(f"invalid value length {vlen}")
        value = None
    else:
        if vlen > end - pos:
            raise InvalidRecordError(f"value length {vlen} exceeds record")
        value = bytes(data[pos : pos + vlen])
        pos += vlen
    # headers
    if pos >= end:
        raise InvalidRecordError("record truncated")
    b = data[pos]
    if b < 0x80:
        hcount = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        hcount, pos = vslow(data, pos, 5)
    if hcount < 0:
        raise InvalidRecordError(f"invalid header count {hcount}")
    headers: list[tuple[str, bytes | None]] = []
    if hcount:
        pos = _decode_headers(data, pos, end, hcount, headers)
    if pos != end:
        raise InvalidRecordError(f"record length mismatch: record ends at {pos}, declared end {end}")
    return end, ts_delta, offset_delta, key, value, headers


def _decode_headers(data: _Buf, pos: int, end: int, hcount: int, headers: list) -> int:
    """Append ``hcount`` (key, value) header pairs starting at ``pos`` to ``headers``; returns the new pos."""
    if hcount > (end - pos) // 2:
        raise InvalidRecordError(f"header count {hcount} exceeds record")
    for _h in range(hcount):
        if pos >= end:
            raise InvalidRecordError("record header truncated")
        hklen, pos = decode_varint(data, pos)
        if hklen < 0 or hklen > end - pos:
            raise InvalidRecordError(f"invalid header key length {hklen}")
        try:
            hkey = bytes(data[pos : pos + hklen]).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRecordError("header key is not valid UTF-8") from None
        pos += hklen
        if pos >= end:
            raise InvalidRecordError("record header truncated")
        hvlen, pos = decode_varint(data, pos)
        if hvlen < 0:
            if hvlen != -1:
                raise InvalidRecordError(f"invalid header value length {hvlen}")
            hval = None
        else:
            if hvlen > end - pos:
                raise InvalidRecordError(f"header value length {hvlen} exceeds record")
            hval = bytes(data[pos : pos + hvlen])
            pos += hvlen
        headers.append((hkey, hval))
    return pos


class _NoHeaders(list):
    """The ``headers`` of every consumer record without headers: one shared, read-only empty list (equal to
    ``[]``; saves an allocation per record). Mutating it raises TypeError."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("a consumed record's empty headers list is read-only; copy it first: "
                        "list(record.headers)")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "[]"


NO_HEADERS: list = _NoHeaders()


class _Fallback(Exception):
    """Internal: the inline fast path hands this record to ``_decode_record_general``."""


# The records-section loops (one per output shape) are generated from one template by tools/gen_hot_paths.py
# into ``_section_loops.py``: the common record is decoded inline, anything else by
# ``_decode_record_general``, which raises the precise error. ``data`` must be ``bytes``.
# ``_records_some`` decodes ``m`` records at ``pos`` into ``out`` as Record objects, ``_tuples_some`` as
# ``cls`` tuples (topic, partition, offset, timestamp, timestamp_type, key, value, headers, leader_epoch);
# both return the position after them.
_records_some, _tuples_some = make_section_loops(
    _Fallback, _decode_varint_slow, _decode_record_general, Record, NO_HEADERS)


def _check_count(count: int, n: int) -> None:
    if count * 7 > n:  # a record takes at least 7 bytes: refuse impossible counts before looping
        raise InvalidRecordError(f"records count {count} does not fit in {n} bytes")


def _check_end(pos: int, n: int, count: int) -> None:
    if pos != n:
        raise InvalidRecordError(f"{n - pos} bytes left over after {count} records")


def _decode_records_section(
    data: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> list[Record]:
    """Decode ``count`` records that exactly fill ``data`` (bytes) into Record objects."""
    n = len(data)
    _check_count(count, n)
    out: list[Record] = []
    pos = _records_some(data, 0, count, out, base_offset, base_timestamp, log_append_time)
    _check_end(pos, n, count)
    return out


# -- runs of identically laid-out records, decoded in bulk ---------------------------------------------
# Fixed-size records (same key and value sizes, no headers, consecutive offset deltas, 1-byte timestamp
# deltas) sit at a fixed stride S. Such a run is checked with strided memoryview slices, one per byte that
# must be the same in every record (length, key length, value length, header count) or follow a known
# sequence (the offset deltas), and decoded with C-level iteration: struct.iter_unpack for keys and values,
# a 128-entry table for the timestamp deltas, zip + tuple.__new__ for the records. Every byte the
# record-by-record decoder would read is checked; anything else falls back to it.

_RUN_MIN = 16  # shorter runs are not worth the setup
_itemgetter0 = itemgetter(0)
_itemgetter1 = itemgetter(1)
_OD_TABLE = 65536  # offset deltas covered by the tables below
# byte k of the zig-zag varint of every offset delta j < _OD_TABLE (zig-zag of j >= 0 is 2j), built from
# their periodic structure (a plain per-j loop costs ~20 ms at every import):
# byte 0: (2j & 0x7F), continuation bit from j >= 64; byte 1: (j >> 6) & 0x7F, continuation from j >= 8192;
# byte 2: j >> 13
_OD_BYTE0 = bytes(range(0, 128, 2)) + bytes(range(0x80, 0x100, 2)) * (_OD_TABLE // 64 - 1)
_OD_BYTE1 = b"".join(bytes(((k & 0x7F) | (0x80 if k >= 128 else 0),)) * 64 for k in range(_OD_TABLE // 64))
_OD_BYTE2 = b"".join(bytes((k,)) * 8192 for k in range(_OD_TABLE // 8192))
_OD_BYTES = (_OD_BYTE0, _OD_BYTE1, _OD_BYTE2)
_ZIGZAG7 = tuple((b >> 1) ^ -(b & 1) for b in range(128))  # one-byte varint -> value
_HIGH_BYTE = re.compile(rb"[\x80-\xff]")
_run_structs: dict[tuple[int, int, int, int], struct.Struct] = {}
_tuple_makers: dict[type[tuple[object, ...]], Callable[[tuple[object, ...]], object]] = {}


def _run_struct(fmt: str) -> struct.Struct:
    if len(_run_structs) > 1024:  # many layouts over time: start over rather than grow without bound
        _run_structs.clear()
    return struct.Struct("<" + fmt)


def _first_mismatch(got: bytes, want: bytes) -> int:
    """Index of the first byte where two equal-length byte strings differ (len when equal)."""
    if got == want:
        return len(got)
    x = int.from_bytes(got, "big") ^ int.from_bytes(want, "big")
    return len(got) - 1 - (x.bit_length() - 1) // 8


def _varint_width(data: bytes | memoryview, p: int) -> tuple[int, int]:
    """(value, width) of a 1- or 2-byte non-negative varint at p; (-1, 0) otherwise."""
    b = data[p]
    if b < 0x80:
        return (-1, 0) if b & 1 else (b >> 1, 1)
    b2 = data[p + 1]
    if b2 >= 0x80:
        return -1, 0
    u = (b & 0x7F) | (b2 << 7)
    return (-1, 0) if u & 1 else (u >> 1, 2)


def _run_at(data: bytes | memoryview, mv: memoryview, pos: int, i: int, count: int, out: list[object],
            base_offset: int,
            base_timestamp: int, lat: int | None, ts_table: list[int] | None,
            make: Callable[[tuple[object, ...]], object],
            topic: str, partition: int, timestamp_type: int,
            leader_epoch: int) -> tuple[int, int, list | None]:
    """Decode the run of records laid out like record ``i`` (at ``pos``) into ``out``; returns (records
    decoded, position after them, the timestamp table); 0 records when there is no run worth decoding in bulk
    here."""
    n = len(data)
    try:
        length, lw = _varint_width(data, pos)
        if not lw:
            return 0, pos, ts_table
        size = lw + length  # the stride
        p = pos + lw + 1  # after the attributes byte (unchecked, unused, as in the decoder)
        tpos = p - pos
        if data[p] >= 0x80:
            return 0, pos, ts_table  # timestamp delta of more than one byte
        p += 1
        opos = p - pos
        od_w = 1 if i < 64 else 2 if i < 8192 else 3
        if i >= _OD_TABLE:
            return 0, pos, ts_table
        for t in range(od_w):
            if data[p + t] != _OD_BYTES[t][i]:
                return 0, pos, ts_table  # offset delta is not this record's index (compacted batch)
        p += od_w
        kpos = p - pos
        if data[p] == 1:
            klen, kw = -1, 1
        else:
            klen, kw = _varint_width(data, p)
            if not kw:
                return 0, pos, ts_table
        p += kw + (klen if klen > 0 else 0)
        vlpos = p - pos
        vlen, vw = (-1, 1) if data[p] == 1 else _varint_width(data, p)
        if not vw:
            return 0, pos, ts_table
        p += vw + (vlen if vlen > 0 else 0)
        if p != pos + size - 1 or data[p] != 0:
            return 0, pos, ts_table  # headers, or fields that do not fill the record
    except IndexError:
        return 0, pos, ts_table
    k = min(count - i, (n - pos) // size, (64 if i < 64 else 8192 if i < 8192 else _OD_TABLE) - i)
    if k < _RUN_MIN:
        return 0, pos, ts_table
    # bytes equal in every record: the length, key length, value length and header count varints
    end = pos + k * size
    for c in (*range(lw), *range(kpos, kpos + kw), *range(vlpos, vlpos + vw), size - 1):
        g = mv[pos + c:end:size].tobytes()
        e = g[0]
        if g.count(e) != len(g):
            m = len(g) - len(g.lstrip(bytes((e,))))  # first record where it differs
            if m < k:
                k = m
    # the offset deltas: this run's indexes
    for t in range(od_w):
        g = mv[pos + opos + t:pos + k * size:size].tobytes()
        m = _first_mismatch(g, _OD_BYTES[t][i:i + k])
        if m < k:
            k = m
    # the timestamp deltas: one byte each
    tg = mv[pos + tpos:pos + k * size:size].tobytes()
    hit = _HIGH_BYTE.search(tg)
    if hit is not None:
        k = hit.start()
        tg = tg[:k]
    if k < _RUN_MIN:
        return 0, pos, ts_table
    end = pos + k * size
    if lat is not None:
        ts: object = repeat(lat, k)
    elif tg.count(tg[0]) == k:
        ts = repeat(base_timestamp + _ZIGZAG7[tg[0]], k)
    else:
        if ts_table is None:
            ts_table = [base_timestamp + z for z in _ZIGZAG7]
        ts = map(ts_table.__getitem__, tg)
    region = mv[pos:end]
    if klen < 0:
        keys: object = repeat(None)
        if vlen < 0:
            values: object = repeat(None)
        else:
            key_ = (vlpos + vw, vlen, size, -1)
            st = _run_structs.get(key_)
            if st is None:
                st = _run_structs[key_] = _run_struct(f"{vlpos + vw}x{vlen}s{size - vlpos - vw - vlen}x")
            values = map(_itemgetter0, st.iter_unpack(region))
    else:
        skip = kpos + kw
        key_ = (skip, klen, vlen, size)
        st = _run_structs.get(key_)
        if st is None:
            mid = vlpos - skip - klen + vw
            if vlen < 0:
                fmt = f"{skip}x{klen}s{size - skip - klen}x"
            else:
                fmt = f"{skip}x{klen}s{mid}x{vlen}s{size - vlpos - vw - vlen}x"
            st = _run_structs[key_] = _run_struct(fmt)
        pairs = list(st.iter_unpack(region))
        keys = map(_itemgetter0, pairs)
        values = repeat(None) if vlen < 0 else map(_itemgetter1, pairs)
    first = base_offset + i
    out.extend(map(make, zip(repeat(topic), repeat(partition), range(first, first + k), ts,  # type: ignore
                             repeat(timestamp_type), keys, values, repeat(NO_HEADERS), repeat(leader_epoch))))
    return k, end, ts_table


def _decode_section_tuples(
    data: bytes | memoryview, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None,
    cls: type, topic: str, partition: int, timestamp_type: int, leader_epoch: int
) -> list:
    """Decode ``count`` records that exactly fill ``data`` into ``cls`` tuples: runs of identically laid-out
    records in bulk (``_run_at``, straight from a memoryview: no copy of the section), the rest record by
    record (from ``bytes``: a memoryview section is copied from the first such record on)."""
    n = len(data)
    _check_count(count, n)
    out: list = []
    pos = 0
    i = 0
    make = _tuple_makers.get(cls)
    if make is None:
        make = _tuple_makers[cls] = partial(tuple.__new__, cls)
    mv = data if type(data) is memoryview else memoryview(data)
    tail: bytes | None = data if type(data) is bytes else None  # data[tail_at:] as bytes, for the record loop
    tail_at = 0
    ts_table = None
    block = 32
    while i < count:
        if count - i >= _RUN_MIN:
            k, pos, ts_table = _run_at(mv, mv, pos, i, count, out, base_offset, base_timestamp,
                                       log_append_time, ts_table, make, topic, partition, timestamp_type,
                                       leader_epoch)
            if k:
                i += k
                block = 32
                continue
        m = min(count - i, block)
        if tail is None or pos < tail_at:
            tail = bytes(mv[pos:])
            tail_at = pos
        pos = tail_at + _tuples_some(tail, pos - tail_at, m, out, base_offset, base_timestamp,
                                     log_append_time, cls, topic, partition, timestamp_type, leader_epoch)
        i += m
        if block < 1024:
            block <<= 1  # irregular data: try a bulk run less often
    _check_end(pos, n, count)
    return out


def decode_batch(
    buf: _Buf,
    pos: int = 0,
    *,
    header: BatchHeader | None = None,
    verify_crc: bool = False,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> list[Record]:
    """Decode every record of the v2 batch at ``pos`` (decompressing when needed).

    Timestamps: CreateTime batches give base_timestamp + delta; LogAppendTime batches give max_timestamp for
    every record (Kafka semantics). Control batches decode like any other (see ``parse_control_record``).
    Raises CorruptRecordError (framing, CRC when ``verify_crc``) or InvalidRecordError (record contents);
    never IndexError/struct.error.
    """
    if header is None:
        header = parse_batch_header(buf, pos)
    section, count, lat = _batch_section(buf, pos, header, verify_crc, max_decompressed)
    try:
        return _decode_records_section(section, count, header.base_offset, header.base_timestamp, lat)
    except (IndexError, struct.error) as exc:  # defensive: every path above bounds-checks
        raise InvalidRecordError(f"malformed record data: {exc}") from None


def decode_batch_tuples(
    buf: _Buf,
    pos: int,
    header: BatchHeader,
    cls: type,
    topic: str,
    partition: int,
    leader_epoch: int = -1,
    *,
    verify_crc: bool = False,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> list:
    """``decode_batch`` for consumers: every record as an instance of the tuple subclass ``cls`` laid out as
    ``(topic, partition, offset, timestamp, timestamp_type, key, value, headers, leader_epoch)`` (a
    ``moldau.client.ConsumerRecord``), made with ``tuple.__new__`` straight from the decoder (no
    intermediate ``Record``). Same checks, errors and values as ``decode_batch``, except that records without
    headers share ``NO_HEADERS`` (a read-only empty list)."""
    section, count, lat = _batch_section(buf, pos, header, verify_crc, max_decompressed, copy=False)
    try:
        ts_type = 1 if header.attributes & TIMESTAMP_TYPE_FLAG else 0
        return _decode_section_tuples(section, count, header.base_offset, header.base_timestamp, lat, cls,
                                      topic, partition, ts_type, leader_epoch)
    except (IndexError, struct.error) as exc:  # defensive: every path above bounds-checks
        raise InvalidRecordError(f"malformed record data: {exc}") from None


def _batch_section(
    buf: _Buf, pos: int, header: BatchHeader, verify_crc: bool, max_decompressed: int, copy: bool = True
) -> tuple[bytes, int, int | None]:
    """The batch's records section as bytes (decompressed), its record count and the LogAppendTime (or None).
    ``copy=False``: an uncompressed section may come back as a memoryview of ``buf``."""
    size = header.batch_length + LOG_OVERHEAD
    if header.batch_length < MIN_BATCH_LENGTH or pos + size > len(buf):
        raise CorruptRecordError(f"record batch at position {pos} is truncated or has a bad length")
    if verify_crc:
        check_crc(buf, pos, header)
    count = header.records_count
    if count < 0:
        raise InvalidRecordError(f"negative records count {count}")
    codec = header.attributes & COMPRESSION_MASK
    if codec:
        section = decompress(codec, memoryview(buf)[pos + HEADER_SIZE : pos + size],
                             max_bytes=max_decompressed)
        if type(section) is not bytes:
            section = bytes(section)
    elif copy:
        section = bytes(memoryview(buf)[pos + HEADER_SIZE : pos + size])
    else:
        section = memoryview(buf)[pos + HEADER_SIZE : pos + size]  # type: ignore[assignment]
    lat = header.max_timestamp if header.attributes & TIMESTAMP_TYPE_FLAG else None
    return section, count, lat


def validate_batch(
    buf: _Buf,
    pos: int,
    header: BatchHeader,
    *,
    require_keys: bool = False,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> list[Record]:
    """Broker-side deep validation of a produced v2 batch (what Kafka's LogValidator checks per record).

    Decodes the records and checks: at least one record, last_offset_delta == records_count - 1, offset
    deltas 0..n-1 in order, and (``require_keys``, for compacted topics) no null keys. Returns the records.
    Raises InvalidRecordError / CorruptRecordError. The CRC is not checked here (see ``check_crc``).
    """
    count = header.records_count
    if count <= 0:
        raise InvalidRecordError(f"record batch at position {pos} has no records")
    if header.last_offset_delta != count - 1:
        raise InvalidRecordError(
            f"inconsistent batch offset range: last_offset_delta {header.last_offset_delta}, {count} records"
        )
    records = decode_batch(buf, pos, header=header, max_decompressed=max_decompressed)
    base = header.base_offset
    for i, r in enumerate(records):
        if r.offset - base != i:
            raise InvalidRecordError(f"record {i} has offset delta {r.offset - base}, expected {i}")
        if require_keys and r.key is None:
            raise InvalidRecordError("compacted topic cannot accept a record without a key")
    return records


def decode_records(
    buf: _Buf,
    *,
    allow_truncated: bool = True,
    skip_control: bool = True,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> list[Record]:
    """Decode every record of a fetched record set, whatever its format: v2 batches and legacy magic 0/1
    messages may be mixed (old data in a log); offsets are absolute, control batches skipped by default.

    A convenience for simple consumers and tests; consumers needing batch metadata (producer ids for
    read_committed, control markers) should use ``split_batches`` + ``decode_batch``.
    """
    out: list[Record] = []
    n = len(buf)
    pos = 0
    while pos < n:
        if n - pos < MAGIC_OFFSET + 1:
            if allow_truncated:
                break
            raise CorruptRecordError(f"truncated record data at position {pos}")
        (length,) = _I32.unpack_from(buf, pos + 8)
        magic = buf[pos + MAGIC_OFFSET]
        end = pos + LOG_OVERHEAD + length
        if magic > 2:
            raise CorruptRecordError(f"invalid magic {magic} at position {pos}")
        if length < (MIN_BATCH_LENGTH if magic == 2 else 14):
            raise CorruptRecordError(f"invalid length {length} at position {pos}")
        if end > n:
            if allow_truncated:
                break
            raise CorruptRecordError(f"record data at position {pos} runs past the end of the buffer")
        if magic == 2:
            header = parse_batch_header(buf, pos)
            if not (skip_control and header.attributes & CONTROL_FLAG):
                out.extend(decode_batch(buf, pos, header=header, max_decompressed=max_decompressed))
        else:
            legacy = decode_message_set(
                memoryview(buf)[pos:end], allow_truncated=False, max_decompressed=max_decompressed
            )
            out.extend(r.to_record() for r in legacy)
        pos = end
    return out


# ------------------------------------------------------------------------------------------------------------
# control records (transaction markers)


def parse_control_record(key: _Buf | None) -> tuple[int, int]:
    """Decode a control record key -> (version, type); type 0 = ABORT, 1 = COMMIT."""
    if key is None or len(key) < 4:
        raise InvalidRecordError("control record key too short")
    version, ctype = _CONTROL_KEY.unpack_from(key, 0)
    if version < 0:
        raise InvalidRecordError(f"invalid control record version {version}")
    return version, ctype


def parse_control_value(value: _Buf | None) -> tuple[int, int]:
    """Decode an end-transaction marker value -> (version, coordinator_epoch)."""
    if value is None or len(value) < 6:
        raise InvalidRecordError("end transaction marker value too short")
    return _CONTROL_VALUE.unpack_from(value, 0)


def build_control_batch(
    *,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    timestamp: int,
    coordinator_epoch: int = 0,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transactional control batch holding one end-transaction marker (COMMIT or ABORT)."""
    builder = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _CONTROL_VALUE.pack(0, coordinator_epoch)
    builder.append(timestamp, key, value)
    return builder.build(base_offset)


# ------------------------------------------------------------------------------------------------------------
# builder


def _nbytes(data: _Buf) -> int:
    return data.nbytes if isinstance(data, memoryview) else len(data)


# The unsigned varint of every n below VARINT_LIMIT (``VARINTS[n]``, one or two bytes) and two tables of
# the byte pairs a record starts and ends its prefix with, for accumulators that encode records from
# lookups: ``ATTRIBUTES_AND_TIMESTAMP_DELTA[d]`` (attributes 0, timestamp delta d) and
# ``OFFSET_DELTA_AND_NULL_KEY[i]`` (offset delta i, key length -1). Values below VARINT_LIMIT only.
VARINT_LIMIT = 8192
VARINTS: tuple[bytes, ...] = tuple(_VARINT_TABLE[n << 1] for n in range(VARINT_LIMIT))
ATTRIBUTES_AND_TIMESTAMP_DELTA: tuple[bytes, ...] = tuple(b"\x00" + v for v in VARINTS)
OFFSET_DELTA_AND_NULL_KEY: tuple[bytes, ...] = tuple(v + b"\x01" for v in VARINTS)
NO_RECORD_HEADERS = b"\x00"  # a header count of 0


def _immutable(b: _Buf) -> bytes:
    return b if type(b) is bytes else bytes(b)


def _headers_bytes(headers: Sequence[tuple[str | bytes, _Buf | None]]) -> bytearray:
    """A record's header count and headers (keys str or bytes, values bytes-like or None)."""
    hbuf = bytearray(encode_varint(len(headers)))
    for hk, hv in headers:
        hkb = hk.encode("utf-8") if isinstance(hk, str) else bytes(hk)
        hbuf += encode_varint(len(hkb))
        hbuf += hkb
        if hv is None:
            hbuf += b"\x01"
        else:
            hbuf += encode_varint(_nbytes(hv))
            hbuf += hv
    return hbuf


def encode_record(
    out: list[bytes],
    offset_delta: int,
    timestamp_delta: int,
    key: _Buf | None,
    value: _Buf | None,
    headers: Sequence[tuple[str | bytes, _Buf | None]] | None = None,
) -> int:
    """Append one v2 record (any sizes, any headers) to ``out`` as its pieces, length prefix first (joined,
    they are the record's bytes); returns its size. Keys, values and header values that are not ``bytes``
    are copied (the caller may change them later); ``bytes`` are shared."""
    pieces = [b"\x00" + encode_varint(timestamp_delta), encode_varint(offset_delta)]
    if key is None:
        pieces.append(b"\x01")
    else:
        pieces.append(encode_varint(_nbytes(key)))
        pieces.append(_immutable(key))
    if value is None:
        pieces.append(b"\x01")
    else:
        pieces.append(encode_varint(_nbytes(value)))
        pieces.append(_immutable(value))
    pieces.append(bytes(_headers_bytes(headers)) if headers else NO_RECORD_HEADERS)
    length = 0
    for x in pieces:
        length += len(x)
    lb = encode_varint(length)
    out.append(lb)
    out += pieces
    return len(lb) + length


def seal_batch(
    buf: bytearray,
    *,
    attributes: int,
    records_count: int,
    base_timestamp: int,
    max_timestamp: int,
    last_offset_delta: int | None = None,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    compression_level: int | None = None,
) -> bytearray:
    """Finish a v2 RecordBatch in ``buf``: HEADER_SIZE reserved bytes, then the uncompressed records section
    (``bytearray(HEADER_SIZE) + section`` for a section built elsewhere).

    The section is compressed with the codec of ``attributes`` (into a new buffer), the 61-byte header is
    written and the CRC computed last. ``last_offset_delta`` defaults to ``records_count - 1`` (0 when
    empty). Returns the batch (``buf`` itself when uncompressed). This is the one place a v2 header is
    packed: every builder of batches (``BatchBuilder``, the client's accumulator, the Spark writer, the log
    cleaner) ends here.
    """
    codec = attributes & COMPRESSION_MASK
    if codec:
        out = bytearray(HEADER_SIZE)
        out += compress(codec, memoryview(buf)[HEADER_SIZE:], level=compression_level)
        buf = out
    if last_offset_delta is None:
        last_offset_delta = records_count - 1 if records_count else 0
    _HEADER.pack_into(buf, 0, base_offset, len(buf) - LOG_OVERHEAD, partition_leader_epoch, 2, 0, attributes,
                      last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                      base_sequence, records_count)
    _U32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return buf


class BatchBuilder:
    """Accumulates records and builds a record batch.

    ``magic=2`` builds a v2 RecordBatch; ``magic=0/1`` builds a legacy message set (a single compressed
    wrapper message when ``compression`` is set). Timestamps are ints in ms (the caller supplies the clock;
    for magic 0 they are ignored). ``append`` returns None; ``build(base_offset)`` returns bytes and may be
    called more than once. ``size_estimate`` is the uncompressed size the batch would have.
    """

    __slots__ = (
        "magic",
        "compression",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "is_transactional",
        "is_control",
        "timestamp_type",
        "partition_leader_epoch",
        "compression_level",
        "_body",
        "_count",
        "_base_ts",
        "_max_ts",
        "_legacy",
    )

    def __init__(
        self,
        magic: int = 2,
        compression: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        timestamp_type: int = CREATE_TIME,
        *,
        is_control: bool = False,
        partition_leader_epoch: int = -1,
        compression_level: int | None = None,
    ) -> None:
        if magic not in (0, 1, 2):
            raise ValueError(f"unsupported magic {magic}")
        if not 0 <= compression <= 4:
            raise ValueError(f"unknown compression codec {compression}")
        if magic < 2 and compression == 4:
            raise ValueError("zstd requires magic 2")
        self.magic = magic
        self.compression = compression
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        self.timestamp_type = timestamp_type
        self.partition_leader_epoch = partition_leader_epoch
        self.compression_level = compression_level
        self._body = bytearray()
        self._count = 0
        self._base_ts = NO_TIMESTAMP
        self._max_ts = NO_TIMESTAMP
        self._legacy = None
        if magic < 2:
            self._legacy = LegacyBuilder(magic, compression, timestamp_type, compression_level)

    def __len__(self) -> int:
        return self._count

    @property
    def records_count(self) -> int:
        return self._count

    @property
    def size_estimate(self) -> int:
        """Bytes of the built batch if uncompressed (an upper-bound-ish estimate when compressed)."""
        if self._legacy is not None:
            return self._legacy.size_estimate
        return HEADER_SIZE + len(self._body)

    def append(
        self,
        timestamp: int,
        key: _Buf | None,
        value: _Buf | None,
        headers: Sequence[tuple[str | bytes, _Buf | None]] | None = None,
    ) -> None:
        """Add one record. ``headers`` are (key str, value bytes-or-None) pairs (ignored by magic 0/1)."""
        count = self._count
        if self._legacy is not None:
            self._legacy.append(count, timestamp, key, value)
            self._count = count + 1
            return
        if count == 0:
            self._base_ts = timestamp
            self._max_ts = timestamp
        elif timestamp > self._max_ts:
            self._max_ts = timestamp
        table = _VARINT_TABLE
        tsize = _VARINT_TABLE_SIZE
        u = ((timestamp - self._base_ts) << 1) ^ ((timestamp - self._base_ts) >> 63)
        ts_b = table[u] if 0 <= u < tsize else encode_varint(timestamp - self._base_ts)
        off_b = table[count << 1] if count < 8192 else encode_varint(count)
        if key is None:
            klen = 0
            klen_b = b"\x01"
        else:
            klen = _nbytes(key)
            klen_b = table[klen << 1] if klen < 8192 else encode_varint(klen)
        if value is None:
            vlen = 0
            vlen_b = b"\x01"
        else:
            vlen = _nbytes(value)
            vlen_b = table[vlen << 1] if vlen < 8192 else encode_varint(vlen)
        hdr_b: _Buf = _headers_bytes(headers) if headers else b"\x00"
        length = 1 + len(ts_b) + len(off_b) + len(klen_b) + klen + len(vlen_b) + vlen + len(hdr_b)
        body = self._body
        body += table[length << 1] if length < 8192 else encode_varint(length)
        body += b"\x00"
        body += ts_b
        body += off_b
        body += klen_b
        if key is not None:
            body += key
        body += vlen_b
        if value is not None:
            body += value
        body += hdr_b
        self._count = count + 1

    @property
    def attributes(self) -> int:
        attrs = self.compression & COMPRESSION_MASK
        if self.timestamp_type == LOG_APPEND_TIME:
            attrs |= TIMESTAMP_TYPE_FLAG
        if self.is_transactional:
            attrs |= TRANSACTIONAL_FLAG
        if self.is_control:
            attrs |= CONTROL_FLAG
        return attrs

    def build(self, base_offset: int = 0) -> bytes:
        """Serialize the batch with ``base_offset`` (the broker overwrites it on append)."""
        return bytes(self.build_mutable(base_offset))

    def build_mutable(self, base_offset: int = 0) -> bytearray:
        """Like ``build`` but returns a fresh bytearray (no extra copy), ready for in-place patching."""
        if self._legacy is not None:
            return bytearray(self._legacy.build(base_offset))
        return seal_batch(
            bytearray(HEADER_SIZE) + self._body, attributes=self.attributes, records_count=self._count,
            base_timestamp=self._base_ts, max_timestamp=self._max_ts, base_offset=base_offset,
            partition_leader_epoch=self.partition_leader_epoch, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, base_sequence=self.base_sequence,
            compression_level=self.compression_level)


def build_batch(
    records: Iterable[tuple[int, _Buf | None, _Buf | None] | tuple[int, _Buf | None, _Buf | None, list]],
    *,
    base_offset: int = 0,
    **kwargs: object,
) -> bytes:
    """Convenience: build one batch from (timestamp, key, value[, headers]) tuples."""
    builder = BatchBuilder(**kwargs)  # type: ignore[arg-type]
    for rec in records:
        builder.append(*rec)
    return builder.build(base_offset)
