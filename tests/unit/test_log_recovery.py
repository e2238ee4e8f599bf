"""moldau.log: recovery after unclean shutdown (torn tails, garbage, CRC errors) and index rebuilds."""

from __future__ import annotations

import os

from moldau.log import LogConfig, LogManager, PartitionLog
from moldau.log.checkpoint import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT, read_offset_checkpoint
from moldau.protocol.records import BatchBuilder, decode_batch, split_batches


class FakeClock:
    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


def make_batch(n: int, ts: int = 1000, size: int = 20) -> bytearray:
    b = BatchBuilder()
    for i in range(n):
        b.append(ts + i, b"k%d" % i, b"v" * size)
    return bytearray(b.build())


def append(lg: PartitionLog, buf: bytearray, now: int = 5000):
    return lg.append(buf, split_batches(buf), now)


def offsets_in(lg: PartitionLog) -> list[int]:
    out = []
    for c in lg.read(lg.log_start_offset, 10**8).chunks:
        for pos, _h in split_batches(c):
            out.extend(r.offset for r in decode_batch(c, pos, verify_crc=True))
    return out


CFG = LogConfig(segment_bytes=3000, index_interval_bytes=200)


def filled_log(tmp_path, batches: int = 40) -> PartitionLog:
    lg = PartitionLog(str(tmp_path / "t-0"), CFG, clock=FakeClock())
    for i in range(batches):
        append(lg, make_batch(4, 1000 + 10 * i))
    return lg


def crash(lg: PartitionLog) -> None:
    """Simulate a crash: drop the descriptors without flushing, snapshot or clean marker."""
    for seg in lg.segments:
        seg.persist_indexes()  # index files as the page cache would have them; recovery rebuilds anyway
        seg.close_handle()


def reopen(lg: PartitionLog, recovery_point: int = 0) -> PartitionLog:
    return PartitionLog(lg.dir, CFG, clock=FakeClock(), clean_shutdown=False, recovery_point=recovery_point)


def test_truncated_tail_is_cut_and_appends_continue(tmp_path):
    lg = filled_log(tmp_path)
    leo = lg.log_end_offset
    last = lg.segments[-1]
    crash(lg)
    with open(last.log_path, "r+b") as f:
        f.truncate(last.size - 15)  # cut the last batch in the middle
    lg2 = reopen(lg)
    assert lg2.log_end_offset == leo - 4
    assert offsets_in(lg2) == list(range(leo - 4))
    assert os.path.getsize(last.log_path) == lg2.segments[-1].size < last.size
    assert append(lg2, make_batch(2)).base_offset == leo - 4
    assert offsets_in(lg2)[-2:] == [leo - 4, leo - 3]


def test_garbage_after_last_batch_is_removed(tmp_path):
    lg = filled_log(tmp_path)
    leo = lg.log_end_offset
    last = lg.segments[-1]
    size = last.size
    crash(lg)
    with open(last.log_path, "ab") as f:
        f.write(os.urandom(37))
    lg2 = reopen(lg)
    assert lg2.log_end_offset == leo
    assert os.path.getsize(last.log_path) == size
    assert offsets_in(lg2) == list(range(leo))


def test_zero_filled_tail_is_removed(tmp_path):
    lg = filled_log(tmp_path)
    leo = lg.log_end_offset
    last = lg.segments[-1]
    crash(lg)
    with open(last.log_path, "ab") as f:
        f.write(bytes(4096))  # a preallocated / torn block
    lg2 = reopen(lg)
    assert lg2.log_end_offset == leo
    assert append(lg2, make_batch(1)).base_offset == leo


def test_crc_corruption_in_tail_truncates_there(tmp_path):
    lg = filled_log(tmp_path)
    last = lg.segments[-1]
    # the third batch of the last segment gets a flipped payload byte
    with open(last.log_path, "rb") as f:
        data = f.read()
    batches = split_batches(data)
    assert len(batches) >= 4
    pos, h = batches[2]
    crash(lg)
    with open(last.log_path, "r+b") as f:
        f.seek(pos + h.size - 3)
        b = f.read(1)
        f.seek(pos + h.size - 3)
        f.write(bytes([b[0] ^ 0xFF]))
    lg2 = reopen(lg)
    assert lg2.log_end_offset == h.base_offset
    assert lg2.segments[-1].size == pos
    assert offsets_in(lg2) == list(range(h.base_offset))


