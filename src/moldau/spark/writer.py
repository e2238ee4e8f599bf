"""Batch and streaming writers of the moldau data source (Spark's Kafka sink columns).

Input columns: ``value`` (binary or string, required), ``key`` (binary or string), ``topic`` (string; the
``topic`` option overrides it), ``partition`` (int; null = the producer's partitioner), ``headers``
(array<struct<key: string, value: binary>>). Other columns are ignored, like Spark's Kafka sink does.

Delivery guarantees (docs/spark.md states them precisely):

* **Streaming writes: exactly once per micro-batch** where the broker supports transactions (the default;
  ``deliveryGuarantee=exactly-once`` insists, ``at-least-once`` opts out). Each task writes its rows of a
  micro-batch in one Kafka transaction whose transactional id is ``<prefix>-<task partition id>`` (prefix:
  ``transactionalIdPrefix``, default ``moldau-spark-<query id>``) and leaves it open; its commit message
  carries the producer id and epoch; the driver's ``commit(messages, batchId)`` commits every task's
  transaction (EndTxn) and ``abort`` aborts them. The transaction also commits a batch marker (the batch id
  as the committed offset of the consumer group named like the transactional id), so that a task of a
  micro-batch replayed after a failure finds its rows already committed and writes nothing
  (``moldau.spark.txn``).
* Batch writes, and streaming writes without transactions: **at least once**. Each task sends its rows,
  waits for every acknowledgement (acks=all by default) and fails if any record failed, so Spark retries
  it; a retried task or a replayed micro-batch writes its rows again.

The Arrow writers (default) build whole record batches from the Arrow columns (``moldau.spark.produce``);
the row writers (``moldau.arrow=false``) send each row through the moldau producer (transactional in the
exactly-once mode).
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

from moldau.client import OffsetAndMetadata, Producer, TopicPartition

from .kafka import check_client_config
from .options import AT_LEAST_ONCE, EXACTLY_ONCE, OptionError, SinkOptions, parse_sink_options
from .txn import TransactionError, TxnHandle
from .valueformat import encode_batches, resolve_sink

log = logging.getLogger(__name__)

__all__ = ["MoldauCommitMessage", "make_batch_writer", "make_stream_writer", "transactional_id",
           "validate_sink_schema"]

_PRODUCER_DEFAULTS = {
    "client.id": "moldau-spark-writer",
    "linger.ms": "5",
    "batch.size": str(256 * 1024),
}
# transaction.timeout.ms of the sink's transactions unless kafka.transaction.timeout.ms says otherwise: a
# task's transaction stays open until the driver commits the micro-batch, so it must outlive the slowest
# task of a batch (Kafka's brokers accept up to transaction.max.timeout.ms, 15 minutes by default).
DEFAULT_TRANSACTION_TIMEOUT_MS = 600_000


@dataclass
class MoldauCommitMessage(WriterCommitMessage):
    rows: int
    partition_id: int
    batch_id: int | None
    transactional_id: str | None = None   # exactly-once: the task's open transaction, for the driver
    producer_id: int = -1
    producer_epoch: int = -1
    skipped: bool = False                 # exactly-once: this batch was already committed for the id

    def handle(self) -> TxnHandle | None:
        if self.transactional_id is None:
            return None
        return TxnHandle(self.transactional_id, self.producer_id, self.producer_epoch)


def validate_sink_schema(schema: StructType, opts: SinkOptions) -> None:
    """Spark's KafkaWriter.validateQuery rules, with the same wording where it helps."""
    fields = {f.name.lower(): f for f in schema.fields}
    value = fields.get("value")
    if value is None:
        raise OptionError("required attribute 'value' not found in the data to write")
    if opts.value_format is None and not isinstance(value.dataType, (BinaryType, StringType)):
        raise OptionError(
            f"value attribute type must be a string or binary, got {value.dataType.simpleString()}"
        )
    key = fields.get("key")
    if key is not None and not isinstance(key.dataType, (BinaryType, StringType)):
        raise OptionError(f"key attribute type must be a string or binary, got {key.dataType.simpleString()}")
    topic = fields.get("topic")
    if opts.topic is None and topic is None:
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
    """Sends rows through a producer (the cached one by default) and tracks their futures; ``finish()``
    raises on failure."""

    def __init__(self, opts: SinkOptions, producer: Producer | None = None) -> None:
        self.opts = opts
        self.producer = producer if producer is not None else _producer(opts.client)
        self.pending: collections.deque = collections.deque()
        self.rows = 0
        self.first_topic: str | None = None

    def send(self, topic: Any, value: Any, key: Any, partition: Any, headers: Any) -> None:
        if self.opts.topic is not None:
            topic = self.opts.topic
        elif topic is None:
            raise OptionError("null topic present in the data. Use the topic option for setting a topic.")
        if self.first_topic is None:
            self.first_topic = topic
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


