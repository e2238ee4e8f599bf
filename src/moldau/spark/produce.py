"""The Arrow writer's fast path: record batches built from Arrow columns in bulk, sent with Produce.

The moldau producer appends one record per ``send()`` call (a few microseconds each). For the Arrow
writer that per-record cost dominates, so this module turns a whole Arrow batch into Kafka record batches
without a Python step per record:

* every record's fixed part (length varint, attributes, timestamp delta 0, offset delta, key length, value
  length, header count 0) is encoded for all records at once with numpy: each varint field becomes a
  ``(n, 5)`` byte matrix plus a mask, and the row-major order of ``matrix[mask]`` is exactly the bytes of all
  records one after the other;
* the key and value bytes are interleaved with those prefixes by Arrow: ``take`` over the concatenation
  ``[prefixes, keys, middles, values, trailers]`` with indices ``i, n+i, 2n+i, 3n+i, 4n+i`` writes a data
  buffer that *is* the records section, in C;
* the 61-byte batch header and its CRC-32C are added (compression applied to the section as usual).

Partitions: the ``partition`` column where set, else Kafka's default partitioner (murmur2 of the key, the
client's ``key_partition``), else one partition per Arrow batch for keyless records, rotating (what the
sticky partitioner does). Rows with headers go through the client's ``BatchBuilder`` (per record).

Sending: one Produce request per leader for the batches of one Arrow batch, at most one record batch per
partition per request (Kafka refuses more than one v2 batch of a partition in a request); a partition with
several record batches in one Arrow batch gets them in successive rounds. The next Arrow batch is encoded
while the requests are in flight, and is sent after they completed, so each partition has at most one
request in flight and its records keep their order across retries. Retriable errors are retried (metadata
refreshed) until ``delivery.timeout.ms``.

At least once (``TaskTransaction`` None): no producer id; a retry after a lost response can write a batch
twice, which at-least-once allows. Exactly once (``TaskTransaction``, see ``moldau.spark.txn``): the
batches carry the transaction's producer id, epoch and per-partition sequence numbers and the
transactional attribute, the Produce requests the transactional id, and every partition is added to the
transaction (AddPartitionsToTxn) before its first batch is sent; a retried batch is deduplicated by the
broker (sequence numbers), and nothing is visible before the driver commits the transaction.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures as cf
import itertools
import logging
import threading
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from moldau.client.cluster import Cluster
from moldau.client.config import resolve_config
from moldau.client.errors import Codes, broker_error
from moldau.client.partitioner import key_partition
from moldau.client.sync import LoopThread
from moldau.protocol import messages as m
from moldau.protocol.records import HEADER_SIZE, BatchBuilder, codec_id, seal_batch
from moldau.protocol.records.batch import COMPRESSION_MASK, TRANSACTIONAL_FLAG

from .txn import BatchMarker, TxnChannel, TxnHandle, committed_markers, txn_offset_commit

log = logging.getLogger(__name__)

__all__ = ["ArrowProducer", "BulkSession", "TaskTransaction", "build_batch", "bulk_session", "encode_section"]

ProducerFields = tuple[int, int, int]  # producer id, epoch, base sequence

_PRODUCE = 0
_RETRIABLE = frozenset({
    Codes.CORRUPT_MESSAGE, Codes.UNKNOWN_TOPIC_OR_PARTITION, Codes.LEADER_NOT_AVAILABLE,
    Codes.NOT_LEADER_OR_FOLLOWER, Codes.REQUEST_TIMED_OUT, Codes.NETWORK_EXCEPTION,
    Codes.NOT_ENOUGH_REPLICAS, Codes.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Codes.KAFKA_STORAGE_ERROR,
    Codes.BROKER_NOT_AVAILABLE, Codes.REPLICA_NOT_AVAILABLE, Codes.FENCED_LEADER_EPOCH,
    Codes.UNKNOWN_LEADER_EPOCH, Codes.THROTTLING_QUOTA_EXCEEDED,
})


# ----------------------------------------------------------------------------------------------------
# encoding


def _varint_matrix(u: np.ndarray, width: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Unsigned varints of ``u`` (uint64) as an (n, width) byte matrix and the mask of used bytes."""
    n = len(u)
    mat = np.zeros((n, width), dtype=np.uint8)
    mask = np.zeros((n, width), dtype=bool)
    rest = u.copy()
    used = np.ones(n, dtype=bool)  # byte j is part of the varint
    for j in range(width):
        more = rest >= 0x80
        mat[:, j] = (rest & np.uint64(0x7F)).astype(np.uint8) | (more.astype(np.uint8) << 7)
        mask[:, j] = used
        used = used & more
        rest = rest >> np.uint64(7)
    if used.any():
        raise ValueError("varint wider than its field")
    return mat, mask


