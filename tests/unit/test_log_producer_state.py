"""moldau.log: idempotent producer checks (dedupe, sequence gaps, epoch fencing), snapshots, restart."""

from __future__ import annotations

import os
import struct

import pytest
from crc32c import crc32c

from moldau.log import InvalidProducerEpochError, LogConfig, OutOfOrderSequenceError, PartitionLog
from moldau.log.producer_state import ProducerStateManager
from moldau.protocol.records import BatchBuilder, build_control_batch, split_batches


class FakeClock:
    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


NOW = 1_700_000_000_000


def pbatch(n: int, pid: int, epoch: int, seq: int, *, txn: bool = False, size: int = 30) -> bytearray:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn)
    for i in range(n):
        b.append(NOW, b"k", b"v" * size)
    return bytearray(b.build())


def append(lg: PartitionLog, buf: bytearray):
    return lg.append(buf, split_batches(buf), NOW)


def new_log(tmp_path, cfg: LogConfig | None = None) -> PartitionLog:
    return PartitionLog(str(tmp_path / "t-0"), cfg or LogConfig(), clock=FakeClock())


def test_duplicate_of_recent_batch_returns_original_offsets_without_writing(tmp_path):
    lg = new_log(tmp_path)
    append(lg, pbatch(2, pid=9, epoch=0, seq=0, size=1))  # another producer first
    first = append(lg, pbatch(3, pid=1, epoch=0, seq=0))
    second = append(lg, pbatch(2, pid=1, epoch=0, seq=3))
    assert (first.base_offset, first.last_offset) == (2, 4)
    assert (second.base_offset, second.last_offset) == (5, 6)
    size, leo = lg.size_in_bytes(), lg.log_end_offset
    dup = append(lg, pbatch(3, pid=1, epoch=0, seq=0))
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (2, 4)
    dup2 = append(lg, pbatch(2, pid=1, epoch=0, seq=3))
    assert dup2.duplicate and (dup2.base_offset, dup2.last_offset) == (5, 6)
    assert (lg.size_in_bytes(), lg.log_end_offset) == (size, leo)
    nxt = append(lg, pbatch(1, pid=1, epoch=0, seq=5))
    assert not nxt.duplicate and nxt.base_offset == leo


def test_sequence_gap_is_out_of_order(tmp_path):
    lg = new_log(tmp_path)
    append(lg, pbatch(3, pid=1, epoch=0, seq=0))
    with pytest.raises(OutOfOrderSequenceError) as ei:
        append(lg, pbatch(1, pid=1, epoch=0, seq=5))
    assert ei.value.code == 45
    with pytest.raises(OutOfOrderSequenceError):  # overlaps but is no exact duplicate
        append(lg, pbatch(2, pid=1, epoch=0, seq=1))
    assert lg.log_end_offset == 3
    assert append(lg, pbatch(1, pid=1, epoch=0, seq=3)).base_offset == 3


def test_dedupe_window_is_five_batches(tmp_path):
    lg = new_log(tmp_path)
    for i in range(6):
        append(lg, pbatch(1, pid=1, epoch=0, seq=i))
    assert append(lg, pbatch(1, pid=1, epoch=0, seq=1)).duplicate  # still among the last 5
    with pytest.raises(OutOfOrderSequenceError):
        append(lg, pbatch(1, pid=1, epoch=0, seq=0))  # fell out of the window


def test_epoch_fencing(tmp_path):
    lg = new_log(tmp_path)
    append(lg, pbatch(2, pid=1, epoch=3, seq=0))
    with pytest.raises(InvalidProducerEpochError) as ei:
        append(lg, pbatch(1, pid=1, epoch=2, seq=2))
    assert ei.value.code == 47
    with pytest.raises(OutOfOrderSequenceError):  # a new epoch must start at sequence 0
        append(lg, pbatch(1, pid=1, epoch=4, seq=2))
    info = append(lg, pbatch(1, pid=1, epoch=4, seq=0))
    assert info.base_offset == 2
    with pytest.raises(InvalidProducerEpochError):  # the old epoch is fenced now
        append(lg, pbatch(1, pid=1, epoch=3, seq=2))


def test_unknown_producer_with_nonzero_sequence_is_accepted(tmp_path):
    lg = new_log(tmp_path)
    info = append(lg, pbatch(2, pid=42, epoch=1, seq=17))
    assert info.base_offset == 0 and not info.duplicate
    assert append(lg, pbatch(1, pid=42, epoch=1, seq=19)).base_offset == 2


def test_sequence_wraps_at_int_max(tmp_path):
    lg = new_log(tmp_path)
    append(lg, pbatch(2, pid=5, epoch=0, seq=2**31 - 2))  # sequences MAX-1, MAX
    assert append(lg, pbatch(1, pid=5, epoch=0, seq=0)).base_offset == 2


