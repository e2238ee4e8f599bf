"""Log compaction: Kafka's log cleaner for topics whose ``cleanup.policy`` contains ``compact``.

What it does (Kafka 3.x semantics)
----------------------------------
A compacted log is split into a *clean* section (already compacted: from the first segment to the first
dirty offset, kept per partition in ``<log.dir>/cleaner-offset-checkpoint``), a *dirty* section (from the
first dirty offset up to the first uncleanable offset) and the uncleanable tail. The first uncleanable offset
is the smallest of the last stable offset (which is <= the high watermark), the active segment's base offset
and - with ``min.compaction.lag.ms`` - the base of the first dirty segment holding a record younger than the
lag; it is rounded down to a segment boundary (only whole, non-active segments are cleaned).

A log is chosen when its dirty ratio (dirty bytes / (clean + dirty bytes)) is >= ``min.cleanable.dirty.ratio``
(Kafka compares with ``>``; moldau uses ``>=`` and requires at least one dirty byte), or when
``max.compaction.lag.ms`` has passed for the first batch of a dirty segment, or - when nothing else is
cleanable - when a delete horizon it recorded earlier has passed (Kafka's ``latestDeleteHorizon`` path, which
removes tombstones in quiet logs). The filthiest log goes first, one log at a time (log.cleaner.threads=1).
With ``compact``, the active segment also rolls after ``min(segment.ms, max.compaction.lag.ms)`` so that old
data becomes cleanable (Kafka's ``maxSegmentMs``).

One cleaning pass:

1. *Offset map*: key -> offset of its latest record, over the dirty segments (control batches and data of
   aborted transactions skipped). The map is bounded by ``log.cleaner.dedupe.buffer.size`` *
   ``log.cleaner.io.buffer.load.factor`` / ``MAP_ENTRY_BYTES``; when it fills, the pass stops at that segment
   and the rest waits for the next pass. Keys longer than 15 bytes are stored as their 16-byte BLAKE2b digest
   (Kafka stores an MD5 hash of every key).
2. *Groups*: every segment from the start of the log up to the end of the mapped range, in consecutive groups
   whose total size is <= ``segment.bytes`` (and offset span <= Int.MaxValue): each group becomes one cleaned
   segment named after the group's first base offset. Offsets never change.
3. *Filter*, batch by batch (Kafka's ``MemoryRecords.filterTo`` with the cleaner's filter):

   * a record is kept when it has a key, it is the latest for its key (offset >= map entry, or the key is not
     in the map), and it is not a tombstone past its delete horizon;
   * **delete horizon** (Kafka 3.x, KIP-534): when a v2 batch that keeps a tombstone (or a transaction marker
     that may go) is rewritten for the first time, it gets attribute bit 6 (delete horizon flag) and its base
     timestamp becomes the horizon ``now + delete.retention.ms`` (record timestamp deltas are re-encoded from
     it, so record timestamps do not change). Tombstones are removed by the first pass at/after the horizon.
     The horizon is carried by the batch, so it survives restarts; moldau never uses segment mtimes for it;
   * data batches of **aborted transactions** are removed (their records are never put in the offset map);
   * a **transaction marker** (control batch) stays while records of its transaction remain in the log
     (Kafka's CleanedTransactionMetadata: data batches of that producer seen earlier in the same pass); once
     they are gone it gets a delete horizon and goes at the first pass after it. The .txnindex of a cleaned
     segment keeps only aborted transactions whose data was still present in the pass;
   * **producer state**: the batch holding the last data offset of a still-active producer (idempotent or
     transactional) is kept even when all its records go, as an empty batch (Kafka's ``RETAIN_EMPTY``:
     header only, 0 records, same base/last offset, producer id/epoch/base sequence, uncompressed), so the
     producer's sequence state can be rebuilt from the log. Other emptied batches are dropped;
   * a batch whose records all stay (and that needs no horizon) is copied byte for byte; otherwise the
     retained records are re-batched with the original base offset, **original last offset delta** (so the
     last sequence stays), producer id/epoch/base sequence, partition leader epoch, transactional/control
     flags and timestamp type, and recompressed with the same codec (default level).

4. *Swap* (crash-safe, Kafka's protocol): the worker writes ``<base>.log.cleaned`` (+ ``.index.cleaned``,
   ``.timeindex.cleaned``, ``.txnindex.cleaned``) and fsyncs them. Then, on the event loop, under the lock
   (``PartitionLog.replace_segments``): ``.cleaned`` -> ``.swap`` (the ``.log`` first; a ``.log.swap`` is the
   commit point; directory fsynced), the old segments' files are deleted (directory fsynced), ``.swap`` ->
   final names, and the in-memory segment list is updated. At load (``recover_interrupted_swaps``) leftover
   ``.cleaned`` files are deleted and each ``<base>.log.swap`` is completed: segment files with a base offset
   in ``[base, next offset of the swap)`` are deleted and the ``.swap`` files renamed. The cleaned segment's
   file modification time is set to the newest of the old segments' (as Kafka does, for time retention of
   empty segments). Old files are deleted at once (no ``file.delete.delay.ms``): moldau reads with ``pread``
   into memory, so no reader holds a file region.

5. The checkpoint file gets the end of the mapped range as the partition's new first dirty offset (written by
   the log manager's background executor, Kafka's format: ``0``, count, ``<topic> <partition> <offset>``).

Threading: selection and swap run on the thread calling ``tick`` (the broker's event loop); steps 1-3 run in
the cleaner's own one-thread executor, from file descriptors opened on the loop thread for immutable
(non-active) segments, and never touch the ``PartitionLog``. The swap checks that the old segments are still
the log's (same objects, same sizes, not active); if retention, DeleteRecords or truncation changed them
meanwhile, the cleaned files are dropped and the log is simply cleaned again later.

Simplifications (documented, deliberate): the cleaned groups are swapped after the whole pass (Kafka swaps
each group as it is done); the delete horizon of a quiet log is remembered in memory only, so after a restart
a log with only expired tombstones is cleaned again when it becomes dirty (as in Kafka); no I/O throttling
(``log.cleaner.io.max.bytes.per.second``); a partition whose cleaning fails with an unexpected error is marked
uncleanable until restart (Kafka's uncleanablePartitions). Batches whose last offset is below the log start
offset are cleaned like the others (reads never return them).
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import threading
import time
import weakref
from bisect import bisect_right
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Protocol, Sequence

from crc32c import crc32c

from moldau.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_FLAG,
    DELETE_HORIZON_FLAG,
    F_ATTRIBUTES,
    F_BASE_OFFSET,
    F_BASE_SEQUENCE,
    F_BASE_TIMESTAMP,
    F_BATCH_LENGTH,
    F_CRC,
    F_LAST_OFFSET_DELTA,
    F_LEADER_EPOCH,
    F_MAGIC,
    F_MAX_TIMESTAMP,
    F_PRODUCER_EPOCH,
    F_PRODUCER_ID,
    F_RECORDS_COUNT,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
    control_type,
    encode_record,
    seal_batch,
)

from .checkpoint import (
    CorruptCheckpointError,
    fsync_dir,
    read_offset_checkpoint,
    write_file,
    write_offset_checkpoint,
)
from .config import LONG_MAX
from .index import TxnIndex
from .segment import segment_file_name

if TYPE_CHECKING:  # pragma: no cover
    from .config import LogConfig
    from .producer_state import ProducerStateManager
    from .segment import Segment
    from .txn_state import AbortedTransactions


class PartitionLog(Protocol):
    """What the cleaner uses of a ``partition_log.PartitionLog`` (a Protocol: the partition log imports the
    cleaner, so the cleaner does not import it back)."""

    topic: str
    partition: int
    config: LogConfig
    producer_state: ProducerStateManager
    aborted: AbortedTransactions
    byte_offsets: Any  # byte_offsets.ByteOffsetIndex | None: the partition's Kafka 0.7 byte offsets

    @property
    def dir(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    @property
    def segments(self) -> Sequence[Segment]: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    def byte_offsets_cover(self, upto: int) -> Any: ...

    def replace_segments(
        self, old: Sequence[Segment], sizes: Sequence[int], aborted: list[tuple[int, int, int, int]]
    ) -> Segment | None: ...


class LogManager(Protocol):
    """What the cleaner uses of its ``manager.LogManager`` (which imports the cleaner)."""

    log_dirs: list[str]

    def get(self, topic: str, partition: int) -> PartitionLog | None: ...
    def logs(self) -> Iterator[PartitionLog]: ...
    def dir_of(self, topic: str, partition: int) -> str | None: ...
    def _submit(self, fn: Any) -> None: ...
    def _now_ms(self) -> int: ...

log = logging.getLogger(__name__)

__all__ = [
    "LogCleaner",
    "CleanerStats",
    "CLEANER_OFFSET_CHECKPOINT",
    "DELETE_HORIZON_FLAG",
    "recover_interrupted_swaps",
    "cleaned_path",
    "commit_cleaned",
    "finish_swap",
    "discard_cleaned",
]

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
INT_MAX = 2147483647
#: what one offset-map entry is charged against log.cleaner.dedupe.buffer.size (a Python dict entry with a
#: <= 16-byte bytes key and an int value costs about this much; Kafka charges 24 bytes per entry)
MAP_ENTRY_BYTES = 128
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_WRITE_CHUNK = 1 << 20
_READ_BLOCK = 1 << 20


# ================================================================================================ swap files


def cleaned_path(directory: str, base: int, suffix: str) -> str:
    """``<dir>/<base><suffix>.cleaned`` (suffix: .log, .index, .timeindex, .txnindex)."""
    return os.path.join(directory, segment_file_name(base, suffix) + CLEANED_SUFFIX)


def _swap_path(directory: str, base: int, suffix: str) -> str:
    return os.path.join(directory, segment_file_name(base, suffix) + SWAP_SUFFIX)


def _rename_if_exists(src: str, dst: str) -> bool:
    try:
        os.replace(src, dst)
        return True
    except FileNotFoundError:
        return False


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def commit_cleaned(directory: str, base: int) -> None:
    """``.cleaned`` -> ``.swap`` for the cleaned segment at ``base``: the ``.log`` first (the commit point),
    then the index files; the directory is fsynced."""
    os.replace(cleaned_path(directory, base, ".log"), _swap_path(directory, base, ".log"))
    for suffix in SEGMENT_SUFFIXES[1:]:
        _rename_if_exists(cleaned_path(directory, base, suffix), _swap_path(directory, base, suffix))
    fsync_dir(directory)


def finish_swap(directory: str, base: int) -> None:
    """``.swap`` -> final names (``.log`` first). The old segments' files must be gone already."""
    for suffix in SEGMENT_SUFFIXES:
        _rename_if_exists(_swap_path(directory, base, suffix),
                          os.path.join(directory, segment_file_name(base, suffix)))


