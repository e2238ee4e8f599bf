"""moldau.log: append / read round trips, index lookups, timestamps, LogAppendTime, limits."""

from __future__ import annotations

import os
import struct

import pytest
from crc32c import crc32c

from moldau.log import (
    LogConfig,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordListTooLargeError,
)
from moldau.log.index import OffsetIndex
from moldau.protocol.records import BatchBuilder, decode_batch, split_batches


class FakeClock:
    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


def make_batch(n: int, ts: int = 1000, *, size: int = 10, pid: int = -1, epoch: int = -1, seq: int = -1,
               ts_step: int = 1) -> bytearray:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i in range(n):
        b.append(ts + i * ts_step, b"k%d" % i, b"v" * size)
    return bytearray(b.build())


def append(lg: PartitionLog, buf: bytearray, now: int = 5000, **kw):
    return lg.append(buf, split_batches(buf), now, **kw)


def offsets_in(chunks: list[bytes]) -> list[int]:
    out = []
    for c in chunks:
        for pos, _h in split_batches(c):
            out.extend(r.offset for r in decode_batch(c, pos, verify_crc=True))
    return out


@pytest.fixture
def small_cfg() -> LogConfig:
    return LogConfig(segment_bytes=2000, index_interval_bytes=100)


def new_log(tmp_path, cfg: LogConfig | None = None, clock=None) -> PartitionLog:
    return PartitionLog(str(tmp_path / "t-0"), cfg or LogConfig(), clock=clock or FakeClock())


def test_append_assigns_offsets_and_reads_back_across_rolls(tmp_path, small_cfg):
    lg = new_log(tmp_path, small_cfg)
    for i in range(60):
        info = append(lg, make_batch(3, 1000 + 10 * i))
        assert (info.base_offset, info.last_offset, info.duplicate) == (3 * i, 3 * i + 2, False)
        assert info.log_append_time == -1
    assert lg.log_end_offset == 180
    assert len(lg.segments) > 3  # rolled several times
    # every segment except maybe the last is within segment_bytes
    for seg in lg.segments:
        assert seg.size <= small_cfg.segment_bytes
    rr = lg.read(0, 10**7)
    assert offsets_in(rr.chunks) == list(range(180))
    assert (rr.first_offset, rr.last_offset_exclusive) == (0, 180)
    assert rr.size == sum(len(c) for c in rr.chunks) == lg.size_in_bytes()
    assert len(rr.chunks) == len(lg.segments)  # one chunk per segment
    # file names are 20-digit base offsets, and each segment starts where the previous ended
    names = sorted(n for n in os.listdir(lg.dir) if n.endswith(".log"))
    assert names[0] == "00000000000000000000.log"
    assert [int(n[:20]) for n in names] == [s.base_offset for s in lg.segments]


def test_base_offset_and_leader_epoch_written_outside_crc(tmp_path):
    lg = new_log(tmp_path)
    append(lg, make_batch(2))
    buf = make_batch(4)
    crc_before = struct.unpack_from(">I", buf, 17)[0]
    info = append(lg, buf, leader_epoch=7)
    assert info.base_offset == 2
    assert struct.unpack_from(">q", buf, 0)[0] == 2
    assert struct.unpack_from(">i", buf, 12)[0] == 7
    assert struct.unpack_from(">I", buf, 17)[0] == crc_before == crc32c(memoryview(buf)[21:])
    data = b"".join(lg.read(2, 10**6).chunks)
    assert data == bytes(buf)
    assert lg.leader_epochs == [(0, 0), (7, 2)]
    assert lg.end_offset_for_epoch(0) == (0, 2)
    assert lg.end_offset_for_epoch(7) == (7, 6)
    assert lg.end_offset_for_epoch(9) == (-1, -1)


def test_read_from_inside_a_batch_returns_that_batch(tmp_path):
    lg = new_log(tmp_path)
    for _ in range(5):
        append(lg, make_batch(10))
    rr = lg.read(23, 10**6)
    assert rr.first_offset == 20
    assert offsets_in(rr.chunks)[0] == 20
    assert rr.last_offset_exclusive == 50