def test_multiple_batches_of_one_producer_in_one_append(tmp_path):
    lg = new_log(tmp_path)
    buf = pbatch(2, pid=1, epoch=0, seq=0) + pbatch(2, pid=1, epoch=0, seq=2)
    info = lg.append(buf, split_batches(buf), NOW)
    assert (info.base_offset, info.last_offset) == (0, 3)
    bad = pbatch(1, pid=1, epoch=0, seq=4) + pbatch(1, pid=1, epoch=0, seq=9)
    with pytest.raises(OutOfOrderSequenceError):
        lg.append(bad, split_batches(bad), NOW)
    assert lg.log_end_offset == 4
    assert lg.append(buf, split_batches(buf), NOW).duplicate


def test_state_survives_clean_restart(tmp_path):
    lg = new_log(tmp_path)
    for i in range(4):
        append(lg, pbatch(2, pid=1, epoch=0, seq=2 * i))
    lg.close()
    snap = os.path.join(lg.dir, "00000000000000000008.snapshot")
    assert os.path.exists(snap)
    lg2 = PartitionLog(lg.dir, LogConfig(), clock=FakeClock())
    dup = append(lg2, pbatch(2, pid=1, epoch=0, seq=2))
    assert dup.duplicate and dup.base_offset == 2
    with pytest.raises(OutOfOrderSequenceError):
        append(lg2, pbatch(1, pid=1, epoch=0, seq=9))
    assert append(lg2, pbatch(1, pid=1, epoch=0, seq=8)).base_offset == 8


def test_state_rebuilt_after_crash_from_snapshot_plus_log(tmp_path):
    cfg = LogConfig(segment_bytes=600)
    lg = new_log(tmp_path, cfg)
    for i in range(20):
        append(lg, pbatch(1, pid=7, epoch=2, seq=i))
    assert len(lg.segments) > 2
    snaps = sorted(n for n in os.listdir(lg.dir) if n.endswith(".snapshot"))
    assert snaps and int(snaps[-1][:20]) < 20  # written on roll, not at the end
    for seg in lg.segments:  # crash: no close, no final snapshot
        seg.close_handle()
    lg2 = PartitionLog(lg.dir, cfg, clock=FakeClock(), clean_shutdown=False)
    assert lg2.log_end_offset == 20
    assert append(lg2, pbatch(1, pid=7, epoch=2, seq=18)).duplicate
    with pytest.raises(InvalidProducerEpochError):
        append(lg2, pbatch(1, pid=7, epoch=1, seq=0))
    assert append(lg2, pbatch(1, pid=7, epoch=2, seq=20)).base_offset == 20


def test_state_rebuilt_without_any_snapshot(tmp_path):
    lg = new_log(tmp_path)
    for i in range(3):
        append(lg, pbatch(1, pid=3, epoch=0, seq=i))
    for seg in lg.segments:
        seg.close_handle()
    lg2 = PartitionLog(lg.dir, LogConfig(), clock=FakeClock(), clean_shutdown=False)
    assert append(lg2, pbatch(1, pid=3, epoch=0, seq=2)).duplicate


def test_truncation_reloads_producer_state(tmp_path):
    lg = new_log(tmp_path)
    for i in range(5):
        append(lg, pbatch(1, pid=1, epoch=0, seq=i))
    lg.truncate_to(3)
    # sequences 3 and 4 are gone: 3 is next again
    assert append(lg, pbatch(1, pid=1, epoch=0, seq=3)).base_offset == 3


