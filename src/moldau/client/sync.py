"""Synchronous facade: each client runs its asyncio core on a private event loop in a background thread.

Blocking methods submit a coroutine to that loop and wait for it; futures handed out are
``concurrent.futures.Future`` objects. Works from plain scripts and from any thread (not from the client's
own loop thread, e.g. inside a delivery callback: such calls raise instead of deadlocking).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import inspect
import logging
import queue
import threading
from typing import (
    TYPE_CHECKING,
    Callable,
    Coroutine,
    Generic,
    Iterable,
    Iterator,
    Mapping,
    Protocol,
    Self,
    TypeVar,
    TypeVarTuple,
    Unpack,
)

from ._typing import PK, PV, K, V
from .arrow import DEFAULT_KEY
from .errors import IllegalStateError
from .futures import BulkResult, RecordFuture
from .types import RecordMetadata

if TYPE_CHECKING:
    import re

    import pyarrow

    from ._typing import Headers
    from .admin import AsyncAdmin
    from .arrow import ArrowKey
    from .config import ConfigInput
    from .consumer import AsyncConsumer, ListenerMethod, RebalanceListener
    from .producer import AsyncProducer
    from .share_admin import ShareGroupDescription, ShareOffset
    from .share_consumer import AcknowledgeType, AsyncShareConsumer, ShareRecord
    from .transactions import ConsumerGroupMetadata, GroupRef
    from .types import (
        AlterConfigOp,
        ClusterDescription,
        ConfigEntry,
        ConfigResource,
        ConsumerRecord,
        GroupDescription,
        GroupListing,
        ListOffsetsResult,
        NewPartitions,
        NewTopic,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        Offsets,
        PartitionLike,
        TopicDescription,
        TopicPartition,
    )

log = logging.getLogger(__name__)

__all__ = ["LoopThread", "Producer", "Consumer", "Admin", "ShareConsumer"]

T = TypeVar("T")
_Ts = TypeVarTuple("_Ts")


class _Startable(Protocol):
    async def start(self) -> None: ...


_C = TypeVar("_C", bound=_Startable)


def _new_loop(use_uvloop: bool) -> asyncio.AbstractEventLoop:
    if use_uvloop:
        try:
            import uvloop

            return uvloop.new_event_loop()
        except ImportError:  # pragma: no cover - optional
            pass
    return asyncio.new_event_loop()


class LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self, name: str, use_uvloop: bool = True) -> None:
        self.loop = _new_loop(use_uvloop)
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()
        self._ready.wait()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                pending = asyncio.all_tasks(self.loop)
                for t in pending:
                    t.cancel()
                if pending:
                    self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            finally:
                self.loop.close()

    @property
    def in_loop_thread(self) -> bool:
        return threading.get_ident() == self.thread.ident

    def submit(self, coro: Coroutine[object, None, T]) -> cf.Future[T]:
        if self.loop.is_closed() or not self.thread.is_alive():
            coro.close()
            raise IllegalStateError("client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[object, None, T], timeout: float | None = None) -> T:
        if self.in_loop_thread:
            coro.close()
            raise IllegalStateError("blocking client call from the client's own event-loop thread "
                                    "(e.g. inside a callback) would deadlock")
        fut = self.submit(coro)
        try:
            return fut.result(timeout)
        except cf.TimeoutError:
            fut.cancel()
            raise

    def call_soon(self, fn: Callable[[Unpack[_Ts]], object], *args: Unpack[_Ts]) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def stop(self) -> None:
        if self.thread.is_alive():
            try:
                self.loop.call_soon_threadsafe(self.loop.stop)
            except RuntimeError:  # loop already closed
                return
            if not self.in_loop_thread:
                self.thread.join(10)


def _use_uvloop(config: ConfigInput | None, kwargs: ConfigInput) -> bool:
    for src in (kwargs, config or {}):
        for k in ("use_uvloop", "use.uvloop"):
            if k in src:
                v = src[k]
                return v if isinstance(v, bool) else str(v).lower() in ("1", "true", "yes")
    return True


class _SyncBase:
    _name = "moldau-client"

    def _start_loop(self, config: ConfigInput | None, kwargs: ConfigInput) -> None:
        self._lt = LoopThread(self._name, _use_uvloop(config, kwargs))
        self._closed = False

    def _run(self, coro: Coroutine[object, None, T], timeout: float | None = None) -> T:
        return self._lt.run(coro, timeout)

    def _build(self, factory: Callable[[], _C]) -> _C:
        async def create() -> _C:
            obj = factory()
            await obj.start()
            return obj

        try:
            return self._run(create())
        except BaseException:
            self._lt.stop()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, timeout: float | None = None) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class Producer(_SyncBase, Generic[PK, PV]):
    """Blocking producer. ``send()`` returns a ``concurrent.futures.Future`` of RecordMetadata.

    ::

        with Producer(bootstrap_servers="localhost:9092") as p:
            p.send("topic", b"value", key=b"k").result()
            p.flush()
    """

    _name = "moldau-producer"

    def __init__(self, config: ConfigInput | None = None, **kwargs: object) -> None:
        from .producer import AsyncProducer

        self._start_loop(config, kwargs)
        self._p: AsyncProducer[PK, PV] = self._build(lambda: AsyncProducer(config, **kwargs))
        self.config = self._p.config
        # the hot path: send() is the core's send_blocking itself (no extra call per record)
        self.send = self._p.send_blocking  # type: ignore[method-assign]

    def send(self, topic: str, value: PV | None = None, key: PK | None = None, partition: int | None = None,
             timestamp: int | None = None, headers: Headers | None = None) -> RecordFuture:
        """Queue a record (blocks up to max.block.ms for metadata or buffer space; from the client's own
        loop thread, e.g. a delivery callback, it raises instead of blocking)."""
        return self._p.send_blocking(topic, value, key, partition, timestamp, headers)

    def send_many(self, topic: str, records: Iterable[object]) -> BulkResult:
        """Queue every record of ``records``: values (bytes, str or None), ``(key, value)`` pairs,
        ``(key, value, headers, timestamp, partition)`` tuples or dicts with those names. Returns a
        BulkResult: ``result(timeout)`` waits until all are acknowledged and returns their number (or raises
        the first error). No future per record; use send() for those."""
        return self._p.send_many_blocking(topic, records)

    def send_arrow(self, topic: str, data: pyarrow.Table | pyarrow.RecordBatch, *,
                   key: ArrowKey = DEFAULT_KEY, value: str | None = "value", headers: str | None = None,
                   timestamp: str | None = None,
                   partition: str | None = None) -> BulkResult:
        """Queue every row of a pyarrow Table or RecordBatch (columns named by key, value, headers,
        timestamp, partition; see docs/client.md). Returns a BulkResult as send_many. Needs pyarrow."""
        return self._p.send_arrow_blocking(topic, data, key=key, value=value, headers=headers,
                                           timestamp=timestamp, partition=partition)

    def produce(self, topic: str, value: PV | None = None, key: PK | None = None,
                partition: int | None = None, timestamp: int | None = None, headers: Headers | None = None,
                on_delivery: Callable[[BaseException | None, RecordMetadata | None], object] | None = None
                ) -> RecordFuture:
        """send() with an optional delivery callback ``on_delivery(error, metadata)`` (run on the
        client's thread)."""
        fut = self.send(topic, value, key, partition, timestamp, headers)
        if on_delivery is not None:
            def done(f: RecordFuture) -> None:
                exc = f.exception()
                on_delivery(exc, None if exc else f.result())

            fut.add_done_callback(done)
        return fut

    def send_and_wait(self, topic: str, value: PV | None = None, key: PK | None = None,
                      partition: int | None = None, timestamp: int | None = None,
                      headers: Headers | None = None,
                      timeout: float | None = None) -> RecordMetadata:
        return self.send(topic, value, key, partition, timestamp, headers).result(timeout)

    def flush(self, timeout: float | None = None) -> None:
        self._run(self._p.flush(timeout))

    def partitions_for(self, topic: str) -> list[int]:
        return self._run(self._p.partitions_for(topic))

    # transactions (transactional.id; see moldau.client.transactions)
    def init_transactions(self, timeout: float | None = None) -> None:
        self._run(self._p.init_transactions(timeout))

    def begin_transaction(self) -> None:
        async def begin() -> None:  # on the loop, like every other state change of the transaction
            self._p.begin_transaction()

        self._run(begin())

    def send_offsets_to_transaction(self, offsets: Offsets, group: GroupRef,
                                    timeout: float | None = None) -> None:
        """``group``: a group id, a ConsumerGroupMetadata, or a moldau Consumer (its group id, generation
        and member id)."""
        self._run(self._p.send_offsets_to_transaction(offsets, group, timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._run(self._p.commit_transaction(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._run(self._p.abort_transaction(timeout))

    @property
    def producer_id(self) -> tuple[int, int]:
        return self._p.producer_id

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._run(self._p.close(timeout))
        finally:
            self._lt.stop()


class _CallbackBridge:
    """Runs rebalance-listener callbacks on the thread blocked in a consumer call (like Java's poll())."""

    _DONE = object()

    def __init__(self, lt: LoopThread) -> None:
        self.lt = lt
        # (listener method, partitions, future) to run, or (_DONE, token, None) when a call ended
        self.q: queue.SimpleQueue[tuple[object, object, asyncio.Future[None] | None]] = queue.SimpleQueue()
        # calls that finished while another (nested) call was reading the queue
        self.finished: set[object] = set()

    async def runner(self, fn: ListenerMethod, arg: set[TopicPartition]) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.q.put((fn, arg, fut))
        await fut

    def run(self, coro: Coroutine[object, None, T], timeout: float | None = None) -> T:
        if self.lt.in_loop_thread:
            coro.close()
            raise IllegalStateError("blocking consumer call from the consumer's own event-loop thread")
        cfut = self.lt.submit(coro)
        token = object()
        cfut.add_done_callback(lambda _f: self.q.put((self._DONE, token, None)))
        while True:
            if token in self.finished:
                self.finished.discard(token)
                return cfut.result(timeout=0)
            fn, arg, fut = self.q.get()
            if fn is self._DONE:
                if arg is token:
                    return cfut.result(timeout=0)
                # the call of an outer frame (e.g. the poll() whose listener callback made this call) ended
                self.finished.add(arg)
                continue
            err: BaseException | None = None
            if TYPE_CHECKING:  # an item put by runner()
                assert callable(fn) and fut is not None
            try:
                fn(arg)
            except BaseException as exc:  # noqa: BLE001 - reported by the listener wrapper
                err = exc
            self.lt.loop.call_soon_threadsafe(_resolve, fut, err)


def _resolve(fut: asyncio.Future[None], err: BaseException | None) -> None:
    if fut.done():
        return
    if err is not None:
        fut.set_exception(err)
    else:
        fut.set_result(None)


class Consumer(_SyncBase, Generic[K, V]):
    """Blocking consumer.

    ::

        with Consumer("topic", bootstrap_servers="localhost:9092", group_id="g",
                      auto_offset_reset="earliest") as c:
            for record in c.poll(timeout=1.0):
                ...
            for record in c:      # endless iteration
                ...

    Rebalance-listener callbacks run on the thread that called poll() (or close()/unsubscribe()), so they
    may call blocking consumer methods such as commit().
    """

    _name = "moldau-consumer"

    def __init__(
        self, *topics: str | ConfigInput, config: ConfigInput | None = None, **kwargs: object
    ) -> None:
        from .consumer import AsyncConsumer, split_topics_and_config

        topics, config = split_topics_and_config(topics, config)
        self._start_loop(config, kwargs)
        self._bridge = _CallbackBridge(self._lt)

        def make() -> AsyncConsumer[K, V]:
            c: AsyncConsumer[K, V] = AsyncConsumer(config=config, **kwargs)
            c._callback_runner = self._bridge.runner
            return c

        self._c: AsyncConsumer[K, V] = self._build(make)
        self.config = self._c.config
        self._iter: list[ConsumerRecord[K, V]] = []
        self._iter_pos = 0
        if topics:
            try:
                self.subscribe(list(topics))
            except BaseException:
                self.close(autocommit=False)
                raise

    def _call(self, coro: Coroutine[object, None, T]) -> T:
        return self._bridge.run(coro)

    def _sync(self, fn: Callable[[Unpack[_Ts]], T], *args: Unpack[_Ts]) -> T:
        async def go() -> T:
            return fn(*args)

        return self._run(go())

    # assignment
    def assign(self, partitions: Iterable[PartitionLike]) -> None:
        self._sync(self._c.assign, list(partitions))

    def assignment(self) -> set[TopicPartition]:
        return self._sync(self._c.assignment)

    def subscribe(self, topics: Iterable[str] | str | None = None,
                  pattern: str | re.Pattern[str] | None = None,
                  listener: RebalanceListener | None = None) -> None:
        self._sync(self._c.subscribe, topics, pattern, listener)

    def subscription(self) -> set[str]:
        return self._sync(self._c.subscription)

    def unsubscribe(self) -> None:
        self._call(self._c.unsubscribe())

    # records
    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list[ConsumerRecord[K, V]]:
        return self._call(self._c.poll(timeout, max_records))

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> ConsumerRecord[K, V]:
        while self._iter_pos >= len(self._iter):
            if self._closed:
                raise StopIteration
            self._iter = self.poll(timeout=1.0)
            self._iter_pos = 0
        r = self._iter[self._iter_pos]
        self._iter_pos += 1
        return r

    # offsets
    def commit(self, offsets: Offsets | None = None, timeout: float | None = None) -> None:
        self._call(self._c.commit(offsets, timeout))

    def commit_async(
        self, offsets: Offsets | None = None,
        callback: Callable[[dict[TopicPartition, int | OffsetAndMetadata], BaseException | None], object]
        | None = None,
    ) -> cf.Future[None]:
        """Commit in the background; returns a concurrent.futures.Future (callback runs on the client's
        thread)."""
        async def go() -> None:
            return await self._c.commit_async(offsets, callback)

        return self._lt.submit(go())

    def committed(self, partitions: Iterable[PartitionLike] | TopicPartition, timeout: float | None = None
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return self._call(self._c.committed(partitions, timeout))

    def position(self, tp: PartitionLike, timeout: float | None = None) -> int:
        return self._call(self._c.position(tp, timeout))

    def seek(self, tp: PartitionLike, offset: int) -> None:
        self._sync(self._c.seek, tp, offset)

    def seek_to_beginning(self, *partitions: PartitionLike | Iterable[PartitionLike]) -> None:
        self._sync(self._c.seek_to_beginning, *partitions)

    def seek_to_end(self, *partitions: PartitionLike | Iterable[PartitionLike]) -> None:
        self._sync(self._c.seek_to_end, *partitions)

    def pause(self, *partitions: PartitionLike | Iterable[PartitionLike]) -> None:
        self._sync(self._c.pause, *partitions)

    def resume(self, *partitions: PartitionLike | Iterable[PartitionLike]) -> None:
        self._sync(self._c.resume, *partitions)

    def paused(self) -> set[TopicPartition]:
        return self._sync(self._c.paused)

    def highwater(self, tp: PartitionLike) -> int | None:
        return self._c.highwater(tp)

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int], timeout: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return self._call(self._c.offsets_for_times(timestamps, timeout))

    def beginning_offsets(self, partitions: Iterable[PartitionLike], timeout: float | None = None
                          ) -> dict[TopicPartition, int]:
        return self._call(self._c.beginning_offsets(partitions, timeout))

    def end_offsets(self, partitions: Iterable[PartitionLike], timeout: float | None = None
                    ) -> dict[TopicPartition, int]:
        return self._call(self._c.end_offsets(partitions, timeout))

    def topics(self, timeout: float | None = None) -> dict[str, list[int]]:
        return self._call(self._c.topics(timeout))

    def partitions_for(self, topic: str, timeout: float | None = None) -> list[int]:
        return self._call(self._c.partitions_for(topic, timeout))

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        """A snapshot of (group id, generation, member id, group instance id): a ``ConsumerGroupMetadata``
        for a transactional producer's ``send_offsets_to_transaction``. Does not block."""
        return self._c.consumer_group_metadata()

    @property
    def member_id(self) -> str | None:
        return self._c.member_id

    @property
    def generation(self) -> int:
        return self._c.generation

    def close(self, autocommit: bool = True) -> None:  # type: ignore[override]
        if self._closed:
            return
        self._closed = True
        try:
            self._call(self._c.close(autocommit))
        finally:
            self._lt.stop()


class Admin(_SyncBase):
    """Blocking admin client: every coroutine method of ``AsyncAdmin`` as a blocking method.

    ::

        with Admin(bootstrap_servers="localhost:9092") as a:
            a.create_topics([NewTopic("t", num_partitions=3)])
            a.list_topics()
    """

    _name = "moldau-admin"

    def __init__(self, config: ConfigInput | None = None, **kwargs: object) -> None:
        from .admin import AsyncAdmin

        self._start_loop(config, kwargs)
        self._a: AsyncAdmin = self._build(lambda: AsyncAdmin(config, **kwargs))
        self.config = self._a.config

    if TYPE_CHECKING:  # AsyncAdmin's coroutine methods, blocking (__getattr__ makes them)
        def alter_consumer_group_offsets(
            self,
            group_id: str,
            offsets: Mapping[TopicPartition, int | OffsetAndMetadata],
            *,
            timeout: float | None = None,
            raise_errors: bool = True,
        ) -> dict[TopicPartition, BaseException | None]: ...

        def alter_partition_reassignments(
            self,
            targets: Mapping[TopicPartition, list[int] | None],
            *,
            timeout: float | None = None,
            raise_errors: bool = True,
        ) -> dict[TopicPartition, BaseException | None]: ...

        def alter_share_group_offsets(
            self,
            group_id: str,
            offsets: Mapping[TopicPartition, int],
            *,
            timeout: float | None = None,
            raise_errors: bool = True,
        ) -> dict[TopicPartition, BaseException | None]: ...

        def create_partitions(
            self,
            new: Mapping[str, NewPartitions | int],
            *,
            timeout: float | None = None,
            validate_only: bool = False,
            raise_errors: bool = True,
        ) -> dict[str, BaseException | None]: ...

        def create_topics(
            self,
            topics: Iterable[NewTopic | str],
            *,
            timeout: float | None = None,
            validate_only: bool = False,
            raise_errors: bool = True,
        ) -> dict[str, BaseException | None]: ...

        def delete_consumer_group_offsets(
            self,
            group_id: str,
            partitions: Iterable[TopicPartition],
            *,
            timeout: float | None = None,
            raise_errors: bool = True,
        ) -> dict[TopicPartition, BaseException | None]: ...

        def delete_consumer_groups(
            self, group_ids: Iterable[str], *, timeout: float | None = None, raise_errors: bool = True
        ) -> dict[str, BaseException | None]: ...

        def delete_records(
            self, before: Mapping[TopicPartition, int], *, timeout: float | None = None
        ) -> dict[TopicPartition, int]: ...

        def delete_share_group_offsets(
            self,
            group_id: str,
            topics: Iterable[str],
            *,
            timeout: float | None = None,
            raise_errors: bool = True,
        ) -> dict[str, BaseException | None]: ...

        def delete_share_groups(
            self, group_ids: Iterable[str], *, timeout: float | None = None, raise_errors: bool = True
        ) -> dict[str, BaseException | None]: ...

        def delete_topics(
            self, names: Iterable[str], *, timeout: float | None = None, raise_errors: bool = True
        ) -> dict[str, BaseException | None]: ...

        def describe_cluster(self) -> ClusterDescription: ...

        def describe_configs(
            self,
            resources: Iterable[ConfigResource],
            *,
            include_synonyms: bool = False,
            include_documentation: bool = False,
        ) -> dict[ConfigResource, dict[str, ConfigEntry]]: ...

        def describe_consumer_groups(
            self, group_ids: Iterable[str], timeout: float | None = None
        ) -> dict[str, GroupDescription]: ...

        def describe_share_groups(
            self, group_ids: Iterable[str], timeout: float | None = None
        ) -> dict[str, ShareGroupDescription]: ...

        def describe_topics(self, names: Iterable[str]) -> dict[str, TopicDescription]: ...

        def incremental_alter_configs(
            self,
            changes: Mapping[ConfigResource, Iterable[AlterConfigOp]],
            *,
            validate_only: bool = False,
            raise_errors: bool = True,
        ) -> dict[ConfigResource, BaseException | None]: ...

        def list_consumer_group_offsets(
            self,
            group_id: str,
            partitions: Iterable[TopicPartition] | None = None,
            timeout: float | None = None,
        ) -> dict[TopicPartition, OffsetAndMetadata]: ...

        def list_consumer_groups(
            self, states: Iterable[str] | None = None, types: Iterable[str] | None = None
        ) -> list[GroupListing]: ...

        def list_offsets(
            self,
            specs: Mapping[TopicPartition, str | int],
            *,
            isolation_level: str = 'read_uncommitted',
            timeout: float | None = None,
        ) -> dict[TopicPartition, ListOffsetsResult]: ...

        def list_partition_reassignments(
            self, partitions: Iterable[TopicPartition] | None = None, *, timeout: float | None = None
        ) -> dict[TopicPartition, dict[str, list[int]]]: ...

        def list_share_group_offsets(
            self, group_id: str, topics: Iterable[str] | None = None, timeout: float | None = None
        ) -> dict[TopicPartition, ShareOffset]: ...

        def list_share_groups(self, states: Iterable[str] | None = None) -> list[GroupListing]: ...

        def list_topics(self, include_internal: bool = False) -> dict[str, int]: ...

    def __getattr__(self, name: str) -> object:
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if inspect.iscoroutinefunction(attr):
            def call(*args: object, **kw: object) -> object:
                return self._run(attr(*args, **kw))

            call.__name__ = name
            call.__doc__ = attr.__doc__
            return call
        return attr

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {n for n in dir(self._a) if not n.startswith("_")})

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._run(self._a.close(), timeout)
        finally:
            self._lt.stop()



class ShareConsumer(_SyncBase, Generic[K, V]):
    """Blocking share-group consumer (KIP-932); see ``moldau.client.share_consumer``.

    ::

        with ShareConsumer("jobs", bootstrap_servers="localhost:9092", group_id="workers") as c:
            for record in c.poll(timeout=1.0):
                ...                      # implicit mode: accepted at the next poll / commit_sync
    """

    _name = "moldau-share-consumer"

    def __init__(
        self, *topics: str | ConfigInput, config: ConfigInput | None = None, **kwargs: object
    ) -> None:
        from .consumer import split_topics_and_config
        from .share_consumer import AsyncShareConsumer

        topics, config = split_topics_and_config(topics, config)
        self._start_loop(config, kwargs)
        self._c: AsyncShareConsumer[K, V] = self._build(
            lambda: AsyncShareConsumer(*topics, config=config, **kwargs))

    def subscribe(self, topics: list[str]) -> None:
        self._run(self._async(self._c.subscribe, topics))

    def unsubscribe(self) -> None:
        self.subscribe([])

    def subscription(self) -> set[str]:
        return self._c.subscription()

    @property
    def assignment(self) -> set[TopicPartition]:
        return set(self._c.assignment)

    @property
    def member_id(self) -> str:
        return self._c.member_id

    @staticmethod
    async def _async(fn: Callable[[Unpack[_Ts]], T], *args: Unpack[_Ts]) -> T:
        return fn(*args)

    def poll(self, timeout: float = 0.0, max_records: int | None = None) -> list[ShareRecord[K, V]]:
        return self._run(self._c.poll(timeout, max_records))

    def acknowledge(self, record: ShareRecord[K, V], type: AcknowledgeType | int = 1) -> None:
        self._run(self._async(self._c.acknowledge, record, type))

    def __iter__(self) -> Iterator[ShareRecord[K, V]]:
        """Endless iteration over records (polls of 1 s); implicit mode accepts them as it goes on."""
        while not self._closed:
            yield from self.poll(1.0)

    def commit_sync(self, timeout: float | None = None) -> dict[TopicPartition, BaseException | None]:
        return self._run(self._c.commit_sync(timeout))

    def commit_async(self) -> cf.Future[dict[TopicPartition, BaseException | None]]:
        async def go() -> dict[TopicPartition, BaseException | None]:
            return await self._c.commit_async()

        return self._lt.submit(go())

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._run(self._c.close(), timeout)
        finally:
            self._lt.stop()