def discard_cleaned(directory: str, base: int) -> None:
    for suffix in SEGMENT_SUFFIXES:
        _unlink(cleaned_path(directory, base, suffix))


def _scan_next_offset(path: str, base: int) -> int:
    """Offset after the last whole batch of a segment file (``base`` when empty); stops at a bad batch."""
    nxt = base
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return nxt
    try:
        size = os.fstat(fd).st_size
        for _pos, f, _v in _iter_batches(fd, size, full=False, check=False):
            nxt = f[F_BASE_OFFSET] + f[F_LAST_OFFSET_DELTA] + 1
    except _BadBatch as e:
        log.warning("%s: %s while scanning an interrupted swap", path, e)
    finally:
        os.close(fd)
    return nxt


def recover_interrupted_swaps(directory: str, names: list[str] | None = None) -> bool:
    """Load-time completion of an interrupted swap (Kafka's LogLoader): delete ``*.cleaned`` files; for each
    ``<base>.log.swap`` delete the segment files whose base offset is in ``[base, next offset of the swap)``
    (the segments it replaces; ``<base>`` itself always), then rename every ``*.swap`` to its final name.
    ``names``: the directory's listing when the caller has it. True when a file was deleted or renamed."""
    if names is None:
        names = os.listdir(directory)
    swaps: list[int] = []
    changed = False
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            log.info("%s: deleting %s left by an interrupted cleaning", directory, name)
            _unlink(os.path.join(directory, name))
            changed = True
        elif name.endswith(".log" + SWAP_SUFFIX) and name[:20].isdigit() and len(name) == 29:
            swaps.append(int(name[:20]))
    if not any(n.endswith(SWAP_SUFFIX) for n in names):
        return changed
    for base in sorted(swaps):
        nxt = _scan_next_offset(os.path.join(directory, segment_file_name(base, ".log") + SWAP_SUFFIX), base)
        hi = max(nxt, base + 1)
        for name in names:
            stem, ext = os.path.splitext(name)
            if ext in SEGMENT_SUFFIXES and len(stem) == 20 and stem.isdigit() and base <= int(stem) < hi:
                log.info("%s: deleting %s replaced by the interrupted swap at %d", directory, name, base)
                _unlink(os.path.join(directory, name))
    for name in os.listdir(directory):
        if name.endswith(SWAP_SUFFIX):
            stem, ext = os.path.splitext(name[: -len(SWAP_SUFFIX)])
            if ext in SEGMENT_SUFFIXES and len(stem) == 20 and stem.isdigit():
                log.info("%s: completing the interrupted swap of %s", directory, name)
                os.replace(os.path.join(directory, name), os.path.join(directory, name[: -len(SWAP_SUFFIX)]))
            else:
                _unlink(os.path.join(directory, name))
    fsync_dir(directory)
    return True


