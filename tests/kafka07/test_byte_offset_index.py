"""moldau.log.byte_offsets driven by a PartitionLog (no broker): the index file beside the segments, kept
through rolls, retention, truncation, reopening, a torn tail and entries past a crashed log's end."""

from __future__ import annotations

import os
import struct

import pytest

from moldau.broker.kafka07.service import IndexPending, Kafka07Service
from moldau.log import LogConfig, PartitionLog
from moldau.log.byte_offsets import FILE_NAME
from moldau.protocol import kafka07 as k07
from moldau.protocol.records import BatchBuilder, split_batches


class FakeClock:
    def __init__(self, ms: int = 1_700_000_000_000) -> None:
        self.ms = ms

    def time(self) -> float:
        return self.ms / 1000


def _append(lg: PartitionLog, values: list[bytes], codec: int = 0) -> None:
    b = BatchBuilder(compression=codec)
    for v in values:
        b.append(1_700_000_000_000, None, v)
    buf = bytearray(b.build(0))
    lg.append(buf, split_batches(buf), 1_700_000_000_000)
    lg.high_watermark = lg.log_end_offset


def _views(lg: PartitionLog) -> list[tuple[int, bytes]]:
    """(byte position, 0.7 view) of every batch, from the index and the log."""
    idx = lg.byte_offsets_cover(lg.high_watermark)
    out = []
    for base, nxt, pos, size in idx.entries():
        if nxt <= lg.log_start_offset:
            continue
        rr = lg.read(max(base, lg.log_start_offset), 1 << 20, max_offset=lg.high_watermark)
        buf = b"".join(rr.chunks)
        p, h = split_batches(buf)[0]
        view = k07.batch_to_message_set(buf, p, h)
        assert len(view) == size
        out.append((pos, view))
    return out


def _log(path: str) -> PartitionLog:
    return PartitionLog(path, LogConfig(segment_bytes=400, index_interval_bytes=100), clock=FakeClock())


def test_index_is_kept_by_the_log(tmp_path) -> None:
    d = str(tmp_path / "t-0")
    lg = _log(d)
    assert lg.byte_offsets is None and not os.path.exists(os.path.join(d, FILE_NAME))  # only once used
    for i in range(12):
        _append(lg, [b"p%d-%d" % (i, j) * 3 for j in range(i % 3 + 1)], codec=(0, 1, 2, 3)[i % 4])
    views = _views(lg)
    assert len(lg.segments) > 3
    positions = [p for p, _v in views]
    assert positions[0] == 0
    assert all(p2 == p1 + len(v1) for (p1, v1), p2 in zip(views, positions[1:]))
    lg.close()

    lg = _log(d)  # reopened: the same entries, read back from the file
    assert lg.byte_offsets is not None
    assert _views(lg) == views
    # retention: the first segments go; what stays keeps its positions, the file keeps the running end
    cut = lg.segments[2].base_offset
    lg.delete_records_before(cut)
    kept = _views(lg)
    assert kept and set(kept) <= set(views) and kept[-1] == views[-1]
    assert lg.byte_offsets.start_position(lg.log_start_offset) == kept[0][0] > 0
    size_before = os.path.getsize(os.path.join(d, FILE_NAME))
    assert size_before < 28 * len(views)  # trimmed
    # truncation drops the tail's entries; new appends continue from the new end
    last_base = lg.byte_offsets.bases[-1]
    lg.truncate_to(last_base)
    assert lg.byte_offsets.entries()[-1][0] < last_base
    _append(lg, [b"after-truncation"])
    again = _views(lg)
    assert again[:-1] == kept[:-1] and again[-1][0] == kept[-1][0]
    lg.close()


def test_torn_tail_and_entries_past_the_log_end(tmp_path) -> None:
    d = str(tmp_path / "t-0")
    lg = _log(d)
    for i in range(5):
        _append(lg, [b"v%d" % i])
    views = _views(lg)
    leo = lg.log_end_offset
    lg.close()
    path = os.path.join(d, FILE_NAME)
    with open(path, "ab") as f:  # an entry for a batch the log lost in a crash, then a torn entry
        f.write(struct.pack(">qqqi", leo, leo + 1, views[-1][0] + len(views[-1][1]), 11))
        f.write(b"\x00\x01\x02")
    lg = _log(d)
    assert [e[0] for e in lg.byte_offsets.entries()] == list(range(5))
    assert _views(lg) == views
    assert os.path.getsize(path) == 28 * 5
    _append(lg, [b"next"])
    assert _views(lg)[:5] == views
    lg.close()


def test_index_created_after_data_and_retention_counts_from_the_log_start(tmp_path) -> None:
    """A log first read by a 0.7 client after retention already ran: byte 0 is its log start."""
    d = str(tmp_path / "t-0")
    lg = _log(d)
    for i in range(10):
        _append(lg, [b"x%d" % i * 20])
    lg.delete_records_before(lg.segments[1].base_offset)
    views = _views(lg)
    assert views[0][0] == 0
    lg.close()


