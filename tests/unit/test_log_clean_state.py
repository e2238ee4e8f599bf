"""A clean start from the clean-shutdown state (moldau.log.clean_state): the partitions are opened without a
file of theirs read, hold what a load from their files holds, and write the same files afterwards; the state
is not trusted without its marker, with another marker, when corrupt, or for a file that changed."""

from __future__ import annotations

import logging
import os

from moldau.log import LogConfig, LogManager
from moldau.log.checkpoint import CLEAN_SHUTDOWN_FILE
from moldau.log.clean_state import CLEAN_STATE_FILE
from moldau.protocol.records import BatchBuilder, split_batches

CFG = LogConfig(segment_bytes=20_000, index_interval_bytes=1024)


class FakeClock:
    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


def batch(i: int, size: int = 300, pid: int = -1, seq: int = -1) -> bytearray:
    b = BatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)
    b.append(1_700_000_000_000 + i, b"k%d" % i, b"v" * size)
    return bytearray(b.build())


def append(lg, buf: bytearray, epoch: int = 0):
    return lg.append(buf, split_batches(buf), 1_700_000_000_000, leader_epoch=epoch)


def populate(d: str, compact_topic: bool = False) -> None:
    lm = LogManager([d], CFG, FakeClock())
    plain = lm.create("t", 0)
    for i in range(150):  # several segments, index entries, two leader epochs
        append(plain, batch(i), epoch=0 if i < 100 else 3)
    idem = lm.create("t", 1)
    for i in range(10):  # an idempotent producer's batches
        append(idem, batch(i, pid=7, seq=i))
    lm.create("t", 2)  # empty
    if compact_topic:
        c = lm.create("c", 0, LogConfig(segment_bytes=20_000, cleanup_policy=("compact",)))
        append(c, batch(0))
    lm.close()


def snapshot(lm: LogManager) -> dict:
    out = {}
    for key in sorted(lm.partitions()):
        lg = lm.get(*key)
        act = lg.segments[-1]
        out[key] = (lg.log_start_offset, lg.log_end_offset, lg.high_watermark, lg.recovery_point, lg.topic_id,
                    [(s.base_offset, s.size) for s in lg.segments], lg.leader_epochs,
                    sorted(lg.producer_state.snapshot_entries()),
                    (act.max_timestamp, act.max_timestamp_offset, act.rolling_timestamp,
                     act.bytes_since_index))
    return out


def dir_files(d: str) -> dict[str, bytes]:
    out = {}
    for root, _dirs, names in os.walk(d):
        for n in names:
            if n in (".lock", CLEAN_SHUTDOWN_FILE, CLEAN_STATE_FILE) or "checkpoint" in n:
                continue
            with open(os.path.join(root, n), "rb") as f:
                out[os.path.relpath(os.path.join(root, n), d)] = f.read()
    return out


def use(lm: LogManager) -> None:
    """Appends (one a duplicate of the idempotent producer's last batch), reads and a timestamp lookup."""
    plain = lm.get("t", 0)
    for i in range(150, 170):
        append(plain, batch(i), epoch=3)
    idem = lm.get("t", 1)
    assert append(idem, batch(9, pid=7, seq=9)).duplicate
    append(idem, batch(10, pid=7, seq=10))
    assert plain.read(120, 100_000).first_offset == 120
    assert plain.offset_for_timestamp(1_700_000_000_000 + 160) is not None
    append(lm.get("t", 2), batch(0))


