"""``PartitionLog``: one topic-partition's log (Kafka's UnifiedLog): append, read, offsets, retention,
DeleteRecords, truncation, flush and close, composed of

* ``LocalLog`` (``local_log``): the segments and their indexes, roll, read by offset, timestamp lookups;
* ``LogLoader`` (``log_loader``): opening the directory, recovery after an unclean shutdown, the producer
  state rebuilt from snapshots and the log;
* ``LeaderEpochCache`` (``leader_epoch``): leader epoch -> start offset (``leader-epoch-checkpoint``);
* ``AbortedTransactions`` (``txn_state``): the transaction indexes and COMMIT/ABORT markers;
* ``ProducerStateManager`` (``producer_state``): idempotent and transactional producers;
* ``TailCache`` (``tail_cache``): the replication tail kept in memory for followers' fetches (set and
  released by the replica manager);
* ``ByteOffsetIndex`` (``byte_offsets``): Kafka 0.7 byte offsets, when a 0.7 client has read the partition.

Kafka's directory layout (``<log.dir>/<topic>-<partition>/``)::

    00000000000000000000.log        record batches, as received (base offset and leader epoch patched in)
    00000000000000000000.index      sparse offset index (relative offset int32, position int32)
    00000000000000000000.timeindex  time index (timestamp int64, relative offset int32)
    00000000000000000000.txnindex   aborted transactions whose marker is in the segment
    00000000000000001234.snapshot   producer state as of offset 1234 (written on roll and clean close)
    leader-epoch-checkpoint         leader epoch -> start offset
    partition.metadata              topic id

Threading: ``append``/``read``/``truncate_to``/retention run on one thread (the broker's event loop);
``flush()`` may run in a worker thread at the same time (it fsyncs duplicated descriptors, then advances the
recovery point under the log's lock).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from moldau.protocol.records.batch import INT32

from . import clean_state as _cs
from . import cleaner as _cleaner
from .byte_offsets import ByteOffsetIndex, ByteOffsetsAccess
from .checkpoint import fsync_dir, read_partition_metadata, write_partition_metadata
from .config import LONG_MAX, LogConfig
from .errors import OffsetOutOfRangeError, StorageError
from .leader_epoch import LeaderEpochCache
from .local_log import LocalLog, ReadResult, SegmentPredicate
from .log_loader import LogLoader, rebuild_producer_state, snapshot_offsets, snapshot_path, unlink
from .log_validator import analyze, check_producers, update_producers
from .log_validator import assign_offsets as assign_offsets_
from .producer_state import ProducerStateManager
from .segment import Segment, SegmentCache
from .tail_cache import TailCache
from .txn_state import AbortedTransactions

log = logging.getLogger(__name__)

__all__ = ["PartitionLog", "AppendInfo", "ReadResult", "parse_partition_dir_name"]


@dataclass(slots=True)
class AppendInfo:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime topics
    log_start_offset: int
    duplicate: bool = False


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``my-topic-3`` -> ("my-topic", 3); None for names that are not partition directories."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or "." in part:
        return None
    return topic, int(part)


class PartitionLog(ByteOffsetsAccess):
    def __init__(
        self,
        directory: str,
        config: LogConfig | None = None,
        *,
        topic: str | None = None,
        partition: int | None = None,
        cache: SegmentCache | None = None,
        clock: Any = time,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int | None = None,
        clean_shutdown: bool = True,
        topic_id: Any = None,
        deferred_fsync: list[Segment] | None = None,
        clean_state: list[Any] | None = None,
    ) -> None:
        """``deferred_fsync``: segments recovered after an unclean shutdown are appended there for the caller
        to fsync (the log manager does many partitions' in parallel) instead of one by one here.
        ``clean_state``: the partition's entry of the log directory's clean-shutdown state (``clean_state``;
        the caller checked it applies): the log is opened from it without reading a file."""
        directory = os.path.abspath(directory)
        if topic is None or partition is None:
            parsed = parse_partition_dir_name(os.path.basename(directory))
            if parsed is None:
                raise ValueError(f"{directory}: not a <topic>-<partition> directory")
            topic, partition = parsed
        self.topic: str = topic
        self.partition: int = partition
        self.config = config or LogConfig()
        self._clock = clock
        self._lock = threading.RLock()
        self.local = LocalLog(directory, self.config, cache if cache is not None else SegmentCache(),
                              exists=clean_state is not None)
        self.producer_state = ProducerStateManager(self.config.producer_id_expiration_ms)
        self.epochs = LeaderEpochCache(directory)
        self.aborted = AbortedTransactions(self.local, self.producer_state)
        self.tail_cache = TailCache()  # on and released by the replica manager (leader with followers)
        self._closed = False
        self.log_start_offset = 0
        self.recovery_point = 0
        self.high_watermark = 0
        self.byte_offsets: ByteOffsetIndex | None = None  # Kafka 0.7 byte offsets (byte_offsets.py)
        self._last_flush_ms = self._now_ms()
        if clean_state is not None:
            self.topic_id: str | None = clean_state[_cs.TOPIC_ID]
            self._load_clean_state(clean_state, log_start_offset, high_watermark)
            return
        if topic_id is not None:
            write_partition_metadata(directory, topic_id)
        self.topic_id = read_partition_metadata(directory)
        self._load(LogLoader(self.local, deferred_fsync), clean_shutdown, recovery_point, log_start_offset,
                   high_watermark)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self.log_start_offset}, "
            f"end={self.log_end_offset}, hw={self.high_watermark}, segments={len(self.local.segments)})"
        )

    def _now_ms(self) -> int:
        return int(self._clock.time() * 1000)

    @property
    def dir(self) -> str:
        return self.local.dir

    # ================================================================================================ load
    def _load(
        self, loader: LogLoader, clean: bool, recovery_point: int, log_start_offset: int,
        high_watermark: int | None,
    ) -> None:
        now = self._now_ms()
        recovered, names = loader.load_segments(clean, recovery_point, log_start_offset, now)
        leo = self.log_end_offset
        ls = max(log_start_offset, self.local.segments[0].base_offset)
        if ls > leo:
            log.warning(
                "%s: log start offset %d beyond log end %d; starting the log at %d", self.dir, ls, leo, ls
            )
            self._truncate_fully_locked(ls, now)
            leo = ls
            names = os.listdir(self.dir)
        self.log_start_offset = ls
        self.recovery_point = leo if (clean or recovered) else min(recovery_point, leo)
        hw = leo if high_watermark is None else high_watermark
        self.high_watermark = min(max(hw, ls), leo)
        self.epochs.load(self.log_start_offset, leo)
        present = set(names)
        self.aborted.load(present)
        rebuild_producer_state(self.local, self.producer_state, self.aborted, now, names)
        self.byte_offsets = ByteOffsetIndex.open_if_present(self.dir, present, clean)
        if self.byte_offsets is not None:
            self.byte_offsets.truncate(leo)

    def _load_clean_state(self, st: list[Any], log_start_offset: int, high_watermark: int | None) -> None:
        """A clean start from the clean-shutdown state (``clean_state``): what ``_load`` finds in the files
        after a clean shutdown, taken from the entry; the active segment's files are read on first use."""
        now = self._now_ms()
        segs = self.local.segments_from_state(st[_cs.SEGMENTS], now)
        active = segs[-1]
        leo = active.next_offset = st[_cs.NEXT_OFFSET]
        active.max_timestamp = st[_cs.MAX_TS]
        active.max_timestamp_offset = st[_cs.MAX_TS_OFFSET]
        active.rolling_timestamp = st[_cs.ROLLING_TS]
        active.bytes_since_index = st[_cs.SINCE_INDEX]
        ls = max(log_start_offset, segs[0].base_offset)  # <= leo: the log manager checked
        self.log_start_offset = ls
        self.recovery_point = leo
        hw = leo if high_watermark is None else high_watermark
        self.high_watermark = min(max(hw, ls), leo)
        flat = st[_cs.EPOCHS]
        self.epochs.load_entries([(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)], ls, leo)
        if st[_cs.PRODUCERS]:
            self.producer_state.load_entries([tuple(e) for e in st[_cs.PRODUCERS]], now)

    def clean_state_entry(self) -> list[Any] | None:
        """This closed log's entry of the clean-shutdown state (``clean_state``), or None when it must be
        loaded from its files: compacted (the cleaner's swap files may need completing), with aborted
        transactions (``.txnindex`` files) or Kafka 0.7 byte offsets."""
        if self.config.compact_enabled or self.aborted or self.byte_offsets is not None:
            return None
        segs = self.local.segments
        active = segs[-1]
        if active.next_offset is None:
            return None
        flat: list[int] = []
        for s in segs:
            flat += (s.base_offset, s.size)
        epochs: list[int] = []
        for e, o in self.epochs.entries:
            epochs += (e, o)
        return [os.path.basename(self.dir), self.topic_id, flat, active.next_offset, active.max_timestamp,
                active.max_timestamp_offset, active.rolling_timestamp, active.bytes_since_index, epochs,
                self.producer_state.snapshot_entries()]

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted transactions with marker >= ``start`` that began before
        ``end`` (Kafka's collectAbortedTransactions)."""
        return self.aborted.collect(start, end)

    # ================================================================================================ offsets
    @property
    def log_end_offset(self) -> int:
        return self.local.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """min(first offset of the oldest ongoing transaction, high watermark)."""
        fuo = self.producer_state.first_unstable_offset()
        return self.high_watermark if fuo is None else min(fuo, self.high_watermark)

    @property
    def unflushed_messages(self) -> int:
        """Offsets appended since the last flush (Kafka's LEO - recovery point)."""
        return self.log_end_offset - self.recovery_point

    def needs_flush(self) -> bool:
        """True when ``flush.messages`` is reached: the broker then fsyncs before acknowledging
        (one ``flush()`` serves every producer waiting on it)."""
        return self.unflushed_messages >= self.config.flush_interval_messages

    def flush_due(self, now_ms: int) -> bool:
        """A flush is due by ``flush.ms`` or because a segment was rolled (Kafka flushes rolled segments)."""
        if self.local.roll_flush_pending:
            return True
        ms = self.config.flush_interval_ms
        return ms < LONG_MAX and self.unflushed_messages > 0 and now_ms - self._last_flush_ms >= ms

    @property
    def segments(self) -> Sequence[Segment]:
        return tuple(self.local.segments)

    def size_in_bytes(self) -> int:
        return self.local.size_in_bytes()

    # ================================================================================================ append
    def append(
        self,
        buf: bytearray,
        batches: Sequence[tuple[int, Any]],
        now_ms: int | None = None,
        *,
        assign_offsets: bool = True,
        leader_epoch: int = 0,
        stable: bool = False,
    ) -> AppendInfo:
        """Append the record batches ``batches`` ((position in ``buf``, parsed header) pairs, as
        ``split_batches`` returns them; CRCs already checked by the caller).

        With ``assign_offsets`` (leader append) the log writes the base offsets and ``leader_epoch`` into
        ``buf`` and applies the idempotent-producer checks; on LogAppendTime topics it also rewrites the
        batches' timestamps (CRC recomputed). Otherwise (follower, Kafka's appendAsFollower) the bytes are
        appended as they are: the leader's offsets, leader epochs and timestamps, which must not go backwards;
        ``buf`` is only read (it may be read-only). One write per append; the segment is rolled first if the
        append would overflow it.

        ``stable``: the caller never modifies ``buf`` after the call (a request's own buffer), so the tail
        cache may keep a view of it; otherwise it keeps a copy.
        """
        if not batches:
            raise ValueError("append needs at least one batch")
        if now_ms is None:
            now_ms = self._now_ms()
        if (
            assign_offsets
            and not isinstance(buf, bytearray)
            and not (isinstance(buf, memoryview) and not buf.readonly)
        ):
            buf = bytearray(buf)
        cfg = self.config
        an = analyze(batches, cfg, self.topic, self.partition, now_ms, assign_offsets)
        with self._lock:
            if self._closed:
                raise StorageError(f"log {self.topic}-{self.partition} is closed")
            lat = cfg.log_append_time and assign_offsets  # a follower keeps the leader's append times
            # ---- idempotent producers: duplicates, fencing, sequence gaps (before any byte is touched)
            if assign_offsets:
                has_pid, dup = check_producers(self.producer_state, batches)
                if dup is not None:
                    ts = dup.timestamp if lat else -1
                    return AppendInfo(dup.first_offset, dup.last_offset, ts, self.log_start_offset, True)
            else:
                has_pid = any(h.producer_id >= 0 for _p, h in batches)
            # ---- offsets, leader epoch, LogAppendTime
            active = self.local.segments[-1]
            if active.lazy:  # first append after a clean start from the clean-shutdown state
                active.warm(cfg.index_interval_bytes)
            leo = active.next_offset
            assert leo is not None
            metas = assign_offsets_(buf, batches, leo, leader_epoch, assign_offsets, lat, now_ms)
            first_offset = metas[0][0]
            last_offset = metas[-1][1]
            append_max_ts = now_ms if lat else an.max_timestamp
            # ---- roll before the append that would overflow
            if active.size > 0 and self.local.should_roll(
                active, an.total, last_offset, append_max_ts, now_ms
            ):
                active = self._roll_locked(now_ms, metas[0][0] if not assign_offsets else None)
            # ---- one write
            if an.contiguous:
                data: Any = memoryview(buf)[an.first_pos : an.end]
            else:
                mv = memoryview(buf)
                data = b"".join(mv[p : p + h.batch_length + 12] for p, h in batches)
            p = written_at = active.write(data)
            interval = cfg.index_interval_bytes
            for _base, last, ts, size in metas:
                active._index_batch(p, last, ts, size, interval)
                p += size
            if self.tail_cache.max_bytes > 0 and assign_offsets:
                kept = data if stable or not an.contiguous else bytes(data)
                self.tail_cache.add(first_offset, last_offset + 1, kept,
                                    [(b, la, sz) for b, la, _t, sz in metas], active, written_at)
            # ---- producer state, leader epochs
            if has_pid:
                update_producers(self.producer_state, self.aborted, buf, batches, metas)
            if assign_offsets:
                self.epochs.assign(leader_epoch, first_offset)
            else:
                for (pos, _h), (base, _l, _t, _s) in zip(batches, metas):
                    (ep,) = INT32.unpack_from(buf, pos + 12)
                    self.epochs.assign(ep, base)
            return AppendInfo(first_offset, last_offset, now_ms if lat else -1, self.log_start_offset, False)

    # ================================================================================================ roll
    def assign_leader_epoch(self, epoch: int) -> None:
        """A new leader's epoch starts at the log end offset (Kafka's Partition.makeLeader): recorded in
        leader-epoch-checkpoint at once, so followers truncating with OffsetForLeaderEpoch find where it
        starts before anything is appended in it."""
        with self._lock:
            self.epochs.assign(epoch, self.log_end_offset)

    def roll(self, now_ms: int | None = None) -> Segment:
        """Start a new active segment at the log end offset (no-op on an empty active segment)."""
        with self._lock:
            return self._roll_locked(self._now_ms() if now_ms is None else now_ms)

    def _roll_locked(self, now_ms: int, base: int | None = None) -> Segment:
        old = self.local.segments[-1]
        if old.size == 0 and base is None:
            return old
        self.tail_cache.clear()
        seg = self.local.roll(now_ms, base)
        new_base = seg.base_offset
        try:  # its rename reaches the disk with the directory's fsync at the next flush
            self.producer_state.write_snapshot(snapshot_path(self.dir, new_base))
        except OSError as e:
            log.warning("%s: cannot write producer snapshot: %s", self.dir, e)
        log.debug("%s: rolled new segment at %d", self.dir, new_base)
        return seg

    def maybe_roll_by_time(self, now_ms: int) -> bool:
        """Background roll (``segment.ms`` since the active segment was created); only non-empty segments."""
        with self._lock:
            seg = self.local.segments[-1]
            if self._closed or seg.size == 0:
                return False
            if now_ms - seg.created_ms > self.local.roll_limit_ms():
                self._roll_locked(now_ms)
                return True
            return False

    # ================================================================================================ read
    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one: bool = True,
        regions: bool = False,
    ) -> ReadResult:
        """Whole batches from the one containing ``offset``, up to ``max_bytes`` in total (the first batch is
        returned even when larger, if ``min_one``), never a batch whose last offset is >= ``max_offset``
        (pass the high watermark or the last stable offset). May span segments. ``regions``: the chunks are
        ``FileRegion``s of the segment files (for sendfile) instead of bytes. Served from the tail cache when
        it holds ``offset``.

        Raises OffsetOutOfRangeError below the log start offset or above the log end offset; an offset equal
        to the log end offset gives an empty result."""
        active = self.local.segments[-1]
        leo = active.next_offset
        assert leo is not None
        if offset < self.log_start_offset or offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.topic}-{self.partition} "
                f"[{self.log_start_offset}, {leo}]"
            )
        if offset == leo or (max_offset is not None and offset >= max_offset):
            return ReadResult([], offset, offset, 0)
        if self.tail_cache:
            cached = self.tail_cache.read(
                active, offset, max_bytes, max_offset, min_one, regions,
                self.aborted.collect if self.aborted else None,
            )
            if cached is not None:
                return cached
        chunks, first, last_excl, total = self.local.read(offset, max_bytes, max_offset, min_one, regions)
        aborted = self.aborted.collect(first, last_excl) if self.aborted and total else None
        return ReadResult(chunks, first, last_excl, total, aborted or None)

    # ================================================================================================
    # timestamps
    def offset_for_timestamp(
        self, timestamp: int, *, max_offset: int | None = None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= ``timestamp`` (at or after the log
        start offset), or None (ListOffsets then answers -1). Only real timestamps: the broker maps
        EARLIEST (-2), LATEST (-1) and MAX_TIMESTAMP (-3)."""
        return self.local.offset_for_timestamp(timestamp, self.log_start_offset, max_offset)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets MAX_TIMESTAMP, -3): the
        first such record, as Kafka 3.x answers. None for an empty log."""
        return self.local.max_timestamp_offset(self.log_start_offset)

    # ================================================================================================
    # deletion
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset to ``offset`` (<= high watermark) and delete the
        segments wholly below it. Returns the new log start offset."""
        with self._lock:
            if offset > self.high_watermark or offset < 0:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: high watermark is {self.high_watermark}"
                )
            if offset > self.log_start_offset:
                if self.byte_offsets is not None:  # index what goes below the log start while it can be read
                    self.byte_offsets.cover(self.read, self.log_start_offset, offset)
                self.log_start_offset = offset
                if self.recovery_point < offset:
                    self.recovery_point = min(offset, self.log_end_offset)
                self._delete_log_start_breached()
            return self.log_start_offset

    def _delete_log_start_breached(self) -> int:
        ls = self.log_start_offset
        return self._delete_old_segments(
            lambda s, nxt: nxt is not None and nxt.base_offset <= ls, "log start offset"
        )

    def _delete_old_segments(self, predicate: SegmentPredicate, reason: str) -> int:
        """Kafka's deletableSegments + deleteSegments: oldest first, stop at the first segment that must stay,
        never past the high watermark, never an empty active segment; if every segment goes, roll first."""
        local = self.local
        segs = local.segments
        doomed = local.deletable(predicate, self.high_watermark)
        if not doomed:
            return 0
        if self.byte_offsets is not None:  # byte positions of what stays must survive the deletion
            upto = segs[len(doomed)].base_offset if len(doomed) < len(segs) else self.log_end_offset
            self.byte_offsets.cover(self.read, self.log_start_offset, upto)
        if len(doomed) == len(segs):
            self._roll_locked(self._now_ms())
        local.remove_oldest(doomed, reason)
        first = local.segments[0].base_offset
        self.aborted.drop_before(first)
        if first > self.log_start_offset:
            self.log_start_offset = first
        if self.recovery_point < self.log_start_offset:
            self.recovery_point = self.log_start_offset
        if self.high_watermark < self.log_start_offset:
            self.high_watermark = self.log_start_offset
        for off in snapshot_offsets(self.dir):
            if off < first:
                unlink(snapshot_path(self.dir, off))
        self.epochs.truncate_from_start(self.log_start_offset)
        if self.byte_offsets is not None:
            self.byte_offsets.trim(self.log_start_offset)
        return len(doomed)

    def enforce_retention(self, now_ms: int) -> int:
        """Delete segments past retention.ms (by their largest timestamp) and beyond retention.bytes, and
        segments below the log start offset. Returns the number of segments deleted."""
        deleted = 0
        with self._lock:
            if self._closed:
                return 0
            for predicate, reason in self.local.retention_checks(now_ms):
                deleted += self._delete_old_segments(predicate, reason)
            deleted += self._delete_log_start_breached()
            self.producer_state.remove_expired(now_ms)
        return deleted


    # ================================================================================================
    # compaction
    def replace_segments(
        self, old: Sequence[Segment], sizes: Sequence[int], aborted: list[tuple[int, int, int, int]]
    ) -> Segment | None:
        """Swap in the cleaned copy of the contiguous non-active segments ``old`` (``<base>.log.cleaned`` and
        its index files, written by the log cleaner, ``base`` = ``old[0].base_offset``); ``aborted`` are the
        (producer id, first, last, LSO) entries of its .txnindex. Crash-safe (see ``cleaner``): .cleaned ->
        .swap (commit point), old files deleted, .swap -> final names. Returns the new segment, or None (and
        deletes the cleaned files) when ``old`` is no longer exactly part of the log with ``sizes``."""
        base = old[0].base_offset
        with self._lock:
            local = self.local
            segs = local.segments
            n = len(old)
            i = next((j for j, s in enumerate(segs) if s is old[0]), -1)
            if (
                self._closed
                or i < 0
                or i + n >= len(segs)  # the active segment is never replaced
                or any(
                    segs[i + j] is not old[j] or old[j].active or old[j].size != sizes[j] for j in range(n)
                )
            ):
                _cleaner.discard_cleaned(self.dir, base)
                return None
            end = segs[i + n].base_offset
            _cleaner.commit_cleaned(self.dir, base)
            for s in old:
                s.delete_files()
            fsync_dir(self.dir)
            _cleaner.finish_swap(self.dir, base)
            new = Segment.open_existing(
                self.dir, base, self.config.segment_index_bytes, local.cache, self._now_ms()
            )
            segs[i : i + n] = [new]
            local.bases[i : i + n] = [base]
            self.aborted.replace_range(base, end, aborted)
            return new

    # ================================================================================================
    # truncation
    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after ``offset`` (a batch containing ``offset`` goes as a whole). Returns
        the new log end offset."""
        with self._lock:
            if offset >= self.log_end_offset:
                return self.log_end_offset
            self.tail_cache.clear()
            now = self._now_ms()
            if offset < self.local.segments[0].base_offset or offset < self.log_start_offset:
                self._truncate_fully_locked(offset, now)
            else:
                self.local.truncate_to(offset)
            leo = self.log_end_offset
            if self.byte_offsets is not None:
                self.byte_offsets.truncate(leo)
            self.aborted.drop_from(leo)
            self.high_watermark = min(self.high_watermark, leo)
            self.recovery_point = min(self.recovery_point, leo)
            self.epochs.truncate_from_end(leo)
            rebuild_producer_state(self.local, self.producer_state, self.aborted, now)
            return leo

    def _truncate_fully_locked(self, offset: int, now_ms: int) -> None:
        self.tail_cache.clear()
        self.local.reset(offset, now_ms)
        for off in snapshot_offsets(self.dir):
            unlink(snapshot_path(self.dir, off))
        self.log_start_offset = offset
        self.recovery_point = offset
        self.high_watermark = offset
        self.producer_state.clear()
        self.aborted.clear()
        self.epochs.clear()

    # ================================================================================================ leader
    # epochs
    @property
    def leader_epochs(self) -> list[tuple[int, int]]:
        """(leader epoch, start offset) entries of leader-epoch-checkpoint."""
        return list(self.epochs.entries)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest epoch <= ``epoch``, end offset of that epoch), (-1, -1) when
        unknown (Kafka's LeaderEpochFileCache.endOffsetFor)."""
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    # ================================================================================================ flush /
    # close
    def flush(self) -> int:
        """fsync every segment written since the last flush (data and index files) and advance the recovery
        point to the log end offset seen at the start. Safe to call from a worker thread while the event loop
        appends. Returns the new recovery point."""
        with self._lock:
            if self._closed:
                return self.recovery_point
            target = self.log_end_offset
            work, sync_dir, sync_parent = self.local.take_dirty()
        self.local.sync(work, sync_dir, sync_parent)
        with self._lock:
            target = min(target, self.log_end_offset)
            if target > self.recovery_point:
                self.recovery_point = target
            self._last_flush_ms = self._now_ms()
            return self.recovery_point

    def close(self) -> None:
        """Flush, write the final time index entry and a producer snapshot, release file handles."""
        with self._lock:
            if self._closed:
                return
            active = self.local.segments[-1]
            # (an active segment not used since a start from the clean-shutdown state: its file has the entry)
            if active.max_timestamp >= 0 and not active.lazy:
                active.time_index.maybe_append(active.max_timestamp, active.max_timestamp_offset)
        self.flush()
        with self._lock:
            leo = self.log_end_offset
            path = snapshot_path(self.dir, leo)
            try:
                # a snapshot at the log end offset already holds this state (nothing appended since)
                if not os.path.exists(path):
                    self.producer_state.write_snapshot(path)
            except OSError as e:
                log.warning("%s: cannot write producer snapshot: %s", self.dir, e)
            for seg in self.local.segments:
                seg.close()
            self.recovery_point = leo
            self._closed = True
            self.tail_cache.clear()

    def update_config(self, config: LogConfig) -> None:
        """New topic configuration (AlterConfigs); takes effect for the next append / tick."""
        self.config = config
        self.local.config = config
        self.producer_state.expiration_ms = config.producer_id_expiration_ms

    @property
    def closed(self) -> bool:
        return self._closed

    def relocate(self, new_dir: str, swap: Callable[[], None]) -> None:
        """Point this log at ``new_dir``, a byte-identical copy of its directory (a replica moved to another
        log dir, moldau.log.dir_move): under the log's lock, with every file handle closed, ``swap()`` puts
        the copy in place (renames), then every path follows. The caller excludes readers (event loop)."""
        with self._lock:
            self.local.close_handles()
            swap()
            new_dir = os.path.abspath(new_dir)
            self.local.relocate(new_dir)
            self.epochs.set_dir(new_dir)
            if self.byte_offsets is not None:
                self.byte_offsets.path = os.path.join(new_dir, os.path.basename(self.byte_offsets.path))
                self.byte_offsets.views.dir = new_dir

    def delete(self, remove: bool = True) -> str:
        """Close the handles and remove the partition directory (renamed to ``<dir>.<id>-delete`` first, as
        Kafka does, so a crash mid-way leaves a directory the manager removes at start). ``remove`` False:
        only the rename; the caller removes the returned directory later."""
        with self._lock:
            self.local.close_handles()
            self._closed = True
            self.tail_cache.clear()
            doomed = f"{self.dir}.{uuid.uuid4().hex}-delete"
            try:
                os.rename(self.dir, doomed)
            except OSError:
                doomed = self.dir
            if remove:
                shutil.rmtree(doomed, ignore_errors=True)
            return doomed
