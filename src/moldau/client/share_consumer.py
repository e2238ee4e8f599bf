"""Share-group consumer (KIP-932): ``AsyncShareConsumer`` (asyncio core).

Membership is ShareGroupHeartbeat with the broker's assignment (one partition may be given to several
members). Records come from ShareFetch in a share session per partition leader (session epochs 0, 1, 2,
...; -1 closes it); each record is acquired for this member under a time-limited lock and carries its
``delivery_count``. Acknowledgements (ACCEPT, RELEASE, REJECT, RENEW) ride on the next ShareFetch or go out
with ShareAcknowledge (``commit_sync`` / ``commit_async`` / ``close``).

Implicit mode (the default): the records of one poll not acknowledged otherwise are accepted at the next
poll or commit. Explicit mode (``share.acknowledgement.mode=explicit``): every record must be acknowledged
before the next poll. ``close`` sends what is pending and closes the sessions: records still held go back
to the group.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
import uuid
from typing import Generic, NamedTuple, Protocol, Self, TypeVar, cast

from moldau._aio import wait_for
from moldau.protocol import messages as m
from moldau.protocol.records import split_batches
from moldau.protocol.records.batch import decode_batch_tuples

from ._typing import Deserializer, K, RecordHeaders, V
from .cluster import Cluster
from .config import ConfigInput, resolve_config
from .consumer import split_topics_and_config
from .errors import (
    Codes,
    ConsumerClosedError,
    IllegalStateError,
    KafkaConnectionError,
    RequestTimedOutError,
    broker_error,
    error_name,
)
from .types import ConsumerRecord, TopicPartition

log = logging.getLogger(__name__)

__all__ = ["AcknowledgeType", "AsyncShareConsumer", "ShareRecord"]

_SHARE_GROUP_HEARTBEAT, _SHARE_FETCH, _SHARE_ACKNOWLEDGE = 76, 78, 79
_GAP = 0
_MAX_EPOCH = 2**31 - 1
_COORDINATOR_ERRORS = (Codes.NOT_COORDINATOR, Codes.COORDINATOR_NOT_AVAILABLE)


class AcknowledgeType(enum.IntEnum):
    """How a delivered record is acknowledged (Kafka's AcknowledgeType ids)."""

    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4


class ShareRecord(NamedTuple, Generic[K, V]):
    """A record delivered to a share consumer: ConsumerRecord's fields and ``delivery_count``."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: K
    value: V
    headers: RecordHeaders
    leader_epoch: int = -1
    delivery_count: int = 1


class _Session:
    """The share session with one broker: its epoch and the partitions it holds."""

    __slots__ = ("epoch", "partitions")

    def __init__(self) -> None:
        self.epoch = 0
        self.partitions: set[TopicPartition] = set()

    def bump(self) -> None:
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1


_Batch_co = TypeVar("_Batch_co", covariant=True)


class _AckBatchClass(Protocol[_Batch_co]):
    """The AcknowledgementBatch struct of ShareFetch or of ShareAcknowledge."""

    def __call__(self, *, first_offset: int, last_offset: int, acknowledge_types: list[int]) -> _Batch_co: ...


def _ack_batches(make: _AckBatchClass[_Batch_co], acks: dict[int, int]) -> list[_Batch_co]:
    """{offset: type} -> AcknowledgementBatch entries (made by ``make``) over runs of consecutive offsets."""
    out: list[_Batch_co] = []
    offs = sorted(acks)
    i = 0
    while i < len(offs):
        j = i
        while j + 1 < len(offs) and offs[j + 1] == offs[j] + 1:
            j += 1
        types = [acks[o] for o in offs[i:j + 1]]
        if len(set(types)) == 1:
            types = types[:1]
        out.append(make(first_offset=offs[i], last_offset=offs[j], acknowledge_types=types))
        i = j + 1
    return out


class AsyncShareConsumer(Generic[K, V]):
    """A member of a share group. ``AsyncShareConsumer("topic", bootstrap_servers=..., group_id=...)``.

    ``AsyncShareConsumer[K, V]``: K and V are what the configured deserializers return (without type
    arguments: the stored bytes, or None)."""

    def __init__(
        self, *topics: str | ConfigInput, config: ConfigInput | None = None, **kwargs: object
    ) -> None:
        topics, config = split_topics_and_config(topics, config)
        self.config = resolve_config("share_consumer", config, kwargs)
        c = self.config
        group_id = c["group.id"]
        if not group_id:
            raise IllegalStateError("a share consumer needs group.id")
        self.group_id: str = group_id
        self.explicit = c["share.acknowledgement.mode"] == "explicit"
        self._cluster = Cluster(c, allow_auto_topic_creation=c["allow.auto.create.topics"])
        self._initial_topics = topics
        self._topics: list[str] = []
        self.member_id = str(uuid.uuid4())
        self.member_epoch = 0
        self._coordinator: int | None = None
        self._heartbeat_interval = 5.0
        self._heartbeat_task: asyncio.Task | None = None
        self._heartbeat_wake = asyncio.Event()
        self._target: list[tuple[uuid.UUID, list[int]]] = []
        self.assignment: set[TopicPartition] = set()
        self._sessions: dict[int, _Session] = {}
        self._in_flight: dict[TopicPartition, set[int]] = {}  # delivered, not acknowledged yet
        self._acks: dict[TopicPartition, dict[int, int]] = {}  # acknowledged, not sent yet
        self._renews: dict[TopicPartition, dict[int, int]] = {}
        self._fatal: BaseException | None = None
        self._lock_timeout_ms = -1
        self._iter_buffer: list[ShareRecord[K, V]] = []
        self._started = False
        self._closed = False
        self._poll_lock = asyncio.Lock()
        # they return what the application declared (AsyncShareConsumer[K, V]); the config holds them untyped
        self._kd = cast("Deserializer[K] | None", c["key.deserializer"])
        self._vd = cast("Deserializer[V] | None", c["value.deserializer"])

    # ------------------------------------------------------------------------------------------------
    # lifecycle

    async def start(self) -> None:
        if self._started:
            return
        await self._cluster.start()
        self._started = True
        if self._initial_topics:
            self.subscribe(list(self._initial_topics))

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def subscribe(self, topics: list[str]) -> None:
        """Subscribe to topics by name (the broker assigns their partitions among the group's members)."""
        self._check_open()
        self._topics = sorted(set(topics))
        self._cluster.set_topics(self._topics)
        self._cluster.request_update()
        if self._heartbeat_task is None:
            self._heartbeat_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        self._heartbeat_wake.set()

    def unsubscribe(self) -> None:
        self.subscribe([])

    def subscription(self) -> set[str]:
        return set(self._topics)

    async def close(self) -> None:
        """Send the pending acknowledgements, close the share sessions (records still held go back to the
        group), leave the group, close connections."""
        if self._closed:
            return
        self._closed = True
        if not self._started:
            return
        try:
            if self._implicit_pending():
                self._accept_in_flight()
            try:
                await wait_for(self._acknowledge(close=True), 10)
            except Exception as exc:  # noqa: BLE001 - closing goes on
                log.info("share group %s: closing the sessions: %s", self.group_id, exc)
            if self._heartbeat_task is not None:
                self._heartbeat_task.cancel()
                await asyncio.gather(self._heartbeat_task, return_exceptions=True)
            if self.member_epoch > 0:
                try:
                    await wait_for(self._heartbeat(leave=True), 5)
                except Exception as exc:  # noqa: BLE001
                    log.info("share group %s: leaving: %s", self.group_id, exc)
        finally:
            await self._cluster.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("the share consumer is closed")

    # ------------------------------------------------------------------------------------------------
    # membership

    async def _coordinator_node(self) -> int:
        while self._coordinator is None:
            code, node = await self._cluster.find_coordinator(self.group_id)
            if code == 0:
                self._coordinator = node
            elif code in (Codes.COORDINATOR_NOT_AVAILABLE, Codes.COORDINATOR_LOAD_IN_PROGRESS,
                          Codes.NOT_COORDINATOR):
                await asyncio.sleep(0.1)
            else:
                raise broker_error(code, f"FindCoordinator for share group {self.group_id!r}")
        return self._coordinator

    async def _heartbeat(self, leave: bool = False) -> None:
        node = await self._coordinator_node()
        R = m.ShareGroupHeartbeatRequest
        req = R.new(group_id=self.group_id, member_id=self.member_id,
                    member_epoch=-1 if leave else self.member_epoch,
                    rack_id=self.config["client.rack"] if self.member_epoch == 0 else None,
                    subscribed_topic_names=None if leave else self._topics)
        try:
            resp = await self._cluster.send(self._cluster.coordinator_node(node), _SHARE_GROUP_HEARTBEAT, req)
        except KafkaConnectionError:
            self._coordinator = None
            raise
        if leave:
            self.member_epoch = -1
            return
        code = resp.error_code
        if code == 0:
            self.member_epoch = resp.member_epoch
            if resp.heartbeat_interval_ms > 0:
                self._heartbeat_interval = resp.heartbeat_interval_ms / 1000.0
            if resp.assignment is not None:
                self._target = [(tp.topic_id, list(tp.partitions)) for tp in resp.assignment.topic_partitions]
            self._resolve_assignment()
            return
        message = resp.error_message or error_name(code)
        if code in (Codes.UNKNOWN_MEMBER_ID, Codes.FENCED_MEMBER_EPOCH):
            log.info("share group %s: member fenced (%s); joining again", self.group_id, message)
            self.member_epoch = 0
            self._target = []
            self._resolve_assignment()
        elif code in _COORDINATOR_ERRORS:
            self._coordinator = None
        elif code in (Codes.GROUP_AUTHORIZATION_FAILED, Codes.TOPIC_AUTHORIZATION_FAILED,
                      Codes.UNSUPPORTED_VERSION, Codes.GROUP_ID_NOT_FOUND, Codes.INVALID_REQUEST):
            self._fatal = broker_error(code, f"ShareGroupHeartbeat for {self.group_id!r}: {message}")
        else:
            log.warning("share group %s: heartbeat: %s", self.group_id, message)

    def _resolve_assignment(self) -> None:
        out: set[TopicPartition] = set()
        missing = False
        for tid, parts in self._target:
            name = self._cluster.topic_ids.get(tid)
            if name is None:
                missing = True
                continue
            out.update(TopicPartition(name, p) for p in parts)
        if missing:
            self._cluster.request_update()
        self.assignment = out

    async def _heartbeat_loop(self) -> None:
        while True:
            try:
                await self._heartbeat()
            except asyncio.CancelledError:
                raise
            except (KafkaConnectionError, RequestTimedOutError) as exc:
                log.info("share group %s: heartbeat failed: %s", self.group_id, exc)
            except Exception as exc:  # noqa: BLE001 - surfaced by poll
                self._fatal = exc
                return
            if self._target and not self.assignment:
                wait = 0.1  # topic ids not known yet
            else:
                wait = self._heartbeat_interval
            self._heartbeat_wake.clear()
            try:
                await wait_for(self._heartbeat_wake.wait(), wait)
            except asyncio.TimeoutError:
                pass

    # ------------------------------------------------------------------------------------------------
    # acknowledgements

    def acknowledge(
        self, record: ShareRecord[K, V], type: AcknowledgeType | int = AcknowledgeType.ACCEPT
    ) -> None:
        """Acknowledge one delivered record (sent with the next poll or commit). RENEW extends its lock and
        keeps it delivered (acknowledge it again later)."""
        self._check_open()
        t = AcknowledgeType(type)
        tp = TopicPartition(record.topic, record.partition)
        held = self._in_flight.get(tp)
        if held is None or record.offset not in held:
            raise IllegalStateError(f"record {tp.topic}-{tp.partition}@{record.offset} is not delivered to "
                                    "this consumer or is acknowledged already")
        if t == AcknowledgeType.RENEW:
            self._renews.setdefault(tp, {})[record.offset] = int(t)
            return
        held.discard(record.offset)
        self._acks.setdefault(tp, {})[record.offset] = int(t)

    def _implicit_pending(self) -> bool:
        return not self.explicit and any(self._in_flight.values())

    def _accept_in_flight(self) -> None:
        for tp, offs in self._in_flight.items():
            if offs:
                acks = self._acks.setdefault(tp, {})
                for o in offs:
                    acks[o] = int(AcknowledgeType.ACCEPT)
                offs.clear()

    def _take_acks(self, renew: bool = False) -> dict[TopicPartition, dict[int, int]]:
        src = self._renews if renew else self._acks
        out = {tp: a for tp, a in src.items() if a}
        if renew:
            self._renews = {}
        else:
            self._acks = {}
        return out

    def _node_of(self, tp: TopicPartition) -> int | None:
        try:
            return self._cluster.leader(tp.topic, tp.partition)
        except Exception:  # noqa: BLE001 - leader unknown
            return None

    async def _send_acknowledge(self, node: int, acks: dict[TopicPartition, dict[int, int]], close: bool,
                                renew: bool = False) -> dict[TopicPartition, BaseException | None]:
        sess = self._sessions.get(node)
        R = m.ShareAcknowledgeRequest
        if sess is None or sess.epoch == 0:
            return {tp: IllegalStateError("no share session with the partition's leader") for tp in acks}
        epoch = -1 if close else sess.epoch
        by_topic: dict[str, list[m.ShareAcknowledgeRequest.AcknowledgePartition]] = {}
        for tp, a in acks.items():
            by_topic.setdefault(tp.topic, []).append(
                R.AcknowledgePartition(partition_index=tp.partition,
                                       acknowledgement_batches=_ack_batches(R.AcknowledgementBatch, a)))
        topics = [R.AcknowledgeTopic(topic_id=self._topic_id(t), partitions=ps)
                  for t, ps in by_topic.items()]
        req = R.new(group_id=self.group_id, member_id=self.member_id, share_session_epoch=epoch,
                    is_renew_ack=renew, topics=topics)
        if close:
            self._sessions.pop(node, None)
        else:
            sess.bump()
        resp = await self._cluster.send(node, _SHARE_ACKNOWLEDGE, req)
        if resp.error_code:
            err = broker_error(resp.error_code, resp.error_message or error_name(resp.error_code))
            if resp.error_code in (Codes.SHARE_SESSION_NOT_FOUND, Codes.INVALID_SHARE_SESSION_EPOCH):
                self._sessions.pop(node, None)
            return {tp: err for tp in acks}
        out: dict[TopicPartition, BaseException | None] = {tp: None for tp in acks}
        for t in resp.responses:
            name = self._cluster.topic_ids.get(t.topic_id, "")
            for p in t.partitions:
                if p.error_code:
                    out[TopicPartition(name, p.partition_index)] = broker_error(
                        p.error_code, p.error_message or error_name(p.error_code))
        return out

    async def _acknowledge(self, close: bool = False) -> dict[TopicPartition, BaseException | None]:
        results: dict[TopicPartition, BaseException | None] = {}
        for renew in (True, False):
            acks = self._take_acks(renew)
            by_node: dict[int, dict[TopicPartition, dict[int, int]]] = {}
            for tp, a in acks.items():
                node = self._node_of(tp)
                if node is not None:
                    by_node.setdefault(node, {})[tp] = a
            nodes = set(by_node) | (set(self._sessions) if close and not renew else set())
            for node in nodes:
                results.update(await self._send_acknowledge(node, by_node.get(node, {}), close and not renew,
                                                            renew))
        return results

    async def commit_sync(self, timeout: float | None = None) -> dict[TopicPartition, BaseException | None]:
        """Send the acknowledgements made so far (in implicit mode: the last poll's records accepted) and
        wait: {partition: None or the error}."""
        self._check_open()
        if self._implicit_pending():
            self._accept_in_flight()
        return await wait_for(self._acknowledge(), timeout)

    def commit_async(self) -> asyncio.Task[dict[TopicPartition, BaseException | None]]:
        """``commit_sync`` without waiting: a task whose result is the per-partition outcome."""
        self._check_open()
        if self._implicit_pending():
            self._accept_in_flight()
        return asyncio.get_running_loop().create_task(self._acknowledge())

    # ------------------------------------------------------------------------------------------------
    # fetching

    async def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list[ShareRecord[K, V]]:
        """Records acquired for this member (each with its ``delivery_count``), waiting up to ``timeout``
        seconds for some. Implicit mode: the previous poll's records not acknowledged are accepted now."""
        self._check_open()
        if not self._started:
            await self.start()
        if self._fatal is not None:
            raise self._fatal
        if self.explicit and any(self._in_flight.values()):
            raise IllegalStateError("share.acknowledgement.mode=explicit: acknowledge every record of the "
                                    "previous poll before polling again")
        self._accept_in_flight()
        async with self._poll_lock:
            deadline = time.monotonic() + max(timeout, 0.0)
            while True:
                out = await self._fetch_once(max(0.0, deadline - time.monotonic()),
                                             max_records or self.config["max.poll.records"])
                if out or time.monotonic() >= deadline:
                    return out
                if self._fatal is not None:
                    raise self._fatal

    async def _fetch_once(self, wait: float, max_records: int) -> list[ShareRecord[K, V]]:
        renews = self._take_acks(renew=True)
        if renews:
            self._renews = renews
            await self._acknowledge()
        by_node: dict[int, set[TopicPartition]] = {}
        for tp in self.assignment:
            node = self._node_of(tp)
            if node is not None:
                by_node.setdefault(node, set()).add(tp)
        acks = self._take_acks()
        for tp in acks:
            node = self._node_of(tp)
            if node is not None:
                by_node.setdefault(node, set())
        for node, sess in list(self._sessions.items()):
            if node not in by_node and sess.partitions:
                by_node[node] = set()
        if not by_node:
            await asyncio.sleep(min(wait, 0.1))
            return []
        wait_ms = int(min(wait, self.config["fetch.max.wait.ms"] / 1000.0) * 1000)
        results = await asyncio.gather(*(self._share_fetch(node, tps, acks, wait_ms, max_records)
                                         for node, tps in by_node.items()), return_exceptions=True)
        out: list[ShareRecord[K, V]] = []
        for r in results:
            if isinstance(r, BaseException):
                if isinstance(r, (KafkaConnectionError, RequestTimedOutError)):
                    log.info("share group %s: ShareFetch failed: %s", self.group_id, r)
                    await asyncio.sleep(0.1)
                    continue
                raise r
            out.extend(r)
        return out

    async def _share_fetch(self, node: int, tps: set[TopicPartition],
                           all_acks: dict[TopicPartition, dict[int, int]], wait_ms: int,
                           max_records: int) -> list[ShareRecord[K, V]]:
        sess = self._sessions.setdefault(node, _Session())
        R = m.ShareFetchRequest
        acks = {tp: a for tp, a in all_acks.items() if self._node_of(tp) == node}
        send = set(tps) if sess.epoch == 0 else (tps - sess.partitions) | set(acks)
        forgotten = sess.partitions - tps if sess.epoch else set()
        send -= forgotten
        by_topic: dict[str, list[m.ShareFetchRequest.FetchPartition]] = {}
        for tp in sorted(send):
            by_topic.setdefault(tp.topic, []).append(R.FetchPartition(
                partition_index=tp.partition, partition_max_bytes=0,
                acknowledgement_batches=_ack_batches(R.AcknowledgementBatch, acks.get(tp, {}))))
        forgotten_by: dict[str, list[int]] = {}
        for tp in forgotten:
            forgotten_by.setdefault(tp.topic, []).append(tp.partition)
        req = R.new(group_id=self.group_id, member_id=self.member_id, share_session_epoch=sess.epoch,
                    max_wait_ms=wait_ms, min_bytes=self.config["fetch.min.bytes"],
                    max_bytes=self.config["fetch.max.bytes"], max_records=max_records, batch_size=max_records,
                    share_acquire_mode=0, is_renew_ack=False,
                    topics=[R.FetchTopic(topic_id=self._topic_id(t), partitions=ps)
                            for t, ps in by_topic.items()],
                    forgotten_topics_data=[R.ForgottenTopic(topic_id=self._topic_id(t), partitions=ps)
                                           for t, ps in forgotten_by.items()])
        sess.partitions = set(tps)
        sess.bump()
        resp = await self._cluster.send(node, _SHARE_FETCH, req, timeout_ms=wait_ms + 30000)
        if resp.error_code:
            code = resp.error_code
            if code in (Codes.SHARE_SESSION_NOT_FOUND, Codes.INVALID_SHARE_SESSION_EPOCH,
                        Codes.SHARE_SESSION_LIMIT_REACHED):
                self._sessions.pop(node, None)  # a new session next time
                log.info("share group %s: share session with node %d: %s", self.group_id, node,
                         error_name(code))
                return []
            if code in (Codes.UNKNOWN_MEMBER_ID, Codes.GROUP_ID_NOT_FOUND):
                self._sessions.pop(node, None)
                self._heartbeat_wake.set()
                return []
            raise broker_error(code, resp.error_message or error_name(code))
        if getattr(resp, "acquisition_lock_timeout_ms", 0) > 0:
            self._lock_timeout_ms = resp.acquisition_lock_timeout_ms
        out: list[ShareRecord[K, V]] = []
        for t in resp.responses:
            name = self._cluster.topic_ids.get(t.topic_id)
            if name is None:
                continue
            for p in t.partitions:
                if p.acknowledge_error_code:
                    why = p.acknowledge_error_message or error_name(p.acknowledge_error_code)
                    log.warning("share group %s: acknowledgements of %s-%d refused: %s", self.group_id, name,
                                p.partition_index, why)
                if p.error_code:
                    log.info("share group %s: ShareFetch %s-%d: %s", self.group_id, name, p.partition_index,
                             error_name(p.error_code))
                    if p.error_code in (Codes.NOT_LEADER_OR_FOLLOWER, Codes.UNKNOWN_TOPIC_OR_PARTITION,
                                        Codes.FENCED_LEADER_EPOCH):
                        self._cluster.request_update()
                    continue
                if p.acquired_records:
                    out.extend(self._records(TopicPartition(name, p.partition_index), p))
        return out

    def _topic_id(self, topic: str) -> uuid.UUID:
        """The id of a topic in the metadata (share requests name topics by id)."""
        tid = self._cluster.topics[topic].topic_id
        if tid is None:
            raise IllegalStateError(f"no topic id for {topic!r} in the metadata (Metadata v10+ has them)")
        return tid

    def _records(self, tp: TopicPartition, p: m.ShareFetchResponse.PartitionData) -> list[ShareRecord[K, V]]:
        counts: dict[int, int] = {}
        for a in p.acquired_records:
            for o in range(a.first_offset, a.last_offset + 1):
                counts[o] = a.delivery_count
        data = p.records
        out: list[ShareRecord[K, V]] = []
        if data:
            kd, vd = self._kd, self._vd
            for pos, h in split_batches(data, allow_truncated=True):
                if h.attributes & 0x20:
                    continue  # control batch: its offsets are gaps below
                last = h.base_offset + h.last_offset_delta
                if last < min(counts) or h.base_offset > max(counts):
                    continue
                for r in decode_batch_tuples(data, pos, h, ConsumerRecord, tp.topic, tp.partition,
                                             h.partition_leader_epoch):
                    dc = counts.pop(r[2], None)
                    if dc is None:
                        continue
                    key = r[5] if kd is None else kd(r[5])
                    value = r[6] if vd is None else vd(r[6])
                    out.append(ShareRecord(r[0], r[1], r[2], r[3], r[4], key, value, r[7], r[8], dc))
                if not counts:
                    break
        if counts:  # acquired offsets without a record (control records, compacted away): gaps
            gaps = self._acks.setdefault(tp, {})
            for o in counts:
                gaps[o] = _GAP
        if out:
            self._in_flight.setdefault(tp, set()).update(r.offset for r in out)
        return out

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ShareRecord[K, V]:
        """``async for record in consumer``: endless; implicit mode accepts each record at the next one's
        poll."""
        while not self._iter_buffer:
            if self._closed:
                raise StopAsyncIteration
            self._iter_buffer = list(reversed(await self.poll(1.0)))
        return self._iter_buffer.pop()

    @property
    def acquisition_lock_timeout_ms(self) -> int:
        """The broker's record lock duration from the last ShareFetch (-1 before one)."""
        return self._lock_timeout_ms