def test_corruption_in_earlier_segment_deletes_later_segments(tmp_path):
    lg = filled_log(tmp_path, 60)
    segs = list(lg.segments)
    assert len(segs) >= 3
    victim = segs[1]
    with open(victim.log_path, "rb") as f:
        data = f.read()
    pos, h = split_batches(data)[1]
    crash(lg)
    with open(victim.log_path, "r+b") as f:
        f.seek(pos + 30)
        f.write(b"\xff\xff\xff\xff")  # inside the CRC-covered part
    lg2 = reopen(lg, recovery_point=victim.base_offset)
    assert lg2.log_end_offset == h.base_offset
    assert [s.base_offset for s in lg2.segments] == [segs[0].base_offset, victim.base_offset]
    for later in segs[2:]:
        assert not os.path.exists(later.log_path)
        assert not os.path.exists(later.index_path)
    assert append(lg2, make_batch(1)).base_offset == h.base_offset


def test_recovery_starts_at_the_recovery_point(tmp_path):
    lg = filled_log(tmp_path, 60)
    first = lg.segments[0]
    leo = lg.log_end_offset
    with open(first.log_path, "rb") as f:
        data = f.read()
    pos, _h = split_batches(data)[0]
    crash(lg)
    with open(first.log_path, "r+b") as f:  # corruption below the recovery point is not looked at
        f.seek(pos + 40)
        f.write(b"\x00\x01\x02")
    lg2 = reopen(lg, recovery_point=lg.segments[-1].base_offset)
    assert lg2.log_end_offset == leo


def test_missing_and_corrupt_indexes_are_rebuilt_on_clean_open(tmp_path):
    lg = filled_log(tmp_path, 60)
    leo = lg.log_end_offset
    lg.close()
    segs = lg.segments
    os.unlink(segs[0].index_path)
    with open(segs[1].timeindex_path, "ab") as f:
        f.write(b"\x01\x02\x03")  # partial entry
    with open(segs[1].index_path, "r+b") as f:
        f.write(b"\x7f\xff\xff\xff\x7f\xff\xff\xff")  # nonsense first entry
    lg2 = PartitionLog(lg.dir, CFG, clock=FakeClock())
    assert lg2.log_end_offset == leo
    assert offsets_in(lg2) == list(range(leo))
    # timestamp search touches the rebuilt time index of segment 1
    target = segs[1].base_offset + 5
    ts = lg2.offset_for_timestamp(1000 + 10 * (target // 4) + target % 4)
    assert ts is not None and ts[0] == target
    assert os.path.getsize(segs[0].index_path) % 8 == 0 and os.path.getsize(segs[0].index_path) > 0
    assert os.path.getsize(segs[1].timeindex_path) % 12 == 0


def test_manager_clean_marker_and_unclean_recovery(tmp_path):
    d = str(tmp_path / "logs")
    lm = LogManager([d], CFG, FakeClock())
    lg = lm.create("orders", 0)
    for i in range(30):
        append(lg, make_batch(2, 1000 + i))
    lg.flush()
    rp = lg.recovery_point
    assert rp == 60
    for i in range(5):
        append(lg, make_batch(2, 2000 + i))
    lm.checkpoint()
    assert read_offset_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT)) == {("orders", 0): 60}
    last = lg.segments[-1]
    crash(lg)
    lm._release_locks()  # the process "died"
    assert not os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
    with open(last.log_path, "r+b") as f:
        f.truncate(last.size - 1)
    lm2 = LogManager([d], CFG, FakeClock())
    lg2 = lm2.get("orders", 0)
    assert lg2 is not None and lg2.log_end_offset == 68
    assert lg2.recovery_point == 68
    lm2.close()
    assert os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
    lm3 = LogManager([d], CFG, FakeClock())
    assert not os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
    assert lm3.get("orders", 0).log_end_offset == 68
    lm3.close()
