"""Conversion between legacy message sets (magic 0/1) and RecordBatch v2, what Kafka's LogValidator does on
up-conversion of an old producer's payload and what a Fetch before v4 (or a Produce before v3) needs on
down-conversion. Depends on both codecs (``batch``, ``legacy``), which do not depend on it.
"""

from __future__ import annotations

from .batch import CONTROL_FLAG, BatchBuilder, decode_batch, split_batches
from .codecs import DEFAULT_MAX_DECOMPRESSED, NONE, ZSTD, compress
from .legacy import LegacyRecord, expand_entry, iter_entries, write_message
from .record import LOG_APPEND_TIME

__all__ = ["legacy_to_v2", "v2_to_legacy"]

_Buf = bytes | bytearray | memoryview


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
    for entry in iter_entries(message_set, allow_truncated=False, verify_crc=True):
        expanded = expand_entry(entry, verify_crc=True, max_decompressed=max_decompressed)
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
                write_message(out, magic, r.offset, ts_type << 3, r.timestamp, r.key, r.value)
        else:
            inner = bytearray()
            first = records[0].offset
            for r in records:
                inner_offset = r.offset - first if magic == 1 else r.offset
                write_message(inner, magic, inner_offset, ts_type << 3, r.timestamp, r.key, r.value)
            wrapper_ts = max(r.timestamp for r in records)
            if magic == 1 and ts_type == LOG_APPEND_TIME:
                wrapper_ts = header.max_timestamp
            value = compress(codec, inner, magic=magic)
            # magic 1: relative inner offsets, wrapper = absolute offset of the last inner message
            write_message(out, magic, records[-1].offset, codec | (ts_type << 3), wrapper_ts, None, value)
    return bytes(out)