# ================================================================================================ batch I/O


class _BadBatch(Exception):
    pass


class _Cancelled(Exception):
    pass


def _iter_batches(
    fd: int, size: int, *, full: bool = True, check: bool = True
) -> Iterator[tuple[int, tuple, memoryview | None]]:
    """(position, header tuple, whole batch) for every batch of a segment file read through ``fd``."""
    pos = 0
    buf = b""
    buf_pos = 0
    unpack = HEADER_STRUCT.unpack_from
    while pos < size:
        if size - pos < HEADER_SIZE:
            raise _BadBatch(f"truncated batch header at position {pos}")
        rel = pos - buf_pos
        if rel + HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(_READ_BLOCK, size - pos), pos)
            buf_pos, rel = pos, 0
            if len(buf) < HEADER_SIZE:
                raise _BadBatch(f"short read at position {pos}")
        f = unpack(buf, rel)
        blen = f[F_BATCH_LENGTH]
        if blen < MIN_BATCH_LENGTH or f[F_MAGIC] != 2:
            raise _BadBatch(f"invalid batch (length {blen}, magic {f[F_MAGIC]}) at position {pos}")
        bsize = blen + LOG_OVERHEAD
        if bsize > size - pos:
            raise _BadBatch(f"truncated batch at position {pos}")
        view: memoryview | None = None
        if full:
            if rel + bsize > len(buf):
                buf = os.pread(fd, max(min(_READ_BLOCK, size - pos), bsize), pos)
                buf_pos, rel = pos, 0
                if len(buf) < bsize:
                    raise _BadBatch(f"short read at position {pos}")
            view = memoryview(buf)[rel : rel + bsize]
            if check and crc32c(view[ATTRIBUTES_OFFSET:]) != f[F_CRC]:
                raise _BadBatch(f"CRC mismatch at position {pos}")
        yield pos, f, view
        pos += bsize


def _map_key(key: bytes) -> bytes:
    """Offset-map key: the key itself up to 15 bytes, else its 16-byte BLAKE2b digest (disjoint lengths, so
    a short key can never be mistaken for a digest)."""
    if len(key) < 16:
        return key
    return hashlib.blake2b(key, digest_size=16).digest()


def _encode_records(records: Sequence[Any], base_offset: int, base_ts: int) -> bytearray:
    """The records section of a v2 batch for ``records`` (decoded ``Record``s) with their own offsets."""
    pieces: list[bytes] = []
    for r in records:
        encode_record(pieces, r.offset - base_offset, r.timestamp - base_ts, r.key, r.value, r.headers)
    return bytearray(b"".join(pieces))


def _pack_batch(
    f: tuple, attrs: int, base_ts: int, max_ts: int, count: int, records: bytes | bytearray
) -> bytes:
    """Batch ``f``'s header fields around ``records`` (uncompressed; the codec of ``attrs`` applies)."""
    return bytes(seal_batch(
        bytearray(HEADER_SIZE) + records, attributes=attrs, records_count=count, base_timestamp=base_ts,
        max_timestamp=max_ts, last_offset_delta=f[F_LAST_OFFSET_DELTA], base_offset=f[F_BASE_OFFSET],
        partition_leader_epoch=f[F_LEADER_EPOCH], producer_id=f[F_PRODUCER_ID],
        producer_epoch=f[F_PRODUCER_EPOCH], base_sequence=f[F_BASE_SEQUENCE]))


def rebuild_batch(f: tuple, records: Sequence[Any], horizon: int | None) -> bytes:
    """Re-batch the retained ``records`` of the batch with header ``f`` (Kafka's buildRetainedRecordsInto):
    same base offset, last offset delta, producer fields, leader epoch, flags and codec; ``horizon`` (ms) sets
    the delete-horizon flag and becomes the base timestamp (None: keep the batch's horizon if it has one)."""
    attrs = f[F_ATTRIBUTES]
    if horizon is not None:
        attrs |= DELETE_HORIZON_FLAG
        base_ts = horizon
    elif attrs & DELETE_HORIZON_FLAG:
        base_ts = f[F_BASE_TIMESTAMP]
    else:
        base_ts = records[0].timestamp
    if attrs & TIMESTAMP_TYPE_FLAG:
        max_ts = f[F_MAX_TIMESTAMP]
    else:
        max_ts = max(r.timestamp for r in records)
    body = _encode_records(records, f[F_BASE_OFFSET], base_ts)
    return _pack_batch(f, attrs, base_ts, max_ts, len(records), body)


def empty_batch(f: tuple) -> bytes:
    """Kafka's writeEmptyHeader: the header of batch ``f`` with no records (uncompressed, no horizon), kept to
    preserve the producer's last sequence."""
    attrs = f[F_ATTRIBUTES] & (TIMESTAMP_TYPE_FLAG | TRANSACTIONAL_FLAG | CONTROL_FLAG)
    ts = f[F_MAX_TIMESTAMP]
    return _pack_batch(f, attrs, ts, ts, 0, b"")


# ================================================================================================ pass state


@dataclass(slots=True)
class _SegIn:
    """A segment to read, captured on the loop thread (the worker never touches the Segment object)."""

    seg: Any
    base: int
    end: int  # next segment's base offset
    size: int
    fd: int
    mtime: float


@dataclass(slots=True)
class _Task:
    key: tuple[str, int]
    directory: str
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    interval: int
    segs: list[_SegIn]  # from the first segment of the log to the end of the cleanable range
    dirty_index: int  # first segment of the dirty section (== len(segs) when nothing is dirty)
    first_dirty: int
    aborted: list[tuple[int, int, int, int]]  # (last, pid, first, lso), as PartitionLog keeps them
    active_producers: dict[int, tuple[int | None, int]]  # pid -> (last data offset or None, epoch)
    max_map_entries: int
    cancel: threading.Event = field(default_factory=threading.Event)
    kafka07: bool = False  # the partition has a Kafka 0.7 byte-offset index: keep every 0.7 unit's size