def test_delete_records_past_the_indexed_part_keeps_positions(tmp_path) -> None:
    """DeleteRecords moves the log start past batches no 0.7 read has indexed yet: they are indexed first,
    so the batches after them keep the positions a full index gives."""
    full = _log(str(tmp_path / "a-0"))
    part = _log(str(tmp_path / "b-0"))
    for lg in (full, part):
        for i in range(8):
            _append(lg, [b"r%d-%d" % (i, j) * (i + 1) for j in range(3)], codec=i % 2)
    part.byte_offsets_cover(2)  # the first two batches only
    expected = _views(full)
    part.delete_records_before(16)  # inside a batch, past the indexed part
    assert part.log_start_offset == 16
    got = _views(part)
    assert got == [v for v in expected if v[0] >= got[0][0]] and got[-1] == expected[-1]
    full.close()
    part.close()


def test_index_is_built_in_bounded_steps(tmp_path) -> None:
    """``byte_offsets_step`` extends the index one chunk of the log at a time (what the legacy listener runs
    as separate event-loop callbacks): several steps, then the same entries as one whole ``cover``."""
    lg = PartitionLog(str(tmp_path / "s-0"), LogConfig(), clock=FakeClock())
    for i in range(300):
        _append(lg, [b"step-%d-%d " % (i, j) * 40 for j in range(5)], codec=i % 2)
    steps = 1
    while not lg.byte_offsets_step(lg.high_watermark, 0.0):  # a zero budget: one chunk per step
        steps += 1
    assert steps >= 5
    stepped = lg.byte_offsets.entries()
    lg.close()
    os.unlink(str(tmp_path / "s-0" / FILE_NAME))
    lg = PartitionLog(str(tmp_path / "s-0"), LogConfig(), clock=FakeClock())
    assert lg.byte_offsets_cover(lg.high_watermark).entries() == stepped
    lg.close()


class _Partition:
    def __init__(self, plog: PartitionLog) -> None:
        self.log, self.topic, self.index = plog, "t", 0


def _read_all(lg: PartitionLog, svc: Kafka07Service, start: int = 0, size: int = 150) -> bytes:
    """What a 0.7 consumer reads from byte ``start`` to the end in fetches of ``size`` bytes, going on
    from the end of the last whole message of each answer."""
    out = bytearray()
    pos = start
    while True:
        try:
            data = svc.read(_Partition(lg), pos, size)
        except IndexPending as e:  # what the listener runs off the loop, run here
            while not e.step():
                pass
            continue
        msgs = k07.parse_message_set(data, strict=False)
        if not msgs:
            return bytes(out)
        n = sum(m.size for m in msgs)
        out += data[:n]
        pos += n


def test_views_are_stored_by_reads(tmp_path) -> None:
    """The views a 0.7 read converts are stored beside the index when they continue the store, and later
    reads of them are preads of the same bytes; the store is cut with truncation and retention, dropped
    after an unclean shutdown (reads convert again, the index stays)."""
    from moldau.log.byte_offsets import VIEW_PREFIX

    d = str(tmp_path / "t-0")
    lg = _log(d)
    svc = Kafka07Service(None, None, None, None)
    for i in range(6):
        _append(lg, [b"s%d-%d" % (i, j) * 4 for j in range(i % 3 + 1)], codec=(0, 1, 2)[i % 3])
    whole = b"".join(v for _p, v in _views(lg))
    assert lg.byte_offsets.views.start is None  # indexing stores nothing
    assert _read_all(lg, svc) == whole  # converted, and stored as it went
    idx = lg.byte_offsets
    assert idx.views.start == 0 and idx.views.end == len(whole)
    assert idx.views.read(0, len(whole)) == whole
    svc.views = type(svc.views)()  # no cached views: the next read is the store's
    assert _read_all(lg, svc) == whole and svc.views.size == 0
    lg.truncate_to(idx.bases[-2])
    assert idx.views.end == idx.end_position
    for i in range(3):
        _append(lg, [b"more-%d" % i * 7])
    whole = b"".join(v for _p, v in _views(lg))
    assert _read_all(lg, svc) == whole and idx.views.end == len(whole)
    lg.delete_records_before(lg.segments[-1].base_offset)
    first = idx.start_position(lg.log_start_offset)
    assert _read_all(lg, svc, first) == whole[first:]
    lg.close()
    lg = PartitionLog(d, LogConfig(segment_bytes=400, index_interval_bytes=100), clock=FakeClock())
    assert lg.byte_offsets.views.end == len(whole)  # a clean reopen keeps them
    lg.close()
    lg = PartitionLog(d, LogConfig(segment_bytes=400, index_interval_bytes=100), clock=FakeClock(),
                      clean_shutdown=False)
    assert lg.byte_offsets.views.start is None and not [n for n in os.listdir(d) if n.startswith(VIEW_PREFIX)]
    assert _read_all(lg, svc, first) == whole[first:]  # converted again, and stored again
    assert lg.byte_offsets.views.start == first
    lg.close()


