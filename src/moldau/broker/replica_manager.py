"""Partitions of this broker: append (produce) and read (fetch) with long-poll waiters, flush policy,
background log maintenance, and the fetch session cache (KIP-227).

Single node, but the data model is a cluster's: every partition has a leader epoch, a high watermark kept
apart from the log end offset, and replicas / ISR lists (of this node). On one node the ISR is this node, so
the high watermark advances to the log end offset right after each local append.

A new topic's (or CreatePartitions') partitions are created off the request path when there are many: a task
has their directories and files made by worker threads (``LogManager.build_log``, a chunk of partitions per
job) and registers each chunk on the event loop when it is ready, so one CreateTopics of 10,000 partitions
never holds up other connections. Until
its partition exists, Metadata answers LEADER_NOT_AVAILABLE for it and produce / fetch
UNKNOWN_TOPIC_OR_PARTITION (both retriable), as Kafka's partitions answer while a creation propagates.

A deleted topic's partitions leave at once; their directories are renamed to ``<dir>.<id>-delete`` by the
event loop in slices of ``DELETE_SLICE_S`` (renaming 10,000 at once held it for 200 ms), then removed by a
worker thread (``on_topic_deleted``).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import shutil
import sys
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Protocol

from moldau.protocol.errors import ErrorCode, KafkaError, error_code_of
from moldau.protocol.records import (
    InvalidRecordError,
    check_crc,
    detect_magic,
    split_batches,
    validate_batch,
)

if TYPE_CHECKING:
    from moldau.log import LogManager

    from .clock import Clock
    from .config import BrokerConfig
    from .metadata import MetadataService, TopicInfo
    from .metrics import BrokerMetrics

log = logging.getLogger(__name__)

# At most this many new partitions are created at once on the event loop; more go to a background task whose
# worker threads make their files, CREATE_CHUNK partitions per job, CREATE_WORKERS jobs at a time.
SYNC_CREATE_PARTITIONS = 32
CREATE_CHUNK = 50
CREATE_WORKERS = 2
CREATE_SWITCH_INTERVAL_S = 0.0005
# A deleted topic's partition directories are renamed at once when this few, else in slices of the event loop
# of about DELETE_SLICE_S (DELETE_CHUNK renames between two looks at the clock).
SYNC_DELETE_PARTITIONS = 32
DELETE_SLICE_S = 0.002
DELETE_CHUNK = 16
_creation_executor: ThreadPoolExecutor | None = None


class _GilShare:
    """While worker threads make partition files, the event loop thread must get the GIL back quickly after
    each of its system calls: the interpreter's switch interval (5 ms, for each of the loop's many GIL
    acquisitions per request) is lowered to ``CREATE_SWITCH_INTERVAL_S`` for that time.

    The cyclic garbage collector's older generations are paused for that time too: every new partition adds
    long-lived objects, which make CPython run full (generation 2) collections over all of them again and
    again, each holding the GIL for 15-45 ms at 10,000 partitions (measured with gc.callbacks). The youngest
    generation is still collected as usual (its threshold unchanged, each pass walking only the objects made
    since the last), so the cyclic garbage requests leave behind (an exception and its frames) goes at once:
    with the whole collector disabled it piled up for as long as creations ran (tracked objects 38,000 ->
    124,000 in 20 s under the unguarded fuzzer) and was then frozen with the partitions, never collected
    (RSS 41 -> 477 MB in six minutes of back-to-back creations). When the creation ends what survived is
    frozen (``gc.freeze``: moved out of the collector's generations, a constant-time step), so that neither
    a collection of the young generations nor the next full one walks the new partitions (35-60 ms each,
    measured); a topic deletion unfreezes them once its directories are renamed, so the garbage of deleted
    partitions is collected as before."""

    active = 0
    saved = 0.005
    gc_was_enabled = True
    thresholds = (700, 10, 10)

    @classmethod
    def enter(cls) -> None:
        if cls.active == 0:
            cls.saved = sys.getswitchinterval()
            sys.setswitchinterval(min(cls.saved, CREATE_SWITCH_INTERVAL_S))
            cls.gc_was_enabled = gc.isenabled()
            cls.thresholds = gc.get_threshold()
            # generation 0 as before; generations 1 and 2 only after this many collections of the younger
            gc.set_threshold(cls.thresholds[0], 1 << 30, 1 << 30)
        cls.active += 1

    @classmethod
    def leave(cls) -> None:
        cls.active -= 1
        if cls.active == 0:
            sys.setswitchinterval(cls.saved)
            gc.set_threshold(*cls.thresholds)
            if cls.gc_was_enabled:
                gc.freeze()


def _remove_dirs(dirs: list[str]) -> None:
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    give_back_heap()


_malloc_trim: Any = None


def give_back_heap() -> None:
    """Return the C heap's free pages to the system (glibc's ``malloc_trim``; nothing elsewhere). glibc keeps
    what is freed in its arenas, those of the partition creation threads included, so the RSS of a broker
    that made and deleted thousands of partitions stayed near its high-water mark. Called in a worker thread
    (ctypes releases the GIL) after a large creation and after a topic's directories are removed."""
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                _malloc_trim = ctypes.CDLL(None).malloc_trim
            except (OSError, AttributeError):
                pass
    if _malloc_trim:
        _malloc_trim(0)