def _send_row(s: _Sender, row: Any) -> None:
    d = row.asDict() if hasattr(row, "asDict") else dict(row)
    d = {k.lower(): v for k, v in d.items()}
    s.send(d.get("topic"), d.get("value"), d.get("key"), d.get("partition"), _headers(d.get("headers")))


def _write_rows(opts: SinkOptions, rows: Iterator[Any]) -> int:
    s = _Sender(opts)
    for row in rows:
        _send_row(s, row)
    return s.finish()


def _write_arrow(opts: SinkOptions, batches: Iterator[Any]) -> int:
    """The Arrow writer: whole record batches built from the columns (moldau.spark.produce)."""
    from .produce import ArrowProducer

    p = ArrowProducer(opts.client, opts.topic)
    if opts.value_format is not None:
        batches = encode_batches(opts.value_format, batches)
    for batch in batches:
        p.write(batch)
    return p.finish()


@dataclass(slots=True)
class _TaskInfo:
    partition_id: int
    batch_id: int | None
    query_id: str | None


def _task_info() -> _TaskInfo:
    try:
        from pyspark import TaskContext

        tc = TaskContext.get()
        if tc is None:
            return _TaskInfo(-1, None, None)
        bid = tc.getLocalProperty("streaming.sql.batchId")
        return _TaskInfo(tc.partitionId(), int(bid) if bid is not None else None,
                         tc.getLocalProperty("sql.streaming.queryId"))
    except Exception:  # noqa: BLE001
        return _TaskInfo(-1, None, None)


# ----------------------------------------------------------------------------------------------------
# exactly once: one transaction per task and micro-batch, committed by the driver


def transactional_id(prefix: str | None, query_id: str, partition_id: int) -> str:
    """The transactional id (and batch-marker group id) of a task: ``<prefix>-<partition id>``."""
    return f"{prefix or 'moldau-spark-' + query_id}-{partition_id}"


def _eos_client(opts: SinkOptions) -> dict[str, str]:
    client = dict(opts.client)
    client.setdefault("acks", "all")
    client.setdefault("transaction.timeout.ms", str(DEFAULT_TRANSACTION_TIMEOUT_MS))
    return client


def _eos_task(opts: SinkOptions) -> tuple[_TaskInfo, str]:
    info = _task_info()
    if info.batch_id is None or info.query_id is None or info.partition_id < 0:
        raise RuntimeError(
            "exactly-once write outside a streaming micro-batch task (no streaming.sql.batchId / "
            "sql.streaming.queryId in the task context)"
        )
    return info, transactional_id(opts.txn_prefix, info.query_id, info.partition_id)


def _write_arrow_eos(opts: SinkOptions, batches: Iterator[Any]) -> MoldauCommitMessage:
    from .produce import ArrowProducer, TaskTransaction, bulk_session

    info, tid = _eos_task(opts)
    assert info.batch_id is not None and info.query_id is not None
    client = _eos_client(opts)
    s = bulk_session(client)
    txn = TaskTransaction(s, tid, info.query_id, info.batch_id, int(client["transaction.timeout.ms"]))
    p: ArrowProducer | None = None
    if opts.value_format is not None:
        batches = encode_batches(opts.value_format, batches)
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if p is None:
                if not txn.start():
                    for _ in batches:
                        pass
                    return MoldauCommitMessage(0, info.partition_id, info.batch_id, skipped=True)
                p = ArrowProducer(client, opts.topic, txn, s)
            p.write(batch)
        rows = p.finish() if p is not None else 0
        handle = txn.prepare(rows) if p is not None else None
    except BaseException:
        txn.abort()
        raise
    return _eos_message(rows, info, handle)


