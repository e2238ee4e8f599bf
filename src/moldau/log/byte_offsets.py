"""Kafka 0.7 byte offsets over a partition's log: logical offset -> 0.7 byte offset.

A 0.7 client addresses messages by byte position in the partition's log and computes the next position
itself (offset + 4 + message length). moldau's log holds v2 record batches; the legacy listener serves each
batch's *0.7 view* (``moldau.protocol.kafka07.batch_to_message_set``), whose size is a pure function of the
batch. The byte offset of a batch is the sum of the view sizes of the batches before it, so it has to be
remembered once the batches before it are gone (retention): this index keeps one entry per batch with a
non-empty view, in ``kafka07.byteoffsets`` beside the segment files::

    int64 base offset, int64 next offset (last offset + 1), int64 byte position, int32 view size

It is created the first time the legacy listener reads a partition and from then on kept by the log
(``PartitionLog`` drives it through ``ByteOffsetIndex.attach``): entries are added lazily up to what a fetch
needs, always before segments are deleted (``cover``), dropped on truncation, and checked against the log on
load (entries past the log end, e.g. a tail lost in a crash, are dropped and rebuilt from the log). Entries
below the log start offset are trimmed, except the last one, which keeps the running byte position.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from array import array
from bisect import bisect_right
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from moldau.protocol.records import RecordError, split_batches

from .checkpoint import atomic_write
from .errors import StorageError

log = logging.getLogger(__name__)

FILE_NAME = "kafka07.byteoffsets"
_ENTRY = struct.Struct(">qqqi")
_READ_CHUNK = 1 << 20
_STEP_CHUNK = 64 << 10  # log bytes per read of an incremental step (``cover`` with a deadline)

# (buffer, position, header) -> size of the batch's 0.7 view
Sizer = Callable[[Any, int, Any], int]


class LogReader(Protocol):
    """``PartitionLog.read``: whole batches from the one holding ``offset``, none past ``max_offset``."""

    def __call__(self, offset: int, max_bytes: int, *, max_offset: int | None = ..., min_one: bool = ...
                 ) -> Any: ...


def _default_sizer() -> Sizer:
    from moldau.protocol.kafka07 import batch_message_set_size

    return batch_message_set_size


VIEW_PREFIX = "kafka07.views."
VIEW_CHUNK_BYTES = 64 << 20
VIEW_AHEAD_BYTES = 8 << 20  # views an indexing job builds past the position a read waits at (``prepare``)


class ViewStore:
    """The 0.7 views of indexed units, stored contiguously from some byte position on, in chunk files
    ``kafka07.views.<start position, 20 digits>`` beside the index: a 0.7 read of stored views is one
    ``pread``, as cheap as a modern read. The legacy listener appends the views it converts for a read when
    they continue the store, so data is converted once, by its first 0.7 read, and every later read of it
    (the same consumer again, other consumers) is a pread. Derived data: cut with the index (truncation,
    retention), dropped after an unclean shutdown (its bytes may not have reached the disk) and after a
    cleaning pass (views of cleaned units change); what is not stored is converted from the log."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.starts: list[int] = []
        self.sizes: list[int] = []

    def _path(self, start: int) -> str:
        return os.path.join(self.dir, f"{VIEW_PREFIX}{start:020d}")

    @property
    def start(self) -> int | None:
        return self.starts[0] if self.starts else None

    @property
    def end(self) -> int | None:
        return self.starts[-1] + self.sizes[-1] if self.starts else None

    def load(self, names: set[str], trusted: bool, end_position: int) -> None:
        files = sorted(int(n[len(VIEW_PREFIX):]) for n in names
                       if n.startswith(VIEW_PREFIX) and n[len(VIEW_PREFIX):].isdigit())
        for start in files:
            path = self._path(start)
            if trusted and (not self.starts or start == self.end):
                self.starts.append(start)
                self.sizes.append(os.path.getsize(path))
            else:
                _unlink(path)
                trusted = False
        self.truncate(end_position)

    def append(self, position: int, data: bytes) -> None:
        """Views of the units from ``position`` on; ignored unless they continue the store (or it is
        empty)."""
        if not data:
            return
        end = self.end
        if end is not None and position != end:
            return
        if end is None or self.sizes[-1] >= VIEW_CHUNK_BYTES:
            self.starts.append(position)
            self.sizes.append(0)
        with open(self._path(self.starts[-1]), "ab") as f:
            f.write(data)
        self.sizes[-1] += len(data)

    def read(self, position: int, n: int) -> bytes:
        """Up to ``n`` stored bytes from ``position`` (b"" when it is not stored)."""
        start, end = self.start, self.end
        if start is None or end is None or not start <= position < end:
            return b""
        i = bisect_right(self.starts, position) - 1
        off = position - self.starts[i]
        if self.sizes[i] - off >= n or i == len(self.starts) - 1:  # one chunk file: one pread, no copy
            try:
                fd = os.open(self._path(self.starts[i]), os.O_RDONLY)
                try:
                    want = min(n, self.sizes[i] - off)
                    got = os.pread(fd, want, off)
                finally:
                    os.close(fd)
                if len(got) != want:
                    raise OSError(f"short read of {self._path(self.starts[i])}")
            except OSError as e:
                log.error("%s: stored 0.7 views unreadable (%s); dropped", self.dir, e)
                self.reset()
                return b""
            return got
        out = bytearray()
        try:
            while len(out) < n and i < len(self.starts):
                off = position + len(out) - self.starts[i]
                want = min(n - len(out), self.sizes[i] - off)
                fd = os.open(self._path(self.starts[i]), os.O_RDONLY)
                try:
                    got = os.pread(fd, want, off)
                finally:
                    os.close(fd)
                if len(got) != want:
                    raise OSError(f"short read of {self._path(self.starts[i])}")
                out += got
                i += 1
        except OSError as e:
            log.error("%s: stored 0.7 views unreadable (%s); dropped", self.dir, e)
            self.reset()
            return b""
        return bytes(out)

    def truncate(self, position: int) -> None:
        """Drop what is stored at and after ``position``."""
        while self.starts and self.starts[-1] >= position:
            _unlink(self._path(self.starts.pop()))
            self.sizes.pop()
        if self.starts and self.starts[-1] + self.sizes[-1] > position:
            self.sizes[-1] = position - self.starts[-1]
            os.truncate(self._path(self.starts[-1]), self.sizes[-1])

    def trim(self, position: int) -> None:
        """Drop the chunks wholly below ``position`` (the first retained byte)."""
        while len(self.starts) > 1 and self.starts[1] <= position:
            _unlink(self._path(self.starts.pop(0)))
            self.sizes.pop(0)

    def reset(self) -> None:
        for start in self.starts:
            _unlink(self._path(start))
        self.starts.clear()
        self.sizes.clear()


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class IndexJob:
    """Batches read from the log (on the event loop) whose 0.7 view sizes a worker thread computes: the
    decoding, which is the cost of indexing, runs off the loop; ``ByteOffsetIndex.commit`` adds the result.
    With ``with_views`` (the batches continue the stored views, a read waits for them) the worker builds the
    views themselves in the same scan (a view's size is its length) and ``commit`` stores them too: data a
    read is about to convert is scanned once, not once for the index and once for the views."""

    __slots__ = ("batches", "buf", "built", "path", "position", "scanned", "sizer", "with_views")

    def __init__(self, scanned: int, position: int, buf: bytes, batches: list[tuple[int, Any]], sizer: Sizer,
                 path: str, with_views: bool = False) -> None:
        self.scanned = scanned
        self.position = position
        self.buf = buf
        self.batches = batches
        self.sizer = sizer
        self.path = path
        self.with_views = with_views
        self.built: bytes | None = None  # the views, joined, when ``with_views``

    def compute(self) -> list[int]:
        if self.with_views:
            from moldau.protocol.kafka07 import batch_views

            sizes, self.built = batch_views(self.buf, self.batches, self._no_view)
            return sizes
        out = []
        for bp, h in self.batches:
            try:
                out.append(self.sizer(self.buf, bp, h))
            except RecordError as e:
                self._no_view(h, e)
                out.append(0)
        return out

    def _no_view(self, h: Any, e: RecordError) -> None:
        """A batch that does not decode has no 0.7 view (size 0)."""
        log.error("%s: batch at offset %d has no 0.7 view: %s", self.path, h.base_offset, e)


