"""Batch and streaming writers of the moldau data source (Spark's Kafka sink columns).

Input columns: ``value`` (binary or string, required), ``key`` (binary or string), ``topic`` (string; the
``topic`` option overrides it), ``partition`` (int; null = the producer's partitioner), ``headers``
(array<struct<key: string, value: binary>>). Other columns are ignored, like Spark's Kafka sink does.

Delivery guarantee: **at least once**, for batch and streaming writes. Each task sends its rows, waits for
every acknowledgement (acks=all by default), and fails if any record failed, so Spark retries it; a
retried task or a replayed micro-batch writes its rows again. The Arrow writers (default) build whole
record batches from the Arrow columns (``moldau.spark.produce``); the row writers (``moldau.arrow=false``)
send each row through the idempotent moldau producer.
Exactly-once per micro-batch would need transactions (a transactional id per query and partition, the
batch id from the task context, commit on the driver); moldau's broker and client do not support
transactions yet, so the sink does not claim it.
"""

from __future__ import annotations

import atexit
import collections
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from moldau.client import Producer

from .kafka import check_client_config
from .options import OptionError, SinkOptions, parse_sink_options

log = logging.getLogger(__name__)

__all__ = ["MoldauCommitMessage", "make_batch_writer", "make_stream_writer", "validate_sink_schema"]

_PRODUCER_DEFAULTS = {
    "client.id": "moldau-spark-writer",
    "linger.ms": "5",
    "batch.size": str(256 * 1024),
}


@dataclass
class MoldauCommitMessage(WriterCommitMessage):
    rows: int
    partition_id: int
    batch_id: int | None


def validate_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Spark's KafkaWriter.validateQuery rules, with the same wording where it helps."""
    fields = {f.name.lower(): f for f in schema.fields}
    value = fields.get("value")
    if value is None:
        raise OptionError("required attribute 'value' not found in the data to write")
    if not isinstance(value.dataType, (BinaryType, StringType)):
        raise OptionError(f"value attribute type must be a string or binary, got {value.dataType.simpleString()}")
    key = fields.get("key")
    if key is not None and not isinstance(key.dataType, (BinaryType, StringType)):
        raise OptionError(f"key attribute type must be a string or binary, got {key.dataType.simpleString()}")
    topic = fields.get("topic")
    if opts.topic is None:
        if topic is None:
            raise OptionError("topic option required when no 'topic' attribute is present in the data. "
                              "Use the topic option for setting a topic.")
    if topic is not None and not isinstance(topic.dataType, StringType):
        raise OptionError(f"topic attribute type must be a string, got {topic.dataType.simpleString()}")
    part = fields.get("partition")
    if part is not None and not isinstance(part.dataType, IntegerType):
        raise OptionError(f"partition attribute type must be an int, got {part.dataType.simpleString()}")
    headers = fields.get("headers")
    if headers is not None:
        t = headers.dataType
        ok = (isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
              and [f.name for f in t.elementType.fields] == ["key", "value"]
              and isinstance(t.elementType.fields[0].dataType, StringType)
              and isinstance(t.elementType.fields[1].dataType, BinaryType))
        if not ok:
            raise OptionError("headers attribute type must be array<struct<key:string,value:binary>>, got "
                              f"{t.simpleString()}")


# ----------------------------------------------------------------------------------------------------
# producers, one per config per Python worker process (workers are reused across tasks)

_PRODUCERS: dict[tuple, Producer] = {}
_PRODUCERS_LOCK = threading.Lock()


def _producer(client: dict[str, str]) -> Producer:
    cfg = dict(_PRODUCER_DEFAULTS)
    cfg.update(client)
    key = tuple(sorted(cfg.items()))
    with _PRODUCERS_LOCK:
        p = _PRODUCERS.get(key)
        if p is None or p._closed:
            p = _PRODUCERS[key] = Producer(config=cfg)
        return p


@atexit.register
def _close_producers() -> None:
    with _PRODUCERS_LOCK:
        for p in _PRODUCERS.values():
            try:
                p.close(10)
            except Exception:  # noqa: BLE001
                pass
        _PRODUCERS.clear()


