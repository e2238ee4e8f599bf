"""Pieces of moldau.spark that need no Spark session: options, planning, Arrow columns from batches."""

from __future__ import annotations

import json
import os
import random

import pytest

pa = pytest.importorskip("pyarrow")
np = pytest.importorskip("numpy")
pytest.importorskip("pyspark")

from moldau.protocol.records import (  # noqa: E402 - after the importorskip guards
    BatchBuilder,
    InvalidRecordError,
    codec_id,
    decode_batch,
    parse_batch_header,
)
from moldau.spark.arrow import ColumnBuilder, arrow_schema  # noqa: E402
from moldau.spark.options import OptionError, parse_sink_options, parse_source_options  # noqa: E402
from moldau.spark.planning import (  # noqa: E402
    OffsetRange,
    json_to_offsets,
    offsets_to_json,
    rate_limit,
    split_ranges,
)

BS = {"kafka.bootstrap.servers": "h:1"}


# ---------------------------------------------------------------------------------------------------- options

def test_options_are_case_insensitive_and_typed():
    o = parse_source_options(
        {
            **BS,
            "SUBSCRIBE": "a, b",
            "includeheaders": "TRUE",
            "MaxOffsetsPerTrigger": "5",
            "kafka.isolation.level": "read_committed",
            "maxTriggerDelay": "30s",
            "kafka.client.id": "x",
        },
        streaming=True,
    )
    assert o.strategy == "subscribe" and o.topics == ["a", "b"]
    assert o.include_headers and o.max_offsets_per_trigger == 5 and o.read_committed
    assert o.max_trigger_delay_ms == 30_000
    assert o.client == {"bootstrap.servers": "h:1", "client.id": "x"}
    assert o.starting.kind == "latest"  # streaming default
    assert parse_source_options({**BS, "subscribe": "a"}, streaming=False).starting.kind == "earliest"


def test_offsets_json_options():
    o = parse_source_options({**BS, "assign": '{"t":[1,0]}', "startingOffsets": '{"t":{"0":5,"1":-2}}',
                              "endingOffsets": '{"t":{"0":-1,"1":9}}'}, streaming=False)
    assert o.assign == {"t": [0, 1]}
    assert o.starting.offsets == {("t", 0): 5, ("t", 1): -2}
    assert o.ending is not None and o.ending.offsets == {("t", 0): -1, ("t", 1): 9}
    o = parse_source_options({**BS, "subscribe": "t", "startingOffsetsByTimestamp": '{"t":{"0":1000}}',
                              "startingOffsetsByTimestampStrategy": "latest"}, streaming=True)
    assert o.starting.kind == "timestamps" and o.starting.offsets == {("t", 0): 1000}
    assert o.starting.strategy == "latest"
    o = parse_source_options(
        {**BS, "subscribe": "t", "startingTimestamp": "77", "startingOffsets": "earliest"}, streaming=True
    )
    assert o.starting.kind == "timestamp" and o.starting.timestamp == 77  # timestamp wins, as in Spark


@pytest.mark.parametrize("extra, streaming, message", [
    ({"subscribe": "t", "colour": "red"}, False, "'colour' is not supported"),
    ({"subscribe": "t", "kafka.key.deserializer": "x"}, False, "'key.deserializer' is not supported"),
    ({"subscribe": "t", "kafka.enable.auto.commit": "true"}, True, "'enable.auto.commit' is not supported"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":-1}}'}, False, "must not use -1"),
    ({"subscribe": "t", "endingOffsets": '{"t":{"0":-2}}'}, False, "must not use -2"),
    ({"subscribe": "t", "endingOffsets": "latest"}, True, "not valid in streaming"),
    ({"subscribe": "t", "startingOffsets": "{bad"}, True, "not valid JSON"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "0"}, True, "at least 1"),
    ({"subscribe": "t", "minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"}, True, "must not exceed"),
    ({"subscribe": "t", "failOnDataLoss": "maybe"}, True, "true or false"),
    ({"subscribe": "t", "kafka.isolation.level": "dirty"}, True, "read_committed or read_uncommitted"),
    ({"subscribePattern": "("}, True, "regular expression"),
    ({"assign": "[1]"}, True, "option 'assign'"),
    ({}, True, "exactly one of"),
])
def test_bad_source_options_are_refused_by_name(extra, streaming, message):
    with pytest.raises(OptionError, match=message):
        parse_source_options({**BS, **extra}, streaming=streaming)


def test_bootstrap_is_required_and_sink_options():
    with pytest.raises(OptionError, match="kafka.bootstrap.servers"):
        parse_source_options({"subscribe": "t"}, streaming=True)
    s = parse_sink_options({**BS, "topic": "out", "kafka.acks": "1", "checkpointLocation": "/x"})
    assert s.topic == "out" and s.client == {"bootstrap.servers": "h:1", "acks": "1"}
    with pytest.raises(OptionError, match="'key.serializer' is not supported"):
        parse_sink_options({**BS, "kafka.key.serializer": "x"})
    with pytest.raises(OptionError, match="'startingoffsets' is not supported by the moldau sink"):
        parse_sink_options({**BS, "startingOffsets": "earliest"})


