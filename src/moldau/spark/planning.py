"""Pure planning helpers: offset JSON, splitting ranges over tasks, rate limits (no Spark, no I/O)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["OffsetRange", "json_to_offsets", "offsets_to_json", "rate_limit", "split_ranges", "total_rows"]

TP = tuple[str, int]


@dataclass(slots=True, frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int  # inclusive
    end: int    # exclusive

    @property
    def size(self) -> int:
        return self.end - self.start


def offsets_to_json(offsets: dict[TP, int]) -> dict[str, dict[str, int]]:
    """{(topic, partition): offset} -> Spark's offset JSON shape {"topic": {"0": 23}}, in a fixed order
    (topics by name, partitions by number) so equal offsets always give the same JSON text."""
    out: dict[str, dict[str, int]] = {}
    for (t, p) in sorted(offsets):
        out.setdefault(t, {})[str(p)] = int(offsets[(t, p)])
    return out


def json_to_offsets(data: Any) -> dict[TP, int]:
    if not data:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"offsets must be an object of topic -> {{partition: offset}}, got {data!r}")
    out: dict[TP, int] = {}
    for t, parts in data.items():
        for p, o in parts.items():
            out[(t, int(p))] = int(o)
    return out


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None,
                 max_records_per_partition: int | None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator: with fewer ranges than ``min_partitions``, split the large ones
    in proportion to their size; then cut every range to at most ``max_records_per_partition`` records.
    Empty ranges are dropped."""
    rs = [r for r in ranges if r.size > 0]
    if min_partitions is not None and len(rs) < min_partitions:
        total = sum(r.size for r in rs)
        split: list[OffsetRange] = []
        for r in rs:
            parts = max(round(r.size / total * min_partitions), 1) if total else 1
            split.extend(_even(r, parts))
        rs = [r for r in split if r.size > 0]
    if max_records_per_partition is not None:
        out: list[OffsetRange] = []
        for r in rs:
            parts = -(-r.size // max_records_per_partition)
            out.extend(_even(r, max(parts, 1)))
        rs = [r for r in out if r.size > 0]
    return rs


def _even(r: OffsetRange, parts: int) -> list[OffsetRange]:
    out = []
    remaining = r.size
    start = r.start
    for i in range(parts):
        this = remaining // (parts - i)  # the last parts take the round-off
        remaining -= this
        end = min(start + this, r.end)
        out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def total_rows(start: dict[TP, int], end: dict[TP, int]) -> int:
    return sum(max(e - start.get(tp, e), 0) for tp, e in end.items())


def rate_limit(start: dict[TP, int], end: dict[TP, int], limit: int) -> dict[TP, int]:
    """Cap the offsets of ``end`` so that at most ``limit`` records lie between ``start`` and the result.

    Every partition gets a share in proportion to what it has available (rounded down), and the round-off
    goes to the partitions with the largest remainders (ties by topic/partition), so the total is exactly
    ``min(limit, available)`` and the same inputs always give the same offsets."""
    avail = {tp: max(e - start.get(tp, e), 0) for tp, e in end.items()}
    total = sum(avail.values())
    if total <= limit:
        return dict(end)
    shares: dict[TP, int] = {}
    rema: list[tuple[float, TP]] = []
    used = 0
    for tp in sorted(avail):
        exact = avail[tp] * limit / total
        s = min(int(exact), avail[tp])
        shares[tp] = s
        used += s
        rema.append((exact - s, tp))
    left = limit - used
    for _frac, tp in sorted(rema, key=lambda x: (-x[0], x[1])):
        if left <= 0:
            break
        if shares[tp] < avail[tp]:
            shares[tp] += 1
            left -= 1
    return {tp: (start[tp] + shares[tp] if tp in start else e) for tp, e in end.items()}
