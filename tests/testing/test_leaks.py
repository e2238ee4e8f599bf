"""Consecutive EmbeddedBroker start/stop cycles leave nothing behind: no thread, file descriptor, child
process or RAM directory more than before, and resident memory does not grow with the cycles. The
measurement is bench/embedded_broker.py's (50 cycles per mode there); the default run does fewer cycles,
``MOLDAU_TEST_LEAK_CYCLES=50`` as many as the bench."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import pytest

from moldau.broker.memory import ram_parent

_BENCH = Path(__file__).resolve().parents[2] / "bench" / "embedded_broker.py"
_spec = importlib.util.spec_from_file_location("embedded_broker_bench", _BENCH)
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # dataclasses look their module up
_spec.loader.exec_module(bench)

# default cycles: a thread cycle takes under a second, a process cycle a few (its interpreter starts)
DEFAULT_CYCLES = {"thread": 20, "process": 5}
# resident memory may move by allocator noise; a leak of one broker's objects per cycle would pass this
# within a few cycles (a broker holds several MiB: its coordinators, log manager, caches, buffers)
RSS_GROWTH_MIB = 20.0


@pytest.mark.parametrize("mode", bench.MODES)
def test_cycles_leak_nothing(mode: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # the RAM dirs of this test's brokers under a directory of its own: others' brokers do not count
    ram = tempfile.mkdtemp(prefix="test-ram-", dir=ram_parent())
    monkeypatch.setenv("MOLDAU_MEMORY_DIR", ram)
    shape = mode.split("-")[0]
    cycles = int(os.environ.get("MOLDAU_TEST_LEAK_CYCLES") or DEFAULT_CYCLES[shape])
    st = bench.measure(mode, cycles)
    assert st.threads_after == st.threads_before, st
    assert st.fds_after == st.fds_before, st
    assert st.children_after == st.children_before, st
    assert st.ram_dirs_after == st.ram_dirs_before, st
    assert st.rss_growth_mib < RSS_GROWTH_MIB, st
    os.rmdir(ram)  # empty: every broker removed its own
