"""Samples the console takes itself (no Prometheus needed) for the throughput and lag plots.

Every ``interval`` seconds: the end offset and size of every partition (from the cluster snapshot: a few
requests however many partitions), and the committed offsets of consumer groups (one OffsetFetch per group;
at most ``max_groups`` per round, the groups whose pages were opened lately first, then the others in turn).
Series keep ``window`` seconds of points.

Derived series: per topic records/s in (end offsets), bytes/s in (log sizes, when the broker answers
DescribeLogDirs), records/s out (committed offsets of the groups reading it, summed) and bytes/s out
(records out times the topic's average record size on disk: an estimate, the protocol has no counter of
bytes fetched). Per group: total lag, and lag per topic.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from moldau.client.types import TopicPartition

from .cluster import ClusterView

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Series:
    window: float
    points: deque[tuple[float, float]] = field(default_factory=deque)

    def add(self, t: float, v: float) -> None:
        self.points.append((t, v))
        cutoff = t - self.window
        while self.points and self.points[0][0] < cutoff:
            self.points.popleft()

    def columns(self) -> list[list[float]]:
        return [[p[0] for p in self.points], [p[1] for p in self.points]]


class Sampler:
    def __init__(
        self, view: ClusterView, *, interval: float = 5.0, window: float = 3600.0, max_groups: int = 100
    ) -> None:
        self.view = view
        self.interval = interval
        self.window = window
        self.max_groups = max_groups
        self.series: dict[str, Series] = {}
        self._prev_topic: dict[str, tuple[float, int, int | None]] = {}  # topic -> (t, end sum, size)
        self._prev_group: dict[str, tuple[float, dict[TopicPartition, int]]] = {}
        self._viewed: dict[str, float] = {}
        self._rotation = 0
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0
        self.last_error: str | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="moldau-console-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                log.debug("sampler stopped", exc_info=True)
            self._task = None

    def viewed(self, group_id: str) -> None:
        """A group page was opened: sample it from now on with priority."""
        self._viewed[group_id] = time.monotonic()

    def get(self, name: str) -> Series:
        s = self.series.get(name)
        if s is None:
            s = self.series[name] = Series(self.window)
        return s

    def columns(self, *names: str) -> list[list[float]]:
        """uPlot data: shared x (seconds since the epoch) and one y column per series, aligned on x."""
        xs = sorted({t for n in names for t, _ in self.series.get(n, Series(0)).points})
        cols: list[list[Any]] = [xs]
        for n in names:
            by_t = dict(self.series[n].points) if n in self.series else {}
            cols.append([by_t.get(t) for t in xs])
        return cols

    async def _run(self) -> None:
        while True:
            t0 = time.monotonic()
            try:
                await self.sample_once()
                self.last_error = None
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.last_error = str(exc) or type(exc).__name__
                log.debug("console sampling failed", exc_info=True)
            await asyncio.sleep(max(self.interval - (time.monotonic() - t0), 0.05))

    async def sample_once(self) -> None:
        now = time.time()
        snap = await self.view.snapshot(max_age=self.interval / 2)
        ends = snap.end_offsets()
        for t in snap.topics.values():
            end_sum = t.end_sum
            size = t.size
            prev = self._prev_topic.get(t.name)
            if prev is not None and now > prev[0]:
                dt = now - prev[0]
                self.get(f"topic:{t.name}:records_in").add(now, max(end_sum - prev[1], 0) / dt)
                if size is not None and prev[2] is not None:
                    self.get(f"topic:{t.name}:bytes_in").add(now, max(size - prev[2], 0) / dt)
            self._prev_topic[t.name] = (now, end_sum, size)
        await self._sample_groups(now, ends, snap)
        self.rounds += 1

    def _pick_groups(self, all_groups: list[str]) -> list[str]:
        recent = time.monotonic() - max(self.window, 600)
        viewed = [
            g
            for g, t in sorted(self._viewed.items(), key=lambda kv: -kv[1])
            if t >= recent and g in all_groups
        ]
        picked = viewed[: self.max_groups]
        rest = [g for g in all_groups if g not in set(picked)]
        room = self.max_groups - len(picked)
        if rest and room > 0:
            start = self._rotation % len(rest)
            chosen = (rest[start:] + rest[:start])[:room]
            self._rotation += room
            picked += chosen
        return picked

    async def _sample_groups(self, now: float, ends: dict[TopicPartition, int], snap: Any) -> None:
        listing = await self.view.list_groups()
        groups = [g.group_id for g in listing if g.protocol_type in ("consumer", "", "share")]
        share = {g.group_id for g in listing if g.protocol_type == "share"}
        consumed: dict[str, float] = {}
        for gid in self._pick_groups(groups):
            total = 0
            per_topic: dict[str, int] = {}
            if gid in share:  # the lag DescribeShareGroupOffsets gives; SPSOs are not a consumed rate
                try:
                    share_offsets = await self.view.share_offsets(gid)
                except Exception as exc:  # noqa: BLE001 - a group deleted meanwhile
                    log.debug("offsets of share group %s: %s", gid, exc)
                    continue
                for tp, so in share_offsets.items():
                    if so.lag >= 0:
                        total += so.lag
                        per_topic[tp.topic] = per_topic.get(tp.topic, 0) + so.lag
                self._add_lag(now, gid, total, per_topic)
                continue
            try:
                committed = await self.view.committed(gid)
            except Exception as exc:  # noqa: BLE001 - a group deleted meanwhile
                log.debug("offsets of group %s: %s", gid, exc)
                continue
            offsets = {tp: om.offset for tp, om in committed.items()}
            for tp, off in offsets.items():
                end = ends.get(tp)
                if end is None or end < 0:
                    continue
                lag = max(end - off, 0)
                total += lag
                per_topic[tp.topic] = per_topic.get(tp.topic, 0) + lag
            self._add_lag(now, gid, total, per_topic)
            prev = self._prev_group.get(gid)
            if prev is not None and now > prev[0]:
                dt = now - prev[0]
                for tp, off in offsets.items():
                    before = prev[1].get(tp)
                    if before is not None and off > before:
                        consumed[tp.topic] = consumed.get(tp.topic, 0.0) + (off - before) / dt
            self._prev_group[gid] = (now, offsets)
        for name, t in snap.topics.items():
            rate = consumed.get(name, 0.0)
            self.get(f"topic:{name}:records_out").add(now, rate)
            if t.size is not None and t.records > 0:
                self.get(f"topic:{name}:bytes_out").add(now, rate * t.size / t.records)

    def _add_lag(self, now: float, gid: str, total: int, per_topic: dict[str, int]) -> None:
        self.get(f"group:{gid}:lag").add(now, total)
        for topic, lag in per_topic.items():
            self.get(f"group:{gid}:lag:{topic}").add(now, lag)

    def latest(self, name: str) -> float | None:
        s = self.series.get(name)
        return s.points[-1][1] if s is not None and s.points else None

    def totals(self) -> dict[str, float]:
        out = {"records_in": 0.0, "records_out": 0.0, "bytes_in": 0.0, "bytes_out": 0.0}
        for name, s in self.series.items():
            if name.startswith("topic:") and s.points:
                kind = name.rsplit(":", 1)[1]
                if kind in out:
                    out[kind] += s.points[-1][1]
        return out
