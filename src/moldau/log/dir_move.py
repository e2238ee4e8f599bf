"""Moving a replica to another log dir (AlterReplicaLogDirs, KIP-113), crash-safe.

While the replica keeps serving, its files are copied into ``<dest>/<topic>-<p>.<id>-future`` (the future
replica, which DescribeLogDirs shows with ``is_future_key``): copy passes in a worker thread, each copying
only what changed since the last (a segment that grew: its new bytes; a rewritten or new file: whole; a file
gone: removed), until a pass copies little. The last pass and the swap run on the event loop (no append,
read or fetch interleaves), under the log's lock with its file handles closed:

1. the delta is copied and everything in the future directory fsynced;
2. the destination dir's offset checkpoints are written with the partition in them (its source dir's still
   hold it too);
3. ``<src>/<topic>-<p>`` is renamed ``<src>/<topic>-<p>.<id>-moved``;
4. the future directory is renamed ``<dest>/<topic>-<p>``; the log's paths follow it;
5. the source dir's checkpoints are rewritten without the partition, the ``-moved`` directory removed.

A restart keeps exactly one replica (``recover_moves``, before the log dirs load): a ``-future`` directory is
an unfinished copy and is removed (the move is abandoned; the original serves); a ``-moved`` directory is
removed when ``<topic>-<p>`` exists in some log dir (step 4 happened), otherwise renamed back (a stop
between steps 3 and 4).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
import uuid
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol

from .checkpoint import fsync_dir
from .partition_log import parse_partition_dir_name

if TYPE_CHECKING:
    from .cleaner import LogCleaner
    from .partition_log import PartitionLog

log = logging.getLogger(__name__)

FUTURE_SUFFIX = "-future"
MOVED_SUFFIX = "-moved"
# copy passes in the worker thread before the final one on the event loop, and the bytes a pass may copy
# for the next to be the final one
MAX_PASSES = 20
FINAL_PASS_BYTES = 4 * 1024 * 1024
_CHUNK = 1 << 20


@dataclass(slots=True)
class ReplicaMove:
    topic: str
    partition: int
    source_dir: str
    dest_dir: str
    future_path: str
    # file name -> (size, mtime_ns, inode) of the source file when last copied
    copied: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    cancelled: bool = False
    task: Any = None

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


def future_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def _partition_of(name: str, suffix: str) -> tuple[str, int] | None:
    """(topic, partition) of a ``<topic>-<p>.<id><suffix>`` directory name."""
    if not name.endswith(suffix):
        return None
    stem = name[: -len(suffix)]
    base, dot, _id = stem.rpartition(".")
    return parse_partition_dir_name(base) if dot else None


def recover_moves(log_dirs: list[str]) -> None:
    """At start, before the log dirs load: settle moves a stop interrupted (module docstring)."""
    present: set[tuple[str, int]] = set()
    entries: list[tuple[str, str]] = []
    for d in log_dirs:
        try:
            with os.scandir(d) as it:
                names = [e.name for e in it if e.is_dir()]
        except OSError:
            continue
        for name in names:
            parsed = parse_partition_dir_name(name)
            if parsed is not None and not name.endswith(("-delete", "-stray", FUTURE_SUFFIX, MOVED_SUFFIX)):
                present.add(parsed)
            entries.append((d, name))
    for d, name in entries:
        path = os.path.join(d, name)
        if _partition_of(name, FUTURE_SUFFIX) is not None:
            log.warning("removing %s: an unfinished replica move (the replica stays where it was)", path)
            shutil.rmtree(path, ignore_errors=True)
            continue
        key = _partition_of(name, MOVED_SUFFIX)
        if key is None:
            continue
        if key in present:
            log.info("removing %s: the replica was moved before the last stop", path)
            shutil.rmtree(path, ignore_errors=True)
        else:
            back = os.path.join(d, f"{key[0]}-{key[1]}")
            log.warning("restoring %s as %s: the stop interrupted a replica move", path, back)
            os.rename(path, back)
            fsync_dir(d)
            present.add(key)


class Throttle:
    """At most ``rate`` bytes per second (``replica.alter.log.dirs.io.max.bytes.per.second``)."""

    def __init__(self, rate: int | None) -> None:
        self.rate = rate if rate and rate > 0 else None
        self.start = time.monotonic()
        self.done = 0

    def consume(self, n: int) -> None:
        if self.rate is None:
            return
        self.done += n
        ahead = self.done / self.rate - (time.monotonic() - self.start)
        if ahead > 0:
            time.sleep(ahead)


def _copy_range(move: ReplicaMove, src: str, dst: str, start: int, end: int, throttle: Throttle) -> None:
    chunk_size = min(_CHUNK, throttle.rate) if throttle.rate else _CHUNK
    with open(src, "rb") as fi, open(dst, "r+b" if start else "wb") as fo:
        fi.seek(start)
        fo.seek(start)
        fo.truncate(start)
        left = end - start
        while left > 0 and not move.cancelled:
            chunk = fi.read(min(chunk_size, left))
            if not chunk:
                break
            fo.write(chunk)
            left -= len(chunk)
            throttle.consume(len(chunk))


def copy_pass(move: ReplicaMove, src_path: str, final: bool = False, rate: int | None = None) -> int:
    """Bring the future directory up to the source directory's files; the bytes copied. ``final``: every
    file but the (append-only) segments is copied whole, whatever its size and time say. ``rate``: at most
    that many bytes per second."""
    throttle = Throttle(None if final else rate)
    copied = 0
    names = set(os.listdir(src_path))
    for name in sorted(names):
        if move.cancelled:
            return copied
        src = os.path.join(src_path, name)
        dst = os.path.join(move.future_path, name)
        try:
            st = os.stat(src)
        except FileNotFoundError:
            names.discard(name)
            continue
        if not os.path.isfile(src):
            continue
        sig = (st.st_size, st.st_mtime_ns, st.st_ino)
        before = move.copied.get(name)
        if before == sig and not (final and not name.endswith(".log")):
            continue
        start = 0
        if (before is not None and name.endswith(".log") and before[2] == st.st_ino
                and before[0] <= st.st_size and os.path.exists(dst)):
            start = before[0]  # an append-only segment that grew: only its new bytes
        try:
            _copy_range(move, src, dst, start, st.st_size, throttle)
        except FileNotFoundError:
            names.discard(name)
            continue
        if move.cancelled:
            return copied
        copied += st.st_size - start
        move.copied[name] = sig
    for name in list(move.copied):
        if name not in names:
            move.copied.pop(name, None)
            try:
                os.unlink(os.path.join(move.future_path, name))
            except FileNotFoundError:
                pass
    return copied


def fsync_tree(path: str) -> None:
    for name in os.listdir(path):
        fd = os.open(os.path.join(path, name), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    fsync_dir(path)


def future_lag(move: ReplicaMove, plog: PartitionLog) -> int:
    """Offsets the future replica is behind the current one: from the first segment not yet fully copied."""
    leo = plog.log_end_offset
    for seg in plog.segments:
        name = os.path.basename(seg.log_path)
        done = move.copied.get(name)
        if done is None or done[0] < seg.size:
            return max(leo - seg.base_offset, 0)
    return 0


def future_size(move: ReplicaMove) -> int:
    return sum(size for name, (size, _m, _i) in move.copied.items() if name.endswith(".log"))


async def run_move(manager: Any, move: ReplicaMove, rate: Callable[[], int | None] = lambda: None
                   ) -> None:
    """Copy passes in a worker thread (at most ``rate()`` bytes per second), then the final pass and the
    swap on the event loop. ``manager``: the LogManager (``get``, ``finish_move``, ``abandon_move``)."""
    loop = asyncio.get_running_loop()
    try:
        for _ in range(MAX_PASSES):
            plog = manager.get(move.topic, move.partition)
            if move.cancelled or plog is None:
                break
            n = await loop.run_in_executor(None, copy_pass, move, plog.dir, False, rate())
            if n <= FINAL_PASS_BYTES:
                break
        if move.cancelled or manager.get(move.topic, move.partition) is None:
            manager.abandon_move(move)
            return
        manager.finish_move(move)
    except asyncio.CancelledError:
        manager.abandon_move(move)
        raise
    except Exception:  # noqa: BLE001 - the replica stays where it was
        log.exception("moving %s-%d to %s failed", move.topic, move.partition, move.dest_dir)
        manager.abandon_move(move)


class _MoveHost(Protocol):
    """What :class:`ReplicaMoves` needs of its ``LogManager``."""

    @property
    def _dir_of(self) -> dict[tuple[str, int], str]: ...

    @property
    def _logs(self) -> dict[tuple[str, int], PartitionLog]: ...

    @property
    def moves(self) -> dict[tuple[str, int], ReplicaMove]: ...

    @property
    def cleaner(self) -> LogCleaner: ...

    @property
    def _checkpoint_lock(self) -> AbstractContextManager[Any]: ...

    def _checkpoint_dir(self, d: str, keys: set[tuple[str, int]]) -> None: ...

    def _cancel_move(self, topic: str, partition: int) -> None: ...

    def abandon_move(self, move: ReplicaMove) -> None: ...


class ReplicaMoves:
    """``LogManager``'s replica moves between its log dirs (AlterReplicaLogDirs): start, cancel, abandon and
    the final swap; the copy passes run in ``run_move``."""

    def start_move(self: _MoveHost, topic: str, partition: int, dest: str) -> ReplicaMove | None:
        """Begin moving the partition's replica to log dir ``dest`` (one of ``log_dirs``, online): the move
        to run with ``dir_move.run_move``, or None when there is nothing to start (already there, or
        already moving there). A move to another dir replaces a running one."""
        key = (topic, partition)
        source = self._dir_of[key]
        running = self.moves.get(key)
        if running is not None:
            if running.dest_dir == dest:
                return None
            self._cancel_move(topic, partition)
        if source == dest:
            return None
        future = os.path.join(dest, future_dir_name(topic, partition))
        os.makedirs(future)
        fsync_dir(dest)
        move = ReplicaMove(topic, partition, source, dest, future)
        self.moves[key] = move
        self.cleaner.pause(topic, partition)
        log.info("moving %s-%d from %s to %s", topic, partition, source, dest)
        return move

    def _cancel_move(self: _MoveHost, topic: str, partition: int) -> None:
        move = self.moves.get((topic, partition))
        if move is not None:
            move.cancelled = True
            task = move.task
            if task is not None and not task.done():
                try:
                    task.cancel()
                except RuntimeError:  # its event loop is closed: the task never runs again anyway
                    pass
            self.abandon_move(move)

    def abandon_move(self: _MoveHost, move: ReplicaMove) -> None:
        """Drop the future replica; the replica stays where it is."""
        move.cancelled = True
        if self.moves.get(move.key) is move:
            del self.moves[move.key]
            self.cleaner.resume(move.topic, move.partition)
            log.info("abandoned moving %s-%d to %s", move.topic, move.partition, move.dest_dir)
        shutil.rmtree(move.future_path, ignore_errors=True)

    def finish_move(self: _MoveHost, move: ReplicaMove) -> None:
        """The final copy pass and the swap (dir_move.py steps 1-5). Runs on the event loop: nothing reads or
        appends meanwhile."""
        key = move.key
        plog = self._logs[key]
        plog.flush()
        src_path = plog.dir
        final = os.path.join(move.dest_dir, os.path.basename(src_path))
        moved = f"{src_path}.{uuid.uuid4().hex}-moved"

        def swap() -> None:
            copy_pass(move, src_path, final=True)  # under the log's lock: nothing changes any more
            fsync_tree(move.future_path)
            dest_keys = {k for k, dd in self._dir_of.items() if dd == move.dest_dir} | {key}
            self._checkpoint_dir(move.dest_dir, dest_keys)
            os.rename(src_path, moved)
            fsync_dir(move.source_dir)
            os.rename(move.future_path, final)
            fsync_dir(move.dest_dir)

        with self._checkpoint_lock:
            plog.relocate(final, swap)
            self._dir_of[key] = move.dest_dir
            del self.moves[key]
            self._checkpoint_dir(move.source_dir,
                                 {k for k, dd in self._dir_of.items() if dd == move.source_dir})
        self.cleaner.resume(move.topic, move.partition)
        self.cleaner._write_checkpoints({move.source_dir, move.dest_dir})
        shutil.rmtree(moved, ignore_errors=True)
        log.info("moved %s-%d from %s to %s", move.topic, move.partition, move.source_dir, move.dest_dir)
