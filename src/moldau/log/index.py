"""Sparse segment indexes in Kafka's on-disk format.

* ``.index`` (``OffsetIndex``): entries of 8 bytes, big endian: relative offset int32 (offset - segment base),
  physical position int32. As in Kafka, the offset of an entry is the *last* offset of the batch that starts
  at the position, and an entry is added when more than ``index.interval.bytes`` were appended since the
  previous one.
* ``.timeindex`` (``TimeIndex``): entries of 12 bytes: timestamp int64, relative offset int32; an entry is
  added (at the same moments) only when the segment's max timestamp grew, plus a final entry when the
  segment stops being active (roll, close), so the last entry always holds the segment's largest timestamp.

moldau's choice: index files are *appended*, never preallocated to ``segment.index.bytes`` (Kafka preallocates
and mmaps them, then trims to the used size on roll/close; the files end up identical once the segment is
inactive). Entries live in memory (``array``) and are written to the file in batches by ``persist()`` (on
flush, roll, close and checkpoint), so appends cost no extra system call. After a crash, missing entries are
rebuilt by recovery (segments past the recovery point) or by the load-time sanity check.
``segment.index.bytes`` still bounds the entry count: a full index rolls the segment, as in Kafka.
"""

from __future__ import annotations

import logging
import os
import struct
import sys
from array import array
from bisect import bisect_right

from .checkpoint import atomic_write, fsync_dir

log = logging.getLogger(__name__)

__all__ = ["OffsetIndex", "TimeIndex", "TxnIndex", "OFFSET_ENTRY_SIZE", "TIME_ENTRY_SIZE", "TXN_ENTRY_SIZE"]

OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
_LITTLE = sys.byteorder == "little"
_TIME_ENTRY = struct.Struct(">qi")


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _WriteBehindIndex:
    """What both indexes share: entries held in memory (arrays in the subclass), written to ``path`` in
    batches by ``persist()``; ``_written`` entries are known to be in the file, which holds ``_file_entries``
    (more after a truncation, until the next persist cuts them)."""

    __slots__ = ("path", "base_offset", "max_entries", "_written", "_file_entries", "_unsynced")

    ENTRY_SIZE = 0
    KIND = "index"

    def __init__(self, path: str, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY_SIZE)
        self._written = 0  # entries known to be in the file
        self._file_entries = 0  # entries the file holds (may exceed _written after truncation)
        self._unsynced = False

    def __len__(self) -> int:
        raise NotImplementedError

    def _encode(self, start: int, end: int) -> bytes:
        """Entries [start, end) in the file format."""
        raise NotImplementedError

    def _read_file(self) -> bytes | None:
        """The file's bytes; None when it is missing or ends in a partial entry (the caller rebuilds)."""
        self._written = self._file_entries = 0
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        if len(data) % self.ENTRY_SIZE:
            log.warning("%s %s has a partial entry (size %d); rebuilding", self.KIND, self.path, len(data))
            return None
        return data

    @property
    def is_full(self) -> bool:
        return len(self) >= self.max_entries

    @property
    def dirty(self) -> bool:
        return self._written != len(self) or self._file_entries != self._written

    def persist(self) -> bool:
        """Write pending entries (and cut stale ones). Returns True when the file changed."""
        n = len(self)
        if self._written == n and self._file_entries == n:
            return False
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if self._file_entries != self._written:
                os.ftruncate(fd, self._written * self.ENTRY_SIZE)
            if n > self._written:
                os.pwrite(fd, self._encode(self._written, n), self._written * self.ENTRY_SIZE)
        finally:
            os.close(fd)
        self._written = self._file_entries = n
        self._unsynced = True
        return True

    def fsync(self) -> None:
        if self._unsynced:
            self._unsynced = False
            _fsync_path(self.path)

    def mark_file_entries(self, n: int) -> None:
        """The file is known to hold ``n`` entries (used when a fresh empty file is created)."""
        self._file_entries = n


