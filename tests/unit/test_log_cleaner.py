"""moldau.log: log compaction (the log cleaner) with Kafka's semantics; injected clock, no broker."""

from __future__ import annotations

import os

import pytest

import moldau.log.cleaner as cleaner_mod
from moldau.log import LogConfig, LogManager, OutOfOrderSequenceError, PartitionLog
from moldau.log.checkpoint import read_offset_checkpoint
from moldau.log.cleaner import CLEANER_OFFSET_CHECKPOINT
from moldau.protocol.records import (
    BatchBuilder,
    build_control_batch,
    decode_batch,
    parse_batch_header,
    split_batches,
)
from moldau.protocol.records.batch import DELETE_HORIZON_FLAG

NOW = 1_700_000_000_000
DAY = 86_400_000


class FakeClock:
    def __init__(self, ms: int = NOW) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


def cfg(**kw) -> LogConfig:
    base = dict(cleanup_policy=("compact",), segment_bytes=1024, index_interval_bytes=100)
    base.update(kw)
    return LogConfig(**base)


def manager(tmp_path, clock: FakeClock | None = None, **kw) -> LogManager:
    return LogManager([str(tmp_path / "data")], cfg(), clock or FakeClock(), cleaner_backoff_ms=0, **kw)


def put(lg: PartitionLog, pairs, ts: int = NOW, **builder_kw):
    b = BatchBuilder(**builder_kw)
    for i, (k, v) in enumerate(pairs):
        b.append(ts + i, k, v)
    buf = bytearray(b.build())
    info = lg.append(buf, split_batches(buf), ts)
    lg.high_watermark = lg.log_end_offset  # what the broker does on one node
    return info


def marker(lg: PartitionLog, pid: int, epoch: int, commit: bool, ts: int = NOW):
    buf = bytearray(build_control_batch(producer_id=pid, producer_epoch=epoch, commit=commit, timestamp=ts))
    lg.append(buf, split_batches(buf), ts)
    lg.high_watermark = lg.log_end_offset


def all_batches(lg: PartitionLog, start: int | None = None):
    """[(header, records)] of every batch from ``start`` (CRC verified)."""
    out = []
    rr = lg.read(lg.log_start_offset if start is None else start, 10**9)
    for chunk in rr.chunks:
        for pos, h in split_batches(chunk):
            out.append((h, decode_batch(chunk, pos, verify_crc=True)))
    return out


def data_records(lg: PartitionLog, start: int | None = None):
    return [r for h, recs in all_batches(lg, start) if not h.is_control for r in recs]


def kv(lg: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in data_records(lg)]


def overwrite_log(lm: LogManager, rounds: int = 20, keys: int = 5) -> PartitionLog:
    lg = lm.create("t", 0, cfg())
    for rnd in range(rounds):
        for k in range(keys):
            put(lg, [(b"k%d" % k, b"v%d-%d" % (k, rnd))], ts=NOW + rnd * keys + k)
    lg.roll()
    return lg


# ---------------------------------------------------------------------------------------------- basics


def test_overwritten_keys_compact_to_latest_value_at_original_offsets(tmp_path):
    lm = manager(tmp_path)
    lg = overwrite_log(lm)
    leo, start, size = lg.log_end_offset, lg.log_start_offset, lg.size_in_bytes()
    nsegs = len(lg.segments)
    assert nsegs > 4
    stats = lm.cleaner.clean_log(lg, NOW)
    assert stats is not None and stats.swapped
    assert kv(lg) == [(95 + k, b"k%d" % k, b"v%d-19" % k) for k in range(5)]
    assert (lg.log_end_offset, lg.log_start_offset) == (leo, start)
    assert lg.size_in_bytes() < size / 5
    assert stats.end_offset == lg.segments[-1].base_offset == leo
    assert stats.records_read == 100 and stats.records_retained == 5
    # groups are formed from the old sizes (as Kafka does): the next pass merges the small cleaned segments
    assert len(lg.segments) == nsegs
    lm.cleaner.clean_log(lg, NOW)
    assert len(lg.segments) == 2 and kv(lg) == [(95 + k, b"k%d" % k, b"v%d-19" % k) for k in range(5)]
    lm.drain()
    path = os.path.join(lm.log_dirs[0], CLEANER_OFFSET_CHECKPOINT)
    assert read_offset_checkpoint(path) == {("t", 0): leo}
    with open(path) as f:
        assert f.read() == f"0\n1\nt 0 {leo}\n"
    # appends continue at the log end; a restart reloads the cleaned segments and the checkpoint
    put(lg, [(b"k0", b"new")], ts=NOW + 500)
    lm.close()
    lm2 = manager(tmp_path)
    lg2 = lm2.get("t", 0)
    assert kv(lg2) == [(95 + k, b"k%d" % k, b"v%d-19" % k) for k in range(5)] + [(leo, b"k0", b"new")]
    assert lm2.cleaner.first_dirty_offset("t", 0) == leo
    assert not [n for n in os.listdir(lg2.dir) if n.endswith((".cleaned", ".swap"))]
    lm2.close()


