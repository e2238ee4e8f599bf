"""Batch and streaming readers of the moldau data source.

Planning (offsets, partitions, rate limits) runs on the driver; ``read()`` runs on executors in a freshly
unpickled reader, so every ``KafkaInputPartition`` carries all it needs (range, client settings, flags) and
nothing the driver learned later is consulted there. Streaming offsets are Spark's Kafka JSON,
``{"topic": {"0": 42}}``: the checkpoint holds them and is the only truth about progress.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from moldau.protocol.records import decode_message_set

from .arrow import ColumnBuilder, rows_from_batch
from .kafka import DataLossError, OffsetClient, _LegacyEntry, data_loss, fetch_range, resolve_offsets
from .options import SourceOptions, parse_source_options
from .planning import OffsetRange, json_to_offsets, offsets_to_json, rate_limit, split_ranges, total_rows
from .valueformat import decode_batch, resolve_source

log = logging.getLogger(__name__)

__all__ = ["KafkaInputPartition", "MoldauBatchReader", "MoldauStreamReader", "read_partition"]

TP = tuple[str, int]
_CONTROL = 0x20
_TRANSACTIONAL = 0x10


class KafkaInputPartition(InputPartition):
    """One task's work: offsets ``[start, end)`` of one topic-partition, plus how to read them."""

    def __init__(self, index: int, r: OffsetRange, opts: SourceOptions) -> None:
        super().__init__(index)
        self.topic = r.topic
        self.partition = r.partition
        self.start = r.start
        self.end = r.end
        self.client = dict(opts.client)
        self.include_headers = opts.include_headers
        self.read_committed = opts.read_committed
        self.fail_on_data_loss = opts.fail_on_data_loss
        self.poll_timeout_ms = opts.poll_timeout_ms
        self.arrow = opts.arrow or opts.value_format is not None  # decoding works on Arrow batches
        self.value_format = opts.value_format

    def __repr__(self) -> str:
        return f"KafkaInputPartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


def read_partition(p: KafkaInputPartition) -> Iterator[Any]:
    """The records of one input partition: Arrow RecordBatches (default) or tuples (moldau.arrow=false)."""
    builder = ColumnBuilder(p.topic, p.partition, p.include_headers) if p.arrow else None
    vf = p.value_format
    decoder = None
    for chunk, lo, hi in fetch_range(p.client, p.topic, p.partition, p.start, p.end,
                                     read_committed=p.read_committed, fail_on_data_loss=p.fail_on_data_loss,
                                     timeout_ms=p.poll_timeout_ms):
        data = chunk.data
        aborted = chunk.aborted
        rows: list[tuple] = []
        for pos, h in chunk.batches:
            if isinstance(h, _LegacyEntry):  # its offset is the last inner one: filter record by record
                for r in decode_message_set(memoryview(data)[pos:h.end]):
                    if lo <= r.offset < hi:
                        if builder is not None:
                            builder.add_record(r.offset, r.timestamp, r.timestamp_type, r.key, r.value, ())
                        else:
                            rows.append(_legacy_row(p, r))
                continue
            if h.base_offset >= hi:
                break
            attrs = h.attributes
            if attrs & _CONTROL:
                if aborted is not None:
                    _on_control(aborted, data, pos, h)
                continue
            if h.base_offset + h.last_offset_delta < lo:
                continue
            if aborted is not None and attrs & _TRANSACTIONAL and _is_aborted(aborted, h):
                continue
            if builder is not None:
                builder.add_batch(data, pos, h, lo, hi)
            else:
                rows.extend(rows_from_batch(data, pos, h, lo, hi, p.topic, p.partition, p.include_headers))
        if builder is not None:
            if len(builder):
                batch = builder.finish()
                if batch.num_rows:
                    if vf is not None:
                        batch, decoder = decode_batch(vf, batch, decoder)
                    yield batch
        else:
            yield from rows