def test_max_bytes_whole_batches_and_min_one(tmp_path):
    lg = new_log(tmp_path)
    for _ in range(4):
        append(lg, make_batch(5, size=100))
    bsize = lg.size_in_bytes() // 4
    rr = lg.read(0, 2 * bsize + bsize // 2)
    assert rr.size == 2 * bsize and rr.last_offset_exclusive == 10
    # first batch larger than max_bytes: returned anyway (Kafka's rule) ...
    rr = lg.read(5, 10)
    assert rr.size == bsize and (rr.first_offset, rr.last_offset_exclusive) == (5, 10)
    # ... unless min_one is off
    rr = lg.read(5, 10, min_one=False)
    assert rr.chunks == [] and rr.size == 0


def test_max_offset_excludes_batches_at_or_past_it(tmp_path):
    lg = new_log(tmp_path)
    for _ in range(4):
        append(lg, make_batch(5))
    rr = lg.read(0, 10**6, max_offset=12)  # the batch 10..14 reaches past 12
    assert rr.last_offset_exclusive == 10
    rr = lg.read(0, 10**6, max_offset=15)
    assert rr.last_offset_exclusive == 15
    assert lg.read(15, 10**6, max_offset=15).chunks == []


def test_out_of_range_and_end_of_log(tmp_path):
    lg = new_log(tmp_path)
    append(lg, make_batch(3))
    assert lg.read(3, 1000).chunks == []
    assert lg.read(3, 1000).first_offset == 3
    with pytest.raises(OffsetOutOfRangeError) as ei:
        lg.read(4, 1000)
    assert ei.value.code == 1
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(-1, 1000)


def test_read_every_offset_finds_the_containing_batch(tmp_path, small_cfg):
    lg = new_log(tmp_path, small_cfg)
    sizes = [1, 7, 3, 12, 2, 9, 4, 6, 1, 5] * 4
    starts = []
    off = 0
    for n in sizes:
        starts.append(off)
        append(lg, make_batch(n, size=30))
        off += n
    for target in range(off):
        rr = lg.read(target, 1)
        base = max(s for s in starts if s <= target)
        assert rr.first_offset == base, target
        assert offsets_in(rr.chunks)[0] == base


def test_index_entries_point_at_batches_with_those_offsets(tmp_path, small_cfg):
    lg = new_log(tmp_path, small_cfg)
    for i in range(80):
        append(lg, make_batch(1 + i % 4, size=20))
    lg.flush()
    checked = 0
    for seg in lg.segments:
        idx = OffsetIndex(seg.index_path, seg.base_offset, 10 << 20)
        assert idx.load(seg.size)
        with open(seg.log_path, "rb") as f:
            data = f.read()
        for off, pos in idx.entries():
            base, _blen = struct.unpack_from(">qi", data, pos)
            (lod,) = struct.unpack_from(">i", data, pos + 23)
            assert base + lod == off  # Kafka: entry offset = last offset of the batch at that position
            checked += 1
        assert os.path.getsize(seg.index_path) == 8 * len(idx)
    assert checked > 10


def test_offset_for_timestamp_uses_record_timestamps(tmp_path, small_cfg):
    lg = new_log(tmp_path, small_cfg)
    # batch i holds records with timestamps 1000+100*i, +1, +2, +3
    for i in range(40):
        append(lg, make_batch(4, 1000 + 100 * i))
    assert lg.offset_for_timestamp(0) == (0, 1000)
    assert lg.offset_for_timestamp(1000) == (0, 1000)
    assert lg.offset_for_timestamp(1002) == (2, 1002)  # inside a batch: the exact record
    assert lg.offset_for_timestamp(1004) == (4, 1100)
    assert lg.offset_for_timestamp(2502) == (62, 2502)
    assert lg.offset_for_timestamp(4903) == (159, 4903)
    assert lg.offset_for_timestamp(4904) is None
    assert lg.max_timestamp_offset() == (159, 4903)


def test_offset_for_timestamp_out_of_order_timestamps(tmp_path, small_cfg):
    lg = new_log(tmp_path, small_cfg)
    append(lg, make_batch(2, 5000))
    append(lg, make_batch(2, 3000))
    append(lg, make_batch(2, 6000))
    assert lg.offset_for_timestamp(4000) == (0, 5000)
    assert lg.offset_for_timestamp(5500) == (4, 6000)
    assert lg.max_timestamp_offset() == (5, 6001)


def test_log_append_time_rewrites_timestamp_and_crc(tmp_path):
    cfg = LogConfig(message_timestamp_type="LogAppendTime")
    lg = new_log(tmp_path, cfg)
    buf = make_batch(3, 1000)
    info = append(lg, buf, now=777_000)
    assert info.log_append_time == 777_000
    data = lg.read(0, 10**6).chunks[0]
    (attrs,) = struct.unpack_from(">h", data, 21)
    assert attrs & 0x08
    assert struct.unpack_from(">q", data, 35)[0] == 777_000
    recs = decode_batch(data, 0, verify_crc=True)
    assert [r.timestamp for r in recs] == [777_000] * 3
    assert lg.offset_for_timestamp(5000) == (0, 777_000)


def test_message_too_large_and_record_list_too_large(tmp_path):
    lg = new_log(tmp_path, LogConfig(max_message_bytes=200, segment_bytes=1000))
    with pytest.raises(MessageTooLargeError) as ei:
        append(lg, make_batch(3, size=200))
    assert ei.value.code == 10
    buf = b"".join(make_batch(1, size=100) for _ in range(7))
    with pytest.raises(RecordListTooLargeError) as ei2:
        append(lg, bytearray(buf))
    assert ei2.value.code == 18
    assert lg.log_end_offset == 0 and lg.size_in_bytes() == 0


def test_multi_batch_append_is_one_region(tmp_path):
    lg = new_log(tmp_path)
    buf = bytearray(b"".join(make_batch(n) for n in (2, 3, 4)))
    info = append(lg, buf)
    assert (info.base_offset, info.last_offset) == (0, 8)
    assert offsets_in(lg.read(0, 10**6).chunks) == list(range(9))
    assert [h.base_offset for _p, h in split_batches(buf)] == [0, 2, 5]


def test_roll_by_segment_ms_on_append(tmp_path):
    clock = FakeClock()
    lg = new_log(tmp_path, LogConfig(segment_ms=1000), clock)
    append(lg, make_batch(1, 10_000), now=10_000)
    append(lg, make_batch(1, 10_500), now=10_500)
    assert len(lg.segments) == 1
    append(lg, make_batch(1, 11_001), now=11_001)  # message time 1001 ms after the segment's first batch
    assert len(lg.segments) == 2 and lg.segments[-1].base_offset == 2


def test_truncate_to(tmp_path, small_cfg):
    lg = new_log(tmp_path, small_cfg)
    for i in range(50):
        append(lg, make_batch(2, 1000 + i))
    nseg = len(lg.segments)
    assert lg.truncate_to(61) == 60  # the batch 60..61 contains 61: cut at its start
    assert lg.log_end_offset == 60
    assert len(lg.segments) < nseg
    assert offsets_in(lg.read(0, 10**7).chunks) == list(range(60))
    info = append(lg, make_batch(2, 5000))
    assert info.base_offset == 60
    assert lg.offset_for_timestamp(5000) == (60, 5000)
    lg.close()
    lg2 = PartitionLog(lg.dir, small_cfg, clock=FakeClock())
    assert lg2.log_end_offset == 62
    assert offsets_in(lg2.read(0, 10**7).chunks) == list(range(62))


def test_reopen_clean_keeps_everything(tmp_path, small_cfg):
    lg = new_log(tmp_path, small_cfg)
    for i in range(30):
        append(lg, make_batch(3, 1000 + 10 * i))
    lg.close()
    lg2 = PartitionLog(lg.dir, small_cfg, clock=FakeClock())
    assert lg2.log_end_offset == 90
    assert offsets_in(lg2.read(0, 10**7).chunks) == list(range(90))
    assert lg2.offset_for_timestamp(1150) == (45, 1150)
    assert append(lg2, make_batch(1)).base_offset == 90


def test_follower_append_keeps_offsets_and_epochs(tmp_path, small_cfg):
    lg = new_log(tmp_path, small_cfg)
    b1 = make_batch(3)
    struct.pack_into(">q", b1, 0, 0)
    struct.pack_into(">i", b1, 12, 4)
    lg.append(b1, split_batches(b1), 5000, assign_offsets=False)
    b2 = make_batch(2)
    struct.pack_into(">q", b2, 0, 10)  # a gap (compacted leader log)
    struct.pack_into(">i", b2, 12, 5)
    info = lg.append(b2, split_batches(b2), 5000, assign_offsets=False)
    assert (info.base_offset, info.last_offset) == (10, 11)
    assert lg.log_end_offset == 12
    assert lg.leader_epochs == [(4, 0), (5, 10)]
    assert lg.read(5, 10**6).first_offset == 10  # an offset in the gap reads the next batch
    b3 = make_batch(1)
    struct.pack_into(">q", b3, 0, 11)
    with pytest.raises(Exception) as ei:
        lg.append(b3, split_batches(b3), 5000, assign_offsets=False)
    assert "below the log end offset" in str(ei.value)


def test_read_spanning_segments_respects_max_bytes(tmp_path, small_cfg):
    lg = new_log(tmp_path, small_cfg)
    for _ in range(30):
        append(lg, make_batch(2, size=50))
    bsize = lg.size_in_bytes() // 30
    seg1 = lg.segments[1]
    per_seg = seg1.size // bsize
    start = seg1.base_offset - 2  # the last batch of the first segment
    rr = lg.read(start, bsize * (per_seg + 1) + bsize // 2)
    assert len(rr.chunks) == 2
    assert rr.size == bsize * (per_seg + 1)
    assert offsets_in(rr.chunks) == list(range(start, start + 2 * (per_seg + 1)))