def test_clean_start_from_the_state_reads_no_partition_file_and_matches_a_load_from_the_files(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    populate(a)
    os.system(f"cp -a {a} {b}")  # noqa: S605 - the same closed directory twice
    os.unlink(os.path.join(b, CLEAN_STATE_FILE))  # b: loaded from its files (clean shutdown marker kept)

    from_state = LogManager([a], CFG, FakeClock())
    from_files = LogManager([b], CFG, FakeClock())
    assert not os.path.exists(os.path.join(a, CLEAN_STATE_FILE))  # removed at start, with the marker
    for key in from_state.partitions():
        segs = from_state.get(*key).segments
        assert all(s.lazy for s in segs) and not any(s._oi_loaded or s._ti_loaded for s in segs)
        assert all(s._fd is None for s in segs)  # no file opened
    assert not any(s.lazy for k in from_files.partitions() for s in from_files.get(*k).segments)
    assert snapshot(from_state) == snapshot(from_files)

    use(from_state)
    use(from_files)
    assert snapshot(from_state) == snapshot(from_files)
    from_state.close()
    from_files.close()
    assert dir_files(a) == dir_files(b)  # the same indexes, snapshots and segments written


def test_untouched_partitions_close_without_writing(tmp_path):
    d = str(tmp_path / "d")
    populate(d)
    before = dir_files(d)
    lm = LogManager([d], CFG, FakeClock())
    lm.close()
    assert dir_files(d) == before
    again = LogManager([d], CFG, FakeClock())  # the state was written again at this close
    assert all(s.lazy for k in again.partitions() for s in again.get(*k).segments)
    again.close()


def test_state_is_not_used_without_its_marker(tmp_path, caplog):
    """An unclean stop (no marker) after a clean one: the partitions are recovered from their files, a torn
    tail is cut, whatever the (stale) state file says."""
    d = str(tmp_path / "d")
    populate(d)
    os.unlink(os.path.join(d, CLEAN_SHUTDOWN_FILE))
    active = sorted(n for n in os.listdir(os.path.join(d, "t-0")) if n.endswith(".log"))[-1]
    with open(os.path.join(d, "t-0", active), "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x99torn")
    caplog.set_level(logging.INFO, logger="moldau.log")
    lm = LogManager([d], CFG, FakeClock())
    assert not any(s.lazy for k in lm.partitions() for s in lm.get(*k).segments)
    assert any("recovering" in r.getMessage() for r in caplog.records)
    assert lm.get("t", 0).log_end_offset == 150
    assert not os.path.exists(os.path.join(d, CLEAN_STATE_FILE))
    lm.close()


def test_state_of_another_clean_shutdown_is_not_used(tmp_path, caplog):
    """A moldau that does not know the state file started and stopped cleanly in between (its marker is
    another file): the state is ignored."""
    d = str(tmp_path / "d")
    populate(d)
    marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
    os.unlink(marker)
    open(marker, "wb").close()
    caplog.set_level(logging.INFO, logger="moldau.log")
    lm = LogManager([d], CFG, FakeClock())
    assert not any(s.lazy for k in lm.partitions() for s in lm.get(*k).segments)
    assert any("another clean shutdown" in r.getMessage() for r in caplog.records)
    assert lm.get("t", 0).log_end_offset == 150
    lm.close()


def test_corrupt_state_is_ignored(tmp_path, caplog):
    d = str(tmp_path / "d")
    populate(d)
    path = os.path.join(d, CLEAN_STATE_FILE)
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        data[-5] ^= 0x01
        f.seek(0)
        f.write(data)
    caplog.set_level(logging.INFO, logger="moldau.log")
    lm = LogManager([d], CFG, FakeClock())
    assert not any(s.lazy for k in lm.partitions() for s in lm.get(*k).segments)
    assert any("unusable" in r.getMessage() for r in caplog.records)
    assert lm.get("t", 0).log_end_offset == 150
    lm.close()


def test_a_log_file_that_changed_since_the_clean_shutdown_is_recovered_on_first_use(tmp_path, caplog):
    d = str(tmp_path / "d")
    populate(d)
    active = sorted(n for n in os.listdir(os.path.join(d, "t-0")) if n.endswith(".log"))[-1]
    path = os.path.join(d, "t-0", active)
    size = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(b"\x00" * 40)  # bytes the state does not know of
    caplog.set_level(logging.INFO, logger="moldau.log")
    lm = LogManager([d], CFG, FakeClock())
    lg = lm.get("t", 0)
    assert lg.segments[-1].lazy
    append(lg, batch(150), epoch=3)
    assert any("recovering the segment" in r.getMessage() for r in caplog.records)
    assert lg.log_end_offset == 151
    assert lg.read(150, 100_000).first_offset == 150
    lm.close()
    assert os.path.getsize(path) > size  # the junk was cut, the new batch written after the old end
    again = LogManager([d], CFG, FakeClock())
    assert again.get("t", 0).log_end_offset == 151
    again.close()


def test_compacted_logs_are_loaded_from_their_files(tmp_path):
    d = str(tmp_path / "d")
    populate(d, compact_topic=True)
    compact = LogConfig(segment_bytes=20_000, cleanup_policy=("compact",), index_interval_bytes=1024)
    lm = LogManager([d], compact, FakeClock())
    assert not lm.get("c", 0).segments[-1].lazy
    assert lm.get("t", 0).segments[-1].lazy
    assert lm.get("c", 0).log_end_offset == 1
    lm.close()
