"""``TailCache``: the replication tail of a leader's log, in memory.

With followers (the replica manager ``configure``s it on the partitions this broker leads with more than one
replica, and ``release``s what the ISR has), the bytes of the latest appends stay in memory (views of the
produce requests' buffers, which nothing modifies after the append) until the followers have them, so their
fetches of the log's tail are answered from memory, without reading the file back (Kafka's
followers get the same bytes by sendfile from the page cache). Only appends to the active segment are kept;
a roll, a truncation or closing the log clears it.

When the followers' fetches are answered with ``sendfile`` (``configure(keep_large=False)``: the replica
manager's choice for a plaintext inter-broker listener), an append over ``TAIL_REGION_MIN`` bytes is kept
as its batches' positions in the segment file only: those reads go out as file regions, which need no bytes,
and holding the produce request's buffer (about 1 MB each for librdkafka's batches of 1 KiB records) until
every follower had it made the leader's heap grow by a fresh, zeroed and faulted-in megabyte per request
(freed buffers left holes of the wrong sizes between the ones still held). A read of such an append without
``regions`` falls back to the file (``None``).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Callable

from .local_log import ReadResult
from .segment import Segment

__all__ = ["TailCache", "TAIL_REGION_MIN"]

# reads with ``regions``: smaller runs of an append are sent from memory (a sendfile and the separate writes
# around it cost more than copying a few KiB)
TAIL_REGION_MIN = 32 * 1024


class TailCache:
    def __init__(self) -> None:
        self.max_bytes = 0  # 0: off
        self.keep_large = True  # False: appends over TAIL_REGION_MIN are kept as file positions only
        # (first offset, next offset, data (None: not kept), [(batch base, batch last offset, size)], segment,
        # position in it, size) per append
        self.entries: deque[tuple[int, int, Any, list[tuple[int, int, int]], Segment, int, int]] = deque()
        self.bytes = 0

    def configure(self, max_bytes: int, keep_large: bool = True) -> None:
        """Start over keeping up to ``max_bytes`` (0: off): the replica manager's call when this broker
        becomes the partition's leader (with followers) or stops leading it. ``keep_large=False``: the bytes
        of appends over ``TAIL_REGION_MIN`` are not kept (module doc)."""
        self.clear()
        self.max_bytes = max_bytes
        self.keep_large = keep_large

    def __bool__(self) -> bool:
        return bool(self.entries)

    def add(self, first: int, nxt: int, data: Any, batches: list[tuple[int, int, int]], seg: Segment,
            position: int) -> None:
        size = len(data)
        tail = self.entries
        if tail and tail[-1][1] != first:
            self.clear()
        if size > self.max_bytes:
            return
        if size > TAIL_REGION_MIN and not self.keep_large:
            data = None
        tail.append((first, nxt, data, batches, seg, position, size))
        self.bytes += size
        while self.bytes > self.max_bytes:
            self.bytes -= tail.popleft()[6]

    def release(self, upto: int) -> None:
        """Drop the cached appends that end at or below ``upto`` (every follower has them)."""
        tail = self.entries
        while tail and tail[0][1] <= upto:
            self.bytes -= tail.popleft()[6]

    def clear(self) -> None:
        self.entries.clear()
        self.bytes = 0

    def read(
        self, active: Segment, offset: int, max_bytes: int, max_offset: int | None, min_one: bool,
        regions: bool, aborted: Callable[[int, int], list[tuple[int, int]]] | None,
    ) -> ReadResult | None:
        """``PartitionLog.read`` from the cache (None when it does not hold ``offset`` up to the log end
        offset, the end of the ``active`` segment): the same whole batches, as views of the cached appends
        (``regions``: runs over ``TAIL_REGION_MIN`` bytes as regions of the active segment's file where the
        appends were written, without reading it; None when an append needed is in an older segment).
        ``aborted``: the log's aborted transactions for (first, last offset + 1), None when it has none."""
        tail = self.entries
        if not tail or offset < tail[0][0] or tail[-1][1] != active.next_offset:
            return None
        chunks: list[Any] = []
        total = 0
        first = last_excl = offset
        done = False
        for _efirst, enext, data, batches, seg, seg_pos, _size in tail:
            if enext <= offset:
                continue
            if (regions and seg is not active) or (data is None and not regions):
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
                if regions and (end - start > TAIL_REGION_MIN or data is None):
                    chunks.append(seg.region(seg_pos + start, end - start))
                else:
                    chunks.append(data[start:end] if end - start < len(data) else data)
            if done or total >= max_bytes:
                break
        if total == 0:
            return ReadResult([], offset, offset, 0)
        found = aborted(first, last_excl) if aborted is not None else None
        return ReadResult(chunks, first, last_excl, total, found or None)
