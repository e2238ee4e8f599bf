"""The log cleaner of a broker that serves Kafka 0.7 (``LogCleaner.kafka07_indexes``, set by a KAFKA07
listener) indexes a compacted log before it cleans it, so that its 0.7 byte positions are sums of the view
sizes of the batches as they were written, on every replica, whoever read it first and whatever each
replica's cleaner removed (no broker: a LogManager with an injected clock)."""

from __future__ import annotations

from moldau.broker.kafka07.service import IndexPending, Kafka07Service
from moldau.log import LogConfig, LogManager, PartitionLog
from moldau.protocol import kafka07 as k07
from moldau.protocol.records import BatchBuilder, split_batches

from .test_byte_offset_index import FakeClock, _read_all

CFG = LogConfig(cleanup_policy=("compact",), segment_bytes=1024, index_interval_bytes=100)


def _fill(lg: PartitionLog) -> list[tuple[int, bytes]]:
    """Keyed rounds (uncompressed and gzip batches, small and larger values); the 0.7 view of every batch as
    written, at its byte position counted from byte 0."""
    for rnd in range(12):
        b = BatchBuilder(compression=1 if rnd % 4 == 3 else 0)
        for k in range(5):
            v = b"r%dk%d" % (rnd, k) if k % 2 else b"round-%d-key-%d-" % (rnd, k) * 3
            b.append(1_700_000_000_000 + rnd, b"key-%d" % k, v)
        buf = bytearray(b.build(0))
        lg.append(buf, split_batches(buf), 1_700_000_000_000)
        lg.high_watermark = lg.log_end_offset
    out = []
    pos = 0
    rr = lg.read(0, 1 << 30)
    for chunk in rr.chunks:
        for p, h in split_batches(bytes(chunk)):
            v = k07.batch_to_message_set(bytes(chunk), p, h)
            out.append((pos, v))
            pos += len(v)
    return out


def _manager(tmp_path, name: str) -> LogManager:
    return LogManager([str(tmp_path / name)], CFG, FakeClock(), cleaner_backoff_ms=0)


def _messages(data: bytes) -> list[tuple[int, k07.Message07]]:
    out = []
    pos = 0
    for m in k07.parse_message_set(data):
        out.append((pos, m))
        pos += m.size
    return out


def test_the_cleaner_indexes_a_compacted_log_before_cleaning_it(tmp_path) -> None:
    lm = _manager(tmp_path, "a")
    lm.cleaner.kafka07_indexes = True
    lg = lm.create("t", 0, CFG)
    written = _fill(lg)
    original = _messages(b"".join(v for _p, v in written))
    assert lg.byte_offsets is None  # nobody read it with 0.7
    lm.cleaner.tick(1_700_000_000_000)
    assert lm.cleaner.wait(0) is None and lg.byte_offsets is not None  # no pass; an empty index instead
    assert lg.byte_offsets.scanned == 0
    e = IndexPending(lg)
    while not e.step():  # what the listener's background indexing runs off the loop
        pass
    lm.cleaner.tick(1_700_000_000_000)
    stats = lm.cleaner.wait(30)
    assert stats is not None and stats.swapped and stats.records_retained < stats.records_read
    svc = Kafka07Service(None, None, None, None)
    view = _messages(_read_all(lg, svc, 0, 1 << 20))
    by_pos = dict(original)
    ends = {p + m.size for p, m in original}
    assert view != original
    for pos, m in view:  # every unit starts and ends where messages did; survivors keep their bytes
        assert pos in by_pos and pos + m.size in ends
        if m.codec == k07.NONE:
            assert m == by_pos[pos]
    assert sum(m.size for _p, m in view) == sum(m.size for _p, m in original)
    lm.close()

    # the same data, cleaned by a broker without the 0.7 listener and indexed afterwards: other positions
    lm = _manager(tmp_path, "b")
    lg = lm.create("t", 0, CFG)
    _fill(lg)
    assert lm.cleaner.clean_log(lg) is not None
    assert sum(m.size for _p, m in _messages(_read_all(lg, svc, 0, 1 << 20))) < sum(
        m.size for _p, m in original)
    lm.close()

    # clean_log (tools, tests) indexes on the spot
    lm = _manager(tmp_path, "c")
    lm.cleaner.kafka07_indexes = True
    lg = lm.create("t", 0, CFG)
    _fill(lg)
    assert lm.cleaner.clean_log(lg) is not None
    assert [(p, m) for p, m in _messages(_read_all(lg, svc, 0, 1 << 20))] == view
    lm.close()


def test_internal_topics_are_cleaned_without_an_index(tmp_path) -> None:
    """Internal topics (``__`` names) are not held back for 0.7 byte offsets: cleaned at once, no index."""
    lm = _manager(tmp_path, "i")
    lm.cleaner.kafka07_indexes = True
    lg = lm.create("__consumer_offsets", 0, CFG)
    _fill(lg)
    lm.cleaner.tick(1_700_000_000_000)
    stats = lm.cleaner.wait(30)
    assert stats is not None and stats.swapped and lg.byte_offsets is None
    lm.close()
