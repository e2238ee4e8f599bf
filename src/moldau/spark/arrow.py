"""Arrow columns straight from fetched Kafka record batches (the reader's fast path).

A ``ColumnBuilder`` collects the records sections of the v2 batches of one fetch (decompressed where
needed) into one buffer and turns them into Arrow columns in a few vectorised passes:

1. one Python loop over the records finds where each record starts (the length varint is the only thing
   that links one record to the next);
2. numpy decodes the varints of every record at once, field by field (timestamp delta, offset delta, key
   length, value length, header count);
3. keys and values are cut out of the buffer by Arrow itself: a ``binary`` array whose offsets alternate
   value start / value end holds every value at an even index, and ``take`` of the even indices copies
   them into a fresh contiguous array in C.

So the per-record Python work is one varint, everything else runs in numpy/Arrow. Record headers (with
``includeHeaders``) are walked in Python only for records that have some.

The Arrow schema is exactly what PySpark expects for Spark's Kafka schema (``binary``, ``string``,
``int32``, ``int64``, ``timestamp[us, tz=UTC]``, ``list<element: struct<key: string, value: binary>>``).
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa

from moldau.protocol.records import (
    BatchBuilder,
    BatchHeader,
    InvalidRecordError,
    decompress,
    parse_batch_header,
)

log = logging.getLogger(__name__)

__all__ = ["HEADERS_TYPE", "HEADER_STRUCT", "ColumnBuilder", "arrow_schema", "rows_from_batch"]

_HEADER_SIZE = 61
_COMPRESSION_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_PAD = 16  # zero bytes after the joined sections, so a varint read past a bad record stays in bounds

HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS_TYPE = pa.list_(pa.field("element", HEADER_STRUCT))
_TS_TYPE = pa.timestamp("us", tz="UTC")


def arrow_schema(include_headers: bool) -> pa.Schema:
    """Spark's Kafka source schema as Arrow (what PySpark checks yielded batches against)."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", _TS_TYPE),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


