"""The coordinator runtime (Kafka's ``CoordinatorRuntime``): one mechanism for every coordinator whose state
is an internal topic (the group coordinator on ``__consumer_offsets``, the transaction coordinator on
``__transaction_state``).

A coordinator is a ``CoordinatorShard``: it knows how to rebuild its state from the records of one partition
of its topic (``replay``, ``replay_end_transaction_marker``) and what to do when a partition is loaded or
unloaded. The runtime does the rest, the same way for every coordinator:

* it follows the leadership of the topic's partitions (``LeadershipSource.subscribe_leadership``: the
  replica manager calls ``on_election`` / ``on_resignation``; nobody rewires a coordinator from outside);
* on election it loads the partition: replays its log from the log start offset through the shard
  (``CoordinatorLog.read``: records, with transactional ones followed by their COMMIT/ABORT marker), then the
  partition is ACTIVE and the coordinator serves the keys that hash to it; on resignation the shard drops
  them;
* ``schedule_write_operation(name, partition, op)`` runs ``op`` for an ACTIVE partition and appends the
  records of its ``CoordinatorResult`` through ``CoordinatorLog.append`` (the replica manager, acks=all, so
  the topic's ``min.insync.replicas`` applies) without a suspension between the check and the append: writes
  of a partition are serialised in the order they were scheduled (the event loop is the partition's event
  queue). The caller gets the response once the records are committed (the high watermark passed them, and
  the flush policy is met); the next write of the partition does not wait for that.

State per partition (``PartitionState``)::

    INITIAL --on_election--> LOADING --replayed--> ACTIVE --on_resignation--> (dropped)
                                  \\--read failed--> FAILED --on_election--> LOADING ...
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from moldau.protocol.errors import ErrorCode, KafkaError

from ..replica_manager import LeadershipListener
from .log import CoordinatorLog, EndTxnMarker, Record

log = logging.getLogger(__name__)

T = TypeVar("T")

__all__ = ["CoordinatorResult", "CoordinatorRuntime", "CoordinatorShard", "LeadershipListener",
           "LeadershipSource", "PartitionContext", "PartitionState"]


class PartitionState(enum.Enum):
    INITIAL = "initial"
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"


@dataclass(slots=True, eq=False)
class PartitionContext:
    """What the runtime knows of one partition of its topic (Kafka's CoordinatorContext)."""

    partition: int
    epoch: int = -1
    state: PartitionState = PartitionState.INITIAL
    loaded_records: int = 0


@dataclass(slots=True)
class CoordinatorResult(Generic[T]):
    """What a write operation produces: the records to append (in one batch) and the response to give once
    they are committed. ``producer_id`` / ``producer_epoch`` / ``transactional``: a transactional batch of a
    producer (a TxnOffsetCommit's offsets), decided later by the transaction's marker."""

    records: Sequence[Record]
    response: T
    producer_id: int = -1
    producer_epoch: int = -1
    transactional: bool = False


class CoordinatorShard(Protocol):
    """What a coordinator implements to run on the runtime (Kafka's CoordinatorShard). Every call is about
    one partition of the coordinator's topic."""

    def replay(self, partition: int, producer_id: int, key: bytes, value: bytes | None) -> None:
        """One record of the partition, in log order, while loading. ``producer_id`` >= 0 for a record of a
        transactional batch, which its marker (``replay_end_transaction_marker``) commits or aborts."""
        ...

    def replay_end_transaction_marker(self, partition: int, producer_id: int, committed: bool) -> None:
        """The COMMIT (ABORT) marker of ``producer_id``'s transaction, at its place in the log."""
        ...

    def on_loaded(self, partition: int) -> None:
        """The partition is replayed: its keys are served from now on."""
        ...

    def on_unloaded(self, partition: int) -> None:
        """The partition is not led here any more (or its load failed): drop its state, fail its waiters."""
        ...


class LeadershipSource(Protocol):
    """Who knows the leaders (``ReplicaManager``): ``listener`` hears of the topic's partitions led here now,
    and of every change from then on."""

    def subscribe_leadership(self, topic: str, listener: LeadershipListener) -> None: ...

    def leads_new_partitions(self) -> bool:
        """Whether this broker leads a partition as soon as it is created (one node), so that a coordinator
        may create its topic on its first write instead of waiting for an election."""
        ...


class CoordinatorRuntime:
    """Runs one coordinator (``shard``) over the partitions of its internal topic (``coordinator_log``)."""

    def __init__(self, name: str, coordinator_log: CoordinatorLog, shard: CoordinatorShard,
                 num_partitions: int) -> None:
        self.name = name
        self.log = coordinator_log
        self.shard = shard
        self.num_partitions = num_partitions
        self.contexts: dict[int, PartitionContext] = {}
        self.tasks: set[asyncio.Future[Any]] = set()  # the coordinator's background work (``spawn``)
        self._leads_new = False  # the leadership source leads partitions as they are created (one node)

    @property
    def topic(self) -> str:
        return self.log.topic

    # ------------------------------------------------------------------------------------------ leadership
    def follow(self, source: LeadershipSource) -> None:
        """Subscribe to the leadership of the topic's partitions (loads those led here now)."""
        self._leads_new = source.leads_new_partitions()
        source.subscribe_leadership(self.topic, self)

    def is_active(self, partition: int) -> bool:
        ctx = self.contexts.get(partition)
        return ctx is not None and ctx.state is PartitionState.ACTIVE

    def serves(self, partition: int) -> bool:
        """Whether the coordinator answers for ``partition`` here: it is ACTIVE, or the topic does not exist
        yet and this broker will lead every partition of it (one node: its first write creates it)."""
        return self.is_active(partition) or (self._leads_new and partition not in self.contexts
                                             and not self.log.topic_exists())

    def active_partitions(self) -> list[int]:
        return sorted(p for p, ctx in self.contexts.items() if ctx.state is PartitionState.ACTIVE)

    def epoch(self, partition: int) -> int:
        """The leader epoch this partition was loaded at (the coordinator epoch of Kafka's markers)."""
        ctx = self.contexts.get(partition)
        return max(ctx.epoch, 0) if ctx is not None else 0

    def on_election(self, partition: int, epoch: int) -> None:
        if not 0 <= partition < self.num_partitions:
            log.warning("%s coordinator: ignoring the leadership of %s-%d: the coordinator hashes over %d "
                        "partitions", self.name, self.topic, partition, self.num_partitions)
            return
        ctx = self.contexts.get(partition)
        if ctx is not None and epoch < ctx.epoch:
            log.info("%s coordinator: stale election of %s-%d (epoch %d < %d) ignored", self.name, self.topic,
                     partition, epoch, ctx.epoch)
            return
        if ctx is not None and ctx.state in (PartitionState.ACTIVE, PartitionState.LOADING):
            ctx.epoch = epoch  # a new epoch of the same leadership: what is served stays (Kafka's runtime)
            return
        ctx = PartitionContext(partition, epoch)
        self.contexts[partition] = ctx
        self._load(ctx)

    def on_resignation(self, partition: int, epoch: int | None = None) -> None:
        ctx = self.contexts.get(partition)
        if ctx is None:
            return
        if epoch is not None and 0 <= epoch < ctx.epoch:
            log.info("%s coordinator: stale resignation of %s-%d (epoch %d < %d) ignored", self.name,
                     self.topic, partition, epoch, ctx.epoch)
            return
        del self.contexts[partition]
        try:
            self.shard.on_unloaded(partition)
        except Exception:  # the partition is gone whatever the shard thinks
            log.exception("%s coordinator: unloading %s-%d failed", self.name, self.topic, partition)

    def _load(self, ctx: PartitionContext) -> None:
        """Replay the partition through the shard (synchronously: nothing is served from it meanwhile)."""
        ctx.state = PartitionState.LOADING
        t0 = time.monotonic()
        count = 0
        try:
            if self.log.topic_exists():
                for entry in self.log.read(ctx.partition):
                    if isinstance(entry, EndTxnMarker):
                        self.shard.replay_end_transaction_marker(ctx.partition, entry.producer_id,
                                                                 entry.committed)
                    else:
                        count += 1
                        self.shard.replay(ctx.partition, entry.producer_id, entry.key, entry.value)
            self.shard.on_loaded(ctx.partition)
        except Exception:
            log.exception("%s coordinator: loading %s-%d failed; it answers COORDINATOR_NOT_AVAILABLE until "
                          "its next election", self.name, self.topic, ctx.partition)
            ctx.state = PartitionState.FAILED
            try:
                self.shard.on_unloaded(ctx.partition)
            except Exception:  # pragma: no cover - logged above already
                log.debug("unloading after a failed load failed", exc_info=True)
            return
        ctx.state = PartitionState.ACTIVE
        ctx.loaded_records = count
        log.debug("%s coordinator: loaded %s-%d (epoch %d, %d records) in %.1f ms", self.name, self.topic,
                  ctx.partition, ctx.epoch, count, (time.monotonic() - t0) * 1000)

    def reload(self, partitions: Iterable[int] | None = None) -> None:
        """Replay ACTIVE partitions again from their log (all of them when ``partitions`` is None)."""
        for p in list(self.active_partitions() if partitions is None else partitions):
            ctx = self.contexts.get(p)
            if ctx is None:
                continue
            self.shard.on_unloaded(p)
            self._load(ctx)

    def close(self) -> None:
        """Broker shutdown: every partition is unloaded."""
        for p in list(self.contexts):
            self.on_resignation(p)

    # ------------------------------------------------------------------------------------------ operations
    def _check_active(self, partition: int) -> PartitionContext:
        ctx = self.contexts.get(partition)
        if ctx is None and self._leads_new and not self.log.topic_exists():
            self.log.ensure_topic()  # one node: created and elected at once
            ctx = self.contexts.get(partition)
        if ctx is None:
            raise KafkaError.for_code(ErrorCode.NOT_COORDINATOR,
                                      f"{self.topic}-{partition} is not led by this broker")
        if ctx.state is not PartitionState.ACTIVE:
            raise KafkaError.for_code(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                                      if ctx.state is PartitionState.LOADING
                                      else ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                      f"{self.topic}-{partition} is {ctx.state.value}")
        return ctx

    async def schedule_write_operation(self, name: str, partition: int,
                                       op: Callable[[], CoordinatorResult[T]]) -> T:
        """Run ``op`` for ``partition`` and append its records; the response once they are committed.

        Raises KafkaError NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) when the
        partition is not ACTIVE here, or the append's error. ``op`` may raise to refuse the write."""
        ctx = self._check_active(partition)
        result = op()
        if not result.records:
            return result.response
        committed = self.log.append(partition, result.records, producer_id=result.producer_id,
                                    producer_epoch=result.producer_epoch, transactional=result.transactional)
        log.debug("%s coordinator: %s appended %d records to %s-%d (epoch %d)", self.name, name,
                  len(result.records), self.topic, partition, ctx.epoch)
        if committed is not None:
            await committed
        return result.response

    async def append(self, partition: int, records: Sequence[Record], *, producer_id: int = -1,
                     producer_epoch: int = -1, transactional: bool = False) -> None:
        """A write whose state change the caller has made already: ``records`` appended and committed."""
        await self.schedule_write_operation(
            "append", partition,
            lambda: CoordinatorResult(records, None, producer_id, producer_epoch, transactional))

    # ------------------------------------------------------------------------------------------ background
    def spawn(self, coro: Awaitable[Any]) -> asyncio.Future[Any]:
        """Run ``coro`` in the background (a write after a timer fired, a retry), keeping a reference; a
        failure is logged."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Future[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s coordinator: background task failed", self.name, exc_info=task.exception())

    def cancel_tasks(self) -> list[asyncio.Future[Any]]:
        """Cancel the background work; the cancelled tasks (for ``stop_tasks`` to wait for)."""
        tasks = list(self.tasks)
        for t in tasks:
            t.cancel()
        self.tasks.clear()
        return tasks

    async def stop_tasks(self) -> None:
        """Cancel the background work and wait until it has ended."""
        for t in self.cancel_tasks():
            try:
                await t
            except asyncio.CancelledError:
                pass
            except Exception:
                log.debug("%s coordinator: a task ended with an error", self.name, exc_info=True)
