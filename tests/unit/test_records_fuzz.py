"""Fuzz: every record-format entry point fed garbage or mutated valid data raises only RecordError
(CorruptRecordError / InvalidRecordError / UnsupportedCompressionError), never IndexError, struct.error,
zlib.error or a codec library's own exception."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moldau.protocol.records import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    BatchBuilder,
    RecordError,
    decode_batch,
    decode_message_set,
    decode_records,
    decompress,
    legacy_to_v2,
    split_batches,
    v2_to_legacy,
)

FUZZ = settings(
    max_examples=int(__import__("os").environ.get("MOLDAU_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
LIMIT = 1 << 20


def _v2(codec: int) -> bytes:
    b = BatchBuilder(compression=codec)
    for i in range(6):
        b.append(
            1000 + i, b"key%d" % i if i % 2 else None, b"value" * i, [("h%d" % i, b"v")] if i % 3 else None
        )
    return b.build(10)


def _legacy(magic: int, codec: int) -> bytes:
    b = BatchBuilder(magic=magic, compression=codec)
    for i in range(6):
        b.append(1000 + i, b"key%d" % i if i % 2 else None, b"value" * i)
    return b.build(10)


V2_SEEDS = [_v2(c) for c in (NONE, GZIP, SNAPPY, LZ4, ZSTD)]
LEGACY_SEEDS = [_legacy(m, c) for m in (0, 1) for c in (NONE, GZIP, SNAPPY, LZ4)]


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    buf = bytearray(data)
    for pos, val in edits:
        buf[pos % len(buf)] = val
    if cut is not None:
        del buf[cut % (len(buf) + 1) :]
    return bytes(buf)


_edits = st.lists(st.tuples(st.integers(min_value=0, max_value=1 << 16), st.integers(0, 255)), max_size=6)
_cut = st.none() | st.integers(min_value=0, max_value=1 << 16)


def _only_record_errors(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except RecordError:
        pass


@FUZZ
@given(st.sampled_from(V2_SEEDS), _edits, _cut)
def test_decode_batch_mutated(seed, edits, cut):
    data = _mutate(seed, edits, cut)
    _only_record_errors(decode_batch, data, max_decompressed=LIMIT)
    _only_record_errors(split_batches, data)
    _only_record_errors(split_batches, data, allow_truncated=True)
    _only_record_errors(v2_to_legacy, data, 1, max_decompressed=LIMIT)
    _only_record_errors(decode_records, data, max_decompressed=LIMIT)


@FUZZ
@given(st.sampled_from(V2_SEEDS), _edits)
def test_decode_records_section_mutated(seed, edits):
    """Mutate only the records section of uncompressed/compressed batches but keep the header sane, so the
    record decoder itself (varints, lengths, headers) is what gets exercised."""
    buf = bytearray(seed)
    for pos, val in edits:
        buf[61 + pos % (len(buf) - 61)] = val
    _only_record_errors(decode_batch, bytes(buf), max_decompressed=LIMIT)


@FUZZ
@given(st.binary(max_size=300))
def test_decode_batch_random_bytes(data):
    _only_record_errors(decode_batch, data, max_decompressed=LIMIT)
    _only_record_errors(split_batches, data)
    _only_record_errors(decode_message_set, data, max_decompressed=LIMIT)
    _only_record_errors(legacy_to_v2, data, max_decompressed=LIMIT)
    _only_record_errors(decode_records, data, allow_truncated=False, max_decompressed=LIMIT)


@FUZZ
@given(st.binary(min_size=0, max_size=400), st.integers(min_value=-3, max_value=2**31 - 1), st.integers(0, 7))
def test_decode_batch_random_records_with_valid_header(records, count, codec):
    hdr = struct.pack(
        ">qiibIhiqqqhii", 0, 49 + len(records), -1, 2, 0, codec, max(count - 1, 0), 0, 0, -1, -1, -1, count
    )
    _only_record_errors(decode_batch, hdr + records, max_decompressed=LIMIT)


@FUZZ
@given(st.sampled_from(LEGACY_SEEDS), _edits, _cut, st.booleans())
def test_legacy_mutated(seed, edits, cut, verify):
    data = _mutate(seed, edits, cut)
    _only_record_errors(decode_message_set, data, verify_crc=verify, max_decompressed=LIMIT)
    _only_record_errors(legacy_to_v2, data, max_decompressed=LIMIT)
    _only_record_errors(decode_records, data, max_decompressed=LIMIT)


@FUZZ
@given(st.sampled_from([GZIP, SNAPPY, LZ4, ZSTD]), st.binary(max_size=200), st.integers(0, 2))
def test_decompress_random(codec, data, magic):
    _only_record_errors(decompress, codec, data, max_bytes=LIMIT, magic=magic)




@FUZZ
@given(
    st.sampled_from(
        [(c, s) for c in (GZIP, SNAPPY, LZ4, ZSTD) for s in (b"abc" * 500, bytes(range(256)) * 40)]
    ),
    _edits,
    _cut,
)
def test_decompress_mutated(codec_and_data, edits, cut):
    from moldau.protocol.records import compress

    codec, plain = codec_and_data
    data = _mutate(compress(codec, plain), edits, cut)
    _only_record_errors(decompress, codec, data, max_bytes=LIMIT)
