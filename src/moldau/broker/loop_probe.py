"""Event-loop stall instrumentation: how late the loop runs a timer, and how long the cyclic GC pauses it.

Turned on with the environment variable ``MOLDAU_LOOP_PROBE`` (a threshold in milliseconds, e.g.
``MOLDAU_LOOP_PROBE=2``). A task sleeps ``interval`` seconds again and again and measures how much later than
asked it wakes up (the loop's lag: a callback that ran long, a GC pause, the process not scheduled); a
``gc.callbacks`` hook times every collection by generation. Every stall above the threshold is logged with
the GC time inside it, and a summary (lag and GC pause percentiles) every ``report_every`` seconds and at
the end. Off by default: the timer costs a wake-up per interval. With ``PYTHONASYNCIODEBUG=1`` as well, the
loop's slow-callback warning uses the same threshold, which names the callbacks that ran that long.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from typing import Any

log = logging.getLogger(__name__)

ENV = "MOLDAU_LOOP_PROBE"


def _runqueue_wait_s() -> float:
    """Seconds this thread has waited on a run queue for a CPU (Linux schedstat), 0 elsewhere."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * (len(sorted_values) - 1) + 0.5))]


class LoopProbe:
    """Loop lag and GC pause samples (seconds), kept until the next report."""

    def __init__(self, threshold_s: float, interval_s: float = 0.001, report_every_s: float = 10.0) -> None:
        self.threshold_s = threshold_s
        self.interval_s = interval_s
        self.report_every_s = report_every_s
        self.lags: list[float] = []
        self.busy: list[float] = []  # CPU time of the loop's thread per tick
        self.gc_pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self.stalls = 0
        self.stall_s = 0.0
        self.stall_waiting_s = 0.0  # of stall_s: the loop's thread was runnable but had no CPU
        self.stall_cpu_s = 0.0  # of stall_s: the loop's thread ran (callbacks, GC); the rest it was blocked
        self.gc_total_s = 0.0  # all GC time since the start: a stall's share of it is the difference
        self._gc_start = 0.0
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------------------------------------- gc
    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif self._gc_start:
            d = time.perf_counter() - self._gc_start
            self._gc_start = 0.0
            self.gc_total_s += d
            self.gc_pauses.setdefault(int(info.get("generation", 0)), []).append(d)

    # ----------------------------------------------------------------------------------------------- loop
    def start(self) -> None:
        gc.callbacks.append(self._on_gc)
        log.warning("loop probe on: stalls over %.1f ms are logged; %d objects frozen out of the cyclic GC",
                    self.threshold_s * 1000, gc.get_freeze_count())
        loop = asyncio.get_running_loop()
        if loop.get_debug():  # PYTHONASYNCIODEBUG=1: the loop names each callback over the threshold
            loop.slow_callback_duration = self.threshold_s
        self._task = loop.create_task(self._run())

    async def stop(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self.report()

    async def _run(self) -> None:
        next_report = time.perf_counter() + self.report_every_s
        while True:
            gc_before = self.gc_total_s
            t0 = time.perf_counter()
            c0 = time.thread_time()
            w0 = _runqueue_wait_s()
            await asyncio.sleep(self.interval_s)
            t1 = time.perf_counter()
            lag = max(t1 - t0 - self.interval_s, 0.0)
            self.lags.append(lag)
            # the loop's own work between two ticks: what the broker holds the loop for, whatever the machine
            self.busy.append(time.thread_time() - c0)
            if lag > self.threshold_s:
                # CPU time of the loop's thread against the wall time: a long callback uses the CPU all along;
                # a process that was waiting for a CPU (a loaded machine) or blocked in a system call does not
                # and the time it waited for a CPU tells the two apart
                cpu = time.thread_time() - c0
                waited = _runqueue_wait_s() - w0
                self.stalls += 1
                self.stall_s += lag
                self.stall_waiting_s += waited
                self.stall_cpu_s += cpu
                log.warning("event loop stalled %.1f ms (loop thread on CPU %.1f ms, waiting for a CPU "
                            "%.1f ms, GC %.1f ms)", lag * 1000, cpu * 1000, waited * 1000,
                            (self.gc_total_s - gc_before) * 1000)
            if t1 >= next_report:
                self.report()
                next_report = t1 + self.report_every_s

    def summary(self) -> dict[str, Any]:
        lags = sorted(self.lags)
        out: dict[str, Any] = {
            "samples": len(lags), "stalls": self.stalls, "stall_ms": self.stall_s * 1000,
            "stall_waiting_for_cpu_ms": self.stall_waiting_s * 1000,
            "stall_on_cpu_ms": self.stall_cpu_s * 1000,
            "lag_ms": {k: _pct(lags, q) * 1000 for k, q in (("p50", .5), ("p99", .99), ("p99.9", .999))},
            "lag_max_ms": (lags[-1] * 1000) if lags else 0.0}
        busy = sorted(self.busy)
        out["busy_per_tick_ms"] = {k: _pct(busy, q) * 1000
                                   for k, q in (("p99", .99), ("p99.9", .999), ("max", 1.0))}
        for gen, pauses in self.gc_pauses.items():
            p = sorted(pauses)
            out[f"gc{gen}"] = {"count": len(p), "total_ms": sum(p) * 1000, "p99_ms": _pct(p, .99) * 1000,
                               "max_ms": (p[-1] * 1000) if p else 0.0}
        return out

    def report(self) -> None:
        s = self.summary()
        log.warning("loop probe: %s", s)
        self.lags.clear()
        self.busy.clear()
        self.stalls = 0
        self.stall_s = self.stall_waiting_s = self.stall_cpu_s = 0.0
        for v in self.gc_pauses.values():
            v.clear()


def from_env() -> LoopProbe | None:
    """A probe when ``MOLDAU_LOOP_PROBE`` holds a threshold in ms, else None."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    try:
        threshold_ms = float(raw)
    except ValueError:
        log.warning("%s=%r is not a number of milliseconds: no loop probe", ENV, raw)
        return None
    return LoopProbe(threshold_ms / 1000)
