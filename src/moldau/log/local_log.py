"""``LocalLog``: the segments of one partition on the local disk (Kafka's LocalLog): their list, read by
offset, the timestamp lookups, roll, truncation, deletion of the oldest segments, and the file side of a
flush. It keeps no offsets of its own beyond the segments' (``PartitionLog`` owns the log start offset, the
high watermark and the recovery point) and takes no lock: ``PartitionLog`` holds its lock around every call
(but ``sync``, which runs without it)."""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from moldau.protocol.records.batch import (
    F_BASE_OFFSET,
    F_LAST_OFFSET_DELTA,
    F_MAX_TIMESTAMP,
    record_offsets_and_timestamps,
)

from .config import LogConfig
from .errors import StorageError
from .segment import INT_MAX, CorruptBatch, FileRegion, Segment, SegmentCache

log = logging.getLogger(__name__)

__all__ = ["LocalLog", "ReadResult", "SegmentPredicate", "fsync_segment"]

# (segment, the next one or None) -> whether the segment may be deleted
SegmentPredicate = Callable[[Segment, "Segment | None"], bool]


@dataclass(slots=True)
class ReadResult:
    chunks: list[Any]  # whole record batches (bytes-like), in offset order (one chunk per segment touched)
    first_offset: int  # base offset of the first returned batch (== requested offset when empty)
    last_offset_exclusive: int  # last offset of the last returned batch + 1 (== requested offset when empty)
    size: int
    # (producer_id, first_offset) of aborted transactions overlapping the returned range (for READ_COMMITTED
    # fetches; Kafka's FetchResponse AbortedTransactions); None when there are none
    aborted_transactions: list[tuple[int, int]] | None = None


def fsync_segment(seg: Segment) -> None:
    """fsync a segment's data and index files now."""
    fd, idxs = seg.sync_handles()
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    for ix in idxs:
        ix.fsync()
    seg.dirty = False