# ----------------------------------------------------------------------------------------------------
# planning

def test_offsets_json_is_canonical():
    offs = {("b", 10): 3, ("b", 2): 1, ("a", 0): 7}
    j = offsets_to_json(offs)
    assert json.dumps(j) == '{"a": {"0": 7}, "b": {"2": 1, "10": 3}}'
    assert json_to_offsets(json.loads(json.dumps(j))) == offs


def test_split_ranges_like_spark():
    rs = [OffsetRange("t", 0, 0, 1000), OffsetRange("t", 1, 0, 10), OffsetRange("t", 2, 5, 5)]
    out = split_ranges(rs, 5, None)
    assert sum(r.size for r in out) == 1010
    assert [r for r in out if r.partition == 1] == [OffsetRange("t", 1, 0, 10)]
    assert len([r for r in out if r.partition == 0]) == 5  # round(1000/1010*5)
    zero = [r for r in out if r.partition == 0]
    assert zero[0].start == 0 and zero[-1].end == 1000
    assert all(a.end == b.start for a, b in zip(zero, zero[1:]))
    assert split_ranges(rs, 2, None) == rs[:2]  # enough ranges already: unchanged (empty dropped)
    capped = split_ranges(rs, None, 300)
    assert [r.size for r in capped if r.partition == 0] == [250, 250, 250, 250]


def test_rate_limit_is_exact_and_deterministic():
    start = {("t", 0): 0, ("t", 1): 100, ("t", 2): 5}
    end = {("t", 0): 700, ("t", 1): 350, ("t", 2): 55}
    capped = rate_limit(start, end, 300)
    assert sum(capped[tp] - start[tp] for tp in start) == 300
    assert all(start[tp] <= capped[tp] <= end[tp] for tp in start)
    assert capped == rate_limit(dict(reversed(start.items())), end, 300)
    assert rate_limit(start, end, 10_000) == end
    rng = random.Random(3)
    for _ in range(200):
        s = {("t", p): rng.randint(0, 50) for p in range(rng.randint(1, 6))}
        e = {tp: o + rng.randint(0, 40) for tp, o in s.items()}
        lim = rng.randint(1, 100)
        c = rate_limit(s, e, lim)
        assert sum(c[tp] - s[tp] for tp in s) == min(lim, sum(e[tp] - s[tp] for tp in s))


# ---------------------------------------------------------------------------------------------------- Arrow

def _batch(records, base_offset=0, **kw):
    b = BatchBuilder(2, **kw)
    for r in records:
        b.append(*r)
    return b.build(base_offset)


def _records(n, rng, headers=True):
    out = []
    for i in range(n):
        key = None if i % 5 == 0 else rng.randbytes(rng.randint(0, 200))
        value = None if i % 11 == 0 else rng.randbytes(rng.choice([0, 1, 63, 64, 200, 9000]))
        hs = (
            [("k%d" % j, None if j == 1 else rng.randbytes(rng.randint(0, 70))) for j in range(i % 3)]
            if headers
            else []
        )
        out.append((1_700_000_000_000 + rng.randint(-100_000, 100_000), key, value, hs))
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_column_builder_matches_decode_batch(codec):
    rng = random.Random(codec)
    bufs = [
        _batch(_records(150, rng), base_offset=1000 + 150 * i, compression=codec_id(codec)) for i in range(4)
    ]
    cb = ColumnBuilder("topic-é", 7, True)
    for buf in bufs:
        cb.add_batch(buf, 0, parse_batch_header(buf, 0), 0, 1 << 62)
    got = cb.finish()
    got.validate(full=True)
    assert got.schema == arrow_schema(True)
    want = [r for buf in bufs for r in decode_batch(buf, 0)]
    d = got.to_pydict()
    assert d["offset"] == [r.offset for r in want] == list(range(1000, 1600))
    assert d["key"] == [r.key for r in want]
    assert d["value"] == [r.value for r in want]
    # records without headers: null (Spark's own Kafka source does the same), never an empty list
    assert [None if hs is None else [(h["key"], h["value"]) for h in hs] for hs in d["headers"]] == [
        r.headers or None for r in want]
    assert got.column("timestamp").cast(pa.int64()).to_pylist() == [r.timestamp * 1000 for r in want]
    assert set(d["topic"]) == {"topic-é"} and set(d["partition"]) == {7} and set(d["timestampType"]) == {0}