class OffsetIndex(_WriteBehindIndex):
    """Relative offset -> position, in memory with write-behind to ``path``."""

    __slots__ = ("rel", "pos")

    ENTRY_SIZE = OFFSET_ENTRY_SIZE

    def __init__(self, path: str, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self.rel = array("i")
        self.pos = array("i")

    # ------------------------------------------------------------------------------------------------ load
    def load(self, segment_size: int, *, allow_empty: bool = False) -> bool:
        """Read the file. Returns False (and leaves the index empty) when it is missing or fails the sanity
        check, so the caller rebuilds it from the log. An empty file passes for an empty segment, or for any
        with ``allow_empty`` (the caller checks the segment against index.interval.bytes)."""
        self.rel = array("i")
        self.pos = array("i")
        data = self._read_file()
        if data is None:
            return False
        n = len(data) // OFFSET_ENTRY_SIZE
        if n == 0:
            return allow_empty or segment_size == 0 or segment_size is None
        both = array("i")
        both.frombytes(data)
        if _LITTLE:
            both.byteswap()
        rel = both[0::2]
        pos = both[1::2]
        ok = rel[0] >= 0 and pos[0] >= 0 and pos[-1] < max(segment_size, 1)
        if ok and n > 1:
            ok = all(map(int.__lt__, rel, rel[1:])) and all(map(int.__lt__, pos, pos[1:]))
        if not ok:
            log.warning("index %s failed the sanity check; rebuilding", self.path)
            return False
        self.rel = rel
        self.pos = pos
        self._written = self._file_entries = n
        return True

    def reset(self) -> None:
        """Forget every entry (the file is emptied on the next persist)."""
        self.rel = array("i")
        self.pos = array("i")
        self._written = 0

    # ------------------------------------------------------------------------------------------------ use
    def __len__(self) -> int:
        return len(self.rel)

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.rel and rel <= self.rel[-1]:
            return
        self.rel.append(rel)
        self.pos.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry whose offset is <= ``offset``; (base, 0) if none."""
        i = bisect_right(self.rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.rel[i], self.pos[i]

    def last_entry(self) -> tuple[int, int]:
        if not self.rel:
            return self.base_offset, 0
        return self.base_offset + self.rel[-1], self.pos[-1]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries at or past ``position`` (the log is being cut there)."""
        i = bisect_right(self.pos, position - 1)
        if i < len(self.rel):
            del self.rel[i:]
            del self.pos[i:]
            self._written = min(self._written, i)

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + r, p) for r, p in zip(self.rel, self.pos)]

    # ------------------------------------------------------------------------------------------------ disk
    def _encode(self, start: int, end: int) -> bytes:
        both = array("i", bytes(8 * (end - start)))
        both[0::2] = self.rel[start:end]
        both[1::2] = self.pos[start:end]
        if _LITTLE:
            both.byteswap()
        return both.tobytes()