class _Sender:
    """Sends rows through the cached producer and tracks their futures; ``finish()`` raises on failure."""

    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts
        self.producer = _producer(opts.client)
        self.pending: collections.deque = collections.deque()
        self.rows = 0

    def send(self, topic: Any, value: Any, key: Any, partition: Any, headers: Any) -> None:
        if self.opts.topic is not None:
            topic = self.opts.topic
        elif topic is None:
            raise OptionError("null topic present in the data. Use the topic option for setting a topic.")
        self.pending.append(self.producer.send(topic, value, key, partition, None, headers))
        self.rows += 1
        if len(self.pending) >= 100_000:
            self._reap(50_000)

    def _reap(self, keep: int) -> None:
        q = self.pending
        while len(q) > keep:
            f = q[0]
            if not f.done():
                f.result()  # wait for the oldest (back-pressure) and raise its error
            q.popleft()
            exc = f.exception()
            if exc is not None:
                raise exc

    def finish(self) -> int:
        self.producer.flush()
        for f in self.pending:
            exc = f.exception()
            if exc is not None:
                raise RuntimeError(f"writing to Kafka failed: {exc}") from exc
        self.pending.clear()
        return self.rows


def _headers(hs: Any) -> list[tuple[str, Any]] | None:
    if not hs:
        return None
    out = []
    for h in hs:
        if isinstance(h, dict):
            out.append((h["key"], h["value"]))
        else:
            out.append((h[0], h[1]))
    return out


def _write_rows(opts: SinkOptions, rows: Iterator[Any]) -> int:
    s = _Sender(opts)
    for row in rows:
        d = row.asDict() if hasattr(row, "asDict") else dict(row)
        d = {k.lower(): v for k, v in d.items()}
        s.send(d.get("topic"), d.get("value"), d.get("key"), d.get("partition"), _headers(d.get("headers")))
    return s.finish()


def _write_arrow(opts: SinkOptions, batches: Iterator[Any]) -> int:
    """The Arrow writer: whole record batches built from the columns (moldau.spark.produce)."""
    from .produce import ArrowProducer

    p = ArrowProducer(opts.client, opts.topic)
    for batch in batches:
        p.write(batch)
    return p.finish()


def _task_info() -> tuple[int, int | None]:
    try:
        from pyspark import TaskContext

        tc = TaskContext.get()
        if tc is None:
            return -1, None
        bid = tc.getLocalProperty("streaming.sql.batchId")
        return tc.partitionId(), (int(bid) if bid is not None else None)
    except Exception:  # noqa: BLE001
        return -1, None


# ----------------------------------------------------------------------------------------------------


class _WriterBase:
    def __init__(self, opts: SinkOptions) -> None:
        self.opts = opts

    def _done(self, rows: int) -> MoldauCommitMessage:
        pid, bid = _task_info()
        return MoldauCommitMessage(rows=rows, partition_id=pid, batch_id=bid)


class MoldauBatchWriter(_WriterBase, DataSourceWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return self._done(_write_rows(self.opts, iterator))

    def commit(self, messages: list) -> None:
        log.info("batch write committed: %d rows", sum(m.rows for m in messages if m is not None))


class MoldauBatchArrowWriter(_WriterBase, DataSourceArrowWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return self._done(_write_arrow(self.opts, iterator))

    def commit(self, messages: list) -> None:
        log.info("batch write committed: %d rows", sum(m.rows for m in messages if m is not None))


class MoldauStreamWriter(_WriterBase, DataSourceStreamWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return self._done(_write_rows(self.opts, iterator))

    def commit(self, messages: list, batchId: int) -> None:
        log.info("micro-batch %d written: %d rows (at least once)", batchId,
                 sum(m.rows for m in messages if m is not None))

    def abort(self, messages: list, batchId: int) -> None:
        log.warning("micro-batch %d aborted: rows already sent stay in the topic (at-least-once sink)", batchId)


class MoldauStreamArrowWriter(_WriterBase, DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return self._done(_write_arrow(self.opts, iterator))

    def commit(self, messages: list, batchId: int) -> None:
        log.info("micro-batch %d written: %d rows (at least once)", batchId,
                 sum(m.rows for m in messages if m is not None))

    def abort(self, messages: list, batchId: int) -> None:
        log.warning("micro-batch %d aborted: rows already sent stay in the topic (at-least-once sink)", batchId)


def _sink(options: Any, schema: StructType) -> SinkOptions:
    opts = parse_sink_options(options)
    cfg = dict(_PRODUCER_DEFAULTS)
    cfg.update(opts.client)
    check_client_config(cfg, "producer")
    validate_sink_schema(schema, opts)
    return opts


def make_batch_writer(options: Any, schema: StructType, overwrite: bool) -> DataSourceWriter:
    if overwrite:
        raise OptionError("save mode Overwrite is not allowed for the moldau sink: records are appended to "
                          "topics (use mode 'append')")
    opts = _sink(options, schema)
    return MoldauBatchArrowWriter(opts) if opts.arrow else MoldauBatchWriter(opts)


def make_stream_writer(options: Any, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
    opts = _sink(options, schema)
    return MoldauStreamArrowWriter(opts) if opts.arrow else MoldauStreamWriter(opts)
