"""The records-section fast path (inline 1-/2-byte varints, bytes slicing, tuple output) against the
record-by-record reference decoder: same records for valid data, an InvalidRecordError for anything the
reference refuses; decode_batch_tuples gives the same values as decode_batch."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.client.types import ConsumerRecord
from moldau.protocol.records import (
    LZ4,
    NONE,
    ZSTD,
    BatchBuilder,
    InvalidRecordError,
    RecordError,
    decode_batch,
    encode_varint,
    parse_batch_header,
    set_log_append_time,
)
from moldau.protocol.records.batch import (
    HEADER_SIZE,
    HEADER_STRUCT,
    Record,
    _decode_record_general,
    _decode_records_section,
    _decode_section_tuples,
    decode_batch_tuples,
)
from moldau.protocol.records.crc import crc32c


def _reference(data: bytes, count: int, base_offset: int, base_ts: int, lat: int | None) -> list[Record]:
    out = []
    pos = 0
    for _ in range(count):
        pos, tsd, od, key, value, headers = _decode_record_general(data, pos, len(data))
        out.append(Record(base_offset + od, lat if lat is not None else base_ts + tsd, key, value, headers))
    if pos != len(data):
        raise InvalidRecordError("left over")
    return out


def _outcome(fn, *args):
    try:
        return fn(*args)
    except (RecordError, IndexError):  # decode_batch turns a stray IndexError into InvalidRecordError
        return "error"


_bytes_or_none = st.none() | st.binary(max_size=40) | st.sampled_from([b"x" * 63, b"y" * 64, b"z" * 8191,
                                                                        b"w" * 8192, b"q" * 20000])
_record = st.tuples(
    st.integers(min_value=-(2**40), max_value=2**40) | st.integers(min_value=-70, max_value=9000),
    _bytes_or_none,
    _bytes_or_none,
    st.none() | st.lists(st.tuples(st.sampled_from(["h", "ünï", ""]), st.none() | st.binary(max_size=70)),
                         max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_record, min_size=1, max_size=40), st.integers(min_value=0, max_value=2**40))
def test_fast_path_equals_reference(records, base_offset):
    b = BatchBuilder()
    for ts, k, v, h in records:
        b.append(ts, k, v, h)
    raw = b.build(base_offset)
    h = parse_batch_header(raw)
    section = raw[HEADER_SIZE:]
    expected = _reference(section, h.records_count, base_offset, h.base_timestamp, None)
    assert _decode_records_section(section, h.records_count, base_offset, h.base_timestamp, None) == expected
    assert decode_batch(raw) == expected
    tuples = decode_batch_tuples(raw, 0, h, ConsumerRecord, "t", 3, 7)
    assert all(type(r) is ConsumerRecord for r in tuples)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in tuples] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in expected]
    assert {(r.topic, r.partition, r.timestamp_type, r.leader_epoch) for r in tuples} == {("t", 3, 0, 7)}


def test_many_records_offsets_and_values_past_two_byte_varints():
    b = BatchBuilder()
    for i in range(10_000):  # offset deltas from 8192 on need three bytes
        b.append(1_000 + i * 3, None if i % 7 else b"k%d" % i, b"v" * (i % 300))
    raw = b.build(42)
    recs = decode_batch(raw)
    assert [r.offset for r in recs] == list(range(42, 10_042))
    assert recs[9_999].value == b"v" * (9_999 % 300) and recs[7].key == b"k7" and recs[8].key is None
    assert recs == _reference(raw[HEADER_SIZE:], 10_000, 42, 1_000, None)


@pytest.mark.parametrize("codec", [NONE, LZ4, ZSTD])
def test_tuples_log_append_time_and_compression(codec):
    b = BatchBuilder(compression=codec)
    for i in range(200):
        b.append(10 + i, None, b"%d" % i, [("a", b"1")] if i == 5 else None)
    raw = bytearray(b.build(0))
    set_log_append_time(raw, 0, 99_999)
    h = parse_batch_header(raw)
    recs = decode_batch_tuples(memoryview(raw), 0, h, ConsumerRecord, "t", 0)
    assert {r.timestamp for r in recs} == {99_999} and {r.timestamp_type for r in recs} == {1}
    assert recs[5].headers == [("a", b"1")] and recs[6].headers == [] and recs[199].value == b"199"
    assert [r.value for r in recs] == [r.value for r in decode_batch(raw)]


def test_mutated_sections_agree_with_reference():
    rng = random.Random(1234)
    b = BatchBuilder()
    for i in range(60):
        b.append(5_000 + rng.randrange(-100, 10_000), None if i % 3 else b"key", b"v" * rng.randrange(0, 200),
                 [("h", b"x")] if i % 11 == 0 else None)
    raw = b.build(0)
    h = parse_batch_header(raw)
    section = raw[HEADER_SIZE:]
    for _ in range(3000):
        buf = bytearray(section)
        for _e in range(rng.randrange(1, 4)):
            buf[rng.randrange(len(buf))] = rng.choice([0x00, 0x01, 0x02, 0x7F, 0x80, 0x81, 0xFE, 0xFF,
                                                       rng.randrange(256)])
        if rng.random() < 0.2:
            del buf[rng.randrange(len(buf)):]
        data = bytes(buf)
        count = h.records_count + rng.choice([0, 0, 0, -1, 1])
        ref = _outcome(_reference, data, count, 0, h.base_timestamp, None)
        fast = _outcome(_decode_records_section, data, count, 0, h.base_timestamp, None)
        assert fast == ref
        tup = _outcome(_decode_section_tuples, data, count, 0, h.base_timestamp, None, ConsumerRecord, "t",
                       0, 0, -1)
        if ref == "error":
            assert tup == "error"
        else:
            assert tup != "error" and _tuple_view(tup) == _tuple_view(ref)


def test_count_larger_than_section_is_refused_early():
    b = BatchBuilder()
    b.append(1, None, b"v")
    raw = bytearray(b.build(0))
    struct.pack_into(">i", raw, 57, 1000)
    with pytest.raises(InvalidRecordError):
        decode_batch(raw)


# ------------------------------------------------------------------------------------------------------------
# runs of identically laid-out records (decoded in bulk by _run_at)


def _tuple_view(recs):
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs]


def _check_tuples_against_reference(raw: bytes) -> None:
    h = parse_batch_header(raw)
    expected = decode_batch(raw)
    got = decode_batch_tuples(raw, 0, h, ConsumerRecord, "t", 1, 2)
    assert _tuple_view(got) == _tuple_view(expected)
    assert all(type(r) is ConsumerRecord and r.topic == "t" and r.partition == 1 and r.leader_epoch == 2
               for r in got)


@pytest.mark.parametrize("count", [1, 15, 16, 17, 63, 64, 65, 300, 8191, 8192, 8300])
@pytest.mark.parametrize("key,value", [
    (None, b"v" * 100), (b"k" * 8, b"v" * 100), (None, None), (b"kk", None),
    (None, b""), (b"", b"x" * 63), (None, b"y" * 64), (b"z" * 70, b"w" * 1024),
])
def test_uniform_runs(count, key, value):
    b = BatchBuilder()
    for i in range(count):
        b.append(1_000_000 + i // 300, key, value)  # timestamp deltas 0..27: one byte
    _check_tuples_against_reference(b.build(77))


def test_runs_broken_by_irregular_records_and_timestamps():
    rng = random.Random(7)
    for _ in range(40):
        b = BatchBuilder()
        count = rng.randrange(20, 700)
        odd = set(rng.sample(range(count), rng.randrange(0, 6)))
        for i in range(count):
            ts = 5_000 + (i // 7 if rng.random() < 0.97 else rng.randrange(-200, 20_000))
            if i in odd:
                kind = rng.randrange(4)
                if kind == 0:
                    b.append(ts, None, b"v" * rng.randrange(0, 300))
                elif kind == 1:
                    b.append(ts, b"key", b"v" * 100, [("h", b"1")])
                elif kind == 2:
                    b.append(ts, b"other-key", b"v" * 100)
                else:
                    b.append(ts, None, None)
            else:
                b.append(ts, None, b"v" * 100)
        _check_tuples_against_reference(b.build(rng.randrange(0, 1 << 40)))


def test_runs_log_append_time_and_offset_gaps():
    b = BatchBuilder()
    for i in range(500):
        b.append(10 + i, None, b"v" * 30)
    raw = bytearray(b.build(0))
    set_log_append_time(raw, 0, 123_456)
    _check_tuples_against_reference(bytes(raw))
    # a compacted batch: offset deltas with gaps (BatchBuilder numbers records 0..n-1, so built by hand)
    deltas = [d for d in range(900) if d % 97 != 5]
    records = bytearray()
    for d in deltas:
        body = b"\x00" + encode_varint(3) + encode_varint(d) + b"\x01" + encode_varint(40) + b"v" * 40
        body += b"\x00"
        records += encode_varint(len(body)) + body
    raw = bytearray(HEADER_SIZE) + records
    HEADER_STRUCT.pack_into(raw, 0, 1000, len(raw) - 12, -1, 2, 0, 0, deltas[-1], 50, 53, -1, -1, -1,
                            len(deltas))
    struct.pack_into(">I", raw, 17, crc32c(memoryview(raw)[21:]))
    _check_tuples_against_reference(bytes(raw))
    assert [r.offset for r in decode_batch(bytes(raw))] == [1000 + d for d in deltas]


def test_mutated_uniform_sections_agree_with_reference():
    rng = random.Random(99)
    b = BatchBuilder()
    for i in range(400):
        b.append(9_000 + i // 50, None, b"v" * 90)
    raw = b.build(0)
    h = parse_batch_header(raw)
    section = raw[HEADER_SIZE:]
    for _ in range(1500):
        buf = bytearray(section)
        for _e in range(rng.randrange(1, 3)):
            buf[rng.randrange(len(buf))] = rng.choice([0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF,
                                                       rng.randrange(256)])
        data = bytes(buf)
        ref = _outcome(_reference, data, h.records_count, 0, h.base_timestamp, None)
        for section in (data, memoryview(data)):  # bytes, or a view of the fetched buffer (no copy)
            tup = _outcome(_decode_section_tuples, section, h.records_count, 0, h.base_timestamp, None,
                           ConsumerRecord, "t", 0, 0, -1)
            if ref == "error":
                assert tup == "error"
            else:
                assert tup != "error" and _tuple_view(tup) == _tuple_view(ref)
