"""Request handling of the Kafka 0.7 listener, on top of the broker's components (ReplicaManager,
MetadataStore, the broker config): PRODUCE/MULTIPRODUCE append converted record batches, FETCH/MULTIFETCH
serve the 0.7 view of the log by byte offset, OFFSETS answers segment start byte offsets.

What Kafka 0.7 did (``KafkaRequestHandlers``, ``LogManager``, ``Log``) and what this does:

* PRODUCE has no response. A message set that 0.7's ``Log.append`` refuses (bad CRC, unknown magic or codec,
  bad size) or a partition out of range is logged and dropped whole, never written, and, as 0.7's handler
  rethrew the error to its socket server, the connection is closed. A MULTIPRODUCE stops at the first
  failing part. Partition -1 picks a random partition. An unknown topic is created (``num.partitions``)
  when ``auto.create.topics.enable`` is on.
* FETCH: a partition outside [0, partitions) is WrongPartition (for an unknown topic, the broker's
  ``num.partitions`` bounds it); an unknown topic otherwise gives an empty message set, no error; a byte
  offset outside [first, end] is OffsetOutOfRange; the end gives an empty set. The answer is the byte range
  [offset, offset + max_size) of the 0.7 view: it may end in the middle of a message, and an offset that is
  not a message boundary gets the bytes from there (0.7 sent the file's bytes without checking). A negative
  max_size is InvalidFetchSize.
* ACLs (``authorizer.class.name``): a 0.7 client has no credentials; it is ``User:ANONYMOUS`` from its
  address. PRODUCE needs Write on the topic (auto-creation: Create on the cluster or the topic), FETCH
  Read, OFFSETS Describe; 0.7 has no authorization error, so a denied FETCH or OFFSETS answers Unknown (-1)
  and a denied PRODUCE is dropped and the connection closed.
* OFFSETS: ``Log.getOffsetsBefore`` over moldau's segments (segment start byte offsets with the segment
  file's modification time, plus the end offset when the last segment is not empty), newest first. A
  partition out of range closes the connection (0.7's ``LogManager.getOffsets`` threw
  ``InvalidPartitionException``, which the OFFSETS handler did not catch).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

from moldau.protocol import kafka07 as k07
from moldau.protocol.records import RecordError, split_batches

from ..security.authorizer import CLUSTER, CLUSTER_NAME, CREATE, DESCRIBE, READ, TOPIC, WRITE

log = logging.getLogger(__name__)

_READ_CHUNK = 1 << 20
VIEW_CACHE_BYTES = 32 << 20


class ViewCache:
    """Recently built 0.7 views of batches, keyed by (topic, partition, base offset, CRC of the batch): a
    fetch ending inside a batch and the next one starting there, or several 0.7 consumers of the same data,
    convert each batch once. Bounded in bytes, oldest out first."""

    def __init__(self, max_bytes: int = VIEW_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._views: OrderedDict[tuple[str, int, int, int], bytes] = OrderedDict()

    def view(self, topic: str, partition: int, buf: bytes, pos: int, h: Any) -> bytes:
        key = (topic, partition, h.base_offset, h.crc)
        v = self._views.get(key)
        if v is not None:
            self._views.move_to_end(key)
            return v
        try:
            v = k07.batch_to_message_set(buf, pos, h)
        except RecordError:  # no 0.7 view, as the byte-offset index counts it (size 0)
            return b""
        if len(v) <= self.max_bytes // 4:
            self._views[key] = v
            self.size += len(v)
            while self.size > self.max_bytes:
                _k, old = self._views.popitem(last=False)
                self.size -= len(old)
        return v


class CloseConnection(Exception):
    """The request failed the way Kafka 0.7 answered by closing the connection."""


class IndexPending(Exception):
    """The partition's byte-offset index is behind its high watermark by more than one step of work: the
    connection runs ``step()`` as separate event-loop callbacks until it returns True, then handles the
    request again (requests of the connection stay in order)."""

    def __init__(self, plog: Any, views_from: int | None = None, views_ahead: int | None = None) -> None:
        super().__init__(f"indexing {plog.topic}-{plog.partition}")
        self.plog = plog
        self.views_from = views_from  # a read waits at this byte position: index and convert in one scan
        self.views_ahead = views_ahead  # how far past it (None: ``VIEW_AHEAD_BYTES``)

    def step(self) -> bool:
        """One piece of ``advance`` on the calling thread (in process tools and benchmarks); True when the
        index is there."""
        plog = self.plog
        job = plog.byte_offsets_prepare(plog.high_watermark, INDEX_STEP_BYTES, self.views_from,
                                        self.views_ahead)
        if job is None:
            return True
        plog.byte_offsets_commit(job, job.compute())
        return False

    def advance(self, executor: Executor, done: Callable[[BaseException | None], None]) -> None:
        """Index towards the high watermark: the log is read on the event loop (about INDEX_STEP_BYTES per
        step), the batches are decoded for their view sizes in ``executor``, the result is added on the
        loop; ``done(None)`` once the index is there, ``done(error)`` if it fails."""
        loop = asyncio.get_running_loop()
        plog = self.plog

        def prepare() -> None:
            try:
                job = plog.byte_offsets_prepare(plog.high_watermark, INDEX_STEP_BYTES, self.views_from,
                                        self.views_ahead)
            except Exception as e:  # noqa: BLE001 - the connection closes
                done(e)
                return
            if job is None:
                done(None)
                return
            fut = executor.submit(job.compute)
            fut.add_done_callback(lambda f: loop.call_soon_threadsafe(finish, job, f))

        def finish(job: Any, fut: Any) -> None:
            try:
                plog.byte_offsets_commit(job, fut.result())
            except Exception as e:  # noqa: BLE001 - the connection closes
                done(e)
                return
            prepare()

        prepare()


class ViewsPending(IndexPending):
    """A read whose answer would be converted from the log and stored (it starts where the stored views
    end): the connection has a worker thread convert the next piece (``ViewJob``), stores it, and handles
    the request again, now a read of stored views. Where that makes no progress (a unit changed by a
    cleaning pass), the read converts on the loop."""

    def __init__(self, plog: Any, position: int, service: Kafka07Service) -> None:
        super().__init__(plog, position)
        self.position = position
        self.service = service

    def step(self) -> bool:
        job = self.plog.byte_offsets_prepare_views(self.position, VIEW_STEP_BYTES)
        if job is None or not self.plog.byte_offsets_commit_views(job, job.compute()):
            self.service.convert_here(self.plog, self.position)
        return True

    def advance(self, executor: Executor, done: Callable[[BaseException | None], None]) -> None:
        loop = asyncio.get_running_loop()
        plog = self.plog
        try:
            job = plog.byte_offsets_prepare_views(self.position, VIEW_STEP_BYTES)
        except Exception as e:  # noqa: BLE001 - the connection closes
            done(e)
            return
        if job is None:
            self.service.convert_here(plog, self.position)
            done(None)
            return

        def finish(fut: Any) -> None:
            try:
                if not plog.byte_offsets_commit_views(job, fut.result()):
                    self.service.convert_here(plog, self.position)
            except Exception as e:  # noqa: BLE001 - the connection closes
                done(e)
                return
            done(None)

        executor.submit(job.compute).add_done_callback(lambda f: loop.call_soon_threadsafe(finish, f))


VIEW_STEP_BYTES = 1 << 20  # log bytes a worker thread converts into stored views per ViewsPending
READ_CONVERT_S = 0.008  # event-loop time a read spends converting (at least one unit), then it answers
INDEX_STEP_BYTES = 256 << 10  # log bytes read on the event loop per step of ``IndexPending.advance``
KEEP_INDEXES_S = 1.0  # period of ``Kafka07Service.keep_indexes``
TAIL_VIEWS_S = 60.0  # ``keep_indexes`` builds the views of a partition 0.7 consumers read this recently


class Kafka07Service:
    """Handles decoded 0.7 requests. Synchronous: requests of one connection are applied in order."""

    PRINCIPAL = "User:ANONYMOUS"

    def __init__(self, replica_manager: Any, metadata: Any, config: Any, clock: Any,
                 authorizer: Any = None) -> None:
        self.replica_manager = replica_manager
        self.metadata = metadata
        self.config = config
        self.clock = clock
        self.authorizer = authorizer
        self.views = ViewCache()
        self._executor: ThreadPoolExecutor | None = None
        self._keeping: set[Any] = set()  # partition logs whose index ``keep_indexes`` is extending
        self._convert_here: set[tuple[int, int]] = set()  # (id(log), position): reads convert on the loop
        self._read_at: dict[int, float] = {}  # id(partition log) -> time.monotonic() of its last 0.7 read
        # kafka07.views.eager: index and convert every partition in the background as data arrives
        self.eager = bool(config.get("kafka07.views.eager")) if config is not None else False

    @property
    def executor(self) -> Executor:
        """The thread that decodes batches for byte-offset indexes (``IndexPending.advance``)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="moldau-kafka07-index")
        return self._executor

    def convert_here(self, plog: Any, position: int) -> None:
        """Reads from ``position`` convert on the event loop (converting in a worker made no progress)."""
        if len(self._convert_here) > 10_000:
            self._convert_here.clear()
        self._convert_here.add((id(plog), position))

    def keep_indexes(self) -> None:
        """Extend, in the background, every byte-offset index that fell behind its partition's high
        watermark (the broker's existing indexes: of partitions a 0.7 client read, led or followed), so that
        a 0.7 read or a retention pass rarely finds much to index (a retention pass indexes what it deletes
        under the log lock). Where 0.7 consumers keep up (the partition was read in the last
        ``TAIL_VIEWS_S`` and its stored views reach the index's end), the new data's views are built and
        stored in the same scan (up to ``VIEW_AHEAD_BYTES`` a period), so that their next read is a pread.
        With ``kafka07.views.eager`` (``self.eager``) every partition of a topic that is not internal gets its
        index, and its new data's views are built and stored as it arrives, read or not. Called every
        ``KEEP_INDEXES_S`` by the listener."""
        now = time.monotonic()
        if len(self._read_at) > 10_000:
            self._read_at = {k: t for k, t in self._read_at.items() if now - t < TAIL_VIEWS_S}
        rm = self.replica_manager
        for p in list(getattr(rm, "partitions", {}).values()):
            plog = getattr(p, "log", None)
            if plog is None or plog in self._keeping or getattr(plog, "closed", False):
                continue
            idx = getattr(plog, "byte_offsets", None)
            if idx is None and not (self.eager and self._eager_topic(plog.topic)):
                continue
            end = idx.end_position if idx is not None else 0
            if idx is not None and idx.scanned >= plog.high_watermark:
                continue
            views_from = views_ahead = None
            store = idx.views.end if idx is not None else None
            if self.eager and store in (None, end):
                views_from, views_ahead = end, 1 << 62
            elif store == end and now - self._read_at.get(id(plog), -TAIL_VIEWS_S) < TAIL_VIEWS_S:
                views_from = end
            self._keeping.add(plog)
            IndexPending(plog, views_from, views_ahead).advance(self.executor,
                                                                functools.partial(self._index_kept, plog))

    def _eager_topic(self, topic: str) -> bool:
        t = self.metadata.get(topic) if self.metadata is not None else None
        return not getattr(t, "is_internal", topic.startswith("__"))

    def _index_kept(self, plog: Any, _error: BaseException | None) -> None:
        self._keeping.discard(plog)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    def _allowed(self, host: str, operation: int, resource_type: int, name: str) -> bool:
        authz = self.authorizer
        return authz is None or bool(authz.authorize(self.PRINCIPAL, host, operation, resource_type, name))

    def _require_topic(self, host: str, operation: int, topic: str) -> None:
        if not self._allowed(host, operation, TOPIC, topic):
            raise _Error(k07.UNKNOWN, f"{self.PRINCIPAL} from {host} is not authorized for {topic}")

    # ------------------------------------------------------------------------------------------ dispatch
    def handle(self, kind: int, req: Any, host: str = "") -> list[bytes] | None:
        """Response chunks to write, or None (PRODUCE, MULTIPRODUCE); ``host``: the client's address.
        Raises CloseConnection."""
        if kind == k07.PRODUCE:
            self.produce(req, host)
            return None
        if kind == k07.MULTIPRODUCE:
            for p in req.produces:
                self.produce(p, host)
            return None
        if kind == k07.FETCH:
            return k07.encode_fetch_response(*self.fetch(req, host))
        if kind == k07.MULTIFETCH:
            return k07.encode_multifetch_response([self.fetch(f, host) for f in req.fetches])
        if kind == k07.OFFSETS:
            return [k07.encode_offsets_response(*self.offsets(req, host))]
        raise CloseConnection(f"unknown request type {kind}")  # pragma: no cover - parse_request refuses

    # ------------------------------------------------------------------------------------------ helpers
    def _partition_count(self, topic: str) -> tuple[Any, int]:
        t = self.metadata.get(topic)
        if t is not None:
            return t, int(t.num_partitions)
        return None, int(self.config.get("num.partitions"))

    def _partition(self, topic: str, index: int) -> Any:
        """The replica manager's partition, None for an unknown topic; k07 error codes as exceptions."""
        t, count = self._partition_count(topic)
        if index < 0 or index >= count:
            raise _Error(k07.WRONG_PARTITION, f"partition {index} of {topic} is not in [0, {count})")
        if t is None:
            return None
        p = self.replica_manager.get_partition(topic, index)
        if p is None or p.deleted:
            raise _Error(k07.UNKNOWN, f"{topic}-{index} is not led by this broker")
        return p

    # ------------------------------------------------------------------------------------------ produce
    def produce(self, req: k07.ProduceRequest, host: str = "") -> None:
        topic, index = req.topic, req.partition
        try:
            self._require_topic(host, WRITE, topic)
            if self.metadata.get(topic) is None:
                if not self.config.get("auto.create.topics.enable"):
                    raise _Error(k07.UNKNOWN,
                                 f"topic {topic} does not exist (auto.create.topics.enable=false)")
                if not (self._allowed(host, CREATE, CLUSTER, CLUSTER_NAME)
                        or self._allowed(host, CREATE, TOPIC, topic)):
                    raise _Error(k07.UNKNOWN, f"{self.PRINCIPAL} from {host} may not create topic {topic}")
                try:
                    self.metadata.create_topic(topic)
                except Exception as e:  # noqa: BLE001 - any refusal (name, policy) drops the request
                    if self.metadata.get(topic) is None:
                        raise _Error(k07.UNKNOWN, f"cannot create topic {topic}: {e}") from None
            t = self.metadata.get(topic)
            if getattr(t, "is_internal", False):
                raise _Error(k07.UNKNOWN, f"topic {topic} is internal")
            if index == k07.RANDOM_PARTITION:
                index = random.randrange(int(t.num_partitions))
            p = self._partition(topic, index)
            if p is None:  # pragma: no cover - created above
                raise _Error(k07.UNKNOWN, f"topic {topic} does not exist")
            try:
                units = k07.validate_message_set(req.messages, max_message_bytes=p.config.max_message_bytes)
            except k07.InvalidMessage07 as e:
                raise _Error(k07.INVALID_MESSAGE, str(e)) from None
            if not units:
                return
            buf = k07.messages_to_batches(units, self.clock.time_ms())
            if not buf:
                return
            res = self.replica_manager.append(p, buf)
            if res.error:
                raise _Error(k07.UNKNOWN, f"append failed with error {res.error}: {res.error_message}")
            if res.flush is not None:  # no acknowledgement waits for the fsync the flush policy asks for
                res.flush.add_done_callback(_flush_done)
        except _Error as e:
            log.warning("0.7 produce to %s-%d dropped (error %d): %s", topic, index, e.code, e)
            raise CloseConnection(str(e)) from None

    # ------------------------------------------------------------------------------------------ fetch
    def fetch(self, req: k07.FetchRequest, host: str = "") -> tuple[int, bytes]:
        try:
            self._require_topic(host, READ, req.topic)
            p = self._partition(req.topic, req.partition)
            if p is None:
                return k07.NO_ERROR, b""
            if req.max_size < 0:
                raise _Error(k07.INVALID_FETCH_SIZE, f"fetch size {req.max_size} is negative")
            return k07.NO_ERROR, self.read(p, req.offset, req.max_size)
        except _Error as e:
            if e.code != k07.OFFSET_OUT_OF_RANGE:
                log.info("0.7 fetch %s-%d at %d: error %d: %s", req.topic, req.partition, req.offset,
                         e.code, e)
            return e.code, b""
        except IndexPending:
            raise
        except Exception:
            log.exception("0.7 fetch %s-%d at %d failed", req.topic, req.partition, req.offset)
            return k07.UNKNOWN, b""

    def read(self, p: Any, position: int, max_size: int) -> bytes:
        """Bytes [position, position + max_size) of the partition's 0.7 view, up to the high watermark.

        The index's entries (units) are walked from the one holding ``position``; each is the view of the
        stored batch with the same offsets (the common case, cached) or, after a cleaning pass thinned or
        removed its records, ``kafka07.unit_view`` of what is left, padded to the unit's size."""
        plog = p.log
        hw = plog.high_watermark
        self._read_at[id(plog)] = time.monotonic()
        idx = _covered(plog, position)
        first = idx.start_position(plog.log_start_offset)
        end = idx.end_position
        if position < first or position > end:
            raise _Error(k07.OFFSET_OUT_OF_RANGE, f"byte offset {position} is outside [{first}, {end}]")
        if position == end or max_size == 0:
            return b""
        stored = b""
        if not _inside_compressed(idx, position):
            stored = idx.views.read(position, min(max_size, end - position))  # one pread where stored
        if len(stored) == max_size or position + len(stored) >= end:
            return stored
        position += len(stored)
        max_size -= len(stored)
        i = idx.index_of(position)
        if i is None:  # pragma: no cover - every byte in [first, end) belongs to an indexed unit
            raise _Error(k07.OFFSET_OUT_OF_RANGE, f"byte offset {position} is not indexed")
        skip = position - idx.positions[i]
        # whole units converted from the start of the store's gap are stored for the next reads
        store_end = idx.views.end
        keep = skip == 0 and (store_end is None or store_end == position)
        if keep:
            if stored:
                return stored  # the rest at the next fetch, from the stored views' end
            if (id(plog), position) not in self._convert_here:
                raise ViewsPending(plog, position, self)  # converted in a worker thread, then stored
        out = bytearray()
        buf: bytes = b""
        batches: list[tuple[int, Any]] = []
        bi = 0
        n = len(idx.bases)
        deadline = time.perf_counter() + READ_CONVERT_S
        while len(out) < max_size and i < n:
            if out and time.perf_counter() > deadline:
                break  # a shorter answer, ending at a unit's end: the consumer fetches on from there
            base, nxt, size = idx.bases[i], idx.nexts[i], idx.sizes[i]
            h = None
            while True:
                if bi < len(batches):
                    bp, h = batches[bi]
                    if h.next_offset <= base:
                        bi += 1
                        continue
                    break
                # the first batch may straddle the log start (DeleteRecords): read from the batch holding it
                rr = plog.read(max(base, plog.log_start_offset), _READ_CHUNK, max_offset=hw)
                buf = b"".join(bytes(c) for c in rr.chunks) if rr.size else b""
                batches = split_batches(buf, allow_truncated=True) if buf else []
                bi = 0
                if not batches:
                    h = None
                    break
            if h is None or h.base_offset >= nxt:  # every record of the unit was cleaned away
                out += k07.unit_view(None, 0, None, base, nxt, size, skip)
            elif h.base_offset == base and h.next_offset == nxt:
                v = self.views.view(p.topic, p.index, buf, bp, h)
                if len(v) == size:
                    out += memoryview(v)[skip:] if skip else v
                else:
                    out += k07.unit_view(buf, bp, h, base, nxt, size, skip)
            else:
                out += k07.unit_view(buf, bp, h, base, nxt, size, skip)
            skip = 0
            i += 1
        if keep and out:
            idx.views.append(position, bytes(out))
        del out[max_size:]
        return stored + bytes(out) if stored else bytes(out)


    # ------------------------------------------------------------------------------------------ offsets
    def offsets(self, req: k07.OffsetsRequest, host: str = "") -> tuple[int, list[int]]:
        try:
            self._require_topic(host, DESCRIBE, req.topic)
            p = self._partition(req.topic, req.partition)
        except _Error as e:
            if e.code == k07.WRONG_PARTITION:
                # 0.7's LogManager.getOffsets threw InvalidPartitionException and its OFFSETS handler did
                # not catch it: the socket server closed the connection
                log.info("0.7 offsets %s-%d: %s; closing", req.topic, req.partition, e)
                raise CloseConnection(str(e)) from None
            log.info("0.7 offsets %s-%d: error %d: %s", req.topic, req.partition, e.code, e)
            return e.code, []
        if p is None:  # Log.getEmptyOffsets
            return k07.NO_ERROR, [0] if req.time in (k07.LATEST_TIME, k07.EARLIEST_TIME) else []
        plog = p.log
        idx = _covered(plog)
        segs = list(plog.segments)
        start = plog.log_start_offset
        table: list[tuple[int, int]] = []
        for i, seg in enumerate(segs):
            pos = idx.start_position(start) if i == 0 else idx.position_of(seg.base_offset)
            if pos is None:
                pos = idx.end_position
            table.append((pos, _mtime_ms(seg.log_path)))
        end = idx.end_position
        if segs and segs[-1].size > 0:
            table.append((end, self.clock.time_ms()))
        if req.time == k07.LATEST_TIME:
            i = len(table) - 1
        elif req.time == k07.EARLIEST_TIME:
            i = 0
        else:
            i = len(table) - 1
            while i >= 0 and table[i][1] > req.time:
                i -= 1
        n = max(0, min(req.max_number, i + 1))
        return k07.NO_ERROR, [table[i - j][0] for j in range(n)]


