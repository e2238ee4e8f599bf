"""moldau.log: retention by time and size, DeleteRecords, background roll/flush, checkpoint files."""

from __future__ import annotations

import os
import threading

import pytest

from moldau.log import LogConfig, LogManager, OffsetOutOfRangeError, PartitionLog
from moldau.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from moldau.protocol.records import BatchBuilder, split_batches

T0 = 1_700_000_000_000


class FakeClock:
    def __init__(self, ms: int = T0) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


def make_batch(n: int, ts: int, size: int = 50) -> bytearray:
    b = BatchBuilder()
    for i in range(n):
        b.append(ts, b"k%d" % i, b"v" * size)
    return bytearray(b.build())


def append(lg: PartitionLog, buf: bytearray, now: int):
    info = lg.append(buf, split_batches(buf), now)
    lg.high_watermark = lg.log_end_offset  # what the broker does on one node
    return info


def test_retention_by_time_deletes_old_segments_only(tmp_path):
    clock = FakeClock()
    cfg = LogConfig(segment_bytes=1000, retention_ms=60_000)
    lg = PartitionLog(str(tmp_path / "t-0"), cfg, clock=clock)
    for i in range(30):  # one batch per second of message time
        append(lg, make_batch(2, T0 + i * 1000), T0 + i * 1000)
    segs = list(lg.segments)
    assert len(segs) >= 4
    # nothing is older than 60 s yet
    assert lg.enforce_retention(T0 + 60_000) == 0
    # at T0+75s every segment whose newest record is older than T0+15s goes
    now = T0 + 75_000
    deleted = lg.enforce_retention(now)
    assert deleted > 0
    for s in segs[:deleted]:
        assert now - s.largest_timestamp() > 60_000
        assert not os.path.exists(s.log_path)
    assert lg.segments[0] is segs[deleted]
    assert now - segs[deleted].largest_timestamp() <= 60_000
    assert lg.log_start_offset == segs[deleted].base_offset
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 1000)
    assert lg.read(lg.log_start_offset, 100).first_offset == lg.log_start_offset


def test_retention_by_time_everything_expired_rolls_first(tmp_path):
    cfg = LogConfig(segment_bytes=1000, retention_ms=1000)
    lg = PartitionLog(str(tmp_path / "t-0"), cfg, clock=FakeClock())
    for i in range(10):
        append(lg, make_batch(2, T0), T0)
    leo = lg.log_end_offset
    lg.enforce_retention(T0 + 5000)
    assert lg.log_end_offset == leo == lg.log_start_offset
    assert len(lg.segments) == 1 and lg.segments[0].base_offset == leo and lg.segments[0].size == 0
    assert append(lg, make_batch(1, T0 + 5000), T0 + 5000).base_offset == leo


def test_retention_respects_high_watermark(tmp_path):
    cfg = LogConfig(segment_bytes=1000, retention_ms=1000)
    lg = PartitionLog(str(tmp_path / "t-0"), cfg, clock=FakeClock())
    for i in range(10):
        append(lg, make_batch(2, T0), T0)
    lg.high_watermark = lg.segments[1].base_offset  # only the first segment is below the HW
    assert lg.enforce_retention(T0 + 5000) == 1
    assert lg.log_start_offset == lg.segments[0].base_offset


def test_retention_by_size(tmp_path):
    cfg = LogConfig(segment_bytes=1000, retention_bytes=2500, retention_ms=-1)
    lg = PartitionLog(str(tmp_path / "t-0"), cfg, clock=FakeClock())
    for i in range(40):
        append(lg, make_batch(2, T0 + i), T0 + i)
    segs = list(lg.segments)
    sizes = [s.size for s in segs]
    # Kafka's rule: oldest first, while the log stays at or above retention.bytes after the deletion
    diff = sum(sizes) - 2500
    expected = 0
    for size in sizes[:-1]:
        if diff - size < 0:
            break
        diff -= size
        expected += 1
    assert expected >= 2
    assert lg.enforce_retention(T0 + 10**9) == expected  # retention.ms=-1: time does not matter
    assert lg.segments == tuple(segs[expected:])
    assert lg.size_in_bytes() >= 2500 > lg.size_in_bytes() - lg.segments[0].size
    assert lg.log_start_offset == segs[expected].base_offset
    assert lg.enforce_retention(T0 + 10**9) == 0


def test_compact_only_topic_keeps_old_segments(tmp_path):
    cfg = LogConfig(segment_bytes=1000, retention_ms=1, cleanup_policy=("compact",))
    lg = PartitionLog(str(tmp_path / "t-0"), cfg, clock=FakeClock())
    for i in range(10):
        append(lg, make_batch(2, T0), T0)
    assert lg.enforce_retention(T0 + 10**9) == 0