def test_column_builder_offset_window_and_log_append_time():
    rng = random.Random(1)
    a = _batch(_records(10, rng, headers=False), base_offset=0)
    b = _batch(_records(10, rng, headers=False), base_offset=10, timestamp_type=1)
    cb = ColumnBuilder("t", 0, False)
    cb.add_batch(a, 0, parse_batch_header(a, 0), 4, 15)
    hb = parse_batch_header(b, 0)
    cb.add_batch(b, 0, hb, 4, 15)
    got = cb.finish()
    assert got.column("offset").to_pylist() == list(range(4, 15))
    assert got.column("timestampType").to_pylist() == [0] * 6 + [1] * 5
    ts = got.column("timestamp").cast(pa.int64()).to_pylist()
    assert ts[6:] == [hb.max_timestamp * 1000] * 5
    assert cb.finish().num_rows == 0  # reset after finish


def test_column_builder_legacy_records_and_empty_results():
    cb = ColumnBuilder("t", 1, True)
    cb.add_record(5, 1000, 0, b"k", b"v", [])
    cb.add_record(6, 1001, 0, None, None, [])
    cb.add_record(9, 2000, 1, b"x", b"y", [])  # gap: a new run
    got = cb.finish().to_pydict()
    assert (
        got["offset"] == [5, 6, 9] and got["key"] == [b"k", None, b"x"] and got["value"] == [b"v", None, b"y"]
    )
    assert got["timestampType"] == [0, 0, 1] and got["headers"] == [None, None, None]
    buf = _batch([(1, b"a", b"b", [])], base_offset=3)
    cb.add_batch(buf, 0, parse_batch_header(buf, 0), 10, 20)
    assert cb.finish().num_rows == 0


def test_column_builder_refuses_malformed_records():
    buf = bytearray(_batch([(1, b"key", b"value" * 10, [])]))
    buf[61] = 0x7E  # record length far beyond the batch
    cb = ColumnBuilder("t", 0, False)
    cb.add_batch(bytes(buf), 0, parse_batch_header(bytes(buf), 0), 0, 10)
    with pytest.raises(InvalidRecordError):
        cb.finish()


def test_large_values_spanning_fetch_chunks():
    recs = [(1, None, os.urandom(300_000), []) for _ in range(3)]
    buf = _batch(recs)
    cb = ColumnBuilder("t", 0, False)
    cb.add_batch(buf, 0, parse_batch_header(buf, 0), 0, 3)
    assert cb.finish().column("value").to_pylist() == [r[2] for r in recs]


# ---------------------------------------------------------------------------------------------------- writer

@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_bulk_encoded_batches_decode_exactly(codec):
    from moldau.protocol.records import check_crc
    from moldau.spark.produce import _cuts, build_batch, encode_section

    rng = random.Random(codec)
    n = 2000
    keys = [None if i % 4 == 0 else rng.randbytes(rng.choice([0, 1, 63, 64, 9000])) for i in range(n)]
    vals = [
        None if i % 13 == 0 else rng.randbytes(rng.choice([0, 100, 8191, 8192, 70_000])) for i in range(n)
    ]
    ka = pa.array(keys, pa.binary()).slice(3)
    va = pa.array(vals, pa.binary()).slice(3)
    buf = bytes(build_batch(encode_section(ka, va), n - 3, 1234, codec_id(codec)))
    h = parse_batch_header(buf, 0)
    check_crc(buf, 0, h)
    recs = decode_batch(buf, 0)
    assert [r.key for r in recs] == keys[3:] and [r.value for r in recs] == vals[3:]
    assert [r.offset for r in recs] == list(range(n - 3)) and {r.timestamp for r in recs} == {1234}
    s = pa.array(["kä", None, ""])
    assert [r.key for r in decode_batch(bytes(build_batch(encode_section(s, s), 3, 1, 0)), 0)] == [
        "kä".encode(), None, b""]
    assert _cuts(np.array([10, 10, 10, 10, 50]), 25) == [0, 2, 4, 5]


def test_arrow_writer_partitioning_like_kafka():
    import itertools
    from types import SimpleNamespace

    from moldau.client.partitioner import key_partition
    from moldau.spark.produce import ArrowProducer

    p = object.__new__(ArrowProducer)
    p.s = SimpleNamespace(sticky=itertools.count(5))
    keys = pa.array([b"a", None, b"bb", None, b"c"], pa.binary())
    part = pa.array([None, None, None, 2, 1], pa.int32())
    rows = np.arange(5)
    got = p._assign("t", 4, rows, keys, part)
    assert got[0] == key_partition(b"a", 4) and got[2] == key_partition(b"bb", 4)
    assert got[3] == 2 and got[4] == 1  # the partition column wins over the key
    assert got[1] == 5 % 4  # keyless: the batch's sticky partition
    assert p._assign("t", 4, rows[:2], keys, None)[1] == 6 % 4  # the next batch: the next partition
    with pytest.raises(ValueError, match="partition 7"):
        p._assign("t", 4, rows, keys, pa.array([7, None, None, None, None], pa.int32()))