def test_snapshot_file_is_kafkas_v1_layout(tmp_path):
    ps = ProducerStateManager()
    ps.update(11, 2, 0, 4, 100, 104, 555, False)
    ps.update(11, 2, 5, 5, 105, 105, 556, False)
    ps.update(12, 0, 0, 0, 106, 106, 557, True)
    path = str(tmp_path / "00000000000000000107.snapshot")
    ps.write_snapshot(path)
    with open(path, "rb") as f:
        data = f.read()
    version, crc = struct.unpack_from(">hI", data, 0)
    assert version == 1 and crc == crc32c(data[6:])
    (count,) = struct.unpack_from(">i", data, 6)
    assert count == 3 and len(data) == 10 + 46 * count
    first = struct.unpack_from(">qhiqiqiq", data, 10)
    assert first == (11, 2, 4, 104, 4, 555, -1, -1)
    last = struct.unpack_from(">qhiqiqiq", data, 10 + 46 * 2)
    assert last == (12, 0, 0, 106, 0, 557, -1, 106)
    ps2 = ProducerStateManager()
    ps2.load_snapshot(path)
    e = ps2.get(11)
    assert e is not None and [
        (b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in e.batches
    ] == [
        (0, 4, 100, 104),
        (5, 5, 105, 105),
    ]
    assert ps2.first_unstable_offset() == 106
    # a corrupted snapshot is refused
    bad = bytearray(data)
    bad[-1] ^= 1
    with open(path, "wb") as f:
        f.write(bad)
    with pytest.raises(Exception):
        ProducerStateManager().load_snapshot(path)


def test_transactions_bound_the_last_stable_offset(tmp_path):
    lg = new_log(tmp_path)
    append(lg, pbatch(2, pid=1, epoch=0, seq=0))
    append(lg, pbatch(2, pid=2, epoch=0, seq=0, txn=True))
    append(lg, pbatch(1, pid=1, epoch=0, seq=2))
    lg.high_watermark = lg.log_end_offset
    assert lg.last_stable_offset == 2
    marker = bytearray(build_control_batch(producer_id=2, producer_epoch=0, commit=True, timestamp=NOW))
    info = lg.append(marker, split_batches(marker), NOW)
    assert info.base_offset == 5
    lg.high_watermark = lg.log_end_offset
    assert lg.last_stable_offset == 6
    assert lg.producer_state.get(2).current_txn_first_offset == -1


def test_expired_producers_are_forgotten(tmp_path):
    lg = new_log(tmp_path, LogConfig(producer_id_expiration_ms=1000))
    append(lg, pbatch(1, pid=1, epoch=0, seq=0))
    assert lg.producer_state.get(1) is not None
    lg.enforce_retention(NOW + 5000)
    assert lg.producer_state.get(1) is None
    # after expiry the producer is unknown: any sequence is accepted
    assert not append(lg, pbatch(1, pid=1, epoch=0, seq=9)).duplicate


def marker(pid: int, epoch: int, commit: bool) -> bytearray:
    return bytearray(build_control_batch(producer_id=pid, producer_epoch=epoch, commit=commit, timestamp=NOW))


def test_aborted_transactions_are_indexed_and_returned_by_read(tmp_path):
    lg = new_log(tmp_path)
    append(lg, pbatch(2, pid=1, epoch=0, seq=0, txn=True))  # 0-1, aborted below
    append(lg, pbatch(1, pid=2, epoch=0, seq=0, txn=True))  # 2, committed below
    append(lg, pbatch(1, pid=3, epoch=0, seq=0))  # 3, not transactional
    assert append(lg, marker(1, 0, commit=False)).base_offset == 4
    assert append(lg, marker(2, 0, commit=True)).base_offset == 5
    append(lg, pbatch(1, pid=3, epoch=0, seq=1))  # 6
    rr = lg.read(0, 10**6)
    assert rr.aborted_transactions == [(1, 0)]
    assert lg.read(5, 10**6).aborted_transactions is None  # marker 4 is before the range
    assert lg.read(6, 10**6).aborted_transactions is None
    seg = lg.segments[0]
    with open(seg.txnindex_path, "rb") as f:
        data = f.read()
    # version 0, producer 1, first offset 0, last offset (the marker) 4, LSO 2 (producer 2 still open)
    assert data == struct.pack(">hqqqq", 0, 1, 0, 4, 2)
    lg.close()
    lg2 = PartitionLog(lg.dir, LogConfig(), clock=FakeClock())
    assert lg2.read(0, 10**6).aborted_transactions == [(1, 0)]
    for s in lg2.segments:
        s.close_handle()
    os.unlink(seg.txnindex_path)  # lost with a crash: rebuilt from the markers in the log
    for n in os.listdir(lg.dir):
        if n.endswith(".snapshot"):
            os.unlink(os.path.join(lg.dir, n))
    lg3 = PartitionLog(lg.dir, LogConfig(), clock=FakeClock(), clean_shutdown=False)
    assert lg3.read(0, 10**6).aborted_transactions == [(1, 0)]
    with open(seg.txnindex_path, "rb") as f:
        assert f.read() == data
    lg3.truncate_to(4)
    assert lg3.read(0, 10**6).aborted_transactions is None
    assert not os.path.exists(seg.txnindex_path)


def test_sequenceless_batch_of_a_fenced_epoch_is_refused(tmp_path):
    """A coordinator's transactional batch without sequences (TxnOffsetCommit's offsets in
    __consumer_offsets) of an epoch older than the producer's current one is refused, as Kafka's
    checkProducerEpoch does for every origin. The fault run found one appended after the ABORT marker of the
    newer epoch: a transaction left open for good (the group's offsets unstable, its consumer stuck)."""
    lg = new_log(tmp_path)
    append(lg, pbatch(1, 1000, 2, -1, txn=True))
    append(lg, marker(1000, 3, commit=False))  # the coordinator fenced epoch 2 and aborted
    with pytest.raises(InvalidProducerEpochError):
        append(lg, pbatch(1, 1000, 2, -1, txn=True))
    assert lg.log_end_offset == 2
    assert lg.producer_state.first_unstable_offset() is None
    append(lg, pbatch(1, 1000, 3, -1, txn=True))  # the current epoch goes in
    assert lg.log_end_offset == 3