def test_reads_and_list_offsets_over_compacted_ranges(tmp_path):
    lm = manager(tmp_path)
    lg = lm.create("t", 0, cfg())
    put(lg, [(b"a", b"1"), (b"b", b"1"), (b"c", b"1")])  # offsets 0..2, one batch
    put(lg, [(b"b", b"2")], ts=NOW + 10)  # 3 supersedes b@1
    for i in range(30):  # filler keys, then all overwritten
        put(lg, [(b"f%d" % (i % 3), b"x" * 40)], ts=NOW + 20 + i)
    lg.roll()
    lm.cleaner.clean_log(lg, NOW)
    batches = all_batches(lg)
    h0, r0 = batches[0]
    # the first batch keeps its base offset and last offset delta (offset 1 is gone from inside it)
    assert (h0.base_offset, h0.last_offset, h0.records_count) == (0, 2, 2)
    assert [(r.offset, r.key, r.timestamp) for r in r0] == [(0, b"a", NOW), (2, b"c", NOW + 2)]
    # a fetch at a removed offset returns the batch holding the next retained record
    assert lg.read(1, 10**6).first_offset == 0
    assert lg.read(4, 10**6).first_offset == 31  # offsets 4..30 are gone: the next batch is f0@31
    assert [r.offset for r in data_records(lg, 4)] == [31, 32, 33]
    assert lg.read(lg.log_end_offset, 10**6).chunks == []
    # ListOffsets by timestamp: first retained record at or after the time
    assert lg.offset_for_timestamp(NOW + 1) == (2, NOW + 2)
    assert lg.offset_for_timestamp(NOW + 5) == (3, NOW + 10)
    assert lg.offset_for_timestamp(NOW + 11) == (31, NOW + 20 + 27)
    assert lg.log_start_offset == 0
    lm.close()


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_are_recompressed_with_their_codec(tmp_path, codec):
    lm = manager(tmp_path)
    lg = lm.create("t", 0, cfg())
    put(lg, [(b"k%d" % i, b"value-%d" % i * 5) for i in range(6)], compression=codec)
    put(lg, [(b"k1", b"new"), (b"k4", None)], ts=NOW + 100)
    lg.roll()
    lm.cleaner.clean_log(lg, NOW)
    (h, recs), (h2, recs2) = all_batches(lg)
    assert h.compression == codec and h.records_count == 4 and (h.base_offset, h.last_offset) == (0, 5)
    assert [(r.offset, r.key) for r in recs] == [(0, b"k0"), (2, b"k2"), (3, b"k3"), (5, b"k5")]
    assert recs[1].value == b"value-2" * 5
    # the batch with the tombstone got the delete horizon; its record timestamps are unchanged
    assert h2.has_delete_horizon and h2.base_timestamp == NOW + DAY
    assert [(r.offset, r.key, r.value, r.timestamp) for r in recs2] == [
        (6, b"k1", b"new", NOW + 100),
        (7, b"k4", None, NOW + 101),
    ]
    lm.close()


# ------------------------------------------------------------------------------------------ tombstones