def _creation_pool() -> ThreadPoolExecutor:
    global _creation_executor
    if _creation_executor is None:
        _creation_executor = ThreadPoolExecutor(CREATE_WORKERS, thread_name_prefix="moldau-create-partitions")
    return _creation_executor

UNKNOWN_SERVER_ERROR = -1
KAFKA_STORAGE_ERROR = ErrorCode.KAFKA_STORAGE_ERROR


# ------------------------------------------------------------------------------------------------- partition

class Partition:
    """One topic partition led by this broker."""

    __slots__ = ("topic", "index", "topic_id", "log", "leader_id", "leader_epoch", "replicas", "isr",
                 "waiters", "config", "deleted")

    def __init__(self, topic: str, index: int, topic_id: Any, plog: Any, node_id: int, config: Any) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = plog
        self.leader_id = node_id
        self.leader_epoch = 0
        self.replicas = [node_id]
        self.isr = [node_id]
        self.waiters: list[asyncio.Future[None]] = []
        self.config = config
        self.deleted = False
        # One node: everything in the local log is replicated to the whole ISR.
        plog.high_watermark = plog.log_end_offset

    @property
    def high_watermark(self) -> int:
        """Kept by the log (it bounds DeleteRecords and the last stable offset, and is checkpointed)."""
        return self.log.high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        self.log.high_watermark = value

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    def wake(self) -> None:
        waiters = self.waiters
        if waiters:
            self.waiters = []
            for f in waiters:
                if not f.done():
                    f.set_result(None)

    def __repr__(self) -> str:
        return f"<Partition {self.topic}-{self.index} hw={self.high_watermark}>"


@dataclass(slots=True)
class AppendResult:
    error: int = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)
    error_message: str | None = None
    flush: asyncio.Future[None] | None = None  # set when the flush policy requires an fsync before the ack


@dataclass(slots=True)
class ReadInfo:
    error: int = ErrorCode.NONE
    records: Any = None           # list of chunks (bytes-like) or None
    size: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[Any] | None = None


# ------------------------------------------------------------------------------------------------ group fsync

class GroupFlusher:
    """Group commit: one fsync round (in a worker thread) serves every append waiting when it starts."""

    def __init__(self) -> None:
        self._pending: set[Partition] = set()
        self._pending_future: asyncio.Future[None] | None = None
        self._running = False

    def request(self, p: Partition) -> asyncio.Future[None]:
        self._pending.add(p)
        if self._pending_future is None:
            self._pending_future = asyncio.get_running_loop().create_future()
        fut = self._pending_future
        if not self._running:
            self._start_round()
        return fut

    def _start_round(self) -> None:
        parts, fut = self._pending, self._pending_future
        self._pending, self._pending_future = set(), None
        if fut is None:
            return
        self._running = True
        loop = asyncio.get_running_loop()
        logs = [p.log for p in parts if not p.deleted]

        def work() -> None:
            for lg in logs:
                lg.flush()

        task = loop.run_in_executor(None, work)

        def done(t: asyncio.Future[None]) -> None:
            self._running = False
            exc = t.exception()
            if not fut.done():
                if exc is not None:
                    fut.set_exception(exc)
                else:
                    fut.set_result(None)
            if self._pending_future is not None:
                self._start_round()

        task.add_done_callback(done)

    async def drain(self) -> None:
        while self._running or self._pending_future is not None:
            fut = self._pending_future
            if fut is None:
                await asyncio.sleep(0.005)
                continue
            try:
                await fut
            except Exception:  # pragma: no cover
                pass


# -------------------------------------------------------------------------------------------- replica manager

