"""Legacy message sets (magic 0/1): builder, parser, nested compression, conversions to and from v2.

kafka-python's LegacyRecordBatchBuilder / MemoryRecords are the independent implementation (tests only).
"""

from __future__ import annotations

import struct
import zlib

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from moldau.protocol.records import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    BatchBuilder,
    CorruptRecordError,
    InvalidRecordError,
    RecordError,
    UnsupportedCompressionError,
    build_control_batch,
    compress,
    decode_batch,
    decode_message_set,
    legacy_to_v2,
    parse_batch_header,
    split_batches,
    v2_to_legacy,
)

LEGACY_CODECS = [NONE, GZIP, SNAPPY, LZ4]

ROWS = [
    (1_500_000_000_000 + i * 10, None if i % 3 == 0 else b"key%d" % i, None if i == 4 else b"v" * i)
    for i in range(12)
]


def ours(magic, codec=NONE, base_offset=0, rows=ROWS) -> bytes:
    b = BatchBuilder(magic=magic, compression=codec)
    for ts, k, v in rows:
        b.append(ts, k, v)
    return b.build(base_offset)


def theirs(magic, codec=NONE, base_offset=0, rows=ROWS) -> bytes:
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 30)
    for i, (ts, k, v) in enumerate(rows):
        b.append(base_offset + i, ts, k, v)
    return bytes(b.build())


def kp_records(buf: bytes):
    mr = MemoryRecords(buf)
    out = []
    while mr.has_next():
        batch = mr.next_batch()
        out.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
    return out


def tuples(records):
    return [(r.offset, r.timestamp, r.key, r.value) for r in records]


@pytest.mark.parametrize("magic", [0, 1])
def test_uncompressed_byte_exact_vs_kafka_python(magic):
    assert ours(magic) == theirs(magic)
    assert ours(magic, base_offset=1234) == theirs(magic, base_offset=1234)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_kafka_python_reads_ours(magic, codec):
    raw = ours(magic, codec, base_offset=100)
    expected = [(100 + i, ts if magic else None, k, v) for i, (ts, k, v) in enumerate(ROWS)]
    assert kp_records(raw) == expected


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_we_read_kafka_python(magic, codec):
    raw = theirs(magic, codec)
    recs = decode_message_set(raw, allow_truncated=False)
    assert [(r.key, r.value) for r in recs] == [(k, v) for _, k, v in ROWS]
    assert [r.timestamp for r in recs] == ([ts for ts, _, _ in ROWS] if magic else [-1] * len(ROWS))
    assert all(r.magic == magic and r.compression == codec for r in recs)
    if magic == 1 or codec == NONE:
        # kafka-python writes the wrapper with offset 0: magic 1 inner offsets then resolve relative to it
        assert [r.offset for r in recs] == [r[0] for r in kp_records(raw)]


def test_magic1_relative_inner_offsets():
    raw = ours(1, GZIP, base_offset=500)
    # the wrapper carries the absolute offset of the last inner message
    (wrapper_offset,) = struct.unpack_from(">q", raw, 0)
    assert wrapper_offset == 500 + len(ROWS) - 1
    assert [r.offset for r in decode_message_set(raw)] == list(range(500, 500 + len(ROWS)))


def test_magic0_absolute_inner_offsets():
    raw = ours(0, SNAPPY, base_offset=77)
    assert [r.offset for r in decode_message_set(raw)] == list(range(77, 77 + len(ROWS)))


def test_log_append_time_wrapper_overrides_inner_timestamps():
    b = BatchBuilder(magic=1, compression=GZIP, timestamp_type=1)
    b.append(10, b"a", b"b")
    b.append(20, b"c", b"d")
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 18, 999)  # wrapper timestamp (offset 12 + crc 4 + magic + attrs)
    struct.pack_into(">I", raw, 12, zlib.crc32(raw[16:]))
    recs = decode_message_set(raw)
    assert [r.timestamp for r in recs] == [999, 999]
    assert all(r.timestamp_type == 1 for r in recs)


# --- validation
# --------------------------------------------------------------------------------------------------


def test_crc_mismatch_is_corrupt():
    raw = bytearray(ours(1))
    raw[66] ^= 1  # a byte of the second message's key
    with pytest.raises(CorruptRecordError):
        decode_message_set(raw)
    decode_message_set(raw, verify_crc=False)
    with pytest.raises(CorruptRecordError):
        legacy_to_v2(raw)


def test_inner_crc_mismatch_is_corrupt():
    inner = bytearray(ours(1))
    inner[30] ^= 1
    value = compress(GZIP, inner)
    wrapper = _wrapper(1, GZIP, value)
    with pytest.raises(CorruptRecordError):
        decode_message_set(wrapper)


def _message(magic, offset, attrs, ts, key, value) -> bytes:
    body = struct.pack(">bb", magic, attrs)
    if magic == 1:
        body += struct.pack(">q", ts)
    body += struct.pack(">i", -1 if key is None else len(key)) + (key or b"")
    body += struct.pack(">i", -1 if value is None else len(value)) + (value or b"")
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def _wrapper(magic, codec, value, offset=0) -> bytes:
    return _message(magic, offset, codec, 0, None, value)


def test_partial_trailing_message_fetch_vs_produce():
    raw = ours(1)
    cut = raw[:-5]
    recs = decode_message_set(cut)  # fetch parse: tolerated, last message dropped
    assert len(recs) == len(ROWS) - 1
    with pytest.raises(CorruptRecordError):
        decode_message_set(cut, allow_truncated=False)
    with pytest.raises(CorruptRecordError):
        legacy_to_v2(cut)