class _Error(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _inside_compressed(idx: Any, position: int) -> bool:
    """``position`` is inside a unit that is one compressed message (a filler among them): not a message
    boundary, unless it is a consumer's saved offset of a message a cleaning pass removed, which the
    conversion path answers with a shorter filler (``kafka07.unit_view``), so the store is not used."""
    i = idx.index_of(position)
    if i is None or position == idx.positions[i]:
        return False
    head = idx.views.read(idx.positions[i], 6)
    return len(head) == 6 and head[4] == 1 and bool(head[5] & k07.CODEC_MASK)


def _covered(plog: Any, position: int | None = None) -> Any:
    """The partition's byte-offset index when it reaches the high watermark, or (a FETCH at ``position``)
    when it already holds ``position``: what is past its end is then not visible yet, as if the high
    watermark were a moment older, and the next fetch at the end sees it. Otherwise IndexPending: the index
    is extended off the event loop (no sizing runs on the loop) and the request handled again."""
    idx = plog.byte_offsets
    if idx is not None:
        if max(idx.scanned, idx.complete_to) >= plog.high_watermark:
            return idx
        if position is not None and position < idx.end_position:
            return idx
    raise IndexPending(plog, position)


def _flush_done(fut: Any) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("flush after a 0.7 produce failed: %s", fut.exception())


def _mtime_ms(path: str) -> int:
    try:
        return int(os.stat(path).st_mtime * 1000)
    except OSError:
        return 0
