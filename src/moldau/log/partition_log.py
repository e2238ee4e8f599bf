"""``PartitionLog``: the segments of one topic-partition, with append, read, recovery and retention.

Kafka's directory layout (``<log.dir>/<topic>-<partition>/``)::

    00000000000000000000.log        record batches, as received (base offset and leader epoch patched in)
    00000000000000000000.index      sparse offset index (relative offset int32, position int32)
    00000000000000000000.timeindex  time index (timestamp int64, relative offset int32)
    00000000000000001234.snapshot   producer state as of offset 1234 (written on roll and clean close)
    leader-epoch-checkpoint         leader epoch -> start offset
    partition.metadata              topic id

Tail cache (a leader with followers, ``tail_cache_max`` > 0): the bytes of the latest appends stay in memory
(views of the produce requests' buffers, which nothing modifies after the append) until the followers have
them, so their fetches of the log's tail are answered from memory, without reading the file back (Kafka's
followers get the same bytes by sendfile from the page cache). Only appends to the active segment are kept;
a roll, a truncation or closing the log clears it.

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
from bisect import bisect_left, bisect_right, insort
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from moldau.protocol.records.batch import (
    CONTROL_ABORT,
    CONTROL_FLAG,
    F_BASE_OFFSET,
    F_LAST_OFFSET_DELTA,
    F_MAX_TIMESTAMP,
    INT32,
    INT64,
    TRANSACTIONAL_FLAG,
    control_type,
    increment_sequence,
    record_offsets_and_timestamps,
    set_log_append_time,
)

from . import cleaner as _cleaner
from .byte_offsets import ByteOffsetIndex
from .checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    CorruptCheckpointError,
    fsync_dir,
    read_epoch_checkpoint,
    read_partition_metadata,
    write_epoch_checkpoint,
    write_partition_metadata,
)
from .cleaner import recover_interrupted_swaps
from .config import LONG_MAX, LogConfig
from .errors import (
    InvalidTimestampError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from .index import TxnIndex
from .producer_state import CorruptSnapshotError, ProducerStateManager
from .segment import INT_MAX, CorruptBatch, FileRegion, Segment, SegmentCache, segment_file_name

log = logging.getLogger(__name__)

__all__ = ["PartitionLog", "AppendInfo", "ReadResult", "parse_partition_dir_name"]


@dataclass(slots=True)
class AppendInfo:
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime topics
    log_start_offset: int
    duplicate: bool = False


# tail-cache reads with ``regions``: smaller runs of an append are sent from memory (a sendfile and the
# separate writes around it cost more than copying a few KiB)
TAIL_REGION_MIN = 32 * 1024


@dataclass(slots=True)
class ReadResult:
    chunks: list[Any]  # whole record batches (bytes-like), in offset order (one chunk per segment touched)
    first_offset: int  # base offset of the first returned batch (== requested offset when empty)
    last_offset_exclusive: int  # last offset of the last returned batch + 1 (== requested offset when empty)
    size: int
    # (producer_id, first_offset) of aborted transactions overlapping the returned range (for READ_COMMITTED
    # fetches; Kafka's FetchResponse AbortedTransactions); None when there are none
    aborted_transactions: list[tuple[int, int]] | None = None


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """``my-topic-3`` -> ("my-topic", 3); None for names that are not partition directories."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or "." in part:
        return None
    return topic, int(part)


