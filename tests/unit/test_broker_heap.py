"""The broker process's heap thresholds (``moldau.broker.heap``): a freed large buffer stays mapped for the
next request's frame instead of being given back and faulted in again. Each case runs in its own interpreter
(``mallopt`` is process-wide)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")

# Page faults while 1 MB of request-sized buffers (5 x 200 KiB) is allocated and freed 20 times, after a
# 256 KiB buffer was: glibc's default mmaps that one, and freeing it sets its thresholds to 256 KiB (mmap)
# and 512 KiB (trim), so each round's 1 MB freed at the top of the heap is trimmed and faulted in again.
PROBE = """
import resource, sys
from moldau.broker.heap import tune_heap
tuned = tune_heap() if sys.argv[1] == "tune" else False
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
x = bytearray(256 * 1024); del x
before = faults()
for _ in range(20):
    bs = [bytearray(200 * 1024) for _ in range(5)]
    del bs
print(tuned, faults() - before)
"""


def _probe(mode: str, **env: str) -> tuple[str, int]:
    e = {k: v for k, v in os.environ.items() if not (k.startswith("MALLOC_") or k == "GLIBC_TUNABLES")}
    e.update(env, PYTHONPATH=os.path.abspath(SRC))
    out = subprocess.run([sys.executable, "-c", PROBE, mode], env=e, capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    return out[0], int(out[1])


def test_tuned_heap_keeps_freed_frames_mapped() -> None:
    tuned, faults = _probe("tune")
    if tuned != "True":
        pytest.skip("not glibc")
    _, untuned = _probe("none")
    round_pages = 5 * 200 * 1024 // os.sysconf("SC_PAGE_SIZE")
    if untuned < 10 * round_pages:
        pytest.skip(f"this malloc does not trim each round ({untuned} page faults untuned)")
    assert faults < 3 * round_pages, f"{faults} page faults on a tuned heap ({untuned} untuned)"


def test_operator_settings_win() -> None:
    assert _probe("tune", MOLDAU_MALLOC_TUNE="0")[0] == "False"
    assert _probe("tune", MALLOC_TRIM_THRESHOLD_="131072")[0] == "False"
    assert _probe("tune", GLIBC_TUNABLES="glibc.malloc.trim_threshold=131072")[0] == "False"