def test_a_read_converts_for_a_bounded_time(tmp_path, monkeypatch) -> None:
    """A read stops converting after ``READ_CONVERT_S`` (at least one unit) and answers what it has, ending
    at a unit's end; the consumer goes on from there and gets everything."""
    import moldau.broker.kafka07.service as service

    lg = _log(str(tmp_path / "t-0"))
    svc = Kafka07Service(None, None, None, None)
    for i in range(5):
        _append(lg, [b"b%d-%d" % (i, j) * 5 for j in range(3)])
    views = _views(lg)
    monkeypatch.setattr(service, "READ_CONVERT_S", -1.0)
    with pytest.raises(service.ViewsPending):  # a read the store would take: converted off the loop
        svc.read(_Partition(lg), 0, 1 << 20)
    svc.convert_here(lg, 0)  # as when that made no progress: converted here, for a bounded time
    assert svc.read(_Partition(lg), 0, 1 << 20) == views[0][1]  # one unit per answer
    assert _read_all(lg, svc, 0, 1 << 20) == b"".join(v for _p, v in views)
    lg.close()


def test_first_read_indexes_and_converts_in_one_scan(tmp_path, monkeypatch) -> None:
    """A first read at byte 0 of a partition with no index waits while the index is built; the indexing jobs
    within ``VIEW_AHEAD_BYTES`` of the read build the views in the same scan and store them, so the read is
    then a pread (no ``ViewsPending``); past that the index is built without views."""
    import moldau.broker.kafka07.service as service
    import moldau.log.byte_offsets as byte_offsets

    lg = _log(str(tmp_path / "t-0"))
    svc = Kafka07Service(None, None, None, None)
    for i in range(40):
        _append(lg, [b"first-%d-%d " % (i, j) * (j + 1) for j in range(4)], codec=i % 3)
    with pytest.raises(IndexPending) as e:
        svc.read(_Partition(lg), 0, 1 << 20)
    assert e.value.views_from == 0
    while not e.value.step():
        pass
    idx = lg.byte_offsets
    whole = b"".join(v for _p, v in _views(lg))
    assert idx.views.start == 0 and idx.views.end == len(whole) == idx.end_position
    assert svc.read(_Partition(lg), 0, 1 << 20) == whole  # a pread of the store, nothing pending
    lg.close()

    monkeypatch.setattr(service, "INDEX_STEP_BYTES", 300)  # small jobs
    monkeypatch.setattr(byte_offsets, "VIEW_AHEAD_BYTES", 1000)
    lg = _log(str(tmp_path / "u-0"))
    for i in range(40):
        _append(lg, [b"ahead-%d-%d " % (i, j) * (j + 1) for j in range(4)], codec=i % 3)
    with pytest.raises(IndexPending) as e:
        svc.read(_Partition(lg), 0, 1 << 20)
    while not e.value.step():
        pass
    idx = lg.byte_offsets
    assert idx.views.start == 0 and 1000 <= idx.views.end < idx.end_position  # views stop past the bound
    whole = b"".join(v for _p, v in _views(lg))
    assert _read_all(lg, svc, 0, 1 << 20) == whole  # the rest converted by reads, as before
    lg.close()


def test_views_of_a_partition_read_recently_are_built_in_the_background(tmp_path) -> None:
    """``keep_indexes`` extends the index of a partition 0.7 consumers keep up with and stores the views of
    the new data in the same scan, so their next read is a pread; a partition not read for ``TAIL_VIEWS_S``
    gets its index extended only."""
    import asyncio
    from types import SimpleNamespace

    lg = _log(str(tmp_path / "t-0"))
    svc = Kafka07Service(SimpleNamespace(partitions={("t", 0): _Partition(lg)}), None, None, None)
    for i in range(5):
        _append(lg, [b"old-%d" % i * 9])
    _read_all(lg, svc, 0, 1 << 20)
    idx = lg.byte_offsets
    assert idx.views.end == idx.end_position

    async def keep() -> None:
        svc.keep_indexes()
        for _ in range(500):
            if idx.scanned >= lg.high_watermark and not svc._keeping:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("the index was not extended")

    for i in range(5):
        _append(lg, [b"new-%d" % i * 9, b"more-%d" % i], codec=i % 2)
    asyncio.run(keep())
    assert idx.views.end == idx.end_position == len(b"".join(v for _p, v in _views(lg)))
    svc._read_at.clear()  # nobody read it recently
    _append(lg, [b"late" * 9])
    asyncio.run(keep())
    assert idx.scanned == lg.high_watermark and idx.views.end < idx.end_position
    svc.close()
    lg.close()