class PartitionLog:
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
    ) -> None:
        """``deferred_fsync``: segments recovered after an unclean shutdown are appended there for the caller
        to fsync (the log manager does many partitions' in parallel) instead of one by one here."""
        self.dir = os.path.abspath(directory)
        self._deferred_fsync = deferred_fsync
        if topic is None or partition is None:
            parsed = parse_partition_dir_name(os.path.basename(self.dir))
            if parsed is None:
                raise ValueError(f"{directory}: not a <topic>-<partition> directory")
            topic, partition = parsed
        self.topic: str = topic
        self.partition: int = partition
        self.config = config or LogConfig()
        self._cache = cache if cache is not None else SegmentCache()
        self._clock = clock
        self._lock = threading.RLock()
        self.producer_state = ProducerStateManager(self.config.producer_id_expiration_ms)
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._epochs: list[tuple[int, int]] = []
        # aborted transactions, sorted: (last offset = ABORT marker offset, producer id, first offset, LSO)
        self._aborted: list[tuple[int, int, int, int]] = []
        self._closed = False
        self._roll_flush_pending = False
        # segment files created or deleted since the last flush: flush() fsyncs the directory too, so that
        # a new segment's name survives a power loss with the records fsynced into it
        self._dir_dirty = False
        self.log_start_offset = 0
        self.recovery_point = 0
        self.high_watermark = 0
        self.byte_offsets: ByteOffsetIndex | None = None  # Kafka 0.7 byte offsets (byte_offsets.py)
        # tail cache: (first offset, next offset, data, [(batch base, batch last offset, size)], segment,
        # position in it) per append
        self.tail_cache_max = 0  # bytes; 0: off
        self._tail: deque[tuple[int, int, Any, list[tuple[int, int, int]], Segment, int]] = deque()
        self._tail_bytes = 0
        # a new partition directory's own name reaches the disk with the first flush (the parent fsynced)
        self._parent_dirty = not os.path.isdir(self.dir)
        if self._parent_dirty:
            os.makedirs(self.dir, exist_ok=True)
        if topic_id is not None:
            write_partition_metadata(self.dir, topic_id)
        self.topic_id: str | None = read_partition_metadata(self.dir)
        self._last_flush_ms = self._now_ms()
        self._load(clean_shutdown, recovery_point, log_start_offset, high_watermark)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self.log_start_offset}, "
            f"end={self.log_end_offset}, hw={self.high_watermark}, segments={len(self._segments)})"
        )

    def _now_ms(self) -> int:
        return int(self._clock.time() * 1000)

    # ================================================================================================ load
    def _load(
        self, clean: bool, recovery_point: int, log_start_offset: int, high_watermark: int | None
    ) -> None:
        cfg = self.config
        interval = cfg.index_interval_bytes
        now = self._now_ms()
        bases: list[int] = []
        names = os.listdir(self.dir)  # one listing serves the whole load
        if recover_interrupted_swaps(self.dir, names):  # the log cleaner's .cleaned / .swap files
            names = os.listdir(self.dir)
        indexes: list[tuple[int, str]] = []
        for name in names:
            if name.endswith((".tmp", ".deleted")):
                self._unlink(os.path.join(self.dir, name))
                continue
            stem = name[:20]
            if len(name) < 24 or not stem.isdigit() or name[20] != ".":
                continue
            ext = name[20:]
            if ext == ".log":
                bases.append(int(stem))
            elif ext in (".index", ".timeindex", ".txnindex"):
                indexes.append((int(stem), name))
        bases.sort()
        known = set(bases)
        for base, name in indexes:
            if base not in known:
                log.info("%s: deleting orphan index %s", self.dir, name)
                self._unlink(os.path.join(self.dir, name))
        recovered = False
        if not bases:
            seg = Segment.create(
                self.dir, max(log_start_offset, 0), cfg.segment_index_bytes, self._cache, now
            )
            seg.active = True
            self._dir_dirty = True
            segs = [seg]
        else:
            segs = [
                Segment.open_existing(self.dir, b, cfg.segment_index_bytes, self._cache, now) for b in bases
            ]
            segs[-1].active = True
            if not clean:
                recovered = True
                first = max(0, bisect_right(bases, recovery_point) - 1)
                log.info(
                    "%s: unclean shutdown, recovering from offset %d (segment %d)",
                    self.dir,
                    recovery_point,
                    bases[first],
                )
                for j in range(first, len(segs)):
                    truncated = segs[j].recover(interval, cfg.max_message_bytes)
                    if truncated and j + 1 < len(segs):
                        for later in segs[j + 1 :]:
                            log.warning(
                                "%s: deleting segment %s after a corrupt batch", self.dir, later.log_path
                            )
                            later.delete_files()
                        del segs[j + 1 :]
                        segs[-1].active = True
                        break
                if self._deferred_fsync is not None:
                    self._deferred_fsync.extend(segs[first:])
                else:
                    for s in segs[first:]:
                        self._fsync_segment(s)
            else:
                segs[-1].load_tail(interval)
        self._segments = segs
        self._bases = [s.base_offset for s in segs]
        leo = self.log_end_offset
        ls = max(log_start_offset, segs[0].base_offset)
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
        self._load_epochs()
        present = set(names)
        self._load_aborted(present)
        self._load_producer_state(now, names)
        self.byte_offsets = ByteOffsetIndex.open_if_present(self.dir, present, clean)
        if self.byte_offsets is not None:
            self.byte_offsets.truncate(leo)

    def _load_epochs(self) -> None:
        path = os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT)
        try:
            epochs = read_epoch_checkpoint(path)
        except CorruptCheckpointError as e:
            log.warning("%s: %s; leader epoch cache reset", self.dir, e)
            epochs = []
        leo = self.log_end_offset
        kept = [(e, o) for e, o in epochs if o < leo or o == leo == self.log_start_offset]
        self._epochs = kept
        if kept != epochs:
            write_epoch_checkpoint(path, kept)

    def _load_aborted(self, present: set[str] | None = None) -> None:
        out = []
        for seg in self._segments:
            if present is not None and os.path.basename(seg.txnindex_path) not in present:
                continue  # no aborted transactions in this segment (the listing at load says so)
            for pid, first, last, lso in TxnIndex.read(seg.txnindex_path):
                out.append((last, pid, first, lso))
        out.sort()
        self._aborted = out

    def _drop_aborted_from(self, offset: int) -> None:
        """Forget aborted transactions whose marker is at or after ``offset`` (and rewrite their
        .txnindex)."""
        i = bisect_left(self._aborted, (offset,))
        if i == len(self._aborted):
            return
        gone = self._aborted[i:]
        del self._aborted[i:]
        touched = {self._segment_index_for(e[0]) for e in gone}
        for si in touched:
            if 0 <= si < len(self._segments):
                self._rewrite_txn_index(self._segments[si])

    def _segment_index_for(self, offset: int) -> int:
        return max(0, bisect_right(self._bases, offset) - 1)

    def _rewrite_txn_index(self, seg: Segment) -> None:
        si = self._segments.index(seg)
        lo = seg.base_offset
        hi = self._bases[si + 1] if si + 1 < len(self._bases) else None
        entries = [
            (pid, first, last, lso)
            for last, pid, first, lso in self._aborted
            if last >= lo and (hi is None or last < hi)
        ]
        TxnIndex.rewrite(seg.txnindex_path, entries)

    def _on_marker(
        self, pid: int, epoch: int, ts: int, offset: int, ctype: int, persist: bool = True
    ) -> None:
        """A COMMIT/ABORT marker at ``offset``: record an aborted transaction, end the producer's
        transaction."""
        ps = self.producer_state
        if ctype == CONTROL_ABORT:
            e = ps.get(pid)
            first = (
                e.current_txn_first_offset if e is not None and e.current_txn_first_offset >= 0 else offset
            )
            others = [
                x.current_txn_first_offset
                for x in ps.producers.values()
                if x.producer_id != pid and x.current_txn_first_offset >= 0
            ]
            lso = min(others) if others else offset + 1
            insort(self._aborted, (offset, pid, first, lso))
            if persist:
                seg = self._segments[self._segment_index_for(offset)]
                try:
                    TxnIndex.append(seg.txnindex_path, pid, first, offset, lso)
                except OSError as err:
                    raise StorageError(f"cannot write {seg.txnindex_path}: {err}") from err
        ps.on_control(pid, epoch, ts)

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted transactions with marker >= ``start`` that began before
        ``end`` (Kafka's collectAbortedTransactions)."""
        ab = self._aborted
        i = bisect_left(ab, (start,))
        return [(pid, first) for _last, pid, first, _lso in ab[i:] if first < end]

    def _snapshot_offsets(self, names: list[str] | None = None) -> list[int]:
        out = []
        for name in os.listdir(self.dir) if names is None else names:
            if len(name) == 29 and name.endswith(".snapshot") and name[:20].isdigit():
                out.append(int(name[:20]))
        out.sort()
        return out

    def _snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir, segment_file_name(offset, ".snapshot"))

    def _load_producer_state(self, now_ms: int, names: list[str] | None = None) -> None:
        ps = self.producer_state
        ps.clear()
        leo = self.log_end_offset
        start = self._segments[0].base_offset
        for off in reversed(self._snapshot_offsets(names)):
            path = self._snapshot_path(off)
            if off > leo:
                self._unlink(path)
                continue
            try:
                ps.load_snapshot(path, now_ms)
                start = off
                break
            except (CorruptSnapshotError, OSError) as e:
                log.warning("%s: producer snapshot %s unusable (%s); deleting", self.dir, path, e)
                ps.clear()
                self._unlink(path)
        self._drop_aborted_from(start)
        if start < leo:
            before = len(self._aborted)
            self._replay_producers(start)
            if len(self._aborted) != before:
                for si in range(self._segment_index_for(start), len(self._segments)):
                    self._rewrite_txn_index(self._segments[si])

    def _replay_producers(self, start: int) -> None:
        ps = self.producer_state
        interval = self.config.index_interval_bytes
        i = max(0, bisect_right(self._bases, start) - 1)
        for seg in self._segments[i:]:
            pos = 0
            if seg.base_offset < start:
                found = seg.find_batch(start, interval)
                if found is None:
                    continue
                pos = found[0]
            try:
                for p, f, _ in seg.scan(pos):
                    if f[9] >= 0:
                        if f[5] & CONTROL_FLAG:
                            head = os.pread(seg.fd(), min(f[1] + 12, 512), p)
                            self._on_marker(
                                f[9], f[10], f[8], f[F_BASE_OFFSET], control_type(head), persist=False
                            )
                        else:
                            ps.update_from_header(f, f[F_BASE_OFFSET])
            except CorruptBatch as e:
                log.warning("%s: %s while rebuilding producer state", seg.log_path, e)

    @staticmethod
    def _unlink(path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    @staticmethod
    def _fsync_segment(seg: Segment) -> None:
        fd, idxs = seg.sync_handles()
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        for ix in idxs:
            ix.fsync()
        seg.dirty = False

    # ================================================================================================ offsets
    @property
    def log_end_offset(self) -> int:
        nxt = self._segments[-1].next_offset
        assert nxt is not None
        return nxt

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
        if self._roll_flush_pending:
            return True
        ms = self.config.flush_interval_ms
        return ms < LONG_MAX and self.unflushed_messages > 0 and now_ms - self._last_flush_ms >= ms

    @property
    def segments(self) -> Sequence[Segment]:
        return tuple(self._segments)

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

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
        max_msg = cfg.max_message_bytes
        first_pos = batches[0][0]
        end = first_pos
        contiguous = True
        total = 0
        append_max_ts = -1
        ts_checks = assign_offsets and not cfg.log_append_time and (
            cfg.message_timestamp_difference_max_ms < LONG_MAX
            or cfg.message_timestamp_before_max_ms < LONG_MAX
            or cfg.message_timestamp_after_max_ms < LONG_MAX
        )
        for pos, h in batches:
            size = h.batch_length + 12
            if size > max_msg:
                raise MessageTooLargeError(
                    f"batch of {size} bytes exceeds max.message.bytes={max_msg} for "
                    f"{self.topic}-{self.partition}"
                )
            if pos != end:
                contiguous = False
            end = pos + size
            total += size
            if h.max_timestamp > append_max_ts:
                append_max_ts = h.max_timestamp
            if ts_checks:
                self._check_timestamps(h, now_ms)
        if total > cfg.segment_bytes:
            raise RecordListTooLargeError(f"{total} bytes exceed segment.bytes={cfg.segment_bytes}")

        with self._lock:
            if self._closed:
                raise StorageError(f"log {self.topic}-{self.partition} is closed")
            lat = cfg.log_append_time and assign_offsets  # a follower keeps the leader's append times
            # ---- idempotent producers: duplicates, fencing, sequence gaps (before any byte is touched)
            has_pid = False
            if assign_offsets:
                pending: dict[int, tuple[int, int]] | None = None
                for _pos, h in batches:
                    if h.producer_id >= 0:
                        has_pid = True
                        if h.base_sequence >= 0 and not h.attributes & CONTROL_FLAG:
                            if pending is None:
                                pending = {}
                            dup = self.producer_state.check(
                                h.producer_id,
                                h.producer_epoch,
                                h.base_sequence,
                                increment_sequence(h.base_sequence, h.last_offset_delta),
                                pending,
                            )
                            if dup is not None:
                                return AppendInfo(
                                    dup.first_offset, dup.last_offset, dup.timestamp if lat else -1,
                                    self.log_start_offset, True,
                                )
                        elif not h.attributes & CONTROL_FLAG:
                            # a coordinator's batch without sequences (transactional offsets): fenced by a
                            # newer epoch all the same (Kafka's checkProducerEpoch for every origin)
                            self.producer_state.check_epoch(h.producer_id, h.producer_epoch)
            else:
                has_pid = any(h.producer_id >= 0 for _p, h in batches)
            # ---- offsets, leader epoch, LogAppendTime
            active = self._segments[-1]
            leo = active.next_offset
            assert leo is not None
            next_off = leo
            metas: list[tuple[int, int, int, int]] = []  # (base, last, max ts, size)
            for pos, h in batches:
                size = h.batch_length + 12
                if assign_offsets:
                    base = next_off
                    INT64.pack_into(buf, pos, base)
                    INT32.pack_into(buf, pos + 12, leader_epoch)
                else:
                    (base,) = INT64.unpack_from(buf, pos)
                    if base < next_off:
                        raise UnexpectedAppendOffsetError(
                            f"append at offset {base} below the log end offset {next_off}"
                        )
                ts = h.max_timestamp
                if lat:
                    set_log_append_time(buf, pos, now_ms)
                    ts = now_ms
                last = base + h.last_offset_delta
                metas.append((base, last, ts, size))
                next_off = last + 1
            first_offset = metas[0][0]
            last_offset = next_off - 1
            if lat:
                append_max_ts = now_ms
            # ---- roll before the append that would overflow
            if active.size > 0 and (
                active.size + total > cfg.segment_bytes
                or active.index_full()
                or last_offset - active.base_offset > INT_MAX
                or self._time_to_roll(active, append_max_ts, now_ms)
            ):
                active = self._roll_locked(now_ms, metas[0][0] if not assign_offsets else None)
            # ---- one write
            if contiguous:
                data: Any = memoryview(buf)[first_pos:end]
            else:
                mv = memoryview(buf)
                data = b"".join(mv[p : p + h.batch_length + 12] for p, h in batches)
            p = written_at = active.write(data)
            interval = cfg.index_interval_bytes
            for _base, last, ts, size in metas:
                active._index_batch(p, last, ts, size, interval)
                p += size
            if self.tail_cache_max > 0 and assign_offsets:
                kept = data if stable or not contiguous else bytes(data)
                self._tail_add(first_offset, last_offset + 1, kept, [(b, la, sz) for b, la, _t, sz in metas],
                               active, written_at)
            # ---- producer state, leader epochs
            if has_pid:
                ps = self.producer_state
                for (_pos, h), (base, last, ts, _size) in zip(batches, metas):
                    pid = h.producer_id
                    if pid < 0:
                        continue
                    if h.attributes & CONTROL_FLAG:
                        self._on_marker(pid, h.producer_epoch, ts, base, control_type(buf, _pos))
                    else:
                        bs = h.base_sequence
                        ps.update(
                            pid, h.producer_epoch, bs,
                            increment_sequence(bs, h.last_offset_delta) if bs >= 0 else -1,
                            base, last, ts, bool(h.attributes & TRANSACTIONAL_FLAG),
                        )
            if assign_offsets:
                if leader_epoch >= 0 and (not self._epochs or leader_epoch > self._epochs[-1][0]):
                    self._assign_epoch(leader_epoch, first_offset)
            else:
                for (pos, _h), (base, _l, _t, _s) in zip(batches, metas):
                    (ep,) = INT32.unpack_from(buf, pos + 12)
                    if ep >= 0 and (not self._epochs or ep > self._epochs[-1][0]):
                        self._assign_epoch(ep, base)
            return AppendInfo(first_offset, last_offset, now_ms if lat else -1, self.log_start_offset, False)

    # ============================================================================================ tail cache
    def _tail_add(self, first: int, nxt: int, data: Any, batches: list[tuple[int, int, int]], seg: Segment,
                  position: int) -> None:
        size = len(data)
        tail = self._tail
        if tail and tail[-1][1] != first:
            self.tail_clear()
        if size > self.tail_cache_max:
            return
        tail.append((first, nxt, data, batches, seg, position))
        self._tail_bytes += size
        while self._tail_bytes > self.tail_cache_max:
            self._tail_bytes -= len(tail.popleft()[2])

    def tail_release(self, upto: int) -> None:
        """Drop the cached appends that end at or below ``upto`` (every follower has them)."""
        tail = self._tail
        while tail and tail[0][1] <= upto:
            self._tail_bytes -= len(tail.popleft()[2])

    def tail_clear(self) -> None:
        self._tail.clear()
        self._tail_bytes = 0

    def _read_tail(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool, regions: bool = False
    ) -> ReadResult | None:
        """``read`` from the tail cache (None when it does not hold ``offset`` up to the log end offset):
        the same whole batches, as views of the cached appends (``regions``: runs over ``TAIL_REGION_MIN``
        bytes as regions of the active segment's file where the appends were written, without reading it;
        None when an append needed is in an older segment)."""
        tail = self._tail
        active = self._segments[-1]
        if not tail or offset < tail[0][0] or tail[-1][1] != active.next_offset:
            return None
        chunks: list[Any] = []
        total = 0
        first = last_excl = offset
        done = False
        for efirst, enext, data, batches, seg, seg_pos in tail:
            if enext <= offset:
                continue
            if regions and seg is not active:
                return None
            start = end = pos = 0
            for base, last, size in batches:
                if last < offset:
                    pos += size
                    start = end = pos
                    continue
                if (max_offset is not None and last >= max_offset) or (
                    total + size > max_bytes and not (total == 0 and min_one)
                ):
                    done = True
                    break
                if total == 0:
                    first = base
                total += size
                end = pos + size
                pos = end
                last_excl = last + 1
            if end > start:
                if regions and end - start > TAIL_REGION_MIN:
                    chunks.append(seg.region(seg_pos + start, end - start))
                else:
                    chunks.append(data[start:end] if end - start < len(data) else data)
            if done or total >= max_bytes:
                break
        if total == 0:
            return ReadResult([], offset, offset, 0)
        aborted = self.aborted_transactions(first, last_excl) if self._aborted else None
        return ReadResult(chunks, first, last_excl, total, aborted or None)

    def _check_timestamps(self, h: Any, now_ms: int) -> None:
        """Kafka's CreateTime bounds, checked on the batch's base and max timestamps (records are not decoded;
        Kafka checks every record)."""
        cfg = self.config
        for ts in (h.base_timestamp, h.max_timestamp):
            if ts < 0:
                continue
            if (
                abs(ts - now_ms) > cfg.message_timestamp_difference_max_ms
                or now_ms - ts > cfg.message_timestamp_before_max_ms
                or ts - now_ms > cfg.message_timestamp_after_max_ms
            ):
                raise InvalidTimestampError(
                    f"timestamp {ts} of a batch for {self.topic}-{self.partition} is out of the accepted "
                    f"range around {now_ms}"
                )

    def _time_to_roll(self, seg: Segment, append_max_ts: int, now_ms: int) -> bool:
        """Kafka's rule: time since the first batch's timestamp (message time), or since the segment was
        created when the first batch has no timestamp, exceeds segment.ms - segment.jitter.ms."""
        limit = self._roll_limit_ms()
        rt = seg.rolling_timestamp
        if rt is not None and rt >= 0:
            return append_max_ts - rt > limit
        return now_ms - seg.created_ms > limit

    def _roll_limit_ms(self) -> int:
        """segment.ms - segment.jitter.ms, where compacted logs use min(segment.ms, max.compaction.lag.ms)
        (Kafka's maxSegmentMs) so that the active segment's data becomes cleanable in time."""
        cfg = self.config
        ms = cfg.segment_ms
        if cfg.compact_enabled and 0 < cfg.max_compaction_lag_ms < ms:
            ms = cfg.max_compaction_lag_ms
        return ms - cfg.segment_jitter_ms

    def assign_leader_epoch(self, epoch: int) -> None:
        """A new leader's epoch starts at the log end offset (Kafka's Partition.makeLeader): recorded in
        leader-epoch-checkpoint at once, so followers truncating with OffsetForLeaderEpoch find where it
        starts
        before anything is appended in it."""
        with self._lock:
            if epoch >= 0 and (not self._epochs or epoch > self._epochs[-1][0]):
                self._assign_epoch(epoch, self.log_end_offset)

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        self._epochs.append((epoch, start_offset))
        write_epoch_checkpoint(os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT), self._epochs)

    # ================================================================================================ roll
    def roll(self, now_ms: int | None = None) -> Segment:
        """Start a new active segment at the log end offset (no-op on an empty active segment)."""
        with self._lock:
            return self._roll_locked(self._now_ms() if now_ms is None else now_ms)

    def _roll_locked(self, now_ms: int, base: int | None = None) -> Segment:
        old = self._segments[-1]
        if old.size == 0 and base is None:
            return old
        self.tail_clear()
        old.on_become_inactive()
        old.active = False
        new_base = old.next_offset if base is None else base
        assert new_base is not None
        seg = Segment.create(self.dir, new_base, self.config.segment_index_bytes, self._cache, now_ms)
        seg.active = True
        if old.size == 0:  # follower append far past an empty segment: replace it
            old.delete_files()
            self._segments[-1] = seg
            self._bases[-1] = new_base
        else:
            self._segments.append(seg)
            self._bases.append(new_base)
        self._roll_flush_pending = True
        self._dir_dirty = True  # the new segment's files (and the snapshot's rename) reach the disk at flush
        try:
            self.producer_state.write_snapshot(self._snapshot_path(new_base))
        except OSError as e:
            log.warning("%s: cannot write producer snapshot: %s", self.dir, e)
        log.debug("%s: rolled new segment at %d", self.dir, new_base)
        return seg

    def maybe_roll_by_time(self, now_ms: int) -> bool:
        """Background roll (``segment.ms`` since the active segment was created); only non-empty segments."""
        with self._lock:
            seg = self._segments[-1]
            if self._closed or seg.size == 0:
                return False
            if now_ms - seg.created_ms > self._roll_limit_ms():
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
        ``FileRegion``s of the segment files (for sendfile) instead of bytes.

        Raises OffsetOutOfRangeError below the log start offset or above the log end offset; an offset equal
        to the log end offset gives an empty result."""
        segs = self._segments
        leo = segs[-1].next_offset
        assert leo is not None
        if offset < self.log_start_offset or offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.topic}-{self.partition} "
                f"[{self.log_start_offset}, {leo}]"
            )
        if offset == leo or (max_offset is not None and offset >= max_offset):
            return ReadResult([], offset, offset, 0)
        if self._tail:
            cached = self._read_tail(offset, max_bytes, max_offset, min_one, regions)
            if cached is not None:
                return cached
        interval = self.config.index_interval_bytes
        i = bisect_right(self._bases, offset) - 1
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
        aborted = self.aborted_transactions(first, last_excl) if self._aborted and total else None
        return ReadResult(chunks, first, last_excl, total, aborted or None)

    # ================================================================================================
    # timestamps
    def offset_for_timestamp(
        self, timestamp: int, *, max_offset: int | None = None
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= ``timestamp`` (at or after the log
        start offset), or None (ListOffsets then answers -1). Only real timestamps: the broker maps
        EARLIEST (-2), LATEST (-1) and MAX_TIMESTAMP (-3)."""
        interval = self.config.index_interval_bytes
        ls = self.log_start_offset
        for seg in list(self._segments):
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

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets MAX_TIMESTAMP, -3): the
        first such record, as Kafka 3.x answers. None for an empty log."""
        best_ts = -1
        best: Segment | None = None
        best_off = -1
        interval = self.config.index_interval_bytes
        for seg in list(self._segments):
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
        ls = self.log_start_offset
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

    def _delete_old_segments(self, predicate: Callable[[Segment, Segment | None], bool], reason: str) -> int:
        """Kafka's deletableSegments + deleteSegments: oldest first, stop at the first segment that must stay,
        never past the high watermark, never an empty active segment; if every segment goes, roll first."""
        segs = self._segments
        doomed: list[Segment] = []
        hw = self.high_watermark
        leo = self.log_end_offset
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else leo
            if nxt is None and seg.size == 0:
                break
            if hw >= upper and predicate(seg, nxt):
                doomed.append(seg)
            else:
                break
        if not doomed:
            return 0
        if self.byte_offsets is not None:  # byte positions of what stays must survive the deletion
            upto = segs[len(doomed)].base_offset if len(doomed) < len(segs) else leo
            self.byte_offsets.cover(self.read, self.log_start_offset, upto)
        if len(doomed) == len(segs):
            self._roll_locked(self._now_ms())
        for seg in doomed:
            log.info("%s: deleting segment %d (%s)", self.dir, seg.base_offset, reason)
            seg.delete_files()
        del self._segments[: len(doomed)]
        del self._bases[: len(doomed)]
        first = self._segments[0].base_offset
        j = bisect_left(self._aborted, (first,))
        if j:
            del self._aborted[:j]
        if first > self.log_start_offset:
            self.log_start_offset = first
        if self.recovery_point < self.log_start_offset:
            self.recovery_point = self.log_start_offset
        if self.high_watermark < self.log_start_offset:
            self.high_watermark = self.log_start_offset
        for off in self._snapshot_offsets():
            if off < first:
                self._unlink(self._snapshot_path(off))
        self._truncate_epochs_from_start(self.log_start_offset)
        if self.byte_offsets is not None:
            self.byte_offsets.trim(self.log_start_offset)
        return len(doomed)

    def _truncate_epochs_from_start(self, start: int) -> None:
        eps = self._epochs
        if len(eps) > 0 and eps[0][1] < start:
            keep = [e for e in eps if e[1] >= start]
            older = [e for e in eps if e[1] < start]
            if older and (not keep or keep[0][1] > start):
                keep.insert(0, (older[-1][0], start))
            if keep != eps:
                self._epochs = keep
                write_epoch_checkpoint(os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT), keep)

    def enforce_retention(self, now_ms: int) -> int:
        """Delete segments past retention.ms (by their largest timestamp) and beyond retention.bytes, and
        segments below the log start offset. Returns the number of segments deleted."""
        cfg = self.config
        deleted = 0
        with self._lock:
            if self._closed:
                return 0
            if cfg.delete_enabled:
                if cfg.retention_ms >= 0:
                    rms = cfg.retention_ms
                    deleted += self._delete_old_segments(
                        lambda s, _n: now_ms - s.largest_timestamp() > rms, f"retention.ms={rms}"
                    )
                if cfg.retention_bytes >= 0:
                    diff = self.size_in_bytes() - cfg.retention_bytes
                    if diff > 0:
                        def by_size(s: Segment, _n: Segment | None) -> bool:
                            nonlocal diff
                            if diff - s.size >= 0:
                                diff -= s.size
                                return True
                            return False

                        deleted += self._delete_old_segments(
                            by_size, f"retention.bytes={cfg.retention_bytes}"
                        )
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
            segs = self._segments
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
                self.dir, base, self.config.segment_index_bytes, self._cache, self._now_ms()
            )
            segs[i : i + n] = [new]
            self._bases[i : i + n] = [base]
            lo = bisect_left(self._aborted, (base,))
            hi = bisect_left(self._aborted, (end,))
            self._aborted[lo:hi] = sorted((last, pid, first, lso) for pid, first, last, lso in aborted)
            return new

    # ================================================================================================
    # truncation
    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or after ``offset`` (a batch containing ``offset`` goes as a whole). Returns
        the new log end offset."""
        with self._lock:
            if offset >= self.log_end_offset:
                return self.log_end_offset
            self.tail_clear()
            now = self._now_ms()
            if offset < self._segments[0].base_offset or offset < self.log_start_offset:
                self._truncate_fully_locked(offset, now)
            else:
                interval = self.config.index_interval_bytes
                i = bisect_right(self._bases, offset) - 1
                for seg in self._segments[i + 1 :]:
                    seg.delete_files()
                del self._segments[i + 1 :]
                del self._bases[i + 1 :]
                seg = self._segments[-1]
                seg.active = True
                seg.ensure_offset_index(interval)
                seg.ensure_time_index(interval)
                if seg.next_offset is None:
                    seg.load_tail(interval)
                seg.truncate_to(offset, interval)
            leo = self.log_end_offset
            if self.byte_offsets is not None:
                self.byte_offsets.truncate(leo)
            self._drop_aborted_from(leo)
            self.high_watermark = min(self.high_watermark, leo)
            self.recovery_point = min(self.recovery_point, leo)
            kept = [(e, o) for e, o in self._epochs if o < leo]
            if kept != self._epochs:
                self._epochs = kept
                write_epoch_checkpoint(os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT), kept)
            self._load_producer_state(now)
            return leo

    def _truncate_fully_locked(self, offset: int, now_ms: int) -> None:
        self.tail_clear()
        for seg in self._segments:
            seg.delete_files()
        for off in self._snapshot_offsets():
            self._unlink(self._snapshot_path(off))
        seg = Segment.create(self.dir, offset, self.config.segment_index_bytes, self._cache, now_ms)
        seg.active = True
        self._dir_dirty = True
        self._segments = [seg]
        self._bases = [offset]
        self.log_start_offset = offset
        self.recovery_point = offset
        self.high_watermark = offset
        self.producer_state.clear()
        self._aborted = []
        if self._epochs:
            self._epochs = []
            write_epoch_checkpoint(os.path.join(self.dir, LEADER_EPOCH_CHECKPOINT), [])

    # ======================================================================================= 0.7 byte offsets
    def byte_offsets_cover(self, upto: int) -> ByteOffsetIndex:
        """The Kafka 0.7 byte-offset index (created on first use), extended to the batches below ``upto``."""
        with self._lock:
            if self._closed:
                raise StorageError(f"log {self.topic}-{self.partition} is closed")
            idx = ByteOffsetIndex.attach(self)
            idx.cover(self.read, self.log_start_offset, upto)
            return idx

    def byte_offsets_prepare(self, upto: int, max_bytes: int) -> Any:
        """The next piece of work towards a 0.7 byte-offset index covering ``upto`` (a
        ``byte_offsets.IndexJob`` for a worker thread), None when it is there."""
        with self._lock:
            if self._closed:
                raise StorageError(f"log {self.topic}-{self.partition} is closed")
            return ByteOffsetIndex.attach(self).prepare(self.read, self.log_start_offset, upto, max_bytes)

    def byte_offsets_prepare_views(self, position: int, max_bytes: int) -> Any:
        """Batches to convert into the stored 0.7 views from byte ``position`` (a
        ``byte_offsets.ViewJob`` for a worker thread), None when there is nothing to do."""
        with self._lock:
            idx = self.byte_offsets
            if self._closed or idx is None:
                return None
            return idx.prepare_views(self.read, self.log_start_offset, position, max_bytes)

    def byte_offsets_commit_views(self, job: Any, data: bytes) -> bool:
        with self._lock:
            if self._closed or self.byte_offsets is None:
                return False
            return self.byte_offsets.commit_views(job, data)

    def byte_offsets_commit(self, job: Any, sizes: list[int]) -> bool:
        """Add a job's result to the index (False: the index moved meanwhile; prepare again)."""
        with self._lock:
            if self._closed or self.byte_offsets is None:
                return False
            return self.byte_offsets.commit(job, sizes)

    def byte_offsets_step(self, upto: int, budget_s: float) -> bool:
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

    # ================================================================================================ leader
    # epochs
    @property
    def leader_epochs(self) -> list[tuple[int, int]]:
        """(leader epoch, start offset) entries of leader-epoch-checkpoint."""
        return list(self._epochs)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (largest epoch <= ``epoch``, end offset of that epoch), (-1, -1) when
        unknown (Kafka's LeaderEpochFileCache.endOffsetFor)."""
        eps = self._epochs
        if epoch < 0 or not eps:
            return -1, -1
        if eps[-1][0] == epoch:
            return epoch, self.log_end_offset
        higher = next((i for i, (e, _o) in enumerate(eps) if e > epoch), None)
        if higher is None:
            return -1, -1
        if higher == 0:
            return epoch, eps[0][1]
        return eps[higher - 1][0], eps[higher][1]

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
            work: list[tuple[Segment, int, list]] = []
            for seg in self._segments:
                if seg.dirty or seg.offset_index.dirty or seg.time_index.dirty:
                    seg.dirty = False
                    fd, idxs = seg.sync_handles()
                    work.append((seg, fd, idxs))
            self._roll_flush_pending = False
            sync_dir, self._dir_dirty = self._dir_dirty, False
            sync_parent, self._parent_dirty = self._parent_dirty, False
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
            self._dir_dirty = self._dir_dirty or sync_dir
            self._parent_dirty = self._parent_dirty or sync_parent
            raise StorageError(f"fsync of {self.dir} failed: {e}") from e
        finally:
            for _seg, fd, _ in work:
                os.close(fd)
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
            active = self._segments[-1]
            if active.max_timestamp >= 0:
                active.time_index.maybe_append(active.max_timestamp, active.max_timestamp_offset)
        self.flush()
        with self._lock:
            leo = self.log_end_offset
            path = self._snapshot_path(leo)
            try:
                # a snapshot at the log end offset already holds this state (nothing appended since)
                if not os.path.exists(path):
                    self.producer_state.write_snapshot(path)
            except OSError as e:
                log.warning("%s: cannot write producer snapshot: %s", self.dir, e)
            for seg in self._segments:
                seg.close()
            self.recovery_point = leo
            self._closed = True
            self.tail_clear()

    def update_config(self, config: LogConfig) -> None:
        """New topic configuration (AlterConfigs); takes effect for the next append / tick."""
        self.config = config
        self.producer_state.expiration_ms = config.producer_id_expiration_ms

    @property
    def closed(self) -> bool:
        return self._closed

    def relocate(self, new_dir: str, swap: Callable[[], None]) -> None:
        """Point this log at ``new_dir``, a byte-identical copy of its directory (a replica moved to another
        log dir, moldau.log.dir_move): under the log's lock, with every file handle closed, ``swap()`` puts
        the copy in place (renames), then every path follows. The caller excludes readers (event loop)."""
        with self._lock:
            for seg in self._segments:
                seg.close_handle()
            swap()
            new_dir = os.path.abspath(new_dir)
            self.dir = new_dir
            for seg in self._segments:
                seg.dir = new_dir
                seg.log_path = os.path.join(new_dir, os.path.basename(seg.log_path))
                seg.index_path = os.path.join(new_dir, os.path.basename(seg.index_path))
                seg.timeindex_path = os.path.join(new_dir, os.path.basename(seg.timeindex_path))
                seg.offset_index.path = seg.index_path
                seg.time_index.path = seg.timeindex_path
            if self.byte_offsets is not None:
                self.byte_offsets.path = os.path.join(new_dir, os.path.basename(self.byte_offsets.path))
                self.byte_offsets.views.dir = new_dir

    def delete(self, remove: bool = True) -> str:
        """Close the handles and remove the partition directory (renamed to ``<dir>.<id>-delete`` first, as
        Kafka does, so a crash mid-way leaves a directory the manager removes at start). ``remove`` False:
        only the rename; the caller removes the returned directory later."""
        with self._lock:
            for seg in self._segments:
                seg.close_handle()
            self._closed = True
            self.tail_clear()
            doomed = f"{self.dir}.{uuid.uuid4().hex}-delete"
            try:
                os.rename(self.dir, doomed)
            except OSError:
                doomed = self.dir
            if remove:
                shutil.rmtree(doomed, ignore_errors=True)
            return doomed
