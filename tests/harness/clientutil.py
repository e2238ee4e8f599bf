"""Helpers shared by the client tests."""

from __future__ import annotations

import os
import random
import time
from typing import Any, Callable

# Group settings that keep rebalances quick on both brokers (tansu holds a first JoinGroup for about
# half the session timeout).
FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"}

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def awkward_records(
    n: int, seed: int = 0
) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    """(key, value, headers) triples: null/empty/binary keys and values, large values, odd headers."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        kind = i % 7
        if kind == 0:
            key, value = None, b"plain-%d" % i
        elif kind == 1:
            key, value = b"", b""
        elif kind == 2:
            key, value = os.urandom(rnd.randint(1, 40)), None
        elif kind == 3:
            key, value = b"k%d" % i, bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 300)))
        elif kind == 4:
            key, value = b"big", b"x" * 70_000 + bytes([i % 256])
        elif kind == 5:
            key, value = "unicodé-%d".encode(), "välue ✓".encode()
        else:
            key, value = b"\x00\xff" * 3, b"\x00" * 17
        headers: list[tuple[str, bytes | None]] = []
        if i % 3 == 0:
            headers = [("h", b"1"), ("h", b"2"), ("empty", b""), ("null", None), ("ünï", "✓".encode())]
        out.append((key, value, headers))
    return out


def wait_until(
    cond: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05, what: str = "condition"
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
