"""The event-loop stall probe (moldau.broker.loop_probe): stalls, GC pauses, the environment switch."""

from __future__ import annotations

import asyncio
import gc
import logging
import time

import pytest

from moldau.broker.loop_probe import ENV, LoopProbe, from_env


def test_a_blocking_callback_is_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> dict:
        probe = LoopProbe(threshold_s=0.010, interval_s=0.001, report_every_s=3600)
        probe.start()
        await asyncio.sleep(0.01)
        time.sleep(0.1)  # a callback that holds the loop 100 ms, far over the 10 ms threshold
        await asyncio.sleep(0.01)
        c0 = time.thread_time()
        while time.thread_time() - c0 < 0.05:  # and one that computes for 50 ms of CPU time
            pass
        await asyncio.sleep(0.01)
        s = probe.summary()
        await probe.stop()
        return s

    with caplog.at_level(logging.WARNING, logger="moldau.broker.loop_probe"):
        s = asyncio.run(main())
    assert s["stalls"] >= 1
    assert s["lag_max_ms"] >= 50
    assert s["stall_ms"] >= 50
    assert s["busy_per_tick_ms"]["max"] >= 50  # the computing callback's CPU time, in one tick
    assert s["stall_on_cpu_ms"] >= 50
    stalls = [r.getMessage() for r in caplog.records if "event loop stalled" in r.getMessage()]
    assert stalls and "loop thread on CPU" in stalls[0] and "waiting for a CPU" in stalls[0]
    # the final report at stop
    assert any("loop probe: " in r.getMessage() for r in caplog.records)


def test_collections_are_timed_by_generation() -> None:
    async def main() -> dict:
        probe = LoopProbe(threshold_s=1.0, report_every_s=3600)
        probe.start()
        gc.collect(2)
        gc.collect(0)
        s = probe.summary()
        await probe.stop()
        return s

    s = asyncio.run(main())
    assert s["gc2"]["count"] >= 1
    assert s["gc0"]["count"] >= 1
    assert s["gc2"]["max_ms"] > 0


def test_stop_removes_the_gc_hook() -> None:
    async def main() -> LoopProbe:
        probe = LoopProbe(threshold_s=1.0)
        probe.start()
        assert probe._on_gc in gc.callbacks
        await probe.stop()
        return probe

    probe = asyncio.run(main())
    assert probe._on_gc not in gc.callbacks


def test_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert from_env() is None
    monkeypatch.setenv(ENV, "not-a-number")
    assert from_env() is None
    monkeypatch.setenv(ENV, "2.5")
    probe = from_env()
    assert probe is not None and probe.threshold_s == pytest.approx(0.0025)


def test_debug_mode_names_callbacks_over_the_threshold() -> None:
    async def main() -> float:
        probe = LoopProbe(threshold_s=0.004)
        probe.start()
        value = asyncio.get_running_loop().slow_callback_duration
        await probe.stop()
        return value

    assert asyncio.run(main(), debug=True) == pytest.approx(0.004)
