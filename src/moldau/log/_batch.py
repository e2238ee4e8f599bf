"""Private RecordBatch v2 header helpers for the log (header-only: the log rarely needs the records).

The record format is ``moldau.protocol.records``; its layout constants are used here under the names the log
has always used. What this module adds is the log's fast path: the fixed 61-byte header unpacked into a plain
tuple with one precompiled ``struct`` call (``HEADER.unpack_from``; fields by the ``F_*`` indexes), the
fastest thing for recovery and index scans, plus the control-marker peek the log needs on append and load.
"""

from __future__ import annotations

import struct
from typing import Any

from moldau.protocol.records import CODEC_NAMES, decode_batch
from moldau.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    decode_varint,
    set_log_append_time,
)
from moldau.protocol.records.batch import (
    COMPRESSION_MASK as ATTR_COMPRESSION_MASK,
)
from moldau.protocol.records.batch import (
    CONTROL_FLAG as ATTR_CONTROL,
)
from moldau.protocol.records.batch import (
    DELETE_HORIZON_FLAG as ATTR_DELETE_HORIZON,
)
from moldau.protocol.records.batch import (
    HEADER_STRUCT as HEADER,
)
from moldau.protocol.records.batch import (
    TIMESTAMP_TYPE_FLAG as ATTR_LOG_APPEND_TIME,
)
from moldau.protocol.records.batch import (
    TRANSACTIONAL_FLAG as ATTR_TRANSACTIONAL,
)

__all__ = [
    "HEADER", "HEADER_SIZE", "LOG_OVERHEAD", "MIN_BATCH_LENGTH", "CRC_OFFSET", "ATTRIBUTES_OFFSET",
    "MAX_TIMESTAMP_OFFSET", "ATTR_COMPRESSION_MASK", "ATTR_LOG_APPEND_TIME", "ATTR_TRANSACTIONAL",
    "ATTR_CONTROL", "ATTR_DELETE_HORIZON", "CONTROL_ABORT", "CONTROL_COMMIT", "CODEC_NAMES", "decode_batch",
    "set_log_append_time", "increment_sequence", "record_offsets_and_timestamps", "control_type",
    "I64", "I32", "U32", "I16", "OFF_LEN", "F_BASE_OFFSET", "F_BATCH_LENGTH", "F_LEADER_EPOCH", "F_MAGIC",
    "F_CRC", "F_ATTRIBUTES", "F_LAST_OFFSET_DELTA", "F_BASE_TIMESTAMP", "F_MAX_TIMESTAMP", "F_PRODUCER_ID",
    "F_PRODUCER_EPOCH", "F_BASE_SEQUENCE", "F_RECORDS_COUNT",
]

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

I64 = struct.Struct(">q")
I32 = struct.Struct(">i")
U32 = struct.Struct(">I")
I16 = struct.Struct(">h")
# base_offset, batch_length at @0
OFF_LEN = struct.Struct(">qi")
_CONTROL_KEY = struct.Struct(">hh")


def increment_sequence(seq: int, delta: int) -> int:
    """Kafka's sequence arithmetic: wraps from Int.MaxValue to 0."""
    if seq > 2147483647 - delta:
        return delta - (2147483647 - seq) - 1
    return seq + delta


def record_offsets_and_timestamps(batch: bytes | memoryview) -> list[tuple[int, int]]:
    """(offset, timestamp) of every record of one whole batch (any compression)."""
    fields: Any = HEADER.unpack_from(batch, 0)
    if fields[F_ATTRIBUTES] & ATTR_LOG_APPEND_TIME:
        base, ts = fields[F_BASE_OFFSET], fields[F_MAX_TIMESTAMP]
        return [(base + i, ts) for i in range(fields[F_LAST_OFFSET_DELTA] + 1)]
    return [(r.offset, r.timestamp) for r in decode_batch(batch, 0)]


def control_type(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """Type of the end-transaction marker in the (uncompressed) control batch at ``pos``: 0 = ABORT,
    1 = COMMIT; -1 when the batch does not hold a readable control record."""
    try:
        mv = memoryview(buf)
        if (I16.unpack_from(mv, pos + ATTRIBUTES_OFFSET)[0] & ATTR_COMPRESSION_MASK) != 0:
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
        return ctype
    except (IndexError, struct.error, ValueError):
        return -1
