"""moldau.log: the leader's tail cache (reads of the latest appends from memory) and the follower's byte-level
append (assign_offsets=False): what they return must be exactly what the log file holds."""

from __future__ import annotations

import os
import random
from collections import deque

from moldau.log import LogConfig, PartitionLog
from moldau.protocol.records import BatchBuilder, decode_batch, split_batches

NOW = 1_700_000_000_000


class FakeClock:
    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


def batch(n: int, *, size: int = 10, ts: int = 1_700_000_000_000, pid: int = -1, epoch: int = -1,
          seq: int = -1, transactional: bool = False) -> bytearray:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)
    for i in range(n):
        b.append(ts + i, b"k%d" % i, b"v" * size)
    return bytearray(b.build())


def new_log(path, cfg: LogConfig | None = None) -> PartitionLog:
    return PartitionLog(str(path), cfg or LogConfig(), clock=FakeClock())


def uncached(lg: PartitionLog, *args, **kw):
    saved = lg.tail_cache.entries
    lg.tail_cache.entries = deque()
    try:
        return lg.read(*args, **kw)
    finally:
        lg.tail_cache.entries = saved


def same(a, b) -> bool:
    return (b"".join(bytes(c) for c in a.chunks), a.first_offset, a.last_offset_exclusive, a.size) == (
        b"".join(bytes(c) for c in b.chunks), b.first_offset, b.last_offset_exclusive, b.size)


def test_tail_reads_equal_file_reads(tmp_path):
    rng = random.Random(7)
    lg = new_log(tmp_path / "t-0")
    lg.tail_cache.configure(1 << 20)
    frames = []
    for _ in range(40):
        # one append: 1-3 batches back to back, as in a produce request
        buf = bytearray()
        for _b in range(rng.randint(1, 3)):
            buf += batch(rng.randint(1, 6), size=rng.randint(1, 300))
        lg.append(buf, split_batches(buf), NOW, leader_epoch=3, stable=True)
        frames.append(buf)
    leo = lg.log_end_offset
    served_from_memory = 0
    for offset in range(leo + 1):
        for max_bytes in (1, 200, 700, 5000, 1 << 20):
            for max_offset in (None, leo, max(offset, leo - 5)):
                for min_one in (True, False):
                    a = lg.read(offset, max_bytes, max_offset=max_offset, min_one=min_one)
                    b = uncached(lg, offset, max_bytes, max_offset=max_offset, min_one=min_one)
                    assert same(a, b), (offset, max_bytes, max_offset, min_one)
                    if a.chunks and any(getattr(c, "obj", None) is f for c in a.chunks for f in frames):
                        served_from_memory += 1
    assert served_from_memory > 100  # the cache was used, not bypassed
    # the followers have everything below 60: those appends are dropped, the rest still served from memory
    lg.tail_cache.release(60)
    assert lg.tail_cache.entries and all(nxt > 60 for _first, nxt, *_rest in lg.tail_cache.entries)
    assert same(lg.read(60, 1 << 20), uncached(lg, 60, 1 << 20))
    assert same(lg.read(0, 1 << 20), uncached(lg, 0, 1 << 20))


def test_tail_keeps_a_copy_of_a_buffer_the_caller_may_reuse(tmp_path):
    lg = new_log(tmp_path / "t-0")
    lg.tail_cache.configure(1 << 20)
    buf = batch(3)
    lg.append(buf, split_batches(buf), NOW, stable=False)
    want = bytes(buf)
    buf[:] = b"\0" * len(buf)  # a coordinator reusing its buffer
    assert b"".join(bytes(c) for c in lg.read(0, 1 << 20).chunks) == want


def test_tail_is_bounded_and_cleared_by_truncation_and_roll(tmp_path):
    lg = new_log(tmp_path / "t-0", LogConfig(segment_bytes=4000))
    one = len(batch(2, size=100))
    lg.tail_cache.configure(3 * one)
    for _ in range(5):
        b = batch(2, size=100)
        lg.append(b, split_batches(b), NOW, stable=True)
    assert lg.tail_cache.bytes <= 3 * one and len(lg.tail_cache.entries) == 3
    assert same(lg.read(0, 1 << 20), uncached(lg, 0, 1 << 20))
    # truncation (a leader that became a follower and diverged): new bytes at the same offsets
    lg.truncate_to(4)
    assert not lg.tail_cache.entries
    b = batch(2, size=50)
    lg.append(b, split_batches(b), NOW, leader_epoch=9, stable=True)
    r = lg.read(4, 1 << 20)
    assert same(r, uncached(lg, 4, 1 << 20))
    assert [x.value for x in decode_batch(b"".join(bytes(c) for c in r.chunks), 0)] == [b"v" * 50] * 2
    # appends beyond segment.bytes roll: the cache only ever holds the active segment
    for _ in range(40):
        b = batch(2, size=100)
        lg.append(b, split_batches(b), NOW, stable=True)
    assert len(lg.segments) > 1
    first_active = lg.segments[-1].base_offset
    assert all(first >= first_active for first, _n, *_rest in lg.tail_cache.entries)
    for off in range(0, lg.log_end_offset, 3):
        assert same(lg.read(off, 1 << 20), uncached(lg, off, 1 << 20))


def test_follower_appends_the_leaders_bytes_as_they_are(tmp_path):
    """A follower log fed with the leader's fetched bytes (read-only) ends up byte-identical: offsets, leader
    epochs, LogAppendTime timestamps, and the producer state rebuilt from the headers; a CreateTime window
    the old batches fall outside of does not stop the follower (Kafka's appendAsFollower)."""
    cfg = LogConfig(message_timestamp_type="LogAppendTime", segment_bytes=3000)
    leader = new_log(tmp_path / "leader" / "t-0", cfg)
    seqs = {1000: 0, 2000: 0}
    for i in range(30):
        pid = 1000 if i % 2 else 2000
        b = batch(3, pid=pid, epoch=4, seq=seqs[pid], ts=1)  # timestamps far in the past
        seqs[pid] += 3
        leader.append(b, split_batches(b), 8_000_000 + i, leader_epoch=2 if i < 12 else 5, stable=True)
    follower = new_log(tmp_path / "follower" / "t-0", cfg)
    off = 0
    while off < leader.log_end_offset:
        if off >= 45:  # the second half with CreateTime bounds that the leader's old timestamps break
            follower.config = LogConfig(
                message_timestamp_type="CreateTime", message_timestamp_before_max_ms=1000, segment_bytes=3000
            )
        data = b"".join(bytes(c) for c in leader.read(off, 700).chunks)  # bytes: read-only, as fetched
        batches = split_batches(data)
        follower.append(data, batches, 9_999_999_999, assign_offsets=False)
        off = follower.log_end_offset
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.leader_epochs == leader.leader_epochs == [(2, 0), (5, 36)]

    def file_bytes(lg: PartitionLog) -> bytes:
        out = b""
        for seg in lg.segments:
            with open(os.path.join(lg.dir, "%020d.log" % seg.base_offset), "rb") as f:
                out += f.read()
        return out

    assert file_bytes(follower) == file_bytes(leader)
    recs = decode_batch(file_bytes(follower), 0, verify_crc=True)
    assert {r.timestamp for r in recs} == {8_000_000}  # the leader's append time, not the follower's
    for pid in (1000, 2000):
        le, fe = leader.producer_state.get(pid), follower.producer_state.get(pid)
        assert fe is not None and le is not None
        assert (fe.epoch, fe.last_seq, fe.last_offset) == (le.epoch, le.last_seq, le.last_offset)