class ViewJob:
    """Whole-unit batches read from the log (on the event loop) whose 0.7 views a worker thread builds
    (``compute``) for ``ByteOffsetIndex.commit_views`` to store."""

    __slots__ = ("buf", "path", "position", "units")

    def __init__(self, position: int, buf: bytes, units: list[tuple[int, int, Any]], path: str) -> None:
        self.position = position
        self.buf = buf
        self.units = units  # (unit size, batch position in buf, header)
        self.path = path

    def compute(self) -> bytes:
        """The units' views, up to the first whose view does not have its unit's size (changed since)."""
        from moldau.protocol.kafka07 import batch_views

        def no_view(h: Any, e: RecordError) -> None:
            log.error("%s: batch at offset %d has no 0.7 view: %s", self.path, h.base_offset, e)

        sizes, data = batch_views(self.buf, [(bp, h) for _size, bp, h in self.units], no_view)
        n = 0
        for (size, _bp, _h), got in zip(self.units, sizes):
            if got != size:
                break
            n += size
        return data if n == len(data) else data[:n]


class ByteOffsetIndex:
    """The entries of one partition, in memory (parallel arrays) and in ``kafka07.byteoffsets``."""

    def __init__(self, directory: str, sizer: Sizer | None = None, *, names: set[str] | None = None,
                 trusted: bool = True) -> None:
        self.path = os.path.join(directory, FILE_NAME)
        self.sizer = sizer or _default_sizer()
        self.bases = array("q")
        self.nexts = array("q")
        self.positions = array("q")
        self.sizes = array("q")
        self.scanned = 0  # logical offset up to which the log has been indexed (control batches included)
        self.complete_to = 0  # the index holds every whole batch below this offset (a ``cover`` target)
        fresh = self._load()
        self.views = ViewStore(directory)
        # an unclean shutdown may have lost view bytes the files' sizes claim; a new index has no views
        self.views.load(set(os.listdir(directory)) if names is None else names, trusted and not fresh,
                        self.end_position)

    # ------------------------------------------------------------------------------------------ persistence
    @classmethod
    def open_if_present(cls, directory: str, names: set[str], clean_shutdown: bool = True
                        ) -> ByteOffsetIndex | None:
        """The partition's index when ``names`` (its directory listing, already read at load) has one."""
        return cls(directory, names=names, trusted=clean_shutdown) if FILE_NAME in names else None

    def _load(self) -> bool:
        """Entries from the file; True when there was none (a new index)."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            # created empty on the event loop's thread, without an fsync: entries are appended without one
            # too, and an index lost with the page cache is rebuilt from the log
            with open(self.path, "ab"):
                pass
            return True
        whole = len(data) - len(data) % _ENTRY.size
        if whole != len(data):
            log.warning("%s: dropping a torn entry at the end", self.path)
        for base, nxt, pos, size in _ENTRY.iter_unpack(memoryview(data)[:whole]):
            if self.nexts and (base < self.nexts[-1] or pos != self.positions[-1] + self.sizes[-1]):
                log.warning("%s: entry for offset %d breaks the sequence; the rest is rebuilt", self.path,
                            base)
                break
            self._append_mem(base, nxt, pos, size)
        if whole != len(data) or len(self.bases) != whole // _ENTRY.size:
            self._rewrite()
        self.scanned = self.nexts[-1] if self.nexts else 0
        return False

    def _append_mem(self, base: int, nxt: int, pos: int, size: int) -> None:
        self.bases.append(base)
        self.nexts.append(nxt)
        self.positions.append(pos)
        self.sizes.append(size)

    def _rewrite(self) -> None:
        atomic_write(self.path, b"".join(_ENTRY.pack(*e) for e in self.entries()))

    def entries(self) -> list[tuple[int, int, int, int]]:
        return list(zip(self.bases, self.nexts, self.positions, self.sizes))

    # ------------------------------------------------------------------------------------------ queries
    @property
    def end_position(self) -> int:
        """Byte position right after the last indexed batch."""
        return self.positions[-1] + self.sizes[-1] if self.positions else 0

    def start_position(self, log_start_offset: int) -> int:
        """Byte position of the first batch that is still (at least partly) in the log."""
        i = bisect_right(self.nexts, log_start_offset)
        if i < len(self.positions):
            return self.positions[i]
        return self.end_position

    def locate(self, position: int) -> tuple[int, int, int] | None:
        """(base offset, batch byte position, view size) of the indexed batch whose view holds byte
        ``position``, or None when ``position`` is not inside any indexed batch."""
        i = bisect_right(self.positions, position) - 1
        if i < 0 or position >= self.positions[i] + self.sizes[i]:
            return None
        return self.bases[i], self.positions[i], self.sizes[i]

    def index_of(self, position: int) -> int | None:
        """Index of the entry whose view holds byte ``position``, or None."""
        i = bisect_right(self.positions, position) - 1
        if i < 0 or position >= self.positions[i] + self.sizes[i]:
            return None
        return i

    def position_of(self, offset: int) -> int | None:
        """Byte position of the first indexed batch whose records end after logical ``offset``."""
        i = bisect_right(self.nexts, offset)
        if i < len(self.positions):
            return self.positions[i]
        return None

    def offset_after(self, position: int) -> int:
        """Logical offset of the first batch starting at or after byte ``position``; ``scanned`` if none."""
        i = bisect_right(self.positions, position - 1)
        return self.bases[i] if i < len(self.bases) else self.scanned

    # ------------------------------------------------------------------------------------------ maintenance
    def cover(self, read: LogReader, log_start_offset: int, upto: int, deadline: float | None = None
              ) -> bool:
        """Index the log's batches up to logical offset ``upto`` (exclusive; only whole batches below it).
        ``read(offset, max_bytes, max_offset=...)`` is ``PartitionLog.read``. With ``deadline`` (a
        ``time.perf_counter()`` value) it stops after the first chunk read past it, in chunks of
        ``_STEP_CHUNK``: an incremental step. Returns True when the index reaches ``upto``."""
        start = max(self.scanned, log_start_offset)
        if start >= upto:
            self.complete_to = max(self.complete_to, upto)
            return True
        new: list[bytes] = []
        pos = self.end_position
        offset = start
        chunk = _READ_CHUNK if deadline is None else _STEP_CHUNK
        done = True
        while offset < upto:
            if deadline is not None and offset > start and time.perf_counter() > deadline:
                done = False
                break
            before = offset
            rr = read(offset, chunk, max_offset=upto)
            if not rr.size:
                break
            buf = b"".join(bytes(c) for c in rr.chunks)
            for bpos, h in split_batches(buf, allow_truncated=True):
                nxt = h.base_offset + h.last_offset_delta + 1
                if nxt <= offset:
                    continue
                try:
                    size = self.sizer(buf, bpos, h)
                except RecordError as e:  # a batch that does not decode has no 0.7 view (size 0)
                    log.error("%s: batch at offset %d has no 0.7 view: %s", self.path, h.base_offset, e)
                    size = 0
                if size > 0:
                    self._append_mem(h.base_offset, nxt, pos, size)
                    new.append(_ENTRY.pack(h.base_offset, nxt, pos, size))
                    pos += size
                offset = nxt
                if deadline is not None and time.perf_counter() > deadline and offset < upto:
                    done = False
                    break
            if offset == before:  # pragma: no cover - defensive: no progress
                break
            if not done:
                break
        self.scanned = max(self.scanned, offset)
        if new:
            with open(self.path, "ab") as f:
                f.write(b"".join(new))
        if done:
            self.complete_to = max(self.complete_to, upto)
        return done

    # ------------------------------------------------------------------------------------------ off the loop
    def prepare(self, read: LogReader, log_start_offset: int, upto: int, max_bytes: int,
                views_from: int | None = None, views_ahead: int | None = None) -> IndexJob | None:
        """The next batches to index towards ``upto`` (about ``max_bytes`` of log, whole batches), as a job
        whose sizes a worker thread computes (``IndexJob.compute``) and ``commit`` adds; None when the index
        is there (or the log has nothing more below ``upto``). ``views_from``: the byte position a read waits
        at; while the index's end is within ``VIEW_AHEAD_BYTES`` of views past it and continues the stored
        views (or the store is empty and the read is at the index's end), the job builds the views too."""
        start = max(self.scanned, log_start_offset)
        if start >= upto:
            self.complete_to = max(self.complete_to, upto)
            return None
        rr = read(start, max_bytes, max_offset=upto)
        if not rr.size:
            self.complete_to = max(self.complete_to, upto)
            return None
        buf = b"".join(bytes(c) for c in rr.chunks)
        batches = [(bp, h) for bp, h in split_batches(buf, allow_truncated=True)
                   if h.base_offset + h.last_offset_delta + 1 > start]
        if not batches:
            self.complete_to = max(self.complete_to, upto)
            return None
        end = self.end_position
        store = self.views.end
        ahead = VIEW_AHEAD_BYTES if views_ahead is None else views_ahead
        with_views = (views_from is not None and views_from <= end < views_from + ahead
                      and (store == end or (store is None and end == views_from)))
        return IndexJob(self.scanned, end, buf, batches, self.sizer, self.path, with_views)

    def prepare_views(self, read: LogReader, log_start_offset: int, position: int, max_bytes: int
                      ) -> ViewJob | None:
        """Batches to convert, in a worker thread, into the views of the units from ``position`` (a unit's
        start where the store ends or, empty, may start): about ``max_bytes`` of log, whole batches that
        are whole units (it stops at a unit a cleaning pass changed). None when there is nothing to do."""
        end = self.views.end
        i = self.index_of(position)
        if i is None or self.positions[i] != position or end not in (None, position):
            return None
        rr = read(max(self.bases[i], log_start_offset), max_bytes, max_offset=self.scanned)
        if not rr.size:
            return None
        buf = b"".join(bytes(c) for c in rr.chunks)
        units: list[tuple[int, int, Any]] = []
        j = i
        for bp, h in split_batches(buf, allow_truncated=True):
            if j >= len(self.bases):
                break
            nxt = h.base_offset + h.last_offset_delta + 1
            if nxt <= self.bases[j]:
                continue  # no view (a transaction marker)
            if h.base_offset != self.bases[j] or nxt != self.nexts[j]:
                break
            units.append((self.sizes[j], bp, h))
            j += 1
        return ViewJob(position, buf, units, self.path) if units else None

    def commit_views(self, job: ViewJob, data: bytes) -> bool:
        """Store a job's views, unless the store or the index moved meanwhile. True when stored."""
        i = self.index_of(job.position)
        if not data or i is None or self.positions[i] != job.position or self.views.end not in (
                None, job.position):
            return False
        self.views.append(job.position, data)
        return True

    def commit(self, job: IndexJob, sizes: list[int]) -> bool:
        """Add a job's entries, unless the index moved meanwhile (a retention pass indexed, a truncation
        dropped): then nothing is added and the caller prepares again. True when added."""
        if self.scanned != job.scanned or self.end_position != job.position:
            return False
        new: list[bytes] = []
        pos = job.position
        offset = self.scanned
        for (_bp, h), size in zip(job.batches, sizes):
            nxt = h.base_offset + h.last_offset_delta + 1
            if size > 0:
                self._append_mem(h.base_offset, nxt, pos, size)
                new.append(_ENTRY.pack(h.base_offset, nxt, pos, size))
                pos += size
            offset = nxt
        self.scanned = max(self.scanned, offset)
        if new:
            with open(self.path, "ab") as f:
                f.write(b"".join(new))
        if job.built is not None and self.views.end in (None, job.position):
            self.views.append(job.position, job.built)
        return True

    def apply_cleaning(self, records: list[tuple[int, int, bool]]) -> None:
        """A cleaning pass rewrote one uncompressed batch: ``records`` are its records before the pass,
        (offset, view size, kept). Each entry holding records of the batch is split into runs of kept records
        and runs of removed ones (holes, served as fillers), at the same positions; neighbouring holes of the
        batch's range merge. Entries are unchanged when the sizes do not add up (the batch was indexed
        differently) or nothing of them was removed."""
        if not records or all(k for _o, _s, k in records):
            return
        lo, hi = records[0][0], records[-1][0] + 1
        i0 = bisect_right(self.nexts, lo)
        i1 = i0
        while i1 < len(self.bases) and self.bases[i1] < hi:
            i1 += 1
        if i0 == i1:
            return
        pieces: list[list[int]] = []  # [base, next, position, size, is_hole]
        for i in range(i0, i1):
            base, nxt, pos, size = self.bases[i], self.nexts[i], self.positions[i], self.sizes[i]
            inside = [r for r in records if base <= r[0] < nxt]
            if not inside or sum(sz for _o, sz, _k in inside) != size:
                if inside:
                    log.warning("%s: entry at offset %d does not match the cleaned batch; kept as is",
                                self.path, base)
                pieces.append([base, nxt, pos, size, int(not inside)])
                continue
            run: list[int] | None = None
            for j, (off, sz, kept) in enumerate(inside):
                hole = int(not kept)
                if run is not None and run[4] == hole:
                    run[3] += sz
                else:
                    if run is not None:
                        run[1] = off
                        pieces.append(run)
                    run = [base if j == 0 else off, nxt, pos, sz, hole]
                pos += sz
            assert run is not None
            pieces.append(run)
        merged: list[list[int]] = []
        for pc in pieces:
            if merged and pc[4] and merged[-1][4]:
                merged[-1][1] = pc[1]
                merged[-1][3] += pc[3]
            else:
                merged.append(pc)
        for a, k in ((self.bases, 0), (self.nexts, 1), (self.positions, 2), (self.sizes, 3)):
            a[i0:i1] = array("q", [pc[k] for pc in merged])
        self._rewrite()

    def truncate(self, log_end_offset: int) -> None:
        """Forget the batches at or after ``log_end_offset`` (the log was truncated there)."""
        self.scanned = min(self.scanned, log_end_offset)
        self.complete_to = min(self.complete_to, log_end_offset)
        i = bisect_right(self.bases, log_end_offset - 1)
        if i < len(self.bases):
            for a in (self.bases, self.nexts, self.positions, self.sizes):
                del a[i:]
            self._rewrite()
            self.scanned = min(self.scanned, self.nexts[-1] if self.nexts else log_end_offset)
        self.views.truncate(self.end_position)

    def trim(self, log_start_offset: int) -> None:
        """Drop the entries of batches wholly below ``log_start_offset``, keeping at least the last entry."""
        i = min(bisect_right(self.nexts, log_start_offset), len(self.bases) - 1)
        if i > 0:
            for a in (self.bases, self.nexts, self.positions, self.sizes):
                del a[:i]
            self._rewrite()
        self.views.trim(self.start_position(log_start_offset))

    @staticmethod
    def attach(plog: Any) -> ByteOffsetIndex:
        """The partition's index, created (empty) if it has none: the log keeps it from now on."""
        idx = plog.byte_offsets
        if idx is None:
            idx = ByteOffsetIndex(plog.dir, names=set())
            plog.byte_offsets = idx
        return idx


class _IndexedLog(Protocol):
    """What :class:`ByteOffsetsAccess` needs of its log (``PartitionLog``)."""

    @property
    def _lock(self) -> AbstractContextManager[Any]: ...

    @property
    def _closed(self) -> bool: ...

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def byte_offsets(self) -> ByteOffsetIndex | None: ...

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = ..., min_one: bool = ...,
             regions: bool = ...) -> Any: ...