class ReplicaDeps(Protocol):
    """The services the replica manager uses (``services.BrokerServices`` is one)."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def node_id(self) -> int: ...
    @property
    def log_manager(self) -> LogManager: ...
    @property
    def metadata(self) -> MetadataService: ...
    @property
    def metrics(self) -> BrokerMetrics | None: ...


class LeadershipListener(Protocol):
    """Told when this broker becomes (stops being) the leader of a partition of the topic it subscribed to
    (``ReplicaManager.subscribe_leadership``; the coordinator runtimes)."""

    #: the partitions of the topic the listener serves
    num_partitions: int

    def on_election(self, partition: int, epoch: int) -> None: ...

    def on_resignation(self, partition: int, epoch: int | None) -> None: ...


class ReplicaService(Protocol):
    """What both modes' replica managers offer (``ReplicaManager`` here,
    ``cluster.replica.ClusterReplicaManager``; ``interfaces`` has mypy check both)."""

    node_id: int
    partitions: dict[tuple[str, int], Partition]

    def load(self) -> None: ...

    def start(self) -> None: ...

    def begin_shutdown(self) -> None: ...

    async def stop(self) -> None: ...

    def get_partition(self, topic: str, index: int) -> Partition | None: ...

    def is_leader(self, p: Partition) -> bool: ...

    def subscribe_leadership(self, topic: str, listener: LeadershipListener) -> None: ...

    def leads_new_partitions(self) -> bool: ...

    def append(self, p: Partition, records: Any, *, internal: bool = False, now_ms: int | None = None,
               verify_txn: Any = None, required_acks: int = -1) -> AppendResult: ...

    def read(self, p: Partition, offset: int, max_bytes: int, *, min_one: bool, isolation_level: int = 0,
             replica_id: int = -1, follower_ok: bool = False, regions: bool = False) -> ReadInfo: ...

    def preferred_read_replica(self, p: Partition, client_rack: str, fetch_offset: int) -> int: ...

    def list_offsets_error(self, p: Partition, replica_id: int, timestamp: int, version: int) -> int: ...

    async def wait_for_data(self, partitions: Iterable[Partition], timeout: float) -> bool: ...


class ReplicaManager:
    def __init__(self, services: ReplicaDeps) -> None:
        self.services = services  # read on use: metrics is set after construction
        self.node_id = services.node_id
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.flusher = GroupFlusher()
        self._tasks: list[asyncio.Task[Any]] = []
        self._creating: dict[str, asyncio.Task[None]] = {}  # topic -> its partitions being created
        # topic -> the directories of its deleted partitions being renamed (on_topic_deleted)
        self._deleting: dict[str, asyncio.Task[None]] = {}
        self.shutting_down = False
        slots = int(services.config.get("max.incremental.fetch.session.cache.slots"))
        self.fetch_sessions = FetchSessionCache(slots)
        # who follows the leadership of a topic's partitions here (the coordinator runtimes, by topic)
        self._leadership: dict[str, list[LeadershipListener]] = {}

    # ------------------------------------------------------------------------------------------ setup
    def _log_config(self, topic: "TopicInfo") -> Any:
        from .topic_config import log_config_for

        return log_config_for(topic.configs, self.services.config)

    def _open_log(self, topic: "TopicInfo", index: int, config: Any) -> Any:
        lm = self.services.log_manager  # a deleted topic's directory of the same name is renamed first
        return lm.get_or_create_log(topic.name, index, config, topic_id=topic.topic_id)

    def load(self) -> None:
        """Partitions for every topic in the metadata; topics found on disk only are adopted."""
        store = self.services.metadata
        lm = self.services.log_manager
        self._delete_unrenamed()
        on_disk: dict[str, int] = {}
        for (tname, idx) in list(lm.partitions()):
            on_disk[tname] = max(on_disk.get(tname, 0), idx + 1)
        for tname, count in sorted(on_disk.items()):
            if tname not in store.topics:
                store.adopt(tname, count, _parse_topic_id(lm.topic_id(tname)))
            elif store.topics[tname].num_partitions < count:  # pragma: no cover - inconsistent metadata
                log.warning("topic %s has %d partitions on disk but %d in metadata", tname, count,
                            store.topics[tname].num_partitions)
        for t in store.topics.values():
            self._create_partitions(t, 0)

    def _delete_unrenamed(self) -> None:
        """After a crash in the middle of a topic deletion (``on_topic_deleted``) some of its partition
        directories were not renamed to ``<dir>.<id>-delete`` yet (the log manager's load removed those that
        were): the metadata still lists the deletion (``pending_deletions``), and these partitions (same name,
        same topic id) are deleted instead of adopted, or taken for a new topic of the same name."""
        store = self.services.metadata
        if not store.pending_deletions:
            return
        lm = self.services.log_manager
        for tname, idx in lm.partitions():
            plog = lm.get(tname, idx)
            tid = _parse_topic_id(plog.topic_id) if plog is not None else None
            if tid is not None and store.pending_deletions.get(tid) == tname:
                log.warning("deleting %s-%d: its topic (id %s) was deleted before the last shutdown",
                            tname, idx, tid)
                lm.delete(tname, idx)
        store.pending_deletions.clear()
        store.save()

    def _create_partitions(self, topic: "TopicInfo", start: int) -> None:
        cfg = self._log_config(topic)
        for i in range(start, topic.num_partitions):
            self._create_partition(topic, i, cfg)

    def _create_partition(self, topic: "TopicInfo", i: int, cfg: Any) -> None:
        if (topic.name, i) in self.partitions:
            return
        plog = self._open_log(topic, i, cfg)
        self.partitions[(topic.name, i)] = Partition(topic.name, i, topic.topic_id, plog, self.node_id, cfg)
        self.leadership_changed(topic.name, i, True, 0)  # one node leads every partition it has

    def _schedule_creation(self, topic: "TopicInfo", start: int) -> None:
        """Create the partitions ``start..`` of ``topic``: at once when few, for the internal topics (their
        coordinators use them right after creating them) or without a running loop, else in a background
        task (see the module's docstring)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or topic.is_internal or (topic.num_partitions - start <= SYNC_CREATE_PARTITIONS
                                                 and topic.name not in self._creating):
            self._create_partitions(topic, start)
            return
        previous = self._creating.get(topic.name)
        task = loop.create_task(self._create_in_background(topic, start, previous),
                                name=f"create-partitions-{topic.name}")
        self._creating[topic.name] = task

        def done(t: asyncio.Task[None]) -> None:
            if self._creating.get(topic.name) is t:
                del self._creating[topic.name]
            if not t.cancelled() and t.exception() is not None:
                log.error("creating the partitions of %s failed: %r", topic.name, t.exception())

        task.add_done_callback(done)

    async def _create_in_background(self, topic: "TopicInfo", start: int,
                                    previous: "asyncio.Task[None] | None") -> None:
        if previous is not None:  # a CreatePartitions while the topic's first partitions are still created
            await asyncio.wait((previous,))
        deleting = self._deleting.get(topic.name)
        if deleting is not None:  # the directories of a deleted topic of this name are renamed first
            await asyncio.wait((deleting,))
        lm = self.services.log_manager
        store = self.services.metadata
        cfg = self._log_config(topic)
        loop = asyncio.get_running_loop()
        pool = _creation_pool()
        name, topic_id = topic.name, topic.topic_id

        def build(d: str, indexes: list[int]) -> tuple[str, list[Any]]:  # in a worker thread: files only
            return d, [lm.build_log(d, name, j, cfg, topic_id) for j in indexes]

        t0 = time.perf_counter()
        _GilShare.enter()
        pending: set[asyncio.Future[tuple[str, list[Any]]]] = set()
        i = start
        created = 0
        try:
            while True:
                while (i < topic.num_partitions and len(pending) < CREATE_WORKERS
                       and store.topics.get(name) is topic):
                    indexes = [j for j in range(i, min(i + CREATE_CHUNK, topic.num_partitions))
                               if (name, j) not in self.partitions]
                    i += CREATE_CHUNK
                    if indexes:
                        pending.add(loop.run_in_executor(pool, build, lm.dir_for_new_log(), indexes))
                if not pending:
                    break
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for fut in done:
                    d, plogs = fut.result()
                    for plog in plogs:
                        created += self._adopt_log(topic, plog, d, cfg)
        finally:
            if pending:  # stopped (or failed): the files being made are registered when done
                await asyncio.wait(pending)
                for fut in pending:
                    if not fut.cancelled() and fut.exception() is None:
                        d, plogs = fut.result()
                        for plog in plogs:
                            self._adopt_log(topic, plog, d, cfg)
            _GilShare.leave()
            loop.run_in_executor(None, give_back_heap)
        log.info("created %d partitions of %s in %.2f s", created, name, time.perf_counter() - t0)

    def _adopt_log(self, topic: "TopicInfo", plog: Any, d: str, cfg: Any) -> int:
        """Register a log built in a worker thread; one of a topic deleted meanwhile is deleted. 1 when the
        partition was added."""
        lm = self.services.log_manager
        key = (topic.name, plog.partition)
        lm.register_log(plog, d)
        if self.services.metadata.topics.get(topic.name) is not topic:
            lm.delete(*key)
            return 0
        self.partitions[key] = Partition(topic.name, plog.partition, topic.topic_id, plog, self.node_id, cfg)
        self.leadership_changed(topic.name, plog.partition, True, 0)  # one node leads every partition it has
        return 1

    def creating(self, topic: str) -> bool:
        """Whether partitions of ``topic`` are still being created in the background."""
        return topic in self._creating

    async def wait_created(self, topics: Iterable[str], timeout_s: float) -> set[str]:
        """Wait (at most ``timeout_s``) for the background creation of these topics' partitions; the topics
        still being created."""
        tasks = [t for name in topics if (t := self._creating.get(name)) is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=max(0.0, timeout_s))
        return {name for name in topics if name in self._creating}

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._maintenance()))

    def begin_shutdown(self) -> None:
        """No more waiting: pending long polls answer at once."""
        self.shutting_down = True
        for p in self.partitions.values():
            p.wake()

    async def stop(self) -> None:
        creating = list(self._creating.values())
        for t in creating:  # the next start creates what is missing (load)
            t.cancel()
        await asyncio.gather(*creating, return_exceptions=True)
        deleting = list(self._deleting.values())
        for t in deleting:  # the log manager's close renames what is left; the next start removes it all
            t.cancel()
        await asyncio.gather(*deleting, return_exceptions=True)
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()
        await self.flusher.drain()
        for p in self.partitions.values():
            p.wake()

    async def _maintenance(self) -> None:
        """log_manager.tick(now) every second: retention, roll, flush, checkpoints (it decides what is
        due), in steps of a few ms with the loop serving others between them."""
        lm = self.services.log_manager
        clock = self.services.clock
        while True:
            await asyncio.sleep(1.0)
            try:
                for _ in lm.tick_steps(clock.time_ms()):
                    await asyncio.sleep(0)
            except Exception:  # never let maintenance die
                log.exception("log maintenance failed")
            # retention may have moved log start offsets: nothing else to update (HW >= log start holds)

    # ---------------------------------------------------------------------------------------- metadata events
    def on_topic_created(self, topic: "TopicInfo") -> None:
        self._schedule_creation(topic, 0)

    def on_partitions_created(self, topic: "TopicInfo", old_count: int) -> None:
        self._schedule_creation(topic, old_count)

    def on_topic_deleted(self, topic: "TopicInfo") -> None:
        """The topic's partitions leave at once (a fetch waiting on one wakes); their directories are renamed
        to ``<dir>.<id>-delete`` (Kafka's LogManager.asyncDelete: a topic of the same name made next cannot
        meet them) in slices of at most ``DELETE_SLICE_S`` on the event loop, a few at once without a
        slice, and then removed by a worker thread (seconds for thousands of partitions). A restart
        removes the renamed directories, and the ones not renamed yet (``load``)."""
        # a background creation of its partitions sees the topic gone and stops after its current slice
        lm = self.services.log_manager
        name = topic.name
        for i in range(topic.num_partitions):
            p = self.partitions.pop((name, i), None)
            if p is not None:
                p.deleted = True
                p.wake()
                self.leadership_changed(name, i, False, None)
        keys = lm.detach_topic_for_delete(name)
        self.fetch_sessions.topic_deleted(name, topic.topic_id)
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or (len(keys) <= SYNC_DELETE_PARTITIONS and name not in self._deleting):
            self._remove_later(lm.rename_detached(keys))
            self._deletion_done(topic)
            return
        task = loop.create_task(self._rename_in_slices(topic, keys, self._deleting.get(name)),
                                name=f"delete-partitions-{name}")
        self._deleting[name] = task

        def done(t: asyncio.Task[None]) -> None:
            if self._deleting.get(name) is t:
                del self._deleting[name]
            if not t.cancelled() and t.exception() is not None:
                log.error("renaming the partitions of deleted topic %s failed: %r", name, t.exception())

        task.add_done_callback(done)

    async def _rename_in_slices(self, topic: "TopicInfo", keys: list[tuple[str, int]],
                                previous: "asyncio.Task[None] | None") -> None:
        """Rename the directories of the detached partitions ``keys`` of deleted ``topic``, ``DELETE_SLICE_S``
        of the event loop at a time, then have a worker thread remove them all."""
        if previous is not None:  # an earlier deletion of a topic of this name, still renaming
            await asyncio.wait((previous,))
        lm = self.services.log_manager
        doomed: list[str] = []
        t0 = time.perf_counter()
        try:
            i = 0
            while i < len(keys):
                start = time.perf_counter()
                while i < len(keys) and time.perf_counter() - start < DELETE_SLICE_S:
                    doomed += lm.rename_detached(keys[i:i + DELETE_CHUNK])
                    i += DELETE_CHUNK
                if i < len(keys):
                    await asyncio.sleep(0)
        finally:
            # all renamed before any is removed: a worker thread removing directories while the loop renames
            # would take the GIL from it after each rename (a system call)
            self._remove_later(doomed)
        self._deletion_done(topic)
        log.info("renamed the %d partition directories of deleted topic %s in %.2f s", len(doomed),
                 topic.name, time.perf_counter() - t0)

    def _remove_later(self, doomed: list[str]) -> None:
        """Remove the renamed directories ``doomed`` in a worker thread (at once without a running loop)."""
        if not doomed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            _remove_dirs(doomed)
        else:
            loop.run_in_executor(None, _remove_dirs, doomed)

    def _deletion_done(self, topic: "TopicInfo") -> None:
        """Every directory of deleted ``topic`` renamed: a restart need not look for them any more, and what
        a large creation froze (see _GilShare) is collectable again (now that the partitions are gone)."""
        self.services.metadata.pending_deletions.pop(topic.topic_id, None)
        if gc.get_freeze_count() and not _GilShare.active:
            gc.unfreeze()

    def deleting(self, topic: str) -> bool:
        """Whether directories of a deleted topic of this name are still being renamed."""
        return topic in self._deleting

    def on_topic_configs_changed(self, topic: "TopicInfo") -> None:
        cfg = self._log_config(topic)
        for i in range(topic.num_partitions):
            p = self.partitions.get((topic.name, i))
            if p is not None:
                p.config = cfg
                p.log.update_config(cfg)

    # ------------------------------------------------------------------------------------------ leadership
    def is_leader(self, p: Partition) -> bool:
        """Whether this broker leads ``p`` (one node: every partition it has)."""
        return True

    def leads_new_partitions(self) -> bool:
        """One node leads every partition as soon as it is created."""
        return True

    def subscribe_leadership(self, topic: str, listener: LeadershipListener) -> None:
        """``listener`` hears of the partitions of ``topic`` led here now, then of every change
        (``coordinator.runtime.LeadershipSource``)."""
        self._leadership.setdefault(topic, []).append(listener)
        led = [(index, p) for (name, index), p in self.partitions.items()
               if name == topic and self.is_leader(p)]
        for index, p in sorted(led, key=lambda ip: ip[0]):  # the topic's partitions only (not all sorted)
            listener.on_election(index, p.leader_epoch)

    def leadership_changed(self, topic: str, index: int, leader: bool, epoch: int | None) -> None:
        """This broker became (stopped being) the leader of ``topic``-``index``: its listeners are told."""
        for listener in self._leadership.get(topic, ()):
            try:
                if leader:
                    listener.on_election(index, epoch if epoch is not None else 0)
                else:
                    listener.on_resignation(index, epoch)
            except Exception:
                log.exception("%s-%d: a leadership listener failed (leader %s)", topic, index, leader)

    # ------------------------------------------------------------------------------------------ lookups
    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    # ------------------------------------------------------------------------------------------ append
    def append(self, p: Partition, records: Any, *, internal: bool = False, now_ms: int | None = None,
               verify_txn: Any = None, required_acks: int = -1) -> AppendResult:
        """Validate and append one partition's produce data (bytes-like, writable preferred).

        ``verify_txn(header) -> error code``: called for each transactional (non-control) batch before
        anything is written; a non-zero code fails the partition (the transaction coordinator's check that the
        partition is in the producer's ongoing transaction, KIP-890 part 1).

        ``required_acks`` is the Produce request's acks (-1: min.insync.replicas applies, as in Kafka; the
        broker's own appends use -1).

        Errors are per partition and leave the log untouched. A successful append advances the high watermark,
        wakes fetchers waiting on the partition and, when the flush policy requires it, carries a future that
        completes once the data is fsynced (group commit)."""
        res = AppendResult()
        cfg = p.config
        if now_ms is None:
            now_ms = self.services.clock.time_ms()
        if records is None:
            res.error = ErrorCode.INVALID_RECORD
            res.error_message = "Produce request without records"
            return res
        n = records.nbytes if isinstance(records, memoryview) else len(records)
        if n == 0:
            res.error = ErrorCode.INVALID_RECORD
            res.error_message = "Produce request with empty records"
            return res
        min_isr = cfg.min_insync_replicas
        lm = self.services.log_manager
        if lm.offline_dirs and lm.is_offline(p.topic, p.index):
            res.error = KAFKA_STORAGE_ERROR
            res.error_message = f"the log directory of {p.topic}-{p.index} is offline"
            return res
        buf: bytearray | memoryview
        try:
            magic = detect_magic(records, 0)
            if magic != 2:
                from moldau.protocol.records import legacy_to_v2

                converted = legacy_to_v2(records)
                buf = bytearray(b"".join(converted))
            elif isinstance(records, bytearray):
                buf = records
            elif isinstance(records, memoryview) and not records.readonly:
                buf = records
            else:
                buf = bytearray(records)
            batches = split_batches(buf)
            if not batches:
                res.error = ErrorCode.INVALID_RECORD
                res.error_message = "Produce request without record batches"
                return res
            compacted = cfg.compact_enabled
            for pos, h in batches:
                check_crc(buf, pos, h)
                if h.is_control and not internal:
                    res.error = ErrorCode.INVALID_RECORD
                    res.error_message = "Control batches cannot be produced by clients"
                    return res
                if verify_txn is not None and h.is_transactional and not h.is_control:
                    code = verify_txn(h)
                    if code:
                        res.error = code
                        res.error_message = (f"transactional batch of producer {h.producer_id} (epoch "
                                             f"{h.producer_epoch}) refused for {p.topic}-{p.index}")
                        return res
                if compacted:
                    try:
                        validate_batch(buf, pos, h, require_keys=True)
                    except InvalidRecordError as e:
                        res.error = ErrorCode.INVALID_RECORD
                        res.error_message = (f"Compacted topic cannot accept message without key in topic "
                                             f"partition {p.topic}-{p.index}.")
                        res.record_errors = _keyless_indexes(buf, pos, h) or [(0, str(e))]
                        return res
            target = cfg.compression_type
            if target != "producer":
                buf, batches = _recompress(buf, batches, target, cfg)
            if required_acks == -1 and min_isr > len(p.isr):
                res.error = ErrorCode.NOT_ENOUGH_REPLICAS
                res.error_message = (f"The size of the current ISR {len(p.isr)} is insufficient to satisfy "
                                     f"the min.isr requirement of {min_isr} for partition "
                                     f"{p.topic}-{p.index}")
                return res
            # a request's own buffer (or our copy) is not modified after the append; a coordinator's may be
            info = p.log.append(buf, batches, now_ms, leader_epoch=p.leader_epoch, stable=not internal)
        except Exception as e:  # RecordError, LogError and friends carry their Kafka code
            code = error_code_of(e)
            if code == UNKNOWN_SERVER_ERROR:
                log.exception("append to %s-%d failed", p.topic, p.index)
            elif code == KAFKA_STORAGE_ERROR:
                self.log_dir_failed(p, e)
            res.error = code
            res.error_message = str(e)
            return res
        res.base_offset = info.base_offset
        res.log_append_time = info.log_append_time
        res.log_start_offset = info.log_start_offset
        if info.duplicate:
            # a retried batch the log already has is answered like the original: no sooner than the
            # original's own ack would be (replicated to the ISR, fsynced under the flush policy)
            self._after_duplicate(p, res, info.last_offset, required_acks)
            return res
        metrics = self.services.metrics
        if metrics is not None:
            metrics.record_append(p.topic, n, sum(h.records_count for _, h in batches))
        self._after_append(p, res, required_acks)
        return res

    def _after_append(self, p: Partition, res: AppendResult, required_acks: int) -> None:
        """One node: the ISR (this node) has everything the log has. (The cluster's replica manager overrides
        this: the high watermark waits for the ISR, acks=-1 for the high watermark.)"""
        plog = p.log
        plog.high_watermark = plog.log_end_offset
        p.wake()
        if plog.needs_flush():
            res.flush = self.flusher.request(p)

    def _after_duplicate(self, p: Partition, res: AppendResult, last_offset: int, required_acks: int) -> None:
        """One node: the original is in the log; its fsync may still be pending."""
        if p.log.needs_flush():
            res.flush = self.flusher.request(p)

    def log_dir_failed(self, p: Partition, exc: BaseException) -> None:
        """A storage error (ENOSPC, EIO) in ``p``'s log dir: take the dir offline, once, with one log line.
        Its partitions answer KAFKA_STORAGE_ERROR until a restart recovers them; other dirs keep working."""
        lm = self.services.log_manager
        d = lm.dir_of(p.topic, p.index)
        if d is not None and lm.mark_offline(d, str(exc)):
            n = sum(1 for q in self.partitions.values() if lm.dir_of(q.topic, q.index) == d)
            log.error("log directory %s is offline after a storage error on %s-%d (%s): its %d partition(s) "
                      "answer KAFKA_STORAGE_ERROR until the broker is restarted", d, p.topic, p.index, exc, n)

    # ------------------------------------------------------------------------------------------ read
    def read(self, p: Partition, offset: int, max_bytes: int, *, min_one: bool, isolation_level: int = 0,
             replica_id: int = -1, follower_ok: bool = False, regions: bool = False) -> ReadInfo:
        """Records from ``offset`` up to the high watermark (read_committed: last stable offset).
        ``replica_id``: the Fetch's replica id (>= 0 for a follower; on one node there are none).
        ``follower_ok``: a consumer that may read from a follower (Fetch v11+, KIP-392; a cluster's).
        ``regions``: the records as ``FileRegion``s of the segment files (a connection that can sendfile)."""
        plog = p.log
        hw = plog.high_watermark
        lso = plog.last_stable_offset
        start = plog.log_start_offset
        info = ReadInfo(ErrorCode.NONE, None, 0, hw, lso, start)
        if offset < start or offset > plog.log_end_offset:
            info.error = ErrorCode.OFFSET_OUT_OF_RANGE
            return info
        limit = lso if isolation_level == 1 else hw
        if offset >= limit or max_bytes <= 0 and not min_one:
            info.records = None
            return info
        lm = self.services.log_manager
        if lm.offline_dirs and lm.is_offline(p.topic, p.index):
            info.error = KAFKA_STORAGE_ERROR
            return info
        try:
            rr = plog.read(offset, max_bytes, max_offset=limit, min_one=min_one, regions=regions)
        except Exception as e:
            code = error_code_of(e)
            if code == UNKNOWN_SERVER_ERROR:
                log.exception("read from %s-%d at %d failed", p.topic, p.index, offset)
            info.error = code
            return info
        size = rr.size
        info.records = rr.chunks if size else None
        info.size = size
        metrics = self.services.metrics
        if metrics is not None:
            metrics.record_read(p.topic, size)
        if isolation_level == 1:
            info.aborted_transactions = rr.aborted_transactions or []
        return info

    def preferred_read_replica(self, p: Partition, client_rack: str, fetch_offset: int) -> int:
        """KIP-392: the replica a consumer in ``client_rack`` should read from; -1: the leader (one node has
        no other replica)."""
        return -1

    def list_offsets_error(self, p: Partition, replica_id: int, timestamp: int, version: int) -> int:
        """An error for ListOffsets on ``p`` before the lookup (a cluster's: not the leader, ...); 0: none."""
        return ErrorCode.NONE

    def offset_for_timestamp(self, p: Partition, ts: int, max_offset: int | None = None
                             ) -> tuple[int, int] | None:
        return p.log.offset_for_timestamp(ts, max_offset=max_offset)

    # ------------------------------------------------------------------------------------------ long poll
    async def wait_for_data(self, partitions: Iterable[Partition], timeout: float) -> bool:
        """Wait until an append to any of ``partitions`` or ``timeout`` seconds. True if woken."""
        if timeout <= 0 or self.shutting_down:
            return False
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        parts = list(partitions)
        for p in parts:
            p.waiters.append(fut)
        handle = loop.call_later(timeout, _timeout_future, fut)
        try:
            await fut
            return fut.result() is None
        finally:
            handle.cancel()
            for p in parts:
                try:
                    p.waiters.remove(fut)
                except ValueError:
                    pass


