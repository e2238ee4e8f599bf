"""The producer: per-partition accumulator, a sender on the event loop, idempotence.

``send()`` serializes, picks the partition (murmur2 of the key, sticky for keyless records) and encodes the
record straight into the open batch's ``bytearray`` (the batch header's 61 bytes are reserved at its front
and written once when the batch is sent). The common case (bytes or None key and value, no headers, the
topic's metadata known) is one function, ``AsyncProducer._fast_append``: table lookups for the 1- and
2-byte varints, six appends to the buffer, and one object per record, the ``RecordFuture`` (a 3-tuple made
with ``tuple.__new__``); outcomes are kept per batch (``BatchResult``). The accumulator is guarded by a
``threading.Lock`` so the synchronous facade appends from the caller's thread without a trip through the
event loop; the sender is woken when a batch is opened or fills up.

The sender (one asyncio task) drains ready batches (full, ``linger.ms`` elapsed, flushing, or memory
short), one batch per partition per request, up to ``max.request.size``, to each partition's leader, with
at most ``max.in.flight.requests.per.connection`` requests in flight per broker. Failed batches are retried
in their original order until ``delivery.timeout.ms``: a partition whose first queued batch is a retry
sends it alone, after everything before it completed.

Producing without ever waiting would starve the sender (the asyncio loop only runs it when the producing
coroutine yields; the sync facade's loop thread only gets the GIL every ``sys.getswitchinterval()``), so
when a batch fills up ``AsyncProducer.send`` yields to the loop once and the sync ``send`` lets the loop
thread run (``time.sleep(0)``): full batches go out while the next ones fill.

Idempotence (default): InitProducerId before the first batch; each batch carries the producer id, epoch and
the partition's next sequence number. A gap the broker reports (OUT_OF_ORDER_SEQUENCE_NUMBER not explained
by an earlier failed batch, UNKNOWN_PRODUCER_ID) or a sequenced batch that failed for good makes the
sender bump the epoch (InitProducerId v3+ with the current id/epoch, else a new id) once nothing is in
flight, which restarts every partition's sequence at 0.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
from time import sleep as _sleep
from typing import TYPE_CHECKING, Callable, Generic, Iterable, Mapping, Self

from moldau._aio import wait_for
from moldau.protocol import messages as m
from moldau.protocol.records import codec_id, encode_record, seal_batch, set_producer_state
from moldau.protocol.records.batch import COMPRESSION_MASK, TRANSACTIONAL_FLAG

from . import _send
from ._typing import PK, PV, Bytes, Headers, HeaderValue
from .arrow import DEFAULT_KEY
from .cluster import Cluster
from .config import ConfigInput, ProducerConfig, resolve_config
from .errors import (
    BufferExhaustedError,
    ClientError,
    Codes,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    ProducerClosedError,
    UnsupportedVersionError,
    broker_error,
    is_retriable,
)
from .futures import BatchResult, BulkResult, RecordFuture
from .partitioner import DefaultPartitioner, key_partition
from .transactions import ProducerIds, TransactionManager
from .types import RecordMetadata

if TYPE_CHECKING:
    import pyarrow

    from .arrow import ArrowKey
    from .transactions import GroupRef
    from .types import Offsets

log = logging.getLogger(__name__)

__all__ = ["AsyncProducer", "RecordTooLargeError"]

_PRODUCE = 0
_INIT_PRODUCER_ID = 22
_BATCH_OVERHEAD = 61
_RECORD_OVERHEAD = 16  # varints + attributes of one record, a generous estimate
_MEMORY_CHUNK = 16384  # buffer.memory first held by a batch (it doubles as the batch grows, up to batch.size)

# Errors after which a batch is sent again (Kafka's retriable produce errors).
_RETRY_CODES = frozenset({
    Codes.CORRUPT_MESSAGE, Codes.UNKNOWN_TOPIC_OR_PARTITION, Codes.LEADER_NOT_AVAILABLE,
    Codes.NOT_LEADER_OR_FOLLOWER, Codes.REQUEST_TIMED_OUT, Codes.NETWORK_EXCEPTION,
    Codes.NOT_ENOUGH_REPLICAS, Codes.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Codes.KAFKA_STORAGE_ERROR,
    Codes.BROKER_NOT_AVAILABLE, Codes.REPLICA_NOT_AVAILABLE, Codes.FENCED_LEADER_EPOCH,
    Codes.UNKNOWN_LEADER_EPOCH, Codes.THROTTLING_QUOTA_EXCEEDED, Codes.COORDINATOR_LOAD_IN_PROGRESS,
})
_METADATA_CODES = frozenset({
    Codes.UNKNOWN_TOPIC_OR_PARTITION, Codes.LEADER_NOT_AVAILABLE, Codes.NOT_LEADER_OR_FOLLOWER,
    Codes.FENCED_LEADER_EPOCH, Codes.UNKNOWN_LEADER_EPOCH, Codes.KAFKA_STORAGE_ERROR,
})


class RecordTooLargeError(ClientError):
    """A record is larger than max.request.size or buffer.memory."""


def _nbytes(b: Bytes) -> int:
    return b.nbytes if type(b) is memoryview else len(b)


# -- record encoding -----------------------------------------------------------------------------------------
# Records are encoded by the codec (``moldau.protocol.records``): ``encode_record`` here, its varint tables in
# the fast path (``_send.py``).
_NEW_RECORD_FUTURE = tuple.__new__

# a record's headers as the codec takes them (names decoded, str values encoded)
_RecordHeaders = list[tuple[str | bytes, Bytes | None]]


_HEADER_SPACE = bytes(_BATCH_OVERHEAD)
_JOIN = bytearray().join


class ProducerBatch:
    """One batch being filled, then sent. The records are kept as the list of their pieces (varints from
    tables, the callers' immutable keys and values: nothing is copied per record), joined once into the wire
    batch (61 header bytes first) when the batch is sent."""

    __slots__ = ("topic", "partition", "parts", "size", "records", "base_ts", "max_ts", "result", "created",
                 "closed", "attempts", "next_retry", "reserved", "limit", "producer_id", "producer_epoch",
                 "base_sequence", "built", "order", "in_flight")

    def __init__(self, topic: str, partition: int, created: float, reserved: int):
        self.topic = topic
        self.partition = partition
        self.parts: list | None = [_HEADER_SPACE]
        self.size = _BATCH_OVERHEAD  # bytes of the uncompressed batch, header included
        self.records = 0
        self.base_ts = -1
        self.max_ts = -1
        self.result = BatchResult(topic, partition)
        self.created = created
        self.closed = False
        self.attempts = 0
        self.next_retry = 0.0
        self.reserved = reserved  # bytes of buffer.memory held; doubles as the batch grows, up to batch.size
        self.limit = reserved  # the fast path appends while the batch stays within this size
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self.built: bytearray | None = None
        self.order = -1  # drain order within the partition (retries go back in this order)
        self.in_flight = False

    @property
    def est_size(self) -> int:
        """Bytes of the batch so far (uncompressed, header included), or its wire size once built."""
        built = self.built
        return self.size if built is None else len(built)

    def append(self, ts: int, key: Bytes | None, value: Bytes | None, headers: _RecordHeaders | None) -> int:
        """Append one record (the general path); returns its index in the batch."""
        count = self.records
        if count == 0:
            self.base_ts = self.max_ts = ts
        elif ts > self.max_ts:
            self.max_ts = ts
        assert self.parts is not None
        self.size += encode_record(self.parts, count, ts - self.base_ts, key, value, headers)
        self.records = count + 1
        return count

    def build(self, codec: int, level: int | None, transactional: bool) -> bytearray:
        """The wire batch: the pieces joined (the header's space first), sealed by the codec (compressed
        when a codec is set, header and CRC written). Drops the pieces."""
        parts = self.parts
        assert parts is not None
        self.parts = None
        self.built = seal_batch(
            _JOIN(parts), attributes=codec & COMPRESSION_MASK | (TRANSACTIONAL_FLAG if transactional else 0),
            records_count=self.records, base_timestamp=self.base_ts, max_timestamp=self.max_ts,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            compression_level=level)
        return self.built

    def __repr__(self) -> str:
        return (f"<ProducerBatch {self.topic}-{self.partition} n={self.records} seq={self.base_sequence} "
                f"attempts={self.attempts}>")


class _PartitionState:
    __slots__ = ("queue", "in_flight", "next_order", "retrying")

    def __init__(self) -> None:
        self.queue: collections.deque[ProducerBatch] = collections.deque()
        self.in_flight = 0
        self.next_order = 0
        self.retrying = False  # a batch of this partition failed and waits to be sent again


class _Accumulator:
    """Open batches per partition; thread-safe (one lock), drained by the sender on the loop."""

    def __init__(self, cfg: ProducerConfig, wakeup: Callable[[], None]) -> None:
        self.batch_size = cfg["batch.size"]
        self.linger = cfg["linger.ms"] / 1000.0
        self.codec = codec_id(cfg["compression.type"])
        self.level = cfg["compression.level"]
        self.total_memory = cfg["buffer.memory"]
        self.available = self.total_memory
        self.lock = threading.Lock()
        self.memory_cond = threading.Condition(self.lock)
        self.memory_waiters = 0
        self.async_memory_waiters: list[asyncio.Future] = []
        self.parts: dict[str, dict[int, _PartitionState]] = {}
        self.incomplete: set[ProducerBatch] = set()
        self.flushing = 0
        self.closing = False
        self.wakeup = wakeup
        self.on_new_batch: Callable[[str, int], None] | None = None
        self.rolled = False  # a batch filled up since the producer last let the sender run

    def state(self, topic: str, partition: int) -> _PartitionState:
        parts = self.parts.get(topic)
        if parts is None:
            parts = self.parts[topic] = {}
        st = parts.get(partition)
        if st is None:
            st = parts[partition] = _PartitionState()
        return st

    def try_append(self, topic: str, partition: int, ts: int, key: Bytes | None, value: Bytes | None,
                   headers: _RecordHeaders | None,
                   est: int) -> tuple[RecordFuture, ProducerBatch] | None:
        """Append under the lock (the general path: any record; opens a new batch when needed); None when a
        new batch is needed but buffer.memory is short. Sets ``rolled`` when a full batch was closed."""
        new = False
        rolled = False  # a full batch was closed (keyless records move to another partition)
        lock = self.lock
        lock.acquire()
        try:
            parts = self.parts.get(topic)
            st = parts.get(partition) if parts is not None else None
            if st is None:
                st = self.state(topic, partition)
            q = st.queue
            b = q[-1] if q else None
            if b is not None and not b.closed and b.est_size + est > b.limit and \
                    b.est_size + est <= self.batch_size:
                # room left under batch.size: hold more of buffer.memory for this batch (double it, so a
                # batch grows in a few steps)
                grow = min(max(b.reserved, est), self.batch_size - b.reserved)
                if self.available >= grow:
                    self.available -= grow
                    b.reserved += grow
                    b.limit = b.reserved
            if b is None or b.closed or b.est_size + est > b.limit:
                if b is not None and not b.closed:
                    b.closed = True
                    rolled = True
                size = self.first_reservation(est)
                if self.available < size:
                    return None
                self.available -= size
                b = ProducerBatch(topic, partition, time.monotonic(), size)
                q.append(b)
                self.incomplete.add(b)
                new = True
            idx = b.append(ts, key, value, headers)
            fut = _NEW_RECORD_FUTURE(RecordFuture, (b.result, idx, ts))
        finally:
            lock.release()
        if new:
            if rolled:
                self.rolled = True
                if self.on_new_batch is not None:
                    self.on_new_batch(topic, partition)
            self.wakeup()
        return fut, b

    # -- memory -------------------------------------------------------------------------------------
    def first_reservation(self, est: int) -> int:
        """buffer.memory held by a new batch for a first record of about ``est`` bytes: one chunk (or the
        record, or batch.size when smaller); batches hold more as they grow."""
        need = est + _BATCH_OVERHEAD
        first = self.batch_size if self.batch_size < _MEMORY_CHUNK else _MEMORY_CHUNK
        return need if need > first else first

    def wait_memory_sync(self, size: int, deadline: float) -> None:
        with self.memory_cond:
            self.memory_waiters += 1
            try:
                self.wakeup()
                while self.available < size:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise BufferExhaustedError(
                            f"buffer.memory ({self.total_memory} bytes) stayed full for max.block.ms"
                        )
                    self.memory_cond.wait(remaining)
            finally:
                self.memory_waiters -= 1

    async def wait_memory_async(self, size: int, deadline: float) -> None:
        while True:
            with self.lock:
                if self.available >= size:
                    return
                self.memory_waiters += 1
                fut = asyncio.get_running_loop().create_future()
                self.async_memory_waiters.append(fut)
            try:
                self.wakeup()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BufferExhaustedError(
                        f"buffer.memory ({self.total_memory} bytes) stayed full for max.block.ms"
                    )
                try:
                    await wait_for(fut, remaining)
                except asyncio.TimeoutError:
                    pass
            finally:
                with self.lock:
                    self.memory_waiters -= 1

    def resequence(self) -> None:
        """A new producer id or epoch: queued batches take new sequences when they are drained."""
        with self.lock:
            for parts in self.parts.values():
                for st in parts.values():
                    st.retrying = False
                    for b in st.queue:
                        b.base_sequence = -1

    def release(self, batch: ProducerBatch) -> None:
        """Give a completed batch's memory back (loop thread)."""
        with self.memory_cond:
            self.available += batch.reserved
            batch.reserved = 0
            batch.closed = True  # done: nothing more may be appended (the fast path checks under this lock)
            batch.parts = None  # the object may live on (futures, the fast path's cache): drop the bytes
            batch.built = None
            self.incomplete.discard(batch)
            if self.memory_waiters:
                self.memory_cond.notify_all()
            waiters, self.async_memory_waiters = self.async_memory_waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)