@dataclass(slots=True)
class _Group:
    base: int
    segs: list[_SegIn]
    end: int
    aborted: list[tuple[int, int, int, int]]  # (pid, first, last, lso) for the cleaned .txnindex
    size: int
    # Kafka 0.7 byte offsets: per thinned uncompressed batch, (offset, 0.7 view size, kept) of its records
    k07_splits: list[list[tuple[int, int, bool]]] = field(default_factory=list)


@dataclass(slots=True)
class CleanerStats:
    topic: str
    partition: int
    first_dirty: int = 0
    end_offset: int = 0  # the new first dirty offset
    segments: int = 0  # old segments cleaned
    groups: int = 0  # cleaned segments swapped in
    map_entries: int = 0
    records_read: int = 0
    records_retained: int = 0
    batches_emptied: int = 0  # kept as an empty header (producer state)
    bytes_read: int = 0
    bytes_written: int = 0
    elapsed_ms: float = 0.0
    pending_horizon: int | None = None  # earliest delete horizon still guarding a tombstone or marker
    swapped: bool = False


@dataclass(slots=True)
class _Result:
    task: _Task
    stats: CleanerStats
    groups: list[_Group]
    end: int


class _TxnState:
    """Which transactions still have data in the log, while a pass reads it in offset order (Kafka's
    CleanedTransactionMetadata, with aborted data known from the log's aborted-transaction list)."""

    __slots__ = ("aborted_by_pid", "committed_seen", "aborted_seen", "by_marker")

    def __init__(self, aborted: list[tuple[int, int, int, int]]) -> None:
        self.aborted_by_pid: dict[int, list[tuple[int, int]]] = {}
        self.by_marker: dict[int, tuple[int, int, int, int]] = {}
        for last, pid, first, lso in aborted:
            self.aborted_by_pid.setdefault(pid, []).append((first, last))
            self.by_marker[last] = (pid, first, last, lso)
        for v in self.aborted_by_pid.values():
            v.sort()
        self.committed_seen: set[int] = set()
        self.aborted_seen: set[int] = set()

    def is_aborted(self, pid: int, offset: int) -> bool:
        ranges = self.aborted_by_pid.get(pid)
        if not ranges:
            return False
        i = bisect_right(ranges, (offset, LONG_MAX)) - 1
        return i >= 0 and ranges[i][0] <= offset <= ranges[i][1]

    def on_data(self, f: tuple) -> bool:
        """A transactional data batch: True when it belongs to an aborted transaction (discard it)."""
        pid = f[F_PRODUCER_ID]
        if self.is_aborted(pid, f[F_BASE_OFFSET]):
            self.aborted_seen.add(pid)
            return True
        self.committed_seen.add(pid)
        return False

    def on_marker(self, f: tuple, ctype: int) -> tuple[bool, tuple[int, int, int, int] | None]:
        """A transaction marker: (may it be discarded - no data of its transaction left, txnindex entry to
        keep for an ABORT whose data was still present in this pass)."""
        pid = f[F_PRODUCER_ID]
        if f[F_RECORDS_COUNT] == 0:  # an emptied marker batch: already cleaned
            return True, None
        if ctype == CONTROL_ABORT:
            if pid in self.aborted_seen:
                self.aborted_seen.discard(pid)
                return False, self.by_marker.get(f[F_BASE_OFFSET])
            return True, None
        if ctype == CONTROL_COMMIT:
            if pid in self.committed_seen:
                self.committed_seen.discard(pid)
                return False, None
            return True, None
        return False, None


# ================================================================================================ the pass


def _check_cancel(task: _Task) -> None:
    if task.cancel.is_set():
        raise _Cancelled()


def _build_offset_map(task: _Task, stats: CleanerStats) -> tuple[dict[bytes, int], int]:
    """Offset map over the dirty segments; returns (map, index after the last mapped segment)."""
    from moldau.protocol.records import decode_batch

    omap: dict[bytes, int] = {}
    txn = _TxnState(task.aborted)
    last = task.dirty_index
    for i in range(task.dirty_index, len(task.segs)):
        s = task.segs[i]
        for _pos, f, view in _iter_batches(s.fd, s.size):
            _check_cancel(task)
            attrs = f[F_ATTRIBUTES]
            if attrs & CONTROL_FLAG:
                continue
            if attrs & TRANSACTIONAL_FLAG and txn.is_aborted(f[F_PRODUCER_ID], f[F_BASE_OFFSET]):
                continue
            if f[F_RECORDS_COUNT] == 0:
                continue
            assert view is not None  # full=True: every batch is read whole
            for r in decode_batch(view, 0):
                if r.key is not None:
                    omap[_map_key(r.key)] = r.offset
        last = i + 1
        if len(omap) >= task.max_map_entries:
            log.info("%s: offset map full (%d entries); cleaning up to offset %d this pass", task.directory,
                     len(omap), s.end)
            break
    stats.map_entries = len(omap)
    return omap, last


def _group_segments(segs: list[_SegIn], max_bytes: int) -> list[list[_SegIn]]:
    """Kafka's groupSegmentsBySize: consecutive segments while the total size stays <= segment.bytes and the
    offset span fits a relative (int32) offset."""
    groups: list[list[_SegIn]] = []
    cur: list[_SegIn] = []
    size = 0
    for s in segs:
        if cur and size + s.size <= max_bytes and s.end - 1 - cur[0].base <= INT_MAX:
            cur.append(s)
            size += s.size
        else:
            if cur:
                groups.append(cur)
            cur = [s]
            size = s.size
    if cur:
        groups.append(cur)
    return groups


