"""``LogManager``: the log directories of a broker, their partitions, checkpoints and background work.

Per log directory (Kafka's files)::

    meta.properties                    version=1, cluster.id, node.id, directory.id
    .lock                              flock'ed while a manager owns the directory
    .kafka_cleanshutdown               present only between a clean close and the next start
    moldau-clean-shutdown-state        moldau's: the partitions' state at that close (clean_state.py)
    recovery-point-offset-checkpoint   offsets up to which each partition is known to be fsynced
    log-start-offset-checkpoint        log start offsets (DeleteRecords, retention)
    replication-offset-checkpoint      high watermarks
    <topic>-<partition>/               one PartitionLog each

At start (``load``): when ``.kafka_cleanshutdown`` is absent every partition is recovered from its recovery
point (batches re-validated, torn tail truncated, indexes rebuilt); when it is present the partitions
listed in the clean-shutdown state (``clean_state``, ``moldau-clean-shutdown-state``) open from it without
reading their files; the state and the marker are then removed. ``close``
flushes every partition, writes the checkpoints, the marker and then the clean-shutdown state.

``tick(now_ms)`` (the broker calls it about every second, on its event loop) rolls segments older than
``segment.ms``, applies retention every ``log.retention.check.interval.ms``, flushes partitions due by
``flush.ms`` or after a roll, writes the checkpoints every ``log.flush.offset.checkpoint.interval.ms`` and
drives the log cleaner (``self.cleaner``, compaction of ``cleanup.policy=compact`` logs, which also keeps
``cleaner-offset-checkpoint``; its passes run in its own thread and are swapped in during ``tick``).
fsyncs never run inside ``tick``: flushes and checkpoint writes go to ``flush_executor`` (default: a private
one-thread executor); ``drain()`` waits for them (tests, shutdown).
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import re
import shutil
import threading
import time
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, Iterator

from . import clean_state as _cs
from .checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CorruptCheckpointError,
    fsync_dir,
    new_kafka_uuid,
    read_meta_properties,
    read_offset_checkpoint,
    write_meta_properties,
    write_offset_checkpoint,
)
from .cleaner import LogCleaner
from .config import LogConfig
from .dir_move import ReplicaMove, ReplicaMoves, recover_moves
from .errors import InvalidTopicError, StorageError
from .local_log import fsync_segment
from .partition_log import PartitionLog, parse_partition_dir_name
from .segment import SegmentCache

log = logging.getLogger(__name__)

__all__ = ["LogManager"]

_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_LENGTH = 249


def validate_topic_name(topic: str | None) -> None:
    """Kafka's topic name rules (Topic.validate); raises InvalidTopicError (INVALID_TOPIC_EXCEPTION) with
    Kafka's message."""
    if not topic:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if topic in (".", ".."):
        raise InvalidTopicError("Topic name cannot be \".\" or \"..\"")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_LENGTH} characters, "
            f"topic name: {topic}"
        )
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise InvalidTopicError(
            f"Topic name \"{topic}\" is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )


def _log_failure(fut: Future) -> None:
    exc = fut.exception()
    if exc is not None:
        log.error("background log work failed: %r", exc)


def _default_cache_size() -> int:
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft > 0:
            return max(16, min(4096, soft // 4))
    except Exception:  # pragma: no cover
        pass
    return 256


def _fsync_recovered(seg: Any) -> None:
    try:
        fsync_segment(seg)
    except FileNotFoundError:  # deleted while loading (log start offset past the end)
        pass


class LogManager(ReplicaMoves):
    def __init__(
        self,
        log_dirs: list[str] | str,
        default_config: LogConfig | None = None,
        clock: Any = time,
        *,
        node_id: int | None = None,
        cluster_id: str | None = None,
        max_open_segments: int | None = None,
        flush_executor: Executor | None = None,
        retention_check_interval_ms: int = 300000,
        checkpoint_interval_ms: int = 60000,
        load: bool = True,
        cleaner_enable: bool = True,
        cleaner_backoff_ms: int = 15000,
        cleaner_dedupe_buffer_size: int = 134217728,
        cleaner_io_buffer_load_factor: float = 0.9,
        cleaner_executor: Executor | None = None,
        load_threads: int = 1,
    ) -> None:
        if isinstance(log_dirs, str):
            log_dirs = [d.strip() for d in log_dirs.split(",") if d.strip()]
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        self.log_dirs: list[str] = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config or LogConfig()
        self.load_threads = max(1, load_threads)  # partitions opened in parallel at start (clean shutdown)
        self.clock = clock
        self.node_id: int = 1 if node_id is None else node_id
        self._requested_node_id = node_id
        self.cluster_id: str | None = cluster_id
        self.cache = SegmentCache(max_open_segments or _default_cache_size())
        self._own_executor = flush_executor is None
        self.flush_executor: Executor | None = flush_executor
        self._pending: list[Future] = []
        self.retention_check_interval_ms = retention_check_interval_ms
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._dir_of: dict[tuple[str, int], str] = {}
        # partitions of deleted topics whose directories are still to be renamed to <dir>.<id>-delete
        # (detach_topic_for_delete, rename_detached): tracked no more, their logs still open
        self._detached: dict[tuple[str, int], PartitionLog] = {}
        # log dirs taken offline after a storage error (dir -> reason): no more writes, checkpoints or clean-
        # shutdown marker there until a restart (which recovers them)
        self.offline_dirs: dict[str, str] = {}
        self._locks: dict[str, int] = {}
        # replicas moving to another log dir (AlterReplicaLogDirs; dir_move.py)
        self.moves: dict[tuple[str, int], ReplicaMove] = {}
        # held while checkpoints are written and while a moved replica changes dir: a periodic checkpoint
        # never writes a dir's files from a view the move has made stale
        self._checkpoint_lock = threading.RLock()
        self._loaded = False
        self._closed = False
        self._last_retention_ms: int | None = None
        self._last_checkpoint_ms: int | None = None
        # log compaction (cleanup.policy=compact): see cleaner.py; its passes run in its own thread
        self.cleaner = LogCleaner(
            self,
            enabled=cleaner_enable,
            backoff_ms=cleaner_backoff_ms,
            dedupe_buffer_size=cleaner_dedupe_buffer_size,
            io_buffer_load_factor=cleaner_io_buffer_load_factor,
            executor=cleaner_executor,
        )
        if load:
            self.load()

    def _now_ms(self) -> int:
        return int(self.clock.time() * 1000)

    # ================================================================================================ load
    def load(self) -> None:
        """Lock the directories, read/write meta.properties, open (and if needed recover) every partition."""
        if self._loaded:
            return
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
            self._lock_dir(d)
        self._init_meta()
        recover_moves(self.log_dirs)
        for d in self.log_dirs:
            self._load_dir(d)
        self.cleaner.load_checkpoints()
        for d in self.log_dirs:
            # the clean-shutdown state goes with (before) the marker: never trusted after this start
            _cs.remove_clean_state(d)
            marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
            if os.path.exists(marker):
                os.unlink(marker)
                fsync_dir(d)
        self._loaded = True
        self._closed = False
        log.info("loaded %d partitions from %s", len(self._logs), ", ".join(self.log_dirs))

    def _lock_dir(self, d: str) -> None:
        if d in self._locks:
            return
        fd = os.open(os.path.join(d, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StorageError(f"log directory {d} is in use by another process") from None
        self._locks[d] = fd

    def _init_meta(self) -> None:
        metas = {d: read_meta_properties(d) for d in self.log_dirs}
        cluster_ids = {m["cluster.id"] for m in metas.values() if m and m.get("cluster.id")}
        if len(cluster_ids) > 1:
            raise StorageError(f"log directories belong to different clusters: {sorted(cluster_ids)}")
        if cluster_ids:
            stored = cluster_ids.pop()
            if self.cluster_id and self.cluster_id != stored:
                raise StorageError(
                    f"cluster.id {self.cluster_id} does not match the cluster.id {stored} in meta.properties"
                )
            self.cluster_id = stored
        elif not self.cluster_id:
            self.cluster_id = new_kafka_uuid()
        node_ids = {m["node.id"] for m in metas.values() if m and m.get("node.id")}
        if node_ids:
            try:
                stored_node = int(sorted(node_ids)[0])
            except ValueError:
                stored_node = self.node_id
            if self._requested_node_id is not None and stored_node != self._requested_node_id:
                log.warning(
                    "node.id %d differs from node.id %d in meta.properties; keeping the stored one",
                    self._requested_node_id, stored_node,
                )
            self.node_id = stored_node
        for d, m in metas.items():
            want = {
                "version": "1",
                "cluster.id": str(self.cluster_id),
                "node.id": str(self.node_id),
                "directory.id": (m or {}).get("directory.id") or new_kafka_uuid(),
            }
            if m != want and not (m and all(m.get(k) == v for k, v in want.items())):
                merged = dict(m or {})
                merged.update(want)
                write_meta_properties(d, merged)

    def _read_checkpoint(self, path: str) -> dict[tuple[str, int], int]:
        try:
            return read_offset_checkpoint(path)
        except CorruptCheckpointError as e:
            log.warning("%s; ignoring it", e)
            return {}

    def _load_dir(self, d: str) -> None:
        clean = os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
        rps = self._read_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT))
        starts = self._read_checkpoint(os.path.join(d, LOG_START_OFFSET_CHECKPOINT))
        hws = self._read_checkpoint(os.path.join(d, REPLICATION_OFFSET_CHECKPOINT))
        # after a clean shutdown, what the partitions' files hold (clean_state.py): no file of theirs is read
        states = _cs.read_clean_state(d) if clean else None
        warned = clean
        recovered: list[Any] = []  # segments recovered after an unclean shutdown, fsynced together below
        with os.scandir(d) as it:
            subdirs = sorted(e.name for e in it if e.is_dir())
        found: list[tuple[tuple[str, int], str]] = []
        for name in subdirs:
            path = os.path.join(d, name)
            if name.endswith("-delete"):
                log.info("removing %s (deleted before the last shutdown)", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            if name.endswith(("-future", "-stray")):
                log.warning("ignoring %s", path)
                continue
            parsed = parse_partition_dir_name(name)
            if parsed is None:
                continue
            if not warned:
                log.warning(
                    "%s: no clean shutdown marker; recovering partitions from their recovery points", d
                )
                warned = True
            if parsed in self._logs:
                raise StorageError(f"partition {name} exists in both {self._dir_of[parsed]} and {d}")
            found.append((parsed, path))

        def open_log(item: tuple[tuple[str, int], str]) -> PartitionLog:
            parsed, path = item
            # popped: each entry's memory is free again for the partitions opened after it
            st = states.pop(os.path.basename(path), None) if states else None
            if st is not None and starts.get(parsed, 0) > st[_cs.NEXT_OFFSET]:
                st = None  # the log start offset beyond the log end: the general load handles it
            try:
                return PartitionLog(
                    path,
                    self.default_config,
                    topic=parsed[0],
                    partition=parsed[1],
                    cache=self.cache,
                    clock=self.clock,
                    recovery_point=rps.get(parsed, 0),
                    log_start_offset=starts.get(parsed, 0),
                    high_watermark=hws.get(parsed),
                    clean_shutdown=clean,
                    deferred_fsync=recovered,
                    clean_state=st,
                )
            except OSError as e:
                raise StorageError(f"cannot load {path}: {e}") from e

        # After a clean shutdown a partition of the clean-shutdown state opens without a system call; any
        # other partition's load is a dozen small system calls (listing, metadata, epochs,
        # producer snapshot, the active segment's indexes and tail) that mostly wait (for the disk, or for a
        # CPU on a busy machine): threads overlap those waits. Each log holds one open segment (its active
        # one) while it loads, so chunks of at most half the segment cache keep the cache from evicting a
        # segment still being read. A recovery opens any number of segments: one partition at a time.
        threads = self.load_threads if clean else 1
        chunk = max(1, self.cache.capacity // 2)
        if threads > 1 and len(found) > 1:
            with ThreadPoolExecutor(threads, thread_name_prefix="moldau-log-load") as pool:
                for i in range(0, len(found), chunk):
                    part = found[i:i + chunk]
                    for (parsed, _path), plog in zip(part, pool.map(open_log, part)):
                        self._logs[parsed] = plog
                        self._dir_of[parsed] = d
        else:
            for item in found:
                self._logs[item[0]] = open_log(item)
                self._dir_of[item[0]] = d
        if recovered:
            # fsync releases the GIL: the disk sees many at once instead of one after another
            workers = min(16, len(recovered))
            with ThreadPoolExecutor(workers, thread_name_prefix="moldau-log-recovery") as pool:
                try:
                    list(pool.map(_fsync_recovered, recovered))
                except OSError as e:
                    raise StorageError(f"cannot fsync recovered segments in {d}: {e}") from e

    # ================================================================================================
    # partitions
    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def create(
        self, topic: str, partition: int, config: LogConfig | None = None, topic_id: Any = None
    ) -> PartitionLog:
        """Create the partition's log (in the directory holding the fewest partitions), or return the existing
        one with ``config`` applied. ``topic_id`` (UUID or Kafka's base64 form) goes to partition.metadata."""
        key = (topic, partition)
        if key in self._detached:  # a deleted partition's directory not renamed yet: out of the way first,
            for doomed in self.rename_detached([key]):  # and removed by the background worker
                self._submit(functools.partial(shutil.rmtree, doomed, True))
        existing = self._logs.get(key)
        if existing is not None:
            if config is not None:
                existing.update_config(config)
            if topic_id is not None and existing.topic_id is None:
                from .checkpoint import read_partition_metadata, write_partition_metadata

                write_partition_metadata(existing.dir, topic_id)
                existing.topic_id = read_partition_metadata(existing.dir)
            return existing
        d = self.dir_for_new_log()
        return self.register_log(self.build_log(d, topic, partition, config, topic_id), d)

    get_or_create_log = create

    # A new partition in three steps, so that its files can be made off the event loop: the directory is
    # chosen (dir_for_new_log) and the log registered (register_log) by the owner of the manager, while
    # build_log, which only creates files, may run in a worker thread.
    def dir_for_new_log(self) -> str:
        """The online log directory holding the fewest partitions."""
        counts = {d: 0 for d in self.log_dirs if d not in self.offline_dirs}
        if not counts:
            raise StorageError("every log directory is offline")
        if len(counts) > 1:  # counted only when there is a choice (a loop over every partition)
            for d in self._dir_of.values():
                if d in counts:
                    counts[d] += 1
        return min(counts, key=lambda x: counts[x])

    def build_log(self, d: str, topic: str, partition: int, config: LogConfig | None = None,
                  topic_id: Any = None) -> PartitionLog:
        """A new partition's log in log directory ``d`` (its directory, first segment and partition.metadata),
        not yet registered: touches no state of the manager, so it may run in a worker thread."""
        validate_topic_name(topic)
        if partition < 0:
            raise ValueError(f"invalid partition {partition}")
        return PartitionLog(
            os.path.join(d, f"{topic}-{partition}"),
            config or self.default_config,
            topic=topic,
            partition=partition,
            cache=self.cache,
            clock=self.clock,
            topic_id=topic_id,
            clean_shutdown=True,
        )

    def register_log(self, plog: PartitionLog, d: str) -> PartitionLog:
        """Track a log made by :meth:`build_log`."""
        key = (plog.topic, plog.partition)
        self._logs[key] = plog
        self._dir_of[key] = d
        return plog

    def _forget(self, topic: str, partition: int) -> PartitionLog | None:
        """Stop tracking the partition (its move, cleaning, directory); its log, or None when not here."""
        self._cancel_move(topic, partition)
        if (topic, partition) in self._logs:
            self.cleaner.forget(topic, partition)
        self._dir_of.pop((topic, partition), None)
        return self._logs.pop((topic, partition), None)

    def delete(self, topic: str, partition: int) -> bool:
        """Delete the partition's directory. Returns False when it did not exist."""
        plog = self._forget(topic, partition)
        if plog is None:
            return False
        plog.delete()
        return True

    def rename_for_delete(self, topic: str, partition: int) -> str | None:
        """Close the partition and rename its directory to ``<topic>-<p>.<id>-delete`` (Kafka's asynchronous
        delete); the caller removes that directory later, and a restart removes it if the broker stops first.
        The renamed path, or None when the partition is not here."""
        plog = self._forget(topic, partition)
        return None if plog is None else plog.delete(remove=False)

    def delete_topic(self, topic: str) -> int:
        keys = [k for k in self._logs if k[0] == topic]
        for t, p in keys:
            self.delete(t, p)
        return len(keys)

    def detach_topic_for_delete(self, topic: str) -> list[tuple[str, int]]:
        """Stop tracking every partition of ``topic`` here at once (no checkpoint, retention, flush or move
        sees them any more), without touching their files: :meth:`rename_detached` renames their directories
        later, a few at a time (thousands of renames stalled the event loop for 200 ms). Until then a new
        log of the same partition renames the old directory first (:meth:`create`), and :meth:`close`
        renames what is left. The keys detached."""
        keys = [k for k in self._logs if k[0] == topic]
        for t, p in keys:
            plog = self._forget(t, p)
            if plog is not None:
                self._detached[(t, p)] = plog
        return keys

    def awaits_rename(self, topic: str, partition: int) -> bool:
        """Whether the partition was detached (:meth:`detach_topic_for_delete`) and its directory is not
        renamed yet."""
        return (topic, partition) in self._detached

    def rename_detached(self, keys: list[tuple[str, int]]) -> list[str]:
        """Close the detached partitions ``keys`` (those not renamed yet) and rename their directories to
        ``<dir>.<id>-delete``, as :meth:`rename_for_delete`: the renamed directories, for the caller to
        remove (in a worker thread), or a restart."""
        out = []
        for key in keys:
            plog = self._detached.pop(key, None)
            if plog is not None:
                out.append(plog.delete(remove=False))
        return out

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._logs)

    def logs(self) -> Iterator[PartitionLog]:
        return iter(list(self._logs.values()))

    def topic_id(self, topic: str) -> str | None:
        for (t, _p), plog in self._logs.items():
            if t == topic and plog.topic_id:
                return plog.topic_id
        return None

    def dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def mark_offline(self, d: str, reason: str) -> bool:
        """Take log dir ``d`` offline; True when it was online."""
        if d in self.offline_dirs:
            return False
        self.offline_dirs[d] = reason
        return True

    def is_offline(self, topic: str, partition: int) -> bool:
        return bool(self.offline_dirs) and self._dir_of.get((topic, partition)) in self.offline_dirs

    def update_config(self, topic: str, config: LogConfig) -> None:
        for (t, _p), plog in self._logs.items():
            if t == topic:
                plog.update_config(config)

    # ================================================================================================
    # background
    def tick(self, now_ms: int | None = None) -> None:
        """Periodic work: time-based roll, retention, flushes due, checkpoints."""
        for _ in self.tick_steps(now_ms):
            pass

    def tick_steps(self, now_ms: int | None = None, slice_s: float = 0.005) -> Iterator[None]:
        """:meth:`tick` in steps: yields after each ``slice_s`` of work, so that an event loop driving it can
        serve others between the steps (with tens of thousands of partitions one tick takes long)."""
        if self._closed:
            return
        if now_ms is None:
            now_ms = self._now_ms()
        if self._last_retention_ms is None:
            self._last_retention_ms = now_ms - self.retention_check_interval_ms  # first tick checks at once
        if self._last_checkpoint_ms is None:
            self._last_checkpoint_ms = now_ms
        retention_due = now_ms - self._last_retention_ms >= self.retention_check_interval_ms
        offline = self.offline_dirs
        began = time.perf_counter()
        for n, (key, plog) in enumerate(list(self._logs.items())):
            if n % 64 == 63 and time.perf_counter() - began >= slice_s:
                yield
                if self._closed:
                    return
                began = time.perf_counter()
            if plog.closed or offline and self._dir_of.get(key) in offline:
                continue
            try:
                plog.maybe_roll_by_time(now_ms)
                if retention_due:
                    plog.enforce_retention(now_ms)
                if plog.flush_due(now_ms):
                    self._flush(plog)
            except Exception:
                log.exception("background work on %s-%d failed", plog.topic, plog.partition)
        if retention_due:
            self._last_retention_ms = now_ms
        try:
            self.cleaner.tick(now_ms)
        except Exception:
            log.exception("log cleaner tick failed")
        if now_ms - self._last_checkpoint_ms >= self.checkpoint_interval_ms:
            self._submit(self.checkpoint)
            self._last_checkpoint_ms = now_ms

    def _submit(self, fn: Any) -> None:
        if self.flush_executor is None:
            self.flush_executor = ThreadPoolExecutor(1, thread_name_prefix="moldau-log-flush")
        self._pending = [f for f in self._pending if not f.done()]
        fut = self.flush_executor.submit(fn)
        fut.add_done_callback(_log_failure)
        self._pending.append(fut)

    def _flush(self, plog: PartitionLog) -> None:
        self._submit(plog.flush)

    def drain(self, timeout: float | None = None) -> None:
        """Wait for the background flushes / checkpoint writes submitted so far."""
        pending, self._pending = self._pending, []
        for fut in pending:
            try:
                fut.result(timeout)
            except Exception:  # already logged
                pass

    def checkpoint(self) -> None:
        """Write the three offset checkpoint files of every directory."""
        with self._checkpoint_lock:
            for d in self.log_dirs:
                if d in self.offline_dirs:
                    continue
                self._checkpoint_dir(d, {k for k, dd in self._dir_of.items() if dd == d})

    def _checkpoint_dir(self, d: str, keys: set[tuple[str, int]]) -> None:
        """The three offset checkpoint files of log dir ``d``, with the partitions ``keys``."""
        logs = [(k, self._logs[k]) for k in sorted(keys) if k in self._logs]
        try:
            write_offset_checkpoint(
                os.path.join(d, RECOVERY_POINT_CHECKPOINT),
                [(t, p, lg.recovery_point) for (t, p), lg in logs],
            )
            write_offset_checkpoint(
                os.path.join(d, LOG_START_OFFSET_CHECKPOINT),
                [(t, p, lg.log_start_offset) for (t, p), lg in logs],
            )
            write_offset_checkpoint(
                os.path.join(d, REPLICATION_OFFSET_CHECKPOINT),
                [(t, p, lg.high_watermark) for (t, p), lg in logs],
            )
        except OSError as e:
            log.error("cannot write checkpoints in %s: %s", d, e)

    def close(self) -> None:
        """Clean shutdown: flush and close every partition, write checkpoints and the clean-shutdown
        marker."""
        for move in list(self.moves.values()):  # unfinished: the replicas stay where they are
            self._cancel_move(move.topic, move.partition)
        self.rename_detached(list(self._detached))  # deleted partitions: the next start removes them
        self.cleaner.shutdown()
        self.drain()
        if self._own_executor and self.flush_executor is not None:
            self.flush_executor.shutdown(wait=True)
            self.flush_executor = None
        if self._closed or not self._loaded:
            self._release_locks()
            return
        ok = True
        for key, plog in list(self._logs.items()):
            if self._dir_of.get(key) in self.offline_dirs:
                continue  # an offline dir is left as it is: recovered at the next start
            try:
                plog.close()
            except Exception:
                ok = False
                log.exception("closing %s-%d failed", plog.topic, plog.partition)
        self.checkpoint()
        if ok:
            for d in self.log_dirs:
                if d in self.offline_dirs:
                    continue
                fd = os.open(os.path.join(d, CLEAN_SHUTDOWN_FILE), os.O_WRONLY | os.O_CREAT, 0o644)
                os.fsync(fd)
                os.close(fd)
                fsync_dir(d)
                self._write_clean_state(d)
        self._closed = True
        self._loaded = False
        self._logs.clear()
        self._dir_of.clear()
        self._release_locks()

    def _write_clean_state(self, d: str) -> None:
        """What a clean start needs of the (closed) partitions of ``d`` (clean_state.py), after the marker
        (whose identity it records)."""
        entries = []
        for key, plog in self._logs.items():
            if self._dir_of.get(key) == d:
                st = plog.clean_state_entry()
                if st is not None:
                    entries.append(st)
        try:
            _cs.write_clean_state(d, entries)
        except OSError as e:
            log.warning("cannot write the clean-shutdown state of %s (%s): the next start reads every "
                        "partition's files", d, e)

    def _release_locks(self) -> None:
        for fd in self._locks.values():
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._locks.clear()

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
