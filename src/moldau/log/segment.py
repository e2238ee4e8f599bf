"""One log segment: ``<base>.log`` plus its ``.index`` and ``.timeindex``.

File handles are opened lazily and bounded by a ``SegmentCache`` (an LRU shared by every partition of a
``LogManager``), so a broker with many partitions does not hold every segment open. Reads use ``os.pread``,
writes ``os.pwrite`` at the tracked size: no shared file position, so a worker thread may ``fsync`` (on a
``dup`` of the descriptor) while the event loop keeps appending and reading.

Threading: every method is meant for one thread (the broker's event loop), except ``sync_handles`` whose
result (duplicated descriptors, index files) is fsynced in a worker thread.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from typing import Iterator

from crc32c import crc32c

from moldau.protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    F_BASE_OFFSET,
    F_BATCH_LENGTH,
    F_CRC,
    F_LAST_OFFSET_DELTA,
    F_MAGIC,
    F_MAX_TIMESTAMP,
    HEADER_SIZE,
    HEADER_STRUCT,
    INT32,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    OFFSET_AND_LENGTH,
)

from .errors import StorageError
from .index import OffsetIndex, TimeIndex

log = logging.getLogger(__name__)

__all__ = ["Segment", "SegmentCache", "CorruptBatch", "FileRegion", "segment_file_name", "INT_MAX"]

INT_MAX = 2147483647
_SCAN_BLOCK = 1 << 20
_READ_SLACK = 64 * 1024
_HEADER_WINDOW = 4096       # region reads: first window of batch headers read while scanning
_HEADER_WINDOW_MAX = 256 * 1024


class SegmentFd:
    """A segment's open descriptor, shared by the segment and the ``FileRegion``s made of it: it is closed
    when the last of them lets it go (a segment evicted, deleted by retention or swapped by the cleaner while
    a response still has to send a region of it keeps the file it read)."""

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self) -> None:
        fd = self.fd
        if fd >= 0:
            self.fd = -1
            try:
                os.close(fd)
            except OSError:  # pragma: no cover
                pass


class FileRegion:
    """``size`` bytes at ``offset`` of a segment file, to be sent with ``os.sendfile`` (zero-copy fetch):
    ``len()`` is its size, ``read()`` its bytes (for transports that cannot send a file, such as TLS)."""

    __slots__ = ("file", "offset", "size")

    def __init__(self, file: SegmentFd, offset: int, size: int) -> None:
        self.file = file
        self.offset = offset
        self.size = size

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileRegion(fd={self.file.fd}, offset={self.offset}, size={self.size})"

    def read(self) -> bytes:
        """The region's bytes; StorageError if the file is shorter now (truncated since the read)."""
        data = os.pread(self.file.fd, self.size, self.offset)
        if len(data) != self.size:
            raise StorageError(f"segment region {self.offset}+{self.size} was truncated")
        return data

    def rest(self, sent: int) -> FileRegion:
        """What is left after ``sent`` bytes."""
        return FileRegion(self.file, self.offset + sent, self.size - sent)


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class CorruptBatch(Exception):
    """A scan met bytes that are not a valid batch at ``position`` (torn write, garbage, bad CRC)."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"{reason} at position {position}")
        self.position = position
        self.reason = reason


class SegmentCache:
    """LRU bound on segments holding an open descriptor (one per segment; index files are opened only to
    write pending entries). Shared by all partitions of a manager."""

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = max(2, capacity)
        self._open: OrderedDict[Segment, None] = OrderedDict()
        self.lock = threading.Lock()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._open)

    def touch(self, seg: Segment) -> None:
        try:
            self._open.move_to_end(seg)
        except KeyError:
            pass

    def opened(self, seg: Segment) -> None:
        with self.lock:
            self._open[seg] = None
            while len(self._open) > self.capacity:
                victim, _ = self._open.popitem(last=False)
                if victim is seg:  # never evict the segment being opened
                    self._open[seg] = None
                    continue
                victim._evict_locked()
                self.evictions += 1

    def forget(self, seg: Segment) -> None:
        with self.lock:
            self._open.pop(seg, None)


class Segment:
    __slots__ = (
        "dir",
        "base_offset",
        "log_path",
        "index_path",
        "timeindex_path",
        "cache",
        "size",
        "next_offset",
        "max_timestamp",
        "max_timestamp_offset",
        "rolling_timestamp",
        "created_ms",
        "bytes_since_index",
        "offset_index",
        "time_index",
        "_oi_loaded",
        "_ti_loaded",
        "_largest_ts",
        "dirty",
        "active",
        "lazy",
        "_fd",
        "_fdobj",
        "__weakref__",
    )

    def __init__(
        self, directory: str, base_offset: int, max_index_bytes: int, cache: SegmentCache, now_ms: int
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        stem = os.path.join(directory, f"{base_offset:020d}")  # segment_file_name's stem
        self.log_path = stem + ".log"
        self.index_path = stem + ".index"
        self.timeindex_path = stem + ".timeindex"
        self.cache = cache
        self.size = 0
        self.next_offset: int | None = None  # known for the active segment (and after a scan)
        self.max_timestamp = -1
        self.max_timestamp_offset = -1
        self.rolling_timestamp: int | None = None  # max timestamp of the first batch (segment.ms rolling)
        self.created_ms = now_ms
        self.bytes_since_index = 0
        self.offset_index = OffsetIndex(self.index_path, base_offset, max_index_bytes)
        self.time_index = TimeIndex(self.timeindex_path, base_offset, max_index_bytes)
        self._oi_loaded = False
        self._ti_loaded = False
        self._largest_ts: int | None = None
        self.dirty = False
        self.active = False  # the partition's last segment: keeps its indexes in memory
        # opened from the clean-shutdown state (clean_state.py): its index files are read, and its size is
        # checked against the file, on first use (``warm``)
        self.lazy = False
        self._fd: int | None = None
        self._fdobj: SegmentFd | None = None  # owns _fd; FileRegions share it

    def __repr__(self) -> str:
        return f"Segment({self.log_path}, size={self.size}, next_offset={self.next_offset})"

    @property
    def txnindex_path(self) -> str:
        return self.log_path[:-4] + ".txnindex"

    # ------------------------------------------------------------------------------------------ creation
    @classmethod
    def create(
        cls, directory: str, base_offset: int, max_index_bytes: int, cache: SegmentCache, now_ms: int
    ) -> Segment:
        """A new empty segment (any stale files with the same base offset are truncated)."""
        seg = cls(directory, base_offset, max_index_bytes, cache, now_ms)
        for path in (seg.log_path, seg.index_path, seg.timeindex_path):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.close(fd)
        seg.next_offset = base_offset
        seg._oi_loaded = seg._ti_loaded = True
        seg.offset_index.mark_file_entries(0)
        seg.time_index.mark_file_entries(0)
        seg._largest_ts = None
        return seg

    @classmethod
    def open_existing(
        cls, directory: str, base_offset: int, max_index_bytes: int, cache: SegmentCache, now_ms: int
    ) -> Segment:
        seg = cls(directory, base_offset, max_index_bytes, cache, now_ms)
        st = os.stat(seg.log_path)
        seg.size = st.st_size
        seg.created_ms = now_ms
        return seg

    @classmethod
    def from_state(
        cls, directory: str, base_offset: int, size: int, max_index_bytes: int, cache: SegmentCache,
        now_ms: int,
    ) -> Segment:
        """A segment of a log opened from the clean-shutdown state: no file is touched until ``warm``."""
        seg = cls(directory, base_offset, max_index_bytes, cache, now_ms)
        seg.size = size
        seg.lazy = True
        return seg

    def warm(self, interval: int) -> None:
        """First use of a segment opened from the clean-shutdown state: the log file must have the recorded
        size (else the segment is recovered), then the indexes are read (an empty offset index is taken as
        it is, as after a clean shutdown; one that fails its check is rebuilt)."""
        self.lazy = False
        try:
            actual = os.fstat(self.fd()).st_size
        except OSError as e:
            raise StorageError(f"cannot stat {self.log_path}: {e}") from e
        if actual != self.size:
            log.warning("%s: %d bytes where the clean shutdown recorded %d; recovering the segment",
                        self.log_path, actual, self.size)
            self.size = actual
            self.recover(interval, 0)
            return
        self.ensure_offset_index(interval, allow_empty=True)
        self.ensure_time_index(interval)

    # ------------------------------------------------------------------------------------------ handles
    def fd(self) -> int:
        fd = self._fd
        if fd is None:
            try:
                fd = os.open(self.log_path, os.O_RDWR)
            except OSError as e:
                raise StorageError(f"cannot open {self.log_path}: {e}") from e
            self._fd = fd
            self._fdobj = SegmentFd(fd)
            self.cache.opened(self)
        else:
            self.cache.touch(self)
        return fd

    def _evict_locked(self) -> None:
        """Called by the cache (holding its lock): close the descriptor, drop clean in-memory indexes."""
        self._fd = None
        self._fdobj = None  # closes the descriptor unless a FileRegion still holds it
        if self.active:
            return
        if self._oi_loaded and not self.offset_index.dirty:
            self.offset_index.reset()
            self._oi_loaded = False
        if self._ti_loaded and not self.time_index.dirty:
            self.time_index.reset()
            self._ti_loaded = False

    def close_handle(self) -> None:
        with self.cache.lock:
            self._fd = None
            fdobj = self._fdobj
            self._fdobj = None
            self.cache._open.pop(self, None)
        del fdobj  # closes the descriptor unless a FileRegion still holds it

    def sync_handles(self) -> tuple[int, list]:
        """For a flush: (a dup of the log descriptor or a fresh one, index objects whose files need fsync).
        Persists pending index entries first. The caller fsyncs and closes the descriptor."""
        self.persist_indexes()
        with self.cache.lock:
            if self._fd is not None:
                fd: int | None = os.dup(self._fd)
            else:
                fd = None
        if fd is None:
            fd = os.open(self.log_path, os.O_RDONLY)
        return fd, [self.offset_index, self.time_index]

    # ------------------------------------------------------------------------------------------ indexes
    def ensure_offset_index(self, interval: int, *, allow_empty: bool = False) -> OffsetIndex:
        """The offset index, loaded or rebuilt. ``allow_empty``: an empty index file is taken as it is (a
        segment whose batches never crossed index.interval.bytes; the caller checks that while scanning)."""
        if self.lazy:
            self.warm(interval)
        if not self._oi_loaded:
            if not self.offset_index.load(self.size, allow_empty=allow_empty):
                self.rebuild_indexes(interval)
            self._oi_loaded = True
        return self.offset_index

    def ensure_time_index(self, interval: int) -> TimeIndex:
        if self.lazy:
            self.warm(interval)
        if not self._ti_loaded:
            if not self.time_index.load(self.next_offset):
                self.rebuild_indexes(interval)
            self._ti_loaded = True
        return self.time_index

    def persist_indexes(self) -> None:
        if self._oi_loaded:
            self.offset_index.persist()
        if self._ti_loaded:
            self.time_index.persist()

    def rebuild_indexes(self, interval: int) -> None:
        """Rebuild both indexes (and the in-memory tail state) from a header scan of the whole segment.
        A torn tail stops the scan (the data there is left for recovery to judge)."""
        log.info("rebuilding indexes of %s", self.log_path)
        self.offset_index.reset()
        self.time_index.reset()
        self._oi_loaded = self._ti_loaded = True
        self._reset_tail_state()
        try:
            for pos, f, _ in self.scan(0):
                self._index_batch(
                    pos,
                    f[F_BASE_OFFSET] + f[F_LAST_OFFSET_DELTA],
                    f[F_MAX_TIMESTAMP],
                    f[1] + LOG_OVERHEAD,
                    interval,
                )
        except CorruptBatch as e:
            log.warning("%s: %s (index rebuilt up to there)", self.log_path, e)
        self._final_time_entry_if_inactive()
        self.offset_index.mark_file_entries(-1)  # rewrite the files from scratch
        self.time_index.mark_file_entries(-1)
        self.persist_indexes()

    def _final_time_entry_if_inactive(self) -> None:
        if not self.active and self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset)

    def _reset_tail_state(self) -> None:
        self.max_timestamp = -1
        self.max_timestamp_offset = -1
        self.bytes_since_index = 0
        self.rolling_timestamp = None
        self.next_offset = self.base_offset

    def _index_batch(self, pos: int, last_offset: int, max_ts: int, size: int, interval: int) -> None:
        """Per-batch bookkeeping shared by append, rebuild and recovery (Kafka's LogSegment.append rule)."""
        if self.rolling_timestamp is None:
            self.rolling_timestamp = max_ts
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.max_timestamp_offset = last_offset
        if self.bytes_since_index > interval:
            self.offset_index.append(last_offset, pos)
            self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset)
            self.bytes_since_index = 0
        self.bytes_since_index += size
        self.next_offset = last_offset + 1

    def index_full(self) -> bool:
        return self.offset_index.is_full or self.time_index.is_full

    def on_become_inactive(self) -> None:
        """Segment rolled or log closing: final time index entry (largest timestamp), write indexes."""
        if self._ti_loaded and self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.max_timestamp_offset)
        if self.max_timestamp >= 0:
            self._largest_ts = self.max_timestamp
        self.persist_indexes()

    # ------------------------------------------------------------------------------------------ scanning
    def scan(
        self, start: int, *, full: bool = False, end: int | None = None
    ) -> Iterator[tuple[int, tuple, memoryview | None]]:
        """Yield (position, header tuple, whole-batch memoryview if ``full`` else None) for each batch from
        ``start`` to ``end`` (default: the segment size), reading in 1 MiB blocks. Raises ``CorruptBatch`` at
        a batch that is torn or does not frame (length < 49, magic != 2). CRCs are not checked here."""
        fd = self.fd()
        limit = self.size if end is None else end
        pos = start
        buf = b""
        view = memoryview(buf)
        buf_pos = start
        unpack = HEADER_STRUCT.unpack_from
        while pos < limit:
            if limit - pos < HEADER_SIZE:
                raise CorruptBatch(pos, f"truncated batch header ({limit - pos} bytes)")
            rel = pos - buf_pos
            if rel + HEADER_SIZE > len(buf):
                buf = os.pread(fd, min(_SCAN_BLOCK, limit - pos), pos)
                view = memoryview(buf)
                buf_pos = pos
                rel = 0
                if len(buf) < HEADER_SIZE:
                    raise CorruptBatch(pos, "short read")
            f = unpack(buf, rel)
            blen = f[F_BATCH_LENGTH]
            if blen < MIN_BATCH_LENGTH:
                raise CorruptBatch(pos, f"invalid batch length {blen}")
            if f[F_MAGIC] != 2:
                raise CorruptBatch(pos, f"invalid magic {f[F_MAGIC]}")
            size = blen + LOG_OVERHEAD
            if size > limit - pos:
                raise CorruptBatch(pos, f"truncated batch (size {size}, {limit - pos} bytes left)")
            if full:
                if rel + size > len(buf):
                    buf = os.pread(fd, max(min(_SCAN_BLOCK, limit - pos), size), pos)
                    view = memoryview(buf)
                    buf_pos = pos
                    rel = 0
                    if len(buf) < size:
                        raise CorruptBatch(pos, "short read")
                yield pos, f, view[rel : rel + size]
            else:
                yield pos, f, None
            pos += size

    def recover(self, interval: int, max_message_bytes: int) -> int:
        """Validate every batch (framing, magic, CRC-32C, offsets going forward), rebuild the indexes, and cut
        the file at the first invalid batch. Returns the number of bytes truncated."""
        self.offset_index.reset()
        self.time_index.reset()
        self._oi_loaded = self._ti_loaded = True
        self._reset_tail_state()
        valid_end = 0
        expected = self.base_offset
        try:
            for pos, f, batch in self.scan(0, full=True):
                assert batch is not None
                if crc32c(batch[ATTRIBUTES_OFFSET:]) != f[F_CRC]:
                    raise CorruptBatch(pos, "CRC mismatch")
                base = f[F_BASE_OFFSET]
                lod = f[F_LAST_OFFSET_DELTA]
                if base < expected or lod < 0 or base + lod - self.base_offset > INT_MAX:
                    raise CorruptBatch(
                        pos, f"invalid offsets base={base} last_delta={lod} (expected >= {expected})"
                    )
                size = f[F_BATCH_LENGTH] + LOG_OVERHEAD
                self._index_batch(pos, base + lod, f[F_MAX_TIMESTAMP], size, interval)
                expected = base + lod + 1
                valid_end = pos + size
        except CorruptBatch as e:
            log.warning("recovery of %s: %s; truncating %d bytes", self.log_path, e, self.size - valid_end)
        truncated = self.size - valid_end
        if truncated:
            self._truncate_file(valid_end)
        self._final_time_entry_if_inactive()
        self.offset_index.mark_file_entries(-1)  # force a rewrite of the index files
        self.time_index.mark_file_entries(-1)
        self.persist_indexes()
        return truncated

    def load_tail(self, interval: int) -> None:
        """Clean-shutdown load of the active segment: next offset and timestamps from the index tail plus a
        short header scan. Falls back to full recovery if the tail does not frame."""
        oi = self.ensure_offset_index(interval, allow_empty=True)
        ti = self.ensure_time_index(interval)
        if self.next_offset is not None:  # a rebuild already computed everything
            return
        last_off, pos = oi.last_entry()
        self.next_offset = self.base_offset
        last = ti.last_entry()
        if last is not None:
            self.max_timestamp, self.max_timestamp_offset = last
        if pos > 0:
            self.next_offset = last_off + 1
        self.rolling_timestamp = self._first_batch_timestamp()
        self.bytes_since_index = 0
        try:
            for _p, f, _ in self.scan(pos):
                if self.bytes_since_index > interval:  # an index entry is missing here: not our index
                    log.warning("%s: index entries missing after a clean shutdown; rebuilding", self.log_path)
                    self.next_offset = None
                    self.rebuild_indexes(interval)
                    return
                last_offset = f[F_BASE_OFFSET] + f[F_LAST_OFFSET_DELTA]
                ts = f[F_MAX_TIMESTAMP]
                if ts > self.max_timestamp:
                    self.max_timestamp = ts
                    self.max_timestamp_offset = last_offset
                self.next_offset = last_offset + 1
                self.bytes_since_index += f[F_BATCH_LENGTH] + LOG_OVERHEAD
        except CorruptBatch as e:
            log.warning("%s: %s after a clean shutdown; recovering the segment", self.log_path, e)
            self.recover(interval, 0)

    def _first_batch_timestamp(self) -> int | None:
        if self.size < HEADER_SIZE:
            return None
        data = os.pread(self.fd(), HEADER_SIZE, 0)
        if len(data) < HEADER_SIZE:
            return None
        return HEADER_STRUCT.unpack_from(data, 0)[F_MAX_TIMESTAMP]

    # ------------------------------------------------------------------------------------------ writing
    def write(self, data: bytes | bytearray | memoryview) -> int:
        """Append ``data`` at the end with pwrite; returns the position it was written at."""
        fd = self.fd()
        pos = self.size
        n = len(data)
        try:
            written = os.pwrite(fd, data, pos)
            while written < n:  # regular files rarely do partial writes, but be exact
                written += os.pwrite(fd, memoryview(data)[written:], pos + written)
        except OSError as e:
            try:
                os.ftruncate(fd, pos)  # no torn batch behind the last good one (needs no space)
            except OSError:
                pass
            raise StorageError(f"write to {self.log_path} failed: {e}") from e
        self.size = pos + n
        self.dirty = True
        return pos

    def _truncate_file(self, position: int) -> None:
        fd = self.fd()
        os.ftruncate(fd, position)
        self.size = position
        self.dirty = True

    def truncate_to(self, offset: int, interval: int) -> int:
        """Remove the batch containing ``offset`` and everything after it; returns the new next offset."""
        self.ensure_time_index(interval)
        found = self.find_batch(offset, interval)
        if found is None:
            return self.next_offset if self.next_offset is not None else self.base_offset
        pos = found[0]
        self._truncate_file(pos)
        self.offset_index.truncate_to_position(pos)
        _, start = self.offset_index.last_entry()
        tail = [f for _p, f, _ in self.scan(start)]
        new_next = tail[-1][F_BASE_OFFSET] + tail[-1][F_LAST_OFFSET_DELTA] + 1 if tail else self.base_offset
        self.next_offset = new_next
        self.time_index.truncate_to_offset(new_next)
        last = self.time_index.last_entry()
        self.max_timestamp, self.max_timestamp_offset = last if last is not None else (-1, -1)
        for f in tail:
            ts = f[F_MAX_TIMESTAMP]
            if ts > self.max_timestamp:
                self.max_timestamp = ts
                self.max_timestamp_offset = f[F_BASE_OFFSET] + f[F_LAST_OFFSET_DELTA]
        self.bytes_since_index = 0
        if self.size == 0:
            self.rolling_timestamp = None
        self._largest_ts = None
        self.persist_indexes()
        return new_next

    # ------------------------------------------------------------------------------------------ reading
    def find_batch(self, offset: int, interval: int) -> tuple[int, int, int, int] | None:
        """(position, base offset, last offset, size) of the first batch whose last offset >= ``offset``."""
        oi = self.ensure_offset_index(interval)
        _, pos = oi.lookup(offset)
        fd = self.fd()
        limit = self.size
        buf = b""
        buf_pos = pos
        while pos < limit:
            rel = pos - buf_pos
            if rel + 27 > len(buf):
                buf = os.pread(fd, min(16384, limit - pos), pos)
                buf_pos = pos
                rel = 0
                if len(buf) < 27:
                    return None
            base, blen = OFFSET_AND_LENGTH.unpack_from(buf, rel)
            (lod,) = INT32.unpack_from(buf, rel + 23)
            size = blen + LOG_OVERHEAD
            if base + lod >= offset:
                return pos, base, base + lod, size
            if blen < MIN_BATCH_LENGTH:
                return None
            pos += size
        return None

    def region(self, position: int, size: int) -> FileRegion:
        """``size`` bytes at ``position`` of the log file, as a region that keeps the file open."""
        self.fd()
        assert self._fdobj is not None
        return FileRegion(self._fdobj, position, size)

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool, interval: int,
        region: bool = False,
    ) -> tuple[bytes | memoryview | FileRegion, int, int, bool]:
        """Whole batches starting with the one containing ``offset``: (data (bytes-like), first batch base
        offset, last offset + 1, reached the end of the segment). Stops before a batch that would exceed
        ``max_bytes`` (unless it is the first and ``min_one``) or whose last offset is >= ``max_offset``.

        ``region``: the data is a ``FileRegion`` of the file (for sendfile), and only batch headers are read
        (windows of a few KiB at each batch start, larger while the batches are small); data that lies
        within the last window read comes as a view of it, as without ``region``."""
        limit = self.size
        if limit == 0:
            return b"", offset, offset, True
        oi = self.ensure_offset_index(interval)
        _, pos = oi.lookup(offset)
        fd = self.fd()
        want = _HEADER_WINDOW if region else max(max_bytes, 0) + interval + _READ_SLACK
        win = os.pread(fd, min(want, limit - pos), pos)
        win_pos = pos
        unpack_ol = OFFSET_AND_LENGTH.unpack_from
        unpack_i = INT32.unpack_from
        # 1. the batch containing ``offset``
        p = pos
        while True:
            if p >= limit:
                return b"", offset, offset, True
            rel = p - win_pos
            if rel + 27 > len(win):
                win = os.pread(fd, min(want, limit - p), p)
                win_pos = p
                rel = 0
                if len(win) < 27:
                    return b"", offset, offset, True
            base, blen = unpack_ol(win, rel)
            (lod,) = unpack_i(win, rel + 23)
            if base + lod >= offset:
                break
            if blen < MIN_BATCH_LENGTH:  # garbage: behave as end of segment
                return b"", offset, offset, True
            p += blen + LOG_OVERHEAD
        start = p
        first_offset = base
        total = 0
        last_excl = offset
        complete = False
        # 2. whole batches within the limits
        while True:
            if p >= limit:
                complete = True
                break
            if total and total + HEADER_SIZE > max_bytes:
                break
            rel = p - win_pos
            if rel + 27 > len(win):
                if region and p - win_pos < want:  # small batches: fewer, larger header windows
                    want = min(want * 4, _HEADER_WINDOW_MAX)
                win = os.pread(fd, min(want, limit - p), p)
                win_pos = p
                rel = 0
                if len(win) < 27:
                    complete = True
                    break
            base, blen = unpack_ol(win, rel)
            (lod,) = unpack_i(win, rel + 23)
            last = base + lod
            if max_offset is not None and last >= max_offset:
                break
            bsize = blen + LOG_OVERHEAD
            if blen < MIN_BATCH_LENGTH or p + bsize > limit:
                complete = True  # torn tail (only possible before recovery): never serve it
                break
            if total + bsize > max_bytes and not (total == 0 and min_one):
                break
            total += bsize
            p += bsize
            last_excl = last + 1
            if total >= max_bytes:
                complete = p >= limit
                break
        if total == 0:
            return b"", offset, offset, complete
        in_window = start >= win_pos and p <= win_pos + len(win)
        if region and not in_window:  # (what the header windows read already is sent from memory)
            return self.region(start, p - start), first_offset, last_excl, complete
        data: bytes | memoryview
        if in_window:
            if start == win_pos and p == win_pos + len(win):
                data = win
            else:
                data = memoryview(win)[start - win_pos : p - win_pos]  # a view: no second copy
        else:
            data = os.pread(fd, p - start, start)
        return data, first_offset, last_excl, complete

    def largest_timestamp(self) -> int:
        """The segment's largest record timestamp (Kafka's LogSegment.largestTimestamp): the max timestamp
        when known (> 0), otherwise the file's modification time."""
        if self.next_offset is not None and self.max_timestamp > 0:
            return self.max_timestamp
        if self._largest_ts is None:
            last = TimeIndex.read_last_entry(self.timeindex_path)
            self._largest_ts = last[0] if last is not None else -1
        if self._largest_ts > 0:
            return self._largest_ts
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    # ------------------------------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self.persist_indexes()
        self.close_handle()

    def delete_files(self) -> None:
        self.close_handle()
        for path in (self.log_path, self.index_path, self.timeindex_path, self.txnindex_path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