def test_delete_records_before(tmp_path):
    cfg = LogConfig(segment_bytes=1000)
    lg = PartitionLog(str(tmp_path / "t-0"), cfg, clock=FakeClock())
    for i in range(20):
        append(lg, make_batch(3, T0), T0)
    with pytest.raises(OffsetOutOfRangeError):
        lg.delete_records_before(lg.high_watermark + 1)
    target = lg.segments[2].base_offset + 4  # inside a batch of the third segment
    assert lg.delete_records_before(target) == target
    assert lg.log_start_offset == target
    assert lg.segments[0].base_offset <= target < lg.segments[1].base_offset
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(target - 1, 1000)
    rr = lg.read(target, 1)
    assert rr.first_offset == target - target % 3  # the batch containing the new start
    assert lg.offset_for_timestamp(0) == (target, T0)
    # lower values do not move it back
    assert lg.delete_records_before(1) == target


def test_log_start_offset_survives_restart(tmp_path):
    d = str(tmp_path / "logs")
    clock = FakeClock()
    lm = LogManager([d], LogConfig(segment_bytes=1000), clock)
    lg = lm.create("t", 0)
    for i in range(20):
        append(lg, make_batch(3, T0), T0)
    lg.delete_records_before(7)
    lm.close()
    assert read_offset_checkpoint(os.path.join(d, LOG_START_OFFSET_CHECKPOINT)) == {("t", 0): 7}
    assert read_offset_checkpoint(os.path.join(d, REPLICATION_OFFSET_CHECKPOINT)) == {("t", 0): 60}
    assert read_offset_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT)) == {("t", 0): 60}
    lm2 = LogManager([d], LogConfig(segment_bytes=1000), clock)
    lg2 = lm2.get("t", 0)
    assert (lg2.log_start_offset, lg2.high_watermark, lg2.log_end_offset) == (7, 60, 60)
    lm2.close()


def test_checkpoint_file_format(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    write_offset_checkpoint(path, {("orders", 0): 42, ("my.topic-x", 11): 0})
    with open(path) as f:
        text = f.read()
    assert text == "0\n2\norders 0 42\nmy.topic-x 11 0\n"
    assert read_offset_checkpoint(path) == {("orders", 0): 42, ("my.topic-x", 11): 0}
    assert not os.path.exists(path + ".tmp")
    assert read_offset_checkpoint(str(tmp_path / "missing")) == {}


def test_tick_rolls_retains_flushes_and_checkpoints(tmp_path):
    d = str(tmp_path / "logs")
    clock = FakeClock()
    cfg = LogConfig(segment_ms=10_000, retention_ms=30_000, flush_interval_ms=5_000)
    lm = LogManager([d], cfg, clock, retention_check_interval_ms=1000, checkpoint_interval_ms=2000)
    lg = lm.create("t", 0)
    append(lg, make_batch(2, T0), T0)
    assert lg.recovery_point == 0 and lg.unflushed_messages == 2
    lm.tick(T0 + 1000)
    lm.drain()
    assert lg.recovery_point == 0  # flush.ms not reached
    lm.tick(T0 + 6000)
    lm.drain()
    assert lg.recovery_point == 2  # flushed by flush.ms (in the background executor)
    lm.tick(T0 + 11_000)  # segment.ms passed: the non-empty active segment rolls
    lm.drain()
    assert [s.base_offset for s in lg.segments] == [0, 2]
    assert read_offset_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT)) == {("t", 0): 2}
    clock.ms = T0 + 40_000
    lm.tick(T0 + 40_000)
    lm.drain()  # the first segment's records (T0) are past retention.ms
    assert lg.log_start_offset == 2 and [s.base_offset for s in lg.segments] == [2]
    lm.close()


def test_flush_messages_policy_and_threaded_flush(tmp_path):
    cfg = LogConfig(flush_interval_messages=1)
    lg = PartitionLog(str(tmp_path / "t-0"), cfg, clock=FakeClock())
    assert not lg.needs_flush()
    append(lg, make_batch(3, T0), T0)
    assert lg.needs_flush() and lg.unflushed_messages == 3
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            for _ in range(20):
                lg.flush()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=flusher)
    t.start()
    for i in range(50):
        append(lg, make_batch(1, T0 + i), T0 + i)
    t.join()
    assert not errors
    lg.flush()
    assert lg.recovery_point == lg.log_end_offset == 53
    assert not lg.needs_flush()
