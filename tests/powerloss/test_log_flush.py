"""``PartitionLog.flush`` under a power loss, on the lazy file system: what it flushed survives, in a
partition directory created just before and across segment rolls (the files, then the partition directory,
then its parent are fsynced before the recovery point moves)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.log import LogConfig, PartitionLog
from moldau.protocol.records import BatchBuilder, decode_batch, split_batches

from .lazyfs import LazyFSMount, fuse_unavailable

pytestmark = pytest.mark.timeout(120)

CFG = LogConfig(segment_bytes=3000, index_interval_bytes=200)


class _Clock:
    def time(self) -> float:
        return 1_700_000_000.0


@pytest.fixture
def lazy(tmp_path: Path) -> Iterator[tuple[LazyFSMount, Path]]:
    reason = fuse_unavailable()
    if reason:
        pytest.skip(f"no lazy file system: {reason}")
    fs = LazyFSMount(tmp_path / "disk", tmp_path / "mnt").mount()
    try:
        logs = tmp_path / "mnt" / "logs"
        logs.mkdir()
        for d in (logs, logs.parent):
            fd = os.open(d, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        yield fs, logs
    finally:
        fs.unmount()


def _batch(i: int) -> bytearray:
    b = BatchBuilder()
    for k in range(4):
        b.append(1000 + i, b"k%d" % k, b"v%d-%d" % (i, k) + b"x" * 40)
    return bytearray(b.build())


def _values(lg: PartitionLog) -> list[bytes]:
    out = []
    for c in lg.read(lg.log_start_offset, 10**8).chunks:
        for pos, _h in split_batches(c):
            out.extend(r.value for r in decode_batch(c, pos, verify_crc=True) if r.value is not None)
    return out


def test_flushed_records_survive_in_a_new_partition_across_rolls(lazy: tuple[LazyFSMount, Path]) -> None:
    fs, logs = lazy
    lg = PartitionLog(str(logs / "t-0"), CFG, clock=_Clock())
    for i in range(40):  # an fsync per message: flush after every append
        buf = _batch(i)
        lg.append(buf, split_batches(buf), 5000)
        lg.flush()
    assert len(lg.segments) > 3
    flushed = _values(lg)
    buf = _batch(99)
    lg.append(buf, split_batches(buf), 5000)  # not flushed: may be lost
    fs.power_loss()
    for seg in lg.segments:
        with contextlib.suppress(OSError):  # the disk is gone: closing fails too
            seg.close_handle()
    fs.revive()
    assert os.path.isdir(logs / "t-0")
    again = PartitionLog(str(logs / "t-0"), CFG, clock=_Clock(), clean_shutdown=False, recovery_point=0)
    try:
        assert _values(again)[: len(flushed)] == flushed
        assert len(_values(again)) in (len(flushed), len(flushed) + 4)
    finally:
        again.close()
