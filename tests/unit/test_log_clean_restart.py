"""A clean restart reads the indexes as they were written: no rebuild, no rewrite, no new snapshot; an index
that lost entries is still caught and rebuilt."""

from __future__ import annotations

import logging
import os

from moldau.log import LogConfig, PartitionLog
from moldau.protocol.records import BatchBuilder, split_batches

CFG = LogConfig(segment_bytes=100_000, index_interval_bytes=4096)


class FakeClock:
    def time(self) -> float:
        return 1_700_000_000.0


def batch(i: int, size: int = 50) -> bytearray:
    b = BatchBuilder()
    b.append(1000 + i, b"k", b"v" * size)
    return bytearray(b.build())


def log_with(tmp_path, n: int, size: int = 50) -> PartitionLog:
    lg = PartitionLog(str(tmp_path / "t-0"), CFG, clock=FakeClock())
    for i in range(n):
        buf = batch(i, size)
        lg.append(buf, split_batches(buf), 5000)
    return lg


def files(d: str) -> dict[str, tuple[int, int]]:
    return {
        n: (os.stat(os.path.join(d, n)).st_mtime_ns, os.stat(os.path.join(d, n)).st_size)
        for n in os.listdir(d)
    }


def test_small_segment_with_an_empty_index_is_not_rebuilt(tmp_path, caplog) -> None:
    lg = log_with(tmp_path, 3)  # far below index.interval.bytes: the offset index stays empty
    lg.close()
    before = files(lg.dir)
    caplog.set_level(logging.INFO, logger="moldau.log")
    again = PartitionLog(lg.dir, CFG, clock=FakeClock(), clean_shutdown=True)
    assert again.log_end_offset == 3
    again.close()
    assert not [r for r in caplog.records if "rebuild" in r.getMessage()]
    assert files(lg.dir) == before  # nothing rewritten: no index, no snapshot


def test_index_missing_entries_after_a_clean_shutdown_is_rebuilt(tmp_path, caplog) -> None:
    lg = log_with(tmp_path, 200, size=200)  # ~50 KB: several index entries
    lg.close()
    seg = lg.segments[0]
    with open(seg.offset_index.path, "r+b") as f:
        f.truncate(0)  # the entries are gone, the data says there must be some
    caplog.set_level(logging.INFO, logger="moldau.log")
    again = PartitionLog(lg.dir, CFG, clock=FakeClock(), clean_shutdown=True)
    assert again.log_end_offset == 200
    assert any("rebuilding" in r.getMessage() for r in caplog.records)
    assert len(again.segments[0].offset_index) > 0
    assert again.read(150, 10_000).first_offset == 150
    again.close()
