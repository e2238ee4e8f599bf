"""Private RecordBatch v2 header helpers for the log (header-only: the log never needs the records).

The public record codec is ``moldau.protocol.records``; this module only unpacks the fixed 61-byte header into
a tuple with one precompiled ``struct`` call (the fastest thing for recovery and index scans) and patches the
few fields the log rewrites. ``decode_batch`` is re-exported from ``moldau.protocol.records`` when that package
is importable (it is needed only for timestamp lookups inside a batch and for dump).
"""

from __future__ import annotations

import struct
from typing import Any, Callable

from crc32c import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")  # 61 bytes
HEADER_SIZE = 61
LOG_OVERHEAD = 12
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49
# indexes into the tuple returned by HEADER.unpack_from
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

ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

I64 = struct.Struct(">q")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
I16 = struct.Struct(">h")
# base_offset, batch_length at @0; last_offset_delta at @23
OFF_LEN = struct.Struct(">qi")

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

decode_batch: Callable[..., Any] | None
try:  # the public codec, when present
    from moldau.protocol.records import decode_batch as _decode_batch  # type: ignore[attr-defined]

    decode_batch = _decode_batch
except Exception:  # pragma: no cover - depends on the protocol package being importable
    decode_batch = None


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, timestamp: int) -> None:
    """Set the LogAppendTime bit and max_timestamp of the batch at ``pos`` and recompute its CRC."""
    (attrs,) = I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attrs | ATTR_LOG_APPEND_TIME)
    I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    U32.pack_into(buf, pos + CRC_OFFSET, crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]))


def crc_of(batch: bytes | bytearray | memoryview) -> int:
    """CRC-32C over attributes..end of one whole batch."""
    return crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:])


def increment_sequence(seq: int, delta: int) -> int:
    """Kafka's sequence arithmetic: wraps from Int.MaxValue to 0."""
    if seq > 2147483647 - delta:
        return delta - (2147483647 - seq) - 1
    return seq + delta


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
    return (result >> 1) ^ -(result & 1), pos


def record_offsets_and_timestamps(batch: bytes | memoryview) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record of one whole batch. Uses the public codec when present (any
    compression); otherwise handles uncompressed batches only (compressed ones raise ``ValueError``)."""
    fields = HEADER.unpack_from(batch, 0)
    base = fields[F_BASE_OFFSET]
    attrs = fields[F_ATTRIBUTES]
    if attrs & ATTR_LOG_APPEND_TIME:
        ts = fields[F_MAX_TIMESTAMP]
        return [(base + i, ts) for i in range(fields[F_LAST_OFFSET_DELTA] + 1)]
    if decode_batch is not None:
        return [(r.offset, r.timestamp) for r in decode_batch(batch, 0)]
    if attrs & ATTR_COMPRESSION_MASK:
        raise ValueError("compressed batch and no record codec available")
    base_ts = fields[F_BASE_TIMESTAMP]
    out = []
    pos = HEADER_SIZE
    mv = memoryview(batch)
    for _ in range(fields[F_RECORDS_COUNT]):
        length, p = _read_varint(mv, pos)
        end = p + length
        p += 1  # attributes
        ts_delta, p = _read_varint(mv, p)
        off_delta, p = _read_varint(mv, p)
        out.append((base + off_delta, base_ts + ts_delta))
        pos = end
    return out


CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def control_type(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """Type of the end-transaction marker in the (uncompressed) control batch at ``pos``: 0 = ABORT,
    1 = COMMIT; -1 when the batch does not hold a readable control record."""
    try:
        mv = memoryview(buf)
        if (I16.unpack_from(mv, pos + ATTRIBUTES_OFFSET)[0] & ATTR_COMPRESSION_MASK) != 0:
            return -1
        p = pos + HEADER_SIZE
        _length, p = _read_varint(mv, p)
        p += 1  # record attributes
        _ts, p = _read_varint(mv, p)
        _od, p = _read_varint(mv, p)
        klen, p = _read_varint(mv, p)
        if klen < 4:
            return -1
        _version, ctype = struct.unpack_from(">hh", mv, p)
        return ctype
    except (IndexError, struct.error, ValueError):
        return -1