READ_CHUNK = 1 << 20


def read_batches(plog: Any) -> Iterator[tuple[bytes, int, Any]]:
    """Every record batch of ``plog`` from its log start offset to its end, as (bytes, position, BatchHeader),
    read READ_CHUNK bytes at a time: how the coordinators load their internal topics at start. Records of the
    first batch below the log start offset are the caller's to skip."""
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        data = b"".join(plog.read(offset, READ_CHUNK, min_one=True).chunks)
        if not data:
            return
        nxt = offset
        for pos, h in split_batches(data, allow_truncated=True):
            if h.last_offset < offset:
                continue
            nxt = h.last_offset + 1
            yield data, pos, h
        if nxt <= offset:
            return
        offset = nxt


def _parse_topic_id(text: Any) -> Any:
    """A topic id as partition.metadata holds it (Kafka's url-safe base64, or a UUID string) -> UUID."""
    import base64
    import uuid

    if text is None or isinstance(text, uuid.UUID):
        return text
    try:
        return uuid.UUID(str(text))
    except ValueError:
        pass
    try:
        raw = base64.urlsafe_b64decode(str(text) + "=" * (-len(str(text)) % 4))
        return uuid.UUID(bytes=raw) if len(raw) == 16 else None
    except (ValueError, TypeError):
        return None