def _write_rows_eos(opts: SinkOptions, rows: Iterator[Any]) -> MoldauCommitMessage:
    """The row writer in transactions: the moldau client's transactional producer (one per task); the
    transaction is left open for the driver (closing the producer does not end it)."""
    from .produce import bulk_session
    from .txn import committed_markers

    info, tid = _eos_task(opts)
    assert info.batch_id is not None and info.query_id is not None
    client = _eos_client(opts)
    cfg = dict(_PRODUCER_DEFAULTS)
    cfg.update(client)
    cfg["transactional.id"] = tid
    producer: Producer | None = None
    sender: _Sender | None = None
    try:
        for row in rows:
            if producer is None:
                producer = Producer(config=cfg)
                producer.init_transactions()  # fences an earlier attempt, aborting what it left open
                s = bulk_session(client)
                marks = s.lt.run(
                    committed_markers(s.cluster, tid, s.config["max.block.ms"] / 1000.0, s.backoff)
                )
                if any(mk.query_id == info.query_id and mk.batch_id >= info.batch_id for mk in marks):
                    log.info(
                        "transactional id %s: micro-batch %d is already committed: skipping its rows",
                        tid,
                        info.batch_id,
                    )
                    for _ in rows:
                        pass
                    return MoldauCommitMessage(0, info.partition_id, info.batch_id, skipped=True)
                producer.begin_transaction()
                sender = _Sender(opts, producer)
            assert sender is not None
            _send_row(sender, row)
        if producer is None or sender is None:
            return MoldauCommitMessage(0, info.partition_id, info.batch_id)
        n = sender.finish()
        from .txn import BatchMarker

        mk = BatchMarker(info.query_id, info.batch_id)
        assert sender.first_topic is not None  # finish() wrote at least the marker's topic
        producer.send_offsets_to_transaction(
            {TopicPartition(sender.first_topic, 0): OffsetAndMetadata(info.batch_id, mk.metadata(n))}, tid)
        pid, epoch = producer.producer_id
        handle = TxnHandle(tid, pid, epoch)
    except BaseException:
        if producer is not None:
            try:
                producer.abort_transaction(10)
            except Exception:
                log.debug("aborting the transaction of %s failed", tid, exc_info=True)
        raise
    finally:
        if producer is not None:
            producer.close(10)
    return _eos_message(n, info, handle)


def _eos_message(rows: int, info: _TaskInfo, handle: TxnHandle | None) -> MoldauCommitMessage:
    if handle is None:
        return MoldauCommitMessage(rows, info.partition_id, info.batch_id)
    return MoldauCommitMessage(rows, info.partition_id, info.batch_id, handle.transactional_id,
                               handle.producer_id, handle.producer_epoch)


def end_transactions(opts: SinkOptions, handles: list[TxnHandle], commit: bool
                     ) -> list[tuple[TxnHandle, BaseException]]:
    """EndTxn(commit or abort) of the tasks' transactions, from the driver; returns the failures."""
    from .produce import bulk_session
    from .txn import end_transactions_async

    if not handles:
        return []
    s = bulk_session(_eos_client(opts))
    timeout = s.config["max.block.ms"] / 1000.0
    return s.lt.run(end_transactions_async(s.cluster, handles, commit, timeout, s.backoff))


def transactions_unavailable(opts: SinkOptions) -> str | None:
    """Why this cluster cannot give the sink transactions (None: it can); checked once per query start."""
    from .produce import BulkSession
    from .txn import probe_transactions

    probe_id = f"{opts.txn_prefix or 'moldau-spark'}-probe"
    try:
        s = BulkSession(_eos_client(opts))
    except Exception as exc:
        raise RuntimeError(f"cannot reach the brokers to check transaction support: {exc}") from exc
    client = _eos_client(opts)
    try:
        return s.lt.run(probe_transactions(
            s.cluster, probe_id, int(client["transaction.timeout.ms"]), 15.0, s.backoff))
    except TransactionError as exc:
        raise OptionError(
            f"kafka.transaction.timeout.ms={client['transaction.timeout.ms']} is refused by the "
            f"brokers (above their transaction.max.timeout.ms): {exc}"
        ) from None
    finally:
        s.close()


# ----------------------------------------------------------------------------------------------------


