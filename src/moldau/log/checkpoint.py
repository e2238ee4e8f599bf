"""Kafka's small text files in log directories.

* offset checkpoints (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``replication-offset-checkpoint``): a version line ``0``, a count line, then ``<topic> <partition>
  <offset>`` lines;
* ``leader-epoch-checkpoint`` (per partition): version ``0``, count, ``<epoch> <start offset>`` lines;
* ``partition.metadata`` (per partition): ``version: 0`` / ``topic_id: <base64url UUID>``;
* ``meta.properties`` (per log dir): Java properties with ``version=1``, ``cluster.id``, ``node.id``,
  ``directory.id``.

Every write goes to ``<file>.tmp``, is fsynced, renamed over the old file, and the directory is fsynced, so a
crash leaves either the old or the new file.

On the broker's event loop those fsyncs would stall every connection (on a busy ext4 disk one fsync can wait
for all of the disk's dirty data, seconds). Code that runs on the loop can collect its writes instead::

    with deferred_writes() as batch:
        metadata.create_topic(...)     # atomic_write() calls are queued, not performed
    await batch.flush()                # performed in order in one writer thread, then answer the client

A queued write is performed exactly as ``atomic_write`` performs it, in the order the writes were made (one
writer thread for the process); a write of the same path made later (queued or not) supersedes it, so a
stale queued content never lands over a newer one.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)

__all__ = [
    "RECOVERY_POINT_CHECKPOINT",
    "LOG_START_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "LEADER_EPOCH_CHECKPOINT",
    "CLEAN_SHUTDOWN_FILE",
    "META_PROPERTIES",
    "PARTITION_METADATA",
    "write_offset_checkpoint",
    "read_offset_checkpoint",
    "write_epoch_checkpoint",
    "read_epoch_checkpoint",
    "write_partition_metadata",
    "read_partition_metadata",
    "write_meta_properties",
    "read_meta_properties",
    "uuid_to_base64",
    "base64_to_uuid",
    "new_kafka_uuid",
    "CorruptCheckpointError",
    "DeferredWrites",
    "deferred_writes",
]

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
PARTITION_METADATA = "partition.metadata"


class CorruptCheckpointError(ValueError):
    pass


def fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_file(path: str, data: bytes, *, mode: int = 0o644) -> None:
    """Create (or truncate) ``path`` holding ``data``, fsynced (``mode``: permissions of a new file)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write_now(path: str, data: bytes, sync_dir: bool, mode: int) -> None:
    tmp = path + ".tmp"
    write_file(tmp, data, mode=mode)
    os.replace(tmp, path)
    if sync_dir:
        fsync_dir(os.path.dirname(path) or ".")


# Per path: the generation of its latest write (queued or done) and a lock held while it is written, so that
# a queued write that a later one superseded is skipped, and a write never interleaves with another of the
# same path. Entries are dropped when no newer write is pending.
_paths_lock = threading.Lock()
_generation: dict[str, int] = {}
_locks: dict[str, threading.Lock] = {}
_writer: ThreadPoolExecutor | None = None


def _claim(path: str) -> tuple[threading.Lock, int]:
    with _paths_lock:
        gen = _generation.get(path, 0) + 1
        _generation[path] = gen
        lock = _locks.setdefault(path, threading.Lock())
    return lock, gen


def _release(path: str, gen: int) -> None:
    with _paths_lock:
        if _generation.get(path) == gen:  # nothing newer claimed the path: forget it
            del _generation[path]
            _locks.pop(path, None)


def _write_claimed(path: str, data: bytes, sync_dir: bool, mode: int, lock: threading.Lock, gen: int) -> None:
    with lock:
        with _paths_lock:
            superseded = _generation.get(path) != gen
        try:
            if not superseded:
                _atomic_write_now(path, data, sync_dir, mode)
        except FileNotFoundError:
            if os.path.isdir(os.path.dirname(path) or ".") and os.path.exists(path + ".tmp"):
                raise
            # its directory was deleted while the write waited or ran (a topic deleted while the files of its
            # creation were queued; the directory may already hold the next topic of that name, which
            # writes its own): nothing left to write to
            log.info("skipped writing %s: its directory was deleted meanwhile", path)
        finally:
            if not superseded:
                _release(path, gen)


class DeferredWrites:
    """The ``atomic_write`` calls made inside a :func:`deferred_writes` block, performed by :meth:`flush`."""

    __slots__ = ("_jobs", "closed")

    def __init__(self) -> None:
        self._jobs: list[tuple[str, bytes, bool, int, threading.Lock, int]] = []
        self.closed = False

    def __len__(self) -> int:
        return len(self._jobs)

    def add(self, path: str, data: bytes, sync_dir: bool, mode: int) -> None:
        lock, gen = _claim(path)
        self._jobs.append((path, bytes(data), sync_dir, mode, lock, gen))

    def run(self) -> None:
        """Perform the queued writes in order (in the calling thread)."""
        jobs, self._jobs = self._jobs, []
        for job in jobs:
            _write_claimed(*job)

    async def flush(self) -> None:
        """Perform the queued writes in the writer thread; returns once they are durable."""
        if not self._jobs:
            return
        global _writer
        if _writer is None:
            _writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="moldau-checkpoint-writer")
        await asyncio.get_running_loop().run_in_executor(_writer, self.run)


_deferred: contextvars.ContextVar[DeferredWrites | None] = contextvars.ContextVar(
    "moldau_deferred_writes", default=None)


@contextlib.contextmanager
def deferred_writes() -> Iterator[DeferredWrites]:
    """Queue the ``atomic_write`` calls of this block (this task only) instead of performing them.

    The caller must ``await batch.flush()`` afterwards (before answering a client: the writes are durable
    only then). Tasks created inside the block inherit the context but not the deferral: once the block is
    left, their writes are performed at once.
    """
    batch = DeferredWrites()
    token = _deferred.set(batch)
    try:
        yield batch
    finally:
        batch.closed = True
        _deferred.reset(token)


