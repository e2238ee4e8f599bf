"""The broker's clock: ``Clock`` (what components and handlers may call) and ``SystemClock`` (the real one;
tests inject their own). A leaf module, so that every component can name the type."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall clock in ms (timestamps) and seconds, and a monotonic clock in seconds (timeouts)."""

    def time_ms(self) -> int: ...
    def time(self) -> float: ...
    def monotonic(self) -> float: ...


class SystemClock:
    """The real ``Clock``."""

    __slots__ = ()

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def time(self) -> float:
        return time.time()

    def __call__(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()
