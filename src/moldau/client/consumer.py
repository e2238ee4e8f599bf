"""The asyncio consumer: assign() or subscribe() (consumer groups), poll(), commits, seeks.

::

    async with AsyncConsumer("topic", bootstrap_servers="localhost:9092", group_id="g",
                             auto_offset_reset="earliest") as c:
        for record in await c.poll(timeout=1.0):
            ...
        async for record in c:      # endless iteration
            ...
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import time
from typing import Awaitable, Callable, Generic, Iterable, Mapping, Protocol, Self, TypeAlias

from ._typing import K, V
from .cluster import Cluster
from .config import ConfigInput, resolve_config
from .errors import ConsumerClosedError, IllegalStateError, KafkaTimeoutError
from .fetcher import EARLIEST, LATEST, Fetcher, PartitionState
from .group import GroupCoordinator, make_coordinator
from .subscription import SubscriptionState
from .transactions import ConsumerGroupMetadata
from .types import (
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    Offsets,
    PartitionLike,
    TopicPartition,
)

log = logging.getLogger(__name__)

__all__ = ["AsyncConsumer", "ConsumerRebalanceListener", "RebalanceListener"]


class ConsumerRebalanceListener:
    """Base class (optional: any object with these methods works; they may be coroutines)."""

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Awaitable[None] | None:
        pass

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Awaitable[None] | None:
        pass

    def on_partitions_lost(self, lost: set[TopicPartition]) -> Awaitable[None] | None:
        return self.on_partitions_revoked(lost)


class RebalanceListener(Protocol):
    """What ``subscribe(listener=...)`` takes: Kafka's ConsumerRebalanceListener (``on_partitions_lost``
    is optional and defaults to ``on_partitions_revoked``); the methods may be coroutines."""

    def on_partitions_revoked(self, revoked: set[TopicPartition], /) -> Awaitable[None] | None: ...

    def on_partitions_assigned(self, assigned: set[TopicPartition], /) -> Awaitable[None] | None: ...


# one listener method, and how the sync facade runs one on the application's thread
ListenerMethod: TypeAlias = Callable[[set[TopicPartition]], "Awaitable[None] | None"]
CallbackRunner: TypeAlias = Callable[[ListenerMethod, set[TopicPartition]], Awaitable[None]]


def _tp(x: object) -> TopicPartition:
    if isinstance(x, TopicPartition):
        return x
    if isinstance(x, tuple) and len(x) == 2:
        return TopicPartition(x[0], int(x[1]))
    topic = getattr(x, "topic", None)
    partition = getattr(x, "partition", None)
    if topic is not None and partition is not None:
        return TopicPartition(topic, int(partition))
    raise TypeError(f"expected a TopicPartition or (topic, partition), got {x!r}")


def split_topics_and_config(topics: tuple[str | ConfigInput, ...], config: ConfigInput | None
                            ) -> tuple[tuple[str, ...], ConfigInput | None]:
    """``Consumer(conf_dict)`` / ``Consumer("t1", "t2", config=...)``: a mapping among the positional
    arguments is the configuration (confluent-kafka's and kafka-python's habits both work)."""
    maps = [t for t in topics if isinstance(t, Mapping)]
    names = tuple(t for t in topics if not isinstance(t, Mapping))
    if not maps:
        return names, config
    if len(maps) > 1 or config is not None:
        raise TypeError("give the configuration once (a dict positional argument or config=...)")
    return names, maps[0]


class AsyncConsumer(Generic[K, V]):
    """``AsyncConsumer[K, V]``: K and V are what the configured key and value deserializers return (without
    type arguments: the stored bytes, or None)."""

    def __init__(
        self, *topics: str | ConfigInput, config: ConfigInput | None = None, **kwargs: object
    ) -> None:
        topics, config = split_topics_and_config(topics, config)
        self.config = resolve_config("consumer", config, kwargs)
        c = self.config
        self._cluster = Cluster(c, allow_auto_topic_creation=c["allow.auto.create.topics"])
        self._states: dict[TopicPartition, PartitionState[K, V]] = {}
        self._fetcher: Fetcher[K, V] = Fetcher(self)
        self._sub = SubscriptionState(self._cluster, c["exclude.internal.topics"])
        self._coordinator: GroupCoordinator | None = (
            make_coordinator(c, self._cluster, self._sub, _Rebalancer(self)) if c["group.id"] else None)
        self._listener: RebalanceListener | None = None
        self._user_assigned = False
        self._initial_topics = topics
        self._max_poll_records = c["max.poll.records"]
        self._auto_commit = bool(c["enable.auto.commit"] and c["group.id"])
        self._auto_commit_interval = c["auto.commit.interval.ms"] / 1000.0
        self._next_auto_commit = 0.0
        self._auto_commit_task: asyncio.Task | None = None
        self._started = False
        self._closed = False
        self._iter_buffer: list[ConsumerRecord[K, V]] = []
        self._iter_pos = 0
        # the sync facade runs listener callbacks on the caller's thread through this hook
        self._callback_runner: CallbackRunner | None = None

    # ------------------------------------------------------------------------------------------------
    # lifecycle

    async def start(self) -> None:
        if self._started:
            return
        await self._cluster.start()
        self._cluster.add_listener(self._on_metadata)
        self._fetcher.start()
        self._started = True
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval
        if self._initial_topics:
            try:
                self.subscribe(list(self._initial_topics))
            except BaseException:
                await self.close(autocommit=False)
                raise

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self, autocommit: bool = True) -> None:
        """Commit (when auto-committing), leave the group, stop fetching, close connections."""
        if self._closed:
            return
        self._closed = True
        if not self._started:
            return
        try:
            if self._coordinator is not None:
                if autocommit:
                    await self._maybe_auto_commit_sync()
                if self._sub.subscribed and self._sub.assignment:
                    try:
                        await self._revoke(set(self._sub.assignment))
                    except Exception:  # noqa: BLE001
                        log.exception("rebalance listener failed during close")
                self._coordinator._closing = True
                if self._sub.subscribed:
                    await self._coordinator.leave()
                await self._coordinator.close()
        finally:
            if self._auto_commit_task is not None:
                self._auto_commit_task.cancel()
            await self._fetcher.stop()
            await self._cluster.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("consumer is closed")
        if not self._started:
            raise IllegalStateError("consumer not started: use 'await consumer.start()' or 'async with'")

    # ------------------------------------------------------------------------------------------------
    # assignment and subscription

    def assign(self, partitions: Iterable[PartitionLike]) -> None:
        """Consume exactly these partitions (no group membership; commits still go to group.id if set)."""
        self._check_open()
        if self._sub.subscribed:
            raise IllegalStateError("assign() after subscribe(): call unsubscribe() first")
        tps = [_tp(p) for p in partitions]
        self._user_assigned = bool(tps)
        self._set_assignment(tps)
        self._cluster.set_topics({tp.topic for tp in tps})

    def _set_assignment(self, tps: Iterable[TopicPartition]) -> None:
        new: dict[TopicPartition, PartitionState[K, V]] = {}
        for tp in tps:
            st = self._states.get(tp)
            if st is None:
                st = PartitionState(tp)
                st.awaiting_committed = self._coordinator is not None
            new[tp] = st
        self._states.clear()
        self._states.update(new)
        self._fetcher.wakeup.set()

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    def subscribe(
        self,
        topics: Iterable[str] | str | None = None,
        pattern: str | re.Pattern[str] | None = None,
        listener: RebalanceListener | None = None,
    ) -> None:
        """Join group.id and consume the partitions the group assigns for these topics (or a regex)."""
        self._check_open()
        if self._coordinator is None:
            raise IllegalStateError("subscribe() needs group.id (use assign() without a group)")
        if self._user_assigned:
            raise IllegalStateError("subscribe() after assign(): call unsubscribe() first")
        if isinstance(topics, str):
            topics = [topics]
        if pattern is None and topics is not None and not isinstance(topics, (list, tuple, set, frozenset)):
            pattern = topics  # type: ignore[assignment]
            topics = None
        if pattern is not None:
            self._sub.subscribe_pattern(re.compile(pattern) if isinstance(pattern, str) else pattern)
            self._cluster.want_all_topics(True)
        else:
            names = set(topics or [])
            if not names:
                raise ValueError("subscribe() needs topics or a pattern")
            self._sub.subscribe_topics(names)
            self._cluster.set_topics(names)
        self._listener = listener
        self._coordinator.request_rejoin()

    def subscription(self) -> set[str]:
        return self._sub.subscribed_topics() if self._sub.subscribed else set()

    async def unsubscribe(self) -> None:
        self._check_open()
        if self._sub.subscribed and self._coordinator is not None:
            if self._sub.assignment:
                await self._maybe_auto_commit_sync()
                await self._revoke(set(self._sub.assignment))
            await self._coordinator.leave("the consumer unsubscribed")
        self._sub.unsubscribe()
        self._user_assigned = False
        self._cluster.want_all_topics(False)
        self._set_assignment([])

    def _on_metadata(self, cluster: Cluster) -> None:
        coord = self._coordinator
        if coord is None or not self._sub.subscribed:
            return
        if self._sub.pattern is not None and coord.generation >= 0:
            if self._sub.subscribed_topics() != set(coord.joined_topics):
                coord.request_rejoin()
                return
        coord.check_metadata()

    async def _call_listener(self, name: str, partitions: set[TopicPartition]) -> None:
        listener = self._listener
        if listener is None:
            return
        fn = getattr(listener, name, None)
        if fn is None:
            if name == "on_partitions_lost":
                fn = getattr(listener, "on_partitions_revoked", None)
            if fn is None:
                return
        try:
            if self._callback_runner is not None:
                await self._callback_runner(fn, partitions)
            else:
                r = fn(partitions)
                if inspect.isawaitable(r):
                    await r
        except Exception:  # noqa: BLE001 - Kafka logs listener errors and carries on
            log.exception("rebalance listener %s failed", name)

    async def _revoke(self, tps: set[TopicPartition]) -> None:
        await self._call_listener("on_partitions_revoked", tps)
        self._sub.assignment -= tps
        self._set_assignment([tp for tp in self._states if tp not in tps])

    async def _lose(self, tps: set[TopicPartition]) -> None:
        await self._call_listener("on_partitions_lost", tps)
        self._sub.assignment -= tps
        self._set_assignment([tp for tp in self._states if tp not in tps])

    async def _on_assignment(self, assigned: list[TopicPartition], cooperative: bool) -> None:
        new = set(assigned)
        owned = set(self._sub.assignment)
        revoked = owned - new
        added = new - owned
        if revoked:
            await self._call_listener("on_partitions_revoked", revoked)
            if cooperative and self._coordinator is not None:
                self._coordinator.request_rejoin()  # let the revoked partitions move in a follow-up round
        self._sub.assignment = new
        self._set_assignment(sorted(new))
        self._cluster.add_topics({tp.topic for tp in new})
        log.info("group %s: assigned %s", self.config["group.id"], sorted(new))
        await self._call_listener("on_partitions_assigned", added)

    async def _load_committed(self, states: list[PartitionState[K, V]]) -> None:
        if self._coordinator is None:
            for st in states:
                st.awaiting_committed = False
            return
        epochs = {st.tp: st.epoch for st in states}
        offsets = await self._coordinator.fetch_committed([st.tp for st in states])
        for st in states:
            if self._states.get(st.tp) is not st or st.epoch != epochs[st.tp] or st.position is not None:
                continue
            om = offsets.get(st.tp)
            st.awaiting_committed = False
            if om is not None and om.offset >= 0:
                st.seek(om.offset)

    # ------------------------------------------------------------------------------------------------
    # polling

    async def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list[ConsumerRecord[K, V]]:
        """Records fetched so far (up to max.poll.records), waiting up to ``timeout`` seconds for some."""
        self._check_open()
        if not self._states and not self._sub.subscribed:
            raise IllegalStateError("consumer has no assignment: call subscribe() or assign() first")
        now = time.monotonic()
        deadline = now + max(timeout, 0.0)
        limit = max_records or self._max_poll_records
        coord = self._coordinator
        if coord is not None:
            coord.last_poll = now
            if self._auto_commit and now >= self._next_auto_commit:
                self._auto_commit_now()
        fetcher = self._fetcher
        while True:
            if coord is not None and self._sub.subscribed:
                await coord.ensure_active(deadline)
            records = fetcher.drain(limit)
            if records:
                return records
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return records
            fetcher.data_ready.clear()
            if fetcher.has_data():
                continue
            waits = [asyncio.ensure_future(fetcher.data_ready.wait())]
            if coord is not None and self._sub.subscribed:
                waits.append(asyncio.ensure_future(coord.rejoin_event.wait()))
            try:
                await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ConsumerRecord[K, V]:
        while self._iter_pos >= len(self._iter_buffer):
            if self._closed:
                raise StopAsyncIteration
            self._iter_buffer = await self.poll(timeout=1.0)
            self._iter_pos = 0
        r = self._iter_buffer[self._iter_pos]
        self._iter_pos += 1
        return r

    # ------------------------------------------------------------------------------------------------
    # offsets

    def _consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(st.position, "", -1)
                for tp, st in self._states.items() if st.position is not None}

    def _auto_commit_now(self) -> None:
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval
        if self._auto_commit_task is not None and not self._auto_commit_task.done():
            return
        offsets = self._consumed_offsets()
        if offsets:
            self._auto_commit_task = asyncio.get_running_loop().create_task(self._commit_logged(offsets))

    async def _commit_logged(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        try:
            await self.commit(offsets)
        except Exception as exc:  # noqa: BLE001
            log.warning("auto-commit of %s failed: %s", self.config["group.id"], exc)

    async def _maybe_auto_commit_sync(self) -> None:
        if not self._auto_commit:
            return
        offsets = self._consumed_offsets()
        if offsets:
            try:
                await self.commit(offsets)
            except Exception as exc:  # noqa: BLE001
                log.warning("auto-commit of %s failed: %s", self.config["group.id"], exc)

    async def commit(self, offsets: Offsets | None = None, timeout: float | None = None) -> None:
        """Commit ``offsets`` ({tp: offset | OffsetAndMetadata}) or the positions of every partition."""
        self._check_open_or_closing()
        if self._coordinator is None:
            raise IllegalStateError("commit() needs group.id")
        if offsets is None:
            offs = self._consumed_offsets()
        else:
            offs = {_tp(k): (v if isinstance(v, OffsetAndMetadata) else OffsetAndMetadata(int(v)))
                    for k, v in offsets.items()}
        await self._coordinator.commit(offs, None if timeout is None else int(timeout * 1000))

    def commit_async(
        self, offsets: Offsets | None = None,
        callback: Callable[[dict[TopicPartition, int | OffsetAndMetadata], BaseException | None], object]
        | None = None,
    ) -> asyncio.Future[None]:
        """Commit in the background; ``callback(offsets, error)`` when done. Returns the task."""
        snapshot: dict[TopicPartition, int | OffsetAndMetadata] = dict(
            self._consumed_offsets() if offsets is None else offsets)

        async def go() -> None:
            err: BaseException | None = None
            try:
                await self.commit(snapshot)
            except Exception as exc:  # noqa: BLE001
                err = exc
                if callback is None:
                    log.warning("commit_async failed: %s", exc)
            if callback is not None:
                callback(snapshot, err)
            if err is not None:
                raise err  # the returned task/future carries the error too

        task = asyncio.get_running_loop().create_task(go())
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)
        return task

    def _check_open_or_closing(self) -> None:
        if not self._started:
            raise IllegalStateError("consumer not started")

    async def committed(self, partitions: Iterable[PartitionLike] | TopicPartition,
                        timeout: float | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        self._check_open()
        if self._coordinator is None:
            raise IllegalStateError("committed() needs group.id")
        if isinstance(partitions, TopicPartition):
            partitions = [partitions]
        return await self._coordinator.fetch_committed([_tp(p) for p in partitions],
                                                       None if timeout is None else int(timeout * 1000))

    def _state(self, tp: object) -> PartitionState[K, V]:
        tp = _tp(tp)
        st = self._states.get(tp)
        if st is None:
            raise IllegalStateError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        return st

    async def position(self, tp: PartitionLike, timeout: float | None = None) -> int:
        """Offset of the next record poll() returns for ``tp`` (waits for a pending reset)."""
        self._check_open()
        st = self._state(tp)
        t = timeout if timeout is not None else self.config["default.api.timeout.ms"] / 1000.0
        deadline = time.monotonic() + t
        while st.position is None:
            if st.error is not None:
                err, st.error = st.error, None
                raise err
            self._fetcher.wakeup.set()
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"position of {st.topic}-{st.partition} not known within {t} s")
            await asyncio.sleep(0.005)
            if self._states.get(st.tp) is not st:
                raise IllegalStateError(f"{st.topic}-{st.partition} was unassigned")
        return st.position

    def seek(self, tp: PartitionLike, offset: int | OffsetAndMetadata) -> None:
        self._check_open()
        if isinstance(offset, OffsetAndMetadata):
            offset = offset.offset
        if offset < 0:
            raise ValueError(f"seek offset must be >= 0, got {offset}")
        self._state(tp).seek(int(offset))
        self._fetcher.wakeup.set()

    def seek_to_beginning(self, *partitions: PartitionLike | Iterable[PartitionLike]) -> None:
        self._check_open()
        for st in self._states.values() if not partitions else [self._state(p) for p in _flatten(partitions)]:
            st.request_reset(EARLIEST)
            st.awaiting_committed = False
        self._fetcher.wakeup.set()

    def seek_to_end(self, *partitions: PartitionLike | Iterable[PartitionLike]) -> None:
        self._check_open()
        for st in self._states.values() if not partitions else [self._state(p) for p in _flatten(partitions)]:
            st.request_reset(LATEST)
            st.awaiting_committed = False
        self._fetcher.wakeup.set()

    def pause(self, *partitions: PartitionLike | Iterable[PartitionLike]) -> None:
        for p in _flatten(partitions):
            self._state(p).paused = True

    def resume(self, *partitions: PartitionLike | Iterable[PartitionLike]) -> None:
        for p in _flatten(partitions):
            self._state(p).paused = False
        self._fetcher.wakeup.set()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._states.items() if st.paused}

    def highwater(self, tp: PartitionLike) -> int | None:
        st = self._states.get(_tp(tp))
        return None if st is None or st.high_watermark < 0 else st.high_watermark

    def last_stable_offset(self, tp: PartitionLike) -> int | None:
        st = self._states.get(_tp(tp))
        return None if st is None or st.last_stable_offset < 0 else st.last_stable_offset

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The earliest offset whose timestamp is >= the given one, per partition (None when none is)."""
        self._check_open()
        query = {_tp(k): int(v) for k, v in timestamps.items()}
        for tp, ts in query.items():
            if ts < 0:
                raise ValueError(f"timestamp for {tp} must be >= 0")
        await self._ensure_metadata({tp.topic for tp in query}, timeout)
        res = await self._fetcher.list_offsets(query, None if timeout is None else int(timeout * 1000))
        return {tp: (OffsetAndTimestamp(res[tp][0], res[tp][1], res[tp][2]) if tp in res and res[tp][0] >= 0
                     else None) for tp in query}

    async def beginning_offsets(
        self, partitions: Iterable[PartitionLike], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        return await self._list(partitions, EARLIEST, timeout)

    async def end_offsets(
        self, partitions: Iterable[PartitionLike], timeout: float | None = None
    ) -> dict[TopicPartition, int]:
        return await self._list(partitions, LATEST, timeout)

    async def _list(
        self, partitions: Iterable[PartitionLike], ts: int, timeout: float | None
    ) -> dict[TopicPartition, int]:
        self._check_open()
        tps = [_tp(p) for p in partitions]
        await self._ensure_metadata({tp.topic for tp in tps}, timeout)
        res = await self._fetcher.list_offsets(
            {tp: ts for tp in tps}, None if timeout is None else int(timeout * 1000)
        )
        return {tp: res[tp][0] for tp in tps}

    async def _ensure_metadata(self, topics: set[str], timeout: float | None) -> None:
        ms = int((timeout if timeout is not None else self.config["default.api.timeout.ms"] / 1000.0) * 1000)
        for t in topics:
            await self._cluster.wait_for_topic(t, ms)

    async def topics(self, timeout: float | None = None) -> dict[str, list[int]]:
        """All topics (excluding internal ones when exclude.internal.topics) and their partitions."""
        self._check_open()
        was_all = self._cluster._all_topics
        self._cluster.want_all_topics(True)
        try:
            await self._cluster.refresh(timeout_ms=None if timeout is None else int(timeout * 1000))
        finally:
            if not was_all:
                self._cluster.want_all_topics(False)
        exclude = self.config["exclude.internal.topics"]
        return {t: sorted(md.partitions) for t, md in self._cluster.topics.items()
                if not (exclude and md.is_internal)}

    async def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        self._check_open()
        ms = int((timeout if timeout is not None else self.config["default.api.timeout.ms"] / 1000.0) * 1000)
        md = await self._cluster.wait_for_topic(topic, ms)
        return sorted(md.partitions)

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """The group id, generation (member epoch under group.protocol=consumer), member id and group
        instance id of this member now: what a transactional producer's ``send_offsets_to_transaction``
        sends with the offsets so the coordinator can fence a zombie (KIP-447). Outside a group (assign()
        with group.id) generation is -1 and the member id empty."""
        coord = self._coordinator
        if coord is None:
            raise IllegalStateError("consumer_group_metadata() needs group.id")
        return ConsumerGroupMetadata(coord.group_id, coord.generation, coord.member_id or "",
                                     coord.group_instance_id)

    @property
    def member_id(self) -> str | None:
        return self._coordinator.member_id if self._coordinator else None

    @property
    def generation(self) -> int:
        return self._coordinator.generation if self._coordinator else -1


def _flatten(parts: tuple[object, ...]) -> list[object]:
    """The partitions of ``seek_to_beginning(*partitions)`` and the like: each argument a partition or a
    collection of them (checked by ``_tp``)."""
    out: list[object] = []
    for p in parts:
        if isinstance(p, (list, set, tuple, frozenset)) and not isinstance(p, TopicPartition) and not (
                isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str)):
            out.extend(p)
        else:
            out.append(p)
    return out


class _Rebalancer(Generic[K, V]):
    """The consumer's side of group membership (``RebalanceHandler``): assignment changes go through here."""

    __slots__ = ("_consumer",)

    def __init__(self, consumer: AsyncConsumer[K, V]) -> None:
        self._consumer = consumer

    async def assign(self, assigned: list[TopicPartition], cooperative: bool) -> None:
        await self._consumer._on_assignment(assigned, cooperative)

    async def revoke(self, partitions: set[TopicPartition], commit: bool) -> None:
        if commit:
            await self._consumer._maybe_auto_commit_sync()
        await self._consumer._revoke(partitions)

    async def lose(self, partitions: set[TopicPartition]) -> None:
        await self._consumer._lose(partitions)
