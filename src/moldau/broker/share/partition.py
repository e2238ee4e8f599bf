"""The share-partition (KIP-932): the delivery state of one (share group, topic partition) on its leader.

The in-flight records are the offsets from the share-partition start offset (SPSO) up to the end offset
(SPEO, the next offset not yet read from the log); each is

    AVAILABLE --acquire--> ACQUIRED --accept--> ACKNOWLEDGED
        ^                     |  \\--reject / gap--> ARCHIVED
        |                     |
        +--release / lock expiry (delivery count < limit)
                              \\--release / lock expiry at the delivery limit--> ARCHIVED

An acquisition gives the record to one member for ``share.record.lock.duration.ms`` on the broker's clock
and counts one delivery; Renew (ShareAcknowledge/ShareFetch v2) restarts the lock. The SPSO moves past
every leading ACKNOWLEDGED / ARCHIVED offset, so the in-flight window stays ``[SPSO, SPEO)``. At most
``group.share.partition.max.record.locks`` offsets are in flight. Offsets a compacted log no longer has are
acquired like others and acknowledged by the client as gaps. With ``share.isolation.level=read_committed``
reads stop at the last stable offset, and records of aborted transactions and control records are archived
without being delivered.

The state (SPSO and the non-acquired in-flight states with their delivery counts; acquired records count as
AVAILABLE) is written through the persister after every change that is not an acquisition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from moldau.protocol.errors import ErrorCode
from moldau.protocol.records.batch import CONTROL_FLAG, TRANSACTIONAL_FLAG, control_type, split_batches
from moldau.protocol.share_state import StateBatch

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4


@dataclass(slots=True)
class InFlight:
    state: int
    count: int = 0
    member: str | None = None
    expiry_ms: int = 0


@dataclass(slots=True)
class Acquired:
    chunks: list[Any]  # whole batches holding the acquired offsets, in offset order
    ranges: list[tuple[int, int, int]]  # (first, last, delivery count)

    @property
    def count(self) -> int:
        return sum(last - first + 1 for first, last, _ in self.ranges)


class SharePartition:
    def __init__(self, group_id: str, topic: str, partition: int, topic_id: Any) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.spso = 0
        self.speo = 0
        self.records: dict[int, InFlight] = {}
        self.initialized = False
        self.state_epoch = 0
        self.dirty = False  # a change to persist

    # --------------------------------------------------------------------------------------- state load
    def load(self, start_offset: int, batches: list[StateBatch], state_epoch: int) -> None:
        self.spso = start_offset
        self.state_epoch = state_epoch
        self.records = {}
        end = start_offset
        for b in batches:
            # bounded by the coordinator's MAX_STATE_SPAN (state written by this broker spans far less)
            for off in range(
                max(b.first_offset, start_offset), min(b.last_offset, start_offset + 1_000_000) + 1
            ):
                st = (
                    b.delivery_state if b.delivery_state in (AVAILABLE, ACKNOWLEDGED, ARCHIVED) else AVAILABLE
                )
                self.records[off] = InFlight(st, b.delivery_count)
            end = max(end, min(b.last_offset, start_offset + 1_000_000) + 1)
        # offsets between the SPSO and the last batch that the state does not name were never delivered
        for off in range(start_offset, end):
            self.records.setdefault(off, InFlight(AVAILABLE, 0))
        self.speo = end
        self.initialized = True
        self._advance()

    def state_batches(self) -> list[StateBatch]:
        """The in-flight states as contiguous runs (acquired records as AVAILABLE)."""
        out: list[StateBatch] = []
        for off in range(self.spso, self.speo):
            r = self.records.get(off)
            if r is None:
                continue
            st = AVAILABLE if r.state == ACQUIRED else r.state
            if (
                out
                and out[-1].last_offset == off - 1
                and out[-1].delivery_state == st
                and out[-1].delivery_count == r.count
            ):
                out[-1].last_offset = off
            else:
                out.append(StateBatch(off, off, st, r.count))
        return out

    def counts(self) -> dict[str, int]:
        c = {"available": 0, "acquired": 0, "acknowledged": 0, "archived": 0}
        names = {
            AVAILABLE: "available",
            ACQUIRED: "acquired",
            ACKNOWLEDGED: "acknowledged",
            ARCHIVED: "archived",
        }
        for r in self.records.values():
            c[names[r.state]] += 1
        return c

    # --------------------------------------------------------------------------------------- helpers
    def _advance(self) -> None:
        while self.spso < self.speo:
            r = self.records.get(self.spso)
            if r is None or r.state in (ACKNOWLEDGED, ARCHIVED):
                self.records.pop(self.spso, None)
                self.spso += 1
                continue
            break

    def _give_back(self, r: InFlight, limit: int) -> None:
        r.state = ARCHIVED if r.count >= limit else AVAILABLE
        r.member = None
        r.expiry_ms = 0

    def expire_locks(self, now_ms: int, limit: int) -> bool:
        """Acquired records whose lock expired go back (or to ARCHIVED at the limit). True if any did."""
        return self._give_back_where(lambda r: r.expiry_ms <= now_ms, limit)

    def _give_back_where(self, pred: Any, limit: int) -> bool:
        """Acquired records for which ``pred`` holds go back; True if any did."""
        changed = False
        for r in self.records.values():
            if r.state == ACQUIRED and pred(r):
                self._give_back(r, limit)
                changed = True
        if changed:
            self._advance()
            self.dirty = True
        return changed

    def next_expiry(self) -> int | None:
        ts = [r.expiry_ms for r in self.records.values() if r.state == ACQUIRED]
        return min(ts) if ts else None

    def has_available(self) -> bool:
        return any(r.state == AVAILABLE for r in self.records.values())

    def release_member(self, member: str, limit: int) -> bool:
        """A member's acquired records go back (it left, or its share session closed)."""
        return self._give_back_where(lambda r: r.member == member, limit)

    # --------------------------------------------------------------------------------------- acquire
    def acquire(
        self,
        member: str,
        max_records: int,
        now_ms: int,
        lock_ms: int,
        max_locks: int,
        read: Any,
        isolation_level: int,
        whole_batches: bool = False,
        log_start_offset: int = 0,
    ) -> Acquired:
        """Acquire up to ``max_records`` for ``member``: released records first, then new ones from the
        log. ``read(offset) -> (chunks, aborted)`` reads whole batches from ``offset``. ``whole_batches``
        (ShareFetch's batch-optimized acquire mode): a new batch is acquired to its end, past
        ``max_records`` (Kafka: "this limit can be exceeded for alignment of batch boundaries").
        A record to redeliver that ``read`` does not return is archived only when it is below
        ``log_start_offset`` (retention removed it); above it, the log cannot serve it yet (a new leader
        whose high watermark has not reached it) and it stays available for a later acquire."""
        want = max_records
        picked: list[int] = []
        for off in range(self.spso, self.speo):
            if want <= 0:
                break
            r = self.records.get(off)
            if r is not None and r.state == AVAILABLE:
                picked.append(off)
                want -= 1
        batches: dict[int, Any] = {}  # base offset -> batch bytes
        archived_new = False
        # bytes of the redelivered offsets
        i = 0
        while i < len(picked):
            start = picked[i]
            chunks, _ = read(start)
            covered = -1
            for base, last, mv, _h in _batches(chunks):
                if last < start:
                    continue
                batches.setdefault(base, mv)
                covered = last
            if covered < start:
                if start < log_start_offset:  # the log no longer has it (retention): archive
                    self.records[start].state = ARCHIVED
                    archived_new = True
                picked.pop(i)  # else not readable yet (beyond the high watermark): stays available
                continue
            while i < len(picked) and picked[i] <= covered:
                i += 1
        # new records from the log
        if want > 0 and self.speo - self.spso < max_locks:
            chunks, aborted = read(self.speo)
            aborted_pids: set[int] = set()
            pending = sorted(aborted or [], key=lambda a: a[1])
            for base, last, mv, h in _batches(chunks):
                if last < self.speo:
                    continue
                if want <= 0 or self.speo - self.spso >= max_locks:
                    break
                attrs = h.attributes
                if isolation_level == 1:
                    while pending and pending[0][1] <= last:
                        aborted_pids.add(pending.pop(0)[0])
                if attrs & CONTROL_FLAG or (
                    isolation_level == 1 and attrs & TRANSACTIONAL_FLAG and h.producer_id in aborted_pids
                ):
                    if attrs & CONTROL_FLAG and control_type(mv, 0) == 0:
                        aborted_pids.discard(h.producer_id)
                    for off in range(max(base, self.speo), last + 1):
                        self.records[off] = InFlight(ARCHIVED)
                    self.speo = last + 1
                    archived_new = True
                    continue
                first = max(base, self.speo)
                end = last if whole_batches else min(last, first + want - 1)
                for off in range(first, end + 1):
                    self.records[off] = InFlight(AVAILABLE)
                    picked.append(off)
                want -= end - first + 1
                self.speo = end + 1
                batches.setdefault(base, mv)
        ranges: list[tuple[int, int, int]] = []
        for off in sorted(picked):
            r = self.records[off]
            r.state = ACQUIRED
            r.count += 1
            r.member = member
            r.expiry_ms = now_ms + lock_ms
            if ranges and ranges[-1][1] == off - 1 and ranges[-1][2] == r.count:
                ranges[-1] = (ranges[-1][0], off, r.count)
            else:
                ranges.append((off, off, r.count))
        if archived_new:
            self._advance()
            self.dirty = True
        used = [
            mv
            for base, mv in sorted(batches.items())
            if any(f <= base + _last_delta(mv) and base <= la for f, la, _ in ranges)
        ]
        return Acquired(used, ranges)

    # --------------------------------------------------------------------------------------- acknowledge
    def acknowledge(
        self, member: str, first: int, last: int, types: list[int], now_ms: int, lock_ms: int, limit: int
    ) -> int:
        """Apply one acknowledgement batch of ``member``; an error code (INVALID_RECORD_STATE if any offset
        is not acquired by the member; nothing is changed then)."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            return ErrorCode.INVALID_REQUEST
        if any(t not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) for t in types):
            return ErrorCode.INVALID_REQUEST
        for off in range(first, last + 1):
            r = self.records.get(off)
            if r is None or r.state != ACQUIRED or r.member != member:
                return ErrorCode.INVALID_RECORD_STATE
        for k, off in enumerate(range(first, last + 1)):
            t = types[0] if len(types) == 1 else types[k]
            r = self.records[off]
            if t == ACCEPT:
                r.state, r.member = ACKNOWLEDGED, None
            elif t in (REJECT, GAP):
                r.state, r.member = ARCHIVED, None
            elif t == RELEASE:
                self._give_back(r, limit)
            else:  # RENEW
                r.expiry_ms = now_ms + lock_ms
                continue
        self._advance()
        self.dirty = True
        return ErrorCode.NONE


def _last_delta(mv: Any) -> int:
    import struct

    return int(struct.unpack_from(">i", mv, 23)[0])


def _batches(chunks: Any) -> list[tuple[int, int, Any, Any]]:
    """(base offset, last offset, batch bytes, header) of every whole batch in ``chunks``."""
    out = []
    for chunk in chunks or []:
        mv = memoryview(chunk)
        for pos, h in split_batches(mv, allow_truncated=True):
            size = h.batch_length + 12
            out.append((h.base_offset, h.base_offset + h.last_offset_delta, mv[pos : pos + size], h))
    return out