class LocalLog:
    def __init__(self, directory: str, config: LogConfig, cache: SegmentCache, *,
                 exists: bool = False) -> None:
        """``exists``: the directory is known to exist (a clean start from the clean-shutdown state)."""
        self.dir = directory
        self.config = config
        self.cache = cache
        self.segments: list[Segment] = []
        self.bases: list[int] = []  # the segments' base offsets (bisect)
        self.roll_flush_pending = False
        # segment files created or deleted since the last flush: flush fsyncs the directory too, so that a new
        # segment's name survives a power loss with the records fsynced into it
        self.dir_dirty = False
        # a new partition directory's own name reaches the disk with the first flush (the parent fsynced)
        self.parent_dirty = not exists and not os.path.isdir(directory)
        if self.parent_dirty:
            os.makedirs(directory, exist_ok=True)

    def segments_from_state(self, flat: list[int], now_ms: int) -> list[Segment]:
        """The segments of a clean-shutdown state entry (base offset, size, ...): ``Segment.from_state``
        each, the last one active."""
        cfg = self.config
        mib = cfg.segment_index_bytes
        segs = [Segment.from_state(self.dir, flat[i], flat[i + 1], mib, self.cache, now_ms)
                for i in range(0, len(flat), 2)]
        segs[-1].active = True
        self.set_segments(segs)
        return segs

    def set_segments(self, segs: list[Segment]) -> None:
        self.segments = segs
        self.bases = [s.base_offset for s in segs]

    @property
    def log_end_offset(self) -> int:
        nxt = self.segments[-1].next_offset
        assert nxt is not None
        return nxt

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    def segment_index_for(self, offset: int) -> int:
        return max(0, bisect_right(self.bases, offset) - 1)

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # ================================================================================================ roll
    def should_roll(self, seg: Segment, append_size: int, last_offset: int, append_max_ts: int,
                    now_ms: int) -> bool:
        """Kafka's LogSegment.shouldRoll for an append to the (non-empty) active segment ``seg``: it would
        overflow segment.bytes, the offset index is full, an offset would not fit the relative offsets, or
        the segment is older than segment.ms - segment.jitter.ms: by message time (the first batch's
        timestamp), or since it was created when that batch has no timestamp."""
        if (
            seg.size + append_size > self.config.segment_bytes
            or seg.index_full()
            or last_offset - seg.base_offset > INT_MAX
        ):
            return True
        limit = self.roll_limit_ms()
        rt = seg.rolling_timestamp
        if rt is not None and rt >= 0:
            return append_max_ts - rt > limit
        return now_ms - seg.created_ms > limit

    def roll_limit_ms(self) -> int:
        """segment.ms - segment.jitter.ms, where compacted logs use min(segment.ms, max.compaction.lag.ms)
        (Kafka's maxSegmentMs) so that the active segment's data becomes cleanable in time."""
        cfg = self.config
        ms = cfg.segment_ms
        if cfg.compact_enabled and 0 < cfg.max_compaction_lag_ms < ms:
            ms = cfg.max_compaction_lag_ms
        return ms - cfg.segment_jitter_ms

    def create_segment(self, base: int, now_ms: int) -> Segment:
        seg = Segment.create(self.dir, base, self.config.segment_index_bytes, self.cache, now_ms)
        seg.active = True
        self.dir_dirty = True  # the new segment's files reach the disk at flush
        return seg

    def roll(self, now_ms: int, base: int | None) -> Segment:
        """A new active segment at ``base`` (default: the log end offset); an empty active segment is
        replaced."""
        old = self.segments[-1]
        old.on_become_inactive()
        old.active = False
        new_base = old.next_offset if base is None else base
        assert new_base is not None
        seg = self.create_segment(new_base, now_ms)
        if old.size == 0:  # follower append far past an empty segment: replace it
            old.delete_files()
            self.segments[-1] = seg
            self.bases[-1] = new_base
        else:
            self.segments.append(seg)
            self.bases.append(new_base)
        self.roll_flush_pending = True
        return seg

    # ================================================================================================ read
    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool, regions: bool
    ) -> tuple[list[bytes | memoryview | FileRegion], int, int, int]:
        """Whole batches from the one containing ``offset`` (which the caller checked is in the log):
        (chunks, first offset, last offset + 1, size)."""
        segs = self.segments
        interval = self.config.index_interval_bytes
        i = bisect_right(self.bases, offset) - 1
        if i < 0:
            i = 0
        chunks: list[bytes | memoryview | FileRegion] = []
        total = 0
        first = offset
        last_excl = offset
        target = offset
        n = len(segs)
        while i < n:
            seg = segs[i]
            remaining = max_bytes - total
            data, f_off, l_excl, complete = seg.read(
                target, remaining, max_offset, min_one and total == 0, interval, regions
            )
            if data:
                if not chunks:
                    first = f_off
                chunks.append(data)
                total += len(data)
                last_excl = l_excl
                target = l_excl
            if not complete or total >= max_bytes:
                break
            i += 1
        return chunks, first, last_excl, total

    # ========================================================================================== timestamps
    def offset_for_timestamp(
        self, timestamp: int, log_start_offset: int, max_offset: int | None
    ) -> tuple[int, int] | None:
        interval = self.config.index_interval_bytes
        ls = log_start_offset
        for seg in list(self.segments):
            if seg.size == 0 or seg.largest_timestamp() < timestamp:
                continue
            ti = seg.ensure_time_index(interval)
            entry = ti.lookup(timestamp)
            start = max(entry[1] if entry is not None else seg.base_offset, ls)
            found = seg.find_batch(start, interval)
            if found is None:
                continue
            try:
                for _p, f, batch in seg.scan(found[0], full=True):
                    last = f[F_BASE_OFFSET] + f[F_LAST_OFFSET_DELTA]
                    if last < ls or f[F_MAX_TIMESTAMP] < timestamp:
                        continue
                    assert batch is not None
                    for off, ts in self._record_times(batch, f):
                        if off >= ls and ts >= timestamp:
                            if max_offset is not None and off >= max_offset:
                                return None
                            return off, ts
            except CorruptBatch as e:
                log.warning("%s: %s during timestamp search", seg.log_path, e)
        return None

    @staticmethod
    def _record_times(batch: memoryview, f: tuple) -> list[tuple[int, int]]:
        try:
            return record_offsets_and_timestamps(batch)
        except Exception as e:  # no codec for a compressed batch: fall back to batch granularity
            log.debug("cannot decode batch for timestamps (%s); using batch timestamps", e)
            return [(f[F_BASE_OFFSET], f[F_MAX_TIMESTAMP])]

    def max_timestamp_offset(self, log_start_offset: int) -> tuple[int, int] | None:
        best_ts = -1
        best: Segment | None = None
        best_off = -1
        interval = self.config.index_interval_bytes
        for seg in list(self.segments):
            if seg.size == 0:
                continue
            if seg.active or seg.next_offset is not None and seg.max_timestamp >= 0:
                ts, off = seg.max_timestamp, seg.max_timestamp_offset
            else:
                last = seg.ensure_time_index(interval).last_entry()
                if last is None:
                    continue
                ts, off = last
            if ts > best_ts:
                best_ts, best, best_off = ts, seg, off
        if best is None or best_ts < 0:
            return None
        ls = log_start_offset
        # The recorded offset is the last offset of the first batch that reached the max timestamp.
        _, start_pos = best.ensure_offset_index(interval).lookup(best_off)
        for _p, f, batch in best.scan(start_pos, full=True):
            if f[F_MAX_TIMESTAMP] != best_ts or f[F_BASE_OFFSET] + f[F_LAST_OFFSET_DELTA] < ls:
                continue
            assert batch is not None
            for off, ts in self._record_times(batch, f):
                if ts == best_ts and off >= ls:
                    return off, ts
            return max(f[F_BASE_OFFSET], ls), best_ts
        return None

    # ============================================================================ truncation and deletion
    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or after ``offset`` (in the log: at or above the first segment's base)."""
        interval = self.config.index_interval_bytes
        i = bisect_right(self.bases, offset) - 1
        for seg in self.segments[i + 1 :]:
            seg.delete_files()
        del self.segments[i + 1 :]
        del self.bases[i + 1 :]
        seg = self.segments[-1]
        seg.active = True
        seg.ensure_offset_index(interval)
        seg.ensure_time_index(interval)
        if seg.next_offset is None:
            seg.load_tail(interval)
        seg.truncate_to(offset, interval)

    def reset(self, offset: int, now_ms: int) -> None:
        """Delete every segment; the log is one empty segment at ``offset``."""
        for seg in self.segments:
            seg.delete_files()
        self.set_segments([self.create_segment(offset, now_ms)])

    def retention_checks(self, now_ms: int) -> Iterator[tuple[SegmentPredicate, str]]:
        """The retention.ms and retention.bytes rules of a delete-policy log, as (``deletable`` predicate,
        reason); the size is taken when its rule's turn comes (after the segments of the first went)."""
        cfg = self.config
        if not cfg.delete_enabled:
            return
        if cfg.retention_ms >= 0:
            rms = cfg.retention_ms
            yield (lambda s, _n: now_ms - s.largest_timestamp() > rms), f"retention.ms={rms}"
        if cfg.retention_bytes >= 0:
            diff = self.size_in_bytes() - cfg.retention_bytes
            if diff > 0:
                def by_size(s: Segment, _n: Segment | None) -> bool:
                    nonlocal diff
                    if diff - s.size >= 0:
                        diff -= s.size
                        return True
                    return False

                yield by_size, f"retention.bytes={cfg.retention_bytes}"

    def deletable(self, predicate: SegmentPredicate, high_watermark: int) -> list[Segment]:
        """Kafka's deletableSegments: oldest first, stop at the first segment that must stay, never past the
        high watermark, never an empty active segment."""
        segs = self.segments
        doomed: list[Segment] = []
        leo = self.log_end_offset
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else leo
            if nxt is None and seg.size == 0:
                break
            if high_watermark >= upper and predicate(seg, nxt):
                doomed.append(seg)
            else:
                break
        return doomed

    def remove_oldest(self, doomed: list[Segment], reason: str) -> None:
        """Delete the first ``len(doomed)`` segments (the caller rolled first if they are all of them)."""
        for seg in doomed:
            log.info("%s: deleting segment %d (%s)", self.dir, seg.base_offset, reason)
            seg.delete_files()
        del self.segments[: len(doomed)]
        del self.bases[: len(doomed)]

    # ============================================================================================== flush
    def take_dirty(self) -> tuple[list[tuple[Segment, int, list]], bool, bool]:
        """Under the log's lock: duplicated handles of the files written since the last flush, and whether
        the directory and its parent need an fsync (all marked clean; ``sync`` re-marks them on failure)."""
        work: list[tuple[Segment, int, list]] = []
        for seg in self.segments:
            if seg.dirty or seg.offset_index.dirty or seg.time_index.dirty:
                seg.dirty = False
                fd, idxs = seg.sync_handles()
                work.append((seg, fd, idxs))
        self.roll_flush_pending = False
        sync_dir, self.dir_dirty = self.dir_dirty, False
        sync_parent, self.parent_dirty = self.parent_dirty, False
        return work, sync_dir, sync_parent

    def sync(self, work: list[tuple[Segment, int, list]], sync_dir: bool, sync_parent: bool) -> None:
        """fsync what ``take_dirty`` returned (without the lock), then the directories; closes the handles."""
        try:
            for seg, fd, idxs in work:
                os.fsync(fd)
                for ix in idxs:
                    try:
                        ix.fsync()
                    except FileNotFoundError:  # segment deleted meanwhile
                        pass
            # after the files: a name never points at data that is not on the disk
            dirs = ([self.dir] if sync_dir else []) + ([os.path.dirname(self.dir)] if sync_parent else [])
            for path in dirs:
                dfd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
        except OSError as e:
            for seg, _fd, _ in work:
                seg.dirty = True
            self.dir_dirty = self.dir_dirty or sync_dir
            self.parent_dirty = self.parent_dirty or sync_parent
            raise StorageError(f"fsync of {self.dir} failed: {e}") from e
        finally:
            for _seg, fd, _ in work:
                os.close(fd)

    # ========================================================================================= directory
    def close_handles(self) -> None:
        for seg in self.segments:
            seg.close_handle()

    def relocate(self, new_dir: str) -> None:
        """Every path follows the directory, now ``new_dir`` (the handles are closed)."""
        self.dir = new_dir
        for seg in self.segments:
            seg.dir = new_dir
            seg.log_path = os.path.join(new_dir, os.path.basename(seg.log_path))
            seg.index_path = os.path.join(new_dir, os.path.basename(seg.index_path))
            seg.timeindex_path = os.path.join(new_dir, os.path.basename(seg.timeindex_path))
            seg.offset_index.path = seg.index_path
            seg.time_index.path = seg.timeindex_path