def _timeout_future(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_result(False)


def _recompress(buf: Any, batches: list[Any], target: str, cfg: Any) -> tuple[bytearray, list[Any]]:
    """Re-encode batches whose codec differs from the topic's compression.type (Kafka's LogValidator does the
    same). Producer id/epoch/sequence, transactional flag, timestamps, keys, values and headers are kept."""
    from moldau.protocol.records import BatchBuilder, codec_id, decode_batch

    codec = codec_id(target)
    if all(h.compression == codec or h.is_control for _pos, h in batches):
        return buf, batches
    levels = {1: cfg.compression_gzip_level, 3: cfg.compression_lz4_level, 4: cfg.compression_zstd_level}
    level = levels.get(codec, -1)
    out = bytearray()
    for pos, h in batches:
        if h.compression == codec or h.is_control:
            out += buf[pos:pos + h.size]
            continue
        bb = BatchBuilder(compression=codec, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                          base_sequence=h.base_sequence, is_transactional=h.is_transactional,
                          timestamp_type=h.timestamp_type,
                          compression_level=None if level in (-1, None) else int(level))
        for r in decode_batch(buf, pos, header=h):
            bb.append(r.timestamp, r.key, r.value, r.headers)
        out += bb.build(0)
    return out, split_batches(out)


def _keyless_indexes(buf: Any, pos: int, h: Any) -> list[tuple[int, str | None]]:
    from moldau.protocol.records import decode_batch

    try:
        recs = decode_batch(buf, pos, header=h)
    except Exception:  # pragma: no cover
        return []
    return [(i, "Compacted topic cannot accept message without key.") for i, r in enumerate(recs)
            if r.key is None]


# --------------------------------------------------------------------------------------------- fetch sessions

INITIAL_EPOCH = 0
FINAL_EPOCH = -1


class CachedPartition:
    __slots__ = ("fetch_offset", "max_bytes", "current_leader_epoch", "high_watermark", "last_stable_offset",
                 "log_start_offset", "partition_index", "topic", "topic_id")

    def __init__(self, topic: str | None, topic_id: Any, partition_index: int, fetch_offset: int,
                 max_bytes: int,
                 current_leader_epoch: int = -1) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition_index = partition_index
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.current_leader_epoch = current_leader_epoch
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1

    def must_respond(self, error: int, has_records: bool, hw: int, lso: int, log_start: int) -> bool:
        """Whether an incremental response includes this partition; updates the cached values (Kafka's
        CachedPartition.maybeUpdateResponseData)."""
        respond = error != ErrorCode.NONE or has_records
        if hw != self.high_watermark:
            self.high_watermark = hw
            respond = True
        if lso != self.last_stable_offset:
            self.last_stable_offset = lso
            respond = True
        if log_start != self.log_start_offset:
            self.log_start_offset = log_start
            respond = True
        return respond


class FetchSession:
    __slots__ = ("session_id", "epoch", "partitions", "last_used", "created", "uses_topic_ids")

    def __init__(self, session_id: int, uses_topic_ids: bool, now: float) -> None:
        self.session_id = session_id
        self.epoch = 1  # the next expected epoch
        self.partitions: OrderedDict[tuple[Any, int], CachedPartition] = OrderedDict()
        self.last_used = now
        self.created = now
        self.uses_topic_ids = uses_topic_ids


class FetchSessionError(KafkaError):
    """A fetch session that cannot serve the request: FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH
    or FETCH_SESSION_TOPIC_ID_ERROR (answered as the Fetch response's top-level error)."""

    def __init__(self, code: int) -> None:
        super().__init__(None, code)


class FetchSessionCache:
    """Incremental fetch sessions (KIP-227), bounded; least recently used sessions idle for longer than
    ``eviction_s`` (or smaller than a new one) make room for new sessions."""

    def __init__(self, max_sessions: int = 1000, *, eviction_s: float = 120.0, clock: Any = time.monotonic,
                 rng: random.Random | None = None) -> None:
        self.max_sessions = max_sessions
        self.eviction_s = eviction_s
        self.clock = clock
        self.rng = rng or random.Random()
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()  # LRU order: oldest first

    def __len__(self) -> int:
        return len(self.sessions)

    def _new_id(self) -> int:
        while True:
            sid = self.rng.randint(1, 2**31 - 1)
            if sid not in self.sessions:
                return sid

    def create(self, uses_topic_ids: bool, partitions: list[CachedPartition]) -> FetchSession | None:
        """A new session holding ``partitions`` (None when the cache is full and nothing may be evicted)."""
        if self.max_sessions <= 0:
            return None
        now = self.clock()
        if len(self.sessions) >= self.max_sessions and not self._evict_one(now, len(partitions)):
            return None
        s = FetchSession(self._new_id(), uses_topic_ids, now)
        for cp in partitions:
            s.partitions[(cp.topic_id if uses_topic_ids else cp.topic, cp.partition_index)] = cp
        self.sessions[s.session_id] = s
        return s

    def _evict_one(self, now: float, new_size: int) -> bool:
        for sid, s in self.sessions.items():
            if now - s.last_used > self.eviction_s:
                del self.sessions[sid]
                return True
        # no stale session: evict the least recently used smaller session, if any
        for sid, s in self.sessions.items():
            if len(s.partitions) < new_size:
                del self.sessions[sid]
                return True
        return False

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    def get(self, session_id: int, epoch: int) -> FetchSession:
        """The session for an incremental fetch; raises FetchSessionError(70/71)."""
        s = self.sessions.get(session_id)
        if s is None:
            raise FetchSessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if epoch != s.epoch:
            raise FetchSessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        s.last_used = self.clock()
        self.sessions.move_to_end(session_id)
        return s

    @staticmethod
    def next_epoch(s: FetchSession) -> None:
        s.epoch = s.epoch + 1 if s.epoch < 2**31 - 1 else 1

    def topic_deleted(self, name: str, topic_id: Any) -> None:
        for s in self.sessions.values():
            for key in [k for k in s.partitions if k[0] == name or k[0] == topic_id]:
                # kept: the next fetch answers UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID for it
                s.partitions[key].high_watermark = -2
