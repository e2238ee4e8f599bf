"""``LogLoader``: opening a partition's directory (Kafka's LogLoader): interrupted cleaner swaps finished,
temporary files and orphan indexes removed, segments opened, and after an unclean shutdown the segments from
the recovery point re-validated (a corrupt batch truncates the log there); then the producer state rebuilt
from the newest usable snapshot plus the batches after it (``rebuild_producer_state``, also run after a
truncation), which also rebuilds the aborted transactions of that range.

Producer state snapshots are ``<20-digit offset>.snapshot`` files in the partition directory (see
``producer_state``)."""

from __future__ import annotations

import logging
import os
from bisect import bisect_right

from moldau.protocol.records.batch import CONTROL_FLAG, F_BASE_OFFSET, control_type

from .cleaner import recover_interrupted_swaps
from .local_log import LocalLog, fsync_segment
from .producer_state import CorruptSnapshotError, ProducerStateManager
from .segment import CorruptBatch, Segment, segment_file_name
from .txn_state import AbortedTransactions

log = logging.getLogger(__name__)

__all__ = ["LogLoader", "rebuild_producer_state", "snapshot_offsets", "snapshot_path", "unlink"]


def unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def snapshot_offsets(directory: str, names: list[str] | None = None) -> list[int]:
    """The offsets of the producer snapshots in ``directory`` (``names``: its listing), ascending."""
    out = []
    for name in os.listdir(directory) if names is None else names:
        if len(name) == 29 and name.endswith(".snapshot") and name[:20].isdigit():
            out.append(int(name[:20]))
    out.sort()
    return out


def snapshot_path(directory: str, offset: int) -> str:
    return os.path.join(directory, segment_file_name(offset, ".snapshot"))


class LogLoader:
    def __init__(self, local: LocalLog, deferred_fsync: list[Segment] | None) -> None:
        """``deferred_fsync``: segments recovered after an unclean shutdown are appended there for the caller
        to fsync (the log manager does many partitions' in parallel) instead of one by one here."""
        self.local = local
        self.deferred_fsync = deferred_fsync

    def load_segments(
        self, clean: bool, recovery_point: int, log_start_offset: int, now: int
    ) -> tuple[bool, list[str]]:
        """Open (and after an unclean shutdown recover) the segments into ``local``. Returns (whether segments
        were recovered, the directory listing)."""
        local = self.local
        directory = local.dir
        cfg = local.config
        interval = cfg.index_interval_bytes
        bases: list[int] = []
        names = os.listdir(directory)  # one listing serves the whole load
        if recover_interrupted_swaps(directory, names):  # the log cleaner's .cleaned / .swap files
            names = os.listdir(directory)
        indexes: list[tuple[int, str]] = []
        for name in names:
            if name.endswith((".tmp", ".deleted")):
                unlink(os.path.join(directory, name))
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
                log.info("%s: deleting orphan index %s", directory, name)
                unlink(os.path.join(directory, name))
        recovered = False
        if not bases:
            segs = [local.create_segment(max(log_start_offset, 0), now)]
        else:
            segs = [
                Segment.open_existing(directory, b, cfg.segment_index_bytes, local.cache, now) for b in bases
            ]
            segs[-1].active = True
            if not clean:
                recovered = True
                first = max(0, bisect_right(bases, recovery_point) - 1)
                log.info(
                    "%s: unclean shutdown, recovering from offset %d (segment %d)",
                    directory,
                    recovery_point,
                    bases[first],
                )
                for j in range(first, len(segs)):
                    truncated = segs[j].recover(interval, cfg.max_message_bytes)
                    if truncated and j + 1 < len(segs):
                        for later in segs[j + 1 :]:
                            log.warning(
                                "%s: deleting segment %s after a corrupt batch", directory, later.log_path
                            )
                            later.delete_files()
                        del segs[j + 1 :]
                        segs[-1].active = True
                        break
                if self.deferred_fsync is not None:
                    self.deferred_fsync.extend(segs[first:])
                else:
                    for s in segs[first:]:
                        fsync_segment(s)
            else:
                segs[-1].load_tail(interval)
        local.set_segments(segs)
        return recovered, names


def rebuild_producer_state(
    local: LocalLog,
    ps: ProducerStateManager,
    aborted: AbortedTransactions,
    now_ms: int,
    names: list[str] | None = None,
) -> None:
    """Producer state (and aborted transactions) at the log end offset: the newest snapshot at or below it
    (newer ones deleted, unusable ones deleted), then the batches after it replayed (Kafka's
    rebuildProducerState)."""
    ps.clear()
    leo = local.log_end_offset
    start = local.segments[0].base_offset
    for off in reversed(snapshot_offsets(local.dir, names)):
        path = snapshot_path(local.dir, off)
        if off > leo:
            unlink(path)
            continue
        try:
            ps.load_snapshot(path, now_ms)
            start = off
            break
        except (CorruptSnapshotError, OSError) as e:
            log.warning("%s: producer snapshot %s unusable (%s); deleting", local.dir, path, e)
            ps.clear()
            unlink(path)
    aborted.drop_from(start)
    if start < leo:
        before = len(aborted)
        _replay_producers(local, ps, aborted, start)
        if len(aborted) != before:
            for si in range(local.segment_index_for(start), len(local.segments)):
                aborted.rewrite_index(si)


def _replay_producers(
    local: LocalLog, ps: ProducerStateManager, aborted: AbortedTransactions, start: int
) -> None:
    interval = local.config.index_interval_bytes
    i = max(0, bisect_right(local.bases, start) - 1)
    for seg in local.segments[i:]:
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
                        aborted.on_marker(
                            f[9], f[10], f[8], f[F_BASE_OFFSET], control_type(head), persist=False
                        )
                    else:
                        ps.update_from_header(f, f[F_BASE_OFFSET])
        except CorruptBatch as e:
            log.warning("%s: %s while rebuilding producer state", seg.log_path, e)