def test_tombstones_are_removed_after_delete_retention(tmp_path):
    clock = FakeClock()
    lm = manager(tmp_path, clock)
    lg = lm.create("t", 0, cfg(delete_retention_ms=60_000))
    put(lg, [(b"gone", b"v1"), (b"kept", b"v1")])
    put(lg, [(b"gone", None)], ts=NOW + 5)
    for i in range(20):
        put(lg, [(b"other", b"x" * 60)], ts=NOW + 10 + i)
    lg.roll()
    lm.cleaner.clean_log(lg, NOW)
    assert kv(lg) == [(1, b"kept", b"v1"), (2, b"gone", None), (22, b"other", b"x" * 60)]
    h = next(h for h, recs in all_batches(lg) if recs and recs[0].key == b"gone")
    assert h.attributes & DELETE_HORIZON_FLAG and h.base_timestamp == NOW + 60_000
    assert h.max_timestamp == NOW + 5
    # before the horizon the tombstone stays, however often the log is cleaned
    lm.cleaner.clean_log(lg, NOW + 59_999)
    assert (2, b"gone", None) in kv(lg)
    # the quiet log is picked again by tick once its horizon passes (nothing dirty: horizon path)
    lm.tick(NOW + 30_000)
    assert lm.cleaner.wait() is None  # nothing chosen yet
    lm.tick(NOW + 60_000)
    stats = lm.cleaner.wait()
    assert stats is not None and stats.swapped
    assert kv(lg) == [(1, b"kept", b"v1"), (22, b"other", b"x" * 60)]
    assert lg.log_end_offset == 23
    lm.close()


def test_tombstone_superseded_by_a_later_value_goes_at_once(tmp_path):
    lm = manager(tmp_path)
    lg = lm.create("t", 0, cfg())
    put(lg, [(b"k", b"1")])
    put(lg, [(b"k", None)])
    put(lg, [(b"k", b"2")])
    lg.roll()
    lm.cleaner.clean_log(lg, NOW)
    assert kv(lg) == [(2, b"k", b"2")]
    lm.close()


# ------------------------------------------------------------------------------------------- selection


def test_dirty_ratio_lag_and_threaded_tick(tmp_path):
    clock = FakeClock()
    lm = manager(tmp_path, clock)
    lg = overwrite_log(lm)
    lg.update_config(cfg(min_compaction_lag_ms=60_000))
    lm.tick(NOW + 1_000)  # everything is younger than min.compaction.lag.ms
    assert lm.cleaner.wait() is None
    assert lm.cleaner.candidate(lg, NOW + 1_000) is None
    lm.tick(NOW + 61_000)  # the pass runs in the cleaner thread, the swap happens on the next tick
    assert lm.cleaner._future is not None
    lm.cleaner._future.result(10)
    assert len(kv(lg)) == 100  # not swapped in yet
    lm.tick(NOW + 61_001)
    assert len(kv(lg)) == 5
    assert lm.cleaner.last_stats is not None and lm.cleaner.last_stats.swapped
    # a little new dirty data: ratio below 0.5, nothing to do
    put(lg, [(b"k0", b"again")], ts=NOW + 62_000)
    lg.roll()
    c = lm.cleaner.candidate(lg, NOW + 200_000)
    assert c is not None and 0 < c.ratio < 0.5
    lm.tick(NOW + 200_000)
    assert lm.cleaner._future is None
    # ... until max.compaction.lag.ms forces it
    lg.update_config(cfg(min_compaction_lag_ms=60_000, max_compaction_lag_ms=100_000))
    lm.tick(NOW + 200_001)
    assert lm.cleaner.wait().swapped
    assert kv(lg)[0] == (96, b"k1", b"v1-19") and kv(lg)[-1] == (100, b"k0", b"again")
    lm.close()


def test_compacted_active_segment_rolls_after_max_compaction_lag(tmp_path):
    lm = manager(tmp_path)
    lg = lm.create("t", 0, cfg(max_compaction_lag_ms=5_000))
    put(lg, [(b"k", b"v")])
    assert not lg.maybe_roll_by_time(NOW + 4_000)
    assert lg.maybe_roll_by_time(NOW + 6_000)
    lm.close()


def test_open_transaction_bounds_the_cleanable_range(tmp_path):
    lm = manager(tmp_path)
    lg = lm.create("t", 0, cfg())
    for i in range(10):
        put(lg, [(b"k", b"x" * 50)])
    put(lg, [(b"t", b"1")], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True)  # @10
    for i in range(30):
        put(lg, [(b"k", b"y" * 50)])
    lg.roll()
    assert lg.last_stable_offset == 10
    c = lm.cleaner.candidate(lg, NOW)
    assert c is not None and c.end <= 10
    lm.cleaner.clean_log(lg, NOW)
    offsets = [o for o, k, _ in kv(lg) if k == b"k"]
    # records before the open transaction's segment were compacted, the ones after it were not touched
    assert offsets == [c.end - 1] + list(range(c.end, 10)) + list(range(11, 41))
    lm.close()