class _Wakeup:
    """``asyncio.Event`` with a timeout on ``wait`` (a future and a timer; no task per wait as with
    ``asyncio.wait_for``). ``set_pending`` marks a ``set`` already scheduled from another thread."""

    __slots__ = ("_flag", "_pending", "_waiter")

    def __init__(self) -> None:
        self._flag = False
        self._pending = False
        self._waiter: asyncio.Future | None = None

    def is_set(self) -> bool:
        return self._flag or self._pending

    def set_pending(self) -> None:
        self._pending = True

    def set(self) -> None:
        self._flag = True
        self._pending = False
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def clear(self) -> None:
        self._flag = False

    async def wait(self, timeout: float | None) -> None:
        if self._flag:
            return
        loop = asyncio.get_running_loop()
        w = self._waiter = loop.create_future()
        timer = loop.call_later(timeout, _set_none, w) if timeout is not None else None
        try:
            await w
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()


def _set_none(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class _Sender(Generic[PK, PV]):
    """Drains the accumulator into Produce requests; handles responses, retries and idempotence."""

    def __init__(self, producer: AsyncProducer[PK, PV]) -> None:
        self.p = producer
        self.cfg = producer.config
        self.acc = producer._acc
        self.cluster = producer._cluster
        self.acks = self.cfg["acks"]
        self.idempotent = self.cfg["enable.idempotence"]
        self.max_in_flight = self.cfg["max.in.flight.requests.per.connection"]
        self.max_request_size = self.cfg["max.request.size"]
        self.request_timeout_ms = self.cfg["request.timeout.ms"]
        self.delivery_timeout = self.cfg["delivery.timeout.ms"] / 1000.0
        self.retries = self.cfg["retries"]
        self.retry_backoff = self.cfg["retry.backoff.ms"] / 1000.0
        self.retry_backoff_max = max(self.cfg["retry.backoff.max.ms"] / 1000.0, self.retry_backoff)
        self.node_in_flight: dict[int, int] = collections.defaultdict(int)
        self.event = _Wakeup()
        self.ids = producer._ids  # id, epoch, sequences (owned by the transaction manager when transactional)
        self.total_in_flight = 0
        self.fatal: BaseException | None = None
        self.running = True
        self._connecting: set[int] = set()
        self._pid_task: asyncio.Task | None = None
        self.txn = producer._txn  # transactions.TransactionManager when transactional.id is set

    # -- main loop ------------------------------------------------------------------------------------
    async def run(self) -> None:
        while self.running:
            try:
                delay = await self._run_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the sender must survive anything
                log.exception("producer sender iteration failed")
                delay = self.retry_backoff
            if delay is None or delay > 0:
                await self.event.wait(delay)
            self.event.clear()

    async def _run_once(self) -> float | None:
        now = time.monotonic()
        self._expire(now)
        if self.fatal is not None:
            self._fail_all(self.fatal)
            return None
        if self.txn is not None:
            # producer id/epoch come from init_transactions(); partitions join the transaction first
            if not await self.txn.before_send():
                return None
            return self._drain_and_send(now)
        if self.idempotent:
            if self.ids.need_bump or self.ids.producer_id < 0:
                if self.total_in_flight:
                    return None  # wait for in-flight requests to come back first
                await self._init_producer_id(bump=self.ids.producer_id >= 0)
                return 0
        return self._drain_and_send(now)

    def _expire(self, now: float) -> None:
        expired: list[ProducerBatch] = []
        with self.acc.lock:
            for parts in self.acc.parts.values():
                for st in parts.values():
                    q = st.queue
                    while q and now - q[0].created >= self.delivery_timeout:
                        expired.append(q.popleft())
        for b in expired:
            if b.base_sequence >= 0 and b.attempts > 0:
                self.ids.need_bump = True  # outcome unknown: the broker's sequence state may be ahead of ours
            self._fail(b, KafkaTimeoutError(
                f"{b.records} record(s) for {b.topic}-{b.partition} expired: not delivered within "
                f"delivery.timeout.ms ({self.delivery_timeout * 1000:.0f} ms)"
                + (f" after {b.attempts} attempt(s)" if b.attempts else "")))

    def _drain_and_send(self, now: float) -> float | None:
        acc = self.acc
        cluster = self.cluster
        linger = acc.linger
        force = acc.flushing > 0 or acc.closing or acc.memory_waiters > 0
        next_delay: float | None = None
        per_node: dict[int, list[ProducerBatch]] = {}
        node_bytes: dict[int, int] = {}
        unknown_leader = False
        full_nodes: set[int] = set()
        txn_parts = self.txn.added if self.txn is not None else None
        with acc.lock:
            for topic, parts in acc.parts.items():
                for partition, st in parts.items():
                    q = st.queue
                    if not q:
                        continue
                    if txn_parts is not None and (topic, partition) not in txn_parts:
                        continue  # not in the transaction yet (AddPartitionsToTxn first)
                    b = q[0]
                    if b.attempts:
                        if st.in_flight:
                            continue
                        if b.next_retry > now:
                            d = b.next_retry - now
                            next_delay = d if next_delay is None or d < next_delay else next_delay
                            continue
                    elif not (force or b.closed or len(q) > 1):
                        d = b.created + linger - now
                        if d > 0:
                            next_delay = d if next_delay is None or d < next_delay else next_delay
                            continue
                    leader = cluster.leader(topic, partition)
                    if leader < 0:
                        unknown_leader = True
                        continue
                    if leader in full_nodes:
                        continue
                    if self.node_in_flight[leader] >= self.max_in_flight:
                        full_nodes.add(leader)
                        continue
                    if cluster.connected(leader) is None:
                        self._connect(leader)
                        full_nodes.add(leader)
                        continue
                    size = b.est_size
                    nb = node_bytes.get(leader, 0)
                    if nb and nb + size > self.max_request_size:
                        continue
                    q.popleft()
                    b.closed = True
                    b.in_flight = True
                    st.in_flight += 1
                    if b.order < 0:
                        b.order = st.next_order
                        st.next_order += 1
                    per_node.setdefault(leader, []).append(b)
                    node_bytes[leader] = nb + size
                    if q and not b.attempts and (q[0].closed or len(q) > 1 or force):
                        next_delay = 0  # more ready batches for this partition: come back at once
        if unknown_leader:
            cluster.request_update()
            d = self.retry_backoff
            next_delay = d if next_delay is None or d < next_delay else next_delay
        for node, batches in per_node.items():
            self._send(node, batches)
        return next_delay

    def _connect(self, node: int) -> None:
        if node in self._connecting:
            return
        self._connecting.add(node)

        async def go() -> None:
            try:
                await self.cluster.connection(node)
            except Exception as exc:  # noqa: BLE001
                log.debug("producer: cannot connect to node %d: %s", node, exc)
                await asyncio.sleep(self.retry_backoff)
            finally:
                self._connecting.discard(node)
                self.event.set()

        asyncio.get_running_loop().create_task(go())

    # -- sending --------------------------------------------------------------------------------------
    def _prepare(self, b: ProducerBatch) -> bytearray:
        if b.built is None:
            if self.idempotent:
                # first send: stamp the producer fields before the CRC is computed (no patching later)
                ids = self.ids
                b.producer_id = ids.producer_id
                b.producer_epoch = ids.producer_epoch
                b.base_sequence = ids.next_sequence(b.topic, b.partition, b.records)
            return b.build(self.acc.codec, self.acc.level, self.txn is not None)
        data = b.built
        if self.idempotent:
            ids = self.ids
            stale = b.producer_id != ids.producer_id or b.producer_epoch != ids.producer_epoch
            if stale or b.base_sequence < 0:
                b.producer_id = ids.producer_id
                b.producer_epoch = ids.producer_epoch
                b.base_sequence = ids.next_sequence(b.topic, b.partition, b.records)
                set_producer_state(data, 0, b.producer_id, b.producer_epoch, b.base_sequence)
        return data

    def _send(self, node: int, batches: list[ProducerBatch]) -> None:
        conn = self.cluster.connected(node)
        if conn is None:
            for b in batches:
                self._retry(b, KafkaConnectionError(f"node {node} disconnected"), None)
            return
        R = m.ProduceRequest
        topics: dict[str, list[m.ProduceRequest.PartitionProduceData]] = {}
        for b in batches:
            data = self._prepare(b)
            topics.setdefault(b.topic, []).append(R.PartitionProduceData(index=b.partition, records=data))
        req = R.new(
            transactional_id=self.txn.transactional_id if self.txn is not None else None,
            acks=self.acks,
            timeout_ms=self.request_timeout_ms,
            topic_data=[R.TopicProduceData(name=t, partition_data=pd) for t, pd in topics.items()],
        )
        try:
            fut = conn.send(_PRODUCE, req, expect_response=self.acks != 0)
        except Exception as exc:  # noqa: BLE001 - e.g. UnsupportedVersionError
            for b in batches:
                self._finish_attempt(b)
                self._fail(b, exc)
            return
        self.node_in_flight[node] += 1
        self.total_in_flight += 1
        fut.add_done_callback(lambda f: self._on_response(node, batches, f))

    def _finish_attempt(self, b: ProducerBatch) -> None:
        if b.in_flight:
            b.in_flight = False
            st = self.acc.state(b.topic, b.partition)
            st.in_flight -= 1

    def _on_response(self, node: int, batches: list[ProducerBatch],
                     fut: asyncio.Future[m.ProduceResponse | None]) -> None:
        self.node_in_flight[node] -= 1
        self.total_in_flight -= 1
        self.event.set()
        exc = fut.exception()
        if exc is not None:
            for b in batches:
                self._finish_attempt(b)
                self._retry(b, exc, None)
            self.cluster.request_update()
            return
        resp = fut.result()
        if resp is None:  # acks=0
            for b in batches:
                self._finish_attempt(b)
                self._complete(b, -1, -1)
            return
        by_tp: dict[tuple[str, int], m.ProduceResponse.PartitionProduceResponse] = {}
        pr: m.ProduceResponse.PartitionProduceResponse | None
        for t in resp.responses:
            for pr in t.partition_responses:
                by_tp[(t.name, pr.index)] = pr
        for b in batches:
            self._finish_attempt(b)
            pr = by_tp.get((b.topic, b.partition))
            if pr is None:
                self._retry(
                    b, broker_error(Codes.UNKNOWN_SERVER_ERROR, "partition missing in response"), None
                )
                continue
            code = pr.error_code
            if code == 0 or code == Codes.DUPLICATE_SEQUENCE_NUMBER:
                st = self.acc.state(b.topic, b.partition)
                st.retrying = False
                self._complete(b, pr.base_offset, pr.log_append_time_ms)
                continue
            leader = getattr(pr, "current_leader", None)
            if leader is not None and getattr(leader, "leader_id", -1) >= 0:
                self.cluster.update_leader(b.topic, b.partition, leader.leader_id, leader.leader_epoch)
            msg = getattr(pr, "error_message", None)
            self._handle_error(b, code, msg)

    def _handle_error(self, b: ProducerBatch, code: int, msg: str | None) -> None:
        st = self.acc.state(b.topic, b.partition)
        if self.txn is not None and self.txn.is_fatal(code):
            self._fail(b, broker_error(code, msg))  # fenced: the transactional producer is done
            return
        if code in _METADATA_CODES:
            self.cluster.request_update()
        if self.idempotent and code == Codes.OUT_OF_ORDER_SEQUENCE_NUMBER:
            if not st.retrying:
                log.warning(
                    "producer: %s-%d out of order sequence %d; bumping the epoch",
                    b.topic,
                    b.partition,
                    b.base_sequence,
                )
                self.ids.need_bump = True
            self._retry(b, broker_error(code, msg), code, force=True)
            return
        if self.idempotent and code in (Codes.UNKNOWN_PRODUCER_ID, Codes.INVALID_PRODUCER_ID_MAPPING,
                                        Codes.INVALID_PRODUCER_EPOCH):
            self.ids.need_bump = True
            self._retry(b, broker_error(code, msg), code, force=True)
            return
        if code in _RETRY_CODES:
            self._retry(b, broker_error(code, msg), code)
            return
        if self.idempotent and b.base_sequence >= 0:
            self.ids.need_bump = True  # the batches after this one carry sequences the broker will not accept
        self._fail(b, broker_error(code, msg))

    def _retry(self, b: ProducerBatch, exc: BaseException, code: int | None, force: bool = False) -> None:
        now = time.monotonic()
        if not force and (b.attempts >= self.retries or now - b.created >= self.delivery_timeout):
            if self.idempotent and b.base_sequence >= 0:
                self.ids.need_bump = True
            self._fail(b, exc)
            return
        if now - b.created >= self.delivery_timeout:
            self._fail(b, exc)
            return
        b.attempts += 1
        backoff = min(self.retry_backoff * (2 ** min(b.attempts - 1, 10)), self.retry_backoff_max)
        b.next_retry = now + backoff
        log.debug("producer: retrying %r after %s", b, exc)
        with self.acc.lock:
            st = self.acc.state(b.topic, b.partition)
            st.retrying = True
            q = st.queue
            i = 0
            while i < len(q) and q[i].order >= 0 and q[i].order < b.order:
                i += 1
            q.insert(i, b)
        self.event.set()

    def _complete(self, b: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self.acc.release(b)
        b.result.complete(base_offset, log_append_time if log_append_time is not None else -1)

    def _fail(self, b: ProducerBatch, exc: BaseException) -> None:
        self.acc.release(b)
        b.result.complete(-1, -1, exc)
        if self.txn is not None:
            self.txn.batch_failed(exc)

    # -- idempotence ----------------------------------------------------------------------------------
    async def _init_producer_id(self, bump: bool) -> None:
        try:
            conn = await self.cluster.any_connection()
            version = conn.api_version(_INIT_PRODUCER_ID)
            if bump and version >= 3:
                req = m.InitProducerIdRequest.new(
                    transactional_id=None,
                    transaction_timeout_ms=-1,
                    producer_id=self.ids.producer_id,
                    producer_epoch=self.ids.producer_epoch,
                )
            else:
                req = m.InitProducerIdRequest.new(transactional_id=None, transaction_timeout_ms=-1)
            resp = await conn.send(_INIT_PRODUCER_ID, req)
        except asyncio.CancelledError:
            raise
        except UnsupportedVersionError as exc:
            self.fatal = UnsupportedVersionError(
                f"{exc}: the idempotent producer needs InitProducerId (set enable.idempotence=false)")
            log.error("producer: %s", self.fatal)
            self._fail_all(self.fatal)
            return
        except Exception as exc:  # noqa: BLE001
            log.info("producer: InitProducerId failed (%s); retrying", exc)
            await asyncio.sleep(self.retry_backoff)
            return
        if resp.error_code:
            if is_retriable(resp.error_code) or resp.error_code in (Codes.COORDINATOR_NOT_AVAILABLE,
                                                                    Codes.NOT_COORDINATOR):
                await asyncio.sleep(self.retry_backoff)
                return
            if bump and resp.error_code in (Codes.INVALID_PRODUCER_EPOCH, Codes.PRODUCER_FENCED,
                                            Codes.UNKNOWN_PRODUCER_ID, Codes.INVALID_PRODUCER_ID_MAPPING):
                self.ids.forget()  # start over with a new producer id
                return
            err = broker_error(resp.error_code, "InitProducerId")
            log.error("producer: InitProducerId failed: %s", err)
            self._fail_all(err)
            await asyncio.sleep(self.retry_backoff)
            return
        log.debug("producer: producer id %d epoch %d (was %d/%d)", resp.producer_id, resp.producer_epoch,
                  self.ids.producer_id, self.ids.producer_epoch)
        self.ids.reset(resp.producer_id, resp.producer_epoch)
        self.acc.resequence()

    def _fail_all(self, exc: BaseException) -> None:
        batches: list[ProducerBatch] = []
        with self.acc.lock:
            for parts in self.acc.parts.values():
                for st in parts.values():
                    batches.extend(st.queue)
                    st.queue.clear()
        for b in batches:
            self._fail(b, exc)


class AsyncProducer(Generic[PK, PV]):
    """asyncio producer.

    ::

        async with AsyncProducer(bootstrap_servers="localhost:9092", linger_ms=5) as p:
            fut = await p.send("topic", b"value", key=b"key")
            md = await fut                      # RecordMetadata(topic, partition, offset, timestamp)
            md = await p.send_and_wait("topic", b"v")
    """

    def __init__(self, config: ConfigInput | None = None, **kwargs: object) -> None:
        self.config = resolve_config("producer", config, kwargs)
        c = self.config
        self._cluster = Cluster(c, allow_auto_topic_creation=True)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = -1
        self._acc = _Accumulator(c, self._wakeup)
        self._partitioner_fn = c["partitioner"]
        self._partitioner = DefaultPartitioner(c["batch.size"], c["partitioner.ignore.keys"])
        self._acc.on_new_batch = self._on_new_batch
        self._key_ser = c["key.serializer"]
        self._value_ser = c["value.serializer"]
        self._max_block = c["max.block.ms"] / 1000.0
        self._max_request_size = c["max.request.size"]
        self._simple = (self._key_ser is None and self._value_ser is None and self._partitioner_fn is None
                        and c["transactional.id"] is None)
        self._sticky = self._partitioner._sticky  # topic -> [sticky partition, bytes sent to it]
        self._sticky_limit = self._partitioner.batch_size
        self._ignore_keys = self._partitioner.ignore_keys
        # for the fast path (send/send_blocking): topic -> (open batch of its sticky partition, length the
        # fast path may fill it to, its length when remembered)
        self._keyless: dict[str, tuple[ProducerBatch, int, int]] = {}
        # the fast path's lock: None while only the loop thread appends (asyncio use); the accumulator's lock
        # from the first append by another thread on (the sync facade), see _share_lock
        self._lock: threading.Lock | None = None
        self._parts = self._acc.parts
        self._topics = self._cluster.topics  # updated in place by the cluster
        self._sender: _Sender[PK, PV] | None = None
        self._sender_task: asyncio.Task | None = None
        self._started = False
        self._closed = False
        self._txn: TransactionManager | None = None
        if c["transactional.id"] is not None:
            self._txn = TransactionManager(c, self._cluster, _TransactionHooks(self))
        self._ids = self._txn.ids if self._txn is not None else ProducerIds()

    # -- lifecycle ------------------------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        await self._cluster.start()
        self._sender = _Sender(self)
        self._sender_task = self._loop.create_task(self._sender.run(), name="moldau-producer-sender")
        self._started = True

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, timeout: float | None = None) -> None:
        """Send what is buffered (up to ``timeout`` seconds; None = no bound), then stop."""
        if self._closed:
            return
        self._closed = True
        if not self._started:
            return
        self._acc.closing = True
        self._wakeup()
        try:
            await self._wait_incomplete(timeout)
        except KafkaTimeoutError:
            pass
        assert self._sender is not None and self._sender_task is not None
        self._sender.running = False
        self._sender._fail_all(ProducerClosedError("producer closed before the record was sent"))
        for b in list(self._acc.incomplete):
            self._sender._fail(b, ProducerClosedError("producer closed before the record was acknowledged"))
        self._sender.event.set()
        self._sender_task.cancel()
        try:
            await self._sender_task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001
            pass
        await self._cluster.close()

    def _wakeup(self) -> None:
        s = self._sender
        if s is None:
            return
        if threading.get_ident() == self._loop_thread:
            s.event.set()
        elif not s.event.is_set() and self._loop is not None and not self._loop.is_closed():
            # from the sync facade's thread: one call_soon_threadsafe until the sender has run again
            s.event.set_pending()
            self._loop.call_soon_threadsafe(s.event.set)

    def _on_new_batch(self, topic: str, partition: int) -> None:
        n = self._cluster.num_partitions(topic)
        if n > 1:
            self._partitioner.on_new_batch(topic, partition, n, self._cluster.available_partitions(topic))

    # -- sending --------------------------------------------------------------------------------------
    def _prepare(self, topic: str, value: object, key: object, partition: int | None, timestamp: int | None,
                 headers: Headers | None
                 ) -> tuple[Bytes | None, Bytes | None, _RecordHeaders | None, int, int]:
        """Serialize and size one record: (key, value, headers, est_size, timestamp)."""
        if self._closed:
            raise ProducerClosedError("producer is closed")
        if self._key_ser is not None:
            key = self._key_ser(key)
        elif type(key) is str:
            key = key.encode()
        if self._value_ser is not None:
            value = self._value_ser(value)
        elif type(value) is str:
            value = value.encode()
        # without a serializer a key or value must be bytes-like (or None): _nbytes and the codec raise a
        # TypeError for anything else, which the type checker cannot follow (ignored below, no run-time check)
        est = _RECORD_OVERHEAD
        if key is not None:
            est += _nbytes(key)  # type: ignore[arg-type]
        if value is not None:
            est += _nbytes(value)  # type: ignore[arg-type]
        if headers:
            headers = _normalize_headers(headers)
            for hk, hv in headers:
                est += len(hk) + (0 if hv is None else _nbytes(hv)) + 4
        else:
            headers = None
        if est + _BATCH_OVERHEAD > self._max_request_size:
            raise RecordTooLargeError(
                f"record of about {est} bytes is larger than max.request.size ({self._max_request_size})")
        if est + _BATCH_OVERHEAD > self._acc.total_memory:
            raise RecordTooLargeError(
                f"record of about {est} bytes is larger than buffer.memory ({self._acc.total_memory})")
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        return key, value, headers, est, timestamp  # type: ignore[return-value]

    def _choose_partition(self, topic: str, key: Bytes | None, partition: int | None, n: int) -> int:
        if partition is not None:
            if not 0 <= partition < n:
                raise ValueError(f"partition {partition} of {topic!r} does not exist ({n} partitions)")
            return partition
        if self._partitioner_fn is not None:
            return self._partitioner_fn(key, list(range(n)), self._cluster.available_partitions(topic))
        if key is not None and not self._partitioner.ignore_keys:
            return key_partition(key, n)
        st = self._partitioner._sticky.get(topic)
        if st is not None and st[0] < n:
            return st[0]
        return self._partitioner.partition(topic, None, n, self._cluster.available_partitions(topic))

    # send() and send_blocking() are generated by tools/gen_hot_paths.py (``_send.py``): the fast path
    # inline, then the general path (_send_general / _send_general_blocking).
    if TYPE_CHECKING:  # the generated functions' signatures
        async def send(self, topic: str, value: PV | None = None, key: PK | None = None,
                       partition: int | None = None, timestamp: int | None = None,
                       headers: Headers | None = None) -> RecordFuture: ...

        def send_blocking(self, topic: str, value: PV | None = None, key: PK | None = None,
                          partition: int | None = None, timestamp: int | None = None,
                          headers: Headers | None = None, block: bool | None = None) -> RecordFuture: ...

        # records: values, (key, value[, headers[, timestamp[, partition]]]) tuples or dicts with those names
        async def send_many(self, topic: str, records: Iterable[object]) -> BulkResult: ...

        def send_many_blocking(self, topic: str, records: Iterable[object], block: bool | None = None
                               ) -> BulkResult: ...
    else:
        send = _send.send
        send_blocking = _send.send_blocking
        # the bulk forms (same module): one loop over the records, no future per record
        send_many = _send.send_many
        send_many_blocking = _send.send_many_blocking

    async def send_arrow(self, topic: str, data: pyarrow.Table | pyarrow.RecordBatch, *,
                         key: ArrowKey = DEFAULT_KEY, value: str | None = "value",
                         headers: str | None = None, timestamp: str | None = None,
                         partition: str | None = None) -> BulkResult:
        """Queue every row of a pyarrow Table or RecordBatch as a record (columns named by ``key``, ``value``,
        ``headers``, ``timestamp``, ``partition``: see ``moldau.client.arrow``); returns a BulkResult like
        ``send_many``. Needs pyarrow."""
        from .arrow import arrow_chunks

        results: list[BatchResult] = []
        total = 0
        for chunk in arrow_chunks(data, key=key, value=value, headers=headers, timestamp=timestamp,
                                  partition=partition):
            r = await self.send_many(topic, chunk)
            results += r._batches
            total += r.count
        return BulkResult(results, total)

    def send_arrow_blocking(self, topic: str, data: pyarrow.Table | pyarrow.RecordBatch, *,
                            key: ArrowKey = DEFAULT_KEY,
                            value: str | None = "value", headers: str | None = None,
                            timestamp: str | None = None, partition: str | None = None,
                            block: bool | None = None) -> BulkResult:
        """send_arrow() for a thread other than the loop's (the sync facade's ``send_arrow``)."""
        from .arrow import arrow_chunks

        results: list[BatchResult] = []
        total = 0
        for chunk in arrow_chunks(data, key=key, value=value, headers=headers, timestamp=timestamp,
                                  partition=partition):
            r = self.send_many_blocking(topic, chunk, block)
            results += r._batches
            total += r.count
        return BulkResult(results, total)

    def _share_lock(self) -> threading.Lock:
        """The accumulator's lock for send_blocking's fast path. Called from a thread other than the loop's
        for the first time, it first makes the loop's own fast path (send) take the lock too, on the loop, so
        no append there is half done when this thread starts appending."""
        lock = self._acc.lock
        if self._lock is None:
            loop = self._loop
            if loop is None or threading.get_ident() == self._loop_thread:
                return lock  # the loop thread itself: nothing runs concurrently with it yet
            if loop.is_running():
                async def share() -> None:
                    self._lock = lock

                asyncio.run_coroutine_threadsafe(share(), loop).result()
            else:
                self._lock = lock
        return lock

    def _keyless_settle(self, topic: str) -> None:
        """Count what the fast path appended to the topic's sticky partition (KIP-794: move on after
        batch.size bytes) and forget the fast path's batch."""
        ent = self._keyless.pop(topic, None)
        if ent is not None:
            b, _limit, start = ent
            produced = b.size - start
            if produced > 0:
                self._partitioner.record_appended(topic, produced)

    def _keyless_remember(self, topic: str, partition: int, b: ProducerBatch) -> None:
        """After a keyless record went to ``b`` (its topic's sticky partition): let the fast path append the
        next ones to ``b`` until the batch or the sticky partition's byte budget is full."""
        st = self._sticky.get(topic)
        if st is None or st[0] != partition or b.parts is None or b.closed:
            return
        size = b.size
        budget = size + self._sticky_limit - st[1]
        self._keyless[topic] = (b, b.limit if b.limit < budget else budget, size)

    async def _send_general(self, topic: str, value: object, key: object, partition: int | None,
                            timestamp: int | None, headers: Headers | None) -> RecordFuture:
        if self._txn is not None:
            self._txn.check_send()
        if not self._started:
            raise IllegalStateError("producer not started: use 'await producer.start()' or 'async with'")
        key, value, headers, est, timestamp = self._prepare(topic, value, key, partition, timestamp, headers)
        t = self._cluster.topics.get(topic)
        if t is None or not t.partitions:
            t = await self._cluster.wait_for_topic(topic, int(self._max_block * 1000))
        sticky = key is None and partition is None and self._partitioner_fn is None
        if sticky:
            self._keyless_settle(topic)
        n = len(t.partitions)
        p = self._choose_partition(topic, key, partition, n)
        acc = self._acc
        res = acc.try_append(topic, p, timestamp, key, value, headers, est)
        if res is None:
            deadline = time.monotonic() + self._max_block
            while res is None:
                await acc.wait_memory_async(acc.first_reservation(est), deadline)
                res = acc.try_append(topic, p, timestamp, key, value, headers, est)
        fut, b = res
        if sticky:
            self._partitioner.record_appended(topic, est)
            self._keyless_remember(topic, p, b)
        if acc.rolled:
            # a batch filled up: let the loop run once so the sender ships it (and reads responses) while
            # the caller fills the next one
            acc.rolled = False
            await asyncio.sleep(0)
        return fut

    def send_nowait(self, topic: str, value: PV | None = None, key: PK | None = None,
                    partition: int | None = None, timestamp: int | None = None,
                    headers: Headers | None = None) -> RecordFuture:
        """Like send() from the loop thread without awaiting: raises KafkaTimeoutError when the topic's
        metadata is not known yet and BufferExhaustedError when buffer.memory is full."""
        return self.send_blocking(topic, value, key, partition, timestamp, headers, block=False)

    def _send_general_blocking(self, topic: str, value: object, key: object, partition: int | None,
                               timestamp: int | None, headers: Headers | None,
                               block: bool | None) -> RecordFuture:
        if block is None:
            block = threading.get_ident() != self._loop_thread
        if self._txn is not None:
            self._txn.check_send()
        if not self._started:
            raise IllegalStateError("producer not started")
        key, value, headers, est, timestamp = self._prepare(topic, value, key, partition, timestamp, headers)
        t = self._cluster.topics.get(topic)
        if t is None or not t.partitions:
            if not block:
                self._loop.call_soon_threadsafe(self._cluster.add_topics, [topic])  # type: ignore[union-attr]
                raise KafkaTimeoutError(f"metadata of topic {topic!r} not available yet")
            cf = asyncio.run_coroutine_threadsafe(
                self._cluster.wait_for_topic(topic, int(self._max_block * 1000)), self._loop)  # type: ignore[arg-type]
            t = cf.result()
        sticky = key is None and partition is None and self._partitioner_fn is None
        if sticky:
            self._keyless_settle(topic)
        n = len(t.partitions)
        p = self._choose_partition(topic, key, partition, n)
        acc = self._acc
        res = acc.try_append(topic, p, timestamp, key, value, headers, est)
        if res is None:
            if not block:
                raise BufferExhaustedError("buffer.memory is full")
            deadline = time.monotonic() + self._max_block
            while res is None:
                acc.wait_memory_sync(acc.first_reservation(est), deadline)
                res = acc.try_append(topic, p, timestamp, key, value, headers, est)
        fut, b = res
        if sticky:
            self._partitioner.record_appended(topic, est)
            self._keyless_remember(topic, p, b)
        if acc.rolled and block:
            # a batch filled up: give the loop thread the GIL now so the sender ships it (and reads
            # responses) while this thread fills the next one, instead of after a whole switch interval
            acc.rolled = False
            _sleep(0)
        return fut

    async def send_and_wait(
        self,
        topic: str,
        value: PV | None = None,
        key: PK | None = None,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Headers | None = None,
    ) -> RecordMetadata:
        fut = await self.send(topic, value, key, partition, timestamp, headers)
        return await fut

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered now and wait until it is acknowledged (or failed)."""
        if not self._started:
            return
        self._acc.flushing += 1
        self._wakeup()
        try:
            await self._wait_incomplete(timeout)
        finally:
            self._acc.flushing -= 1

    async def _wait_incomplete(self, timeout: float | None) -> None:
        with self._acc.lock:
            pending = [b.result for b in self._acc.incomplete]
        if not pending:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        for r in pending:
            if r.done:
                continue
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0)
            try:
                await wait_for(asyncio.shield(r.aio_future()), remaining)
            except asyncio.TimeoutError:
                raise KafkaTimeoutError(f"flush did not complete within {timeout} s") from None

    async def partitions_for(self, topic: str) -> list[int]:
        t = await self._cluster.wait_for_topic(topic, int(self._max_block * 1000))
        return sorted(t.partitions)

    # -- transactions (moldau.client.transactions) ----------------------------------------------------
    def _transactions(self) -> TransactionManager:
        if self._txn is None:
            raise IllegalStateError("not a transactional producer: set transactional.id")
        return self._txn

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional id (fencing older producers with it); once, before the first
        transaction."""
        await self._transactions().init_transactions(timeout)

    def begin_transaction(self) -> None:
        self._transactions().begin_transaction()

    async def send_offsets_to_transaction(self, offsets: Offsets, group: GroupRef,
                                          timeout: float | None = None) -> None:
        """Commit consumer offsets ({TopicPartition: offset | OffsetAndMetadata}) with the transaction;
        ``group``: a group id, a ConsumerGroupMetadata or the consumer itself."""
        await self._transactions().send_offsets_to_transaction(offsets, group, timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        await self._transactions().commit_transaction(timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        await self._transactions().abort_transaction(timeout)

    @property
    def producer_id(self) -> tuple[int, int]:
        """(producer id, epoch) of the idempotent producer; (-1, -1) before the first send."""
        return self._ids.producer_id, self._ids.producer_epoch


class _TransactionHooks(Generic[PK, PV]):
    """The producer's side of the transaction manager (``ProducerHooks``)."""

    __slots__ = ("_producer",)

    def __init__(self, producer: AsyncProducer[PK, PV]) -> None:
        self._producer = producer

    def check_started(self) -> None:
        if self._producer._sender is None:
            raise IllegalStateError("producer not started: use 'await producer.start()' or 'async with'")

    async def flush(self, timeout: float | None = None) -> None:
        await self._producer.flush(timeout)

    def queued_partitions(self) -> list[tuple[str, int]]:
        acc = self._producer._acc
        with acc.lock:
            return [(t, p) for t, parts in acc.parts.items() for p, st in parts.items() if st.queue]

    def fail_unsent(self, exc: BaseException) -> bool:
        acc = self._producer._acc
        batches: list[ProducerBatch] = []
        with acc.lock:
            for parts in acc.parts.values():
                for st in parts.values():
                    keep = [b for b in st.queue if b.in_flight]
                    batches.extend(b for b in st.queue if not b.in_flight)
                    st.queue.clear()
                    st.queue.extend(keep)
        sender = self._producer._sender
        assert sender is not None  # a transaction is open or aborting: the producer was started
        for b in batches:
            sender._fail(b, exc)
        return any(b.base_sequence >= 0 for b in batches)

    def resequence(self) -> None:
        self._producer._acc.resequence()


def _normalize_headers(headers: Headers) -> _RecordHeaders:
    items: Iterable[tuple[str | bytes, HeaderValue]] = (
        headers.items() if isinstance(headers, Mapping) else headers)
    out: _RecordHeaders = []
    for k, v in items:
        if type(k) is bytes:
            k = k.decode()
        if type(v) is str:
            v = v.encode()
        out.append((k, v))  # type: ignore[arg-type]  # a str subclass is left to the codec, which refuses it
    return out

