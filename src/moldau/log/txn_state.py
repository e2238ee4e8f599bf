"""``AbortedTransactions``: the aborted transactions of one partition (Kafka's transaction indexes, one
``.txnindex`` file per segment, kept sorted in memory for READ_COMMITTED fetches), and what a COMMIT/ABORT
marker does to them and to the producer state."""

from __future__ import annotations

import os
from bisect import bisect_left, insort
from typing import TYPE_CHECKING

from moldau.protocol.records.batch import CONTROL_ABORT

from .errors import StorageError
from .index import TxnIndex
from .producer_state import ProducerStateManager

if TYPE_CHECKING:
    from .local_log import LocalLog

__all__ = ["AbortedTransactions"]


class AbortedTransactions:
    def __init__(self, local: LocalLog, producer_state: ProducerStateManager) -> None:
        self._local = local
        self._ps = producer_state
        # sorted: (last offset = ABORT marker offset, producer id, first offset, LSO)
        self.entries: list[tuple[int, int, int, int]] = []

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def load(self, present: set[str] | None = None) -> None:
        """Read every segment's .txnindex (``present``: the directory listing, to skip absent files)."""
        out = []
        for seg in self._local.segments:
            if present is not None and os.path.basename(seg.txnindex_path) not in present:
                continue  # no aborted transactions in this segment (the listing at load says so)
            for pid, first, last, lso in TxnIndex.read(seg.txnindex_path):
                out.append((last, pid, first, lso))
        out.sort()
        self.entries = out

    def clear(self) -> None:
        self.entries = []

    def drop_from(self, offset: int) -> None:
        """Forget aborted transactions whose marker is at or after ``offset`` (and rewrite their
        .txnindex)."""
        i = bisect_left(self.entries, (offset,))
        if i == len(self.entries):
            return
        gone = self.entries[i:]
        del self.entries[i:]
        local = self._local
        for si in {local.segment_index_for(e[0]) for e in gone}:
            if 0 <= si < len(local.segments):
                self.rewrite_index(si)

    def drop_before(self, offset: int) -> None:
        """Forget aborted transactions whose marker is below ``offset`` (their segments were deleted)."""
        j = bisect_left(self.entries, (offset,))
        if j:
            del self.entries[:j]

    def replace_range(self, lo_offset: int, hi_offset: int, entries: list[tuple[int, int, int, int]]) -> None:
        """The markers in [``lo_offset``, ``hi_offset``) are now ``entries`` ((producer id, first, last, LSO),
        a cleaned segment's .txnindex)."""
        lo = bisect_left(self.entries, (lo_offset,))
        hi = bisect_left(self.entries, (hi_offset,))
        self.entries[lo:hi] = sorted((last, pid, first, lso) for pid, first, last, lso in entries)

    def rewrite_index(self, si: int) -> None:
        """Rewrite segment ``si``'s .txnindex from memory."""
        local = self._local
        seg = local.segments[si]
        lo = seg.base_offset
        hi = local.bases[si + 1] if si + 1 < len(local.bases) else None
        entries = [
            (pid, first, last, lso)
            for last, pid, first, lso in self.entries
            if last >= lo and (hi is None or last < hi)
        ]
        TxnIndex.rewrite(seg.txnindex_path, entries)

    def on_marker(self, pid: int, epoch: int, ts: int, offset: int, ctype: int, persist: bool = True) -> None:
        """A COMMIT/ABORT marker at ``offset``: record an aborted transaction, end the producer's
        transaction."""
        ps = self._ps
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
            insort(self.entries, (offset, pid, first, lso))
            if persist:
                seg = self._local.segments[self._local.segment_index_for(offset)]
                try:
                    TxnIndex.append(seg.txnindex_path, pid, first, offset, lso)
                except OSError as err:
                    raise StorageError(f"cannot write {seg.txnindex_path}: {err}") from err
        ps.on_control(pid, epoch, ts)

    def collect(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of aborted transactions with marker >= ``start`` that began before
        ``end`` (Kafka's collectAbortedTransactions)."""
        ab = self.entries
        i = bisect_left(ab, (start,))
        return [(pid, first) for _last, pid, first, _lso in ab[i:] if first < end]