# ---------------------------------------------------------------------------------------- crash safety


@pytest.mark.parametrize("stage", ["before_commit", "after_commit", "before_finish"])
def test_crash_during_swap_recovers(tmp_path, monkeypatch, stage):
    lm = manager(tmp_path)
    lg = overwrite_log(lm)
    original = kv(lg)
    leo = lg.log_end_offset
    segs = lg.segments
    assert segs[0].size + segs[1].size > 1024  # the first cleaned group is the first segment alone
    first_group_end = segs[1].base_offset
    real_commit, real_finish = cleaner_mod.commit_cleaned, cleaner_mod.finish_swap

    class Crash(Exception):
        pass

    def commit(d, base):
        if stage == "before_commit":
            raise Crash()
        real_commit(d, base)
        if stage == "after_commit":
            raise Crash()

    def finish(d, base):
        raise Crash()

    monkeypatch.setattr(cleaner_mod, "commit_cleaned", commit)
    monkeypatch.setattr(cleaner_mod, "finish_swap", finish)
    with pytest.raises(Crash):
        lm.cleaner.clean_log(lg, NOW)
    names = os.listdir(lg.dir)
    if stage == "before_commit":
        assert any(n.endswith(".log.cleaned") for n in names)
    else:
        assert any(n.endswith(".log.swap") for n in names)
    # the process dies here: no flush, no snapshot, no clean-shutdown marker
    for seg in lg.segments:
        seg.close_handle()
    lm.cleaner.shutdown()
    lm.drain()
    lm._release_locks()
    monkeypatch.setattr(cleaner_mod, "commit_cleaned", real_commit)
    monkeypatch.setattr(cleaner_mod, "finish_swap", real_finish)

    lm2 = manager(tmp_path)
    lg2 = lm2.get("t", 0)
    assert not [n for n in os.listdir(lg2.dir) if n.endswith((".cleaned", ".swap"))]
    assert lg2.log_end_offset == leo
    if stage == "before_commit":
        assert kv(lg2) == original  # the old segments are intact
    else:
        # the first group was swapped in (all its records were superseded), the rest is as it was
        assert kv(lg2) == [x for x in original if x[0] >= first_group_end]
        assert lg2.segments[0].base_offset == 0 and lg2.segments[0].size == 0
    # the log works: append, clean again, read
    put(lg2, [(b"k0", b"after")], ts=NOW + 1000)
    lg2.roll()
    lm2.cleaner.clean_log(lg2, NOW + 1000)
    assert kv(lg2)[-1] == (leo, b"k0", b"after")
    assert [k for _o, k, _v in kv(lg2)] == [b"k1", b"k2", b"k3", b"k4", b"k0"]
    lm2.close()


# -------------------------------------------------------------------------------------- compact,delete


def test_compact_and_delete_together(tmp_path):
    clock = FakeClock()
    lm = manager(tmp_path, clock)
    lg = lm.create("t", 0, cfg(cleanup_policy=("compact", "delete"), retention_ms=100_000))
    old = NOW - 1_000_000
    for i in range(12):
        put(lg, [(b"old%d" % (i % 3), b"o" * 60)], ts=old + i)
    lg.roll()
    for seg in lg.segments[:-1]:  # old files: an emptied cleaned segment inherits their mtime (Kafka)
        os.utime(seg.log_path, (old / 1000, old / 1000))
    for i in range(12):
        put(lg, [(b"new%d" % (i % 3), b"n" * 60)], ts=NOW + i)
    lg.roll()
    lm.cleaner.clean_log(lg, NOW)
    keys = [k for _o, k, _v in kv(lg)]
    assert keys == [b"old0", b"old1", b"old2", b"new0", b"new1", b"new2"]
    lm.tick(NOW + 20)  # the first tick applies retention: the old keys are past retention.ms
    lm.cleaner.wait()
    assert [k for _o, k, _v in kv(lg)] == [b"new0", b"new1", b"new2"]
    assert lg.log_start_offset >= 12
    # the checkpoint below the new log start offset is handled: new writes compact again
    for i in range(12):
        put(lg, [(b"new%d" % (i % 3), b"m" * 60)], ts=NOW + 100 + i)
    lg.roll()
    lm.cleaner.clean_log(lg, NOW + 200)
    assert [(k, v[:1]) for _o, k, v in kv(lg)] == [(b"new0", b"m"), (b"new1", b"m"), (b"new2", b"m")]
    lm.close()


