"""The C heap of the ``moldau broker`` process (glibc's malloc; nothing elsewhere).

``tune_heap`` runs once when ``moldau broker`` starts (not in a process that embeds a broker). A request frame
larger than the connection's receive buffer gets a buffer of its own (``connection``), and librdkafka's
produce requests of 1 KiB records are about 1 MB each. glibc serves such sizes from the heap once it has
freed one (its mmap threshold adapts to the largest freed mapping) and trims the top of the heap whenever
more than twice that is free. With a frame or two alive at a time the heap then shrank after one request and
grew again for the next: a ``brk`` for each and a page fault for every 4 KiB of every frame, each page zeroed
by the kernel first. Whether a broker fell into that cycle depended on the order of its first large
allocations; when it did, it was most of a leader's CPU without replication (bench/README.md,
"cluster_replication.py").

Fixed thresholds (glibc's ``mallopt``) end it: allocations up to ``MMAP_THRESHOLD`` come from the heap, and
its top is trimmed only when more than ``TRIM_THRESHOLD`` is free, so the broker's RSS may stay up to that
much above what it uses after a burst (``replica_manager.give_back_heap`` still returns everything after a
topic deletion or a large creation). Not applied when the environment sets glibc's own knobs
(``MALLOC_*_``, ``GLIBC_TUNABLES``: the operator's choice wins) or ``MOLDAU_MALLOC_TUNE=0``.
"""

from __future__ import annotations

import os
import sys

M_TRIM_THRESHOLD = -1  # mallopt parameters (glibc's malloc.h)
M_MMAP_THRESHOLD = -3
# where glibc's own adaptation ends after freeing a mapping of its largest size (DEFAULT_MMAP_THRESHOLD_MAX on
# 64-bit, and twice that), from the start and without trimming below it
MMAP_THRESHOLD = 32 * 1024 * 1024  # larger allocations are mmapped
TRIM_THRESHOLD = 64 * 1024 * 1024  # free bytes at the top of the heap before it is trimmed


def tune_heap() -> bool:
    """Set the fixed mmap and trim thresholds (module doc); True if glibc took them."""
    env = os.environ
    if env.get("MOLDAU_MALLOC_TUNE", "1") == "0" or "GLIBC_TUNABLES" in env:
        return False
    if any(k.startswith("MALLOC_") and k.endswith("_") for k in env):
        return False
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt thresholds)
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