class TimeIndex(_WriteBehindIndex):
    """Timestamp -> relative offset, in memory with write-behind to ``path``."""

    __slots__ = ("ts", "rel")

    ENTRY_SIZE = TIME_ENTRY_SIZE
    KIND = "time index"

    def __init__(self, path: str, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self.ts = array("q")
        self.rel = array("i")

    def load(self, next_offset: int | None = None) -> bool:
        self.ts = array("q")
        self.rel = array("i")
        data = self._read_file()
        if data is None:
            return False
        n = len(data) // TIME_ENTRY_SIZE
        ts = array("q")
        rel = array("i")
        for t, r in _TIME_ENTRY.iter_unpack(data):
            ts.append(t)
            rel.append(r)
        ok = True
        if n:
            ok = rel[0] >= 0 and (next_offset is None or self.base_offset + rel[-1] < next_offset)
            if ok and n > 1:
                ok = all(map(int.__lt__, ts, ts[1:])) and all(map(int.__le__, rel, rel[1:]))
        if not ok:
            log.warning("time index %s failed the sanity check; rebuilding", self.path)
            return False
        self.ts = ts
        self.rel = rel
        self._written = self._file_entries = n
        return True

    @staticmethod
    def read_last_entry(path: str) -> tuple[int, int] | None:
        """(timestamp, relative offset) of the file's last entry without loading it."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            n = size // TIME_ENTRY_SIZE
            if n == 0:
                return None
            data = os.pread(fd, TIME_ENTRY_SIZE, (n - 1) * TIME_ENTRY_SIZE)
            if len(data) < TIME_ENTRY_SIZE:
                return None
            t, r = _TIME_ENTRY.unpack(data)
            return t, r
        finally:
            os.close(fd)

    def reset(self) -> None:
        self.ts = array("q")
        self.rel = array("i")
        self._written = 0

    def __len__(self) -> int:
        return len(self.ts)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append (timestamp, offset) only if the timestamp grew (Kafka's rule)."""
        if self.ts and timestamp <= self.ts[-1]:
            return
        rel = offset - self.base_offset
        if self.rel and rel < self.rel[-1]:
            return
        self.ts.append(timestamp)
        self.rel.append(rel)

    def lookup(self, timestamp: int) -> tuple[int, int] | None:
        """(timestamp, offset) of the entry with the largest timestamp <= ``timestamp``; None if none."""
        i = bisect_right(self.ts, timestamp) - 1
        if i < 0:
            return None
        return self.ts[i], self.base_offset + self.rel[i]

    def last_entry(self) -> tuple[int, int] | None:
        if not self.ts:
            return None
        return self.ts[-1], self.base_offset + self.rel[-1]

    def truncate_to_offset(self, next_offset: int) -> None:
        """Drop entries whose offset is >= ``next_offset``."""
        rel = next_offset - self.base_offset
        i = len(self.rel)
        while i > 0 and self.rel[i - 1] >= rel:
            i -= 1
        if i < len(self.ts):
            del self.ts[i:]
            del self.rel[i:]
            self._written = min(self._written, i)

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + r) for t, r in zip(self.ts, self.rel)]

    def _encode(self, start: int, end: int) -> bytes:
        pack = _TIME_ENTRY.pack
        return b"".join(pack(self.ts[i], self.rel[i]) for i in range(start, end))


_TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, last stable offset
TXN_ENTRY_SIZE = _TXN_ENTRY.size  # 34


class TxnIndex:
    """``.txnindex``: aborted transactions whose ABORT marker is in the segment (Kafka's TransactionIndex):
    entries of (version int16 = 0, producer_id int64, first_offset int64, last_offset int64,
    last_stable_offset int64). Aborts are rare, so entries are written (and fsynced, with the directory when
    the file is new) as they happen."""

    @staticmethod
    def read(path: str) -> list[tuple[int, int, int, int]]:
        """[(producer_id, first_offset, last_offset, last_stable_offset)]; [] when missing. A partial trailing
        entry is ignored."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        usable = len(data) - len(data) % TXN_ENTRY_SIZE
        out = []
        for version, pid, first, last, lso in _TXN_ENTRY.iter_unpack(data[:usable]):
            if version != 0:
                log.warning("%s: unknown entry version %d; ignoring the rest", path, version)
                break
            out.append((pid, first, last, lso))
        return out

    @staticmethod
    def append(
        path: str, producer_id: int, first_offset: int, last_offset: int, last_stable_offset: int
    ) -> None:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
            created = True
        except FileExistsError:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            created = False
        try:
            os.write(fd, _TXN_ENTRY.pack(0, producer_id, first_offset, last_offset, last_stable_offset))
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:  # the new file's name too: a power loss must not take the entry with it
            fsync_dir(os.path.dirname(path) or ".")

    @staticmethod
    def rewrite(path: str, entries: list[tuple[int, int, int, int]]) -> None:
        if not entries:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            return
        atomic_write(path, b"".join(_TXN_ENTRY.pack(0, *e) for e in entries))