# ------------------------------------------------------------------------------------------- producers


def test_idempotent_producer_state_survives_compaction_and_restart(tmp_path):
    lm = manager(tmp_path)
    lg = lm.create("t", 0, cfg())
    idem = dict(producer_id=7, producer_epoch=0)
    put(lg, [(b"a", b"1")], base_sequence=0, **idem)  # @0
    put(lg, [(b"b", b"1"), (b"c", b"1")], base_sequence=1, **idem)  # @1..2, last seq 2
    put(lg, [(b"a", b"2"), (b"b", b"2"), (b"c", b"2")])  # a plain producer supersedes everything
    lg.roll()
    lm.cleaner.clean_log(lg, NOW)
    batches = all_batches(lg)
    assert [r.offset for r in data_records(lg)] == [3, 4, 5]
    # the producer's last batch stays as an empty header (Kafka's RETAIN_EMPTY); its first batch is gone
    h, recs = batches[0]
    assert (h.producer_id, h.base_offset, h.last_offset, h.base_sequence, h.records_count) == (7, 1, 2, 1, 0)
    assert recs == []
    # a restart without any producer snapshot rebuilds the state from the log
    lm.close()
    for name in os.listdir(lg.dir):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(lg.dir, name))
    lm2 = manager(tmp_path)
    lg2 = lm2.get("t", 0)
    e = lg2.producer_state.get(7)
    assert e is not None and e.last_seq == 2
    dup = put(lg2, [(b"b", b"1"), (b"c", b"1")], base_sequence=1, **idem)
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (1, 2)
    with pytest.raises(OutOfOrderSequenceError):
        put(lg2, [(b"x", b"1")], base_sequence=5, **idem)
    assert not put(lg2, [(b"x", b"1")], base_sequence=3, **idem).duplicate
    lm2.close()


def test_empty_batch_of_a_producer_that_expired_is_dropped(tmp_path):
    lm = manager(tmp_path)
    lg = lm.create("t", 0, cfg())
    put(lg, [(b"a", b"1")], producer_id=7, producer_epoch=0, base_sequence=0)
    put(lg, [(b"a", b"2")])
    lg.roll()
    lm.cleaner.clean_log(lg, NOW)
    assert [h.records_count for h, _ in all_batches(lg)] == [0, 1]
    lg.producer_state.remove_expired(NOW + 10 * DAY)
    lm.cleaner.clean_log(lg, NOW)
    assert [(h.base_offset, h.records_count) for h, _ in all_batches(lg)] == [(1, 1)]
    lm.close()


def test_aborted_transactions_and_markers(tmp_path):
    lm = manager(tmp_path)
    lg = lm.create("t", 0, cfg(delete_retention_ms=1_000))
    txn = dict(producer_epoch=0, is_transactional=True)
    put(lg, [(b"x", b"aborted"), (b"z", b"aborted")], producer_id=10, base_sequence=0, **txn)  # 0..1
    put(lg, [(b"y", b"committed")], producer_id=11, base_sequence=0, **txn)  # 2
    marker(lg, 10, 0, commit=False)  # 3: ABORT
    marker(lg, 11, 0, commit=True)  # 4: COMMIT
    put(lg, [(b"x", b"plain")])  # 5
    put(lg, [(b"keep", b"1")], producer_id=11, base_sequence=1, **txn)  # 6
    marker(lg, 11, 0, commit=True)  # 7
    put(lg, [(b"y", b"plain")])  # 8: supersedes the committed y@2
    lg.roll()
    assert lg.aborted_transactions(0, 9) == [(10, 0)]
    lg.producer_state.clear()  # no active producers: no batch is kept for producer state

    def layout():
        return [(h.base_offset, h.is_control, [r.key for r in recs] if not h.is_control else None)
                for h, recs in all_batches(lg)]

    # pass 1: aborted data removed; both markers of 0..4 stay (their transactions' data was still there)
    lm.cleaner.clean_log(lg, NOW)
    assert layout() == [(3, True, None), (4, True, None), (5, False, [b"x"]), (6, False, [b"keep"]),
                        (7, True, None), (8, False, [b"y"])]
    assert lg.aborted_transactions(0, 9) == [(10, 0)]
    # pass 2: no data left for the first two transactions: the markers get a delete horizon
    lm.cleaner.clean_log(lg, NOW + 10)
    hs = {h.base_offset: h for h, _ in all_batches(lg)}
    assert hs[3].has_delete_horizon and hs[3].base_timestamp == NOW + 10 + 1_000
    assert hs[4].has_delete_horizon and not hs[7].has_delete_horizon
    assert lg.aborted_transactions(0, 9) == []  # its data is gone: the .txnindex entry too
    # pass 3, after the horizon: the markers are removed; the committed transaction with data keeps its marker
    lm.cleaner.clean_log(lg, NOW + 10 + 1_000)
    assert layout() == [(5, False, [b"x"]), (6, False, [b"keep"]), (7, True, None), (8, False, [b"y"])]
    assert lg.log_end_offset == 9
    lm.close()