def atomic_write(path: str, data: bytes, *, sync_dir: bool = True, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data`` atomically: ``<path>.tmp`` written and fsynced, renamed over ``path``,
    then (``sync_dir``) the directory fsynced so the rename survives a crash. ``mode``: the permissions of
    the new file (0o600 for secrets). Inside :func:`deferred_writes` the write is queued instead."""
    batch = _deferred.get()
    if batch is not None and not batch.closed:
        batch.add(path, data, sync_dir, mode)
        return
    lock, gen = _claim(path)
    _write_claimed(path, data, sync_dir, mode, lock, gen)


def _write_lines(path: str, rows: list[str]) -> None:
    text = "0\n" + f"{len(rows)}\n" + "".join(r + "\n" for r in rows)
    atomic_write(path, text.encode("utf-8"))


def _read_rows(path: str, width: int) -> list[list[str]]:
    try:
        # binary + decode: a text-mode open costs more than the read (once per partition at start)
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8").splitlines()
    except FileNotFoundError:
        return []
    except UnicodeDecodeError:
        raise CorruptCheckpointError(f"{path}: not UTF-8") from None
    if len(lines) < 2:
        raise CorruptCheckpointError(f"{path}: missing version/count lines")
    if lines[0].strip() != "0":
        raise CorruptCheckpointError(f"{path}: unsupported checkpoint version {lines[0]!r}")
    try:
        count = int(lines[1].strip())
    except ValueError:
        raise CorruptCheckpointError(f"{path}: bad count line {lines[1]!r}") from None
    rows = [ln.split() for ln in lines[2:] if ln.strip()]
    if len(rows) != count:
        raise CorruptCheckpointError(f"{path}: expected {count} entries, found {len(rows)}")
    for r in rows:
        if len(r) != width:
            raise CorruptCheckpointError(f"{path}: malformed line {' '.join(r)!r}")
    return rows


def write_offset_checkpoint(
    path: str, entries: Mapping[tuple[str, int], int] | Iterable[tuple[str, int, int]]
) -> None:
    items = (
        [(t, p, o) for (t, p), o in entries.items()] if isinstance(entries, Mapping) else list(entries)
    )
    _write_lines(path, [f"{t} {p} {o}" for t, p, o in items])


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset}; {} when the file is missing. Raises CorruptCheckpointError."""
    out: dict[tuple[str, int], int] = {}
    for topic, part, off in _read_rows(path, 3):
        try:
            out[(topic, int(part))] = int(off)
        except ValueError:
            raise CorruptCheckpointError(f"{path}: malformed line {topic} {part} {off}") from None
    return out


def write_epoch_checkpoint(path: str, entries: Iterable[tuple[int, int]]) -> None:
    _write_lines(path, [f"{e} {o}" for e, o in entries])


def read_epoch_checkpoint(path: str) -> list[tuple[int, int]]:
    out = []
    for epoch, off in _read_rows(path, 2):
        try:
            out.append((int(epoch), int(off)))
        except ValueError:
            raise CorruptCheckpointError(f"{path}: malformed line {epoch} {off}") from None
    return out


# ------------------------------------------------------------------------------------------------- ids


def uuid_to_base64(u: uuid.UUID | str | bytes) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, no padding (22 characters)."""
    if isinstance(u, str):
        if len(u) == 22:
            return u
        u = uuid.UUID(u)
    raw = u.bytes if isinstance(u, uuid.UUID) else bytes(u)
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def base64_to_uuid(s: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))


def new_kafka_uuid() -> str:
    """A random id in Kafka's form (Uuid.randomUuid: never the reserved ZERO/METADATA ids, never starts with
    '-' so it can be a command-line argument)."""
    while True:
        s = uuid_to_base64(uuid.uuid4())
        if not s.startswith("-") and s not in ("AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"):
            return s


# ------------------------------------------------------------------------------------------------- files


def write_partition_metadata(directory: str, topic_id: uuid.UUID | str | bytes) -> None:
    text = f"version: 0\ntopic_id: {uuid_to_base64(topic_id)}\n"
    atomic_write(os.path.join(directory, PARTITION_METADATA), text.encode("ascii"))


def read_partition_metadata(directory: str) -> str | None:
    """The topic id (base64 form) or None when the file is missing or unreadable."""
    try:
        with open(os.path.join(directory, PARTITION_METADATA), "rb") as f:
            text = f.read().decode("ascii")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    fields = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip()
    if fields.get("version") != "0":
        log.warning("%s/%s: unsupported version %r", directory, PARTITION_METADATA, fields.get("version"))
        return None
    topic_id = fields.get("topic_id")
    try:  # a torn file may hold part of the id: never take it for another topic's
        if topic_id is None or len(topic_id) != 22 or len(base64.urlsafe_b64decode(topic_id + "==")) != 16:
            raise ValueError(topic_id)
    except ValueError:
        log.warning("%s/%s: malformed topic id %r; ignoring the file", directory, PARTITION_METADATA,
                    topic_id)
        return None
    return topic_id


def write_meta_properties(directory: str, props: Mapping[str, str]) -> None:
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    lines = ["#", f"#{stamp}"] + [f"{k}={v}" for k, v in sorted(props.items())]
    atomic_write(os.path.join(directory, META_PROPERTIES), ("\n".join(lines) + "\n").encode("utf-8"))


def read_meta_properties(directory: str) -> dict[str, str] | None:
    try:
        with open(os.path.join(directory, META_PROPERTIES), encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                k, v = line.split(sep, 1)
                out[k.strip()] = v.strip()
                break
    return out