class ByteOffsetsAccess:
    """``PartitionLog``'s Kafka 0.7 byte-offset index, under the log's lock: the index is attached (made
    empty) on first use and kept by the log (``byte_offsets``); each method takes the lock, checks that the
    log is open and hands the index the log's reader."""

    def byte_offsets_cover(self: _IndexedLog, upto: int) -> ByteOffsetIndex:
        """The Kafka 0.7 byte-offset index (created on first use), extended to the batches below ``upto``."""
        with self._lock:
            if self._closed:
                raise StorageError(f"log {self.topic}-{self.partition} is closed")
            idx = ByteOffsetIndex.attach(self)
            idx.cover(self.read, self.log_start_offset, upto)
            return idx

    def byte_offsets_prepare(self: _IndexedLog, upto: int, max_bytes: int, views_from: int | None = None,
                             views_ahead: int | None = None) -> Any:
        """The next piece of work towards a 0.7 byte-offset index covering ``upto`` (a
        ``byte_offsets.IndexJob`` for a worker thread; with the views too near ``views_from``, the position a
        read waits at), None when it is there."""
        with self._lock:
            if self._closed:
                raise StorageError(f"log {self.topic}-{self.partition} is closed")
            return ByteOffsetIndex.attach(self).prepare(self.read, self.log_start_offset, upto, max_bytes,
                                                        views_from, views_ahead)

    def byte_offsets_prepare_views(self: _IndexedLog, position: int, max_bytes: int) -> Any:
        """Batches to convert into the stored 0.7 views from byte ``position`` (a
        ``byte_offsets.ViewJob`` for a worker thread), None when there is nothing to do."""
        with self._lock:
            idx = self.byte_offsets
            if self._closed or idx is None:
                return None
            return idx.prepare_views(self.read, self.log_start_offset, position, max_bytes)

    def byte_offsets_commit_views(self: _IndexedLog, job: Any, data: bytes) -> bool:
        with self._lock:
            if self._closed or self.byte_offsets is None:
                return False
            return self.byte_offsets.commit_views(job, data)

    def byte_offsets_commit(self: _IndexedLog, job: Any, sizes: list[int]) -> bool:
        """Add a job's result to the index (False: the index moved meanwhile; prepare again)."""
        with self._lock:
            if self._closed or self.byte_offsets is None:
                return False
            return self.byte_offsets.commit(job, sizes)

    def byte_offsets_step(self: _IndexedLog, upto: int, budget_s: float) -> bool:
        """One incremental step of extending the 0.7 byte-offset index towards ``upto``: about ``budget_s``
        seconds of work under the lock (the legacy listener runs steps as separate event-loop callbacks, so
        indexing a large partition never holds the loop or the lock for long). True when it is there."""
        with self._lock:
            if self._closed:
                raise StorageError(f"log {self.topic}-{self.partition} is closed")
            idx = ByteOffsetIndex.attach(self)
            if idx.scanned >= upto:
                return True
            return idx.cover(self.read, self.log_start_offset, upto, time.perf_counter() + budget_s)