def test_read_committed_still_sees_aborted_ranges_after_a_restart(tmp_path):
    lm = manager(tmp_path)
    lg = lm.create("t", 0, cfg())
    txn = dict(producer_epoch=0, is_transactional=True)
    put(lg, [(b"x", b"aborted")], producer_id=10, base_sequence=0, **txn)  # 0
    marker(lg, 10, 0, commit=False)  # 1
    put(lg, [(b"y", b"1")])  # 2
    lg.roll()
    lm.cleaner.clean_log(lg, NOW)  # producer 10 is active: its aborted batch stays as an empty header
    hs = [(h.base_offset, h.records_count, h.is_control) for h, _ in all_batches(lg)]
    assert hs == [(0, 0, False), (1, 1, True), (2, 1, False)]
    lm.close()
    lm2 = manager(tmp_path)
    lg2 = lm2.get("t", 0)
    assert lg2.aborted_transactions(0, 3) == [(10, 0)]
    assert lg2.producer_state.get(10) is not None
    lm2.close()


# ------------------------------------------------------------------------------------------- lifecycle


def test_non_compacted_logs_are_left_alone_and_delete_forgets_the_checkpoint(tmp_path):
    lm = manager(tmp_path)
    plain = lm.create("p", 0, LogConfig(segment_bytes=1024))
    for i in range(30):
        put(plain, [(b"k", b"v" * 50)])
    plain.roll()
    assert lm.cleaner.clean_log(plain, NOW) is None
    assert len(data_records(plain)) == 30
    lg = overwrite_log(lm)
    lm.cleaner.clean_log(lg, NOW)
    assert lm.cleaner.first_dirty_offset("t", 0) == 100
    lm.delete("t", 0)
    lm.drain()
    assert lm.cleaner.first_dirty_offset("t", 0) is None
    assert read_offset_checkpoint(os.path.join(lm.log_dirs[0], CLEANER_OFFSET_CHECKPOINT)) == {}
    lm.close()


def test_log_changed_during_a_pass_drops_the_cleaned_files(tmp_path):
    lm = manager(tmp_path)
    lg = overwrite_log(lm)
    c = lm.cleaner.candidate(lg, NOW)
    task = lm.cleaner._make_task(c, NOW)
    res = cleaner_mod.run_pass(task)
    lg.truncate_to(50)  # the old segments changed under the pass
    stats = lm.cleaner._install(lg, res)
    assert not stats.swapped
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".cleaned", ".swap"))]
    assert [o for o, _k, _v in kv(lg)] == list(range(50))
    lm.close()


