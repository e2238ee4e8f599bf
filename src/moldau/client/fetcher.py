"""The consumer's fetcher: per-partition positions, Fetch requests with prefetching, lazy batch decoding.

Every assigned partition has a ``PartitionState``: ``position`` (next offset handed to the user) and
``fetch_offset`` (next offset to ask the broker for, ahead of ``position`` while fetched data waits in the
partition's buffer). One Fetch request per broker is in flight; the next one goes out as soon as the
previous answer is buffered, so records are on their way while the application processes the last ones
(prefetch bounded by ``max.partition.fetch.bytes`` per partition).

A fetched record set stays the bytes the connection read (a memoryview); only batch headers are parsed on
arrival (to know the next fetch offset). Batches are decompressed and decoded when ``poll()`` reaches them.
A seek or reset bumps the partition's ``epoch``: buffered or in-flight data of an older epoch is dropped.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import TYPE_CHECKING, Generic, Protocol, cast

from moldau._aio import wait_for
from moldau.protocol import messages as m
from moldau.protocol.records import check_crc, decode_batch, parse_control_record, split_batches
from moldau.protocol.records.batch import BatchHeader, decode_batch_tuples

from ._typing import Bytes, Deserializer, K, V
from .errors import Codes, KafkaConnectionError, NoOffsetForPartitionError, broker_error
from .fetch_session import FetchPlan, FetchSessionHandler
from .types import ConsumerRecord, TopicPartition

if TYPE_CHECKING:
    from .cluster import Cluster
    from .config import ConsumerConfig
    from .conn import Connection

log = logging.getLogger(__name__)

__all__ = ["PartitionState", "Fetcher", "EARLIEST", "LATEST"]

_FETCH = 1
_LIST_OFFSETS = 2
EARLIEST = -2
LATEST = -1

_LEADER_ERRORS = frozenset({
    Codes.NOT_LEADER_OR_FOLLOWER, Codes.UNKNOWN_TOPIC_OR_PARTITION, Codes.LEADER_NOT_AVAILABLE,
    Codes.FENCED_LEADER_EPOCH, Codes.UNKNOWN_LEADER_EPOCH, Codes.KAFKA_STORAGE_ERROR,
    Codes.REPLICA_NOT_AVAILABLE, Codes.BROKER_NOT_AVAILABLE, Codes.OFFSET_NOT_AVAILABLE,
    Codes.UNKNOWN_TOPIC_ID, Codes.INCONSISTENT_TOPIC_ID,
})

_new_record = tuple.__new__


class PartitionState(Generic[K, V]):
    __slots__ = ("tp", "topic", "partition", "position", "fetch_offset", "epoch", "paused", "buffer",
                 "buffered_bytes", "high_watermark", "last_stable_offset", "log_start_offset", "error",
                 "next_attempt", "awaiting_committed", "reset_strategy", "leader_epoch", "in_flight")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.topic = tp.topic
        self.partition = tp.partition
        self.position: int | None = None
        self.fetch_offset = -1
        self.epoch = 0
        self.paused = False
        self.buffer: collections.deque[_CompletedFetch[K, V]] = collections.deque()
        self.buffered_bytes = 0
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        self.error: BaseException | None = None
        self.next_attempt = 0.0
        self.awaiting_committed = False
        self.reset_strategy: int | None = None  # EARLIEST/LATEST, or a timestamp, when a reset is pending
        self.leader_epoch = -1
        self.in_flight = False

    def seek(self, offset: int) -> None:
        self.position = offset
        self.fetch_offset = offset
        self.epoch += 1
        self.buffer.clear()
        self.buffered_bytes = 0
        self.error = None
        self.reset_strategy = None
        self.awaiting_committed = False

    def request_reset(self, strategy: int | None) -> None:
        self.position = None
        self.epoch += 1
        self.buffer.clear()
        self.buffered_bytes = 0
        self.reset_strategy = strategy

    @property
    def has_position(self) -> bool:
        return self.position is not None

    def __repr__(self) -> str:
        return f"<PartitionState {self.topic}-{self.partition} pos={self.position} fetch={self.fetch_offset}>"


class FetcherOwner(Protocol[K, V]):
    """What the fetcher uses of its consumer (AsyncConsumer): its config, cluster and partition states, and
    the committed offsets it loads for partitions without a position."""

    config: ConsumerConfig
    _cluster: Cluster
    _states: dict[TopicPartition, PartitionState[K, V]]

    async def _load_committed(self, states: list[PartitionState[K, V]]) -> None: ...


class _CompletedFetch(Generic[K, V]):
    __slots__ = ("state", "epoch", "data", "batches", "bi", "records", "ri", "aborted", "nbytes",
                 "next_offset")

    def __init__(self, state: PartitionState[K, V], epoch: int, data: Bytes,
                 batches: list[tuple[int, BatchHeader]], aborted: dict[int, list[int]] | None,
                 nbytes: int) -> None:
        self.state = state
        self.epoch = epoch
        self.data = data
        self.batches = batches
        self.bi = 0
        self.records: list[ConsumerRecord[K, V]] | None = None
        self.ri = 0
        self.aborted = aborted  # read_committed: {producer_id: [first offsets]} or None
        self.nbytes = nbytes  # bytes still counted in state.buffered_bytes (batches not decoded yet)
        self.next_offset = -1  # end of the batch whose records are in ``records``


class Fetcher(Generic[K, V]):
    """Owned by a consumer; runs one background task on the consumer's loop."""

    def __init__(self, consumer: FetcherOwner[K, V]) -> None:
        c = consumer.config
        self.consumer = consumer
        self.cluster = consumer._cluster
        self.states: dict[TopicPartition, PartitionState[K, V]] = consumer._states
        self.max_wait_ms = c["fetch.max.wait.ms"]
        self.min_bytes = c["fetch.min.bytes"]
        self.max_bytes = c["fetch.max.bytes"]
        self.partition_max_bytes = c["max.partition.fetch.bytes"]
        self.isolation = 1 if c["isolation.level"] == "read_committed" else 0
        self.check_crcs = c["check.crcs"]
        self.reset_default = {"earliest": EARLIEST, "latest": LATEST, "none": None}[c["auto.offset.reset"]]
        self.retry_backoff = c["retry.backoff.ms"] / 1000.0
        self.request_timeout_ms = c["request.timeout.ms"]
        # what they return is what the application declared (AsyncConsumer[K, V]); the config holds them
        # untyped
        self.key_deserializer = cast("Deserializer[K] | None", c["key.deserializer"])
        self.value_deserializer = cast("Deserializer[V] | None", c["value.deserializer"])
        self.wakeup = asyncio.Event()
        self.data_ready = asyncio.Event()
        self.in_flight_nodes: set[int] = set()
        self.node_backoff: dict[int, float] = {}
        self._task: asyncio.Task | None = None
        self._rotate = 0
        self.running = False
        self._reset_in_flight = False
        self._resetter: asyncio.Task | None = None
        self.sessions: dict[int, FetchSessionHandler] = {}  # KIP-227, per broker (Fetch v7+)

    def start(self) -> None:
        self.running = True
        self._task = asyncio.get_running_loop().create_task(self._run(), name="moldau-fetcher")

    async def stop(self) -> None:
        self.running = False
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        if self._resetter is not None:
            self._resetter.cancel()

    # ------------------------------------------------------------------------------------------------
    # background loop

    async def _run(self) -> None:
        while self.running:
            delay: float | None = None
            try:
                delay = await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001
                log.exception("fetcher iteration failed")
                delay = self.retry_backoff
            if delay is None or delay > 0:
                try:
                    await wait_for(self.wakeup.wait(), delay)
                except asyncio.TimeoutError:
                    pass
            self.wakeup.clear()

    async def _step(self) -> float | None:
        now = time.monotonic()
        delay: float | None = None
        needs_position = False
        for st in self.states.values():
            if st.position is None and st.error is None:
                needs_position = True
                break
        if needs_position and not self._reset_in_flight:
            self._reset_in_flight = True
            self._resetter = asyncio.get_running_loop().create_task(self._update_positions())
        per_node: dict[int, list[PartitionState[K, V]]] = {}
        unknown_leader = False
        cluster = self.cluster
        limit = self.partition_max_bytes
        for st in self.states.values():
            if st.paused or st.position is None or st.in_flight or st.error is not None:
                continue
            if st.buffered_bytes >= limit:
                continue
            if st.next_attempt > now:
                d = st.next_attempt - now
                delay = d if delay is None or d < delay else delay
                continue
            node = cluster.leader(st.topic, st.partition)
            if node < 0:
                unknown_leader = True
                continue
            if node in self.in_flight_nodes:
                continue
            nb = self.node_backoff.get(node, 0.0)
            if nb > now:
                d = nb - now
                delay = d if delay is None or d < delay else delay
                continue
            per_node.setdefault(node, []).append(st)
        if unknown_leader:
            cluster.request_update()
            delay = self.retry_backoff if delay is None else min(delay, self.retry_backoff)
        for node, states in per_node.items():
            conn = cluster.connected(node)
            if conn is None:
                self.in_flight_nodes.add(node)
                asyncio.get_running_loop().create_task(self._connect_then_wake(node))
                continue
            self._send_fetch(conn, node, states)
        return delay

    async def _connect_then_wake(self, node: int) -> None:
        try:
            await self.cluster.connection(node)
        except Exception as exc:  # noqa: BLE001
            log.debug("fetcher: cannot connect to node %d: %s", node, exc)
            self.node_backoff[node] = time.monotonic() + self.retry_backoff
        finally:
            self.in_flight_nodes.discard(node)
            self.wakeup.set()

    def _send_fetch(self, conn: Connection, node: int, states: list[PartitionState[K, V]]) -> None:
        R = m.FetchRequest
        topics: dict[str, list[m.FetchRequest.FetchPartition]] = {}
        sent: list[tuple[PartitionState[K, V], int, int]] = []
        pmb = self.partition_max_bytes
        leader_epoch = self.cluster.leader_epoch
        # fetch session (KIP-227): an incremental fetch names only the partitions whose fetch state changed
        # since the last request and forgets those no longer wanted; the broker answers only for partitions
        # with news. Every partition in ``states`` is in the session, so all of them are in flight.
        plan: FetchPlan | None = None
        send: set[tuple[str, int]] | None = None
        forgotten: list[m.FetchRequest.ForgottenTopic] = []
        if conn.api_version(_FETCH) >= 7:
            session = self.sessions.get(node)
            if session is None:
                session = self.sessions[node] = FetchSessionHandler()
            plan = session.build(
                {
                    (st.topic, st.partition): (st.fetch_offset, leader_epoch(st.topic, st.partition), pmb)
                    for st in states
                }
            )
            if not plan.full:
                send = set(plan.send)
                by_topic: dict[str, list[int]] = {}
                for t, p in plan.forgotten:
                    by_topic.setdefault(t, []).append(p)
                forgotten = [R.ForgottenTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]
        for st in states:
            st.in_flight = True
            sent.append((st, st.epoch, st.fetch_offset))
            if send is not None and (st.topic, st.partition) not in send:
                continue
            topics.setdefault(st.topic, []).append(R.FetchPartition(
                partition=st.partition,
                current_leader_epoch=leader_epoch(st.topic, st.partition),
                fetch_offset=st.fetch_offset,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=pmb,
            ))
        req = R.new(
            replica_id=-1,
            max_wait_ms=self.max_wait_ms,
            min_bytes=self.min_bytes,
            max_bytes=self.max_bytes,
            isolation_level=self.isolation,
            session_id=plan.session_id if plan is not None else 0,
            session_epoch=plan.epoch if plan is not None else -1,
            topics=[R.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=forgotten,
            rack_id=self.consumer.config["client.rack"] or "",
        )
        try:
            fut = conn.send(_FETCH, req, timeout_ms=self.request_timeout_ms + self.max_wait_ms)
        except Exception as exc:  # noqa: BLE001
            for st, _e, _o in sent:
                st.in_flight = False
                st.error = exc
            if plan is not None:
                self.sessions[node].handle_error()
            self.data_ready.set()
            return
        self.in_flight_nodes.add(node)
        fut.add_done_callback(lambda f: self._on_fetch(node, sent, f, plan))

    def _on_fetch(self, node: int, sent: list[tuple[PartitionState[K, V], int, int]],
                  fut: asyncio.Future[m.FetchResponse], plan: FetchPlan | None = None) -> None:
        self.in_flight_nodes.discard(node)
        self.wakeup.set()
        for st, _e, _o in sent:
            st.in_flight = False
        session = self.sessions.get(node) if plan is not None else None
        if fut.cancelled():
            if session is not None:
                session.handle_error()
            return
        exc = fut.exception()
        if exc is not None:
            log.debug("fetch from node %d failed: %s", node, exc)
            if session is not None:
                session.handle_error()
            self.node_backoff[node] = time.monotonic() + self.retry_backoff
            self.cluster.request_update()
            return
        resp = fut.result()
        code = getattr(resp, "error_code", 0)
        if session is not None:
            assert plan is not None
            session.handle_response(plan, code, getattr(resp, "session_id", 0))
        if code:
            log.debug("fetch from node %d: top-level error %d", node, code)
            if not FetchSessionHandler.is_session_error(code):  # a lost session: a full fetch at once
                self.node_backoff[node] = time.monotonic() + self.retry_backoff
            return
        by_tp: dict[tuple[str, int], m.FetchResponse.PartitionData] = {}
        for t in resp.responses:
            for rpd in t.partitions:
                by_tp[(t.topic, rpd.partition_index)] = rpd
        got_data = False
        for st, epoch, offset in sent:
            pd = by_tp.get((st.topic, st.partition))
            if (
                pd is None
                or self.states.get(st.tp) is not st
                or st.epoch != epoch
                or st.fetch_offset != offset
            ):
                continue  # stale: unassigned, seeked or reset since the request went out
            code = pd.error_code
            if code == 0:
                st.high_watermark = pd.high_watermark
                st.last_stable_offset = pd.last_stable_offset
                st.log_start_offset = pd.log_start_offset
                data = pd.records
                if data is None or len(data) == 0:
                    continue
                batches = split_batches(data, allow_truncated=True)
                if not batches:
                    if len(data) >= self.partition_max_bytes:
                        st.error = broker_error(
                            Codes.MESSAGE_TOO_LARGE,
                            f"a batch at offset {offset} of {st.topic}-{st.partition} is larger "
                            f"than max.partition.fetch.bytes ({self.partition_max_bytes})",
                        )
                        got_data = True
                    continue
                last = batches[-1][1]
                st.fetch_offset = last.base_offset + last.last_offset_delta + 1
                aborted: dict[int, list[int]] | None = None
                if self.isolation and pd.aborted_transactions:
                    aborted = {}
                    for a in pd.aborted_transactions:
                        aborted.setdefault(a.producer_id, []).append(a.first_offset)
                    for v in aborted.values():
                        v.sort()
                nbytes = len(data)
                st.buffer.append(_CompletedFetch(st, epoch, data, batches, aborted, nbytes))
                st.buffered_bytes += nbytes
                got_data = True
            elif code == Codes.OFFSET_OUT_OF_RANGE:
                if self.reset_default is None:
                    st.error = broker_error(
                        code,
                        f"offset {offset} of {st.topic}-{st.partition} is out of range "
                        "and auto.offset.reset is none",
                    )
                    got_data = True
                else:
                    log.info(
                        "fetch offset %d of %s-%d out of range; resetting", offset, st.topic, st.partition
                    )
                    if st.position == offset or not st.buffer:
                        st.request_reset(self.reset_default)
            elif code in _LEADER_ERRORS:
                self.cluster.request_update()
                st.next_attempt = time.monotonic() + self.retry_backoff
                leader = getattr(pd, "current_leader", None)
                if leader is not None and getattr(leader, "leader_id", -1) >= 0:
                    self.cluster.update_leader(st.topic, st.partition, leader.leader_id, leader.leader_epoch)
            else:
                st.error = broker_error(code, f"fetch {st.topic}-{st.partition}")
                got_data = True
        if got_data:
            self.data_ready.set()

    # ------------------------------------------------------------------------------------------------
    # positions

    async def _update_positions(self) -> None:
        try:
            awaiting = [st for st in self.states.values() if st.position is None and st.awaiting_committed]
            if awaiting:
                await self.consumer._load_committed(awaiting)
            todo = [st for st in self.states.values() if st.position is None and st.error is None]
            for st in todo:
                if st.reset_strategy is None and not st.awaiting_committed:
                    if self.reset_default is None:
                        st.error = NoOffsetForPartitionError(
                            f"no committed offset for {st.topic}-{st.partition} and auto.offset.reset is none"
                        )
                        self.data_ready.set()
                    else:
                        st.reset_strategy = self.reset_default
            todo = [st for st in todo if st.position is None and st.reset_strategy is not None]
            if todo:
                await self._reset_offsets(todo)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001
            log.info("resetting positions failed: %s", exc)
            await asyncio.sleep(self.retry_backoff)
        finally:
            self._reset_in_flight = False
            self.wakeup.set()

    async def _reset_offsets(self, states: list[PartitionState[K, V]]) -> None:
        by_tp = {st.tp: st for st in states}
        targets = {st.tp: (st.reset_strategy, st.epoch) for st in states if st.reset_strategy is not None}
        offsets = await self.list_offsets({tp: ts for tp, (ts, _e) in targets.items()})
        for tp, (offset, _ts, _le) in offsets.items():
            st = by_tp[tp]
            if self.states.get(tp) is not st or st.epoch != targets[tp][1] or st.position is not None:
                continue
            if offset < 0:
                offset = st.high_watermark if st.high_watermark >= 0 else 0
                if targets[tp][0] != LATEST:
                    # offsets_for_times found nothing at or after the timestamp: go to the end
                    pass
            st.seek(offset)
            log.debug("reset %s-%d to %d", tp.topic, tp.partition, offset)

    async def list_offsets(self, timestamps: dict[TopicPartition, int],
                           timeout_ms: int | None = None) -> dict[TopicPartition, tuple[int, int, int]]:
        """ListOffsets per leader: {tp: timestamp|-1 latest|-2 earliest} -> {tp: (offset, timestamp,
        epoch)}."""
        result: dict[TopicPartition, tuple[int, int, int]] = {}
        pending = dict(timestamps)
        deadline = time.monotonic() + (timeout_ms or self.consumer.config["default.api.timeout.ms"]) / 1000.0
        while pending:
            by_node: dict[int, list[TopicPartition]] = {}
            missing = False
            for tp in pending:
                node = self.cluster.leader(tp.topic, tp.partition)
                if node < 0:
                    missing = True
                    continue
                by_node.setdefault(node, []).append(tp)
            if missing:
                self.cluster.add_topics({tp.topic for tp in pending})
            R = m.ListOffsetsRequest
            calls = []
            for node, tps in by_node.items():
                topics: dict[str, list[m.ListOffsetsRequest.ListOffsetsPartition]] = {}
                for tp in tps:
                    topics.setdefault(tp.topic, []).append(R.ListOffsetsPartition(
                        partition_index=tp.partition,
                        current_leader_epoch=self.cluster.leader_epoch(tp.topic, tp.partition),
                        timestamp=pending[tp], max_num_offsets=1))
                req = R.new(replica_id=-1, isolation_level=self.isolation,
                            topics=[R.ListOffsetsTopic(name=t, partitions=ps) for t, ps in topics.items()],
                            timeout_ms=self.request_timeout_ms)
                calls.append(self.cluster.send(node, _LIST_OFFSETS, req))
            retry = False
            for res in await asyncio.gather(*calls, return_exceptions=True):
                if isinstance(res, BaseException):
                    if isinstance(res, (KafkaConnectionError, asyncio.TimeoutError)) or getattr(
                        res, "retriable", False
                    ):
                        retry = True
                        continue
                    raise res
                for t in res.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition_index)
                        if tp not in pending:
                            continue
                        if p.error_code == 0:
                            offset = p.offset
                            if getattr(p, "old_style_offsets", None):
                                offset = p.old_style_offsets[0]
                            result[tp] = (offset, p.timestamp, p.leader_epoch)
                            del pending[tp]
                        elif p.error_code in _LEADER_ERRORS or p.error_code == Codes.OFFSET_NOT_AVAILABLE:
                            retry = True
                        else:
                            raise broker_error(p.error_code, f"ListOffsets {tp.topic}-{tp.partition}")
            if pending:
                if time.monotonic() >= deadline:
                    from .errors import KafkaTimeoutError

                    raise KafkaTimeoutError(f"ListOffsets for {sorted(pending)} did not complete in time")
                if retry or missing:
                    await self.cluster.refresh(timeout_ms=max(int((deadline - time.monotonic()) * 1000), 1))
                    await asyncio.sleep(self.retry_backoff)
        return result

    # ------------------------------------------------------------------------------------------------
    # handing records to the user

    def has_data(self) -> bool:
        for st in self.states.values():
            if (st.buffer and not st.paused) or st.error is not None:
                return True
        return False

    def drain(self, max_records: int) -> list[ConsumerRecord[K, V]]:
        """Up to ``max_records`` records, round-robin over partitions with buffered data."""
        out: list[ConsumerRecord[K, V]] = []
        states = [st for st in self.states.values() if (st.buffer or st.error is not None) and not st.paused]
        if not states:
            return out
        n = len(states)
        start = self._rotate % n
        self._rotate += 1
        limit = self.partition_max_bytes
        wake = False
        for i in range(n):
            st = states[(start + i) % n]
            if st.error is not None:
                if out:
                    break  # hand out what we have; the error comes with the next poll
                err, st.error = st.error, None
                raise err
            was_full = st.buffered_bytes >= limit
            buf = st.buffer
            try:
                while buf and len(out) < max_records:
                    cf = buf[0]
                    if cf.epoch != st.epoch or self._take(cf, out, max_records):
                        buf.popleft()
                        st.buffered_bytes -= cf.nbytes
                        cf.nbytes = 0
            except Exception as exc:  # noqa: BLE001 - a batch that fails its CRC or cannot be decoded
                # it stays where it is (the error repeats until the application seeks past it, as in
                # Kafka); records before it are handed out first
                if not out:
                    raise
                st.error = exc
                break
            finally:
                if was_full and st.buffered_bytes < limit:
                    wake = True  # room to prefetch the next chunk while the application works on these
            if len(out) >= max_records:
                break
        if wake:
            self.wakeup.set()
        return out

    def _take(self, cf: _CompletedFetch[K, V], out: list[ConsumerRecord[K, V]], max_records: int) -> bool:
        """Move records of ``cf`` into ``out`` (up to ``max_records`` in all); True when ``cf`` is used up.

        A batch is decoded (straight into ConsumerRecord tuples) when it is reached; its bytes then stop
        counting against the partition's prefetch limit."""
        st = cf.state
        position = st.position
        assert position is not None
        batches = cf.batches
        try:
            while True:
                recs = cf.records
                if recs is None:
                    if cf.bi >= len(batches):
                        return True
                    pos, h = batches[cf.bi]
                    cf.bi += 1
                    size = h.batch_length + 12
                    cf.nbytes -= size
                    st.buffered_bytes -= size
                    nxt = h.base_offset + h.last_offset_delta + 1
                    if nxt <= position:
                        continue  # batch wholly before the position (fetch in the middle of a batch)
                    attrs = h.attributes
                    if attrs & 0x20:  # control batch: transaction marker
                        if cf.aborted is not None:
                            self._on_control(cf.aborted, cf.data, pos, h)
                        position = nxt
                        continue
                    if cf.aborted is not None and attrs & 0x10 and self._is_aborted(cf.aborted, h):
                        position = nxt
                        continue
                    try:
                        recs = self._decode(cf, pos, h, position)
                    except Exception:
                        cf.bi -= 1  # not consumed: the next poll meets it again
                        cf.nbytes += size
                        st.buffered_bytes += size
                        raise
                    if not recs:
                        position = nxt
                        continue
                    cf.records = recs
                    cf.ri = 0
                    cf.next_offset = nxt
                ri = cf.ri
                room = max_records - len(out)
                left = len(recs) - ri
                if left <= room:
                    out.extend(recs if not ri else recs[ri:])
                    cf.records = None
                    nxt = cf.next_offset  # a consumed batch moves the position to its end (compaction gaps)
                    position = nxt if nxt > position else position
                    if left == room:
                        return cf.bi >= len(batches)
                else:
                    end = ri + room
                    out.extend(recs[ri:end])
                    cf.ri = end
                    position = recs[end - 1][2] + 1
                    return False
        finally:
            st.position = position

    def _decode(self, cf: _CompletedFetch[K, V], pos: int, h: BatchHeader, position: int
                ) -> list[ConsumerRecord[K, V]]:
        st = cf.state
        data = cf.data
        if self.check_crcs:
            check_crc(data, pos, h)
        recs = decode_batch_tuples(data, pos, h, ConsumerRecord, st.topic, st.partition,
                                   h.partition_leader_epoch)
        if h.base_offset < position:
            recs = [r for r in recs if r[2] >= position]
        kd = self.key_deserializer
        vd = self.value_deserializer
        if kd is not None or vd is not None:
            recs = [_new_record(ConsumerRecord, (r[0], r[1], r[2], r[3], r[4],
                                                 r[5] if kd is None else kd(r[5]),
                                                 r[6] if vd is None else vd(r[6]), r[7], r[8])) for r in recs]
        return recs

    def _is_aborted(self, aborted: dict[int, list[int]], h: BatchHeader) -> bool:
        firsts = aborted.get(h.producer_id)
        if not firsts:
            return False
        # aborted when an aborted transaction of this producer started at or before this batch
        return firsts[0] <= h.base_offset

    def _on_control(self, aborted: dict[int, list[int]], data: Bytes, pos: int, h: BatchHeader) -> None:
        try:
            recs = decode_batch(data, pos, header=h)
        except Exception:  # noqa: BLE001
            return
        for r in recs:
            try:
                _version, ctype = parse_control_record(r.key)
            except Exception:  # noqa: BLE001
                continue
            if ctype == 0:  # ABORT marker ends the aborted transaction of this producer
                firsts = aborted.get(h.producer_id)
                if firsts:
                    firsts.pop(0)