def _legacy_row(p: KafkaInputPartition, r: Any) -> tuple:
    import datetime as dt

    ts = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=r.timestamp)
    row: tuple = (r.key, r.value, p.topic, p.partition, r.offset, ts, r.timestamp_type)
    if p.include_headers:
        row += ([],)
    return row


def _is_aborted(aborted: dict[int, list[int]], h: Any) -> bool:
    firsts = aborted.get(h.producer_id)
    return firsts is not None and bool(firsts) and firsts[0] <= h.base_offset


def _on_control(aborted: dict[int, list[int]], data: Any, pos: int, h: Any) -> None:
    from moldau.protocol.records import decode_batch, parse_control_record

    try:
        recs = decode_batch(data, pos, header=h)
    except Exception:  # noqa: BLE001
        return
    for r in recs:
        try:
            _v, ctype = parse_control_record(r.key)
        except Exception:  # noqa: BLE001
            continue
        if ctype == 0:  # ABORT marker closes this producer's aborted transaction
            firsts = aborted.get(h.producer_id)
            if firsts:
                firsts.pop(0)


def _input_partitions(ranges: list[OffsetRange], opts: SourceOptions) -> list[KafkaInputPartition]:
    split = split_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)
    return [KafkaInputPartition(i, r, opts) for i, r in enumerate(split)]


def _resolve_value_format(opts: SourceOptions, schema: Any) -> None:
    """With value.format: fix the reader schema now, on the driver (the tasks get its text and id)."""
    if opts.value_format is not None:
        expected = schema["value"].dataType if schema is not None else None
        resolve_source(opts.value_format, expected)


# ----------------------------------------------------------------------------------------------------
# batch


class MoldauBatchReader(DataSourceReader):
    """Reads ``[startingOffsets, endingOffsets)`` once; offsets are resolved when Spark plans the read."""

    def __init__(self, options: Any, schema: Any = None) -> None:
        self.opts = parse_source_options(options, streaming=False)
        _resolve_value_format(self.opts, schema)

    def partitions(self) -> Sequence[InputPartition]:
        o = self.opts
        client = OffsetClient(o)
        try:
            tps = client.partitions()
            assert o.ending is not None
            start = resolve_offsets(o.starting, tps, client, starting=True, option="startingOffsets")
            end = resolve_offsets(o.ending, tps, client, starting=False, option="endingOffsets")
        finally:
            client.close()
        ranges = []
        for tp in tps:
            s, e = start[tp], end[tp]
            if e < s:
                raise ValueError(f"endingOffsets {e} of {tp[0]}-{tp[1]} is before its startingOffsets {s}")
            ranges.append(OffsetRange(tp[0], tp[1], s, e))
        parts = _input_partitions(ranges, o)
        log.info("batch read of %d partitions, %d records, in %d tasks", len(tps),
                 sum(r.size for r in ranges), len(parts))
        return parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaInputPartition)
        return read_partition(partition)


# ----------------------------------------------------------------------------------------------------
# streaming


class MoldauStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader: offsets per partition, new partitions from their earliest offset, rate limits
    (maxOffsetsPerTrigger / minOffsetsPerTrigger + maxTriggerDelay), availableNow."""

    def __init__(self, options: Any, schema: Any = None) -> None:
        self.opts = parse_source_options(options, streaming=True)
        _resolve_value_format(self.opts, schema)
        self._client: OffsetClient | None = None
        self._initial: dict | None = None
        self._target: dict[TP, int] | None = None
        self._last_trigger = time.monotonic()

    def __getstate__(self) -> dict:
        # executors get only the options; the driver's client, caches and timers stay behind
        return {"opts": self.opts}

    def __setstate__(self, state: dict) -> None:
        self.opts = state["opts"]
        self._client = None
        self._initial = None
        self._target = None
        self._last_trigger = time.monotonic()

    @property
    def client(self) -> OffsetClient:
        if self._client is None:
            self._client = OffsetClient(self.opts)
        return self._client

    # -- offsets ----------------------------------------------------------------------------------------
    def initialOffset(self) -> dict:
        # Spark asks more than once for a new query: resolve "latest"/"earliest"/timestamps only once.
        if self._initial is None:
            c = self.client
            tps = c.partitions()
            offs = resolve_offsets(self.opts.starting, tps, c, starting=True, option="startingOffsets")
            self._initial = offsets_to_json(offs)
            log.info("initial offsets %s", self._initial)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        c = self.client
        self._target = c.latest(c.partitions())
        log.info("availableNow: reading up to %s", offsets_to_json(self._target))

    def reportLatestOffset(self) -> dict | None:
        c = self.client
        return offsets_to_json(c.latest(c.partitions()))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        c = self.client
        begin = json_to_offsets(start)
        tps = c.partitions()
        latest = c.latest(tps)
        new = [tp for tp in tps if tp not in begin]
        base = {tp: begin[tp] for tp in tps if tp in begin}
        if new:
            base.update(c.earliest(new))
            log.info("new partitions %s start at their earliest offsets", new)
        avail = dict(latest)
        if self._target is not None:
            for tp in avail:
                avail[tp] = min(avail[tp], self._target.get(tp, base[tp]))
        # (a partition whose log now ends before our position keeps that lower end: partitions() reports
        # the data loss and the next batch starts from there)
        end = avail
        if not isinstance(limit, ReadAllAvailable):
            o = self.opts
            n_avail = total_rows(base, {tp: e for tp, e in avail.items() if e > base[tp]})
            min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else o.min_offsets_per_trigger
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
            if min_rows is not None and n_avail < min_rows and self._target is None:
                waited = (time.monotonic() - self._last_trigger) * 1000
                if waited < o.max_trigger_delay_ms:
                    log.debug("%d records available, fewer than minOffsetsPerTrigger %d: skipping", n_avail,
                              min_rows)
                    return start
            if max_rows is not None:
                grow = {tp: e for tp, e in avail.items() if e > base[tp]}
                capped = rate_limit(base, grow, max_rows)
                end = {tp: capped.get(tp, e) for tp, e in avail.items()}
        result = offsets_to_json(end)
        if json_to_offsets(result) == begin:
            return start
        self._last_trigger = time.monotonic()
        return result

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        o = self.opts
        s = json_to_offsets(start)
        e = json_to_offsets(end)
        gone = sorted(set(s) - set(e))
        if gone:
            data_loss(o.fail_on_data_loss, f"partitions {gone} disappeared (deleted topic or partition)")
        new = [tp for tp in e if tp not in s]
        if new:
            earliest = self.client.earliest(new)
            for tp in new:
                if earliest[tp] > e[tp]:
                    data_loss(o.fail_on_data_loss, f"new partition {tp[0]}-{tp[1]} starts at {earliest[tp]}, "
                              f"after the batch's end {e[tp]}")
                    earliest[tp] = e[tp]
            s.update(earliest)
        # offsets deleted since they were planned (retention, DeleteRecords): report now, on the driver
        earliest_now = self.client.earliest(sorted(set(e) & set(s)))
        ranges = []
        for tp in sorted(e):
            a, b = s[tp], e[tp]
            first = earliest_now.get(tp, a)
            if a < first and a < b:
                data_loss(
                    o.fail_on_data_loss,
                    f"offsets [{a}, {min(first, b)}) of {tp[0]}-{tp[1]} were deleted "
                    f"before they were read (the log now starts at {first})",
                )
                a = min(first, b)
            if b < a:
                data_loss(o.fail_on_data_loss, f"offset of {tp[0]}-{tp[1]} went back from {a} to {b} "
                          "(the partition was truncated or recreated)")
                continue
            ranges.append(OffsetRange(tp[0], tp[1], a, b))
        return _input_partitions(ranges, o)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, KafkaInputPartition)
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        # Nothing to do: progress lives in Spark's checkpoint (the source commits nothing to Kafka).
        pass

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


_ = DataLossError
