"""moldau.log: reads as file regions (zero-copy fetch). A region read must name exactly the bytes a plain read
returns (whole batches, the same limits), from the segment files or the tail cache, and a region keeps its
segment's file readable after retention, eviction or compaction closed the segment's own descriptor."""

from __future__ import annotations

import os
import random

import pytest

from moldau.log import LogConfig, PartitionLog
from moldau.log.errors import StorageError
from moldau.log.segment import FileRegion, SegmentCache
from moldau.protocol.records import BatchBuilder, split_batches

NOW = 1_700_000_000_000


class FakeClock:
    def time(self) -> float:
        return NOW / 1000


def batch(n: int, size: int) -> bytearray:
    b = BatchBuilder()
    for i in range(n):
        b.append(NOW + i, None, b"v" * size)
    return bytearray(b.build())


def new_log(path, cache: SegmentCache | None = None, **cfg) -> PartitionLog:
    return PartitionLog(str(path), LogConfig(**cfg), clock=FakeClock(), cache=cache)


def fill(lg: PartitionLog, rng: random.Random, appends: int) -> None:
    for _ in range(appends):
        buf = bytearray()
        for _b in range(rng.randint(1, 3)):
            # small batches (headers packed in one window) and large ones (one batch per window)
            buf += batch(rng.randint(1, 4), rng.choice((10, 200, 3000, 12000)))
        lg.append(buf, split_batches(buf), NOW, leader_epoch=1, stable=True)


def fill_large(lg: PartitionLog, appends: int) -> None:
    for _ in range(appends):
        buf = batch(4, 12_000)  # 48 KiB: larger than a header window, so reads of it are regions
        lg.append(buf, split_batches(buf), NOW, leader_epoch=1, stable=True)


def materialize(rr) -> bytes:
    return b"".join(c.read() if isinstance(c, FileRegion) else bytes(c) for c in rr.chunks)


def test_region_reads_equal_plain_reads(tmp_path):
    rng = random.Random(11)
    lg = new_log(tmp_path / "t-0", segment_bytes=200_000, index_interval_bytes=4096)
    fill(lg, rng, 60)
    assert len(lg.segments) > 3
    leo = lg.log_end_offset
    for _ in range(300):
        offset = rng.randrange(0, leo)
        max_bytes = rng.choice((1, 100, 5000, 40_000, 300_000, 1 << 22))
        max_offset = rng.choice((None, leo, rng.randrange(offset, leo + 1)))
        min_one = rng.random() < 0.8
        plain = lg.read(offset, max_bytes, max_offset=max_offset, min_one=min_one)
        region = lg.read(offset, max_bytes, max_offset=max_offset, min_one=min_one, regions=True)
        # regions, except what the header windows read already (sent from memory)
        assert all(isinstance(c, (FileRegion, bytes, memoryview)) for c in region.chunks)
        if region.size > 600_000:
            assert sum(len(c) for c in region.chunks if isinstance(c, FileRegion)) > region.size // 2
        assert (region.first_offset, region.last_offset_exclusive, region.size) == (
            plain.first_offset, plain.last_offset_exclusive, plain.size)
        assert materialize(region) == materialize(plain)
        if plain.size:  # whole batches only; the first one whole even when over max_bytes (min_one)
            batches = list(split_batches(materialize(region)))
            assert sum(h.batch_length + 12 for _p, h in batches) == region.size
            assert region.size <= max_bytes or (min_one and len(batches) == 1)


def test_tail_cache_regions_point_at_the_appends_in_the_file(tmp_path):
    rng = random.Random(5)
    lg = new_log(tmp_path / "t-0", segment_bytes=400_000)
    lg.tail_cache.configure(1 << 20)
    fill(lg, rng, 30)
    leo = lg.log_end_offset
    first_cached = lg.tail_cache.entries[0][0]
    active_base = lg.segments[-1].base_offset
    for offset in range(max(first_cached, active_base), leo, 7):
        for max_bytes in (50, 10_000, 1 << 20):
            plain = lg.read(offset, max_bytes)  # from the tail cache's memory
            region = lg.read(offset, max_bytes, regions=True)
            assert region.size == plain.size and region.last_offset_exclusive == plain.last_offset_exclusive
            assert materialize(region) == materialize(plain)
    # an append in an older segment: the tail gives no region (the file read does)
    lg.roll()
    buf = batch(2, 10)
    lg.append(buf, split_batches(buf), NOW, leader_epoch=1, stable=True)
    rr = lg.read(first_cached, 1 << 20, regions=True)
    assert materialize(rr) == materialize(lg.read(first_cached, 1 << 20))


def test_tail_cache_without_the_bytes_of_large_appends(tmp_path):
    """keep_large=False (followers served by sendfile): appends over TAIL_REGION_MIN are kept as positions
    only; region reads of them come from the cache, plain reads from the file, both the file's bytes."""
    from moldau.log.tail_cache import TAIL_REGION_MIN

    rng = random.Random(9)
    lg = new_log(tmp_path / "t-0", segment_bytes=10_000_000)
    lg.tail_cache.configure(1 << 20, keep_large=False)
    fill(lg, rng, 30)
    fill_large(lg, 5)
    entries = list(lg.tail_cache.entries)
    assert any(e[2] is None for e in entries) and any(e[2] is not None for e in entries)
    assert all((e[2] is None) == (e[6] > TAIL_REGION_MIN) for e in entries)
    saved = lg.tail_cache.entries
    for offset in range(entries[0][0], lg.log_end_offset, 5):
        for max_bytes in (50, 20_000, 1 << 20):
            region = lg.read(offset, max_bytes, regions=True)
            plain = lg.read(offset, max_bytes)
            lg.tail_cache.entries = type(saved)()
            try:
                from_file = lg.read(offset, max_bytes)
            finally:
                lg.tail_cache.entries = saved
            assert materialize(region) == materialize(plain) == materialize(from_file)
            ends = {rr.last_offset_exclusive for rr in (region, plain, from_file)}
            assert len(ends) == 1


def _open_fds_to(path: str) -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(path):
                n += 1
        except OSError:
            pass
    return n


def test_region_outlives_retention_deletion_and_eviction(tmp_path):
    cache = SegmentCache(capacity=2)
    lg = new_log(tmp_path / "t-0", cache=cache, segment_bytes=150_000)
    fill_large(lg, 40)
    lg.high_watermark = lg.log_end_offset
    first = lg.segments[0]
    path = first.log_path
    rr = lg.read(0, 50_000, regions=True)
    assert isinstance(rr.chunks[0], FileRegion)
    expected = materialize(rr)
    # other segments' reads evict the first segment's descriptor from the cache
    for seg in lg.segments[1:4]:
        lg.read(seg.base_offset, 100, regions=True)
    assert first._fd is None
    # retention deletes the segment file while the region still has to be sent
    lg.delete_records_before(lg.segments[2].base_offset)
    lg.enforce_retention(NOW)
    assert not os.path.exists(path)
    assert materialize(rr) == expected
    assert _open_fds_to(path) == 1  # the region's (deleted) file
    del rr
    assert _open_fds_to(path) == 0  # closed with the last region


def test_truncated_region_is_an_error_not_other_bytes(tmp_path):
    lg = new_log(tmp_path / "t-0")
    fill_large(lg, 10)
    rr = lg.read(0, 1 << 20, regions=True)
    assert isinstance(rr.chunks[0], FileRegion)
    lg.truncate_to(1)
    with pytest.raises(StorageError):
        materialize(rr)