class _GroupWriter:
    """Writes one cleaned segment (``.cleaned`` files): log data in chunks, offset and time index entries by
    moldau's Segment rule (an entry when more than index.interval.bytes were written since the last one)."""

    def __init__(self, directory: str, base: int, interval: int) -> None:
        self.directory = directory
        self.base = base
        self.interval = interval
        self.path = cleaned_path(directory, base, ".log")
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.pending = bytearray()
        self.size = 0
        self.since_index = 0
        self.max_ts = -1
        self.max_ts_offset = -1
        self.offset_entries = bytearray()
        self.time_entries = bytearray()
        self.last_time_ts: int | None = None
        self.last_index_rel = -1

    def add(self, data: bytes | memoryview, f: tuple, max_ts: int) -> None:
        pos = self.size
        size = len(data)
        last = f[F_BASE_OFFSET] + f[F_LAST_OFFSET_DELTA]
        if max_ts > self.max_ts:
            self.max_ts, self.max_ts_offset = max_ts, last
        if self.since_index > self.interval:
            rel = last - self.base
            if rel > self.last_index_rel:
                self.offset_entries += _OFFSET_ENTRY.pack(rel, pos)
                self.last_index_rel = rel
            self._time_entry()
            self.since_index = 0
        self.since_index += size
        self.pending += data
        self.size += size
        if len(self.pending) >= _WRITE_CHUNK:
            self._drain()

    def _time_entry(self) -> None:
        if self.max_ts < 0 or (self.last_time_ts is not None and self.max_ts <= self.last_time_ts):
            return
        self.time_entries += _TIME_ENTRY.pack(self.max_ts, self.max_ts_offset - self.base)
        self.last_time_ts = self.max_ts

    def _drain(self) -> None:
        view = memoryview(self.pending)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]
        self.pending = bytearray()

    def finish(self, mtime: float, aborted: list[tuple[int, int, int, int]]) -> None:
        self._drain()
        self._time_entry()  # final entry: the segment's largest timestamp (inactive segment)
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1
        os.utime(self.path, (mtime, mtime))
        for suffix, data in ((".index", self.offset_entries), (".timeindex", self.time_entries)):
            write_file(cleaned_path(self.directory, self.base, suffix), bytes(data))
        if aborted:
            TxnIndex.rewrite(cleaned_path(self.directory, self.base, ".txnindex"), aborted)

    def abort(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        discard_cleaned(self.directory, self.base)


def _clean_group(
    task: _Task, group: list[_SegIn], omap: dict[bytes, int], txn: _TxnState, stats: CleanerStats
) -> _Group:
    from moldau.protocol.records import decode_batch

    now = task.now_ms
    new_horizon = min(now + task.delete_retention_ms, LONG_MAX)
    active = task.active_producers
    base = group[0].base
    w = _GroupWriter(task.directory, base, task.interval)
    kept_aborted: list[tuple[int, int, int, int]] = []
    k07_splits: list[list[tuple[int, int, bool]]] = []
    try:
        for s in group:
            for _pos, f, view in _iter_batches(s.fd, s.size):
                _check_cancel(task)
                assert view is not None
                stats.bytes_read += len(view)
                attrs = f[F_ATTRIBUTES]
                pid = f[F_PRODUCER_ID]
                is_control = bool(attrs & CONTROL_FLAG)
                batch_horizon = f[F_BASE_TIMESTAMP] if attrs & DELETE_HORIZON_FLAG else None
                # ---- batch retention (Kafka's checkBatchRetention)
                marker_may_go = False
                if is_control:
                    ctype = control_type(view) if f[F_RECORDS_COUNT] else -1
                    can_discard, keep_entry = txn.on_marker(f, ctype)
                    if keep_entry is not None:
                        kept_aborted.append(keep_entry)
                    marker_may_go = can_discard
                    discard = can_discard and batch_horizon is not None and batch_horizon <= now
                elif attrs & TRANSACTIONAL_FLAG:
                    discard = txn.on_data(f)
                else:
                    discard = False
                last_of_producer = False
                if pid >= 0:
                    entry = active.get(pid)
                    if entry is not None:
                        last_data, epoch = entry
                        if last_data is not None:
                            last_of_producer = f[F_BASE_OFFSET] + f[F_LAST_OFFSET_DELTA] == last_data
                        else:
                            last_of_producer = is_control and f[F_PRODUCER_EPOCH] == epoch
                count = f[F_RECORDS_COUNT]
                stats.records_read += count
                if discard and not last_of_producer:
                    continue  # DELETE
                # ---- records
                if discard or count == 0:
                    kept: list[Any] = []
                    all_kept = count == 0
                    tombstones = False
                    decoded: list[Any] = []
                elif is_control:
                    decoded = kept = []  # control records are kept as they are
                    all_kept = True
                    tombstones = False
                else:
                    decoded = decode_batch(view, 0)
                    kept = []
                    tombstones = False
                    expired = batch_horizon is not None and now >= batch_horizon
                    for r in decoded:
                        k = r.key
                        if k is None:
                            continue  # no key: invalid in a compacted log (Kafka drops it)
                        latest = omap.get(_map_key(k))
                        if latest is not None and r.offset < latest:
                            continue
                        if r.value is None:
                            if expired:
                                continue
                            tombstones = True
                        kept.append(r)
                    if task.kafka07 and len(kept) < len(decoded):
                        kept = _kafka07_plan(attrs, decoded, kept, k07_splits)
                    all_kept = len(kept) == len(decoded)
                # ---- write
                if is_control and not discard and (count or last_of_producer):
                    stats.records_retained += count
                    if count and marker_may_go and batch_horizon is None:
                        # a marker whose transaction has no data left: stamp the horizon (re-batched as is)
                        out = _stamp_control_horizon(f, view, new_horizon)
                        w.add(out, f, f[F_MAX_TIMESTAMP])
                        _note_horizon(stats, new_horizon)
                    else:
                        w.add(view, f, f[F_MAX_TIMESTAMP])
                        if marker_may_go and batch_horizon is not None:
                            _note_horizon(stats, batch_horizon)
                    continue
                if kept:
                    stats.records_retained += len(kept)
                    if all_kept and not (tombstones and batch_horizon is None):
                        w.add(view, f, f[F_MAX_TIMESTAMP])
                        out_horizon = batch_horizon
                    else:
                        horizon = new_horizon if tombstones and batch_horizon is None else None
                        out = rebuild_batch(f, kept, horizon)
                        out_horizon = horizon if horizon is not None else batch_horizon
                        w.add(out, f, HEADER_STRUCT.unpack_from(out, 0)[F_MAX_TIMESTAMP])
                    if tombstones and out_horizon is not None:
                        _note_horizon(stats, out_horizon)
                elif last_of_producer:  # RETAIN_EMPTY
                    w.add(empty_batch(f) if count else view, f, f[F_MAX_TIMESTAMP])
                    stats.batches_emptied += 1 if count else 0
                # else DELETE_EMPTY: nothing kept
        w.finish(max(s.mtime for s in group), kept_aborted)
    except BaseException:
        w.abort()
        raise
    stats.bytes_written += w.size
    end = group[-1].end
    return _Group(base, list(group), end, kept_aborted, w.size, k07_splits)


def _kafka07_plan(attrs: int, decoded: list[Any], kept: list[Any],
                  splits: list[list[tuple[int, int, bool]]]) -> list[Any]:
    """Kafka 0.7 byte offsets (``moldau.protocol.kafka07.cleaning_plan``): what of ``decoded`` the cleaner of
    an indexed partition keeps so that no 0.7 unit changes size; the split of an uncompressed batch's unit
    goes to ``splits`` for the index."""
    from moldau.protocol.kafka07 import cleaning_plan

    keep = {r.offset for r in kept}
    flags, split = cleaning_plan(attrs, [r.offset for r in decoded],
                                 [len(r.value) if r.value is not None else 0 for r in decoded],
                                 [r.offset in keep for r in decoded])
    if split is not None and not all(flags):
        splits.append(split)
    return [r for r, k in zip(decoded, flags) if k]


def _stamp_control_horizon(f: tuple, view: memoryview, horizon: int) -> bytes:
    """A control batch with the delete-horizon flag set and ``horizon`` as its base timestamp (the record
    timestamp delta is re-encoded so the record's timestamp does not change)."""
    from moldau.protocol.records import decode_batch

    return rebuild_batch(f, decode_batch(view, 0), horizon)


def _note_horizon(stats: CleanerStats, horizon: int) -> None:
    if stats.pending_horizon is None or horizon < stats.pending_horizon:
        stats.pending_horizon = horizon


def run_pass(task: _Task) -> _Result:
    """Steps 1-3 of a cleaning pass (worker thread): offset map, groups, ``.cleaned`` files."""
    t0 = time.monotonic()
    stats = CleanerStats(task.key[0], task.key[1], first_dirty=task.first_dirty)
    groups: list[_Group] = []
    try:
        omap, mapped = _build_offset_map(task, stats)
        if mapped <= task.dirty_index:  # nothing dirty: a delete-horizon pass over the clean section
            mapped = len(task.segs)
        segs = task.segs[:mapped]
        end = segs[-1].end
        stats.end_offset = end
        stats.segments = len(segs)
        txn = _TxnState(task.aborted)
        for group_segs in _group_segments(segs, task.segment_bytes):
            groups.append(_clean_group(task, group_segs, omap, txn, stats))
    except BaseException:
        for g in groups:
            discard_cleaned(task.directory, g.base)
        raise
    finally:
        for s in task.segs:
            try:
                os.close(s.fd)
            except OSError:
                pass
    stats.groups = len(groups)
    stats.elapsed_ms = (time.monotonic() - t0) * 1000
    return _Result(task, stats, groups, end)


# ================================================================================================ the cleaner


@dataclass(slots=True)
class _Candidate:
    log: Any
    first_dirty: int
    end: int  # end of the cleanable range (a segment boundary)
    n_segs: int  # segments [0, n_segs) are cleaned
    dirty_index: int
    clean_bytes: int
    dirty_bytes: int
    need_now: bool

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


class LogCleaner:
    """The log manager's cleaner: ``tick(now_ms)`` on the event loop (collect a finished pass and swap it in,
    or choose the filthiest log and start a pass in the cleaner thread); ``clean_log(log, now_ms)`` runs one
    pass synchronously (tests, tools)."""

    def __init__(
        self,
        manager: LogManager,
        *,
        enabled: bool = True,
        backoff_ms: int = 15000,
        dedupe_buffer_size: int = 134217728,
        io_buffer_load_factor: float = 0.9,
        executor: Executor | None = None,
    ) -> None:
        self.manager = manager
        self.enabled = enabled
        self.backoff_ms = backoff_ms
        self.max_map_entries = max(1, int(dedupe_buffer_size * io_buffer_load_factor) // MAP_ENTRY_BYTES)
        self._executor = executor
        self._own_executor = executor is None
        self._checkpoints: dict[tuple[str, int], int] = {}
        self._horizons: dict[tuple[str, int], int] = {}  # earliest pending delete horizon per log
        self._uncleanable: set[tuple[str, int]] = set()
        self._paused: set[tuple[str, int]] = set()  # replicas moving to another log dir (dir_move.py)
        self._task: _Task | None = None
        self._task_log: Any = None
        self._future: Future | None = None
        self._next_check_ms: int | None = None
        self._first_ts_cache: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.last_stats: CleanerStats | None = None
        # the broker serves Kafka 0.7 (a KAFKA07 listener): every compacted log gets its 0.7 byte-offset index
        # before it is cleaned, on every replica, so that byte positions are sums of the original batches'
        # view sizes wherever the cleaning went (``kafka07_ready``)
        self.kafka07_indexes = False

    # ------------------------------------------------------------------------------------------ checkpoints
    def load_checkpoints(self) -> None:
        """Read ``cleaner-offset-checkpoint`` of every log directory (entries of partitions living there)."""
        self._checkpoints.clear()
        for d in self.manager.log_dirs:
            path = os.path.join(d, CLEANER_OFFSET_CHECKPOINT)
            try:
                entries = read_offset_checkpoint(path)
            except CorruptCheckpointError as e:
                log.warning("%s; every compacted log there will be cleaned from its start", e)
                continue
            for key, off in entries.items():
                if self.manager.dir_of(*key) == d:
                    self._checkpoints[key] = off

    def first_dirty_offset(self, topic: str, partition: int) -> int | None:
        """The checkpointed first dirty offset, None when the partition was never cleaned."""
        return self._checkpoints.get((topic, partition))

    def _write_checkpoints(self, dirs: set[str]) -> None:
        snapshot = dict(self._checkpoints)
        dir_of = self.manager.dir_of

        def write() -> None:
            for d in dirs:
                rows = sorted((t, p, o) for (t, p), o in snapshot.items() if dir_of(t, p) == d)
                try:
                    write_offset_checkpoint(os.path.join(d, CLEANER_OFFSET_CHECKPOINT), rows)
                except OSError as e:
                    log.error("cannot write %s in %s: %s", CLEANER_OFFSET_CHECKPOINT, d, e)

        self.manager._submit(write)

    # ------------------------------------------------------------------------------------------ selection
    def _first_batch_ts(self, seg: Segment) -> int:
        ts = self._first_ts_cache.get(seg)
        if ts is None:
            ts = seg._first_batch_timestamp()
            ts = -1 if ts is None else ts
            self._first_ts_cache[seg] = ts
        return ts

    def candidate(self, plog: PartitionLog, now_ms: int) -> _Candidate | None:
        """Kafka's LogToClean for ``plog``: None when it is not compacted or has nothing cleanable."""
        cfg = plog.config
        if not cfg.compact_enabled or plog.closed:
            return None
        segs = plog.segments
        if len(segs) < 2:
            return None
        key = (plog.topic, plog.partition)
        ls = plog.log_start_offset
        fd = self._checkpoints.get(key, ls)
        if fd < ls or fd > plog.log_end_offset:
            fd = ls
        bound = min(plog.last_stable_offset, segs[-1].base_offset)
        nonactive = len(segs) - 1
        if cfg.min_compaction_lag_ms > 0:
            horizon = now_ms - cfg.min_compaction_lag_ms
            for i in range(nonactive):
                if segs[i + 1].base_offset > fd and segs[i].largest_timestamp() > horizon:
                    bound = min(bound, segs[i].base_offset)
                    break
        n = 0
        while n < nonactive and segs[n + 1].base_offset <= bound:
            n += 1
        if n == 0:
            return None
        clean_bytes = dirty_bytes = 0
        dirty_index = n
        for i in range(n):
            if segs[i + 1].base_offset <= fd:
                clean_bytes += segs[i].size
            else:
                if dirty_index == n:
                    dirty_index = i
                dirty_bytes += segs[i].size
        need_now = False
        if cfg.max_compaction_lag_ms < LONG_MAX and dirty_bytes > 0:
            until = now_ms - cfg.max_compaction_lag_ms
            for i in range(dirty_index, n):
                ts = self._first_batch_ts(segs[i])
                if 0 < ts < until:
                    need_now = True
                    break
        return _Candidate(plog, fd, segs[n].base_offset, n, dirty_index, clean_bytes, dirty_bytes, need_now)

    def kafka07_ready(self, plog: PartitionLog, end: int, *, wait: bool = False) -> bool:
        """Whether ``plog`` may be cleaned below ``end`` as far as Kafka 0.7 byte offsets go. With
        ``kafka07_indexes`` its byte-offset index must hold every batch below ``end`` first: the positions
        are then sums of the view sizes of the batches as they were written (the same on every replica,
        whatever each replica's cleaner removed later), and the pass keeps each 0.7 unit's size. A log
        without an index gets an empty one here, which the legacy listener's background indexing
        (``Kafka07Service.keep_indexes``) extends off the event loop; until then the log is not a candidate.
        ``wait`` (``clean_log``): index it here instead. Internal topics (``__`` names: group offsets,
        transactions, ...) are not held back: no 0.7 client has business there."""
        if not self.kafka07_indexes or plog.topic.startswith("__"):
            return True
        idx = plog.byte_offsets
        if idx is not None and max(idx.scanned, idx.complete_to) >= end:
            return True
        if wait:
            plog.byte_offsets_cover(end)
            return True
        if idx is None:
            from .byte_offsets import ByteOffsetIndex

            ByteOffsetIndex.attach(plog)
        return False

    def _choose(self, now_ms: int) -> _Candidate | None:
        best: _Candidate | None = None
        horizon_best: _Candidate | None = None
        for plog in self.manager.logs():
            key = (plog.topic, plog.partition)
            if key in self._uncleanable or key in self._paused:
                continue
            try:
                c = self.candidate(plog, now_ms)
            except Exception:
                log.exception("cannot assess %s-%d for cleaning", plog.topic, plog.partition)
                continue
            if c is None:
                continue
            if c.dirty_bytes > 0 and (c.need_now or c.ratio >= plog.config.min_cleanable_dirty_ratio):
                if (best is None or c.ratio > best.ratio) and self.kafka07_ready(plog, c.end):
                    best = c
            else:
                h = self._horizons.get(key)
                if h is not None and h <= now_ms and (horizon_best is None or c.ratio > horizon_best.ratio) \
                        and self.kafka07_ready(plog, c.end):
                    horizon_best = c
        return best or horizon_best

    def _make_task(self, c: _Candidate, now_ms: int) -> _Task:
        plog = c.log
        segs = plog.segments
        ins: list[_SegIn] = []
        try:
            for i in range(c.n_segs):
                s = segs[i]
                fd = os.open(s.log_path, os.O_RDONLY)
                try:
                    mtime = os.fstat(fd).st_mtime
                except OSError:
                    mtime = time.time()
                ins.append(_SegIn(s, s.base_offset, segs[i + 1].base_offset, s.size, fd, mtime))
        except BaseException:
            for x in ins:
                os.close(x.fd)
            raise
        active: dict[int, tuple[int | None, int]] = {}
        for pid, e in plog.producer_state.producers.items():
            active[pid] = (e.last_offset if e.batches else None, e.epoch)
        cfg = plog.config
        return _Task(
            key=(plog.topic, plog.partition),
            directory=plog.dir,
            now_ms=now_ms,
            delete_retention_ms=cfg.delete_retention_ms,
            segment_bytes=cfg.segment_bytes,
            interval=cfg.index_interval_bytes,
            segs=ins,
            dirty_index=c.dirty_index,
            first_dirty=c.first_dirty,
            aborted=[a for a in plog.aborted.entries if a[0] >= ins[0].base],
            active_producers=active,
            max_map_entries=self.max_map_entries,
            kafka07=getattr(plog, "byte_offsets", None) is not None,
        )

    # ------------------------------------------------------------------------------------------ install
    def _install(self, plog: PartitionLog, res: _Result) -> CleanerStats:
        """Swap the cleaned groups in (loop thread). Stale groups (the log changed meanwhile) are dropped."""
        task, stats = res.task, res.stats
        key = task.key
        swapped = 0
        # Validate the whole pass first: the offset map covers every group, so if any group's segments changed
        # (truncation, a partial deletion) nothing may be swapped in. Groups deleted as a whole by retention /
        # DeleteRecords (a prefix of the log) are simply skipped.
        stale = plog.closed or self.manager.get(*key) is not plog or not plog.config.compact_enabled
        # a 0.7 byte-offset index made during the pass: the pass did not keep the 0.7 units' sizes
        stale = stale or (getattr(plog, "byte_offsets", None) is not None and not task.kafka07)
        todo: list[_Group] = []
        if not stale:
            segs = plog.segments
            pos = {id(s): i for i, s in enumerate(segs)}
            for g in res.groups:
                idx = [pos.get(id(s.seg)) for s in g.segs]
                if all(i is None for i in idx) and segs[0].base_offset >= g.end:
                    discard_cleaned(task.directory, g.base)  # deleted by retention meanwhile
                    continue
                first = idx[0]
                ok = (
                    first is not None
                    and idx == list(range(first, first + len(idx)))
                    and all(not s.seg.active and s.seg.size == s.size for s in g.segs)
                )
                if not ok:
                    stale = True
                    break
                todo.append(g)
        if stale:
            log.info("%s-%d changed during cleaning; dropping the cleaned segments", *key)
            for g in res.groups:
                discard_cleaned(task.directory, g.base)
        else:
            for g in todo:
                new = plog.replace_segments([s.seg for s in g.segs], [s.size for s in g.segs], g.aborted)
                if new is None:
                    stale = True  # cannot happen after the checks above; be safe
                else:
                    swapped += 1
                    k07_index = getattr(plog, "byte_offsets", None)
                    if k07_index is not None:
                        for split in g.k07_splits:
                            k07_index.apply_cleaning(split)
                        k07_index.views.reset()  # stored 0.7 views of cleaned units are stale
        stats.groups = swapped
        if not stale and not plog.closed:
            stats.swapped = True
            self._checkpoints[key] = res.end
            if stats.pending_horizon is not None:
                self._horizons[key] = stats.pending_horizon
            else:
                self._horizons.pop(key, None)
            d = self.manager.dir_of(*key)
            if d is not None:
                self._write_checkpoints({d})
            log.info(
                "cleaned %s-%d: offsets [%d, %d) dirty from %d, %d segments -> %d, %d/%d records kept, "
                "%d -> %d bytes, map %d keys, %.0f ms",
                key[0], key[1], task.segs[0].base, res.end, stats.first_dirty, stats.segments, swapped,
                stats.records_retained, stats.records_read, stats.bytes_read, stats.bytes_written,
                stats.map_entries, stats.elapsed_ms,
            )
        self.last_stats = stats
        return stats

    # ------------------------------------------------------------------------------------------ driving
    def _executor_(self) -> Executor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="moldau-log-cleaner")
        return self._executor

    def tick(self, now_ms: int) -> None:
        """Loop-thread step: finish a completed pass (swap), then start the next one when due."""
        if not self.enabled:
            return
        if self._future is not None:
            if not self._future.done():
                return
            stats = self._collect(self._future)
            # after a successful pass more work may be waiting; after a failed / stale one, back off
            self._next_check_ms = now_ms if stats is not None and stats.swapped else now_ms + self.backoff_ms
        if self._next_check_ms is not None and now_ms < self._next_check_ms:
            return
        c = self._choose(now_ms)
        if c is None:
            self._next_check_ms = now_ms + self.backoff_ms
            return
        try:
            task = self._make_task(c, now_ms)
        except OSError as e:
            log.warning("cannot start cleaning %s-%d: %s", c.log.topic, c.log.partition, e)
            self._next_check_ms = now_ms + self.backoff_ms
            return
        self._task, self._task_log = task, c.log
        self._future = self._executor_().submit(run_pass, task)

    def _collect(self, fut: Future) -> CleanerStats | None:
        task, plog = self._task, self._task_log
        self._future = self._task = self._task_log = None
        assert task is not None
        try:
            res = fut.result()
        except _Cancelled:
            return None
        except (FileNotFoundError, OSError) as e:
            log.warning("cleaning %s-%d stopped: %s", task.key[0], task.key[1], e)
            return None
        except Exception:
            log.exception("cleaning %s-%d failed; marking it uncleanable", task.key[0], task.key[1])
            self._uncleanable.add(task.key)
            return None
        return self._install(plog, res)

    def wait(self, timeout: float | None = None) -> CleanerStats | None:
        """Wait for the pass in flight (if any) and swap it in (loop thread). None when there is none, or
        when it is still running after ``timeout`` seconds (it stays in flight); its failures are handled by
        ``_collect``."""
        fut = self._future
        if fut is None:
            return None
        if not futures_wait([fut], timeout).done:
            return None
        return self._collect(fut)

    def clean_log(
        self, plog: PartitionLog, now_ms: int | None = None, *, force: bool = True
    ) -> CleanerStats | None:
        """One synchronous pass over ``plog`` (ignoring the dirty ratio when ``force``). None when it has
        nothing cleanable (or is not compacted)."""
        if now_ms is None:
            now_ms = self.manager._now_ms()
        self.wait()
        c = self.candidate(plog, now_ms)
        if c is None:
            return None
        self.kafka07_ready(plog, c.end, wait=True)
        if not force and not (
            c.dirty_bytes > 0 and (c.need_now or c.ratio >= plog.config.min_cleanable_dirty_ratio)
        ):
            return None
        task = self._make_task(c, now_ms)
        return self._install(plog, run_pass(task))

    def _abort_pass(self, key: tuple[str, int]) -> None:
        if self._task is not None and self._task.key == key and self._future is not None:
            self._task.cancel.set()
            try:
                self._future.result(30)
            except Exception:
                pass
            self._future = self._task = self._task_log = None

    def pause(self, topic: str, partition: int) -> None:
        """No cleaning of the partition until ``resume`` (Kafka's abortAndPauseCleaning): its pass, if one
        runs, is aborted."""
        self._paused.add((topic, partition))
        self._abort_pass((topic, partition))

    def resume(self, topic: str, partition: int) -> None:
        self._paused.discard((topic, partition))

    def forget(self, topic: str, partition: int) -> None:
        """The partition is being deleted: abort its pass, drop its checkpoint entry."""
        key = (topic, partition)
        self._abort_pass(key)
        self._horizons.pop(key, None)
        self._uncleanable.discard(key)
        if self._checkpoints.pop(key, None) is not None:
            d = self.manager.dir_of(topic, partition)
            if d is not None:
                self._write_checkpoints({d})

    def shutdown(self) -> None:
        """Abort the pass in flight (its ``.cleaned`` files are removed) and stop the cleaner thread."""
        if self._task is not None:
            self._task.cancel.set()
        if self._future is not None:
            try:
                self._future.result(60)
            except Exception:
                pass
        self._future = self._task = self._task_log = None
        if self._own_executor and self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
