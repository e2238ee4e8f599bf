"""One broker (no ZooKeeper), 20 kill -9 cycles under an idempotent acks=all producer with
``log.flush.interval.messages=1``: every acknowledged record is in the log once, at its acknowledged offset
(:func:`tests.faults.single.kill_cycles`; the run without per-message fsync is ``python -m tests.faults single
--no-fsync``, docs/faults.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .checker import table
from .single import kill_cycles

pytestmark = pytest.mark.timeout(240)


def test_twenty_kill_cycles_with_fsync_per_message_lose_nothing(tmp_path: Path) -> None:
    r = kill_cycles(str(tmp_path / "single"), cycles=20, fsync=True)
    print(table([r]))
    assert len(r.faults) == 20
    assert r.acked > 2000, r.notes
    assert r.lost == 0 and r.duplicates == 0 and r.moved == 0 and r.reused == 0, r.examples