class _WriterBase:
    def __init__(self, opts: SinkOptions, exactly_once: bool = False) -> None:
        self.opts = opts
        self.exactly_once = exactly_once

    def _done(self, rows: int) -> MoldauCommitMessage:
        info = _task_info()
        return MoldauCommitMessage(rows=rows, partition_id=info.partition_id, batch_id=info.batch_id)


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


class _StreamCommit(_WriterBase):
    """The driver's side of a streaming write: commit or abort the tasks' transactions."""

    def commit(self, messages: list, batchId: int) -> None:
        msgs = [m for m in messages if m is not None]
        rows = sum(m.rows for m in msgs)
        if not self.exactly_once:
            log.info("micro-batch %d written: %d rows (at least once)", batchId, rows)
            return
        handles = [h for h in (m.handle() for m in msgs) if h is not None]
        failures = end_transactions(self.opts, handles, True)
        skipped = sum(1 for m in msgs if m.skipped)
        if failures:
            detail = "; ".join(f"{h.transactional_id}: {exc}" for h, exc in failures[:5])
            raise RuntimeError(
                f"micro-batch {batchId}: {len(failures)} of {len(handles)} task transactions could not be "
                f"committed ({detail}). Their rows are not visible; the others are committed with their "
                "batch markers. Restart the query: the micro-batch is replayed and only the tasks without a "
                "committed marker write again."
            )
        log.info("micro-batch %d committed: %d rows in %d transactions%s (exactly once)", batchId, rows,
                 len(handles), f", {skipped} task(s) already committed before" if skipped else "")

    def abort(self, messages: list, batchId: int) -> None:
        msgs = [m for m in messages if m is not None]
        if not self.exactly_once:
            log.warning(
                "micro-batch %d aborted: rows already sent stay in the topic (at least once)", batchId
            )
            return
        handles = [h for h in (m.handle() for m in msgs) if h is not None]
        failures = end_transactions(self.opts, handles, False)
        for h, exc in failures:
            log.warning("micro-batch %d: aborting the transaction of %s failed (%s); it is aborted when the "
                        "batch is replayed or when its timeout expires", batchId, h.transactional_id, exc)
        log.warning(
            "micro-batch %d aborted: %d task transactions aborted", batchId, len(handles) - len(failures)
        )


class MoldauStreamWriter(_StreamCommit, DataSourceStreamWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        if self.exactly_once:
            return _write_rows_eos(self.opts, iterator)
        return self._done(_write_rows(self.opts, iterator))


class MoldauStreamArrowWriter(_StreamCommit, DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        if self.exactly_once:
            return _write_arrow_eos(self.opts, iterator)
        return self._done(_write_arrow(self.opts, iterator))


def _sink(options: Any, schema: StructType, streaming: bool) -> SinkOptions:
    opts = parse_sink_options(options, streaming=streaming)
    cfg = dict(_PRODUCER_DEFAULTS)
    cfg.update(opts.client)
    check_client_config(cfg, "producer")
    validate_sink_schema(schema, opts)
    if opts.value_format is not None:
        value = next(f for f in schema.fields if f.name.lower() == "value")
        resolve_sink(opts.value_format, value.dataType)  # registers the schema once, on the driver
        opts.arrow = True  # the encoder works on Arrow batches
    return opts


def make_batch_writer(options: Any, schema: StructType, overwrite: bool) -> DataSourceWriter:
    if overwrite:
        raise OptionError("save mode Overwrite is not allowed for the moldau sink: records are appended to "
                          "topics (use mode 'append')")
    opts = _sink(options, schema, False)
    return MoldauBatchArrowWriter(opts) if opts.arrow else MoldauBatchWriter(opts)


def make_stream_writer(options: Any, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
    opts = _sink(options, schema, True)
    exactly_once = False
    if opts.delivery == AT_LEAST_ONCE:
        if opts.fallback_reason:
            log.warning("streaming writes to Kafka will be at least once: %s", opts.fallback_reason)
    else:
        why = transactions_unavailable(opts)
        if why is None:
            exactly_once = True
        elif opts.delivery == EXACTLY_ONCE:
            raise OptionError(f"deliveryGuarantee 'exactly-once' needs Kafka transactions: {why}")
        else:
            log.warning("streaming writes to Kafka will be at least once, not exactly once: %s "
                        "(set deliveryGuarantee=at-least-once to accept this without the warning)", why)
    return (MoldauStreamArrowWriter if opts.arrow else MoldauStreamWriter)(opts, exactly_once)
