"""Time for the group coordinator: a clock plus delayed callbacks, injected so tests never sleep.

    timer.now_ms() -> int
    handle = timer.call_later(delay_ms, fn)   # fn() runs once after delay_ms unless handle.cancel()

``AsyncioTimer`` drives the callbacks from the running event loop; ``ManualTimer`` runs them when a test
calls ``advance(ms)``.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from typing import Callable, Protocol

log = logging.getLogger(__name__)


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Timer(Protocol):
    def now_ms(self) -> int: ...

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle: ...


def _run_safely(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # a timer callback must never kill the loop
        log.exception("group coordinator timer callback failed")


class AsyncioTimer:
    """Callbacks on the event loop; ``now_ms`` from the given clock (default: wall clock)."""

    def __init__(
        self, now_ms: Callable[[], int] | None = None, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._loop = loop

    def now_ms(self) -> int:
        return self._now_ms()

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        loop = self._loop or asyncio.get_running_loop()
        return loop.call_later(max(delay_ms, 0) / 1000.0, _run_safely, fn)


class _ManualHandle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualTimer:
    """A timer for tests: time moves only in ``advance``; due callbacks run in deadline order."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._heap: list[tuple[int, int, _ManualHandle, Callable[[], None]]] = []
        self._seq = 0

    def now_ms(self) -> int:
        return self._now

    def call_later(self, delay_ms: int, fn: Callable[[], None]) -> TimerHandle:
        handle = _ManualHandle()
        self._seq += 1
        heapq.heappush(self._heap, (self._now + max(delay_ms, 0), self._seq, handle, fn))
        return handle

    def pending(self) -> int:
        return sum(1 for _, _, h, _ in self._heap if not h.cancelled)

    def advance(self, ms: int = 0) -> None:
        """Move the clock forward by ``ms``, running every callback that falls due (also those scheduled by
        callbacks, as long as they fall within the window)."""
        target = self._now + ms
        while self._heap and self._heap[0][0] <= target:
            deadline, _, handle, fn = heapq.heappop(self._heap)
            if handle.cancelled:
                continue
            self._now = max(self._now, deadline)
            _run_safely(fn)
        self._now = target