def test_swap_files_left_by_kafka_style_interrupted_swap_are_completed(tmp_path):
    """A .swap whose old segments were not deleted yet: the old ones in its range go, the swap stays."""
    d = tmp_path / "data" / "t-0"
    lg = PartitionLog(str(d), cfg(), clock=FakeClock())
    for i in range(20):
        put(lg, [(b"k", b"%d" % i + b"x" * 60)])
    lg.close()
    segs = sorted(n for n in os.listdir(d) if n.endswith(".log"))
    assert len(segs) >= 3
    # craft the cleaned copy of the first two segments: only the last batch of the second one
    last_base = int(segs[2][:20])
    lg2 = PartitionLog(str(d), cfg(), clock=FakeClock())
    chunk = b"".join(lg2.read(last_base - 1, 10**6, max_offset=last_base).chunks)
    lg2.close()
    first = parse_batch_header(chunk)
    assert first.base_offset == last_base - 1
    (d / segs[0].replace(".log", ".log.swap")).write_bytes(chunk)
    (d / "00000000000000000000.index.cleaned").write_bytes(b"junk")
    lg3 = PartitionLog(str(d), cfg(), clock=FakeClock())
    assert [s.base_offset for s in lg3.segments][:2] == [0, last_base]
    assert [r.offset for r in data_records(lg3)][0] == last_base - 1
    assert lg3.log_end_offset == 20
    assert not [n for n in os.listdir(d) if n.endswith((".cleaned", ".swap"))]
    lg3.close()


def test_full_offset_map_cleans_in_several_passes(tmp_path):
    # room for 4 keys: int(640 * 0.9) // MAP_ENTRY_BYTES
    lm = manager(tmp_path, cleaner_dedupe_buffer_size=640)
    assert lm.cleaner.max_map_entries == 4
    lg = lm.create("t", 0, cfg())
    latest = {}
    for rnd in range(3):
        for k in range(12):
            info = put(lg, [(b"key%02d" % k, b"r%d" % rnd + b"." * 40)], ts=NOW + rnd * 12 + k)
            latest[b"key%02d" % k] = info.base_offset
    lg.roll()
    ends = []
    for _ in range(20):
        c = lm.cleaner.candidate(lg, NOW)
        if c.dirty_bytes == 0:
            break
        ends.append(lm.cleaner.clean_log(lg, NOW).end_offset)
    assert len(ends) > 2 and ends == sorted(ends) and ends[-1] == lg.log_end_offset
    assert sorted((o, k) for o, k, _v in kv(lg)) == sorted((o, k) for k, o in latest.items())
    lm.close()


def test_corrupt_segment_marks_the_partition_uncleanable(tmp_path):
    lm = manager(tmp_path)
    lg = overwrite_log(lm)
    before = kv(lg)
    seg = lg.segments[1]
    with open(seg.log_path, "r+b") as f:  # flip a byte inside the first record of a non-active segment
        f.seek(70)
        b = f.read(1)
        f.seek(70)
        f.write(bytes([b[0] ^ 0xFF]))
    lm.tick(NOW)
    assert lm.cleaner.wait() is None
    assert ("t", 0) in lm.cleaner._uncleanable
    lm.tick(NOW + 1)
    assert lm.cleaner._future is None  # not tried again
    assert len(kv_unchecked(lg)) == len(before)
    assert not [n for n in os.listdir(lg.dir) if n.endswith((".cleaned", ".swap"))]
    lm.close()


def kv_unchecked(lg: PartitionLog):
    out = []
    for chunk in lg.read(lg.log_start_offset, 10**9).chunks:
        for pos, h in split_batches(chunk):
            out.append(h.base_offset)
    return out


def test_marker_of_an_active_producer_without_data_is_kept_empty_then_dropped(tmp_path):
    lm = manager(tmp_path)
    lg = lm.create("t", 0, cfg(delete_retention_ms=100))
    put(lg, [(b"a", b"1")], producer_id=3, producer_epoch=2, base_sequence=0, is_transactional=True)  # 0
    marker(lg, 3, 2, commit=True)  # 1
    put(lg, [(b"a", b"2")])  # 2
    lg.roll()
    lg.producer_state.get(
        3
    ).batches.clear()  # producer 3 is active but has no data batch left (Kafka's case 3)

    def layout():
        return [(h.base_offset, h.is_control, h.records_count) for h, _ in all_batches(lg)]

    lm.cleaner.clean_log(lg, NOW)  # data superseded and gone; the marker stays while its data was there
    assert layout() == [(1, True, 1), (2, False, 1)]
    lm.cleaner.clean_log(lg, NOW)  # no data left: horizon stamped
    assert all_batches(lg)[0][0].has_delete_horizon
    lm.cleaner.clean_log(lg, NOW + 100)  # past the horizon: records go, the header stays for producer 3
    assert layout() == [(1, True, 0), (2, False, 1)]
    lg.producer_state.clear()  # producer 3 expired
    lm.cleaner.clean_log(lg, NOW + 200)
    assert layout() == [(2, False, 1)]
    lm.close()