def _varints(data: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints at every position of ``pos`` -> (values int64, positions after them)."""
    b = data[pos]
    u = (b & 0x7F).astype(np.uint64)
    nxt = pos + 1
    more = np.flatnonzero(b >= 0x80)
    shift = 7
    while more.size:
        if shift > 63:
            raise InvalidRecordError("varint too long")
        b = data[nxt[more]]
        u[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        nxt[more] += 1
        more = more[b >= 0x80]
        shift += 7
    v = (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64)
    return v, nxt


def _uvarint(data: Any, pos: int) -> tuple[int, int]:
    u = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            return u, pos
        shift += 7
        if shift > 63:
            raise InvalidRecordError("varint too long")


def _zz(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def _cut(buf: pa.Buffer, start: np.ndarray, length: np.ndarray, typ: pa.DataType) -> pa.Array:
    """Elements ``buf[start[i] : start[i] + length[i]]`` (length -1 = null) as a fresh Arrow array."""
    n = len(start)
    if n == 0:
        return pa.array([], type=typ)
    null = length < 0
    ln = np.where(null, 0, length)
    offs = np.empty(2 * n, dtype=np.int32)
    offs[0::2] = start
    offs[1::2] = start + ln
    nulls = int(null.sum())
    validity = None
    if nulls:
        valid = np.ones(2 * n - 1, dtype=bool)
        valid[0::2] = ~null
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    wide = pa.Array.from_buffers(typ, 2 * n - 1, [validity, pa.py_buffer(offs), buf], null_count=nulls)
    even = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.arange(0, 2 * n, 2, dtype=np.int32))])
    return wide.take(even)


class ColumnBuilder:
    """Collects the records of one topic-partition and builds a ``pyarrow.RecordBatch``.

    ``add_batch(buf, pos, header, lo, hi)`` takes the v2 batch at ``buf[pos:]`` (records with offsets in
    ``[lo, hi)`` are kept); ``add_record(...)`` adds one decoded record (legacy message formats).
    ``finish()`` returns the batch and resets the builder. ``pending`` counts the records added so far
    (before the offset filter).
    """

    def __init__(self, topic: str, partition: int, include_headers: bool) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.schema = arrow_schema(include_headers)
        self._topic_bytes = topic.encode("utf-8")
        self._reset()

    def _reset(self) -> None:
        self._sections: list[Any] = []
        self._meta: list[tuple[int, int, int, int, int, int]] = []  # count, base_off, base_ts, lat, lo, hi
        self._size = 0
        self.pending = 0
        self._legacy: BatchBuilder | None = None
        self._legacy_meta: list[tuple[int, int, int]] = []  # offset, ts type, timestamp

    def __len__(self) -> int:
        return self.pending

    @property
    def nbytes(self) -> int:
        return self._size

    def add_batch(self, buf: Any, pos: int, h: BatchHeader, lo: int, hi: int) -> None:
        self._flush_legacy()
        end = pos + h.batch_length + 12
        codec = h.attributes & _COMPRESSION_MASK
        section: Any = memoryview(buf)[pos + _HEADER_SIZE : end]
        if codec:
            section = decompress(codec, section)
        lat = h.max_timestamp if h.attributes & _LOG_APPEND_TIME else -(1 << 63)
        self._sections.append(section)
        self._meta.append((h.records_count, h.base_offset, h.base_timestamp, lat, lo, hi))
        self._size += len(section)
        self.pending += h.records_count

    def add_record(self, offset: int, timestamp: int, ts_type: int, key: Any, value: Any,
                   headers: Iterable[tuple[str, Any]] | None) -> None:
        """One decoded record (legacy formats): re-encoded into a v2 records section; a run of records
        with consecutive offsets and one timestamp type shares a section."""
        meta = self._legacy_meta
        if self._legacy is not None and (meta[-1][1] != ts_type or offset != meta[-1][0] + 1
                                         or (ts_type == 1 and timestamp != meta[-1][2])):
            self._flush_legacy()
        if self._legacy is None:
            self._legacy = BatchBuilder(2, 0, timestamp_type=ts_type)
        self._legacy.append(timestamp, key, value, list(headers or ()))
        self._legacy_meta.append((offset, ts_type, timestamp))
        self.pending += 1

    def _flush_legacy(self) -> None:
        lb = self._legacy
        if lb is None:
            return
        self._legacy = None
        meta, self._legacy_meta = self._legacy_meta, []
        self.pending -= len(meta)
        first = meta[0][0]
        built = lb.build(first)
        h = parse_batch_header(built, 0)  # LogAppendTime runs share one timestamp: the batch's max
        self.add_batch(built, 0, h, first, first + len(meta))

    # ------------------------------------------------------------------------------------------------
    def finish(self) -> pa.RecordBatch:
        try:
            return self._finish()
        except IndexError:  # a varint or length pointing past the data: the checks below catch the rest
            raise InvalidRecordError(f"malformed record data in {self.topic}-{self.partition}") from None

    def _finish(self) -> pa.RecordBatch:
        self._flush_legacy()
        sections, meta = self._sections, self._meta
        self._reset()
        total = sum(m[0] for m in meta)
        if total == 0:
            return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in self.schema],
                                              schema=self.schema)
        joined = bytearray()
        for s in sections:
            joined += s
        joined += bytes(_PAD)
        if len(joined) > 0x7FFFFFFF:
            raise InvalidRecordError("more than 2 GiB of records in one Arrow batch")
        # 1. where each record begins (the one sequential pass): the length varint links a record to the
        #    next; lengths are decoded and checked again, vectorised, below
        begins: list[int] = []
        mark = begins.append
        data = joined
        base = 0
        for s, (count, *_rest) in zip(sections, meta):
            stop = base + len(s)
            pos = base
            for _ in range(count):
                mark(pos)
                b = data[pos]
                if b < 0x80:
                    pos += 1 + (b >> 1)  # a negative (odd) length fails the checks below
                else:
                    b2 = data[pos + 1]
                    if b2 < 0x80:
                        pos += 2 + (((b & 0x7F) | (b2 << 7)) >> 1)
                    else:
                        u, pos = _uvarint(data, pos)
                        pos += u >> 1
            if pos != stop:
                raise InvalidRecordError(f"records of the batch at offset {_rest[0]} do not fill its records "
                                         f"section ({pos - stop:+d} bytes)")
            base = stop
        d = np.frombuffer(joined, dtype=np.uint8)
        length, starts = _varints(d, np.array(begins, dtype=np.int64))
        ends = starts + length
        if (length < 6).any():
            raise InvalidRecordError("invalid record length")
        # 2. fields, vectorised over every record
        counts = np.fromiter((m[0] for m in meta), dtype=np.int64, count=len(meta))
        ts_delta, p = _varints(d, starts + 1)  # skip the attributes byte
        off_delta, p = _varints(d, p)
        klen, p = _varints(d, p)
        kstart = p
        p = p + np.maximum(klen, 0)
        vlen, p = _varints(d, p)
        vstart = p
        p = p + np.maximum(vlen, 0)
        if (klen < -1).any() or (vlen < -1).any() or (p >= ends).any():
            raise InvalidRecordError("malformed record (key/value length past the record's end)")
        if len(meta) == 1:
            _c, base_off, base_ts, lat, lo, hi = meta[0]
            offsets = off_delta + base_off
            if lat != -(1 << 63):
                ts_ms = np.full(total, lat, dtype=np.int64)
                ts_type = np.ones(total, dtype=np.int32)
            else:
                ts_ms = ts_delta + base_ts
                ts_type = np.zeros(total, dtype=np.int32)
            keep = None if (lo <= offsets[0] and offsets[-1] < hi and (off_delta >= 0).all()) else (
                (offsets >= lo) & (offsets < hi))
        else:
            cols = np.array([m[1:] for m in meta], dtype=np.int64)
            rep = np.repeat(cols, counts, axis=0)
            offsets = off_delta + rep[:, 0]
            is_lat = rep[:, 2] != -(1 << 63)
            ts_ms = np.where(is_lat, rep[:, 2], ts_delta + rep[:, 1])
            ts_type = is_lat.astype(np.int32)
            keep = (offsets >= rep[:, 3]) & (offsets < rep[:, 4])
            if keep.all():
                keep = None
        hdr_pos = p
        if keep is not None:
            idx = np.flatnonzero(keep)
            offsets, ts_ms, ts_type = offsets[idx], ts_ms[idx], ts_type[idx]
            kstart, klen, vstart, vlen = kstart[idx], klen[idx], vstart[idx], vlen[idx]
            hdr_pos, ends = hdr_pos[idx], ends[idx]
        n = len(offsets)
        buf = pa.py_buffer(joined)
        tb = self._topic_bytes
        cols_out = [
            _cut(buf, kstart, klen, pa.binary()),
            _cut(buf, vstart, vlen, pa.binary()),
            pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(
                np.arange(0, (n + 1) * len(tb), len(tb), dtype=np.int32) if tb
                else np.zeros(n + 1, np.int32)),
                pa.py_buffer(tb * n)]),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.full(n, self.partition, np.int32))]),
            pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(np.ascontiguousarray(offsets))]),
            pa.Array.from_buffers(_TS_TYPE, n, [None, pa.py_buffer(np.ascontiguousarray(ts_ms * 1000))]),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.ascontiguousarray(ts_type))]),
        ]
        if self.include_headers:
            cols_out.append(self._headers(joined, d, hdr_pos, ends, n))
        return pa.RecordBatch.from_arrays(cols_out, schema=self.schema)

    def _headers(
        self, joined: bytearray, d: np.ndarray, hpos: np.ndarray, ends: np.ndarray, n: int
    ) -> pa.Array:
        hcount, after = _varints(d, hpos)
        if (hcount < 0).any():
            raise InvalidRecordError("negative header count")
        list_offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(hcount, out=list_offsets[1:])
        h_total = int(list_offsets[-1])
        # a record without headers has null, not an empty list, as in Spark's own Kafka source
        has = hcount > 0
        validity = pa.py_buffer(np.packbits(has, bitorder="little"))
        nulls = n - int(np.count_nonzero(has))
        if h_total == 0:
            if (after != ends).any():
                raise InvalidRecordError("record length mismatch")
            empty = pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())],
                                               fields=list(HEADER_STRUCT))
            return pa.Array.from_buffers(
                HEADERS_TYPE, n, [validity, pa.py_buffer(list_offsets)], null_count=nulls, children=[empty]
            )
        ks = np.empty(h_total, dtype=np.int64)
        kl = np.empty(h_total, dtype=np.int64)
        vs = np.empty(h_total, dtype=np.int64)
        vl = np.empty(h_total, dtype=np.int64)
        j = 0
        data = joined
        for r in np.flatnonzero(hcount).tolist():
            pos = int(after[r])
            end = int(ends[r])
            for _ in range(int(hcount[r])):
                u, pos = _uvarint(data, pos)
                length = _zz(u)
                if length < 0 or pos + length > end:
                    raise InvalidRecordError(f"invalid header key length {length}")
                ks[j] = pos
                kl[j] = length
                pos += length
                u, pos = _uvarint(data, pos)
                length = _zz(u)
                if length < -1 or pos + max(length, 0) > end:
                    raise InvalidRecordError(f"invalid header value length {length}")
                vs[j] = pos
                vl[j] = length
                pos += max(length, 0)
                j += 1
            if pos != end:
                raise InvalidRecordError("record length mismatch after headers")
        buf = pa.py_buffer(joined)
        hk = _cut(buf, ks, kl, pa.string())
        hv = _cut(buf, vs, vl, pa.binary())
        structs = pa.StructArray.from_arrays([hk, hv], fields=list(HEADER_STRUCT))
        return pa.Array.from_buffers(HEADERS_TYPE, n, [validity, pa.py_buffer(list_offsets)],
                                     null_count=nulls, children=[structs])


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def rows_from_batch(buf: Any, pos: int, h: BatchHeader, lo: int, hi: int, topic: str, partition: int,
                    include_headers: bool) -> list[tuple]:
    """The tuple path (one Python tuple per row): a fallback, and the baseline the benchmark compares."""
    from moldau.protocol.records import decode_batch

    ts_type = 1 if h.attributes & _LOG_APPEND_TIME else 0
    td = _dt.timedelta
    out = []
    for r in decode_batch(buf, pos, header=h):
        if lo <= r.offset < hi:
            row: tuple = (
                r.key,
                r.value,
                topic,
                partition,
                r.offset,
                _EPOCH + td(milliseconds=r.timestamp),
                ts_type,
            )
            if include_headers:
                row += (list(r.headers) or None,)  # null without headers, as in Spark's own Kafka source
            out.append(row)
    return out
