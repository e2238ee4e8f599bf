"""Byte offsets of the same messages stay the same across a graceful restart, a kill -9 and recovery,
segment rolls and a retention pass; OFFSETS -2 / -1 / by time answer offsets a client can fetch from."""

from __future__ import annotations

import gzip
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from moldau.protocol import kafka07 as k07

from .conftest import Broker07, message_payloads, wait_for, walk, walk_all


def _segments(b: Broker07, topic: str) -> list[Path]:
    return sorted((b.data_dir / f"{topic}-0").glob("*.log"))


def _produce_mixed(b: Broker07, topic: str, round_: int) -> int:
    """0.7 plain and gzip messages, then modern lz4 and uncompressed batches: returns the payload count."""
    n = 0
    with b.client07() as c:
        for i in range(6):
            c.produce(topic, 0, k07.encode_message(f"r{round_}-plain-{i}".encode() * 5))
            inner = b"".join(k07.encode_message(f"r{round_}-gz-{i}-{j}".encode() * 3) for j in range(3))
            c.produce(topic, 0, k07.encode_message(gzip.compress(inner), k07.GZIP))
            n += 4
        walk_all(c, topic, 0, n)  # 0.7 produce is unacknowledged: wait before the modern producer goes on
    p = Producer({"bootstrap.servers": b.bootstrap, "compression.type": "lz4", "linger.ms": 5})
    for i in range(10):
        p.produce(topic, f"r{round_}-lz4-{i}".encode() * 4, partition=0)
        if i % 3 == 2:
            p.flush(10)
    assert p.flush(10) == 0
    del p  # no client outlives the broker restarts that follow
    return n + 10


def test_byte_offsets_survive_restart_kill9_roll_and_retention(broker07_factory, topic07: str) -> None:
    b: Broker07 = broker07_factory({"log.segment.bytes": "500", "log.retention.check.interval.ms": "200"})
    count = _produce_mixed(b, topic07, 1)
    with b.client07() as c:
        before = walk_all(c, topic07, 0, count)
    assert len(_segments(b, topic07)) >= 3  # the log rolled several times
    offsets = [o for o, _m in before]
    assert offsets[0] == 0 and all(o2 == o1 + m.size for (o1, m), o2 in zip(before, offsets[1:]))

    b.restart()
    with b.client07() as c:
        assert walk(c, topic07, 0) == before

    b.kill9()
    b.start()
    with b.client07() as c:
        assert walk(c, topic07, 0) == before
        # appends after recovery continue at the end: the earlier offsets do not move
        end = before[-1][0] + before[-1][1].size
        assert c.offsets(topic07, 0, k07.LATEST_TIME, 1) == (0, [end])
    count2 = _produce_mixed(b, topic07, 2)
    with b.client07() as c:
        after = walk_all(c, topic07, 0, count + count2)
    assert after[: len(before)] == before and after[len(before)][0] == end

    # retention: keep about the last 3 segments' worth of bytes
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic07, incremental_configs=[
        ConfigEntry("retention.bytes", "1500", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(15)
    del admin
    with b.client07() as c:
        def earliest_moved() -> int | None:
            _err, offs = c.offsets(topic07, 0, k07.EARLIEST_TIME, 1)
            return offs[0] if offs and offs[0] > 0 else None

        first = wait_for(earliest_moved, what="a retention pass")
        remaining = walk(c, topic07, 0, first)
        by_offset = dict(after)
        assert remaining and all(by_offset[o] == m for o, m in remaining)  # same bytes at the same offsets
        assert remaining[-1] == after[-1]
        err, _ = c.fetch(topic07, 0, 0)
        assert err == k07.OFFSET_OUT_OF_RANGE  # the deleted start is gone, as in 0.7
    b.restart()
    with b.client07() as c:
        assert walk(c, topic07, 0, first) == remaining
        err, offs = c.offsets(topic07, 0, k07.LATEST_TIME, 10)
        # 0.7's -1 with max_number 10: the end, then the segment start offsets, newest first
        assert err == 0 and offs[0] == after[-1][0] + after[-1][1].size and offs[-1] == first
        assert offs == sorted(offs, reverse=True) and len(offs) == len(_segments(b, topic07)) + 1
        # by time: segment start offsets (newest first), each one a message boundary to fetch from
        err, offs = c.offsets(topic07, 0, int(time.time() * 1000) + 1000, 100)
        assert err == 0 and offs == sorted(offs, reverse=True) and len(offs) >= 2
        assert offs[-1] == first
        for o in offs[1:]:
            assert o in by_offset
            assert walk(c, topic07, 0, o) == [x for x in remaining if x[0] >= o]
        # a time before every segment: nothing
        assert c.offsets(topic07, 0, 1000, 10) == (0, [])
    assert message_payloads(remaining)[-1] == b"r2-lz4-9" * 4


def test_indexes_are_kept_in_the_background(broker07: Broker07, topic07: str) -> None:
    """Once a 0.7 client read a partition, its byte-offset index follows what modern producers append
    without another 0.7 read (so that neither a later read nor a retention pass has much to index)."""
    index = broker07.data_dir / f"{topic07}-0" / "kafka07.byteoffsets"
    with broker07.client07() as c:
        c.produce(topic07, 0, k07.encode_message(b"first"))
        walk_all(c, topic07, 0, 1)
    assert index.stat().st_size == 28  # one entry
    p = Producer({"bootstrap.servers": broker07.bootstrap, "linger.ms": 0})
    for i in range(5):
        p.produce(topic07, b"modern-%d" % i, partition=0)
        assert p.flush(10) == 0  # five batches
    del p
    wait_for(lambda: index.stat().st_size == 6 * 28, timeout=10, what="the index to follow the log")


def test_eager_views_are_built_before_any_0_7_read(broker07_factory, topic07: str) -> None:
    """``kafka07.views.eager``: a partition no 0.7 client ever read gets its byte-offset index and its stored
    0.7 views in the background as modern producers write, so the first 0.7 read is a read of stored views
    (the same bytes a converting read gives)."""
    b: Broker07 = broker07_factory({"kafka07.views.eager": "true"})
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(40):
        p.produce(topic07, b"eager-%d-" % i * (i % 7 + 1), partition=0)  # the topic is auto-created
        if i % 10 == 9:
            p.flush(10)
    assert p.flush(10) == 0
    del p
    part = b.data_dir / f"{topic07}-0"

    def views_bytes() -> int:
        return sum(f.stat().st_size for f in part.glob("kafka07.views.*"))

    payloads = [b"eager-%d-" % i * (i % 7 + 1) for i in range(40)]
    whole = sum(10 + len(v) for v in payloads)  # one uncompressed magic-1 message each
    wait_for(lambda: views_bytes() == whole, timeout=15, what="the views built in the background")
    with b.client07() as c:
        msgs = walk(c, topic07, 0)
    assert message_payloads(msgs) == payloads
    assert views_bytes() == whole  # the read found them all stored