def _zigzag(v: np.ndarray) -> np.ndarray:
    v = v.astype(np.int64)
    return ((v << 1) ^ (v >> 63)).astype(np.uint64)


def _nbytes(u: np.ndarray) -> np.ndarray:
    n = np.ones(len(u), dtype=np.int64)
    for k in (7, 14, 21, 28):
        n += u >= (1 << k)
    return n


def _as_binary(arr: pa.Array, n: int) -> pa.Array:
    if arr is None:
        return pa.nulls(n, pa.binary())
    t = arr.type
    if pa.types.is_binary(t):
        return arr
    if pa.types.is_string(t):
        return arr.view(pa.binary())
    return arr.cast(pa.binary())


def _lengths(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(lengths with -1 for null, null mask) of a binary array."""
    n = len(arr)
    offs = np.frombuffer(arr.buffers()[1], dtype=np.int32, count=arr.offset + n + 1)[arr.offset:]
    lens = np.diff(offs).astype(np.int64)
    if arr.null_count:
        null = arr.is_null().to_numpy(zero_copy_only=False)
        lens = np.where(null, -1, lens)
    else:
        null = None
    return lens, null


def encode_section(keys: pa.Array, values: pa.Array) -> bytes:
    """The records section (uncompressed) of a batch of ``len(values)`` records without headers, offset
    deltas 0..n-1 and timestamp delta 0."""
    n = len(values)
    keys = _as_binary(keys, n)
    values = _as_binary(values, n)
    klen, _kn = _lengths(keys)
    vlen, _vn = _lengths(values)
    kz = _zigzag(klen)
    vz = _zigzag(vlen)
    oz = _zigzag(np.arange(n, dtype=np.int64))
    body = 3 + _nbytes(oz) + _nbytes(kz) + np.maximum(klen, 0) + _nbytes(vz) + np.maximum(vlen, 0)
    lz = _zigzag(body)
    lm, lmask = _varint_matrix(lz)
    om, omask = _varint_matrix(oz)
    km, kmask = _varint_matrix(kz)
    zero = np.zeros((n, 2), dtype=np.uint8)  # attributes, timestamp delta
    pre = np.concatenate([lm, zero, om, km], axis=1)
    pmask = np.concatenate([lmask, np.ones((n, 2), dtype=bool), omask, kmask], axis=1)
    vm, vmask = _varint_matrix(vz)
    prefixes = _ragged(pre, pmask)
    mids = _ragged(vm, vmask)
    trailer = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32)),
                                                     pa.py_buffer(bytes(n))])  # header count 0
    allp = pa.concat_arrays([prefixes, keys, mids, values, trailer])
    idx = (np.arange(n, dtype=np.int64)[:, None] + np.arange(5, dtype=np.int64)[None, :] * n).ravel()
    out = allp.take(pa.array(idx.astype(np.int32)))
    offs = np.frombuffer(out.buffers()[1], dtype=np.int32, count=len(out) + 1)
    data = out.buffers()[2]
    return data.to_pybytes()[int(offs[0]) : int(offs[-1])] if data is not None else b""


def _ragged(mat: np.ndarray, mask: np.ndarray) -> pa.Array:
    """Rows of ``mat`` restricted to ``mask`` as a binary array (row-major boolean indexing keeps order)."""
    flat = mat[mask]
    lens = mask.sum(axis=1)
    offs = np.zeros(len(mat) + 1, dtype=np.int32)
    np.cumsum(lens, out=offs[1:])
    return pa.Array.from_buffers(pa.binary(), len(mat), [None, pa.py_buffer(offs), pa.py_buffer(flat)])


def build_batch(section: bytes, count: int, timestamp: int, codec: int, level: Any = None,
                producer: ProducerFields | None = None) -> bytearray:
    """A v2 record batch (base offset 0) around a records section; ``producer`` (id, epoch, base sequence)
    makes it a transactional batch, else it has no producer id."""
    pid, epoch, seq = producer if producer is not None else (-1, -1, -1)
    attrs = (codec & COMPRESSION_MASK) | (TRANSACTIONAL_FLAG if producer is not None else 0)
    return seal_batch(bytearray(HEADER_SIZE) + section, attributes=attrs,
                       records_count=count, base_timestamp=timestamp, max_timestamp=timestamp,
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq, compression_level=level)


def build_batch_with_headers(keys: list, values: list, headers: list, timestamp: int, codec: int,
                             level: Any = None, producer: ProducerFields | None = None) -> bytearray:
    if producer is not None:
        b = BatchBuilder(
            2,
            codec,
            producer_id=producer[0],
            producer_epoch=producer[1],
            base_sequence=producer[2],
            is_transactional=True,
            compression_level=level,
        )
    else:
        b = BatchBuilder(2, codec, compression_level=level)
    for k, v, h in zip(keys, values, headers):
        b.append(timestamp, k, v, h or None)
    return b.build_mutable(0)


# ----------------------------------------------------------------------------------------------------
# sending


class BulkSession:
    """A Cluster on a private loop for the writers of one Python worker with one config."""

    def __init__(self, client: dict[str, str]) -> None:
        cfg = {"client.id": "moldau-spark-writer", **client}
        cfg.pop("linger.ms", None)
        self.config = resolve_config("producer", cfg, {})
        c = self.config
        self.acks = c["acks"]
        self.codec = codec_id(c["compression.type"])
        self.level = c["compression.level"]
        self.batch_bytes = max(c["batch.size"], 1 << 20) if "batch.size" not in client else c["batch.size"]
        self.max_request = c["max.request.size"]
        self.timeout_ms = c["request.timeout.ms"]
        self.delivery_timeout = c["delivery.timeout.ms"] / 1000.0
        self.backoff = c["retry.backoff.ms"] / 1000.0
        self.lt = LoopThread("moldau-spark-produce", bool(c.get("use.uvloop", True)))
        self.sticky = itertools.count()

        async def start() -> Cluster:
            cl = Cluster(self.config, allow_auto_topic_creation=True)
            await cl.start()
            return cl

        self.cluster: Cluster = self.lt.run(start())

    def close(self) -> None:
        try:
            self.lt.run(self.cluster.close(), 10)
        except Exception:
            log.debug("closing the writer's cluster failed", exc_info=True)
        self.lt.stop()

    def num_partitions(self, topic: str) -> int:
        async def go() -> int:
            md = await self.cluster.wait_for_topic(topic, self.config["max.block.ms"])
            return len(md.partitions)

        return self.lt.run(go())

    async def _send_all(self, batches: list[tuple[str, int, bytearray, int]],
                        txn: TaskTransaction | None = None) -> int:
        """Send (topic, partition, batch, count) items until all are acknowledged; returns records.

        A partition's items go out in order, one per request (rounds), each round after the previous one
        was acknowledged. With ``txn``, new partitions are added to the transaction first."""
        if txn is not None:
            await txn.add_partitions({(it[0], it[1]) for it in batches})
        per_tp: dict[tuple[str, int], list] = {}
        for it in batches:
            per_tp.setdefault((it[0], it[1]), []).append(it)
        done = 0
        k = 0
        while True:
            rnd = [items[k] for items in per_tp.values() if len(items) > k]
            if not rnd:
                return done
            done += await self._send_round(rnd, txn)
            k += 1

    async def _send_round(
        self, batches: list[tuple[str, int, bytearray, int]], txn: TaskTransaction | None
    ) -> int:
        c = self.cluster
        tid = txn.transactional_id if txn is not None else None
        deadline = time.monotonic() + self.delivery_timeout
        pending = list(batches)
        done = 0
        while pending:
            by_node: dict[int, list] = {}
            retry: list = []
            for item in pending:
                node = c.leader(item[0], item[1])
                if node < 0:
                    retry.append(item)
                else:
                    by_node.setdefault(node, []).append(item)
            calls = []
            for node, items in by_node.items():
                # one request per max.request.size worth of batches
                group: list = []
                size = 0
                for it in items:
                    if group and size + len(it[2]) > self.max_request:
                        calls.append((node, group))
                        group, size = [], 0
                    group.append(it)
                    size += len(it[2])
                if group:
                    calls.append((node, group))
            results = await asyncio.gather(*(self._produce(node, items, tid) for node, items in calls),
                                           return_exceptions=True)
            for (_node, items), res in zip(calls, results):
                if isinstance(res, BaseException):
                    if not (isinstance(res, (OSError, TimeoutError, ConnectionError))
                            or getattr(res, "retriable", False) or "Connection" in type(res).__name__):
                        raise res
                    log.info("produce failed (%s); retrying", res)
                    retry.extend(items)
                    continue
                for it, code, msg in res:
                    if code == 0 or (code == Codes.DUPLICATE_SEQUENCE_NUMBER and tid is not None):
                        done += it[3]  # (a duplicate: the broker has this batch from an earlier attempt)
                    elif code in _RETRIABLE:
                        retry.append(it)
                    else:
                        what = f"produce to {it[0]}-{it[1]}" + (f" in transaction {tid!r}" if tid else "")
                        raise broker_error(code, f"{what}: {msg or ''}".rstrip(": "))
            pending = retry
            if pending:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(pending)} batch(es) not delivered within delivery.timeout.ms")
                c.request_update()
                await asyncio.sleep(self.backoff)
        return done

    async def _produce(self, node: int, items: list, transactional_id: str | None = None
                       ) -> list[tuple[Any, int, str | None]]:
        R = m.ProduceRequest
        topics: dict[str, list] = {}
        for t, p, buf, _n in items:
            topics.setdefault(t, []).append(R.PartitionProduceData(index=p, records=buf))
        req = R.new(transactional_id=transactional_id, acks=self.acks, timeout_ms=self.timeout_ms,
                    topic_data=[R.TopicProduceData(name=t, partition_data=pd) for t, pd in topics.items()])
        conn = await self.cluster.connection(node)
        resp = await conn.send(_PRODUCE, req, expect_response=self.acks != 0)
        if resp is None:
            return [(it, 0, None) for it in items]
        codes: dict[tuple[str, int], tuple[int, str | None]] = {}
        for tr in resp.responses:
            for pr in tr.partition_responses:
                codes[(tr.name, pr.index)] = (pr.error_code, getattr(pr, "error_message", None))
        return [
            (it, *codes.get((it[0], it[1]), (Codes.UNKNOWN_SERVER_ERROR, "partition missing in response")))
            for it in items
        ]

    def send(
        self, batches: list[tuple[str, int, bytearray, int]], txn: TaskTransaction | None = None
    ) -> cf.Future:
        return self.lt.submit(self._send_all(batches, txn))


_SESSIONS: dict[tuple, BulkSession] = {}
_LOCK = threading.Lock()


def bulk_session(client: dict[str, str]) -> BulkSession:
    key = tuple(sorted(client.items()))
    with _LOCK:
        s = _SESSIONS.get(key)
        if s is None or not s.lt.thread.is_alive():
            s = _SESSIONS[key] = BulkSession(client)
        return s


@atexit.register
def _close() -> None:
    with _LOCK:
        for s in _SESSIONS.values():
            s.close()
        _SESSIONS.clear()


class TaskTransaction:
    """One task's transaction for one micro-batch, on a BulkSession's loop (exactly-once mode).

    ``start()`` gets a producer id and epoch for the transactional id (InitProducerId: an earlier attempt's
    open transaction is aborted, a zombie attempt fenced) and reads the id's batch marker: False when this
    micro-batch is already committed for it. ``prepare()`` adds the marker to the transaction and returns
    the handle the driver commits; the transaction stays open. ``abort()`` ends it after a task failure.
    """

    def __init__(self, session: BulkSession, transactional_id: str, query_id: str, batch_id: int,
                 timeout_ms: int) -> None:
        self.s = session
        self.transactional_id = transactional_id
        self.marker = BatchMarker(query_id, batch_id)
        self.timeout_ms = timeout_ms
        self.call_timeout = session.config["max.block.ms"] / 1000.0
        self.chan = TxnChannel(session.cluster, transactional_id, self.call_timeout, session.backoff)
        self.producer_id = -1
        self.epoch = -1
        self.sequences: dict[tuple[str, int], int] = {}
        self.added: set[tuple[str, int]] = set()
        self.marker_topic: str | None = None

    def start(self) -> bool:
        async def go() -> list[BatchMarker]:
            self.producer_id, self.epoch = await self.chan.init(self.timeout_ms)
            return await committed_markers(
                self.s.cluster, self.transactional_id, self.call_timeout, self.s.backoff
            )

        marks = self.s.lt.run(go())
        mine = self.marker
        done = [mk for mk in marks if mk.query_id == mine.query_id and mk.batch_id >= mine.batch_id]
        if done:
            log.info("transactional id %s: micro-batch %d of query %s is already committed (marker %d): "
                     "skipping its rows", self.transactional_id, mine.batch_id, mine.query_id,
                     max(mk.batch_id for mk in done))
            return False
        return True

    def producer_fields(self, topic: str, partition: int, count: int) -> ProducerFields:
        """(producer id, epoch, base sequence) for the next batch of ``count`` records of a partition."""
        tp = (topic, partition)
        seq = self.sequences.get(tp, 0)
        self.sequences[tp] = (seq + count) & 0x7FFFFFFF  # Kafka's sequences wrap at 2**31
        if self.marker_topic is None:
            self.marker_topic = topic
        return self.producer_id, self.epoch, seq

    async def add_partitions(self, parts: set[tuple[str, int]]) -> None:
        new = parts - self.added
        if new:
            await self.chan.add_partitions(self.producer_id, self.epoch, new)
            self.added |= new

    def prepare(self, rows: int) -> TxnHandle | None:
        """Commit the batch marker with the transaction (still open); None when nothing was written."""
        if not self.added or self.marker_topic is None:
            return None
        mk = self.marker
        tid = self.transactional_id

        async def go() -> None:
            await self.chan.add_offsets(self.producer_id, self.epoch, tid)
            await txn_offset_commit(self.s.cluster, tid, tid, self.producer_id, self.epoch,
                                    {(self.marker_topic, 0): (mk.batch_id, mk.metadata(rows))},  # type: ignore[dict-item]
                                    self.call_timeout, self.s.backoff)

        self.s.lt.run(go())
        return TxnHandle(tid, self.producer_id, self.epoch)

    def abort(self) -> None:
        """Best effort: abort the open transaction now (else the next attempt or its timeout does)."""
        if not self.added or self.producer_id < 0:
            return
        try:
            self.s.lt.run(self.chan.end(self.producer_id, self.epoch, False), self.call_timeout + 5)
        except Exception as exc:  # noqa: BLE001
            log.warning("aborting the transaction of %s failed (%s); the next attempt or the transaction "
                        "timeout aborts it", self.transactional_id, exc)


class ArrowProducer:
    """Writes Arrow batches (Spark's Kafka sink columns) as record batches; ``finish()`` -> rows written.

    With ``txn`` the batches belong to that transaction (``txn.start()`` must have returned True)."""

    def __init__(self, client: dict[str, str], topic: str | None, txn: TaskTransaction | None = None,
                 session: BulkSession | None = None) -> None:
        self.s = session if session is not None else bulk_session(client)
        self.topic = topic
        self.txn = txn
        self.inflight: cf.Future | None = None
        self.rows = 0
        self._parts: dict[str, int] = {}

    def _partitions(self, topic: str) -> int:
        n = self._parts.get(topic)
        if n is None:
            n = self._parts[topic] = self.s.num_partitions(topic)
        return n

    def write(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if n == 0:
            return
        names = {name.lower(): i for i, name in enumerate(batch.schema.names)}

        def col(name: str) -> pa.Array | None:
            i = names.get(name)
            return batch.column(i) if i is not None else None

        if self.topic is not None:
            groups = [(self.topic, np.arange(n))]
        else:
            topics = col("topic")
            if topics is None or topics.null_count:
                from .options import OptionError

                raise OptionError("null topic present in the data. Use the topic option for setting a topic.")
            enc = pc.dictionary_encode(topics)
            codes = enc.indices.to_numpy(zero_copy_only=False)
            groups = [(t, np.flatnonzero(codes == i)) for i, t in enumerate(enc.dictionary.to_pylist())]
        keys = col("key")
        values = col("value")
        part_col = col("partition")
        headers = col("headers")
        items: list[tuple[str, int, bytearray, int]] = []
        now = time.time_ns() // 1_000_000
        for topic, rows in groups:
            nparts = self._partitions(topic)
            parts = self._assign(topic, nparts, rows, keys, part_col)
            for p in np.unique(parts).tolist():
                sel = rows[parts == p]
                idx = pa.array(sel.astype(np.int64))
                k = keys.take(idx) if keys is not None else None
                v = values.take(idx) if values is not None else pa.nulls(len(sel), pa.binary())
                if headers is not None and pc.sum(pc.list_value_length(headers.take(idx))).as_py():
                    items.extend(self._with_headers(topic, p, k, v, headers.take(idx), now))
                else:
                    items.extend(self._batches(topic, p, k, v, now))
        self._flush_inflight()
        self.inflight = self.s.send(items, self.txn)
        self.rows += n

    def _assign(self, topic: str, nparts: int, rows: np.ndarray, keys: pa.Array | None,
                part_col: pa.Array | None) -> np.ndarray:
        out = np.full(len(rows), -1, dtype=np.int64)
        if part_col is not None:
            pcs = part_col.take(pa.array(rows)).to_numpy(zero_copy_only=False)
            given = ~np.isnan(pcs) if pcs.dtype.kind == "f" else np.ones(len(rows), bool)
            out[given] = pcs[given].astype(np.int64)
            bad = (out[given] < 0) | (out[given] >= nparts)
            if bad.any():
                raise ValueError(f"partition {int(out[given][bad][0])} of topic {topic!r} does not exist "
                                 f"({nparts} partitions)")
        todo = np.flatnonzero(out < 0)
        if len(todo) and keys is not None:
            ks = keys.take(pa.array(rows[todo])).to_pylist()
            for j, k in zip(todo.tolist(), ks):
                if k is not None:
                    out[j] = key_partition(k.encode() if isinstance(k, str) else k, nparts)
        keyless = out < 0
        if keyless.any():
            out[keyless] = next(self.s.sticky) % nparts  # keyless: one partition per Arrow batch, rotating
        return out

    def _batches(self, topic: str, p: int, k: pa.Array | None, v: pa.Array, now: int) -> list:
        n = len(v)
        out = []
        # cut into record batches of about batch.size bytes
        vl = _lengths(_as_binary(v, n))[0]
        kl = _lengths(_as_binary(k, n))[0] if k is not None else np.full(n, -1)
        sizes = np.maximum(vl, 0) + np.maximum(kl, 0) + 12
        bounds = _cuts(sizes, self.s.batch_bytes)
        txn = self.txn
        for a, b in itertools.pairwise(bounds):
            sec = encode_section(k.slice(a, b - a) if k is not None else None, v.slice(a, b - a))
            prod = txn.producer_fields(topic, p, b - a) if txn is not None else None
            out.append((topic, p, build_batch(sec, b - a, now, self.s.codec, self.s.level, prod), b - a))
        return out

    def _with_headers(
        self, topic: str, p: int, k: pa.Array | None, v: pa.Array, h: pa.Array, now: int
    ) -> list:
        keys = k.to_pylist() if k is not None else [None] * len(v)
        vals = v.to_pylist()
        hs = [[(x["key"], x["value"]) for x in row] if row else None for row in h.to_pylist()]
        out = []
        step = 5000
        txn = self.txn
        for a in range(0, len(vals), step):
            cnt = len(vals[a:a + step])
            prod = txn.producer_fields(topic, p, cnt) if txn is not None else None
            buf = build_batch_with_headers(
                keys[a : a + step],
                vals[a : a + step],
                hs[a : a + step],
                now,
                self.s.codec,
                self.s.level,
                prod,
            )
            out.append((topic, p, buf, cnt))
        return out

    def _flush_inflight(self) -> None:
        f, self.inflight = self.inflight, None
        if f is not None:
            f.result()

    def finish(self) -> int:
        self._flush_inflight()
        return self.rows


def _cuts(sizes: np.ndarray, limit: int) -> list[int]:
    """Indices cutting ``sizes`` into runs of about ``limit`` bytes (at least one record each)."""
    n = len(sizes)
    if n == 0:
        return [0]
    cum = np.cumsum(sizes)
    bounds = [0]
    start_total = 0
    while bounds[-1] < n:
        a = bounds[-1]
        b = int(np.searchsorted(cum, start_total + limit, side="right"))
        b = max(b, a + 1)
        b = min(b, n)
        bounds.append(b)
        start_total = int(cum[b - 1])
    return bounds