def test_bad_sizes_and_magic():
    raw = bytearray(ours(0))
    struct.pack_into(">i", raw, 8, 3)
    with pytest.raises(CorruptRecordError):
        decode_message_set(raw)
    raw = bytearray(ours(0))
    raw[16] = 5
    with pytest.raises(CorruptRecordError):
        decode_message_set(raw)
    # a v2 batch where a legacy message set is expected
    with pytest.raises(InvalidRecordError):
        legacy_to_v2(_v2())
    # key length running past the message
    raw = bytearray(ours(1))
    struct.pack_into(">i", raw, 26, 10_000)  # first message's key length
    struct.pack_into(">I", raw, 12, zlib.crc32(raw[16 : 12 + struct.unpack_from(">i", raw, 8)[0]]))
    with pytest.raises(CorruptRecordError):
        decode_message_set(raw)


def _v2() -> bytes:
    b = BatchBuilder()
    b.append(1, b"k", b"v")
    return b.build()


def test_nested_compression_rejected():
    inner = ours(1, GZIP)
    with pytest.raises(InvalidRecordError):
        decode_message_set(_wrapper(1, GZIP, compress(GZIP, inner)))


def test_null_wrapper_value_and_zstd_rejected():
    with pytest.raises(InvalidRecordError):
        decode_message_set(_wrapper(1, GZIP, None))
    with pytest.raises(UnsupportedCompressionError):
        decode_message_set(_wrapper(1, ZSTD, compress(ZSTD, ours(1))))
    with pytest.raises(ValueError):
        BatchBuilder(magic=1, compression=ZSTD)


def test_inner_magic_must_match_wrapper():
    with pytest.raises(InvalidRecordError):
        decode_message_set(_wrapper(1, GZIP, compress(GZIP, ours(0))))


def test_garbage_compressed_value():
    with pytest.raises(RecordError):
        decode_message_set(_wrapper(1, SNAPPY, b"\xff\xfe not snappy at all"))


# --- conversions
# -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_legacy_to_v2(magic, codec):
    raw = theirs(magic, codec, base_offset=40)
    (batch,) = legacy_to_v2(raw)
    (_pos, h), = split_batches(batch)
    assert h.compression == codec and h.records_count == len(ROWS)
    recs = decode_batch(batch, verify_crc=True)
    assert tuples(recs) == [(i, ts if magic else -1, k, v) for i, (ts, k, v) in enumerate(ROWS)]
    assert all(r.headers == [] for r in recs)


def test_legacy_to_v2_mixed_entries_and_overrides():
    payload = ours(1) + ours(1, SNAPPY) + ours(1)
    (batch,) = legacy_to_v2(payload)
    h = parse_batch_header(batch)
    assert h.compression == SNAPPY and h.records_count == 3 * len(ROWS)
    (batch2,) = legacy_to_v2(payload, compression=NONE, producer_id=5, producer_epoch=1, base_sequence=0)
    h2 = parse_batch_header(batch2)
    assert h2.compression == NONE and h2.producer_id == 5
    assert decode_batch(batch2) == decode_batch(batch)
    assert legacy_to_v2(b"") == []


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_v2_to_legacy(magic, codec):
    b = BatchBuilder(compression=codec)
    for ts, k, v in ROWS:
        b.append(ts, k, v, [("dropped", b"header")])
    first = b.build(1000)
    second = build_control_batch(producer_id=1, producer_epoch=0, commit=True, timestamp=5, base_offset=1012)
    third = _v2()
    third = bytearray(third)
    struct.pack_into(">q", third, 0, 1013)
    buf = first + second + bytes(third)
    legacy = v2_to_legacy(buf, magic)
    expected = [(1000 + i, ts if magic else -1, k, v) for i, (ts, k, v) in enumerate(ROWS)]
    expected.append((1013, 1 if magic else -1, b"k", b"v"))
    assert tuples(decode_message_set(legacy, allow_truncated=False)) == expected
    # independent reader agrees (offsets absolute, control batch gone)
    assert [(o, k, v) for o, _, k, v in kp_records(legacy)] == [(o, k, v) for o, _, k, v in expected]
    # codec kept except zstd (no legacy form)
    codecs_seen = {r.compression for r in decode_message_set(legacy)}
    assert codecs_seen == ({NONE} if codec in (NONE, ZSTD) else {codec, NONE})
    flat = v2_to_legacy(buf, magic, recompress=False)
    assert {r.compression for r in decode_message_set(flat)} == {NONE}


def test_v2_to_legacy_rejects_bad_magic():
    with pytest.raises(ValueError):
        v2_to_legacy(_v2(), 2)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_round_trip_through_v2(magic, codec):
    raw = ours(magic, codec)
    (batch,) = legacy_to_v2(raw)
    back = v2_to_legacy(batch, magic)
    assert tuples(decode_message_set(back)) == tuples(decode_message_set(raw))
    if codec == NONE:
        assert back == raw


def test_decode_records_mixed_formats():
    from moldau.protocol.records import decode_records

    v0 = ours(0, NONE, base_offset=0)
    v1 = ours(1, GZIP, base_offset=len(ROWS))
    b = BatchBuilder(compression=LZ4)
    b.append(5, b"k", b"v", [("h", b"x")])
    v2 = b.build(2 * len(ROWS))
    buf = v0 + v1 + v2
    recs = decode_records(buf)
    assert [r.offset for r in recs] == list(range(2 * len(ROWS) + 1))
    assert recs[-1].headers == [("h", b"x")] and recs[0].timestamp == -1
    assert decode_records(buf + v1[:40]) == recs  # partial trailing entry dropped
    with pytest.raises(CorruptRecordError):
        decode_records(buf + v1[:40], allow_truncated=False)
